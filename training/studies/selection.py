"""The selection rules that turn run folders into the numbers a flip is judged on.

Two protocols (:data:`PROTOCOLS`), computed from the same run folders:

* ``strict``: the final epoch of the one run (one learning rate), each seed on its own;
* ``paper``: per seed, the best over the learning rates of a grid and over the evaluated
  epochs, each target maximized separately (NeurIPS 2024 Fig. 2 takes the best of 9 lrs
  per seed, inferential and symmetric accuracy each on its own; the journal's Fig. 3A
  notebook the maximum over logged epochs); then the mean over seeds.  ``logged_every=K``
  reads only the epochs the released scripts log (:func:`logged_epochs`: with their
  ``-pae 3``, a third of the epochs), not every evaluated one.

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
PROTOCOL_TEXT: dict[str, str] = {  # protocol_text() adds the logged epochs
    "strict": "strict protocol: final epoch, one learning rate, each seed on its own",
    "paper": "paper protocol: per seed the best over learning rates and evaluated epochs, each target separately; then the mean over seeds",
}


def targets(task: str) -> tuple[str, ...]:
    """The numbers ``task``'s flip criteria read: its metrics' columns but the training accuracy."""
    cls = task_class(task)
    if not cls.reproduces:
        flips = [n for n in registered_tasks() if task_class(n).reproduces]
        raise ValueError(
            f"task {task!r} has no small-init / large-init flip to reproduce (its class sets no reproduces = True); reproduce takes {flips}"
        )
    return tuple(name for name in cls.metrics_class.column_names() if name != "train_acc")


#: ``--logged-every``'s help (reproduce, phase-diagram, experiments/paper_statistic.py).
LOGGED_HELP = (
    "With --protocol paper: read only the epochs the released scripts log with -pae K (every K-th epoch, K=3 in their "
    "symmetric runs, and the next-to-last; never the last epoch's end), as the papers' best over epochs did [default: every evaluated epoch]."
)


def check_protocol(protocol: str, logged_every: int | None = None) -> str:
    """``protocol`` if it is one of :data:`PROTOCOLS` and ``logged_every`` (the ``paper``
    protocol's only: None, or an integer >= 1) fits it, else a ``ValueError`` naming them."""
    if protocol not in PROTOCOLS:
        raise ValueError(
            f"unknown protocol {protocol!r}; choose one of {list(PROTOCOLS)} (strict: final epoch, one lr; paper: best over an lr grid and epochs)"
        )
    if logged_every is not None:
        if isinstance(logged_every, bool) or not isinstance(logged_every, int) or logged_every < 1:
            raise ValueError(
                f"--logged-every must be an integer >= 1 (the released scripts log every 3rd epoch: 3), got {logged_every!r}"
            )
        if protocol != "paper":
            raise ValueError(
                "--logged-every selects the epochs the paper protocol reads; the strict protocol reads the final epoch: give --protocol paper"
            )
    return protocol


def protocol_text(protocol: str, logged_every: int | None = None) -> str:
    """What the protocol means, in words (titles and captions), with the epochs it reads."""
    if logged_every is None:
        return PROTOCOL_TEXT[protocol]
    return PROTOCOL_TEXT[protocol].replace(
        "evaluated epochs", f"the epochs the released scripts log (every {logged_every}, --logged-every {logged_every})"
    )


def logged_epochs(run: RunRecord, logged_every: int) -> set[int]:
    """The epochs of ``run``'s history the released scripts would have logged with
    ``print_acc_epoch = logged_every`` (sjtuzzw/complexity_control, ``train.py``).

    Their loop logs at the start of each 0-based epoch ``i`` with ``i % K == 0`` or ``i ==
    n_epoch - 1``, before training it, so what they log is the model after ``i`` epochs: our
    history's epochs ``K, 2K, ...`` (and ``epochs - 1``), never the end of the last epoch
    trained (nor after an early stop's epoch), and the init (``i = 0``), which our history does not hold."""
    last = run.epochs_run
    return {
        e.epoch
        for e in run.history
        if e.epoch < last and (e.epoch % logged_every == 0 or e.epoch == run.config.train.epochs - 1)
    }


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


def pick_paper(runs: Sequence[RunRecord], targets: Sequence[str], logged_every: int | None = None) -> dict[str, Pick]:
    """The ``paper`` protocol for one seed: per target, the highest value over the completed
    runs (one per lr) and their evaluated epochs (with ``logged_every``, only those the
    released scripts log, :func:`logged_epochs`); a tie goes to the smaller lr, then the
    earlier epoch.  A target no completed run measured is ``Pick(None, None, None)``."""
    check_protocol("paper", logged_every)
    best = {t: Pick(None, None, None) for t in targets}
    for run in sorted(runs, key=lambda r: r.lr):
        if run.status != "completed":
            continue
        read = None if logged_every is None else logged_epochs(run, logged_every)
        for record in run.history:
            if record.metrics is None or (read is not None and record.epoch not in read):
                continue  # an epoch without an evaluation, or one the released scripts do not log
            numbers = record.metrics.columns()
            for t in targets:
                value = numbers.get(t)
                if value is not None and (best[t].value is None or value > best[t].value):
                    best[t] = Pick(float(value), run.lr, record.epoch)
    return best
