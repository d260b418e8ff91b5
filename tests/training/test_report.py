"""The offline HTML report: its content, its self-containedness, and how it renders in a
real headless Chromium with the network disabled (skipped, with the reason, where
Chromium, chromedriver or selenium is missing; `.ci/run` installs Debian's chromium)."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import plotly.graph_objects as go
import plotly.offline
import pytest
import torch

from interp_init.tasks.anchor import balanced_inputs
from interp_init.tasks.anchor_pairs import SHIFTS, composite, task_spec
from training.cli import main
from training.config import make_run_config
from training.studies.report import ReportConfig, StaticExportUnavailable, load_runs, write_images
from training.studies.report.page import static_export_problem
from training.studies.report.cells import circuitsvis_view, unpack_scripts
from training.studies.report.outcomes import accuracy_table
from training.studies.report.cells import find_run_dirs
from training import train

TINY = dict(n_train=300, n_test=64, epochs=2, eval_samples=64, batch_size=128, eval_every=1)


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three finished tiny runs: two 2-layer symmetric runs and a 1-layer id-ood run."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("runs")
    for name, options in (
        ("symmetric/small-init", dict(task="symmetric", gamma=0.8)),
        ("symmetric/large-init", dict(task="symmetric", gamma=0.3)),
        ("id-ood/one-layer", dict(task="id-ood", n_layers=1)),
    ):
        cfg = make_run_config("tiny", **TINY, **options)
        train(cfg, root / name, device="cpu", progress=False)
    return root


@pytest.fixture(scope="module")
def report(runs_root: Path) -> tuple[Path, str]:
    """The report of all three runs, written through the command line; (path, stdout)."""
    out = runs_root / "out" / "report.html"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(["report", str(runs_root), "--out", str(out), "--per-pair", "4"])
    assert code == 0, stdout.getvalue()
    return out, stdout.getvalue()


# ------------------------------------------------------------------------- content


def test_cli_prints_the_report_path(report: tuple[Path, str]) -> None:
    path, stdout = report
    assert path.is_file()
    assert stdout.strip() == f"report: {path}"


def test_plotly_and_circuitsvis_are_inlined_once_and_nothing_is_fetched(report: tuple[Path, str]) -> None:
    page = report[0].read_text(encoding="utf-8")
    scripts = unpack_scripts(page)  # gzip-packed, each once
    assert list(scripts) == ["plotly.js", "circuitsvis", "figures"]
    packed = "\n".join(scripts.values())
    # plotly's cartesian bundle (the report's figures need no other trace type), not the full one
    assert scripts["plotly.js"].startswith("/**\n* plotly.js (cartesian - minified) v")
    assert packed.count("* plotly.js") == 1 and plotly.offline.get_plotlyjs()[:300] not in packed
    assert packed.count("var CircuitsVis=") == 1  # the circuitsvis bundle, once for all views
    assert page.count("CircuitsVis.render(") == 3  # one attention view per run
    figures = re.findall(r'<div id="(fig-[^"]+)" class="plotly-graph-div"', page)
    assert len(figures) == len(set(figures)) >= 3 * 8 and all(json.dumps(f) in scripts["figures"] for f in figures)
    # every figure's template written once, shared: the plotly default template for all
    line = next(line for line in scripts["figures"].splitlines() if line.startswith("const templates = "))
    assert (
        len(json.loads(line.removeprefix("const templates = ").rstrip(";"))) == 1
        and '"template":' not in scripts["figures"]
    )
    # no external script, stylesheet, import or font
    assert not re.search(r"<script\b[^>]*\bsrc\s*=", page, re.IGNORECASE)
    assert not re.search(r"<link\b[^>]*\bhref\s*=\s*[\"']?\s*(https?:)?//", page, re.IGNORECASE)
    assert not re.search(r"@import\s+(url\()?\s*[\"']?\s*(https?:)?//", page, re.IGNORECASE)
    assert not re.search(r"\bfrom\s+[\"']https?://", page)  # no ES-module import from a CDN
    assert "sourceMappingURL" not in page
    # circuitsvis' self-closed container would swallow the next view
    assert not re.search(r"<div\b[^>]*/>", page)


def test_every_section_names_its_paper_figure(report: tuple[Path, str]) -> None:
    page = report[0].read_text(encoding="utf-8")
    sections = re.findall(r'<section id="([^"]+)"><h2>[^<]*</h2><p class="what">([^<]*)</p>', page)
    keys = [key for key, _ in sections]
    for key in (
        "curves",
        "accuracies",
        "attention",
        "flow",
        "key-masking",
        "second-anchor-masking",
        "residual-similarity",
        "value-similarity",
        "condensation",
        "embedding-pca",
        "stable-ranks",
        "spectra",
    ):
        assert key in keys
    for key, sentence in sections:
        assert "Fig." in sentence, key


def test_a_probe_that_does_not_apply_says_so(report: tuple[Path, str]) -> None:
    page = report[0].read_text(encoding="utf-8")
    similarity = page[page.index('<section id="residual-similarity">') : page.index('<section id="value-similarity">')]
    assert similarity.count("not applicable: the model has 1 layer") == 1
    assert similarity.count('class="plotly-graph-div"') == 2  # the two 2-layer runs


def test_run_table_shows_folders_relative_to_the_report(report: tuple[Path, str], runs_root: Path) -> None:
    page = report[0].read_text(encoding="utf-8")
    (table,) = re.findall(r'<table[^>]*class="dataframe runs"[^>]*>.*?</table>', page, re.DOTALL)
    assert "../symmetric/small-init" in table and "../id-ood/one-layer" in table  # the report is in runs_root/out
    assert str(runs_root.resolve()) not in table and str(runs_root) not in table


def test_race_section_and_the_runs_recipe(report: tuple[Path, str]) -> None:
    """The race section covers the symmetric runs only; the run table gives each run's recipe beside the paper's."""
    page = report[0].read_text(encoding="utf-8")
    race = page[page.index('<section id="race">') : page.index('<section id="accuracies">')]
    assert "symmetric/small-init" in race and "symmetric/large-init" in race and "id-ood/one-layer" not in race
    assert (
        "(3,4) fitted at epoch" in race
        and "copied (symmetric &gt;= 0.8) at epoch" in race
        and 'class="plotly-graph-div"' in race
    )
    (table,) = re.findall(r'<table[^>]*class="dataframe runs"[^>]*>.*?</table>', page, re.DOTALL)
    assert f"{32 ** (0.5 - 0.8):.3g} (paper {400 ** (0.5 - 0.8):.3g})" in table  # tiny: d_model 32, gamma 0.8


def test_sections_number_layers_from_zero(report: tuple[Path, str]) -> None:
    """TransformerLens' numbering (L0, L1, "layer 0") in every title and caption, as the heads are labelled."""
    page = report[0].read_text(encoding="utf-8")
    sections = re.findall(r'<section id="[^"]+"><h2>([^<]*)</h2><p class="what">([^<]*)</p>', page)
    assert len(sections) >= 12
    texts = " ".join(title + " " + sentence for title, sentence in sections)
    for wrong in ("layer-2", "layer 2", "second layer", "first layer", "first-layer", "layer-1 ", "(layer 1)"):
        assert wrong not in texts.lower(), wrong
    assert "layer 1&#x27;s attention" in page and "layer 0&#x27;s query neurons" in page


