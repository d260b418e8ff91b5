"""The journal's Fig. 7C: the addition task's accuracy inside its held-out square over
weight decay (x) and gamma (y), from a sweep's results table (plotly).

Each cell is the mean over seeds (best over ``over``, the learning rate, where it varies)
of ``square_acc``; cells whose ID accuracy is below ``id_threshold`` are hatched (the run
did not fit the pairs it could interpolate).  The journal: small init (large gamma) or
large weight decay generalizes into the square, large init with small weight decay does not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from interp_init.tasks.addition import AdditionTask
from interp_init.tasks.base import FIT_THRESHOLD
from training.studies.phase.aggregation import aggregate, check_columns, task_rows


def _label(value: float) -> str:
    return f"{value:g}"


def fig_journal_fig7c(df: pd.DataFrame, id_threshold: float = FIT_THRESHOLD, over: str = "lr") -> go.Figure:
    """Journal Fig. 7C: accuracy inside the held-out square, weight decay x gamma (see the module docstring)."""
    what = "journal Fig. 7C"
    check_columns(df, ["task", "status", "gamma", "weight_decay", "square_acc", "id_acc"], what)
    rows = task_rows(df, AdditionTask, ["gamma", "weight_decay", over, "seed"], what)
    agg = aggregate(rows, ["square_acc", "id_acc", "train_acc"], cell=["gamma", "weight_decay"], over=over)
    xs, ys = sorted(agg["weight_decay"].unique()), sorted(agg["gamma"].unique())
    z, id_z = np.full((len(ys), len(xs)), np.nan), np.full((len(ys), len(xs)), np.nan)
    text = np.full((len(ys), len(xs)), "", dtype=object)
    for _, r in agg.iterrows():
        iy, ix = ys.index(r["gamma"]), xs.index(r["weight_decay"])
        z[iy, ix], id_z[iy, ix] = r["square_acc_mean"], r["id_acc_mean"]
        text[iy, ix] = (
            f"weight_decay={_label(r['weight_decay'])}, gamma={_label(r['gamma'])}<br>square {r['square_acc_mean']:.3f}"
            f"<br>ID {r['id_acc_mean']:.3f}<br>train {r['train_acc_mean']:.3f}<br>seeds: {r['n_seeds']}"
        )
    fig = go.Figure(
        go.Heatmap(
            x=list(range(len(xs))),
            y=list(range(len(ys))),
            z=z,
            zmin=0,
            zmax=1,
            colorscale="Viridis",
            text=text,
            hoverinfo="text",
            colorbar=dict(title="square acc"),
        )
    )
    for iy, ix in zip(*np.nonzero(id_z < id_threshold), strict=True):
        fig.add_shape(
            type="rect",
            x0=ix - 0.5,
            x1=ix + 0.5,
            y0=iy - 0.5,
            y1=iy + 0.5,
            fillcolor="rgba(90, 90, 90, 0.55)",
            line_width=0,
        )
        fig.add_shape(
            type="line", x0=ix - 0.5, y0=iy - 0.5, x1=ix + 0.5, y1=iy + 0.5, line=dict(color="white", width=1.5)
        )
    for iy, ix in zip(*np.nonzero(~np.isnan(z)), strict=True):
        fig.add_annotation(
            x=ix,
            y=iy,
            text=f"{z[iy, ix]:.2f}",
            showarrow=False,
            font=dict(color="white" if z[iy, ix] < 0.6 else "black"),
        )
    fig.update_xaxes(title_text="weight decay", tickvals=list(range(len(xs))), ticktext=[_label(x) for x in xs])
    fig.update_yaxes(
        title_text="γ (initialization rate)", tickvals=list(range(len(ys))), ticktext=[_label(y) for y in ys]
    )
    fig.update_layout(
        title=f"Addition: accuracy inside the held-out square (mean over seeds); hatched: ID < {id_threshold:g}",
        template="plotly_white",
        width=650,
        height=550,
    )
    return fig
