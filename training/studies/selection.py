"""The selection rules that turn run folders into the numbers a flip is judged on.

Two protocols (:data:`PROTOCOLS`), computed from the same run folders:

* ``strict``: the final epoch of the one run (one learning rate), each seed on its own;
* ``paper``: per seed, the best over the learning rates of a grid and over the evaluated
  epochs, each target maximized separately (NeurIPS 2024 Fig. 2 takes the best of 9 lrs
  per seed, inferential and symmetric accuracy each on its own; the journal's Fig. 3A
  notebook the maximum over logged epochs); then the mean over seeds.

:func:`pick_strict` and :func:`pick_paper` select from :class:`RunRecord` s (one run
folder, read by :mod:`training.studies.records`); the population (:mod:`training.studies.population`) and
the phase diagrams (:func:`training.studies.phase.diagram.protocol_table`) select through them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from interp_init.tasks.registry import registered_tasks, task_class
from training.studies.records import RunRecord

#: The selection rules, and what each means (for titles and captions).
PROTOCOLS: tuple[str, ...] = ("strict", "paper")
PROTOCOL_TEXT: dict[str, str] = {
    "strict": "strict protocol: final epoch, one learning rate, each seed on its own",
    "paper": "paper protocol: per seed the best over learning rates and evaluated epochs, each target separately; then the mean over seeds",
}


def targets(task: str) -> tuple[str, ...]:
    """The numbers ``task``'s flip criteria read: its metrics' columns but the training accuracy."""
    cls = task_class(task)
    if not cls.reproduces:
        flips = [n for n in registered_tasks() if task_class(n).reproduces]
        raise ValueError(f"task {task!r} has no small-init / large-init flip to reproduce (its class sets no reproduces = True); reproduce takes {flips}")
    return tuple(name for name in cls.metrics_class.column_names() if name != "train_acc")


def check_protocol(protocol: str) -> str:
    """``protocol`` if it is one of :data:`PROTOCOLS`, else a ``ValueError`` naming them."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; choose one of {list(PROTOCOLS)} (strict: final epoch, one lr; paper: best over an lr grid and epochs)")
    return protocol


@dataclass(frozen=True)
class Pick:
    """One selected number and where it was read: the run's lr and the epoch (None: no value)."""

    value: float | None
    lr: float | None
    epoch: int | None


def pick_strict(run: RunRecord, targets: Sequence[str]) -> dict[str, Pick]:
    """The ``strict`` protocol: every target from the run's final metrics."""
    numbers = run.final_columns()
    return {t: Pick(numbers.get(t), run.lr, run.final_epoch) for t in targets}


def pick_paper(runs: Sequence[RunRecord], targets: Sequence[str]) -> dict[str, Pick]:
    """The ``paper`` protocol for one seed: per target, the highest value over the completed
    runs (one per lr) and their evaluated epochs; a tie goes to the smaller lr, then the
    earlier epoch.  A target no completed run measured is ``Pick(None, None, None)``."""
    best = {t: Pick(None, None, None) for t in targets}
    for run in sorted(runs, key=lambda r: r.lr):
        if run.status != "completed":
            continue
        for record in run.history:
            if record.metrics is None:
                continue  # an epoch without an evaluation
            numbers = record.metrics.columns()
            for t in targets:
                value = numbers.get(t)
                if value is not None and (best[t].value is None or value > best[t].value):
                    best[t] = Pick(float(value), run.lr, record.epoch)
    return best
