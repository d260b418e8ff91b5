"""The report's sections on what each run learned: the verdict, the training curves and
the final accuracies, read from each run's record (:mod:`training.studies.records`; the verdict
also reads the stable rank of layer 0's W_Q and, inside an ``interp-init reproduce``
folder, its population: :mod:`training.studies.report.outcomes`).
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp_init.outputs import SUMMARY_FILE
from interp_init.tasks.anchor import FLIP_CRITERIA
from interp_init.tasks.base import FIT_THRESHOLD, EpochRecord
from probes.rank import merged_weight, stable_rank
from training.config import make_run_config
from training.studies.population import Population, failed_criteria, read_summary
from training.studies.recipe import recipe_columns
from training.studies.records import epoch_shares, has_shares, race_of, run_verdict, targets
from training.studies.report.cells import (
    MISSING,
    RUN_COLOURS,
    Cell,
    Context,
    NotApplicable,
    Run,
    Section,
    compact,
    html_table,
    measured,
    table_cell,
)
from training.studies.study import REGIME_NAMES

# ------------------------------------------------------------------ header
# The report's first screen: what the runs' preset means (:func:`preset_lead`) and the one
# table of the runs (:func:`runs_table`), each run under the short label the rest of the page
# uses, with its settings; settings every run shares are said once, under the table.
#
# A reader of the first minute's report (``interp-init reproduce --preset tiny``) learns here,
# before any verdict, that the tiny preset is a smoke test that is not expected to reproduce
# anything.

#: What each preset is for, as the report's first screen says it (``{size}``: the preset's
#: model and schedule, from :func:`training.config.make_run_config`).
PRESET_MEANINGS: dict[str, str] = {
    "tiny": (
        "a smoke test ({size}; seconds on a CPU). It checks that training, the probes and this page work end to end; "
        "its models learn little, so it is not expected to reproduce anything: a verdict of \u201cdid not fit\u201d "
        "and \u201cflip NOT reproduced\u201d below is its expected outcome, not a failure."
    ),
    "cpu": (
        "the papers' own models, scaled down for a CPU ({size}{time}): a small "
        "end-to-end reproduction; docs/faithful-models.md says what it shows over seeds."
    ),
    "paper": "the papers' recipe as published ({size}): the full reproduction, for a GPU.",
}

#: The presets a tiny run points to for a reproduction.
REPRODUCING_PRESETS = ("cpu", "paper")


def preset_size(preset: str) -> str:
    """The model and schedule of ``preset`` (on the default task), in a few words."""
    cfg = make_run_config(preset)
    return f"d_model {cfg.model.d_model}, {cfg.train.epochs} epochs on {cfg.data.n_train:,} samples"


def preset_time(preset: str) -> str:
    """How long a model of ``preset`` trains, from the records of the models shipped with the
    package (:func:`interp_init.pretrained.training_time`), with their machine and what ran
    beside it; empty where none of that preset is shipped."""
    from interp_init.pretrained import training_time

    time = training_time(preset)
    return "" if time is None else f"; the models shipped with the package trained in {time.span}, on {time.where}"


def preset_meaning(preset: str) -> str:
    """What ``preset`` is for, in a sentence or three."""
    return PRESET_MEANINGS[preset].format(size=preset_size(preset), time=preset_time(preset))


def preset_lead(runs: Sequence[Run]) -> str:
    """The first screen's paragraph(s): each preset the runs were made with and what it means
    (a tiny run points to the presets that reproduce); runs without a preset are said to be."""
    presets = list(dict.fromkeys(run.record.config.preset for run in runs))
    lines = []
    for preset in presets:
        if preset in PRESET_MEANINGS:
            who = (
                ""
                if len(presets) == 1
                else f" ({sum(r.record.config.preset == preset for r in runs)} of {len(runs)} runs)"
            )
            text = f"<b>Preset {html.escape(preset)}</b>{who}: {html.escape(preset_meaning(preset))}"
            if preset == "tiny":
                others = " or ".join(
                    f"<code>interp-init reproduce --preset {name}</code> ({html.escape(preset_meaning(name).split(' (', 1)[0])}, {preset_size(name)})"
                    for name in REPRODUCING_PRESETS
                )
                text += f" To reproduce the papers, run {others}."
        else:
            named = f"preset {preset}" if preset else "no preset recorded (set option by option)"
            text = f"<b>{html.escape(named[0].upper() + named[1:])}</b>: the settings are in the table below."
        lines.append(f"<p>{text}</p>")
    return f'<div class="lead">{"".join(lines)}</div>'


def _relative(path: Path, start: str | Path | None) -> str:
    """``path`` relative to ``start`` (default the working directory), as the page shows it;
    the absolute path where there is no relative one (another drive on Windows)."""
    try:
        return os.path.relpath(Path(path).resolve(), Path(start or ".").resolve())
    except ValueError:  # pragma: no cover - Windows, another drive
        return str(path)


def run_settings(run: Run) -> dict[str, Any]:
    """The settings of ``run`` the page's table of runs shows, in order."""
    cfg = run.record.config
    return {
        "task": cfg.data.task,
        "architecture": cfg.model.architecture,
        "preset": cfg.preset or "none",
        "gamma": cfg.init.gamma,
        "weight decay": cfg.train.weight_decay,
        "lr": cfg.train.lr,
        "d_model": cfg.model.d_model,
        "layers": cfg.model.n_layers,
        "heads": cfg.model.n_heads,
        "epochs": cfg.train.epochs,
        "samples": cfg.data.n_train,
        "seed": cfg.seed,
        **recipe_columns(cfg),
    }


