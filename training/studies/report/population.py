"""The report's view of a reproduction's population (:class:`training.studies.population.Population`,
read from ``summary.json`` by :func:`training.studies.population.read_summary`).

For runs of a single-seed reproduction (``DIR/<task>/<regime>`` beside
``DIR/summary.json``: a population of one) the line the command printed, whether the flip
was reproduced; for runs inside a population folder (``DIR/seed-S/<task>/<regime>``
beside ``DIR/summary.json``) the figure (:func:`population_figure`: the held-out (4,3)'s
inferential against symmetric share on the ``symmetric`` task; OOD accuracy on
``id-ood``) and the table of rates (each reading beside a criterion, such as the small-init
criterion without its (3,4) condition, in the row after it), each naming the protocol that made it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp_init.outputs import SUMMARY_FILE
from interp_init.tasks.anchor import FLIP_CRITERIA
from training.studies.population import Population, failed_criteria
from training.studies.regimes import REGIME_NAMES
from training.studies.report.cells import html_table
from training.studies.report.runs import Run
from training.studies.selection import targets
from training.studies.summaries import read_summary

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
        if pair:
            fig.add_hline(
                y=FLIP_CRITERIA["min_small_inferential"],
                line_dash="dash",
                line_color=_REGIME_COLOURS["small-init"],
                row=1,
                col=col,
            )
            fig.add_vline(
                x=FLIP_CRITERIA["min_large_symmetric"],
                line_dash="dash",
                line_color=_REGIME_COLOURS["large-init"],
                row=1,
                col=col,
            )
            fig.update_xaxes(
                title_text="held-out share following the symmetric target", range=[-0.05, 1.05], row=1, col=col
            )
            fig.update_yaxes(
                title_text="held-out share following the inferential target", range=[-0.05, 1.05], row=1, col=col
            )
        else:
            if column == "ood_acc":
                fig.add_hline(
                    y=FLIP_CRITERIA["min_small_ood"],
                    line_dash="dash",
                    line_color=_REGIME_COLOURS["small-init"],
                    row=1,
                    col=col,
                )
                fig.add_hline(
                    y=FLIP_CRITERIA["max_large_ood"],
                    line_dash="dash",
                    line_color=_REGIME_COLOURS["large-init"],
                    row=1,
                    col=col,
                )
            fig.update_yaxes(title_text=column, range=[-0.05, 1.05], row=1, col=col)
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
