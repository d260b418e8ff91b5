"""An offline HTML report that compares run folders side by side (issue 7).

:func:`write_report` reads run folders (``config.json``, ``metrics.json``,
``model.safetensors``), runs the probes of :mod:`probes` on a few hundred inputs per
run and writes one self-contained HTML file: plotly's JavaScript is inlined once in the
page head for all figures, circuitsvis' bundle is inlined once from the installed
package, and the page makes no request to any network address (``tests/test_report.py``
opens it in headless Chromium with the network disabled).

Sections, each with one sentence on what it shows and the paper figure it corresponds
to: training curves, accuracies, attention patterns of a sample input (circuitsvis),
information flow with its top paths, key-token and second-anchor masking projections
with cluster scores, cosine-similarity heatmaps with block scores, W_Q condensation,
embedding PCA with its ordinal score, stable ranks and singular spectra.  A section
whose probe is missing, or does not apply to a run (a run without weights, a 1-layer
model for a probe of layer 1), says so in place of its figure.

:func:`write_images` writes any of the figures as PNG, SVG or PDF through plotly's
exporter kaleido, which drives a system Chromium or Chrome (Debian: ``apt-get install
chromium``; kaleido finds it on ``PATH``, or set ``BROWSER_PATH``).  Without kaleido or a
browser it raises :class:`StaticExportUnavailable` saying what to install.

Command line::

    interp-init report RUNS/symmetric/small RUNS/symmetric/large --out report.html
    interp-init report RUNS --out report.html        # every run folder under RUNS
    interp-init report RUNS --out report.html --images figures --image-format svg
"""

from __future__ import annotations

import contextlib
import html
import importlib
import importlib.util
import json
import math
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from transformer_lens import HookedTransformer

from interp_init import load_model
from interp_init.model import CONFIG_FILE, WEIGHTS_FILE
from training.config import RunConfig
from interp_init.data import AnchorDataset, make_dataset
from interp_init.tasks import composite, task_spec
from training.loop import read_metrics
from training.verdict import EXPECTED, run_verdict

IMAGE_FORMATS = ("png", "svg", "pdf")
PROJECTIONS = ("pca", "tsne")
#: Colours of the runs, in order (plotly's default qualitative palette).
RUN_COLOURS = ("#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692", "#B6E880", "#FF97FF", "#FECB52")


# ------------------------------------------------------------------------ configuration


@dataclass(frozen=True)
class ReportConfig:
    """How much work the report's probes do, and what the page is called.

    ``per_pair`` inputs per anchor pair feed the masking projections and cluster scores
    (16 pairs, so 320 inputs at the default; the journal used 50 per pair); the
    similarity heatmaps use fixed grids of 12 keys x 6 or 4 pairs, attention and
    information flow the NeurIPS Fig. 3 input.  ``projection`` is ``"pca"`` (fast,
    deterministic) or ``"tsne"`` (the journal's, perplexity 12).  ``seed`` draws the
    probe inputs.
    """

    per_pair: int = 20
    projection: str = "pca"
    seed: int = 0
    device: str = "cpu"
    title: str = "interp-init report"
    #: torch / BLAS / OpenMP threads while the probes run (restored after): their matrices
    #: are small, and several threads on a busy machine are many times slower than one.
    #: None: leave the thread settings as they are.
    threads: int | None = 1

    def __post_init__(self) -> None:
        if isinstance(self.per_pair, bool) or not isinstance(self.per_pair, int) or self.per_pair < 2:
            raise ValueError(f"per_pair must be an integer >= 2 (inputs per anchor pair), got {self.per_pair!r}")
        if self.projection not in PROJECTIONS:
            raise ValueError(f"projection must be one of {PROJECTIONS}, got {self.projection!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        if not isinstance(self.title, str) or not self.title.strip():
            raise ValueError(f"title must be a non-empty string, got {self.title!r}")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1):
            raise ValueError(f"threads must be None or an integer >= 1, got {self.threads!r}")


# ------------------------------------------------------------------------------- runs


@dataclass
class Run:
    """One run folder as the report sees it."""

    name: str
    path: Path
    config: RunConfig
    metrics: dict | None
    model: HookedTransformer | None
    #: Why there is no model (no weights file yet), else "".
    missing: str = ""


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Run folders among ``paths``: a folder with ``config.json`` is a run; any other
    folder stands for every run folder below it (sorted)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise ValueError(f"{path} is not a folder; pass run folders (each with {CONFIG_FILE}) or a folder that holds them")
        if (path / CONFIG_FILE).is_file():
            found.append(path)
            continue
        below = sorted(p.parent for p in path.rglob(CONFIG_FILE) if not any(part.startswith(".") for part in p.relative_to(path).parts))
        if not below:
            raise ValueError(f"{path} holds no run folder (no {CONFIG_FILE} in it or below it); train a run first (interp-init train --out DIR)")
        found.extend(below)
    unique = list(dict.fromkeys(p.resolve() for p in found))
    if not unique:
        raise ValueError("no run folder given; pass at least one RUN_DIR")
    return unique


def _run_names(paths: Sequence[Path], configs: Sequence[RunConfig]) -> list[str]:
    """Short distinct names: the folder's path below the common parent, plus the options that differ."""
    if len(paths) == 1:
        return [paths[0].name]
    parts = [p.parts for p in paths]
    common = 0
    while all(len(p) > common + 1 for p in parts) and len({p[common] for p in parts}) == 1:
        common += 1
    names = ["/".join(p[common:]) for p in parts]
    flats = [c.flat() for c in configs]
    differing = [k for k in flats[0] if len({repr(f[k]) for f in flats}) > 1][:3]
    if differing:
        names = [f"{n} ({', '.join(f'{k}={f[k]}' for k in differing)})" for n, f in zip(names, flats, strict=True)]
    return names


def load_runs(run_dirs: Iterable[str | Path], device: str = "cpu") -> list[Run]:
    """:class:`Run` of each run folder (see :func:`find_run_dirs`); a folder without
    weights yet (a run still training) comes without a model."""
    paths = find_run_dirs(run_dirs)
    configs = []
    for path in paths:
        try:
            data = json.loads((path / CONFIG_FILE).read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"{path / CONFIG_FILE} is not valid JSON ({err})") from err
        configs.append(RunConfig.from_dict(data, where=str(path / CONFIG_FILE)))
    runs = []
    for path, cfg, name in zip(paths, configs, _run_names(paths, configs), strict=True):
        model, missing = None, ""
        if (path / WEIGHTS_FILE).is_file():
            model = load_model(path, device=device)
        else:
            missing = f"no {WEIGHTS_FILE} in {path} yet (the run has not finished)"
        runs.append(Run(name, path, cfg, read_metrics(path), model, missing))
    return runs


# ------------------------------------------------------------------------- probe inputs