def _setting(value: Any, name: str = "") -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return f"{value:,}" if name == "samples" else table_cell(value)


def runs_table(runs: Sequence[Run], out_dir: str | Path | None = None) -> str:
    """The page's one table of the runs: each run's short label, folder (relative to
    ``out_dir``, the report's folder; left out where every label is its folder), the
    settings in which the runs differ and its status; then one line with the settings every
    run shares."""
    settings = [run_settings(run) for run in runs]
    names = list(settings[0])
    differ = [k for k in names if len({repr(s[k]) for s in settings}) > 1]
    shared = [k for k in names if k not in differ]
    folders = [_relative(run.record.path, out_dir) for run in runs]
    rows = [
        {"run": run.name, "folder": folder, **{k: _setting(s[k], k) for k in differ}, "status": run.status}
        for run, folder, s in zip(runs, folders, settings, strict=True)
    ]
    frame = pd.DataFrame(rows)
    if all(Path(folder).as_posix() == run.name for folder, run in zip(folders, runs, strict=True)):
        frame = frame.drop(columns="folder")  # the labels are the folders, relative to the report
    table = frame.to_html(index=False, border=0, classes="runs")
    which = "Every run" if len(runs) > 1 else "The run"
    line = (
        f'<p class="shared">{which}: '
        + ", ".join(f"{html.escape(k)} {html.escape(_setting(settings[0][k], k))}" for k in shared)
        + ".</p>"
        if shared
        else ""
    )
    return f'<div class="table-wrap">{table}</div>{line}'


# ------------------------------------------------------------------ population
# The report's view of a reproduction's population (:class:`training.studies.population.Population`,
# read from ``summary.json`` by :func:`training.studies.population.read_summary`).
#
# For runs of a single-seed reproduction (``DIR/<task>/<regime>`` beside
# ``DIR/summary.json``: a population of one) the line the command printed, whether the flip
# was reproduced; for runs inside a population folder (``DIR/seed-S/<task>/<regime>``
# beside ``DIR/summary.json``) the figure (:func:`population_figure`: the held-out (4,3)'s
# inferential against symmetric share on the ``symmetric`` task; OOD accuracy on
# ``id-ood``) and the table of rates (each reading beside a criterion, such as the small-init
# criterion without its (3,4) condition, in the row after it), each naming the protocol that made it.

#: What the verdict says under a tiny reproduction's "flip NOT reproduced".
TINY_EXPECTED = "As expected of the tiny preset: a smoke test whose models learn too little to show the flip (see the top of the page)."

_REGIME_COLOURS = {"small-init": "#636efa", "large-init": "#EF553B"}


def population_summaries(runs: Sequence[Run], depth: int = 3) -> dict[Path, Population]:
    """Study folder -> its population, for the runs that sit ``depth`` levels below one
    (3: a population's ``seed-S/<task>/<regime>``; 2: a single seed's ``<task>/<regime>``)."""
    found: dict[Path, Population] = {}
    for root in dict.fromkeys(run.record.path.parents[depth - 1] for run in runs):
        population = read_summary(root / SUMMARY_FILE) if (root / SUMMARY_FILE).is_file() else None
        if population is not None and (depth == 2) == (len(population.rows) == 1):
            found[root] = population
    return found