def test_eigenvalue_caption_states_the_measured_shares(report: tuple[Path, str], runs_root: Path) -> None:
    from probes.geometry import embedding_pca
    from training.studies.report.mechanisms import variance_shares

    page = report[0].read_text(encoding="utf-8")
    (sentence,) = re.findall(r'<section id="embedding-eigenvalues"><h2>[^<]*</h2><p class="what">([^<]*)</p>', page)
    assert "Fig. 7" in sentence and "a few large eigenvalues" in sentence and "log" not in sentence
    for run in load_runs([runs_root]):
        shares = variance_shares(embedding_pca(run.model, tokens=range(20, 100)).eigenvalues)
        assert len(shares) == 10 and all(a >= b for a, b in zip(shares, shares[1:], strict=False))
        assert f"{run.name} {sum(shares[:2]):.2f}" in sentence


def _caption(page: str, key: str) -> str:
    """The caption of section ``key`` as the reader sees it (HTML entities decoded)."""
    import html

    (sentence,) = re.findall(rf'<section id="{key}"><h2>[^<]*</h2><p class="what">([^<]*)</p>', page)
    return html.unescape(sentence)


def _measured(caption: str) -> str:
    """The caption's measured part: what follows "Measured here"."""
    assert caption.count("Measured here, ") == 1, caption
    return caption.split("Measured here, ", 1)[1]