def balanced_inputs(task: str, per_pair: int, seed: int, k: int = 0, offset: int = 4) -> AnchorDataset:
    """``per_pair`` inputs of every anchor pair of ``task`` (trained pairs from the train
    split, held-out pairs from the held-out split), ordered by pair."""
    spec = task_spec(task, k=k, offset=offset)
    parts: list[AnchorDataset] = []
    for split, pairs in (("train", spec.train_pairs), ("heldout", spec.heldout_pairs)):
        if not pairs:
            continue
        n = per_pair * len(pairs) * 4 + 64
        pool = make_dataset(task, split, n, seed, k=k, offset=offset)
        code = pool.anchor_pairs[:, 0] * 10 + pool.anchor_pairs[:, 1]
        for a, b in pairs:
            index = (code == a * 10 + b).nonzero().squeeze(1)[:per_pair]
            if len(index) < per_pair:  # pragma: no cover - 4x oversampling makes this vanishingly rare
                raise ValueError(f"drew too few inputs of pair ({a},{b}); use another seed")
            parts.append(pool.subset(index))
    return AnchorDataset(
        task,
        "balanced",
        torch.cat([p.token_ids for p in parts]),
        torch.cat([p.targets for p in parts]),
        torch.cat([p.key_positions for p in parts]),
        torch.cat([p.anchor_pairs for p in parts]),
    )


#: The NeurIPS 2024 paper's Fig. 3 input: key 99 at position 2, then the pair (4, 3)
#: (held out in the symmetric and id-ood tasks).
FIG3_TOKENS: tuple[int, ...] = (35, 63, 99, 4, 3, 38, 42, 36, 62)
FIG3_KEY_POSITION = 2


def sample_input(task: str = "symmetric", k: int = 0, offset: int = 4) -> AnchorDataset:
    """The input whose attention and information flow the report draws: the NeurIPS
    paper's Fig. 3 input, with its target under ``task``."""
    spec = task_spec(task, k=k, offset=offset)
    tokens = torch.tensor([FIG3_TOKENS])
    p = FIG3_KEY_POSITION
    a1, a2 = FIG3_TOKENS[p + 1], FIG3_TOKENS[p + 2]
    x = FIG3_TOKENS[p]
    heldout = (a1, a2) in spec.heldout_pairs
    target = composite(x, a1, a2) + (0 if heldout else spec.offset((a1, a2)))
    candidates = {name: torch.tensor([composite(x, a1, a2) + off]) for name, off in spec.candidates.items()} if heldout else {}
    return AnchorDataset(task, "heldout" if heldout else "train", tokens, torch.tensor([target]), torch.tensor([p]), torch.tensor([[a1, a2]]), candidates)


def token_labels(dataset: AnchorDataset, row: int = 0) -> list[str]:
    """Labels of one input's tokens: the key and anchors are marked (``x=57``, ``a1=4``)."""
    tokens = dataset.tokens[row].tolist()
    p = int(dataset.key_positions[row])
    labels = [str(t) for t in tokens]
    labels[p] = f"x={tokens[p]}"
    labels[p + 1] = f"a1={tokens[p + 1]}"
    labels[p + 2] = f"a2={tokens[p + 2]}"
    return labels


# ------------------------------------------------------------------------------ cells


class NotApplicable(Exception):  # noqa: N818 - a reason shown in the report, not an error
    """A probe that does not apply to a run; its message is shown in the report."""


@dataclass
class Cell:
    """What one section shows for one run (or for all runs together)."""

    figure: go.Figure | None = None
    html: str = ""
    note: str = ""
    height: int = 360


@dataclass
class Section:
    key: str
    title: str
    sentence: str
    #: One cell for all runs together, or one per run (side by side).
    cells: list[Cell] = field(default_factory=list)
    combined: bool = False
    seconds: float = 0.0