def population_figure(population: Population) -> go.Figure:
    """One dot per seed and regime, one panel per task: where the task measures the held-out
    pair against both targets (``heldout_symmetric``, ``heldout_inferential``), the one
    share against the other; otherwise the task's first held-out number (``ood_acc``) per
    regime.  Dashed: the criteria's thresholds."""
    rows, tasks = population.rows, population.tasks
    fig = make_subplots(
        rows=1,
        cols=len(tasks),
        subplot_titles=[f"({chr(97 + i)}) {task}" for i, task in enumerate(tasks)],
        horizontal_spacing=0.12,
    )
    for col, task in enumerate(tasks, start=1):
        names = targets(task)
        pair = "heldout_symmetric" in names and "heldout_inferential" in names
        column = next((k for k in names if k != "id_acc"), "id_acc")
        for regime in REGIME_NAMES:
            runs = [row.result(task, regime) for row in rows]
            common = dict(
                mode="markers",
                name=regime,
                legendgroup=regime,
                showlegend=col == 1,
                text=[f"seed {row.seed}" for row in rows],
                marker=dict(color=_REGIME_COLOURS[regime], size=10, opacity=0.8),
            )
            if pair:
                xs, ys = [r.value("heldout_symmetric") for r in runs], [r.value("heldout_inferential") for r in runs]
                fig.add_trace(
                    go.Scatter(
                        x=xs, y=ys, hovertemplate="%{text}<br>symmetric %{x:.2f}, inferential %{y:.2f}", **common
                    ),
                    row=1,
                    col=col,
                )
            else:
                ys = [r.value(column) for r in runs]
                fig.add_trace(
                    go.Scatter(x=[regime] * len(ys), y=ys, hovertemplate=f"%{{text}}<br>{column} %{{y:.2f}}", **common),
                    row=1,
                    col=col,
                )
        # the criteria's thresholds, dashed in the colour of the regime they bound
        small, large, at = _REGIME_COLOURS["small-init"], _REGIME_COLOURS["large-init"], dict(row=1, col=col)
        if pair:
            fig.add_hline(FLIP_CRITERIA["min_small_inferential"], line_dash="dash", line_color=small, **at)
            fig.add_vline(FLIP_CRITERIA["min_large_symmetric"], line_dash="dash", line_color=large, **at)
            fig.update_xaxes(title_text="held-out share following the symmetric target", range=[-0.05, 1.05], **at)
            fig.update_yaxes(title_text="held-out share following the inferential target", range=[-0.05, 1.05], **at)
        else:
            for criterion, colour in (
                (("min_small_ood", small), ("max_large_ood", large)) if column == "ood_acc" else ()
            ):
                fig.add_hline(FLIP_CRITERIA[criterion], line_dash="dash", line_color=colour, **at)
            fig.update_yaxes(title_text=column, range=[-0.05, 1.05], **at)
    title = f"Population of {len(rows)} seeds, preset {population.preset}<br><sup>{html.escape(population.protocol_text)}</sup>"
    fig.update_layout(title=title, template="plotly_white", width=500 * len(tasks), height=460)
    return fig


def population_parts(runs: Sequence[Run]) -> tuple[str, go.Figure | None]:
    """The verdict section's population parts: per single-seed reproduction the flip's
    verdict; per population folder the rates table (naming its protocol), and the dot
    figure of the first (None: no population); for the runs of a single-seed reproduction,
    a note that they are one draw."""
    parts, figure = [], None
    for root, one in population_summaries(runs, depth=2).items():
        checks = one.rows[0].checks
        where = f"{root.name} (preset {one.preset}, seed {one.rows[0].seed})" if one.preset else root.name
        line = f"{where}: " + (
            "flip reproduced (all criteria met)"
            if checks["all"]
            else f"flip NOT reproduced; failed: {failed_criteria(checks)}"
        )
        parts.append(f'<p class="verdict">{html.escape(line)}</p>')
        if one.preset == "tiny" and not checks["all"]:
            parts.append(f'<p class="note">{html.escape(TINY_EXPECTED)}</p>')
    singles = len(parts)
    for root, population in population_summaries(runs).items():
        rows = [
            {
                "criterion": r.name,
                "seeds that meet it": f"{r.met} of {r.of}",
                "95% exact interval": "[{:.2f}, {:.2f}]".format(*r.interval),
            }
            for r in population.rates_and_readings()
        ]
        parts.append(
            f'<p class="verdict">{html.escape(root.name)}: a population of {len(population.rows)} seeds '
            f"({html.escape(population.protocol_text)}); the runs in this report are one draw of it.</p>"
        )
        parts.append(html_table(pd.DataFrame(rows), 2))
        figure = population_figure(population) if figure is None else figure
    if len(parts) == singles and singles:
        parts.append(
            '<p class="note">These runs are one draw (one seed) of an <code>interp-init reproduce</code>; '
            "how often each criterion holds over seeds is what <code>interp-init reproduce --seeds 31,32,33,...</code> measures.</p>"
        )
    return "".join(parts), figure


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
    sentence = (
        " ".join(expected)
        + " Below, each run's solution and the numbers that decide it (one cell of NeurIPS 2024 Fig. 2 or of the journal's Fig. 3A)."
    )
    cell = Cell(figure=population_fig, html="".join(parts), height=480)
    return Section("verdict", "Verdict: what each model learned", sentence, [cell], combined=True)


