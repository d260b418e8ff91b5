"""The five calls a TransformerLens user first wrote against the probes (issue 57), as written,
each checked against what the model computes without the probe's convenience: tokens where a
dataset was taken, a cache where only activations are needed, a masked run indexed like logits,
``k=`` for the best paths, the result classes exported with the attribute the docs name."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from helpers import foreign_model

import probes
from training import make_dataset


@pytest.fixture(scope="module")
def model():  # noqa: ANN201 - a HookedTransformer
    return foreign_model(n_layers=2, d_model=16, n_heads=2).eval()


@pytest.fixture(scope="module")
def data():  # noqa: ANN201 - an AnchorDataset
    return make_dataset("symmetric", "id_test", n=12, seed=3)


def test_mask_key_takes_the_tokens_a_user_has(model, data) -> None:
    tokens = data.tokens  # what a TransformerLens user holds: token ids [batch, 9]
    masked = probes.mask_key(model, tokens)
    by_position = probes.masked_run(model, tokens, data.key_positions)  # the key positions the dataset drew
    assert torch.equal(masked.logits, by_position.logits)
    assert torch.equal(probes.anchor_positions(tokens), data.key_positions)
    second = probes.mask_second_anchor(model, tokens.tolist())  # a nested list too
    assert torch.equal(second.logits, probes.masked_run(model, tokens, data.key_positions + 2).logits)


def test_mask_key_refuses_tokens_without_an_anchor_pair_by_row(model, data) -> None:
    tokens = data.tokens.clone()
    tokens[5] = 50  # noise only: no key to find
    with pytest.raises(ValueError, match=r"tokens row 5 .* has no two adjacent anchor tokens \(1 of 12 rows alike\)"):
        probes.mask_key(model, tokens)


def test_a_masked_run_is_indexed_like_logits(model, data) -> None:
    masked = probes.mask_key(model, data)
    assert torch.equal(masked[:, -1], masked.logits[:, -1]) and masked.shape == masked.logits.shape
    assert torch.equal(masked[:, -1].argmax(-1), masked.last_position().argmax(-1))
    with pytest.raises(KeyError, match=r"masked.cache\[\('resid_post', 1\)\]"):
        masked["resid_post", 1]


def test_information_flow_takes_an_activation_cache(model, data) -> None:
    tokens = data.tokens[:6]
    _, cache = model.run_with_cache(tokens)
    flow = probes.information_flow(model, cache)
    pd.testing.assert_frame_equal(flow, probes.information_flow(model, tokens))
    pattern = cache["pattern", 1]  # [batch, head, query, source]: the mean over inputs, by hand
    row = flow[(flow.layer == 1) & (flow.attn_head == "1") & (flow["query"] == 8) & (flow.source == 3)].iloc[0]
    assert row.weight == pytest.approx(float(pattern[:, 1, 8, 3].double().mean()), abs=1e-7)
    assert torch.equal(probes.attention_patterns(model, cache)[1], pattern.cpu())
    one = probes.information_flow(
        model, model.run_with_cache(tokens[:1], remove_batch_dim=True)[1]
    )  # [head, query, source] patterns
    pd.testing.assert_frame_equal(one, probes.information_flow(model, tokens[:1]))
    _, partial = model.run_with_cache(tokens, names_filter="blocks.0.attn.hook_pattern")
    with pytest.raises(ValueError, match=r"the cache holds no blocks.1.attn.hook_pattern .*run_with_cache"):
        probes.information_flow(model, partial)


def test_top_paths_takes_k_and_the_edges_keep_head_free(model, data) -> None:
    flow = probes.information_flow(model, data.tokens[:6])
    paths = probes.top_paths(flow, k=3)
    with pytest.warns(DeprecationWarning, match=r"top_paths\(top=...\) is deprecated .*pass k="):
        assert len(paths) <= 3 and paths.equals(probes.top_paths(flow, top=3))  # the earlier name still works
    scores = {(a, b, 8): _weight(flow, 0, b, a) * _weight(flow, 1, 8, b) for a in range(9) for b in range(a, 9)}
    passing = {
        path: score
        for path, score in scores.items()
        if _weight(flow, 0, path[1], path[0]) >= 0.05 and _weight(flow, 1, 8, path[1]) >= 0.05
    }
    assert paths["path"].iloc[0] == max(passing, key=passing.get)
    assert callable(flow.head) and flow.head(2).shape == (2, 6)  # DataFrame.head, not a column
    old = flow.rename(columns={"attn_head": "head"})  # a table written before the rename
    assert probes.top_paths(old, k=3).equals(paths)
    with pytest.raises(ValueError, match="both k= and top="):
        probes.top_paths(flow, k=2, top=3)


def _weight(flow: pd.DataFrame, layer: int, query: int, source: int) -> float:
    row = flow[(flow.layer == layer) & (flow.attn_head == "sum") & (flow["query"] == query) & (flow.source == source)]
    return float(row.weight.iloc[0])


def test_similarity_result_is_exported_with_the_block_score(model, data) -> None:
    sim = probes.residual_similarity(model, data.tokens, labels=data.targets % 3)
    assert isinstance(sim, probes.SimilarityResult)
    assert sim.score == pytest.approx(probes.block_score(sim.similarity, probes.equal_mask(data.targets % 3)))


def test_activation_stable_ranks_read_an_activation_cache(model, data) -> None:
    _, cache = model.run_with_cache(data.tokens)
    from_cache = probes.activation_stable_ranks(model, cache, "resid_post", position="last")
    pd.testing.assert_frame_equal(
        from_cache, probes.activation_stable_ranks(model, data.tokens, "resid_post", position="last")
    )
    last = cache["resid_post", 1][:, -1].double()  # by hand: ||A||_F^2 / ||A||_2^2 of the last positions
    by_hand = float(torch.linalg.matrix_norm(last) ** 2 / torch.linalg.matrix_norm(last, ord=2) ** 2)
    assert from_cache.set_index("name").loc["blocks.1.hook_resid_post", "stable_rank"] == pytest.approx(
        by_hand, rel=1e-4
    )
    _, partial = model.run_with_cache(data.tokens, names_filter="blocks.0.hook_resid_post")
    with pytest.raises(ValueError, match="the cache holds no blocks.1.hook_resid_post"):
        probes.activation_stable_ranks(model, partial, "resid_post")