@dataclass
class Context:
    """What the section builders share: the runs, the config and per-task probe inputs."""

    runs: list[Run]
    config: ReportConfig
    _cache: dict = field(default_factory=dict)

    def cached(self, key: Any, make: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def balanced(self, run: Run) -> AnchorDataset:
        d = run.config.data
        key = ("balanced", d.task, d.k, d.offset)
        return self.cached(key, lambda: balanced_inputs(d.task, self.config.per_pair, self.config.seed, d.k, d.offset).to(self.config.device))

    def sample(self, run: Run) -> AnchorDataset:
        d = run.config.data
        key = ("sample", d.task, d.k, d.offset)
        return self.cached(key, lambda: sample_input(d.task, d.k, d.offset).to(self.config.device))


def _probe(module: str, *names: str) -> list[Any]:
    """Functions of a probe module, or :class:`NotApplicable` naming what is missing."""
    try:
        mod = importlib.import_module(module)
    except ImportError as err:
        raise NotApplicable(f"probe not available: {module} cannot be imported ({err})") from err
    missing = [n for n in names if not hasattr(mod, n)]
    if missing:
        raise NotApplicable(f"probe not available: {module} has no {', '.join(missing)}")
    return [getattr(mod, n) for n in names]


def _per_run(ctx: Context, build: Callable[[Run, Context], Cell]) -> list[Cell]:
    cells = []
    for run in ctx.runs:
        if run.model is None:
            cells.append(Cell(note=f"no model: {run.missing}"))
            continue
        try:
            cells.append(build(run, ctx))
        except NotApplicable as reason:
            cells.append(Cell(note=str(reason)))
        except ValueError as err:  # a probe's clear refusal of this model or input
            cells.append(Cell(note=f"not applicable to this run: {err}"))
    return cells


def _table(frame: pd.DataFrame, digits: int = 3) -> str:
    return frame.to_html(index=False, float_format=lambda v: f"{v:.{digits}f}", border=0, classes="scores", na_rep="–")


def _small(fig: go.Figure, height: int = 340, title: str | None = None) -> go.Figure:
    fig.update_layout(height=height, margin=dict(l=40, r=10, t=40 if title else 20, b=40), title=title)
    return fig


# --------------------------------------------------------------------------- sections


def section_curves(ctx: Context) -> Section:
    """Loss and accuracies per epoch, every run in one figure."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=("training loss", "train / ID accuracy", "held-out: OOD, candidates, commutativity"))
    any_history = False
    for i, run in enumerate(ctx.runs):
        history = (run.metrics or {}).get("history", [])
        if not history:
            continue
        any_history = True
        colour = RUN_COLOURS[i % len(RUN_COLOURS)]
        frame = pd.json_normalize(history)
        shown = [False]  # one legend entry per run (its colour); line styles are in the caption

        def add(column: str, col: int, label: str, dash: str = "solid") -> None:
            if column in frame:
                rows = frame[["epoch", column]].dropna()
                fig.add_trace(
                    go.Scatter(
                        x=rows["epoch"], y=rows[column], name=run.name, legendgroup=run.name, showlegend=not shown[0], mode="lines",
                        line=dict(color=colour, dash=dash), hovertemplate=f"{html.escape(run.name)}<br>{label}: %{{y:.4g}} at epoch %{{x}}<extra></extra>",
                    ),
                    row=1,
                    col=col,
                )  # fmt: skip
                shown[0] = True

        add("loss", 1, "loss")
        add("train_acc", 2, "train", "dot")
        add("id_acc", 2, "ID")
        add("ood_acc", 3, "OOD")
        add("commutativity", 3, "commutativity", "dot")
        for column in frame.columns:
            if column.startswith("heldout."):
                _, pair, candidate = column.split(".", 2)
                add(column, 3, f"({pair}) {candidate}", "solid" if candidate == "inferential" else "dash")
    sentence = (
        "Training loss and accuracies per epoch, one colour per run; line styles: solid loss, ID, OOD and held-out inferential target, "
        "dotted train and commutativity, dashed held-out symmetric target (hover a line for its name); "
        "the accuracy curves behind NeurIPS 2024 Fig. 2 and the journal's Fig. 3A, and the epochs-to-fit of NeurIPS Fig. 6 / journal Fig. 8."
    )
    if not any_history:
        return Section("curves", "Training curves", sentence, [Cell(note="no run has a training history (metrics.json) yet")], combined=True)
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_yaxes(range=[-0.02, 1.02], row=1, col=2)
    fig.update_yaxes(range=[-0.02, 1.02], row=1, col=3)
    epochs = max((len((r.metrics or {}).get("history", [])) for r in ctx.runs), default=0)
    fig.update_xaxes(title_text="epoch", **({"dtick": 1} if epochs <= 12 else {}))
    _small(fig, 420)
    fig.update_layout(margin=dict(t=50), legend=dict(orientation="h", yanchor="top", y=-0.22, x=0, font=dict(size=11)))
    return Section("curves", "Training curves", sentence, [Cell(figure=fig, height=420 + 20 * len(ctx.runs))], combined=True)


def accuracy_table(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per run: status, epochs and every final accuracy its metrics hold."""
    rows = []
    for run in runs:
        metrics = run.metrics or {}
        final = metrics.get("final", {}) or {}
        row: dict[str, Any] = {
            "run": run.name,
            "task": run.config.data.task,
            "gamma": run.config.init.gamma,
            "weight_decay": run.config.train.weight_decay,
            "status": metrics.get("status", "no metrics"),
            "epochs": final.get("epoch", len(metrics.get("history", []))),
            "train": final.get("train_acc"),
            "ID": final.get("id_acc"),
        }
        for pair, accs in final.get("heldout", {}).items():
            for candidate, value in accs.items():
                row[f"({pair}) {candidate}"] = value
        if "ood_acc" in final:
            row["OOD"] = final["ood_acc"]
        if "commutativity" in final:
            row["commutativity"] = final["commutativity"]
        rows.append(row)
    return pd.DataFrame(rows)


ACCURACY_COLUMNS_SKIP = ("run", "task", "gamma", "weight_decay", "status", "epochs")


def section_accuracies(ctx: Context) -> Section:
    table = accuracy_table(ctx.runs)
    measures = [c for c in table.columns if c not in ACCURACY_COLUMNS_SKIP and table[c].notna().any()]
    sentence = (
        "Final accuracy of each run on the training pairs, the ID test set, the held-out pair against each candidate target "
        "(inferential x-10, symmetric x-6), OOD and commutativity: one cell of NeurIPS 2024 Fig. 2 (symmetric vs inferential) "
        "and of the journal's Fig. 3 (ID / OOD / commutativity phases)."
    )
    if not measures:
        return Section("accuracies", "Accuracies", sentence, [Cell(html=_table(table), note="no run has final accuracies yet")], combined=True)
    fig = go.Figure()
    for i, row in table.iterrows():
        values = [row[m] for m in measures]
        fig.add_trace(go.Bar(x=measures, y=values, name=row["run"], marker_color=RUN_COLOURS[i % len(RUN_COLOURS)], text=[None if pd.isna(v) else f"{v:.2f}" for v in values], textposition="outside"))
    fig.update_layout(barmode="group", yaxis=dict(range=[0, 1.12], title="accuracy"))
    _small(fig, 420)
    # the runs' legend in rows above the plot: long run names would squeeze it from the side
    fig.update_layout(margin=dict(t=30 + 20 * len(ctx.runs)), legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, font=dict(size=11)))
    return Section("accuracies", "Accuracies", sentence, [Cell(figure=fig, html=_table(table), height=420 + 20 * len(ctx.runs))], combined=True)


def attention_heads_view(run: Run, ctx: Context) -> Cell:
    (attention_patterns,) = _probe("probes.flow", "attention_patterns")
    model = run.model
    assert model is not None
    sample = ctx.sample(run)
    patterns = attention_patterns(model, sample.tokens)[:, 0]  # [layer, head, query, source]
    n_layers, n_heads = patterns.shape[:2]
    view = circuitsvis_view(
        "AttentionHeads",
        attention=patterns.reshape(n_layers * n_heads, *patterns.shape[2:]).float(),
        tokens=token_labels(sample),
        attentionHeadNames=[f"L{layer}H{head}" for layer in range(n_layers) for head in range(n_heads)],
        maskUpperTri=True,
    )
    pair = sample.anchor_pairs[0].tolist()
    return Cell(html=view, note=f"the NeurIPS Fig. 3 input (pair ({pair[0]},{pair[1]})); heads L(layer)H(head); each row (query) attends to the columns (sources)")


def section_attention(ctx: Context) -> Section:
    sentence = (
        "Attention patterns of every layer and head on the NeurIPS paper's sample input 35 63 99 4 3 38 42 36 62 (key 99, held-out pair (4,3)), "
        "drawn with circuitsvis: the attention matrices that NeurIPS 2024 Fig. 3a/3c read as information flow."
    )
    return Section("attention", "Attention patterns", sentence, _per_run(ctx, attention_heads_view))


def section_stable_ranks(ctx: Context) -> Section:
    (weight_stable_ranks,) = _probe("probes.rank", "weight_stable_ranks")
    fig = go.Figure()
    rows = []
    for i, run in enumerate(ctx.runs):
        if run.model is None:
            continue
        frame = weight_stable_ranks(run.model)
        labels = [name if pd.isna(layer) else f"L{layer} {name}" for layer, name in zip(frame["layer"], frame["name"], strict=True)]
        fig.add_trace(go.Bar(x=labels, y=frame["stable_rank"], name=run.name, marker_color=RUN_COLOURS[i % len(RUN_COLOURS)]))
        w_q = frame[(frame["name"] == "W_Q") & (frame["layer"] == 0)]["stable_rank"]
        rows.append({"run": run.name, "L0 W_Q stable rank": float(w_q.iloc[0]) if len(w_q) else math.nan, "mean over matrices": float(frame["stable_rank"].mean())})
    sentence = (
        "Stable rank ||W||_F^2 / ||W||_2^2 of every weight matrix (heads merged; L0 is layer 0, as TransformerLens numbers layers); the journal's Fig. 5C colours its "
        "(gamma, weight decay) grid by layer 0's W_Q stable rank, which falls as the phase index rises."
    )
    if not rows:
        return Section("stable-ranks", "Stable ranks", sentence, [Cell(note="no run has weights yet")], combined=True)
    fig.update_layout(barmode="group", yaxis_title="stable rank")
    _small(fig, 380)
    return Section("stable-ranks", "Stable ranks", sentence, [Cell(figure=fig, html=_table(pd.DataFrame(rows), 2), height=380)], combined=True)