FIG3_LABELS = ["35", "63", "x=99", "a1=4", "a2=3", "38", "42", "36", "62"]


def test_captions_state_what_the_papers_expect_and_what_the_runs_measured(
    report: tuple[Path, str], runs_root: Path
) -> None:
    """Each caption names small and large init and states every run's number, checked here
    against a computation of that number from the run's metrics or model."""
    import numpy as np
    from sklearn.cluster import AgglomerativeClustering
    from sklearn.metrics import adjusted_rand_score

    from probes.anchors import mask_key, mask_second_anchor
    from probes.flow import attention_patterns, information_flow, top_paths
    from probes.geometry import condensation, embedding_pca
    from probes.rank import merged_weight, weight_matrices
    from probes.similarity import input_grid, residual_similarity, value_similarity

    page = report[0].read_text(encoding="utf-8")
    captions = {key: _caption(page, key) for key in re.findall(r'<section id="([^"]+)">', page)}
    for key, caption in captions.items():
        if key not in ("verdict", "accuracies"):  # theirs name the papers' regimes per task
            assert "small init" in caption and "large init" in caption, key
    # the verdict's caption does not restate the table below it: the table says what each run learned
    assert "Measured here" not in captions.pop("verdict")
    verdict = dict(
        re.findall(
            r"<tr>\s*<td>([^<]+)</td>\s*<td>([^<]+)</td>",
            page[page.index('<section id="verdict">') : page.index('<section id="curves">')],
        )
    )
    measured = {key: _measured(caption) for key, caption in captions.items()}
    tokens = torch.tensor([[35, 63, 99, 4, 3, 38, 42, 36, 62]])
    for run in load_runs([runs_root]):
        name, model, task = run.name, run.model, run.record.config.data.task
        metrics = json.loads((run.record.path / "metrics.json").read_text())
        final, history = metrics["final"], metrics["history"]
        # verdict and curves: the tiny runs fit nothing in 2 epochs
        assert final["id_acc"] < 0.9 and all(h["id_acc"] < 0.9 for h in history)
        assert verdict[name] == ("Phase 1" if task == "id-ood" else "did not fit")
        assert f"{name} not within {history[-1]['epoch']} epochs" in measured["curves"]
        if task == "symmetric":
            inf, sym = final["heldout"]["4,3"]["inferential"], final["heldout"]["4,3"]["symmetric"]
            assert f"{name} (4,3) inferential {inf:.2f}, (4,3) symmetric {sym:.2f}" in measured["accuracies"]
        else:
            assert f"{name} OOD {final['ood_acc']:.2f}" in measured["accuracies"]
        # attention: layer 0, a1 (position 3) and a2 (position 4) on the key (position 2)
        layer0 = attention_patterns(model, tokens)[0, 0]  # [head, query, source]
        assert (
            f"{name} {float(layer0[:, 3, 2].max()):.2f} / {float(layer0[:, 4, 2].max()):.2f}" in measured["attention"]
        )
        best = top_paths(information_flow(model, tokens), threshold=0.05, k=1).iloc[0]
        assert f"{name} {' -> '.join(FIG3_LABELS[p] for p in best['path'])} ({best['score']:.2f})" in measured["flow"]
        # key masking: Ward clusters of the masked outputs against unordered and ordered pairs
        data = balanced_inputs(task, per_pair=4, seed=0)
        output = f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"
        vectors = mask_key(model, data).last_position(output).double().numpy()
        pairs = data.anchor_pairs.tolist()
        aris = []
        for labels in ([f"{min(a, b)},{max(a, b)}" for a, b in pairs], [f"{a},{b}" for a, b in pairs]):
            found = AgglomerativeClustering(n_clusters=len(set(labels))).fit_predict(vectors)
            aris.append(f"{adjusted_rand_score(labels, found):.2f}")
        assert f"{name} {' / '.join(aris)}" in measured["key-masking"]
        # second-anchor masking: block score of equal g(x; a1) = x + s(a1), diagonal excluded
        masked = mask_second_anchor(model, data).last_position(output).double()
        unit = masked / masked.norm(dim=1, keepdim=True)
        similarity = (unit @ unit.T).numpy()
        g = np.array([x + SHIFTS[a] for x, (a, _) in zip(data.keys.tolist(), pairs, strict=True)])
        off = ~np.eye(len(g), dtype=bool)
        same = (g[:, None] == g[None, :]) & off
        assert (
            f"{name} {similarity[same].mean() - similarity[~same & off].mean():.3f}"
            in measured["second-anchor-masking"]
        )
        # similarity heatmaps: layer 1, so the 2-layer runs only
        for key, probe, grid_pairs in (
            ("residual-similarity", residual_similarity, [(1, 2), (2, 1), (1, 3), (3, 4), (4, 3), (2, 4)]),
            ("value-similarity", value_similarity, [(1, 3), (2, 3), (3, 3), (4, 3)]),
        ):
            if model.cfg.n_layers < 2:
                assert name not in measured[key]
            else:
                score = probe(model, input_grid(keys=range(30, 42), pairs=grid_pairs, seed=0), layer=1).score
                assert f"{name} {score:.3f}" in measured[key]
        # weights
        w_q = merged_weight(model, "W_Q", 0)
        groups = condensation(w_q.T, threshold=0.7).n_groups
        assert f"{name} {groups} groups of {w_q.shape[1]} neurons" in measured["condensation"]
        assert f"{name} {embedding_pca(model, tokens=range(20, 100)).ordinal_score:.2f}" in measured["embedding-pca"]
        s = torch.linalg.svdvals(w_q.double())
        assert f"{name} {float((s**2).sum() / s[0] ** 2):.2f}" in measured["stable-ranks"]
        shares = []
        for _, _, matrix in weight_matrices(model):
            s = torch.linalg.svdvals(matrix.double())
            shares.append(float((s[:3] ** 2).sum() / (s**2).sum()))
        assert f"{name} {sum(shares) / len(shares):.2f}" in measured["spectra"]


