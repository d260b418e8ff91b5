"""The probes package as a whole: doctests, a model our code did not build, no leftover hooks."""

from __future__ import annotations

import doctest
import importlib
import inspect

import pytest
import torch
from transformer_lens import HookedTransformer, HookedTransformerConfig

import probes
from interp_init import quiet_deprecation
from training import make_dataset

#: The modules that define a probe of the public API (a function in ``probes.__all__``): a new
#: probe's module joins when its probe is exported (docs/layout.md, where a new piece goes).
MODULES = sorted(
    {getattr(probes, name).__module__ for name in probes.__all__ if inspect.isfunction(getattr(probes, name))}
)
from helpers import foreign_model, n_hooks


@pytest.mark.parametrize("name", MODULES)
def test_module_docstring_examples_run(name):
    module = importlib.import_module(name)
    assert "Example" in module.__doc__ and "Fig" in module.__doc__ and "Shapes" in module.__doc__
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_public_api_is_exported():
    for name in probes.__all__:
        assert callable(getattr(probes, name)), name
        doc = getattr(probes, name).__doc__ or ""
        assert doc.strip() and not doc.startswith(f"{name}("), f"{name} has no docstring of its own"
    for kept in ["merged_weight", "stable_rank", "weight_stable_ranks"]:
        assert kept in probes.__all__


def test_every_probe_runs_on_a_foreign_three_layer_multi_head_model(tmp_path):
    model = foreign_model(
        n_layers=3, d_model=24, n_heads=4, d_head=6, d_mlp=48, act_fn="relu", normalization_type="LNPre"
    )
    data = make_dataset("symmetric", "train", n=40, seed=0)

    key = probes.mask_key(model, data)
    second = probes.mask_second_anchor(model, data, layers=[1, 2], heads=[0, 3], renormalize=True)
    vectors = key.last_position("blocks.2.hook_resid_post")
    frame = probes.project(vectors, "tsne", perplexity=12, labels=probes.candidate_labelings(data))
    assert len(frame) == 40 and probes.plot_projection(frame).data
    scores = probes.cluster_scores(second.last_position("blocks.2.hook_resid_post"), probes.candidate_labelings(data))
    assert list(scores["labeling"]) == ["ordered_pair", "unordered_pair", "composite_shift"]

    edges = probes.information_flow(model, data.tokens[:8])
    assert set(edges["layer"]) == {0, 1, 2} and set(edges["attn_head"].astype(str)) == {"0", "1", "2", "3", "sum"}
    paths = probes.top_paths(edges, threshold=0.1)
    assert all(len(p) == 4 and p[-1] == 8 for p in paths["path"])
    assert probes.plot_flow(edges, probes.token_labels(data.tokens[0]), paths).data
    html = probes.attention_html(model, data.tokens[0], tmp_path / "a.html").html()
    assert "L2H3" in html

    grid = probes.input_grid(range(30, 41), [(3, 3), (2, 2)], seed=0)
    res = probes.residual_similarity(model, grid, layer=2)
    val = probes.value_similarity(
        model, probes.input_grid(range(30, 40), [(a, 1) for a in (1, 2, 3, 4)], seed=0), layer=1
    )
    assert res.similarity.shape == (22, 22) and val.similarity.shape == (40, 40)
    assert probes.plot_similarity(res).data and probes.plot_similarity(val).data

    cond = probes.condensation(probes.merged_weight(model, "W_Q", 0).T)
    assert sum(cond.group_sizes) == 24
    emb = probes.embedding_pca(model)
    assert 0 <= emb.ordinal_score <= 1 and emb.eigenvalues.shape == (24,)
    spectra = probes.singular_value_spectra(model)
    assert spectra["matrix"].nunique() == 3 + 3 * 6
    assert len(probes.weight_stable_ranks(model)) == 3 + 3 * 6
    assert n_hooks(model) == 0


def _broken(model: HookedTransformer, monkeypatch) -> None:
    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(model.blocks[0].mlp, "forward", boom)  # every probe runs block 0


