"""The report's first screen: what the runs' preset means (:func:`preset_lead`) and the one
table of the runs (:func:`runs_table`), each run under the short label the rest of the page
uses, with its settings; settings every run shares are said once, under the table.

A reader of the first minute's report (``interp-init reproduce --preset tiny``) learns here,
before any verdict, that the tiny preset is a smoke test that is not expected to reproduce
anything.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from training.config import make_run_config
from training.studies.recipe import recipe_columns
from training.studies.report.cells import table_cell
from training.studies.report.runs import Run

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
            who = "" if len(presets) == 1 else f" ({sum(r.record.config.preset == preset for r in runs)} of {len(runs)} runs)"
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
        "task": cfg.data.task, "architecture": cfg.model.architecture, "preset": cfg.preset or "none", "gamma": cfg.init.gamma,
        "weight decay": cfg.train.weight_decay, "lr": cfg.train.lr, "d_model": cfg.model.d_model, "layers": cfg.model.n_layers,
        "heads": cfg.model.n_heads, "epochs": cfg.train.epochs, "samples": cfg.data.n_train, "seed": cfg.seed, **recipe_columns(cfg),
    }  # fmt: skip


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
    line = f'<p class="shared">{which}: ' + ", ".join(f"{html.escape(k)} {html.escape(_setting(settings[0][k], k))}" for k in shared) + ".</p>" if shared else ""
    return f'<div class="table-wrap">{table}</div>{line}'