def spectra_cell(run: Run, ctx: Context) -> Cell:
    singular_value_spectra, plot_spectra = _probe("probes.geometry", "singular_value_spectra", "plot_spectra")
    assert run.model is not None
    fig = plot_spectra(singular_value_spectra(run.model), normalized=True, title=None)
    fig.update_traces(marker=dict(size=3), line=dict(width=1.5))
    # the matrices' legend in rows under the plot, so that it does not squeeze the plot
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, x=0, font=dict(size=9), entrywidth=62, title=dict(text="matrix", side="top left")), yaxis_title="s_i / s_max")
    return Cell(figure=_small(fig, 470), height=470)


def section_spectra(ctx: Context) -> Section:
    sentence = (
        "Singular values of every weight matrix (heads merged), divided by the largest, on a log scale: a few dominant "
        "directions mean a condensed, low-complexity matrix (the spectra behind the stable ranks of the journal's Fig. 5C)."
    )
    return Section("spectra", "Singular spectra", sentence, _per_run(ctx, spectra_cell))


#: Inputs of the similarity heatmaps: keys x pairs, with targets that coincide across cells.
SIMILARITY_KEYS = tuple(range(30, 42))
RESIDUAL_PAIRS = ((1, 2), (2, 1), (1, 3), (3, 4), (4, 3), (2, 4))
VALUE_PAIRS = ((1, 3), (2, 3), (3, 3), (4, 3))


def flow_cell(run: Run, ctx: Context) -> Cell:
    information_flow, top_paths, plot_flow = _probe("probes.flow", "information_flow", "top_paths", "plot_flow")
    assert run.model is not None
    sample = ctx.sample(run)
    labels = token_labels(sample)
    edges = information_flow(run.model, sample.tokens)
    paths = top_paths(edges, threshold=0.05, top=5)
    fig = plot_flow(edges, labels=labels, paths=paths, min_weight=0.05, n_highlight=3, title=None)
    fig.update_layout(legend=dict(orientation="h", y=-0.25, font=dict(size=9)))
    table = pd.DataFrame(
        {
            "rank": paths["rank"],
            "path": [" -> ".join(labels[p] for p in path) for path in paths["path"]],
            "score": paths["score"],
        }
    )
    return Cell(figure=_small(fig, 420), html=_table(table), height=420)


def section_flow(ctx: Context) -> Section:
    sentence = (
        "The attention of each layer on that same input as edges from source to query position (line width = attention, "
        "heads summed, edges below 0.05 hidden), with the top paths into the last position ranked by the product of their "
        "weights: NeurIPS 2024 Fig. 3a (symmetric: the anchors fuse at the last position) vs 3c (inferential: the key moves onto each anchor first)."
    )
    return Section("flow", "Information flow", sentence, _per_run(ctx, flow_cell))


def _similarity_cell(kind: str) -> Callable[[Run, Context], Cell]:
    def build(run: Run, ctx: Context) -> Cell:
        input_grid, similarity, plot_similarity = _probe(
            "probes.similarity", "input_grid", "residual_similarity" if kind == "residual" else "value_similarity", "plot_similarity"
        )
        assert run.model is not None
        if run.model.cfg.n_layers < 2:
            raise NotApplicable(f"not applicable: the model has {run.model.cfg.n_layers} layer; this probe reads layer 1 (the second)")
        pairs = RESIDUAL_PAIRS if kind == "residual" else VALUE_PAIRS
        grid = input_grid(keys=SIMILARITY_KEYS, pairs=list(pairs), seed=ctx.config.seed).to(ctx.config.device)
        result = similarity(run.model, grid, layer=1)
        fig = plot_similarity(result, title=f"block score {result.score:.3f}")
        fig.update_traces(marker=dict(size=4), selector=dict(type="scatter"))
        labels = list(fig.data[0].x)
        pairs = list(zip(result.inputs["a1"], result.inputs["a2"], strict=True))
        starts = [i for i in range(len(pairs)) if i == 0 or pairs[i] != pairs[i - 1]]  # pair-major: one tick per pair block
        ticks = dict(showticklabels=True, tickmode="array", tickvals=[labels[i] for i in starts], ticktext=[f"({pairs[i][0]},{pairs[i][1]})" for i in starts], tickfont=dict(size=10))
        keys = f"keys {SIMILARITY_KEYS[0]}..{SIMILARITY_KEYS[-1]} within each pair"
        fig.update_layout(
            showlegend=False,
            xaxis=dict(**ticks, title=dict(text=keys, font=dict(size=11)), constrain="domain"),
            yaxis=dict(**ticks, scaleanchor="x", scaleratio=1, constrain="domain"),
        )
        return Cell(figure=_small(fig, 440, title=f"block score {result.score:.3f}"), height=440)

    return build


def section_residual_similarity(ctx: Context) -> Section:
    keys = f"{SIMILARITY_KEYS[0]}..{SIMILARITY_KEYS[-1]}"
    sentence = (
        f"Cosine similarity of the last position's residual stream after layer 1's attention (layers numbered from 0, as TransformerLens does) across inputs with keys {keys} "
        f"and pairs {', '.join(f'({a},{b})' for a, b in RESIDUAL_PAIRS)} (pair-major), equal-target cells outlined, with the block score "
        "(mean similarity of equal-target cells minus the others): NeurIPS 2024 Fig. 4a (inferential) / 4b (symmetric)."
    )
    return Section("residual-similarity", "Similarity: residual stream after layer 1's attention", sentence, _per_run(ctx, _similarity_cell("residual")))


def section_value_similarity(ctx: Context) -> Section:
    sentence = (
        "Cosine similarity of layer 1's value vectors at the first anchor's position across (key, first anchor), "
        "cells with equal g(x; a1) = x + s(a1) outlined, with the block score: NeurIPS 2024 Fig. 4c (the inferential model "
        "computes the single-anchor step; the journal's Fig. 4D shows the same on second-anchor-masked outputs)."
    )
    return Section("value-similarity", "Similarity: layer 1's value vectors", sentence, _per_run(ctx, _similarity_cell("value")))