def test_curves_caption_states_the_epoch_each_run_fit(runs_root: Path) -> None:
    import dataclasses

    from interp_init.tasks.anchor import SymmetricMetrics
    from interp_init.tasks.base import EpochRecord
    from training.studies.report import Context
    from training.studies.report.outcomes import section_curves

    run = load_runs([runs_root / "symmetric" / "small-init"])[0]
    records = ((1, 0.2), (2, 0.85), (3, 0.93), (4, 0.99))
    history = tuple(EpochRecord(e, e, 1.0 / e, 1e-3, SymmetricMetrics(acc, acc, {}, {})) for e, acc in records)
    record = dataclasses.replace(run.record, metrics=dataclasses.replace(run.record.metrics, history=history))
    fitted = dataclasses.replace(run, name="fits", record=record)
    section = section_curves(Context([fitted, run], ReportConfig(per_pair=2)))
    assert "Measured here, the first epoch with ID accuracy >= 0.9: fits 3; " in section.sentence
    assert f"{run.name} not within 2 epochs." in section.sentence


def test_accuracy_table_matches_metrics(runs_root: Path) -> None:
    runs = load_runs([runs_root])
    table = accuracy_table(runs).set_index("run")
    for run in runs:
        final = json.loads((run.record.path / "metrics.json").read_text())["final"]
        assert table.loc[run.name, "ID"] == final["id_acc"]
        assert table.loc[run.name, "train"] == final["train_acc"]
        if run.record.config.data.task == "symmetric":
            assert table.loc[run.name, "(4,3) inferential"] == final["heldout"]["4,3"]["inferential"]
        else:
            assert table.loc[run.name, "OOD"] == final["ood_acc"]
            assert table.loc[run.name, "commutativity"] == final["commutativity"]


