"""The race on ``symmetric``: does the held-out (4,3) find its answer before or after the seen (3,4) is fitted?

The exception (3,4) is the seen pair whose target the held-out (4,3)'s symmetric answer
copies.  A small-init run that reasons infers (4,3) from the rule; one that copies takes
(3,4)'s answer.  :func:`race_of` reads a run's per-epoch history (the
:class:`~interp_init.tasks.base.EpochRecord` s of :attr:`training.studies.records.RunRecord.history`:
each evaluated epoch's metrics have ``per_pair["3,4"]`` and ``heldout["4,3"]`` with
``inferential`` and ``symmetric`` shares; each epoch its ``lr``) and returns a :class:`Race`:

* ``fit_epoch``: the first evaluated epoch at which the training accuracy on (3,4) is at
  least :data:`interp_init.tasks.base.FIT_THRESHOLD` (0.9; None: never);
* the (4,3) inferential and symmetric shares at that epoch and at the last evaluated one;
* ``copy_epoch``: the first evaluated epoch at which the (4,3) symmetric share is at least
  the copy's threshold (``FLIP_CRITERIA["min_large_symmetric"]``, 0.8; None: never), so
  that ``copy_epoch`` against ``fit_epoch`` places the run in the race's phase diagram
  (``experiments/race.py --cells``);
* ``settled_epoch``: the epoch at which the shares **stopped moving**: the first evaluated
  epoch from which on both shares stay within ``tolerance`` (default 0.05) of their values
  at the last evaluated epoch (so a share still moving at the end settles only at the last
  epoch, and ``still_moving`` is true);
* ``lr_high``: whether the lr at ``settled_epoch`` was still above a tenth of the run's
  peak lr (the largest lr in the history, or the one given): True says the shares stopped
  while the optimizer could still move them, False that the schedule's decay froze them;
* ``mode``: the run's failure mode (:data:`MODES`), from the word the verdict gives the
  last evaluated epoch (:func:`interp_init.tasks.anchor.symmetric_solution`, the rule the
  flip's criteria and the report's verdict table use, so the three never disagree):
  ``infers`` where it says ``inferential`` (final ID >= 0.9, final (3,4) accuracy >= 0.9,
  inferential >= 0.8), ``early copy`` where it says ``symmetric`` (final ID >= 0.9,
  symmetric >= 0.8; ``symmetric_at_fit`` says whether the copy was already there when (3,4)
  was fitted), ``under-trained`` where it says ``did not fit`` or ``(3,4) not fitted``, or
  where (3,4) was never fitted or the shares froze with the lr below a tenth of its peak or
  were still moving at the end, else ``neither`` (fitted, settled while the lr was high,
  on neither answer).

Everything here is a pure function of the history; :func:`race_of_record` takes a run
folder's :class:`~training.studies.records.RunRecord` (the one reader of ``metrics.json``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from interp_init.tasks.anchor import ANSWERS, EXCEPTION, FLIP_CRITERIA, HELDOUT, symmetric_solution
from interp_init.tasks.base import FIT_THRESHOLD, EpochRecord

if TYPE_CHECKING:
    from training.studies.records import RunRecord

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