def condensation_cell(run: Run, ctx: Context) -> Cell:
    condensation, plot_condensation, merged_weight = (
        *_probe("probes.geometry", "condensation", "plot_condensation"),
        *_probe("probes.rank", "merged_weight"),
    )
    assert run.model is not None
    result = condensation(merged_weight(run.model, "W_Q", 0).T, threshold=0.7)
    fig = plot_condensation(result, title="L0 W_Q")
    fig.update_layout(xaxis=dict(showticklabels=False, constrain="domain"), yaxis=dict(showticklabels=False, scaleanchor="x", scaleratio=1, constrain="domain"))
    sizes = list(result.group_sizes[:8])
    note = f"{result.n_groups} groups of neurons with similarity > 0.7; largest sizes {sizes}"
    return Cell(figure=_small(fig, 400, title=f"{result.n_groups} groups at > 0.7"), note=note, height=400)


def section_condensation(ctx: Context) -> Section:
    sentence = (
        "Cosine similarity between the input weight vectors of layer 0's query neurons (W_Q, heads merged), "
        "grouped at similarity > 0.7: a few large blocks mean condensation; NeurIPS 2024 Fig. 5a (small init) / 5b (large init) "
        "and the journal's Fig. 5A."
    )
    return Section("condensation", "W_Q condensation", sentence, _per_run(ctx, condensation_cell))


def embedding_cell(run: Run, ctx: Context) -> Cell:
    (plot_embedding_pca,) = _probe("probes.geometry", "plot_embedding_pca")
    result = _embedding_pca(run, ctx)
    fig = plot_embedding_pca(result, title="")
    fig.update_layout(coloraxis_showscale=False)
    fig.update_traces(textfont=dict(size=8))
    title = f"ordinal score {result.ordinal_score:.2f} ({result.ordinal_component})"
    return Cell(figure=_small(fig, 400, title=title), height=400)


def section_embedding(ctx: Context) -> Section:
    measured = []
    for run in ctx.runs:
        if run.model is None:
            continue
        try:
            measured.append(f"{run.name} {_embedding_pca(run, ctx).ordinal_score:.2f}")
        except (NotApplicable, ValueError):
            continue
    found = f" Measured here, the ordinal score: {'; '.join(measured)}." if measured else ""
    sentence = (
        "The token embeddings of 20..99 projected on their first two principal components, each token written at its place, "
        "with the ordinal score (largest |Spearman correlation| of token value and PC1 or PC2, 1 for a perfectly ordered layout). "
        "NeurIPS 2024 Fig. 5c/5d and the journal's Fig. 5B expect an ordinal layout (tokens in the order of their values) under "
        "small init and none under large init." + found
    )
    return Section("embedding-pca", "Embedding PCA", sentence, _per_run(ctx, embedding_cell))


#: Components the embedding-covariance figure shows.
EIGEN_TOP = 10


def _embedding_pca(run: Run, ctx: Context) -> Any:
    (embedding_pca,) = _probe("probes.geometry", "embedding_pca")
    assert run.model is not None
    return ctx.cached(("embedding-pca", run.name), lambda: embedding_pca(run.model))


def variance_shares(eigenvalues: Any, top: int = EIGEN_TOP) -> list[float]:
    """Share of the total variance in each of the ``top`` largest covariance eigenvalues."""
    values = [max(float(v), 0.0) for v in eigenvalues]
    total = sum(values)
    return [v / total if total > 0 else math.nan for v in values[:top]]


def eigenvalue_cell(run: Run, ctx: Context) -> Cell:
    shares = variance_shares(_embedding_pca(run, ctx).eigenvalues)
    index = list(range(1, len(shares) + 1))
    cumulative = [sum(shares[:i]) for i in index]
    fig = go.Figure(
        [
            go.Bar(x=index, y=shares, name="share of variance", marker_color="#636efa", text=[f"{v:.2f}" for v in shares], textposition="outside",
                   hovertemplate="component %{x}: %{y:.3f} of the variance<extra></extra>"),
            go.Scatter(x=index, y=cumulative, name="cumulative", mode="lines+markers", line=dict(color="#444", dash="dot"),
                       hovertemplate="components 1..%{x}: %{y:.3f}<extra></extra>"),
        ]
    )  # fmt: skip
    fig.update_layout(
        xaxis=dict(title="principal component", dtick=1),
        yaxis=dict(title="share of the variance", range=[0, 1.08]),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
    )
    note = f"top 2 components: {sum(shares[:2]):.2f} of the variance; top {len(shares)}: {cumulative[-1]:.2f}"
    return Cell(figure=_small(fig, 340), note=note, height=340)


def section_eigenvalues(ctx: Context) -> Section:
    measured = []
    for run in ctx.runs:
        if run.model is None:
            continue
        try:
            shares = variance_shares(_embedding_pca(run, ctx).eigenvalues)
        except (NotApplicable, ValueError):
            continue
        measured.append(f"{run.name} {sum(shares[:2]):.2f}")
    found = f" Measured here, the share of the variance in the top 2 components: {'; '.join(measured)}." if measured else ""
    sentence = (
        f"The {EIGEN_TOP} largest eigenvalues of the covariance of the token embeddings 20..99, each as its share of the total variance "
        "(bars), with the cumulative share (dotted). NeurIPS 2024 Fig. 7 expects a few large eigenvalues (most of the variance in the "
        "first components) under small init and a flatter spectrum under large init." + found
    )
    return Section("embedding-eigenvalues", "Embedding covariance eigenvalues", sentence, _per_run(ctx, eigenvalue_cell))


def masking_cell(kind: str) -> Callable[[Run, Context], Cell]:
    def build(run: Run, ctx: Context) -> Cell:
        mask_fn, candidate_labelings, project, cluster_scores, plot_projection = _probe(
            "probes.masking", "mask_key" if kind == "key" else "mask_second_anchor", "candidate_labelings", "project", "cluster_scores", "plot_projection"
        )
        assert run.model is not None
        data = ctx.balanced(run)
        masked = mask_fn(run.model, data)
        vectors = masked.last_position(f"blocks.{run.model.cfg.n_layers - 1}.hook_resid_post")
        labels = candidate_labelings(data)
        colour = "ordered_pair" if kind == "key" else "first_anchor"
        columns = ("ordered_pair", "unordered_pair", "composite_shift") if kind == "key" else ("ordered_pair", "first_anchor", "single_anchor_target")
        frame = project(vectors, method=ctx.config.projection, perplexity=min(12.0, len(data) - 1.0), seed=ctx.config.seed, labels=labels)
        scores = cluster_scores(vectors, labels, columns=columns, method="agglomerative", seed=ctx.config.seed)
        fig = plot_projection(frame, color=colour, title=None)
        # the pairs' legend in rows under the plot, so that it does not squeeze the plot
        fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0, font=dict(size=10), entrywidth=44, title=dict(text=colour.replace("_", " "), side="top left")))
        note = ""
        if kind != "key":
            cosine_similarity_matrix, equal_mask, block_score = _probe("probes.similarity", "cosine_similarity_matrix", "equal_mask", "block_score")
            score = block_score(cosine_similarity_matrix(vectors), equal_mask(labels["single_anchor_target"].tolist()))
            note = f"block score of equal g(x; a1) in the cosine similarity of these outputs (journal Fig. 4D): {score:.3f}"
        return Cell(figure=_small(fig, 460), html=_table(scores.drop(columns=["method"])), note=note, height=460)

    return build


