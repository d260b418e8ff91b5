"""What a report section is made of, and what the section builders share.

A section (:class:`Section`) is a title, a caption and its cells: one :class:`Cell` for
all runs together, or one per run side by side.  A builder takes the :class:`Context`
(the runs, the :class:`~training.studies.report.config.ReportConfig` and probe inputs cached per
task) and returns its section; :func:`per_run` builds one cell per run and turns a probe
that does not apply to a run (:class:`NotApplicable`, or a probe's ``ValueError``) into a
note in place of its figure.  Each caption says what the papers expect and, through
:func:`measured`, what the runs on the page measured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from interp_init.runfolder import WEIGHTS_FILE
from interp_init.tasks.data import AnchorDataset
from interp_init.tasks.registry import registered_tasks, task_class
from training.studies.report.config import ReportConfig
from training.studies.report.runs import Run

#: Colours of the runs, in order (plotly's default qualitative palette).
RUN_COLOURS = (
    "#636efa",
    "#EF553B",
    "#00cc96",
    "#ab63fa",
    "#FFA15A",
    "#19d3f3",
    "#FF6692",
    "#B6E880",
    "#FF97FF",
    "#FECB52",
)


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
    """One part of the page: its anchor ``key``, title, caption and cells."""

    key: str
    title: str
    sentence: str
    #: One cell for all runs together, or one per run (side by side).
    cells: list[Cell] = field(default_factory=list)
    combined: bool = False
    #: At most this many cells side by side (None: every run's, at most 4).
    columns: int | None = None
    seconds: float = 0.0


@dataclass
class Context:
    """What the section builders share: the runs, the config and per-task probe inputs."""

    runs: list[Run]
    config: ReportConfig
    _cache: dict = field(default_factory=dict)
    #: The section being built (its builder's name without ``section_``); runs whose task
    #: lacks it (``Task.report_sections``) get a note instead of a cell.
    section: str = ""

    def known_sections(self) -> set[str]:
        """The sections some registered task lists (a section no task lists applies to every run)."""
        return {key for name in registered_tasks() for key in task_class(name).report_sections}

    def applies(self, run: Run) -> bool:
        """Whether the section being built is one of ``run``'s task's sections."""
        return self.section not in self.known_sections() or self.section in run.task.report_sections

    def cached(self, key: Any, make: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def balanced(self, run: Run) -> AnchorDataset:
        """The run's task's probe inputs (the anchor tasks: ``per_pair`` inputs of every pair)."""
        return self.cached(
            ("balanced", run.task),
            lambda: run.task.probe_inputs(self.config.per_pair, self.config.seed).to(self.config.device),
        )

    def sample(self, run: Run) -> AnchorDataset:
        """The one input the run's task draws attention and information flow for."""
        return self.cached(("sample", run.task), lambda: run.task.sample_input().to(self.config.device))


def per_run(ctx: Context, build: Callable[[Run, Context], Cell]) -> list[Cell]:
    """``build``'s cell of each run; a note instead where the run has no model or the probe does not apply."""
    cells = []
    for run in ctx.runs:
        if run.model is None:
            cells.append(Cell(note=f"no model: no {WEIGHTS_FILE} in {run.record.path} yet (the run has not finished)"))
            continue
        if not ctx.applies(run):
            cells.append(Cell(note=f"not a section of the {run.record.config.data.task!r} task"))
            continue
        try:
            cells.append(build(run, ctx))
        except NotApplicable as reason:
            cells.append(Cell(note=str(reason)))
        except ValueError as err:  # a probe's clear refusal of this model or input
            cells.append(Cell(note=f"not applicable to this run: {err}"))
    return cells


def measured(ctx: Context, what: str, value: Callable[[Run], str | None], *, needs_model: bool = True) -> str:
    """A caption's measured part, `` Measured here, <what>: <run> <value>; ...``, over the runs
    whose ``value`` is known (not ``None``; with ``needs_model``, only runs with a model, and
    not where the probe does not apply); ``""`` where no run has one."""
    items = []
    for run in ctx.runs:
        if (needs_model and run.model is None) or not ctx.applies(run):
            continue
        try:
            text = value(run)
        except (NotApplicable, ValueError):
            continue
        if text is not None:
            items.append(f"{run.name} {text}")
    return f" Measured here, {what}: {'; '.join(items)}." if items else ""


#: What a table cell shows where a value is missing (None, NaN, pandas' NA): a dash, never
#: ``None`` or ``<NA>``; a table whose missing values mean something (an epoch not reached)
#: says so in words before it gets here.
MISSING = "–"


def table_cell(value: Any, digits: int = 3) -> str:
    """One table cell as the page shows it: floats to ``digits`` places, booleans as yes/no,
    a missing value as :data:`MISSING`."""
    if value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value))):
        return MISSING
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, float | np.floating):
        return f"{value:.{digits}f}"
    return str(value)


def html_table(frame: pd.DataFrame, digits: int = 3, *, wrap: bool = False, wrap_names: bool = False) -> str:
    """``frame`` as the page's compact score table (every cell through :func:`table_cell`);
    a cell's text stays on one line unless ``wrap`` (between words, for narrow cells), and
    the first column's (a row's name, such as a run's label, which would break at a hyphen)
    unless ``wrap_names`` too."""
    shown = frame.astype(object).map(lambda value: table_cell(value, digits))
    classes = ["scores", *(["wrap"] if wrap else []), *(["wrap-names"] if wrap and wrap_names else [])]
    return shown.to_html(index=False, border=0, classes=classes)


def compact(fig: go.Figure, height: int = 340, title: str | None = None) -> go.Figure:
    """``fig`` at ``height`` pixels with small margins (and ``title``, if given)."""
    fig.update_layout(height=height, margin=dict(l=40, r=10, t=40 if title else 20, b=40), title=title)
    return fig
