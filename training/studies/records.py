"""The one reader of run folders: :class:`RunRecord`, a typed record per run folder: its
config, its status (read from the folder: a run another process trains is ``running``), its
``metrics.json`` typed for its task (:class:`~interp_init.tasks.base.RunMetrics`, read through
:meth:`interp_init.runfolder.RunFolder.read_metrics`, which validates it) and a failed run's
``error.txt``.  Every table, protocol, population, phase diagram, report section and the
preset search reads runs here.  It reads files only: analyses of a run's weights (the
results table's stable ranks, :func:`training.studies.sweep.results.run_stable_ranks`)
stand on it, after a study.

Example::

    >>> from training.studies.records import RunRecord
    >>> record = RunRecord.read("runs/first-minute/symmetric/small-init")  # doctest: +SKIP
    >>> record.status, record.final_columns()["id_acc"]  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from interp_init.config import check_int
from interp_init.runfolder import FINISHED_STATUSES, BadRunFile, RunFolder, RunStatus
from interp_init.tasks.anchor import ANSWERS, EXCEPTION, FLIP_CRITERIA, HELDOUT, symmetric_solution
from interp_init.tasks.base import FIT_THRESHOLD, EpochRecord, RunMetrics, Task, TaskMetrics, Verdict, read_run_metrics
from interp_init.tasks.registry import make_task, registered_tasks, task_class
from training.config import RunConfig

__all__ = [
    "LOGGED_HELP",
    "MODES",
    "PROTOCOLS",
    "PROTOCOL_TEXT",
    "Pick",
    "Race",
    "RunRecord",
    "SETTLE_TOLERANCE",
    "Verdict",
    "check_protocol",
    "epoch_shares",
    "has_shares",
    "logged_epochs",
    "pick_paper",
    "pick_strict",
    "protocol_text",
    "race_of",
    "race_of_record",
    "run_verdict",
    "targets",
]


@dataclass(frozen=True)
class RunRecord:
    """One run folder, read: its path, config, status, typed metrics (None before it has
    ``metrics.json``), the first line of ``error.txt`` of a failed run ("" otherwise) and
    the epoch of its final metrics (None until it ends)."""

    path: Path
    config: RunConfig
    status: RunStatus
    metrics: RunMetrics | None
    error: str = ""
    final_epoch: int | None = None

    @classmethod
    def read(cls, run_dir: str | Path, *, strict: bool = True) -> RunRecord:
        """Read ``run_dir``.  ``strict=False``: a damaged ``metrics.json`` reads as no
        metrics (the folder's status says what it is) instead of raising."""
        folder = RunFolder(run_dir)
        config = RunConfig.from_dict(folder.read_config(), where=str(folder.config_path))
        status = folder.status()
        error = ""
        try:
            raw = folder.read_metrics()
            _check_epochs(folder, config, raw)
        except ValueError as err:
            if strict:
                raise
            raw = None
            if status in FINISHED_STATUSES:  # finished by its word, but not this run's metrics: never read as finished
                status, error = RunStatus.UNREADABLE, str(err)
        metrics = None if raw is None else read_run_metrics(config.data.make_task(), raw, str(folder.metrics_path))
        if status == RunStatus.FAILED and folder.error_path.exists():
            error = (folder.error_path.read_text(encoding="utf-8", errors="replace").splitlines() or [""])[0]
        epoch = None if raw is None else (raw.get("final") or {}).get("epoch")
        return cls(folder.path, config, status, metrics, error, None if epoch is None else int(epoch))

    @property
    def task(self) -> Task:
        return self.config.data.make_task()

    @property
    def task_name(self) -> str:
        return self.config.data.task

    @property
    def lr(self) -> float:
        return self.config.train.lr

    @property
    def recorded_status(self) -> str | None:
        """The status ``metrics.json`` records (``running``, ``completed``, ``diverged``), None without one."""
        return None if self.metrics is None else self.metrics.status

    @property
    def history(self) -> tuple[EpochRecord, ...]:
        return () if self.metrics is None else self.metrics.history

    @property
    def elapsed_s(self) -> float | None:
        return None if self.metrics is None else self.metrics.elapsed_s

    @property
    def epochs_run(self) -> int:
        """The last epoch the run recorded (0 before its first)."""
        return self.history[-1].epoch if self.history else 0

    def final_columns(self) -> dict[str, float | None]:
        """The task's metric columns at the end of the run (None where not measured yet)."""
        final = None if self.metrics is None else self.metrics.final
        columns: dict[str, float | None] = dict.fromkeys(self.task.metrics_class.column_names())
        return {**columns, **({} if final is None else final.columns())}


def _check_epochs(folder: RunFolder, config: RunConfig, raw: dict[str, Any] | None) -> None:
    """Refuse a ``metrics.json`` whose epochs do not fit the run's config: an epoch past the
    config's last, or a completed run that did not reach it (the metrics are another run's,
    or were edited)."""
    if raw is None:
        return
    epochs = config.train.epochs
    seen = [r.get("epoch") for r in raw.get("history") or [] if isinstance(r, dict)] + [
        (raw.get("final") or {}).get("epoch")
    ]
    seen = [e for e in seen if isinstance(e, int) and not isinstance(e, bool)]
    fix = "the metrics are another run's or were edited: restore them, or train the run again into a new folder"
    if seen and max(seen) > epochs:
        raise BadRunFile(
            folder.metrics_path, f"records epoch {max(seen)}, past the {epochs} epoch(s) of the run's config.json", fix
        )
    last = (raw.get("history") or [{}])[-1]
    stopped = (raw.get("stopped_early") or {}).get("epoch") if isinstance(raw.get("stopped_early"), dict) else None
    if (
        raw.get("status") == RunStatus.COMPLETED
        and isinstance(last, dict)
        and last.get("epoch") not in (epochs, stopped)
    ):
        raise BadRunFile(
            folder.metrics_path,
            f"says completed, but its last epoch is {last.get('epoch')!r}, not the config's {epochs}",
            fix,
        )


# ------------------------------------------------------------------ selection
# The selection rules that turn run folders into the numbers a flip is judged on.
#
# Two protocols (:data:`PROTOCOLS`), computed from the same run folders:
#
# * ``strict``: the final epoch of the one run (one learning rate), each seed on its own;
# * ``paper``: per seed, the best over the learning rates of a grid and over the evaluated
#   epochs, each target maximized separately (NeurIPS 2024 Fig. 2 takes the best of 9 lrs
#   per seed, inferential and symmetric accuracy each on its own; the journal's Fig. 3A
#   notebook the maximum over logged epochs); then the mean over seeds.  ``logged_every=K``
#   reads only the epochs the released scripts log (:func:`logged_epochs`: with their
#   ``-pae 3``, a third of the epochs), not every evaluated one.
#
# :func:`pick_strict` and :func:`pick_paper` select from :class:`RunRecord` s (one run
# folder, read by :mod:`training.studies.records`); the population (:mod:`training.studies.population`) and
# the phase diagrams (:func:`training.studies.phase.figures.protocol_table`) select through them.

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
        check_int("--logged-every", logged_every, hint=" (the released scripts log every 3rd epoch: 3)")
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


# ------------------------------------------------------------------ race
# The race on ``symmetric``: does the held-out (4,3) find its answer before or after the seen (3,4) is fitted?
#
# The exception (3,4) is the seen pair whose target the held-out (4,3)'s symmetric answer
# copies.  A small-init run that reasons infers (4,3) from the rule; one that copies takes
# (3,4)'s answer.  :func:`race_of` reads a run's per-epoch history (the
# :class:`~interp_init.tasks.base.EpochRecord` s of :attr:`training.studies.records.RunRecord.history`:
# each evaluated epoch's metrics have ``per_pair["3,4"]`` and ``heldout["4,3"]`` with
# ``inferential`` and ``symmetric`` shares; each epoch its ``lr``) and returns a :class:`Race`:
#
# * ``fit_epoch``: the first evaluated epoch at which the training accuracy on (3,4) is at
#   least :data:`interp_init.tasks.base.FIT_THRESHOLD` (0.9; None: never);
# * the (4,3) inferential and symmetric shares at that epoch and at the last evaluated one;
# * ``copy_epoch``: the first evaluated epoch at which the (4,3) symmetric share is at least
#   the copy's threshold (``FLIP_CRITERIA["min_large_symmetric"]``, 0.8; None: never), so
#   that ``copy_epoch`` against ``fit_epoch`` places the run in the race's phase diagram
#   (``experiments/race.py --cells``);
# * ``settled_epoch``: the epoch at which the shares **stopped moving**: the first evaluated
#   epoch from which on both shares stay within ``tolerance`` (default 0.05) of their values
#   at the last evaluated epoch (so a share still moving at the end settles only at the last
#   epoch, and ``still_moving`` is true);
# * ``lr_high``: whether the lr at ``settled_epoch`` was still above a tenth of the run's
#   peak lr (the largest lr in the history, or the one given): True says the shares stopped
#   while the optimizer could still move them, False that the schedule's decay froze them;
# * ``mode``: the run's failure mode (:data:`MODES`), from the word the verdict gives the
#   last evaluated epoch (:func:`interp_init.tasks.anchor.symmetric_solution`, the rule the
#   flip's criteria and the report's verdict table use, so the three never disagree):
#   ``infers`` where it says ``inferential`` (final ID >= 0.9, final (3,4) accuracy >= 0.9,
#   inferential >= 0.8), ``early copy`` where it says ``symmetric`` (final ID >= 0.9,
#   symmetric >= 0.8; ``symmetric_at_fit`` says whether the copy was already there when (3,4)
#   was fitted), ``under-trained`` where it says ``did not fit`` or ``(3,4) not fitted``, or
#   where (3,4) was never fitted or the shares froze with the lr below a tenth of its peak or
#   were still moving at the end, else ``neither`` (fitted, settled while the lr was high,
#   on neither answer).
#
# Everything here is a pure function of the history; :func:`race_of_record` takes a run
# folder's :class:`~training.studies.records.RunRecord` (the one reader of ``metrics.json``).

#: A share within this of its final value has stopped moving (:func:`race_of`).
SETTLE_TOLERANCE = 0.05
#: The failure modes, in the order tables list them.
MODES: tuple[str, ...] = ("infers", "early copy", "neither", "under-trained")
#: The mode of each verdict word that decides it (:func:`~interp_init.tasks.anchor.symmetric_solution`).
_MODE_OF_WORD: dict[str, str] = {
    ANSWERS[0]: "infers",
    ANSWERS[1]: "early copy",
    "did not fit": "under-trained",
    "(3,4) not fitted": "under-trained",
}


@dataclass(frozen=True)
class Race:
    """One run's race (see the module docstring); shares are None where never evaluated."""

    fit_epoch: int | None
    inferential_at_fit: float | None
    symmetric_at_fit: float | None
    inferential_end: float | None
    symmetric_end: float | None
    settled_epoch: int | None
    lr_at_settled: float | None
    peak_lr: float | None
    still_moving: bool
    final_id_acc: float | None
    last_epoch: int | None
    #: The (3,4) training accuracy at the last evaluated epoch (None: unknown, as in a
    #: ``summary.json`` written before it was recorded).
    exception_end: float | None = None
    #: The first evaluated epoch with the symmetric share >= 0.8 (None: never, or unknown in
    #: a ``summary.json`` written before it was recorded).
    copy_epoch: int | None = None

    def __post_init__(self) -> None:
        for name in ("fit_epoch", "copy_epoch"):
            epoch = getattr(self, name)
            if epoch is not None and self.last_epoch is not None and not 1 <= epoch <= self.last_epoch:
                raise ValueError(f"{name} {epoch} must lie in 1..{self.last_epoch}")

    @property
    def fitted(self) -> bool:
        return self.fit_epoch is not None

    @property
    def lr_high(self) -> bool | None:
        """Whether the lr was above a tenth of its peak when the shares stopped moving."""
        if self.lr_at_settled is None or self.peak_lr is None:
            return None
        return self.lr_at_settled > self.peak_lr / 10

    @property
    def mode(self) -> str:
        """``infers``, ``early copy``, ``neither`` or ``under-trained`` (module docstring)."""
        word = symmetric_solution(self.final_id_acc, self.inferential_end, self.symmetric_end, self.exception_end)
        if word in _MODE_OF_WORD:
            return _MODE_OF_WORD[word]
        if not self.fitted or self.still_moving or self.lr_high is False:
            return "under-trained"
        return "neither"

    def to_dict(self) -> dict[str, Any]:
        """The race's numbers, with ``lr_high`` and ``mode`` (``summary.json``'s ``race``)."""
        return {**asdict(self), "lr_high": self.lr_high, "mode": self.mode}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Race:
        """Read :meth:`to_dict` back (``lr_high`` and ``mode`` are recomputed)."""
        return cls(**{f.name: data.get(f.name, False if f.name == "still_moving" else None) for f in fields(cls)})


def _shares(record: EpochRecord) -> tuple[float | None, float | None]:
    accs = (getattr(record.metrics, "heldout", None) or {}).get(HELDOUT.key) or {}
    inf, sym = (accs.get(name) for name in ANSWERS)
    return (None if inf is None else float(inf)), (None if sym is None else float(sym))


def _exception(record: EpochRecord) -> float:
    return float((getattr(record.metrics, "per_pair", None) or {}).get(EXCEPTION.key, 0.0))


def race_of(history: Sequence[EpochRecord], peak_lr: float | None = None, tolerance: float = SETTLE_TOLERANCE) -> Race:
    """The :class:`Race` of one ``symmetric`` run from its history (its record's
    :class:`~interp_init.tasks.base.EpochRecord` s; epochs without an evaluation are skipped);
    ``peak_lr``: the schedule's peak (default: the largest lr the history records)."""
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be a number in [0, 1), got {tolerance!r}")
    evaluated = [r for r in history if r.metrics is not None]
    lrs = [r.lr for r in history]
    peak = peak_lr if peak_lr is not None else (max(lrs) if lrs else None)
    if not evaluated:
        return Race(None, None, None, None, None, None, None, peak, False, None, None)
    fit = next((r for r in evaluated if _exception(r) >= FIT_THRESHOLD), None)
    inf_fit, sym_fit = _shares(fit) if fit is not None else (None, None)
    copy = next(
        (r for r in evaluated if (sym := _shares(r)[1]) is not None and sym >= FLIP_CRITERIA["min_large_symmetric"]),
        None,
    )
    last = evaluated[-1]
    inf_end, sym_end = _shares(last)

    def near_end(record: EpochRecord) -> bool:
        pairs = zip(_shares(record), (inf_end, sym_end), strict=True)
        return all(a is None or b is None or abs(a - b) <= tolerance for a, b in pairs)

    settled = len(evaluated) - 1
    while settled > 0 and near_end(evaluated[settled - 1]):
        settled -= 1
    at = evaluated[settled]
    still_moving = settled == len(evaluated) - 1 and len(evaluated) > 1
    id_acc = None if last.metrics is None else last.metrics.id_acc
    return Race(
        fit_epoch=None if fit is None else fit.epoch,
        inferential_at_fit=inf_fit,
        symmetric_at_fit=sym_fit,
        inferential_end=inf_end,
        symmetric_end=sym_end,
        settled_epoch=at.epoch,
        lr_at_settled=at.lr,
        peak_lr=peak,
        still_moving=still_moving,
        final_id_acc=None if id_acc is None else float(id_acc),
        last_epoch=last.epoch,
        exception_end=_exception(last),
        copy_epoch=None if copy is None else copy.epoch,
    )


def has_shares(record: RunRecord) -> bool:
    """Whether ``record`` is a run of a task with the race (:attr:`interp_init.tasks.base.Task.has_race`)
    whose history has at least one evaluated epoch with the held-out shares."""
    return record.task.has_race and any(getattr(r.metrics, "heldout", None) for r in record.history)


def race_of_record(record: RunRecord) -> Race | None:
    """The race of one run folder's record (:meth:`training.studies.records.RunRecord.read`; the
    peak lr its config's); None where it is not a race task's run or has no evaluated
    history yet."""
    return race_of(record.history, record.lr) if has_shares(record) else None


def epoch_shares(history: Sequence[EpochRecord]) -> tuple[list[int], list[float | None], list[float | None]]:
    """Per evaluated epoch: the epoch, and the (4,3) inferential and symmetric shares (the report's race figure)."""
    evaluated = [r for r in history if r.metrics is not None]
    shares = [_shares(r) for r in evaluated]
    return [r.epoch for r in evaluated], [s[0] for s in shares], [s[1] for s in shares]


# ------------------------------------------------------------------ verdict
# What a run learned, in words and numbers: the verdict the report opens with.
#
# :func:`run_verdict` reads a run's final metrics and asks its task
# (:meth:`interp_init.tasks.base.Task.verdict`) to name the solution the way the papers do
# (docs/science.md): for ``symmetric`` ``inferential``, ``symmetric``, ``neither`` or ``did
# not fit``; for ``id-ood`` the journal's phases; for ``complexity`` ``fit`` or ``did not
# fit``; for ``addition`` ``rule-based`` or ``case-based``.  The thresholds live with the
# tasks (:mod:`interp_init.tasks.anchor`, :mod:`interp_init.tasks.addition`).
#
# Example::
#
#     >>> v = run_verdict("id-ood", {"id_acc": 0.99, "ood_acc": 0.79, "commutativity": 0.68}, "completed")
#     >>> v.solution, v.evidence
#     ('Phase 3', 'ID accuracy 0.99, OOD accuracy 0.79, commutativity 0.68')


def _partial(task: Task, final: Mapping[str, Any]) -> TaskMetrics | None:
    """The final metrics as the task's dataclass; fields a partial record lacks are ``None``."""
    names = [f.name for f in fields(task.metrics_class)]
    if not any(name in final for name in names):
        return None
    return task.metrics_class(**{name: final.get(name) for name in names})


def run_verdict(
    task: str | Task, final: TaskMetrics | Mapping[str, Any] | None, status: str, stable_rank: float | None = None
) -> Verdict:
    """The :class:`~interp_init.tasks.base.Verdict` of a run from its final metrics (the task's
    dataclass, or ``metrics.json``'s ``final`` object) and status; ``stable_rank`` (the
    first layer's merged W_Q) is added to the evidence when given."""
    task = make_task(task) if isinstance(task, str) else task
    metrics = final if isinstance(final, TaskMetrics) or final is None else _partial(task, final)
    v = task.verdict(metrics, status)
    if stable_rank is not None:
        return Verdict(v.solution, f"{v.evidence}, stable rank of layer 0's W_Q {stable_rank:.1f}", v.expected)
    return v
