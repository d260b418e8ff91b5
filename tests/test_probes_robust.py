"""Probes on unusual but valid models and inputs: correct results or a clear ValueError."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import foreign_model

from probes import merged_weight, stable_rank, weight_stable_ranks


def test_rotary_model_has_no_w_pos_and_the_rest_is_ranked() -> None:
    model = foreign_model(positional_embedding_type="rotary", rotary_dim=8)
    frame = weight_stable_ranks(model)
    assert "W_pos" not in set(frame["name"])
    assert len(frame) == 2 + 2 * 6  # W_E, W_U and 6 per block
    with pytest.raises(ValueError, match="W_pos does not exist: the model's positional embedding is 'rotary'"):
        merged_weight(model, "W_pos")


@pytest.mark.parametrize("layer", [1, 1.0, np.int64(1), torch.tensor(1)])
def test_integer_like_layer_indices_are_accepted(layer: object) -> None:
    model = foreign_model()
    torch.testing.assert_close(merged_weight(model, "W_Q", layer), merged_weight(model, "W_Q", 1))


@pytest.mark.parametrize("layer", [1.5, True, "1", 2, -1, None])
def test_other_layer_indices_are_refused_naming_the_range(layer: object) -> None:
    with pytest.raises(ValueError, match=r"layer must be an integer in 0\.\.1 for W_Q"):
        merged_weight(foreign_model(), "W_Q", layer)


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), float("-inf")])
def test_stable_rank_refuses_non_finite_matrices(bad: float) -> None:
    matrix = torch.ones(3, 3)
    matrix[1, 2] = bad
    with pytest.raises(ValueError, match="NaN or infinite entries"):
        stable_rank(matrix)


def test_attention_only_model_is_ranked_without_mlp_weights() -> None:
    frame = weight_stable_ranks(foreign_model(attn_only=True))
    assert not {"W_in", "W_out"} & set(frame["name"]) and len(frame) == 3 + 2 * 4


def test_one_hook_name_given_as_a_string_is_that_name() -> None:
    from probes import masked_run

    model = foreign_model()
    tokens = torch.randint(20, 100, (3, 9))
    run = masked_run(model, tokens, source_positions=[0, 1, 2], names="blocks.1.hook_resid_post")
    assert list(run.cache) == ["blocks.1.hook_resid_post"]
