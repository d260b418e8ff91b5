"""The one reader of run folders: :class:`RunRecord`, a typed record per run folder: its
config, its status (read from the folder: a run another process trains is ``running``), its
``metrics.json`` typed for its task (:class:`~interp_init.tasks.base.RunMetrics`, read through
:meth:`interp_init.runfolder.RunFolder.read_metrics`, which validates it) and a failed run's
``error.txt``.  Every table, protocol, population, phase diagram, report section and the
preset search reads runs here.  It reads files only: analyses of a run's weights (the
results table's stable ranks, :func:`training.studies.sweep.ranks.run_stable_ranks`)
stand on it, after a study.

Example::

    >>> from training.studies.records import RunRecord
    >>> record = RunRecord.read("runs/first-minute/symmetric/small-init")  # doctest: +SKIP
    >>> record.status, record.final_columns()["id_acc"]  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_init.runfolder import FINISHED_STATUSES, BadRunFile, RunFolder, RunStatus
from interp_init.tasks.base import EpochRecord, RunMetrics, Task, read_run_metrics
from training.config import RunConfig


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


__all__ = ["RunRecord"]
