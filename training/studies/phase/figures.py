"""The papers' figures from a sweep's results table (plotly), each described in its own
docstring: NeurIPS Fig. 2 (:func:`fig_neurips_fig2`), the journal's Fig. 3A, 3B and 5C
(:func:`fig_journal_fig3a`, :func:`fig_journal_fig3b`, :func:`fig_journal_fig5c`), NeurIPS
Fig. 6 / journal Fig. 8A and 8B (:func:`fig_complexity_epochs`, :func:`fig_pair_epochs`),
and the journal's Fig. 7C (:func:`~training.studies.phase.square.fig_journal_fig7c`).  Each takes
the results table of :func:`training.studies.sweep.load_results`.

:data:`FIGURES` names them; :func:`make_figures` draws those a table supports and
:func:`training.studies.phase.diagram.write_html` writes them with plotly.js inlined, so the files
render with no network.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

from interp_init.tasks.addition import AdditionTask
from interp_init.tasks.anchor import ComplexityTask, IdOodTask, SymmetricTask
from interp_init.tasks.anchor_pairs import ALL_PAIRS
from interp_init.tasks.base import Task, task_name
from training.studies.phase.aggregation import add_phase, aggregate, best_over, task_rows
from training.studies.phase.names import COMMUTATIVITY_THRESHOLD, FIGURE_NAMES, ID_THRESHOLD, OOD_THRESHOLD
from training.studies.phase.square import fig_journal_fig7c
from training.studies.sweep.results import pair_column

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
            go.Heatmap(
                x=list(range(len(xs))),
                y=list(range(len(ys))),
                z=z,
                zmin=0,
                zmax=1,
                colorscale="Viridis",
                text=_hover(agg, xs, ys, "gamma", "n_layers", metrics),
                hoverinfo="text",
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
    fig = go.Figure(
        go.Heatmap(
            x=list(range(len(xs))),
            y=list(range(len(ys))),
            z=z,
            zmin=0,
            zmax=1,
            colorscale="Viridis",
            text=_hover(agg, xs, ys, "weight_decay", "gamma", ["ood_acc", "id_acc", "commutativity"]),
            hoverinfo="text",
            colorbar=dict(title="OOD acc"),
        )
    )
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


#: Figure name (:data:`training.studies.phase.names.FIGURE_NAMES`, in its order) -> (function,
#: does the table support it).
FIGURES: dict[str, tuple[Callable[..., go.Figure], Callable[[pd.DataFrame], bool]]] = {
    "neurips_fig2": (fig_neurips_fig2, lambda df: _has(df, SymmetricTask, "heldout_symmetric")),
    "journal_fig3a": (fig_journal_fig3a, lambda df: _has(df, IdOodTask, "ood_acc")),
    "journal_fig3b": (fig_journal_fig3b, lambda df: _has(df, IdOodTask, "ood_acc")),
    "journal_fig5c": (fig_journal_fig5c, lambda df: _has(df, IdOodTask, "stable_rank_wq0")),
    "complexity_epochs": (fig_complexity_epochs, lambda df: _has(df, ComplexityTask, "final_loss")),
    "pair_epochs": (fig_pair_epochs, lambda df: _has(df, ComplexityTask, "final_loss")),
    "journal_fig7c": (fig_journal_fig7c, lambda df: _has(df, AdditionTask, "square_acc")),
}
assert tuple(FIGURES) == FIGURE_NAMES, "training.studies.phase.names.FIGURE_NAMES must list FIGURES in order"


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