def test_find_run_dirs_expands_parents_and_refuses_empty_folders(runs_root: Path, tmp_path: Path) -> None:
    found = find_run_dirs([runs_root])
    assert sorted(p.name for p in found) == ["large-init", "one-layer", "small-init"]
    assert find_run_dirs([runs_root / "symmetric" / "large-init", runs_root / "symmetric" / "small-init"]) == [
        (runs_root / "symmetric" / "large-init").resolve(),
        (runs_root / "symmetric" / "small-init").resolve(),
    ]  # in the order given
    with pytest.raises(
        ValueError, match="small-init is given twice"
    ):  # a run and a folder holding it: one run twice (issue 46)
        find_run_dirs([runs_root / "symmetric" / "small-init", runs_root / "symmetric"])
    with pytest.raises(ValueError, match="holds no run folder"):
        find_run_dirs([tmp_path])
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        assert main(["report", str(tmp_path), "--out", str(tmp_path / "r.html")]) == 2
    assert "holds no run folder" in stderr.getvalue()


@pytest.mark.parametrize("task", ["symmetric", "id-ood", "complexity"])
def test_balanced_inputs_hold_every_pair_equally(task: str) -> None:
    data = balanced_inputs(task, per_pair=5, seed=3)
    spec = task_spec(task)
    pairs = [tuple(p) for p in data.anchor_pairs.tolist()]
    expected = list(spec.train_pairs) + list(spec.heldout_pairs)
    assert sorted(set(pairs)) == sorted(expected)
    assert all(pairs.count(p) == 5 for p in expected)
    rows = torch.arange(len(data))
    assert torch.equal(data.tokens[rows, data.key_positions + 1], data.anchor_pairs[:, 0])
    assert torch.equal(data.tokens[rows, data.key_positions + 2], data.anchor_pairs[:, 1])
    for (a, b), x, target in zip(pairs, data.keys.tolist(), data.targets.tolist(), strict=True):
        assert target == x + SHIFTS[a] + SHIFTS[b] + (spec.offset((a, b)) if (a, b) in spec.train_pairs else 0)
    assert torch.equal(
        data.targets[-5:], composite(data.keys[-5:], data.anchor_pairs[-5:, 0], data.anchor_pairs[-5:, 1])
    )


def test_every_projection_the_report_offers_is_one_the_probe_draws() -> None:
    """The report's choices (torch-free, for the command line) and probes.masking.project agree."""
    from probes.masking import project
    from training.studies.report import PROJECTIONS

    vectors = torch.randn(20, 4, generator=torch.Generator().manual_seed(0))
    for method in PROJECTIONS:
        assert len(project(vectors, method=method, perplexity=5.0)) == 20
    with pytest.raises(ValueError, match="method"):
        project(vectors, method="umap")


def test_report_config_is_validated() -> None:
    with pytest.raises(ValueError, match="projection"):
        ReportConfig(projection="umap")
    with pytest.raises(ValueError, match="per_pair"):
        ReportConfig(per_pair=1)


# ------------------------------------------------------------------- static images


def _small_figure() -> go.Figure:
    return go.Figure(go.Bar(x=["a", "b"], y=[1, 2])).update_layout(height=200)


def test_static_export_without_a_browser_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-chromium"))
    problem = static_export_problem()
    assert problem is not None and "chromium" in problem
    with pytest.raises(StaticExportUnavailable, match="apt-get install chromium"):
        write_images({"fig": _small_figure()}, tmp_path / "images")


