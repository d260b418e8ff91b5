"""Cosine-similarity heatmaps (probes.similarity) against hand computations and run_with_cache."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import foreign_model

from probes import (
    block_score,
    cosine_similarity_matrix,
    equal_mask,
    input_grid,
    plot_similarity,
    residual_similarity,
    value_similarity,
)


def test_block_score_of_a_constructed_example_equals_the_hand_value():
    vectors = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [-1.0, 0.0]])
    mask = equal_mask(["a", "a", "b", "b"])
    # off-diagonal equal cells: (0,1) = 1/sqrt2, (2,3) = 0; others: (0,2) = 0, (0,3) = -1,
    # (1,2) = 1/sqrt2, (1,3) = -1/sqrt2; each counted twice (symmetric), so the means are:
    hand = (1 / math.sqrt(2) + 0) / 2 - (0 - 1 + 1 / math.sqrt(2) - 1 / math.sqrt(2)) / 4
    assert block_score(cosine_similarity_matrix(vectors), mask) == pytest.approx(hand)
    assert hand == pytest.approx(0.6035533905932737)


def test_block_score_needs_both_kinds_of_cells():
    with pytest.raises(ValueError, match="both kinds"):
        block_score(torch.eye(3), equal_mask([1, 2, 3]))
    with pytest.raises(ValueError, match="square"):
        block_score(torch.ones(2, 3), torch.ones(2, 3, dtype=torch.bool))


def test_input_grid_layout():
    grid = input_grid(keys=[30, 31, 32], pairs=[(3, 3), (2, 2)], key_position=4, seed=5)
    assert grid.tokens.shape == (6, 9)
    assert grid.keys.tolist() == [30, 31, 32, 30, 31, 32]  # pair-major
    assert grid.anchor_pairs.tolist() == [[3, 3]] * 3 + [[2, 2]] * 3
    assert grid.tokens[:, 5].tolist() == [3, 3, 3, 2, 2, 2] and grid.tokens[:, 6].tolist() == [3, 3, 3, 2, 2, 2]
    assert grid.targets.tolist() == [26, 27, 28, 32, 33, 34]
    noise = grid.tokens[:, [0, 1, 2, 3, 7, 8]]
    assert (noise == noise[0]).all()  # one shared noise row
    with pytest.raises(ValueError, match="key_position"):
        input_grid([30], [(1, 2)], key_position=7)
    with pytest.raises(ValueError, match="anchor"):
        input_grid([30], [(1, 5)])
    with pytest.raises(ValueError, match="keys"):
        input_grid([10], [(1, 2)])


def test_residual_similarity_matches_run_with_cache():
    model = foreign_model(d_model=16, n_heads=4, d_head=4)
    grid = input_grid(keys=range(30, 41), pairs=[(3, 3), (2, 2), (1, 2)], seed=0)
    result = residual_similarity(model, grid, layer=1)
    _, cache = model.run_with_cache(grid.tokens)
    vectors = cache["blocks.1.hook_resid_mid"][:, -1].double()
    expected = F.cosine_similarity(vectors[:, None], vectors[None], dim=-1)
    torch.testing.assert_close(result.similarity, expected)
    f = grid.targets
    assert torch.equal(result.equal_target, f[:, None] == f[None, :])
    assert result.score == pytest.approx(block_score(expected, f[:, None] == f[None, :]))
    other = residual_similarity(model, grid, layer=0, position="key")
    v0 = cache["blocks.0.hook_resid_mid"][:, 2].double()
    torch.testing.assert_close(other.similarity, F.cosine_similarity(v0[:, None], v0[None], dim=-1))
    fig = plot_similarity(result)
    marked = fig.data[1]
    assert len(marked.x) == int(result.equal_target.sum()) - len(grid)  # off-diagonal equal cells


def test_value_similarity_uses_first_anchor_and_single_anchor_target():
    model = foreign_model(d_model=16, n_heads=4, d_head=4)
    grid = input_grid(keys=range(30, 40), pairs=[(1, 4), (2, 4), (3, 4), (4, 4)], key_position=1, seed=0)
    result = value_similarity(model, grid)
    _, cache = model.run_with_cache(grid.tokens)
    v = cache["blocks.1.attn.hook_v"][:, 2].reshape(len(grid), -1).double()  # first anchor at 1 + 1
    torch.testing.assert_close(result.similarity, F.cosine_similarity(v[:, None], v[None], dim=-1))
    g = grid.keys + torch.tensor([{1: 5, 2: 1, 3: -2, 4: -8}[a] for a in grid.anchor_pairs[:, 0].tolist()])
    assert torch.equal(result.equal_target, g[:, None] == g[None, :])
    assert result.inputs["target"].tolist() == g.tolist()


def test_bad_layer_and_position():
    model = foreign_model(d_model=16, n_heads=4, d_head=4)
    grid = input_grid(keys=range(30, 36), pairs=[(3, 3), (2, 2)], seed=0)
    with pytest.raises(ValueError, match="layer=2"):
        residual_similarity(model, grid, layer=2)
    with pytest.raises(ValueError, match="position=9"):
        residual_similarity(model, grid, position=9)
    with pytest.raises(ValueError, match="position must be"):
        value_similarity(model, grid, position="third_anchor")
    with pytest.raises(ValueError, match="2-D"):
        cosine_similarity_matrix(torch.ones(3))
    # no two inputs share a target (x - 4 = y + 2 needs y = x - 6): the score is undefined
    assert math.isnan(residual_similarity(model, grid).score)
