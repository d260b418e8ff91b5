"""Information flow (probes.flow) against run_with_cache and a brute-force path search."""

from __future__ import annotations

import itertools
import re
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import foreign_model, n_hooks
from transformer_lens import HookedTransformer

from probes import attention_html, information_flow, plot_flow, token_labels, top_paths
from probes.views import CircuitView, fix_self_closing_divs, offline_html, standalone_html


@pytest.fixture
def model() -> HookedTransformer:
    return foreign_model(n_layers=2, d_model=24, n_heads=3, d_head=8)


@pytest.fixture
def tokens() -> torch.Tensor:
    return torch.randint(20, 100, (6, 9), generator=torch.Generator().manual_seed(2))


def test_edges_equal_run_with_cache_patterns(model, tokens):
    edges = information_flow(model, tokens)
    _, cache = model.run_with_cache(tokens)
    assert len(edges) == 2 * (3 + 1) * 45
    for layer in range(2):
        pattern = cache["pattern", layer].double()  # [batch, head, q, k]
        for head in [0, 1, 2, "sum"]:
            values = pattern.sum(1) if head == "sum" else pattern[:, head]
            chosen = edges[(edges["layer"] == layer) & (edges["attn_head"].astype(str) == str(head))]
            q, k = chosen["query"].to_numpy(), chosen["source"].to_numpy()
            np.testing.assert_allclose(chosen["weight"].to_numpy(), values.mean(0).numpy()[q, k], atol=1e-6)
            np.testing.assert_allclose(chosen["std"].to_numpy(), values.std(0, correction=0).numpy()[q, k], atol=1e-6)
    sums = edges[edges["attn_head"] == "sum"].groupby(["layer", "query"])["weight"].sum()
    np.testing.assert_allclose(sums.to_numpy(), 3.0, atol=1e-5)  # each head's row sums to 1
    assert n_hooks(model) == 0


def test_chosen_layers_and_batches_equal_the_whole_unbatched_run(model, tokens):
    whole = information_flow(model, tokens)
    for layers, kept in (([1], [1]), (-1, [1]), ([0, -1], [0, 1]), (None, [0, 1])):
        expected = whole[whole["layer"].isin(kept)].reset_index(drop=True)
        for batch_size in (1, 4, 6, None):
            part = information_flow(model, tokens, layers=layers, batch_size=batch_size)
            pd.testing.assert_frame_equal(part, expected, check_exact=False, rtol=0, atol=1e-6)
    mask = torch.ones(6, 9, dtype=torch.long)
    mask[2, 5:] = mask[5, 7:] = 0  # padding in two inputs, which land in different batches
    padded = information_flow(model, tokens, attention_mask=mask)
    pd.testing.assert_frame_equal(
        information_flow(model, tokens, attention_mask=mask, batch_size=4), padded, check_exact=False, rtol=0, atol=1e-6
    )
    assert n_hooks(model) == 0
    with pytest.raises(
        ValueError, match=r"batch_size \(inputs per forward pass; None for all at once\) must be an integer >= 1, got 0"
    ):
        information_flow(model, tokens, batch_size=0)
    with pytest.raises(ValueError, match=r"layers=2 is not a layer of this 2-layer model"):
        information_flow(model, tokens, layers=[0, 2])
    last = information_flow(model, tokens, layers=1)
    for call in (
        lambda: top_paths(last),
        lambda: plot_flow(last),
    ):  # a path starts at the input tokens: layer 0 is needed
        with pytest.raises(
            ValueError,
            match=r"the edges hold layers \[1\], but a path runs from the input tokens through every layer 0\.\.1",
        ):
            call()


def test_single_input_has_zero_spread(model, tokens):
    edges = information_flow(model, tokens[0])
    assert (edges["std"] == 0).all()


def _toy_edges() -> pd.DataFrame:
    # 2 layers, 3 positions, hand-made causal weights [layer, query, source]
    w = np.zeros((2, 3, 3))
    w[0] = [[1.0, 0, 0], [0.3, 0.7, 0], [0.2, 0.5, 0.3]]
    w[1] = [[1.0, 0, 0], [0.6, 0.4, 0], [0.1, 0.6, 0.3]]
    rows = [
        {"layer": l, "attn_head": "sum", "source": k, "query": q, "weight": w[l, q, k], "std": 0.0}
        for l in range(2)
        for q in range(3)
        for k in range(q + 1)
    ]
    return pd.DataFrame(rows), w


def test_top_paths_rank_by_product_of_weights():
    edges, w = _toy_edges()
    brute = sorted(
        (((p0, p1, 2), w[0, p1, p0] * w[1, 2, p1]) for p0, p1 in itertools.product(range(3), repeat=2) if p0 <= p1),
        key=lambda item: -item[1],
    )
    paths = top_paths(edges, threshold=0.0, k=None)
    assert [tuple(p) for p in paths["path"]] == [p for p, _ in brute]
    np.testing.assert_allclose(paths["score"].to_numpy(), [s for _, s in brute])
    assert paths["path"].iloc[0] == (1, 1, 2) and paths["score"].iloc[0] == pytest.approx(0.7 * 0.6)
    kept = top_paths(edges, threshold=0.3, k=None)
    assert all(min(ws) >= 0.3 for ws in kept["weights"]) and len(kept) == 4
    assert top_paths(edges, threshold=0.0, k=2)["rank"].tolist() == [1, 2]
    assert top_paths(edges, threshold=0.0, query=1)["path"].tolist() == [
        (0, 0, 1),
        (1, 1, 1),
        (0, 1, 1),
    ]  # 0.6, 0.28, 0.12
    with pytest.raises(ValueError, match="query"):
        top_paths(edges, query=3)
    with pytest.raises(ValueError, match="threshold"):
        top_paths(edges, threshold=-0.1)
    with pytest.raises(ValueError, match="head"):
        top_paths(edges, head=7)


