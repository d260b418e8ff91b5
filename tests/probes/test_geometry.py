"""Condensation, embedding PCA and spectra (probes.geometry), and stable ranks of weights and activations (probes.rank)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import foreign_model

from probes import (
    activation_stable_ranks,
    condensation,
    embedding_pca,
    merged_weight,
    plot_condensation,
    plot_eigenvalues,
    plot_embedding_pca,
    plot_spectra,
    project,
    singular_value_spectra,
    stable_rank,
    weight_stable_ranks,
)
from probes.rank import singular_values


def _partition(groups: np.ndarray, rows: np.ndarray) -> set[frozenset[int]]:
    """The groups as sets of original row ids (``rows[i]`` is the original id of row i)."""
    return {frozenset(rows[groups == g].tolist()) for g in np.unique(groups)}


def test_two_directions_give_two_groups_in_any_row_order():
    gen = torch.Generator().manual_seed(0)
    directions = torch.randn(2, 16, generator=gen)
    which = torch.tensor([0, 1, 1, 0, 0, 1, 0, 0, 1, 0, 1, 0])  # 7 of direction 0, 5 of direction 1
    weight = directions[which] * torch.rand(12, 1, generator=gen).add(0.1)  # positive scales
    result = condensation(weight, threshold=0.7)
    assert result.n_groups == 2 and sorted(result.group_sizes) == [5, 7]
    assert _partition(result.groups, np.arange(12)) == {frozenset(np.flatnonzero(which == k).tolist()) for k in (0, 1)}
    for seed in range(3):
        perm = torch.randperm(12, generator=torch.Generator().manual_seed(seed)).numpy()
        shuffled = condensation(weight[perm], threshold=0.7)
        assert _partition(shuffled.groups, perm) == _partition(result.groups, np.arange(12))
        assert shuffled.group_sizes == result.group_sizes
    # the reordered matrix is block diagonal: 1 inside groups
    blocks = result.reordered
    assert np.allclose(blocks[:7, :7], 1.0) and np.allclose(blocks[7:, 7:], 1.0)
    assert plot_condensation(result).data


def test_order_independent_on_random_rows():
    weight = torch.randn(30, 8, generator=torch.Generator().manual_seed(3))
    base = condensation(weight, threshold=0.4)
    perm = np.random.default_rng(0).permutation(30)
    shuffled = condensation(weight[perm], threshold=0.4)
    assert _partition(shuffled.groups, perm) == _partition(base.groups, np.arange(30))


def test_threshold_extremes_and_query_neurons():
    weight = torch.randn(10, 5, generator=torch.Generator().manual_seed(1))
    assert condensation(weight, threshold=1.0).n_groups == 10  # nothing is identical
    assert condensation(weight, threshold=-1.0).n_groups == 1
    model = foreign_model(d_model=16, n_heads=2, d_head=8)
    w_q = merged_weight(model, "W_Q", 0).T
    assert w_q.shape == (2 * 8, 16)
    torch.testing.assert_close(w_q[8 + 3], model.W_Q[0, 1, :, 3])  # row h * d_head + i = head h, unit i
    assert condensation(w_q).similarity.shape == (16, 16)


@pytest.mark.parametrize("threshold", [1.5, -1.01, float("nan"), True])
def test_threshold_outside_range_is_rejected(threshold):
    with pytest.raises(ValueError, match="threshold"):
        condensation(torch.ones(3, 2), threshold=threshold)


def test_matrix_must_be_2d():
    with pytest.raises(ValueError, match="2-D"):
        condensation(torch.ones(2, 3, 4))
    with pytest.raises(ValueError, match="2-D"):
        stable_rank(torch.ones(5))


def test_embedding_pca_finds_an_ordinal_line():
    model = foreign_model(d_model=16, n_heads=2, d_head=8)
    tokens = torch.arange(20, 100)
    direction = torch.randn(16, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        model.embed.W_E[tokens] = (tokens.float() - 60)[:, None] * direction + 0.01 * torch.randn(80, 16)
    result = embedding_pca(model, tokens=range(20, 100))
    assert result.ordinal_score == pytest.approx(1.0) and result.ordinal_component == "pc1"
    assert result.explained_variance_ratio[0] > 0.99
    emb = model.W_E.detach()[tokens].double().numpy()
    np.testing.assert_allclose(
        result.eigenvalues, np.sort(np.linalg.eigvalsh(np.cov(emb, rowvar=False)))[::-1].clip(0), rtol=1e-8, atol=1e-12
    )
    assert result.coordinates["token"].tolist() == list(range(20, 100))
    assert plot_embedding_pca(result).data and plot_eigenvalues(result).data
    random = embedding_pca(foreign_model(d_model=16, n_heads=2, d_head=8), tokens=range(20, 100))
    assert len(embedding_pca(model).coordinates) == model.cfg.d_vocab  # the default: the whole vocabulary
    assert random.ordinal_score < 0.5
    with pytest.raises(ValueError, match="vocabulary"):
        embedding_pca(model, tokens=range(190, 210))


def _numpy_pca(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first two principal coordinates and variance ratios from numpy's SVD, each
    component's sign such that its largest loading is positive."""
    centred = array - array.mean(0)
    u, s, vt = np.linalg.svd(centred, full_matrices=False)
    signs = np.sign(vt[[0, 1], np.abs(vt[:2]).argmax(1)])
    return u[:, :2] * s[:2] * signs, s[:2] ** 2 / (s**2).sum()