def test_static_export_without_kaleido_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "kaleido" else real(name, *a))
    problem = static_export_problem()
    assert problem is not None and "pip install kaleido" in problem and "apt-get install chromium" in problem


def _static_export_or_skip() -> None:
    problem = static_export_problem()
    if problem:
        pytest.skip(problem)


def test_static_png_export(tmp_path: Path) -> None:
    _static_export_or_skip()
    (path,) = write_images({"bars": _small_figure()}, tmp_path, "png", width=300, scale=1)
    assert path.name == "bars.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "magic"), [("svg", b"<svg"), ("pdf", b"%PDF")])
def test_static_svg_and_pdf_export(tmp_path: Path, fmt: str, magic: bytes) -> None:
    _static_export_or_skip()
    (path,) = write_images({"bars": _small_figure()}, tmp_path, fmt, width=300, scale=1)
    assert path.read_bytes().lstrip()[: len(magic)] == magic


# --------------------------------------------------------------- headless Chromium

RENDER_STATE = """
const figs = [...document.querySelectorAll('.plotly-graph-div')];  // every figure div, plotted or not
const drawn = figs.filter(f => f.querySelector('.main-svg') && (f.data || []).length > 0
    && f.querySelectorAll('g.trace, g.hm, .imagelayer image').length > 0);
const views = [...document.querySelectorAll('.circuitsvis-view, [id^="circuits-vis-"]')];
return {figures: figs.length, drawn: drawn.length, views: views.length,
        mounted: views.filter(v => v.children.length > 0 && v.innerText.trim().length > 0).length};
"""


def _open(
    driver, path: Path, expect_views: int | None = None, timeout: float = 90.0
) -> tuple[dict, list[dict], list[str], list[dict]]:  # noqa: ANN001
    """Load ``path`` over file://; return the render state, console errors, requested URLs and failed requests."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("performance")  # drop what came before this page
    driver.get_log("browser")
    driver.get(path.resolve().as_uri())

    def ready(d) -> dict | bool:  # noqa: ANN001
        state = d.execute_script(RENDER_STATE)
        done = state["drawn"] == state["figures"] and state["mounted"] == (
            state["views"] if expect_views is None else expect_views
        )
        return state if done else False

    try:
        state = WebDriverWait(driver, timeout, poll_frequency=0.5).until(ready)
    except Exception:  # noqa: BLE001 - report what was drawn instead of a bare timeout
        state = driver.execute_script(RENDER_STATE)
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    urls, failed = [], []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            # the browser's own pages (its new-tab page, still loading on a busy machine) are not the page's requests
            if not message["params"]["request"]["url"].startswith(("chrome://", "chrome-untrusted://", "devtools://")):
                urls.append(message["params"]["request"]["url"])
        elif message["method"] == "Network.loadingFailed":
            failed.append(message["params"])
    return state, errors, urls, failed


def _distinct_colours(png: bytes) -> int:
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20)
    return len(colours) if colours is not None else 1 << 20


def test_report_renders_offline_in_headless_chromium(browser, report: tuple[Path, str], tmp_path: Path) -> None:  # noqa: ANN001
    state, errors, urls, failed = _open(browser, report[0])
    assert errors == [], errors
    assert failed == [], failed
    assert urls and all(u.startswith(("file://", "data:")) for u in urls), [
        u[:80] for u in urls if not u.startswith(("file://", "data:"))
    ]
    assert state["figures"] >= 3 * 8 and state["drawn"] == state["figures"], state
    assert state["views"] == 3 and state["mounted"] == 3, state
    pytest.importorskip("PIL", reason="pillow is not installed (pip install -e '.[dev]')")
    shot = browser.get_screenshot_as_png()
    (tmp_path / "report.png").write_bytes(shot)
    assert _distinct_colours(shot) > 50  # text, tables and plot colours; a blank page has 1


def test_two_circuitsvis_views_on_one_page_both_render(browser, tmp_path: Path) -> None:  # noqa: ANN001
    """Our fragments both mount; circuitsvis' own fragments (self-closed div) lose the second view."""
    import circuitsvis.attention

    from training.studies.report.cells import circuitsvis_bundle

    pattern = torch.softmax(torch.randn(2, 4, 4), -1).tril()
    tokens = ["a", "b", "c", "d"]
    ours = tmp_path / "ours.html"
    views = "\n".join(circuitsvis_view("AttentionHeads", attention=pattern, tokens=tokens) for _ in range(2))
    ours.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><script>{circuitsvis_bundle()}</script></head><body>{views}</body></html>",
        encoding="utf-8",
    )
    state, errors, _, failed = _open(browser, ours)
    assert (state["views"], state["mounted"]) == (2, 2), state
    assert errors == [] and failed == []

    upstream = tmp_path / "upstream.html"
    fragments = "\n".join(
        circuitsvis.attention.attention_heads(attention=pattern, tokens=tokens).local_src for _ in range(2)
    )
    assert re.search(r"<div\b[^>]*/>", fragments)  # the upstream bug this guards against
    upstream.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{fragments}</body></html>", encoding="utf-8"
    )
    state, _, _, _ = _open(browser, upstream, expect_views=2, timeout=4)
    assert state["mounted"] < 2, state