def section_key_masking(ctx: Context) -> Section:
    sentence = (
        f"Last-block outputs at the last position with the key token masked after the softmax, projected to 2-D ({ctx.config.projection}), "
        "one colour per anchor pair, with how well ordered pairs, unordered (symmetric) pairs and composite shifts explain the clusters "
        "(adjusted Rand index, silhouette): the journal's Fig. 4C (symmetric pairs merge in Phase 2 with good commutativity)."
    )
    return Section("key-masking", "Key-token masking", sentence, _per_run(ctx, masking_cell("key")))


def section_second_anchor_masking(ctx: Context) -> Section:
    sentence = (
        f"Last-block outputs with the second anchor masked, projected to 2-D ({ctx.config.projection}) and coloured by the first anchor, "
        "with cluster scores and the block score of equal g(x; a1) = x + s(a1) in their cosine similarity: what key and first anchor "
        "alone produce, the journal's Fig. 4B/4D (Phase 3 computes the single-anchor step)."
    )
    return Section("second-anchor-masking", "Second-anchor masking", sentence, _per_run(ctx, masking_cell("second")))


def reproduction_verdicts(runs: Sequence[Run]) -> list[str]:
    """For runs inside an ``interp-init reproduce`` folder (``DIR/<task>/<regime>`` beside
    ``DIR/summary.json``), the line the command printed: whether the flip was reproduced."""
    from training.reproduce import check_flip, failed_criteria  # the reproduction's own criteria

    lines = []
    for root in dict.fromkeys(run.path.parent.parent for run in runs):
        summary_path = root / "summary.json"
        if not summary_path.is_file():
            continue
        try:
            summary = json.loads(summary_path.read_text(encoding="utf-8"))
            checks = check_flip(summary)
        except (ValueError, KeyError, TypeError):
            continue  # an unfinished or damaged summary: no verdict rather than a wrong one
        lines.append(f"{root.name}: " + ("flip reproduced (all criteria met)" if checks["all"] else f"flip NOT reproduced; failed: {failed_criteria(checks)}"))
    return lines


def section_verdict(ctx: Context) -> Section:
    """What each run learned: its solution in the papers' terms and the numbers behind it."""
    rows = []
    for run in ctx.runs:
        metrics = run.metrics or {}
        rank = None
        if run.model is not None:
            stable_rank, merged_weight = _probe("probes.rank", "stable_rank", "merged_weight")
            rank = stable_rank(merged_weight(run.model, "W_Q", 0))
        v = run_verdict(run.config.data.task, metrics.get("final", {}) or {}, metrics.get("status", "no metrics"), rank)
        rows.append({"run": run.name, "task": run.config.data.task, "architecture": run.config.model.architecture,
                     "gamma": run.config.init.gamma, "learned": v.solution, "evidence": v.evidence})  # fmt: skip
    expected = [EXPECTED.get(task, "") for task in dict.fromkeys(r.config.data.task for r in ctx.runs)]
    flips = reproduction_verdicts(ctx.runs)
    parts = [_table(pd.DataFrame(rows), 2)]
    parts += [f'<p class="verdict">{html.escape(line)}</p>' for line in flips]
    sentence = " ".join(expected) + (
        " Below, each run as measured: its solution and the numbers that decide it (one cell of NeurIPS 2024 Fig. 2 or of the journal's Fig. 3A)."
    )
    return Section("verdict", "Verdict: what each model learned", sentence, [Cell(html="".join(parts))], combined=True)


SECTIONS: tuple[Callable[[Context], Section], ...] = (
    section_verdict,
    section_curves,
    section_accuracies,
    section_attention,
    section_flow,
    section_key_masking,
    section_second_anchor_masking,
    section_residual_similarity,
    section_value_similarity,
    section_condensation,
    section_embedding,
    section_eigenvalues,
    section_stable_ranks,
    section_spectra,
)


# ------------------------------------------------------------------------- the page


_SOURCE_MAP = re.compile(r"^\s*//# sourceMappingURL=.*$", re.MULTILINE)


def _inline_js(source: str) -> str:
    """JavaScript safe to inline in a ``<script>`` element, without a source-map link."""
    return _SOURCE_MAP.sub("", source).replace("</script", "<\\/script")


def circuitsvis_bundle() -> str:
    """circuitsvis' browser bundle (defines the global ``CircuitsVis``), from the installed package."""
    import circuitsvis

    path = Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js"
    if not path.is_file():
        raise ValueError(f"circuitsvis' bundle {path} is missing; reinstall circuitsvis (pip install --force-reinstall circuitsvis)")
    return _inline_js(path.read_text(encoding="utf-8"))


def circuitsvis_view(component: str, **props: Any) -> str:
    """A circuitsvis ``component`` as an HTML fragment for a page that loads
    :func:`circuitsvis_bundle` once in its head.

    Unlike circuitsvis' own fragment, the container is an explicit ``<div ...></div>``
    (circuitsvis writes a self-closed ``<div/>``, which HTML reads as an open tag, so the
    next view would be nested in it and replaced when this one mounts), and the bundle is
    not repeated per view.
    """
    from circuitsvis.utils.convert_props import convert_props

    element = "circuits-vis-" + uuid.uuid4().hex[:12]
    return (
        f'<div id="{element}" class="circuitsvis-view" style="margin: 15px 0;"></div>\n'
        f"<script>CircuitsVis.render({json.dumps(element)}, CircuitsVis.{component}, {convert_props(props)});</script>"
    )