def test_every_pca_is_numpys_svd_and_the_same_on_every_call():
    """Above 500 features scikit-learn's PCA turns randomized (two calls differed by 0.46 here); these stay exact."""
    model = foreign_model(n_layers=1, d_model=520, n_heads=4, d_head=130)  # 201 tokens x 520 features
    expected, ratios = _numpy_pca(model.W_E.detach().double().numpy())
    first, second = embedding_pca(model), embedding_pca(model)
    coordinates = first.coordinates[["pc1", "pc2"]].to_numpy()
    np.testing.assert_array_equal(coordinates, second.coordinates[["pc1", "pc2"]].to_numpy())
    np.testing.assert_allclose(coordinates, expected, rtol=0, atol=1e-9)
    np.testing.assert_allclose(first.explained_variance_ratio, ratios, rtol=1e-9)
    vectors = torch.randn(40, 600, generator=torch.Generator().manual_seed(0))  # 600 features
    expected, _ = _numpy_pca(vectors.double().numpy())
    frame = project(vectors, "pca")
    np.testing.assert_allclose(frame[["x", "y"]].to_numpy(), expected, rtol=0, atol=1e-9)
    pd.testing.assert_frame_equal(frame, project(vectors, "pca", seed=5))  # no randomness: the seed changes nothing


def test_activation_stable_ranks_equal_a_hand_computation():
    model = foreign_model(n_layers=2, d_model=16, n_heads=2, d_head=8)
    tokens = torch.randint(20, 100, (5, 9), generator=torch.Generator().manual_seed(0))
    _, cache = model.run_with_cache(tokens)

    def hand(matrix: torch.Tensor) -> tuple[float, float]:
        s = np.linalg.svd(matrix.detach().double().numpy(), compute_uv=False)
        return float((s**2).sum() / s[0] ** 2), float(s[0])

    table = activation_stable_ranks(model, tokens)  # the default: every layer's resid_post
    assert table["name"].tolist() == ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]
    row = table.iloc[1]
    rank, top = hand(cache["resid_post", 1].reshape(-1, 16))  # today's workaround, by hand
    assert (row["rows"], row["cols"]) == (45, 16)
    assert row["stable_rank"] == pytest.approx(rank, rel=1e-5) and row["spectral_norm"] == pytest.approx(top, rel=1e-5)
    z = activation_stable_ranks(model, tokens, ("z", 0)).iloc[0]  # [batch, pos, head, d_head]: heads merged
    assert (z["rows"], z["cols"]) == (45, 16) and z["stable_rank"] == pytest.approx(
        hand(cache["z", 0].reshape(45, 16))[0], rel=1e-5
    )
    pattern = activation_stable_ranks(model, tokens, "blocks.1.attn.hook_pattern").iloc[0]  # a row per (input, query)
    assert pattern["stable_rank"] == pytest.approx(
        hand(cache["pattern", 1].permute(0, 2, 1, 3).reshape(45, 18))[0], rel=1e-5
    )
    mask = torch.ones(5, 9, dtype=torch.long)
    mask[1, 6:] = 0
    with torch.no_grad():
        _, padded = model.run_with_cache(tokens, attention_mask=mask)
    real = padded["resid_mid", 0][mask.bool()]  # 42 real tokens
    row = activation_stable_ranks(model, tokens, ("resid_mid", 0), attention_mask=mask).iloc[0]
    assert row["rows"] == 42 and row["stable_rank"] == pytest.approx(hand(real)[0], rel=1e-5)
    last = activation_stable_ranks(model, tokens, lambda name: name == "blocks.1.hook_mlp_out", position="last").iloc[0]
    assert last["rows"] == 5 and last["stable_rank"] == pytest.approx(hand(cache["mlp_out", 1][:, -1])[0], rel=1e-5)
    with pytest.raises(ValueError, match="names_filter picks no hook point"):
        activation_stable_ranks(model, tokens, [])