def test_sample_input_is_the_neurips_fig3_input_with_its_target() -> None:
    from interp_init.tasks.anchor import sample_input

    sym = sample_input("symmetric")
    assert sym.tokens.tolist() == [[35, 63, 99, 4, 3, 38, 42, 36, 62]]
    assert sym.keys.tolist() == [99] and sym.anchor_pairs.tolist() == [[4, 3]]
    assert sym.candidate_targets["inferential"].tolist() == [99 - 10]
    assert sym.candidate_targets["symmetric"].tolist() == [99 - 6]
    assert sample_input("complexity", k=6).targets.tolist() == [99 - 10 + 4]  # (4,3) is in the 6th group
    assert sample_input("complexity", k=5).targets.tolist() == [99 - 10]


def test_svg_only_redraws_webgl_traces_as_svg() -> None:
    from training.studies.report.page import svg_only

    x = list(range(1500))
    fig = go.Figure(
        [go.Scattergl(x=x, y=[v * v for v in x], mode="lines", name="gl"), go.Bar(x=[1], y=[2])]
    ).update_layout(height=123)
    out = svg_only(fig)
    assert [t.type for t in out.data] == ["scatter", "bar"]
    assert list(out.data[0].x) == x and list(out.data[0].y) == [v * v for v in x] and out.data[0].name == "gl"
    assert out.layout.height == 123


def test_a_run_without_weights_and_a_missing_probe_are_noted_not_fatal(runs_root: Path, tmp_path: Path) -> None:
    from training.studies.report import build_page

    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "config.json").write_text((runs_root / "symmetric" / "small-init" / "config.json").read_text())
    page = build_page(load_runs([unfinished]), ReportConfig(per_pair=2))
    assert "no model: no model.safetensors" in page.html
    assert "no run has a training history" in page.html
    assert page.figures == {}


