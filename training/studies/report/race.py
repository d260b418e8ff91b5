"""The report's race section (``symmetric`` runs): the held-out (4,3)'s inferential and
symmetric shares against epoch, one line per run (per seed in a population), the epoch the
seen exception (3,4) is fitted marked, and the table of :class:`training.studies.race.Race` numbers."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from training.studies.race import epoch_shares, has_shares, race_of
from training.studies.report.cells import (
    MISSING,
    RUN_COLOURS,
    Cell,
    Context,
    NotApplicable,
    Section,
    compact,
    html_table,
    measured,
)
from training.studies.report.runs import Run


def race_figure(runs: list[Run]) -> go.Figure:
    """Two panels, (4,3) inferential and symmetric share against epoch; one line per run and a
    star where (3,4) is first fitted (training accuracy >= 0.9)."""
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("(4,3) inferential share", "(4,3) symmetric share"), horizontal_spacing=0.08
    )
    for i, run in enumerate(runs):
        history = run.record.history
        epochs, inf, sym = epoch_shares(history)
        race = race_of(history, run.record.lr)
        colour = RUN_COLOURS[i % len(RUN_COLOURS)]
        for col, shares in ((1, inf), (2, sym)):
            fig.add_trace(
                go.Scatter(
                    x=epochs,
                    y=shares,
                    mode="lines",
                    name=run.name,
                    legendgroup=run.name,
                    showlegend=col == 1,
                    line=dict(color=colour),
                ),
                row=1,
                col=col,
            )
            if race.fit_epoch is not None:
                at = shares[epochs.index(race.fit_epoch)]
                fig.add_trace(
                    go.Scatter(
                        x=[race.fit_epoch],
                        y=[at],
                        mode="markers",
                        marker=dict(symbol="star", size=12, color=colour),
                        legendgroup=run.name,
                        showlegend=False,
                        hovertemplate=f"{run.name}<br>(3,4) fitted at epoch {race.fit_epoch}<extra></extra>",
                    ),
                    row=1,
                    col=col,
                )
    fig.update_yaxes(range=[-0.02, 1.02])
    fig.update_xaxes(title_text="epoch")
    compact(fig, 360)
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.2, x=0, font=dict(size=11)))
    return fig


def _epoch(epoch: int | None, last: int | None, never: str) -> str:
    """An epoch, or what its absence means: ``never`` within the run's ``last`` epochs."""
    if epoch is not None:
        return str(epoch)
    return never if last is None else f"{never} in {last} epochs"


def _pair(a: float | None, b: float | None) -> str:
    """``inferential / symmetric`` shares, or a dash where there are none."""
    return MISSING if a is None and b is None else " / ".join(MISSING if v is None else f"{v:.2f}" for v in (a, b))


def race_table(runs: list[Run]) -> pd.DataFrame:
    """One row per run: the race's numbers and the failure mode, in words where a number is
    missing (an epoch not reached, shares not measured before (3,4) was fitted)."""
    rows = []
    for run in runs:
        race = race_of(run.record.history, run.record.lr)
        rows.append(
            {
                "run": run.name,
                "(3,4) fitted at epoch": _epoch(race.fit_epoch, race.last_epoch, "not"),
                "(4,3) inferential / symmetric at fit": _pair(race.inferential_at_fit, race.symmetric_at_fit)
                if race.fitted
                else "not fitted",
                "(4,3) inferential / symmetric at end": _pair(race.inferential_end, race.symmetric_end),
                "copied (symmetric >= 0.8) at epoch": _epoch(race.copy_epoch, race.last_epoch, "not"),
                "shares stopped at epoch": "still moving"
                if race.still_moving
                else _epoch(race.settled_epoch, None, MISSING),
                "lr then > peak / 10": race.lr_high,
                "mode": race.mode,
            }
        )
    return pd.DataFrame(rows)


def section_race(ctx: Context) -> Section:
    """The race: does (4,3) find its answer before or after (3,4) is fitted?"""
    runs = [r for r in ctx.runs if has_shares(r.record)]
    if not runs:
        raise NotApplicable("no symmetric run has a per-epoch history of the held-out (4,3) yet")
    sentence = (
        "The papers expect small init to answer the held-out (4,3) inferentially and large init to copy the symmetric answer. "
        "The held-out (4,3)'s share of inferential (x - 10) and symmetric (x - 6, copied from the seen exception (3,4)) answers per epoch, "
        "one line per run (the per-epoch view of the two answers NeurIPS 2024 Fig. 2 plots at the end of training); a star marks the epoch "
        "(3,4) is first fitted (training accuracy >= 0.9). The shares stopped moving at the first "
        "epoch from which both stay within 0.05 of their final values; when the lr then was below a tenth of its peak, the schedule's decay "
        "froze them (under-trained). Modes, from the verdict's word at the last epoch (the rule the flip's criteria use): "
        "infers (inferential: ID >= 0.9, (3,4) accuracy >= 0.9, inferential >= 0.8), early copy (symmetric: ID >= 0.9, symmetric >= 0.8), "
        "under-trained, neither (training/studies/race.py)."
    ) + measured(
        ctx,
        "the mode",
        lambda run: race_of(run.record.history, run.record.lr).mode if run in runs else None,
        needs_model=False,
    )
    return Section(
        "race",
        "The race: (3,4) fitted against (4,3) answered",
        sentence,
        [Cell(figure=race_figure(runs), html=html_table(race_table(runs), 2), height=420)],
        combined=True,
    )