def test_singular_value_spectra_match_svd():
    model = foreign_model(d_model=16, n_heads=2, d_head=8)
    spectra = singular_value_spectra(model)
    q = spectra[spectra["matrix"] == "L1 W_Q"]
    exact = torch.linalg.svdvals(merged_weight(model, "W_Q", 1).double()).numpy()
    np.testing.assert_allclose(
        q["singular_value"].to_numpy(), exact, rtol=1e-5, atol=1e-6 * exact[0]
    )  # one float32 SVD
    assert q["normalized"].iloc[0] == 1.0
    assert set(spectra["matrix"]) == {"W_E", "W_pos", "W_U"} | {
        f"L{l} {n}" for l in range(2) for n in ["W_Q", "W_K", "W_V", "W_O", "W_in", "W_out"]
    }
    assert plot_spectra(spectra).data


def test_stable_rank_properties():
    gen = torch.Generator().manual_seed(0)
    u, v = torch.randn(7, 1, generator=gen), torch.randn(1, 5, generator=gen)
    assert stable_rank(u @ v) == pytest.approx(1.0)
    q, _ = torch.linalg.qr(torch.randn(6, 6, generator=gen, dtype=torch.float64))
    assert stable_rank(q) == pytest.approx(6.0)
    w = torch.randn(8, 5, generator=gen, dtype=torch.float64)
    r, _ = torch.linalg.qr(torch.randn(8, 8, generator=gen, dtype=torch.float64))
    s = torch.linalg.svdvals(w)
    assert stable_rank(w) == pytest.approx(float((s**2).sum() / s[0] ** 2), rel=1e-5)
    assert stable_rank(3.7 * w) == pytest.approx(stable_rank(w), rel=1e-5)
    assert stable_rank(r @ w) == pytest.approx(stable_rank(w), rel=1e-5)
    r5, _ = torch.linalg.qr(torch.randn(5, 5, generator=gen, dtype=torch.float64))
    assert stable_rank(w @ r5) == pytest.approx(stable_rank(w), rel=1e-5)


@pytest.mark.parametrize(
    ("rows", "cols", "decay"), [(768, 3072, 0.0), (3072, 768, 0.0), (768, 2304, 8.0), (512, 64, 30.0)]
)
def test_float32_ranks_and_spectra_are_within_the_stated_tolerance_of_float64(rows: int, cols: int, decay: float):
    """GPT-2-shaped matrices, random and with singular values falling over `decay` e-folds (nearly low rank)."""
    gen = torch.Generator().manual_seed(rows + cols)
    k = min(rows, cols)
    u, _ = torch.linalg.qr(torch.randn(rows, k, generator=gen, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(cols, k, generator=gen, dtype=torch.float64))
    spectrum = (
        torch.exp(-decay * torch.linspace(0, 1, k, dtype=torch.float64))
        if decay
        else torch.linalg.svdvals(torch.randn(rows, cols, generator=gen, dtype=torch.float64))
    )
    w = (u * spectrum) @ v.T
    exact = np.linalg.svd(w.numpy(), compute_uv=False)
    assert stable_rank(w.float()) == pytest.approx(float((exact**2).sum() / exact[0] ** 2), rel=1e-5)
    np.testing.assert_allclose(singular_values(w.float()).double().numpy(), exact, rtol=0, atol=1e-5 * exact[0])


def test_weight_stable_ranks_table():
    model = foreign_model(d_model=16, n_heads=2, d_head=8)
    table = weight_stable_ranks(model)
    row = table[(table["name"] == "W_Q") & (table["layer"] == 0)].iloc[0]
    assert (row["rows"], row["cols"]) == (16, 16)
    assert row["stable_rank"] == pytest.approx(stable_rank(model.W_Q[0].permute(1, 0, 2).reshape(16, 16)))
    assert row["spectral_norm"] == pytest.approx(
        float(singular_values(model.W_Q[0].permute(1, 0, 2).reshape(16, 16))[0]), rel=1e-5
    )


def test_anti_aligned_neurons_condense_into_one_direction() -> None:
    """A rank-1 weight (stable rank 1) whose neurons point along +v or -v is one direction,
    as its spectrum says; the signed cosine would split it in two."""
    from probes import condensation, stable_rank

    gen = torch.Generator().manual_seed(0)
    v = torch.randn(32, generator=gen)
    signs = torch.tensor([1.0, -1.0] * 8)
    weight = signs[:, None] * torch.rand(16, 1, generator=gen).add(0.5) * v + 0.01 * torch.randn(16, 32, generator=gen)
    assert stable_rank(weight) < 1.01
    assert condensation(weight).n_groups == 1
    signed = condensation(weight, signed=True)
    assert signed.n_groups == 2 and signed.group_sizes == (8, 8) and signed.signed
    with pytest.raises(ValueError, match="signed must be True or False"):
        condensation(weight, signed="yes")  # type: ignore[arg-type]
