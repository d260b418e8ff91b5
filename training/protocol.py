"""The selection rules that turn run folders into the numbers a flip is judged on.

Two protocols (:data:`PROTOCOLS`), computed from the same run folders:

* ``strict``: the final epoch of the one run (one learning rate), each seed on its own;
* ``paper``: per seed, the best over the learning rates of a grid and over the evaluated
  epochs, each target maximized separately (NeurIPS 2024 Fig. 2 takes the best of 9 lrs
  per seed, inferential and symmetric accuracy each on its own; the journal's Fig. 3A
  notebook the maximum over logged epochs); then the mean over seeds.

:func:`pick_strict` and :func:`pick_paper` select from :class:`RunRecord` s (one run
folder's lr and metrics records); :func:`protocol_table` turns a sweep's results table
into the one a protocol reads (:func:`training.phase.diagram.phase_diagrams` draws from
it).  Metrics are read through one function, :func:`record_numbers`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp_init.runfolder import RunFolder
from interp_init.task_registry import task_class
from training.config import RunConfig

if TYPE_CHECKING:
    import pandas as pd

#: The selection rules, and what each means (for titles and captions).
PROTOCOLS: tuple[str, ...] = ("strict", "paper")
PROTOCOL_TEXT: dict[str, str] = {
    "strict": "strict protocol: final epoch, one learning rate, each seed on its own",
    "paper": "paper protocol: per seed the best over learning rates and evaluated epochs, each target separately; then the mean over seeds",
}
#: The metric columns of a sweep's results table that :func:`protocol_table` reselects.
SWEEP_TARGETS: tuple[str, ...] = ("train_acc", "id_acc", "heldout_inferential", "heldout_symmetric", "exception_acc", "ood_acc", "commutativity")


def targets(task: str) -> tuple[str, ...]:
    """The numbers ``task``'s flip criteria read: its metrics' columns but the training accuracy."""
    cls = task_class(task)
    if not cls.reproduces:
        raise ValueError(f"task {task!r} has no small-init / large-init flip to count over seeds")
    return tuple(name for name in cls.metrics_class.column_names() if name != "train_acc")


def check_protocol(protocol: str) -> str:
    """``protocol`` if it is one of :data:`PROTOCOLS`, else a ``ValueError`` naming them."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; choose one of {list(PROTOCOLS)} (strict: final epoch, one lr; paper: best over an lr grid and epochs)")
    return protocol


def record_numbers(record: Mapping[str, Any], task: str) -> dict[str, float | None]:
    """The numbers the protocols select from one metrics record (``metrics.json``'s
    ``final`` or one evaluated ``history`` entry), read as ``task``'s typed metrics
    (:meth:`interp_init.task.TaskMetrics.columns`): :data:`SWEEP_TARGETS`, None where the
    task does not measure one (or the record holds no evaluation)."""
    try:
        columns = task_class(task).metrics_class.from_json(record).columns()
    except ValueError:
        columns = {}  # an epoch without an evaluation
    return {name: columns.get(name) for name in SWEEP_TARGETS}


@dataclass(frozen=True)
class RunRecord:
    """What the protocols read of one run folder: its lr, status and metrics records."""

    path: Path
    task: str
    lr: float
    status: str
    final: Mapping[str, Any]
    history: Sequence[Mapping[str, Any]]

    @classmethod
    def read(cls, run_dir: str | Path) -> RunRecord:
        folder = RunFolder(run_dir)
        cfg = RunConfig.from_dict(folder.read_config(), where=str(folder.config_path))
        metrics = folder.read_metrics() or {}
        status = str(metrics.get("status", folder.status()))
        return cls(folder.path, cfg.data.task, cfg.train.lr, status, metrics.get("final") or {}, metrics.get("history") or [])


@dataclass(frozen=True)
class Pick:
    """One selected number and where it was read: the run's lr and the epoch (None: no value)."""

    value: float | None
    lr: float | None
    epoch: int | None


def pick_strict(run: RunRecord, targets: Sequence[str]) -> dict[str, Pick]:
    """The ``strict`` protocol: every target from the run's final metrics."""
    numbers = record_numbers(run.final, run.task)
    epoch = run.final.get("epoch")
    return {t: Pick(numbers.get(t), run.lr, None if epoch is None else int(epoch)) for t in targets}


def pick_paper(runs: Sequence[RunRecord], targets: Sequence[str]) -> dict[str, Pick]:
    """The ``paper`` protocol for one seed: per target, the highest value over the completed
    runs (one per lr) and their evaluated epochs; a tie goes to the smaller lr, then the
    earlier epoch.  A target no completed run measured is ``Pick(None, None, None)``."""
    best = {t: Pick(None, None, None) for t in targets}
    for run in sorted(runs, key=lambda r: r.lr):
        if run.status != "completed":
            continue
        for record in run.history:
            if "id_acc" not in record:
                continue  # an epoch without an evaluation
            numbers = record_numbers(record, run.task)
            for t in targets:
                value = numbers.get(t)
                if value is not None and (best[t].value is None or value > best[t].value):
                    best[t] = Pick(float(value), run.lr, int(record["epoch"]))
    return best


# ---------------------------------------------------------------- sweeps


def protocol_table(df: pd.DataFrame, sweep_dir: str | Path, protocol: str) -> pd.DataFrame:
    """A sweep's results table as ``protocol`` reads it, for :func:`training.phase.aggregate`.

    ``strict``: the table itself (final epochs), refused when a configuration and seed has
    completed runs at more than one lr (strict reads one lr; the fix is named).  ``paper``:
    each completed run's :data:`SWEEP_TARGETS` replaced by their best over its evaluated
    epochs (each separately); the aggregation then takes the best over lrs and the mean
    over seeds."""
    check_protocol(protocol)
    if protocol == "strict":
        _check_one_lr(df)
        return df
    out = df.copy()
    for i, run in zip(out.index, out["run"], strict=True):
        if out.at[i, "status"] != "completed":
            continue
        picks = pick_paper([RunRecord.read(Path(sweep_dir) / str(run))], SWEEP_TARGETS)
        for target, pick in picks.items():
            if target in out.columns:
                out.at[i, target] = math.nan if pick.value is None else pick.value
    return out


def _check_one_lr(df: pd.DataFrame) -> None:
    from training.phase.aggregation import param_columns

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


def protocol_title(fig: Any, protocol: str) -> Any:
    """``fig`` (plotly) with ``protocol`` named under its title."""
    title = fig.layout.title.text or ""
    return fig.update_layout(title_text=f"{title}<br><sup>{PROTOCOL_TEXT[check_protocol(protocol)]}</sup>")
