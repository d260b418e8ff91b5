"""Attention masking after softmax (probes.masking), checked against independent computations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import foreign_model, n_hooks
from transformer_lens import HookedTransformer

from probes import (
    candidate_labelings,
    cluster_scores,
    mask_key,
    mask_second_anchor,
    masked_run,
    plot_projection,
    project,
)
from probes.masking import source_mask
from training import make_dataset


@pytest.fixture
def model() -> HookedTransformer:
    return foreign_model()


@pytest.fixture
def tokens() -> torch.Tensor:
    return torch.randint(20, 100, (5, 9), generator=torch.Generator().manual_seed(1))


def test_masking_nothing_equals_plain_run(model, tokens):
    plain = model(tokens)
    assert torch.equal(masked_run(model, tokens, []).logits, plain)
    # a source after every masked query is never attended to (causal): nothing changes either
    assert torch.equal(masked_run(model, tokens, 6, query_positions=[2, 3]).logits, plain)
    assert n_hooks(model) == 0


def test_mask_without_renormalizing_equals_zeroing_values(model, tokens):
    sources = torch.tensor([0, 3, 5, 8, 2])  # one per sample

    def zero_v(v, hook):  # [batch, pos, head, d_head]
        v = v.clone()
        v[torch.arange(len(sources)), sources] = 0.0
        return v

    expected = model.run_with_hooks(tokens, fwd_hooks=[(lambda name: name.endswith("attn.hook_v"), zero_v)])
    got = masked_run(model, tokens, sources).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(got, model(tokens), atol=1e-3)  # the mask did something


def test_masked_pattern_is_zero_at_sources_and_untouched_elsewhere(model, tokens):
    names = [f"blocks.{l}.attn.hook_pattern" for l in range(2)]
    _, plain = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    run = masked_run(model, tokens, 4, layers=1, heads=0, names_filter=names)
    masked = run.cache["blocks.1.attn.hook_pattern"]
    assert torch.all(masked[:, 0, 4:, 4] == 0)
    torch.testing.assert_close(masked[:, 1], plain["blocks.1.attn.hook_pattern"][:, 1])  # other head
    torch.testing.assert_close(
        masked[:, 0, :, :4], plain["blocks.1.attn.hook_pattern"][:, 0, :, :4]
    )  # not renormalized
    torch.testing.assert_close(
        run.cache["blocks.0.attn.hook_pattern"], plain["blocks.0.attn.hook_pattern"]
    )  # other layer
    renorm = masked_run(model, tokens, 4, layers=1, heads=0, renormalize=True, names_filter=names).cache[
        "blocks.1.attn.hook_pattern"
    ]
    torch.testing.assert_close(renorm[:, 0].sum(-1), torch.ones(5, 9))


def _last_logit_change(model, tokens, position, **kwargs) -> float:
    changed = tokens.clone()
    changed[:, position] = torch.where(changed[:, position] == 50, 51, 50)
    a = masked_run(model, tokens, position, **kwargs).logits
    b = masked_run(model, changed, position, **kwargs).logits
    return float((a[:, -1] - b[:, -1]).abs().max())


def test_renormalized_mask_removes_the_token_from_the_last_position(model, tokens):
    s = 3
    # The plain run and the unrenormalized mask (denominator keeps the masked key) depend on token s.
    changed = tokens.clone()
    changed[:, s] = torch.where(changed[:, s] == 50, 51, 50)
    with torch.no_grad():
        assert float((model(tokens)[:, -1] - model(changed)[:, -1]).abs().max()) > 1e-3
    assert _last_logit_change(model, tokens, s) > 1e-3
    # Renormalized, masked for every query in every layer: the last position cannot see it.
    assert _last_logit_change(model, tokens, s, renormalize=True) < 1e-5
    # Masking the queries that could carry it onward (every later position) is enough ...
    assert _last_logit_change(model, tokens, s, renormalize=True, query_positions=range(s + 1, 9)) < 1e-5
    # ... but masking only the last query is not: layer 0 moves it to positions s+1..7 first.
    assert _last_logit_change(model, tokens, s, renormalize=True, query_positions=8) > 1e-3
    # The token still lives in its own residual stream: position s's logits change.
    a = masked_run(model, tokens, s, renormalize=True).logits[:, s]
    b = masked_run(model, changed, s, renormalize=True).logits[:, s]
    assert float((a - b).abs().max()) > 1e-3


def test_source_position_formats():
    expected = torch.zeros(3, 9, dtype=torch.bool)
    expected[0, 1] = expected[1, 2] = expected[2, 2] = True
    assert torch.equal(source_mask(torch.tensor([1, 2, 2]), 3, 9), expected)
    assert torch.equal(source_mask(np.array([1, 2, 2]), 3, 9), expected)
    assert torch.equal(source_mask([[1], [2], [2]], 3, 9), expected)
    expected[0, 5] = True
    assert torch.equal(source_mask([[1, 5], [2], [2]], 3, 9), expected)
    assert torch.equal(source_mask(torch.tensor([[1, 5], [2, 2], [2, 2]]), 3, 9), expected)
    assert torch.equal(
        source_mask(4, 3, 9), torch.zeros(3, 9, dtype=torch.bool).index_fill_(1, torch.tensor([4]), True)
    )
    same = torch.zeros(3, 9, dtype=torch.bool).index_fill_(1, torch.tensor([2, 3]), True)
    assert torch.equal(source_mask([2, 3], 3, 9), same) and torch.equal(
        source_mask([2, 3], 5, 9)[4], same[0]
    )  # a flat list: every sample, any batch


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"source_positions": 9}, "source_positions=9"),
        (
            {"source_positions": -10},
            r"source_positions=-10 is not a position of the 9-token sequence: use 0\.\.8 \(or -9\.\.-1 from the end\)",
        ),
        ({"source_positions": [[1], [2]]}, "one list per sample"),
        ({"source_positions": torch.zeros(2, dtype=torch.long)}, r"\[batch=5\]"),
        ({"source_positions": 1, "layers": 2}, "layers=2"),
        ({"source_positions": 1, "heads": [0, 2]}, "heads=2"),
        ({"source_positions": 1, "query_positions": 9}, "query_positions=9"),
        ({"source_positions": 1, "names_filter": ["blocks.7.hook_resid_mid"]}, "unknown hook name"),
    ],
)
def test_bad_input_is_a_clear_value_error(model, tokens, kwargs, message):
    with pytest.raises(ValueError, match=message):
        masked_run(model, tokens, **kwargs)
    assert n_hooks(model) == 0


def test_no_hooks_remain_when_the_forward_pass_raises(model, tokens, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(model.blocks[1].mlp, "forward", boom)
    with pytest.raises(RuntimeError, match="boom"):
        masked_run(model, tokens, 3, names_filter=["blocks.0.hook_resid_post"])
    assert n_hooks(model) == 0


def test_key_and_second_anchor_helpers_use_key_positions(model):
    data = make_dataset("symmetric", "train", n=12, seed=0)
    key = mask_key(model, data)
    assert torch.equal(key.mask[:, -1], torch.nn.functional.one_hot(data.key_positions, 9).bool())
    torch.testing.assert_close(key.logits, masked_run(model, data.tokens, data.key_positions).logits)
    second = mask_second_anchor(model, data, names_filter=["blocks.1.hook_resid_mid"])
    assert torch.equal(second.mask[:, -1], torch.nn.functional.one_hot(data.key_positions + 2, 9).bool())
    assert second.last_position("blocks.1.hook_resid_mid").shape == (12, 16)
    assert key.last_position("blocks.1.hook_resid_post").shape == (12, 16)
    with pytest.raises(ValueError, match="was not captured"):
        key.last_position("blocks.0.hook_resid_mid")


def test_candidate_labelings():
    data = make_dataset("symmetric", "train", n=30, seed=0)
    labels = candidate_labelings(data)
    row = labels.iloc[0]
    a1, a2 = data.anchor_pairs[0].tolist()
    shifts = {1: 5, 2: 1, 3: -2, 4: -8}
    assert row["ordered_pair"] == f"{a1},{a2}" and row["unordered_pair"] == f"{min(a1, a2)},{max(a1, a2)}"
    assert row["composite_shift"] == shifts[a1] + shifts[a2]
    assert row["single_anchor_target"] == int(data.keys[0]) + shifts[a1]


def test_cluster_scores_tell_merged_symmetric_pairs_apart():
    # Vectors clustered by the unordered pair: (1,2) and (2,1) share a centre.
    gen = np.random.default_rng(0)
    pairs = [(1, 2), (2, 1), (1, 3), (3, 1), (2, 4), (4, 2)] * 10
    centres = {frozenset(p): gen.normal(size=8) * 10 for p in pairs}
    vectors = np.stack([centres[frozenset(p)] + gen.normal(size=8) * 0.1 for p in pairs])
    labels = pd.DataFrame(
        {
            "ordered_pair": [f"{a},{b}" for a, b in pairs],
            "unordered_pair": [f"{min(a, b)},{max(a, b)}" for a, b in pairs],
            "composite_shift": [{1: 5, 2: 1, 3: -2, 4: -8}[a] + {1: 5, 2: 1, 3: -2, 4: -8}[b] for a, b in pairs],
        }
    )
    scores = cluster_scores(vectors, labels).set_index("labeling")
    assert scores.loc["unordered_pair", "ari"] == pytest.approx(1.0)
    assert scores.loc["unordered_pair", "silhouette"] > 0.9
    assert scores.loc["ordered_pair", "ari"] < 0.8
    assert scores.loc["ordered_pair", "silhouette"] < 0.1
    agglo = cluster_scores(vectors, labels, method="agglomerative").set_index("labeling")
    assert agglo.loc["unordered_pair", "ari"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no column"):
        cluster_scores(vectors, labels, columns=["nope"])


def test_projection_frames(model):
    data = make_dataset("symmetric", "train", n=40, seed=0)
    vectors = mask_key(model, data).last_position(f"blocks.{model.cfg.n_layers - 1}.hook_resid_post")
    labels = candidate_labelings(data)
    tsne = project(vectors, "tsne", perplexity=12, labels=labels)
    assert list(tsne.columns[:2]) == ["x", "y"] and len(tsne) == 40 and "ordered_pair" in tsne
    pca = project(vectors, "pca")
    centered = vectors.double() - vectors.double().mean(0)
    top = torch.linalg.svdvals(centered)[:2] ** 2 / 39
    np.testing.assert_allclose(np.sort(pca[["x", "y"]].var().to_numpy())[::-1], top.numpy(), rtol=1e-6)
    assert plot_projection(tsne).data
    pd.testing.assert_frame_equal(
        project(vectors, "tsne", perplexity=12, labels=labels), tsne
    )  # seeded: the same every call
    assert project(vectors, "tsne").attrs["perplexity"] == 12.0  # the journal's, where 40 inputs allow it
    for n, perplexity in ((12, 11 / 3), (5, 4 / 3), (3, 1.0)):  # fewer than 37 inputs: (n - 1) / 3, at least 1
        small = project(vectors[:n], "tsne")
        assert (
            small.attrs["perplexity"] == pytest.approx(perplexity)
            and len(small) == n
            and np.isfinite(small[["x", "y"]].to_numpy()).all()
        )
    with pytest.raises(
        ValueError, match=r"perplexity must be in \(0, n_samples=10\), got 12\.0; .* or perplexity=None for 3"
    ):
        project(vectors[:10], "tsne", perplexity=12)
    with pytest.raises(ValueError, match="method"):
        project(vectors, "umap")
