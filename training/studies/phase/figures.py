"""The papers' figures from a sweep's results table (plotly), each described in its own
docstring: NeurIPS Fig. 2 (:func:`fig_neurips_fig2`), the journal's Fig. 3A, 3B and 5C
(:func:`fig_journal_fig3a`, :func:`fig_journal_fig3b`, :func:`fig_journal_fig5c`), NeurIPS
Fig. 6 / journal Fig. 8A and 8B (:func:`fig_complexity_epochs`, :func:`fig_pair_epochs`),
and the journal's Fig. 7C (:func:`~training.studies.phase.figures.fig_journal_fig7c`).  Each takes
the results table of :func:`training.studies.sweep.load_results`.

:data:`FIGURES` names them; :func:`make_figures` draws those a table supports and
:func:`training.studies.phase.figures.write_html` writes them with plotly.js inlined, so the files
render with no network.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from interp_init.fileio import folder_is_held
from interp_init.outputs import check_output_pages, looks_like_run, refuse_inside_run, study_kind, write_page
from interp_init.paths import check_path_names
from interp_init.tasks.addition import AdditionTask
from interp_init.tasks.anchor import (
    COMMUTATIVITY_THRESHOLD,
    ID_THRESHOLD,
    OOD_THRESHOLD,
    ComplexityTask,
    IdOodTask,
    SymmetricTask,
)
from interp_init.tasks.anchor_pairs import ALL_PAIRS
from interp_init.tasks.base import FIT_THRESHOLD, Task, task_name
from training.studies.phase.aggregation import add_phase, aggregate, best_over, check_columns, param_columns, task_rows
from training.studies.records import RunRecord, check_protocol, pick_paper, protocol_text
from training.studies.study import strangers
from training.studies.sweep.results import (
    RESULTS_FILE,
    check_results_file,
    check_sweep_spec,
    collect_results,
    incomplete_runs,
    pair_column,
    problem_summary,
    write_results,
)
from training.studies.sweep.spec import LOSS_THRESHOLD, PAIR_ACC_THRESHOLD

_SHADE = "rgba(90, 90, 90, 0.55)"
_PHASE_COLOURS = {1: "rgba(220, 80, 60, 0.12)", 2: "rgba(240, 180, 40, 0.15)", 3: "rgba(60, 160, 90, 0.15)"}


def _label(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1:
        return str(int(value))
    return f"{value:g}" if isinstance(value, (float, np.floating)) else str(value)


def _hatch(fig: go.Figure, where: np.ndarray, **subplot: int) -> None:
    """Shade each unit cell (x, y) of the grid where ``where[y, x]`` holds and draw hatching lines across it."""
    for y, x in zip(*np.nonzero(where), strict=True):
        fig.add_shape(
            type="rect", x0=x - 0.5, x1=x + 0.5, y0=y - 0.5, y1=y + 0.5, fillcolor=_SHADE, line_width=0, **subplot
        )
        for t in (-0.25, 0.25, 0.75, -0.75, 0.0):
            x0, y0, x1, y1 = x - 0.5 + max(t, 0), y - 0.5 + max(-t, 0), x + 0.5 - max(-t, 0), y + 0.5 - max(t, 0)
            fig.add_shape(type="line", x0=x0, y0=y0, x1=x1, y1=y1, line=dict(color="white", width=1.5), **subplot)


def _grid(agg: pd.DataFrame, xcol: str, ycol: str, zcol: str) -> tuple[list, list, np.ndarray]:
    xs, ys = sorted(agg[xcol].unique()), sorted(agg[ycol].unique())
    return xs, ys, agg.pivot(index=ycol, columns=xcol, values=zcol).reindex(index=ys, columns=xs).to_numpy(dtype=float)


def _index_axes(
    fig: go.Figure, xs: Sequence, ys: Sequence, x_title: str, y_title: str = "γ (initialization rate)", **subplot: int
) -> None:
    """Title the axes of a figure drawn at the indices of ``xs`` and ``ys`` and label their ticks with the values."""
    fig.update_xaxes(title_text=x_title, tickvals=list(range(len(xs))), ticktext=[_label(x) for x in xs], **subplot)
    fig.update_yaxes(title_text=y_title, tickvals=list(range(len(ys))), ticktext=[_label(y) for y in ys], **subplot)


def _heatmap(xs: Sequence, ys: Sequence, z: np.ndarray, text: np.ndarray, **extra: Any) -> go.Heatmap:
    """A heatmap of accuracies (0 to 1) drawn at the indices of ``xs`` and ``ys`` (see :func:`_index_axes`)."""
    return go.Heatmap(
        x=list(range(len(xs))),
        y=list(range(len(ys))),
        z=z,
        zmin=0,
        zmax=1,
        colorscale="Viridis",
        text=text,
        hoverinfo="text",
        **extra,
    )


def _hover(agg: pd.DataFrame, xs: list, ys: list, xcol: str, ycol: str, cols: Sequence[str]) -> np.ndarray:
    text = np.full((len(ys), len(xs)), "", dtype=object)
    for _, r in agg.iterrows():
        parts = [f"{xcol}={_label(r[xcol])}, {ycol}={_label(r[ycol])}"]
        for c in cols:
            parts.append(f"{c}: {r[c + '_mean']:.3f} ± {0 if pd.isna(r[c + '_std']) else r[c + '_std']:.3f}")
        parts.append(f"seeds: {r['n_seeds']}")
        text[ys.index(r[ycol]), xs.index(r[xcol])] = "<br>".join(parts)
    return text


def fig_neurips_fig2(df: pd.DataFrame, id_threshold: float = ID_THRESHOLD, over: str = "lr") -> go.Figure:
    """NeurIPS Fig. 2: held-out (4,3) accuracy against the symmetric and the inferential target.

    x = gamma, y = depth (``n_layers``); each cell the best over learning rates, averaged
    over seeds; cells whose ID accuracy (seen anchors) is below ``id_threshold`` are
    shaded and hatched.  Uses the completed runs of the ``symmetric`` task.
    """
    cell = ["gamma", "n_layers"]
    rows = task_rows(df, SymmetricTask, [*cell, over, "seed"], "NeurIPS Fig. 2")
    metrics = ["heldout_symmetric", "heldout_inferential", "id_acc"]
    agg = aggregate(rows, metrics, cell=cell, over=over)
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("(a) symmetric target (x − 6)", "(b) inferential target (x − 10)"),
        horizontal_spacing=0.1,
    )
    for col, metric in enumerate(("heldout_symmetric", "heldout_inferential"), start=1):
        xs, ys, z = _grid(agg, "gamma", "n_layers", f"{metric}_mean")
        fig.add_trace(
            _heatmap(
                xs,
                ys,
                z,
                _hover(agg, xs, ys, "gamma", "n_layers", metrics),
                colorbar=dict(title="accuracy", x=1.02) if col == 2 else None,
                showscale=col == 2,
            ),
            row=1,
            col=col,
        )
        _hatch(fig, _grid(agg, "gamma", "n_layers", "id_acc_mean")[2] < id_threshold, row=1, col=col)
        _index_axes(fig, xs, ys, "γ (initialization rate)", "depth (layers)", row=1, col=col)
    fig.update_layout(
        title=f"Held-out pair (4,3): best over {over}, mean over seeds; hatched: ID accuracy < {id_threshold:g}",
        template="plotly_white",
        width=1000,
        height=450,
    )
    return fig


# ------------------------------------------------------------------ square
# The journal's Fig. 7C: the addition task's accuracy inside its held-out square over
# weight decay (x) and gamma (y), from a sweep's results table (plotly).
#
# Each cell is the mean over seeds (best over ``over``, the learning rate, where it varies)
# of ``square_acc``; cells whose ID accuracy is below ``id_threshold`` are hatched (the run
# did not fit the pairs it could interpolate).  The journal: small init (large gamma) or
# large weight decay generalizes into the square, large init with small weight decay does not.


def fig_journal_fig7c(df: pd.DataFrame, id_threshold: float = FIT_THRESHOLD, over: str = "lr") -> go.Figure:
    """Journal Fig. 7C: accuracy inside the held-out square, weight decay x gamma (see the comment above)."""
    what = "journal Fig. 7C"
    check_columns(df, ["task", "status", "gamma", "weight_decay", "square_acc", "id_acc"], what)
    rows = task_rows(df, AdditionTask, ["gamma", "weight_decay", over, "seed"], what)
    metrics = ["square_acc", "id_acc", "train_acc"]
    agg = aggregate(rows, metrics, cell=["gamma", "weight_decay"], over=over)
    xs, ys, z = _grid(agg, "weight_decay", "gamma", "square_acc_mean")
    fig = go.Figure(
        _heatmap(xs, ys, z, _hover(agg, xs, ys, "weight_decay", "gamma", metrics), colorbar=dict(title="square acc"))
    )
    _hatch(fig, _grid(agg, "weight_decay", "gamma", "id_acc_mean")[2] < id_threshold)
    for iy, ix in zip(*np.nonzero(~np.isnan(z)), strict=True):
        colour = "white" if z[iy, ix] < 0.6 else "black"
        fig.add_annotation(x=ix, y=iy, text=f"{z[iy, ix]:.2f}", showarrow=False, font=dict(color=colour))
    _index_axes(fig, xs, ys, "weight decay")
    fig.update_layout(
        title=f"Addition: accuracy inside the held-out square (mean over seeds); hatched: ID < {id_threshold:g}",
        template="plotly_white",
        width=650,
        height=550,
    )
    return fig


def _id_ood_agg(df: pd.DataFrame, what: str, over: str, metrics: Sequence[str]) -> pd.DataFrame:
    cell = ["gamma", "weight_decay"]
    rows = task_rows(df, IdOodTask, [*cell, over, "seed"], what)
    return aggregate(rows, metrics, cell=cell, over=over)


def fig_journal_fig3a(
    df: pd.DataFrame,
    weight_decay: float | None = None,
    id_threshold: float = ID_THRESHOLD,
    ood_threshold: float = OOD_THRESHOLD,
    over: str = "lr",
) -> go.Figure:
    """Journal Fig. 3A: ID and OOD accuracy against gamma at one weight decay, phases shaded.

    ``weight_decay`` defaults to 0.01 (the paper's) when the table has it, else the
    smallest in the table.  Error bars: standard deviation over seeds.
    """
    agg = _id_ood_agg(df, "journal Fig. 3A", over, ["id_acc", "ood_acc"])
    wds = sorted(agg["weight_decay"].unique())
    if weight_decay is None:
        weight_decay = 0.01 if any(math.isclose(w, 0.01) for w in wds) else wds[0]
    sel = agg[np.isclose(agg["weight_decay"], weight_decay)].sort_values("gamma")
    if sel.empty:
        raise ValueError(f"journal Fig. 3A: no runs with weight_decay={weight_decay}; the table has {wds}")
    sel = add_phase(sel, id_threshold=id_threshold, ood_threshold=ood_threshold)
    fig = go.Figure()
    gammas = sel["gamma"].to_numpy()
    half = np.diff(gammas).min() / 2 if len(gammas) > 1 else 0.025
    for g, phase in zip(gammas, sel["phase"], strict=True):
        if pd.notna(phase):
            fig.add_vrect(x0=g - half, x1=g + half, fillcolor=_PHASE_COLOURS[int(phase)], line_width=0, layer="below")
            fig.add_annotation(x=g, y=1.06, text=f"P{int(phase)}", showarrow=False, font=dict(size=10))
    for metric, colour, name in (("id_acc", "royalblue", "ID"), ("ood_acc", "crimson", "OOD")):
        fig.add_trace(
            go.Scatter(
                x=gammas,
                y=sel[f"{metric}_mean"],
                error_y=dict(type="data", array=sel[f"{metric}_std"].fillna(0)),
                mode="lines+markers",
                name=name,
                line=dict(color=colour),
            )
        )
    fig.update_layout(
        title=f"ID and OOD accuracy vs γ (weight decay {weight_decay:g}); phases P1-P3 (ID ≥ {id_threshold:g}, OOD > {ood_threshold:g})",
        xaxis_title="γ (initialization rate)",
        yaxis_title="accuracy",
        yaxis_range=[-0.02, 1.12],
        template="plotly_white",
        width=800,
        height=450,
    )
    return fig


def fig_journal_fig3b(
    df: pd.DataFrame,
    id_threshold: float = ID_THRESHOLD,
    commutativity_threshold: float = COMMUTATIVITY_THRESHOLD,
    over: str = "lr",
) -> go.Figure:
    """Journal Fig. 3B: OOD accuracy over weight decay (x) x gamma (y).

    Hatched: ID accuracy < ``id_threshold``; green triangle: commutativity <
    ``commutativity_threshold``.  Each cell: mean over seeds (best over ``over`` if it varies).
    """
    agg = _id_ood_agg(df, "journal Fig. 3B", over, ["ood_acc", "id_acc", "commutativity"])
    xs, ys, z = _grid(agg, "weight_decay", "gamma", "ood_acc_mean")
    text = _hover(agg, xs, ys, "weight_decay", "gamma", ["ood_acc", "id_acc", "commutativity"])
    fig = go.Figure(_heatmap(xs, ys, z, text, colorbar=dict(title="OOD acc")))
    _hatch(fig, _grid(agg, "weight_decay", "gamma", "id_acc_mean")[2] < id_threshold)
    _, _, comm = _grid(agg, "weight_decay", "gamma", "commutativity_mean")
    iy, ix = np.nonzero(comm < commutativity_threshold)
    fig.add_trace(
        go.Scatter(
            x=ix,
            y=iy,
            mode="markers",
            name=f"commutativity < {commutativity_threshold:g}",
            marker=dict(symbol="triangle-up", size=14, color="limegreen", line=dict(color="black", width=1)),
        )
    )
    _index_axes(fig, xs, ys, "weight decay")
    fig.update_layout(
        title=f"OOD accuracy; hatched: ID < {id_threshold:g}; ▲: commutativity < {commutativity_threshold:g}",
        template="plotly_white",
        width=650,
        height=550,
        legend=dict(orientation="h", y=-0.15),
    )
    return fig


def fig_journal_fig5c(
    df: pd.DataFrame,
    id_threshold: float = ID_THRESHOLD,
    ood_threshold: float = OOD_THRESHOLD,
    rank_col: str = "stable_rank_wq0",
    over: str = "lr",
) -> go.Figure:
    """Journal Fig. 5C: bubbles over weight decay (x) x gamma (y); colour = stable rank, size = phase.

    Stable rank of the first layer's W_Q (heads merged), averaged over seeds; the phase of
    the cell from its mean ID and OOD accuracy (:func:`classify_phase`).
    """
    agg = _id_ood_agg(df, "journal Fig. 5C", over, ["id_acc", "ood_acc", rank_col])
    agg = add_phase(agg, id_threshold=id_threshold, ood_threshold=ood_threshold)
    xs, ys = sorted(agg["weight_decay"].unique()), sorted(agg["gamma"].unique())
    phase = agg["phase"].astype("float").to_numpy()
    sizes = np.where(np.isnan(phase), 6, np.nan_to_num(phase) * 14)
    text = [
        f"wd={_label(r.weight_decay)}, γ={_label(r.gamma)}<br>phase {r.phase if pd.notna(r.phase) else '?'}"
        f"<br>stable rank {getattr(r, rank_col + '_mean'):.2f}<br>ID {r.id_acc_mean:.3f}, OOD {r.ood_acc_mean:.3f}"
        for r in agg.itertuples()
    ]
    fig = go.Figure(
        go.Scatter(
            x=[xs.index(v) for v in agg["weight_decay"]],
            y=[ys.index(v) for v in agg["gamma"]],
            mode="markers",
            marker=dict(
                size=sizes,
                color=agg[f"{rank_col}_mean"],
                colorscale="Plasma",
                showscale=True,
                colorbar=dict(title="stable rank<br>W_Q (layer 0)"),
                line=dict(color="black", width=0.5),
            ),
            text=text,
            hoverinfo="text",
            showlegend=False,
        )
    )
    _index_axes(fig, xs, ys, "weight decay")
    fig.update_layout(
        title=f"Layer-0 W_Q stable rank (colour), phase (size 1-3; ID ≥ {id_threshold:g}, OOD > {ood_threshold:g})",
        template="plotly_white",
        width=650,
        height=550,
    )
    return fig


def _init_name(gamma: float, gammas: Sequence[float]) -> str:
    if len(gammas) < 2:
        return f"γ = {_label(gamma)}"
    size = "small init" if gamma == max(gammas) else "large init" if gamma == min(gammas) else "init"
    return f"γ = {_label(gamma)} ({size})"


def fig_complexity_epochs(df: pd.DataFrame, over: str = "lr") -> go.Figure:
    """NeurIPS Fig. 6 / journal Fig. 8A: epochs until training loss < threshold against depth.

    One panel per gamma (small init = largest gamma first), one line per complexity k;
    mean over seeds (runs that never reach the threshold are left out of the mean; the
    hover says how many seeds reached it).  The threshold is the one the table was built
    with (:func:`training.studies.sweep.collect_results`, default 0.05).
    """
    rows = task_rows(df, ComplexityTask, ["gamma", "n_layers", "k", "lr", "seed"], "NeurIPS Fig. 6")
    cell = ["gamma", "n_layers", "k"]
    agg = aggregate(rows, ["epochs_to_loss"], cell=cell, over=over)
    best = best_over(rows, ["epochs_to_loss"], cell, over=over)
    reached = best.groupby(cell)["epochs_to_loss"].agg(lambda s: int(s.notna().sum())).rename("reached")
    agg = agg.merge(reached.reset_index(), on=cell)
    gammas = sorted(agg["gamma"].unique(), reverse=True)
    fig = make_subplots(
        rows=1, cols=len(gammas), subplot_titles=[_init_name(g, gammas) for g in gammas], shared_yaxes=True
    )
    ks = sorted(agg["k"].unique())
    colours = sample_colorscale("Viridis", [i / max(len(ks) - 1, 1) for i in range(len(ks))])
    for col, g in enumerate(gammas, start=1):
        for k, colour in zip(ks, colours, strict=True):
            sel = agg[(agg["gamma"] == g) & (agg["k"] == k)].sort_values("n_layers")
            fig.add_trace(
                go.Scatter(
                    x=sel["n_layers"],
                    y=sel["epochs_to_loss_mean"],
                    error_y=dict(type="data", array=sel["epochs_to_loss_std"].fillna(0)),
                    mode="lines+markers",
                    name=f"k = {k}",
                    legendgroup=f"k{k}",
                    showlegend=col == 1,
                    line=dict(color=colour),
                    text=[f"reached in {r}/{n} seeds" for r, n in zip(sel["reached"], sel["n_seeds"], strict=True)],
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text="depth (layers)", dtick=1, row=1, col=col)
    fig.update_yaxes(title_text="epochs until training loss < threshold", row=1, col=1)
    fig.update_layout(
        title="Training speed vs inferential complexity k", template="plotly_white", width=500 * len(gammas), height=450
    )
    return fig


def fig_pair_epochs(df: pd.DataFrame, k: int | None = None, n_layers: int | None = None, over: str = "lr") -> go.Figure:
    """Journal Fig. 8B: per anchor pair, epochs until its training accuracy reaches the threshold.

    For one complexity ``k`` (default: 1 if present, else the smallest k > 0, else 0) and
    one depth (default: the smallest), one panel per gamma; bars = mean over seeds; red:
    the pairs whose target breaks the composition rule at this k.  The threshold is the
    one the table was built with (default 60%).
    """
    rows = task_rows(df, ComplexityTask, ["gamma", "n_layers", "k", "lr", "seed"], "journal Fig. 8B")
    ks = sorted(rows["k"].unique())
    if k is None:
        k = 1 if 1 in ks else next((v for v in ks if v > 0), ks[0])
    depths = sorted(rows["n_layers"].unique())
    n_layers = depths[0] if n_layers is None else n_layers
    rows = rows[(rows["k"] == k) & (rows["n_layers"] == n_layers)]
    if rows.empty:
        raise ValueError(
            f"journal Fig. 8B: no completed runs with k={k}, n_layers={n_layers}; the table has k {ks}, depths {depths}"
        )
    cols = [pair_column(p) for p in ALL_PAIRS]
    agg = aggregate(rows, cols, cell=["gamma"], over=over)
    broken = ComplexityTask(k=int(k)).broken_pairs()
    labels = [f"({pair.key})" for pair in ALL_PAIRS]
    colours = ["crimson" if p in broken else "steelblue" for p in ALL_PAIRS]
    gammas = sorted(agg["gamma"].unique(), reverse=True)
    fig = make_subplots(
        rows=1, cols=len(gammas), subplot_titles=[_init_name(g, gammas) for g in gammas], shared_yaxes=True
    )
    for col, g in enumerate(gammas, start=1):
        r = agg[agg["gamma"] == g].iloc[0]
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[r[f"{c}_mean"] for c in cols],
                error_y=dict(type="data", array=[0 if pd.isna(r[f"{c}_std"]) else r[f"{c}_std"] for c in cols]),
                marker_color=colours,
                showlegend=False,
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(title_text="anchor pair", row=1, col=col)
    fig.update_yaxes(title_text="epochs until pair training accuracy ≥ threshold", row=1, col=1)
    fig.update_layout(
        title=f"Per-pair fitting speed, k = {k}, depth {n_layers} (red: pairs with a non-inferential target)",
        template="plotly_white",
        width=650 * len(gammas),
        height=450,
    )
    return fig


def _has(df: pd.DataFrame, task_cls: type[Task], column: str) -> bool:
    """Whether the table has a completed run of the task ``task_cls`` with a ``column`` value."""
    if not {"task", "status", column} <= set(df.columns):
        return False
    rows = df[(df["task"] == task_name(task_cls)) & (df["status"] == "completed")]
    return bool(rows[column].notna().any())


#: Figure name (:data:`training.studies.phase.FIGURE_NAMES`, in its order: a test checks it)
#: -> (function, does the table support it).
FIGURES: dict[str, tuple[Callable[..., go.Figure], Callable[[pd.DataFrame], bool]]] = {
    "neurips_fig2": (fig_neurips_fig2, lambda df: _has(df, SymmetricTask, "heldout_symmetric")),
    "journal_fig3a": (fig_journal_fig3a, lambda df: _has(df, IdOodTask, "ood_acc")),
    "journal_fig3b": (fig_journal_fig3b, lambda df: _has(df, IdOodTask, "ood_acc")),
    "journal_fig5c": (fig_journal_fig5c, lambda df: _has(df, IdOodTask, "stable_rank_wq0")),
    "complexity_epochs": (fig_complexity_epochs, lambda df: _has(df, ComplexityTask, "final_loss")),
    "pair_epochs": (fig_pair_epochs, lambda df: _has(df, ComplexityTask, "final_loss")),
    "journal_fig7c": (fig_journal_fig7c, lambda df: _has(df, AdditionTask, "square_acc")),
}


def supported_figures(df: pd.DataFrame) -> list[str]:
    """The names of the :data:`FIGURES` that the results table has the runs for."""
    return [name for name, (_, ok) in FIGURES.items() if ok(df)]


def make_figures(
    df: pd.DataFrame, names: Sequence[str] | None = None, options: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, go.Figure]:
    """The figures ``names`` (default: all the table supports), with per-figure keyword ``options``."""
    names = supported_figures(df) if names is None else list(names)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise ValueError(f"unknown figure(s) {unknown}; choose from {list(FIGURES)}")
    options = options or {}
    return {name: FIGURES[name][0](df, **options.get(name, {})) for name in names}


# ------------------------------------------------------------------ diagram
# The phase-diagram job of a sweep folder: rebuild its results table, draw the papers'
# figures it supports, write them as offline HTML, and say which runs they leave out.
#
# Example::
#
#     >>> from training.studies.phase.figures import phase_diagrams
#     >>> done = phase_diagrams("runs/fig2")  # doctest: +SKIP
#     >>> done.paths, done.problem  # doctest: +SKIP

#: The purpose phase-diagram pages are tagged with (a later one may replace an earlier one).
PAGE = "phase-diagram"


def write_html(figures: Mapping[str, go.Figure], out: str | Path, title: str = "Phase diagrams") -> list[Path]:
    """Write figures as HTML with plotly.js inlined (renders with no network).

    ``out`` ending in ``.html``: one page with every figure (plotly.js once); otherwise a
    folder with one ``<name>.html`` per figure.  Returns the written paths.
    """
    if not figures:
        raise ValueError("no figures to write")
    out = Path(out)
    check_output_pages(out, PAGE, figures)  # never replaces what is not a previous phase-diagram page
    if out.suffix.lower() == ".html":
        divs = [
            f"<h2>{name}</h2>\n" + fig.to_html(full_html=False, include_plotlyjs=(i == 0))
            for i, (name, fig) in enumerate(figures.items())
        ]
        head = f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n<body>\n<h1>{title}</h1>\n'
        return [write_page(out, head + "\n".join(divs) + "\n</body></html>\n", PAGE)]
    out.mkdir(parents=True, exist_ok=True)
    return [
        write_page(out / f"{name}.html", fig.to_html(include_plotlyjs=True, full_html=True), PAGE)
        for name, fig in figures.items()
    ]


def check_thresholds(**thresholds: float) -> None:
    """Refuse a threshold outside the range where it means something: accuracies
    (``*_threshold`` but ``loss_threshold``) in [0, 1], a loss finite and > 0."""
    for name, value in thresholds.items():
        flag = "--" + name.replace("_", "-")
        if name == "loss_threshold":
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{flag} is a training loss: a finite number > 0, got {value!r}")
        elif not (0.0 <= value <= 1.0):  # NaN fails too
            raise ValueError(f"{flag} is an accuracy: a number in [0, 1], got {value!r}")


def protocol_table(
    df: pd.DataFrame, sweep_dir: str | Path, protocol: str, logged_every: int | None = None
) -> pd.DataFrame:
    """A sweep's results table as ``protocol`` reads it, for :func:`training.studies.phase.aggregate`
    (:data:`training.studies.records.PROTOCOLS`).

    ``strict``: the table itself (final epochs), refused when a configuration and seed has
    completed runs at more than one lr (strict reads one lr; the fix is named).  ``paper``:
    each completed run's metric columns (all its task measures: e.g. ``id_acc`` and
    ``square_acc`` of ``addition``) replaced by their best over its evaluated epochs (each
    separately; with ``logged_every``, only over the epochs the released scripts log,
    :func:`training.studies.records.logged_epochs`); the aggregation then takes the best
    over lrs and the mean over seeds."""
    check_protocol(protocol, logged_every)
    if protocol == "strict":
        _check_one_lr(df)
        return df
    out = df.copy()
    for i, run in zip(out.index, out["run"], strict=True):
        if out.at[i, "status"] != "completed":
            continue
        record = RunRecord.read(Path(sweep_dir) / str(run))
        picks = pick_paper([record], record.task.metrics_class.column_names(), logged_every)
        for target, pick in picks.items():
            if target in out.columns:
                out.at[i, target] = math.nan if pick.value is None else pick.value
    return out


def _check_one_lr(df: pd.DataFrame) -> None:
    done = df[df["status"] == "completed"]
    if "lr" not in done.columns or done.empty:
        return
    others = [c for c in param_columns(done) if c != "lr"]
    most = int(done.groupby(others, dropna=False)["lr"].nunique().max()) if others else done["lr"].nunique()
    if most > 1:
        lrs = sorted(done["lr"].unique())
        raise ValueError(
            f"the strict protocol reads one learning rate per configuration and seed; this sweep has {lrs}: "
            "use --protocol paper (the best over them, and over epochs) or a sweep with one lr"
        )


@dataclass(frozen=True)
class PhaseDiagrams:
    """What :func:`phase_diagrams` wrote: the figures, their files, how many runs the table
    has, one line on the runs that did not complete (``None`` if all did), and the run
    folders it left out because the sweep does not name them."""

    figures: dict[str, go.Figure]
    paths: list[Path]
    n_runs: int
    problem: str | None
    #: Run folders in the sweep folder that its sweep does not name: left out of the figures.
    strangers: tuple[str, ...] = ()


def phase_diagrams(
    sweep_dir: str | Path,
    out: str | Path | None = None,
    figure_names: Sequence[str] = (),
    *,
    id_threshold: float = ID_THRESHOLD,
    ood_threshold: float = OOD_THRESHOLD,
    loss_threshold: float = LOSS_THRESHOLD,
    pair_threshold: float = PAIR_ACC_THRESHOLD,
    protocol: str = "strict",
    logged_every: int | None = None,
) -> PhaseDiagrams:
    """Rebuild ``sweep_dir/results.csv`` and write the figures it supports (or
    ``figure_names``) to ``out`` (default ``sweep_dir/phase_diagram.html``), each cell
    selected by ``protocol`` (:data:`training.studies.records.PROTOCOLS`: ``strict``, the final
    epoch of one lr; ``paper``, the best over lrs and epochs, or over the epochs the
    released scripts log with ``logged_every``), which each title names.

    Everything is checked and built before the first write: a folder it refuses is left
    as it was, and a folder a sweep process holds gets its figures but keeps its
    ``results.csv`` (the sweep writes it; its unreached points are ``pending``).  Only the
    runs the sweep names are read (a damaged ``sweep.json`` is refused).  The thresholds are accuracies in [0, 1] and a positive loss; a run folder
    (a leaf: it holds one run and nothing else) is refused as ``sweep_dir`` or as a place
    for ``out``.
    """
    check_thresholds(
        id_threshold=id_threshold,
        ood_threshold=ood_threshold,
        pair_threshold=pair_threshold,
        loss_threshold=loss_threshold,
    )
    sweep_dir = Path(sweep_dir)
    check_path_names(sweep_dir, "SWEEP_DIR")
    if looks_like_run(sweep_dir):
        raise ValueError(
            f"{sweep_dir} is a run folder, not a sweep folder; phase diagrams are drawn over the runs of a sweep folder "
            "(interp-init sweep SPEC --out DIR): give that folder"
        )
    if study_kind(sweep_dir) == "concept-graphs":  # diffusion runs: no phase diagram reads them
        raise ValueError(
            f"{sweep_dir} is a concept-graphs study, not a sweep: its table and figure are written by "
            f"interp-init concept-graphs SPEC --out {sweep_dir}"
        )
    refuse_inside_run(sweep_dir, "phase diagrams", option="SWEEP_DIR")
    check_sweep_spec(sweep_dir)  # a damaged sweep.json is refused here as by the sweep itself
    check_results_file(sweep_dir, "SWEEP_DIR")  # nor is a results.csv of one's own replaced
    df = collect_results(sweep_dir, loss_threshold=loss_threshold, pair_threshold=pair_threshold, write=False)
    check_protocol(protocol, logged_every)  # before any work or write
    table = protocol_table(df, sweep_dir, protocol, logged_every)
    names = list(figure_names) or supported_figures(df)
    check_output_pages(out or sweep_dir / "phase_diagram.html", PAGE, names)  # before any work or write
    if not names:
        raise ValueError(
            f"{sweep_dir} has no completed runs any figure can use (statuses: {df['status'].value_counts().to_dict()})"
        )
    phase_opts = {"id_threshold": id_threshold, "ood_threshold": ood_threshold}
    options = {
        "neurips_fig2": {"id_threshold": id_threshold},
        "journal_fig3a": phase_opts,
        "journal_fig3b": {"id_threshold": id_threshold},
        "journal_fig5c": phase_opts,
    }
    # each title names the protocol (checked by protocol_table) under it
    figures = {
        name: fig.update_layout(
            title_text=f"{fig.layout.title.text or ''}<br><sup>{protocol_text(protocol, logged_every)}</sup>"
        )
        for name, fig in make_figures(table, names, options).items()
    }
    bad = incomplete_runs(sweep_dir, df)
    running = folder_is_held(sweep_dir)
    if not running:  # a running sweep owns results.csv: it writes it when it ends
        write_results(df, sweep_dir)
    paths = write_html(
        figures, out or Path(sweep_dir) / "phase_diagram.html", title=f"Phase diagrams ({protocol} protocol)"
    )
    total = len(df) + sum(1 for name in bad if name not in set(df["run"]))
    problem = problem_summary(bad, total, sweep_dir if running else Path(sweep_dir) / RESULTS_FILE)
    if problem and running:
        problem += " (a sweep process is still training it; draw them again when it ends)"
    return PhaseDiagrams(figures, paths, len(df), problem, tuple(strangers(sweep_dir)))