def fit_epoch(history: Sequence[EpochRecord]) -> int | None:
    """The first evaluated epoch whose ID accuracy reached :data:`~interp_init.tasks.base.FIT_THRESHOLD`; None if none did."""
    return next(
        (
            r.epoch
            for r in history
            if r.metrics is not None and r.metrics.id_acc is not None and r.metrics.id_acc >= FIT_THRESHOLD
        ),
        None,
    )


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
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=("training loss", "train / ID accuracy", "held-out: OOD, candidates, commutativity, square"),
    )
    for i, run in enumerate(ctx.runs):
        history = run.record.history
        if not history:
            continue
        colour = RUN_COLOURS[i % len(RUN_COLOURS)]
        frame = pd.DataFrame(
            [
                {
                    "epoch": r.epoch,
                    "loss": r.loss,
                    **(
                        {}
                        if r.metrics is None
                        else {
                            "train_acc": r.metrics.train_acc,
                            "id_acc": r.metrics.id_acc,
                            **r.metrics.heldout_curves(),
                        }
                    ),
                }
                for r in history
            ]
        )
        shown = [False]  # one legend entry per run (its colour); line styles are in the caption

        def add(column: str, col: int, label: str, dash: str = "solid") -> None:
            if column in frame:
                rows = frame[["epoch", column]].dropna()
                fig.add_trace(
                    go.Scatter(
                        x=rows["epoch"],
                        y=rows[column],
                        name=run.name,
                        legendgroup=run.name,
                        showlegend=not shown[0],
                        mode="lines",
                        line=dict(color=colour, dash=dash),
                        hovertemplate=f"{html.escape(run.name)}<br>{label}: %{{y:.4g}} at epoch %{{x}}<extra></extra>",
                    ),
                    row=1,
                    col=col,
                )
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
        return Section(
            "curves",
            "Training curves",
            sentence,
            [Cell(note="no run has a training history (metrics.json) yet")],
            combined=True,
        )
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_yaxes(range=[-0.02, 1.02], row=1, col=2)
    fig.update_yaxes(range=[-0.02, 1.02], row=1, col=3)
    epochs = max((len(r.record.history) for r in ctx.runs), default=0)
    fig.update_xaxes(title_text="epoch", **({"dtick": 1} if epochs <= 12 else {}))
    compact(fig, 420)
    fig.update_layout(margin=dict(t=50), legend=dict(orientation="h", yanchor="top", y=-0.22, x=0, font=dict(size=11)))
    return Section(
        "curves", "Training curves", sentence, [Cell(figure=fig, height=420 + 20 * len(ctx.runs))], combined=True
    )


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
        return Section(
            "accuracies",
            "Accuracies",
            sentence,
            [Cell(html=html_table(table), note="no run has final accuracies yet")],
            combined=True,
        )
    fig = go.Figure()
    for i, row in table.iterrows():
        values = [row[m] for m in measures]
        fig.add_trace(
            go.Bar(
                x=measures,
                y=values,
                name=row["run"],
                marker_color=RUN_COLOURS[i % len(RUN_COLOURS)],
                text=[None if pd.isna(v) else f"{v:.2f}" for v in values],
                textposition="outside",
            )
        )
    fig.update_layout(barmode="group", yaxis=dict(range=[0, 1.12], title="accuracy"))
    compact(fig, 440)
    # the runs' legend in rows above the plot (long run names would squeeze it from the side):
    # plotly widens the top margin by the rows the legend takes, so no band is left empty
    fig.update_layout(
        margin=dict(t=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, font=dict(size=11), maxheight=0.4),
    )
    return Section(
        "accuracies", "Accuracies", sentence, [Cell(figure=fig, html=html_table(table), height=440)], combined=True
    )


# ------------------------------------------------------------------ race
# The report's race section (``symmetric`` runs): the held-out (4,3)'s inferential and
# symmetric shares against epoch, one line per run (per seed in a population), the epoch the
# seen exception (3,4) is fitted marked, and the table of :class:`training.studies.records.Race` numbers.


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
        "under-trained, neither (training/studies/records.py)."
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
