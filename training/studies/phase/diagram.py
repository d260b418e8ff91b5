"""The phase-diagram job of a sweep folder: rebuild its results table, draw the papers'
figures it supports, write them as offline HTML, and say which runs they leave out.

Example::

    >>> from training.studies.phase.diagram import phase_diagrams
    >>> done = phase_diagrams("runs/fig2")  # doctest: +SKIP
    >>> done.paths, done.problem  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from interp_init.fileio import folder_is_held
from interp_init.outputs import check_output_pages, looks_like_run, refuse_inside_run, write_page
from interp_init.paths import check_path_names
from training.studies.phase.aggregation import param_columns
from training.studies.phase.figures import make_figures, supported_figures
from training.studies.phase.names import ID_THRESHOLD, LOSS_THRESHOLD, OOD_THRESHOLD, PAIR_ACC_THRESHOLD
from training.studies.records import RunRecord
from training.studies.selection import check_protocol, pick_paper, protocol_text
from training.studies.study_folder import strangers
from training.studies.sweep.results import (
    RESULTS_FILE,
    check_results_file,
    check_sweep_spec,
    collect_results,
    incomplete_runs,
    problem_summary,
    write_results,
)

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
    (:data:`training.studies.selection.PROTOCOLS`).

    ``strict``: the table itself (final epochs), refused when a configuration and seed has
    completed runs at more than one lr (strict reads one lr; the fix is named).  ``paper``:
    each completed run's metric columns (all its task measures: e.g. ``id_acc`` and
    ``square_acc`` of ``addition``) replaced by their best over its evaluated epochs (each
    separately; with ``logged_every``, only over the epochs the released scripts log,
    :func:`training.studies.selection.logged_epochs`); the aggregation then takes the best
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
    selected by ``protocol`` (:data:`training.studies.selection.PROTOCOLS`: ``strict``, the final
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