def test_a_section_that_does_not_apply_is_noted_not_fatal(runs_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from training.studies.report import NotApplicable, build_page
    from training.studies.report import page as page_module

    def section_missing(ctx: object) -> None:
        """A section whose probe is missing."""
        raise NotApplicable("probe not available: no such probe")

    monkeypatch.setattr(page_module, "SECTIONS", (section_missing,))
    page = build_page(load_runs([runs_root / "symmetric" / "small-init"]), ReportConfig(per_pair=2))
    assert '<section id="missing"><h2>A section whose probe is missing.</h2>' in page.html
    assert "probe not available: no such probe" in page.html


# ------------------------------------------------------------ the first screen, tables


def test_first_screen_names_the_preset_and_each_run_once(report: tuple[Path, str]) -> None:
    """Before any section: the preset and what it means, then the one table of the runs, each
    under its short label (the folder below the runs' common parent), with the settings in
    which the runs differ; the settings they share said once under it."""
    import html

    page = report[0].read_text(encoding="utf-8")
    first = page[: page.index("<nav>")]
    lead = html.unescape(re.sub(r"<[^>]+>", "", re.search(r'<div class="lead">(.*?)</div>', first, re.DOTALL).group(1)))
    assert (
        lead.startswith("Preset tiny: a smoke test (d_model 32, 3 epochs on 2,000 samples")
        and "not expected to reproduce anything" in lead
    )
    (table,) = re.findall(r'<table[^>]*class="dataframe runs"[^>]*>.*?</table>', first, re.DOTALL)
    labels = re.findall(r"<tr>\s*<td>([^<]+)</td>", table)
    assert labels == ["id-ood/one-layer", "symmetric/large-init", "symmetric/small-init"]
    heads = re.findall(r"<th>([^<]+)</th>", table)
    assert heads[:2] == ["run", "folder"] and {"task", "gamma", "layers"} <= set(heads) and heads[-1] == "status"
    shared = re.search(r'<p class="shared">Every run: ([^<]*)</p>', first).group(1)
    assert "preset tiny" in shared and "d_model 32" in shared and "gamma" not in shared
    # the labels name the runs everywhere after: no run's settings spelled into its name
    assert "architecture=" not in page and "gamma=" not in page
    assert all(f"<h3>{label}</h3>" in page for label in labels)


def test_missing_values_read_as_a_dash_or_in_words(runs_root: Path) -> None:
    import numpy as np
    import pandas as pd

    from training.studies.report.cells import MISSING, html_table, table_cell
    from training.studies.report.outcomes import race_table

    assert [table_cell(v) for v in (None, float("nan"), pd.NA, np.float32(0.25), True, "x")] == [
        MISSING,
        MISSING,
        MISSING,
        "0.250",
        "yes",
        "x",
    ]
    frame = pd.DataFrame({"epoch": pd.array([3, None], dtype="Int64"), "share": [0.5, None], "word": [None, "x"]})
    shown = html_table(frame)
    assert (
        "None" not in shown
        and "&lt;NA&gt;" not in shown
        and "NaN" not in shown
        and shown.count(f"<td>{MISSING}</td>") == 3
    )
    # the race of runs that fitted nothing in 2 epochs: words, not empty epochs
    table = race_table(load_runs([runs_root / "symmetric"]))
    assert set(table["(3,4) fitted at epoch"]) == {"not in 2 epochs"} and set(
        table["(4,3) inferential / symmetric at fit"]
    ) == {"not fitted"}
    assert not table.isna().any().any()


def test_packed_scripts_round_trip_and_plotly_falls_back_to_the_full_bundle(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from training.studies.report import cells as inline

    packed = inline.packed_script("let a = '</script>';", "one")
    assert packed == inline.packed_script("let a = '</script>';", "one")  # the same bytes each time
    assert inline.unpack_scripts(f"<p>{packed}</p>") == {"one": "let a = '</script>';"}
    full = plotly.offline.get_plotlyjs()
    cartesian = inline.CARTESIAN_BUNDLE.read_text(encoding="utf-8")
    assert (
        inline.plotly_version(cartesian)[0] == inline.plotly_version(full)[0]
    )  # the vendored bundle matches the installed plotly
    assert inline.plotly_js({"scatter", "bar", "heatmap"}) == cartesian
    assert inline.plotly_js({"scatter", "scatter3d"}) == full  # a trace type the partial bundle lacks
    other = tmp_path / "plotly-cartesian.min.js"
    other.write_text("/**\n* plotly.js (cartesian - minified) v1.0.0\n*/", encoding="utf-8")
    monkeypatch.setattr(inline, "CARTESIAN_BUNDLE", other)
    assert inline.plotly_js({"scatter"}) == full  # another major version than the installed plotly's
    with pytest.raises(ValueError, match="not a plotly.js bundle"):
        inline.plotly_version("var x = 1;")