def test_flow_figure(model, tokens):
    edges = information_flow(model, tokens)
    paths = top_paths(edges, threshold=0.05)
    fig = plot_flow(edges, token_labels(tokens[0]), paths, n_highlight=2)
    highlighted = [t for t in fig.data if t.name and t.name.startswith("path")]
    assert len(highlighted) == 2
    assert list(fig.layout.xaxis.ticktext) == token_labels(tokens[0])
    with pytest.raises(ValueError, match="labels"):
        plot_flow(edges, ["a", "b"])


def test_attention_html_is_offline(model, tokens, tmp_path):
    path = tmp_path / "attention.html"
    view = attention_html(model, tokens[0], path)
    saved = path.read_text(encoding="utf-8")
    assert saved.startswith("<!DOCTYPE html>") and view.html().startswith("<!DOCTYPE html>")
    assert (
        str(view)
        == "CircuitView AttentionHeads 'Attention patterns' (6 heads, 9 tokens): .save(path) writes the page, .html() returns it"
    )
    assert not re.search(r"<script[^>]*\bsrc\s*=\s*[\"']?https?://", saved, flags=re.IGNORECASE)
    assert not re.search(r"""\bfrom\s*["']https?://""", saved)  # no ES-module import from a CDN
    assert saved.count("data-circuitsvis-bundle") == 1 and "var CircuitsVis=" in saved
    assert "CircuitsVis.render(" in saved and "L1H2" in saved
    assert not re.search(r"<div[^>]*/>", saved.split("<script", 1)[0])
    assert view.save(tmp_path / "again.html").read_text(encoding="utf-8").count("L1H2") == 1
    with pytest.raises(ValueError, match="one input"):
        attention_html(model, tokens, None)
    assert n_hooks(model) == 0


def test_the_view_carries_the_patterns(model, tokens):
    view = attention_html(model, tokens[0])
    _, cache = model.run_with_cache(tokens[:1])
    patterns = torch.stack([cache["pattern", layer][0] for layer in range(2)]).reshape(6, 9, 9)
    np.testing.assert_allclose(view.props["attention"], patterns.numpy(), atol=5e-5)  # the page rounds to 4 decimals
    assert view.props["attentionHeadNames"] == [f"L{l}H{h}" for l in range(2) for h in range(3)]
    assert view.props["tokens"] == token_labels(tokens[0])


class FakeShell:
    """Stands for the IPython shell of one notebook."""


def test_a_notebook_gets_the_bundle_once(model, tokens, monkeypatch):
    import probes.views

    shell = FakeShell()
    monkeypatch.setattr(probes.views, "_notebook_shell", lambda: shell)
    first, second = attention_html(model, tokens[0]), attention_html(model, tokens[1])
    outputs = [first._repr_html_(), second._repr_html_(), first._repr_html_()]
    assert [o.count("data-circuitsvis-bundle") for o in outputs] == [1, 0, 0]
    assert all("window.CircuitsVis.render(" in o for o in outputs)
    assert not any(
        re.search(r"<script[^>]*\bsrc\s*=|\bfrom\s*[\"']https?://", o, flags=re.IGNORECASE) for o in outputs
    )  # nothing fetched
    CircuitView.bundle_again()
    assert attention_html(model, tokens[2])._repr_html_().count("data-circuitsvis-bundle") == 1
    monkeypatch.setattr(probes.views, "_notebook_shell", lambda: FakeShell())  # another notebook
    assert first._repr_html_().count("data-circuitsvis-bundle") == 1
    monkeypatch.setattr(probes.views, "_notebook_shell", lambda: None)  # outside IPython: every output renders alone
    assert [first._repr_html_().count("data-circuitsvis-bundle") for _ in range(2)] == [1, 1]
    monkeypatch.setattr(probes.views, "_notebook_shell", lambda: shell)
    monkeypatch.setitem(sys.modules, "google.colab", object())  # Colab: a frame per output, each needs the bundle
    assert [first._repr_html_().count("data-circuitsvis-bundle") for _ in range(2)] == [1, 1]


def test_fix_self_closing_divs_lets_two_views_coexist():
    import circuitsvis.attention

    views = [circuitsvis.attention.attention_pattern(tokens=["a", "b"], attention=np.eye(2)) for _ in range(2)]
    assert re.search(r'<div id="circuits-vis-[^"]+"[^>]*/>', views[0].local_src)  # the upstream bug
    fixed = [offline_html(v) for v in views]
    for fragment in fixed:
        assert re.match(r'<div id="circuits-vis-[^"]+" style="margin: 15px 0;"></div>', fragment)
    assert (
        fix_self_closing_divs('<div id="x"/><div id="y" class="c" />')
        == '<div id="x"></div><div id="y" class="c"></div>'
    )
    page = standalone_html(fixed, title="two views")
    assert page.count("></div>") >= 2 and "<title>two views</title>" in page


def test_bad_input(model, tokens):
    with pytest.raises(ValueError, match="vocabulary"):
        information_flow(model, torch.full((2, 9), 500))
    with pytest.raises(ValueError, match="n_ctx"):
        information_flow(model, torch.full((2, 12), 30))
