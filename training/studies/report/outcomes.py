"""The report's sections on what each run learned: the verdict, the training curves and
the final accuracies, read from each run's record (:mod:`training.studies.records`; the verdict
also reads the stable rank of layer 0's W_Q and, inside an ``interp-init reproduce``
folder, its population: :mod:`training.studies.report.population`).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp_init.tasks.base import FIT_THRESHOLD, EpochRecord
from probes.rank import merged_weight, stable_rank
from training.studies.report.cells import RUN_COLOURS, Cell, Context, Section, compact, html_table, measured
from training.studies.report.population import population_parts
from training.studies.report.runs import Run
from training.studies.verdict import run_verdict


def section_verdict(ctx: Context) -> Section:
    """What each run learned: its solution in the papers' terms and the numbers behind it."""
    rows = []
    for run in ctx.runs:
        typed = run.record.metrics
        rank = None if run.model is None else stable_rank(merged_weight(run.model, "W_Q", 0))
        v = run_verdict(run.task, None if typed is None else typed.final, run.status, rank)
        rows.append({"run": run.name, "learned": v.solution, "evidence": v.evidence})
    expected = list(dict.fromkeys(r.task.expected for r in ctx.runs if r.task.expected))
    population_html, population_fig = population_parts(ctx.runs)
    parts = [html_table(pd.DataFrame(rows), 2), population_html]
    # the table says what each run learned: the caption says only what to compare it with
    sentence = " ".join(expected) + " Below, each run's solution and the numbers that decide it (one cell of NeurIPS 2024 Fig. 2 or of the journal's Fig. 3A)."
    cell = Cell(figure=population_fig, html="".join(parts), height=480)
    return Section("verdict", "Verdict: what each model learned", sentence, [cell], combined=True)


def fit_epoch(history: Sequence[EpochRecord]) -> int | None:
    """The first evaluated epoch whose ID accuracy reached :data:`~interp_init.tasks.base.FIT_THRESHOLD`; None if none did."""
    return next((r.epoch for r in history if r.metrics is not None and r.metrics.id_acc is not None and r.metrics.id_acc >= FIT_THRESHOLD), None)


def _fit_epoch_text(run: Run) -> str | None:
    history = run.record.history
    if not history:
        return None
    epoch = fit_epoch(history)
    return str(epoch) if epoch is not None else f"not within {history[-1].epoch} epochs"


#: Line styles of the held-out panel's curves, in the order the task's metrics give them.
HELDOUT_DASHES = ("solid", "dash", "dot", "dashdot")