#: plotly.js options of every figure: a short mode bar (download as PNG, zoom, pan, reset)
#: that shows only while the pointer is over the figure, so that it never sits on the
#: titles of narrow side-by-side figures.
PLOTLY_CONFIG = {
    "displayModeBar": "hover",
    "displaylogo": False,
    "responsive": True,
    "modeBarButtonsToRemove": ["select2d", "lasso2d", "zoomIn2d", "zoomOut2d", "autoScale2d", "toggleSpikelines", "hoverClosestCartesian", "hoverCompareCartesian"],
}

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 2em; }
h3 { font-size: 0.95em; margin: 0 0 6px 0; color: #444; overflow-wrap: anywhere; }
p.what { color: #444; max-width: 70em; }
nav a { margin-right: 1em; }
.grid { display: grid; gap: 16px; grid-template-columns: repeat(var(--wide, 1), minmax(0, 1fr)); }
@media (max-width: 1250px) { .grid { grid-template-columns: repeat(var(--medium, 1), minmax(0, 1fr)); } }
@media (max-width: 760px) { .grid { grid-template-columns: minmax(0, 1fr); } }
.table-wrap { overflow-x: auto; max-width: 100%; }
.cell { border: 1px solid #e4e4e4; border-radius: 6px; padding: 8px; min-width: 0; overflow-x: auto; }
.note { color: #775; font-style: italic; font-size: 0.9em; }
table.scores, table.runs { border-collapse: collapse; font-size: 0.85em; margin: 6px 0; }
table.scores th, table.scores td, table.runs th, table.runs td { border-bottom: 1px solid #eee; padding: 2px 8px; text-align: right; white-space: nowrap; }
/* long text (run names, the verdict's evidence) wraps between words, never inside one */
table.scores td:first-child, table.runs td:first-child, #verdict table.scores td, #verdict table.scores th { white-space: normal; overflow-wrap: normal; word-break: normal; text-align: left; }
table.runs td:first-child { min-width: 14em; }
table.scores th:first-child, table.runs th:first-child { text-align: left; }
p.verdict { font-weight: 600; }
/* circuitsvis' head selector sizes each head's tile to 1/12 of its container, narrower
   than the tile's label ("L0H0") in a side-by-side cell: fixed tiles that wrap instead */
.circuitsvis-view h3:first-child + div { margin-left: 0 !important; margin-right: 0 !important; }
.circuitsvis-view h3:first-child + div > div { flex: 0 0 64px !important; width: 64px !important; max-width: 64px !important; }
.meta { color: #666; font-size: 0.85em; }
"""


@dataclass
class Page:
    """The report's HTML and its figures by name (for :func:`write_images`)."""

    html: str
    figures: dict[str, go.Figure]
    sections: list[Section]


def svg_only(fig: go.Figure) -> go.Figure:
    """``fig`` with any WebGL ``scattergl`` trace (plotly express picks it past 1000 points)
    redrawn as an SVG ``scatter``: WebGL needs a GPU or a software fallback that headless
    and locked-down browsers may refuse, SVG draws everywhere."""
    if not any(trace.type == "scattergl" for trace in fig.data):
        return fig
    traces = [
        go.Scatter({k: v for k, v in trace.to_plotly_json().items() if k != "type"}, skip_invalid=True) if trace.type == "scattergl" else trace
        for trace in fig.data
    ]
    return go.Figure(data=traces, layout=fig.layout)


def _relative(path: Path, start: str | Path | None) -> str:
    """``path`` relative to ``start`` (default the working directory), as the page shows it;
    the absolute path where there is no relative one (another drive on Windows)."""
    try:
        return os.path.relpath(Path(path).resolve(), Path(start or ".").resolve())
    except ValueError:  # pragma: no cover - Windows, another drive
        return str(path)


#: Pixels above every figure's plot area and title kept free for plotly's mode bar, which
#: browsers without hover (touch screens, headless) show at all times.
MODEBAR_ROOM = 28


def _room_for_modebar(fig: go.Figure) -> go.Figure:
    """``fig`` with its top margin grown by :data:`MODEBAR_ROOM` and its title placed just
    above the plot area, so that the mode bar (top right) never sits on a title."""
    top = fig.layout.margin.t
    fig.update_layout(margin=dict(t=(80 if top is None else top) + MODEBAR_ROOM))
    if fig.layout.title.text:
        fig.update_layout(title=dict(yref="paper", y=1, yanchor="bottom", pad=dict(b=8)))
    return fig


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "run"


def build_page(runs: list[Run], config: ReportConfig, out_dir: str | Path | None = None) -> Page:
    """Run every section on ``runs`` and assemble the page; the run table shows each run's
    folder relative to ``out_dir`` (the report's folder; default the working directory)."""
    ctx = Context(runs, config)
    sections = []
    for builder in SECTIONS:
        t0 = time.perf_counter()
        try:
            section = builder(ctx)
        except NotApplicable as reason:
            doc = (builder.__doc__ or builder.__name__).strip().splitlines()[0]
            section = Section(builder.__name__.removeprefix("section_"), doc, "", [Cell(note=str(reason))], combined=True)
        section.seconds = time.perf_counter() - t0
        sections.append(section)

    figures: dict[str, go.Figure] = {}
    body: list[str] = []
    uses_circuitsvis = False
    n = len(runs)
    for section in sections:
        cells_html = []
        names = ["all runs"] if section.combined else [r.name for r in runs]
        for name, cell in zip(names, section.cells, strict=True):
            parts = [] if section.combined else [f"<h3>{html.escape(name)}</h3>"]
            if cell.figure is not None:
                cell.figure = _room_for_modebar(svg_only(cell.figure))
                fig_name = section.key if section.combined else f"{section.key}-{_slug(name)}"
                figures[fig_name] = cell.figure
                parts.append(
                    cell.figure.to_html(
                        full_html=False,
                        include_plotlyjs=False,
                        div_id=f"fig-{fig_name}",
                        default_width="100%",
                        default_height=f"{cell.height}px",
                        config=PLOTLY_CONFIG,
                    )
                )
            if cell.html:
                uses_circuitsvis |= "CircuitsVis.render(" in cell.html
                parts.append(cell.html)
            if cell.note:
                parts.append(f'<p class="note">{html.escape(cell.note)}</p>')
            cells_html.append(f'<div class="cell">{"".join(parts)}</div>')
        # a fixed number of columns (plotly sizes a figure once, as the page is parsed): every
        # run side by side on a wide window (at most 4), 2 on a medium one, 1 on a narrow one
        columns = 1 if section.combined else n
        style = f"--wide: {min(columns, 4)}; --medium: {min(columns, 2)};"
        body.append(
            f'<section id="{section.key}"><h2>{html.escape(section.title)}</h2>'
            f'<p class="what">{html.escape(section.sentence)}</p>'
            f'<div class="grid" style="{style}">{"".join(cells_html)}</div></section>'
        )

    import plotly
    import plotly.offline

    runs_table = pd.DataFrame(
        [
            {
                "run": r.name,
                "folder": _relative(r.path, out_dir),
                "task": r.config.data.task,
                "gamma": r.config.init.gamma,
                "weight decay": r.config.train.weight_decay,
                "lr": r.config.train.lr,
                "d_model": r.config.model.d_model,
                "layers": r.config.model.n_layers,
                "heads": r.config.model.n_heads,
                "seed": r.config.seed,
                "status": (r.metrics or {}).get("status", "no metrics"),
            }
            for r in runs
        ]
    ).to_html(index=False, border=0, classes="runs")
    nav = "".join(f'<a href="#{s.key}">{html.escape(s.title)}</a>' for s in sections)
    scripts = [f"<script>/* plotly.js {plotly.__version__} (plotly.py), inlined once for every figure */\n{_inline_js(plotly.offline.get_plotlyjs())}\n</script>"]
    if uses_circuitsvis:
        scripts.append(f"<script>/* circuitsvis bundle, inlined once */\n{circuitsvis_bundle()}\n</script>")
    timing = ", ".join(f"{s.key} {s.seconds:.1f}s" for s in sections)
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(config.title)}</title>
<style>{_STYLE}</style>
{"".join(scripts)}
</head>
<body>
<h1>{html.escape(config.title)}</h1>
<p class="meta">{n} run(s); probes on {config.per_pair} inputs per anchor pair (seed {config.seed}), projection {config.projection}. Section times: {html.escape(timing)}.</p>
<div class="table-wrap">{runs_table}</div>
<nav>{nav}</nav>
{"".join(body)}
</body>
</html>
"""
    return Page(page, figures, sections)


@contextlib.contextmanager
def limited_threads(threads: int | None) -> Iterator[None]:
    """Run the block with at most ``threads`` torch, BLAS and OpenMP threads (``None``:
    unchanged), then restore the previous settings."""
    if threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits  # scikit-learn's dependency

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(before)


def write_report(
    run_dirs: Iterable[str | Path],
    out_path: str | Path,
    config: ReportConfig | None = None,
    *,
    images: str | Path | None = None,
    image_format: str = "png",
) -> Path:
    """Write the HTML report of ``run_dirs`` to ``out_path`` and return its path.

    ``run_dirs``: run folders, or folders holding run folders (see :func:`find_run_dirs`).
    With ``images``, every figure is also written there as ``image_format`` (see
    :func:`write_images`).
    """
    config = config or ReportConfig()
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image_format must be one of {IMAGE_FORMATS}, got {image_format!r}")
    out = Path(out_path)
    if out.is_dir():
        raise ValueError(f"--out {out} is a folder; give a file name such as {out / 'report.html'}")
    runs = load_runs(run_dirs, device=config.device)
    with limited_threads(config.threads):
        page = build_page(runs, config, out_dir=out.parent)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(page.html, encoding="utf-8")
    tmp.replace(out)
    if images is not None:
        write_images(page.figures, images, image_format)
    return out


# ----------------------------------------------------------------------- static images


class StaticExportUnavailable(RuntimeError):
    """kaleido or a Chromium/Chrome for it is missing; the message says what to install."""


def _find_browser() -> str | None:
    explicit = os.environ.get("BROWSER_PATH")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    try:
        from choreographer.browsers.chromium import Chromium

        return Chromium.find_browser(skip_local=False)
    except ImportError:  # pragma: no cover - choreographer comes with kaleido
        return None


def static_export_problem() -> str | None:
    """``None`` when figures can be written as PNG/SVG/PDF here, else what to install."""
    if importlib.util.find_spec("kaleido") is None:
        return "static images need kaleido: pip install kaleido (or pip install 'interp-init[images]'), and a Chromium or Chrome (Debian: apt-get install chromium)"
    browser = _find_browser()
    if browser is None:
        where = f"BROWSER_PATH={os.environ['BROWSER_PATH']!r} is not a file; " if os.environ.get("BROWSER_PATH") else ""
        return (
            f"static images need a Chromium or Chrome for kaleido and none was found: {where}install Debian's chromium "
            "(apt-get install chromium) or Google Chrome, or set BROWSER_PATH to its executable "
            "(kaleido.get_chrome_sync() would download one, which needs internet access)"
        )
    return None


def write_images(figures: dict[str, go.Figure], out_dir: str | Path, image_format: str = "png", *, width: int = 900, height: int | None = None, scale: float = 2.0) -> list[Path]:
    """Write each figure to ``out_dir/<name>.<image_format>`` (PNG, SVG or PDF) with one
    headless browser; returns the paths.

    Raises :class:`StaticExportUnavailable` naming what to install when kaleido or a
    Chromium/Chrome is missing.  Works offline: MathJax is off and plotly.js comes from
    the installed plotly package.
    """
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image_format must be one of {IMAGE_FORMATS}, got {image_format!r}")
    problem = static_export_problem()
    if problem:
        raise StaticExportUnavailable(problem)
    import kaleido

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jobs, paths = [], []
    for name, fig in figures.items():
        path = out / f"{_slug(name)}.{image_format}"
        fig_height = height or fig.layout.height or 500
        jobs.append({"fig": fig, "path": path, "opts": {"format": image_format, "width": width, "height": fig_height, "scale": scale}})
        paths.append(path)
    if jobs:
        kaleido.write_fig_from_object_sync(jobs, kopts={"mathjax": False, "path": _find_browser()}, cancel_on_error=True)
    return paths


# ---------------------------------------------------------------------- command line


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--out", "out", default="report.html", show_default=True, type=click.Path(dir_okay=False), help="The HTML file to write.")
@click.option("--per-pair", default=ReportConfig.per_pair, show_default=True, type=int, help="Probe inputs per anchor pair.")
@click.option("--projection", default=ReportConfig.projection, show_default=True, type=click.Choice(PROJECTIONS), help="2-D projection of the masked outputs.")
@click.option("--seed", default=ReportConfig.seed, show_default=True, type=int, help="Seed of the probe inputs.")
@click.option("--device", default=ReportConfig.device, show_default=True, help="Device for the probes.")
@click.option("--title", default=ReportConfig.title, show_default=True, help="Page title.")
@click.option("--images", default=None, type=click.Path(file_okay=False), help="Also write every figure into this folder (needs kaleido and Chromium).")
@click.option("--image-format", default="png", show_default=True, type=click.Choice(IMAGE_FORMATS))
def report_command(run_dirs: tuple[str, ...], out: str, per_pair: int, projection: str, seed: int, device: str, title: str, images: str | None, image_format: str) -> None:
    """Write one offline HTML page comparing RUN_DIRS (run folders, or folders that hold them).

    Exits with code 1, after writing the page and a line saying which, when any run did
    not complete (failed, diverged, or unfinished).
    """
    from training.sweep import problem_summary, run_status

    config = ReportConfig(per_pair=per_pair, projection=projection, seed=seed, device=device, title=title)
    try:
        path = write_report(run_dirs, out, config, images=images, image_format=image_format)
    except StaticExportUnavailable as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"report: {path}")
    statuses = {str(run): run_status(run) for run in find_run_dirs(run_dirs)}
    bad = {run: status for run, status in statuses.items() if status != "completed"}
    problem = problem_summary(bad, len(statuses), path)
    if problem:
        names = "; ".join(f"{run}: {status}" for run, status in list(bad.items())[:3]) + ("; ..." if len(bad) > 3 else "")
        click.echo(f"interp-init: {problem} ({names})", err=True)
        raise click.exceptions.Exit(1)