@pytest.mark.parametrize(
    "call",
    [
        lambda m, t, g: probes.masked_run(m, t, 2, renormalize=True, names_filter=["blocks.0.attn.hook_pattern"]),
        lambda m, t, g: probes.information_flow(m, t),
        lambda m, t, g: probes.residual_similarity(m, g),
        lambda m, t, g: probes.value_similarity(m, g),
    ],
)
def test_no_hooks_remain_after_a_failing_call(call, monkeypatch):
    cfg = HookedTransformerConfig(n_layers=2, d_model=16, n_heads=2, d_head=8, n_ctx=9, d_vocab=201, act_fn="gelu")
    with quiet_deprecation():
        model = HookedTransformer(cfg).eval()
    tokens = torch.randint(20, 100, (3, 9))
    grid = probes.input_grid(range(30, 36), [(3, 3), (2, 2)], seed=0)
    call(model, tokens, grid)
    assert n_hooks(model) == 0
    _broken(model, monkeypatch)
    with pytest.raises(RuntimeError, match="boom"):
        call(model, tokens, grid)
    assert n_hooks(model) == 0


@pytest.mark.slow
def test_walkthrough_example_writes_every_figure(tmp_path):
    from click.testing import CliRunner
    from helpers import load_script

    module = load_script("examples/probes_walkthrough.py")
    result = CliRunner().invoke(module.main, ["--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for label in ("small_init", "large_init"):
        for name in (
            "flow",
            "attention",
            "similarity_residual",
            "similarity_value",
            "condensation_WQ0",
            "embedding_pca",
            "spectra",
            "key_masked_tsne",
        ):
            assert (tmp_path / f"{label}_{name}.html").is_file()
    assert (tmp_path / "summary.csv").is_file() and (tmp_path / "plotly.min.js").is_file()


def test_results_print_and_display_as_tables(tmp_path):
    model = foreign_model()
    data = make_dataset("symmetric", "train", n=12, seed=0)
    grid = probes.input_grid(range(30, 41), [(3, 3), (2, 2)], seed=0)
    weight = torch.tensor([[1.0, 0.0], [2.0, 0.1], [0.0, 1.0]])
    results = {
        "MaskedRun": (probes.mask_key(model, data), ["logits", "blocks.1.hook_resid_post", "(12, 9, 16)"]),
        "SimilarityResult": (
            probes.residual_similarity(model, grid),
            ["blocks.1.hook_resid_mid", "block score", " 22 "],
        ),
        "Condensation": (probes.condensation(weight), ["size", "[0, 1]", "[2]"]),
        "EmbeddingPCA": (probes.embedding_pca(model), ["ordinal score", "PC1 variance"]),
    }
    for name, (result, expected) in results.items():
        text, page = str(result), result._repr_html_()
        assert text.startswith(name) and page.startswith(f"<p><b>{name}</b></p>") and "<table" in page
        for fragment in expected:
            assert fragment in text, (name, fragment, text)
    condensed = results["Condensation"][0].table()
    assert condensed["size"].tolist() == [2, 1] and condensed["mean similarity within"].iloc[0] == pytest.approx(
        2 / 2.0024984, abs=1e-6
    )


def test_the_probe_benchmark_prints_its_ratios_at_a_toy_size():
    from click.testing import CliRunner
    from helpers import load_script

    bench = load_script("benchmarks/bench_probes.py")
    args = ["--layers", "2", "--d-model", "32", "--heads", "2", "--vocab", "60", "--seq", "8", "--batch", "3"]
    result = CliRunner().invoke(bench.main, args)
    assert result.exit_code == 0, result.output
    for name in (
        "masked_run",
        "information_flow",
        "residual_similarity",
        "weight_stable_ranks",
        "circuit_stable_ranks",
        "plot_condensation",
        "attention_html",
        "top_paths",
    ):
        assert name in result.output, name
    assert result.output.count("| ") >= 10 * 7