def section_curves(ctx: Context) -> Section:
    """Loss and accuracies per epoch, every run in one figure."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=("training loss", "train / ID accuracy", "held-out: OOD, candidates, commutativity, square"))
    for i, run in enumerate(ctx.runs):
        history = run.record.history
        if not history:
            continue
        colour = RUN_COLOURS[i % len(RUN_COLOURS)]
        frame = pd.DataFrame(
            [{"epoch": r.epoch, "loss": r.loss, **({} if r.metrics is None else {"train_acc": r.metrics.train_acc, "id_acc": r.metrics.id_acc, **r.metrics.heldout_curves()})} for r in history]
        )
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
        for j, column in enumerate(c for c in frame.columns if c not in ("epoch", "loss", "train_acc", "id_acc")):
            add(column, 3, column, HELDOUT_DASHES[j % len(HELDOUT_DASHES)])
    sentence = (
        "Training loss and accuracies per epoch, one colour per run; line styles: solid loss and ID, dotted train; the held-out panel "
        "draws the task's own measures solid, dashed, dotted in turn (OOD solid and commutativity dashed; the held-out pair's inferential "
        "target solid and symmetric target dashed; hover a line for its name); "
        "the accuracy curves behind NeurIPS 2024 Fig. 2 and the journal's Fig. 3A, and the epochs-to-fit of NeurIPS Fig. 6 / journal Fig. 8, "
        "where small init needs more epochs to fit as the inferential complexity k grows and large init does not."
    ) + measured(ctx, f"the first epoch with ID accuracy >= {FIT_THRESHOLD}", _fit_epoch_text, needs_model=False)
    if not any(run.record.history for run in ctx.runs):
        return Section("curves", "Training curves", sentence, [Cell(note="no run has a training history (metrics.json) yet")], combined=True)
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_yaxes(range=[-0.02, 1.02], row=1, col=2)
    fig.update_yaxes(range=[-0.02, 1.02], row=1, col=3)
    epochs = max((len(r.record.history) for r in ctx.runs), default=0)
    fig.update_xaxes(title_text="epoch", **({"dtick": 1} if epochs <= 12 else {}))
    compact(fig, 420)
    fig.update_layout(margin=dict(t=50), legend=dict(orientation="h", yanchor="top", y=-0.22, x=0, font=dict(size=11)))
    return Section("curves", "Training curves", sentence, [Cell(figure=fig, height=420 + 20 * len(ctx.runs))], combined=True)


def accuracy_table(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per run: its epochs and every final accuracy its metrics hold (its settings
    and status are in the page's table of runs)."""
    rows = []
    for run in runs:
        final = None if run.record.metrics is None else run.record.metrics.final
        row: dict[str, Any] = {
            "run": run.name,
            "epochs": run.record.final_epoch if run.record.final_epoch is not None else len(run.record.history),
            "train": None if final is None else final.train_acc,
            "ID": None if final is None else final.id_acc,
        }
        if final is not None:
            row.update(final.heldout_curves())
        rows.append(row)
    return pd.DataFrame(rows)


def _deciding_accuracies(run: Run) -> str | None:
    """The final accuracies that decide the run's verdict (the task's :meth:`~interp_init.tasks.base.TaskMetrics.deciding`)."""
    final = None if run.record.metrics is None else run.record.metrics.final
    return None if final is None else (final.deciding() or None)


ACCURACY_COLUMNS_SKIP = ("run", "epochs")


def section_accuracies(ctx: Context) -> Section:
    table = accuracy_table(ctx.runs)
    measures = [c for c in table.columns if c not in ACCURACY_COLUMNS_SKIP and table[c].notna().any()]
    sentence = (
        "Final accuracy of each run on the training pairs, the ID test set, the held-out pair against each candidate target "
        "(inferential x-10, symmetric x-6), OOD and commutativity: one cell of NeurIPS 2024 Fig. 2 (symmetric vs inferential) "
        "and of the journal's Fig. 3 (ID / OOD / commutativity phases). The papers expect the held-out (4,3) to follow the inferential "
        "target under small init and the symmetric one under large init, and OOD accuracy above 0.5 (Phase 3) with larger gamma "
        "(smaller init) and weight decay."
    ) + measured(ctx, "the accuracies that decide the solution", _deciding_accuracies, needs_model=False)
    if not measures:
        return Section("accuracies", "Accuracies", sentence, [Cell(html=html_table(table), note="no run has final accuracies yet")], combined=True)
    fig = go.Figure()
    for i, row in table.iterrows():
        values = [row[m] for m in measures]
        fig.add_trace(go.Bar(x=measures, y=values, name=row["run"], marker_color=RUN_COLOURS[i % len(RUN_COLOURS)], text=[None if pd.isna(v) else f"{v:.2f}" for v in values], textposition="outside"))
    fig.update_layout(barmode="group", yaxis=dict(range=[0, 1.12], title="accuracy"))
    compact(fig, 440)
    # the runs' legend in rows above the plot (long run names would squeeze it from the side):
    # plotly widens the top margin by the rows the legend takes, so no band is left empty
    fig.update_layout(margin=dict(t=10), legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, font=dict(size=11), maxheight=0.4))
    return Section("accuracies", "Accuracies", sentence, [Cell(figure=fig, html=html_table(table), height=440)], combined=True)
