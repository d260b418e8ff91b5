"""The one reader of run folders: :class:`RunRecord`, a typed record per run folder: its
config, its status (read from the folder: a run another process trains is ``running``), its
``metrics.json`` typed for its task (:class:`~interp_init.tasks.base.RunMetrics`, read through
:meth:`interp_init.runfolder.RunFolder.read_metrics`, which validates it) and a failed run's
``error.txt``.  Every table, protocol, population, phase diagram, report section and the
preset search reads runs here; so are the cached stable ranks (:func:`run_stable_ranks`).

Example::

    >>> from training.studies.records import RunRecord
    >>> record = RunRecord.read("runs/first-minute/symmetric/small-init")  # doctest: +SKIP
    >>> record.status, record.final_columns()["id_acc"]  # doctest: +SKIP
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp_init.runfolder import FINISHED_STATUSES, RunFolder, RunStatus, write_json
from interp_init.tasks.base import EpochRecord, RunMetrics, Task, read_run_metrics
from training.config import RunConfig

if TYPE_CHECKING:
    from transformer_lens import HookedTransformer

#: A run folder's cached stable ranks (:func:`run_stable_ranks`).
RANKS_FILE = "ranks.json"


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
        try:
            raw = folder.read_metrics()
        except ValueError:
            if strict:
                raise
            raw = None
        metrics = None if raw is None else read_run_metrics(config.data.make_task(), raw, str(folder.metrics_path))
        error = ""
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


def resume_epoch(run_dir: str | Path) -> int:
    """The epoch an interrupted run resumes from (0 without a checkpoint or a readable history)."""
    folder = RunFolder(run_dir)
    if not folder.checkpoint_path.exists():
        return 0
    try:
        return RunRecord.read(run_dir).epochs_run
    except ValueError:
        return 0


def _weights_stamp(folder: RunFolder) -> dict[str, int]:
    stat = folder.weights_path.stat()
    return {"weights_size": stat.st_size, "weights_mtime_ns": stat.st_mtime_ns}


def ranks_record(run_dir: str | Path, ranks: dict[str, float]) -> dict[str, Any]:
    """What ``ranks.json`` holds: ``ranks`` keyed by the run folder's weights as they are now."""
    return {"stamp": _weights_stamp(RunFolder(run_dir)), "ranks": ranks}


def stable_ranks_of(model: HookedTransformer) -> dict[str, float]:
    """The stable ranks a run folder caches: the first layer's W_Q (heads merged) and W_E."""
    from probes import merged_weight, stable_rank

    return {"stable_rank_wq0": stable_rank(merged_weight(model, "W_Q", 0)), "stable_rank_we": stable_rank(merged_weight(model, "W_E"))}


def record_stable_ranks(run_dir: str | Path, model: HookedTransformer) -> dict[str, float]:
    """Compute the stable ranks of a just-trained ``model`` (the run's own, not reloaded)
    and cache them in the run folder's ``ranks.json``."""
    ranks = stable_ranks_of(model)
    write_json(Path(run_dir) / RANKS_FILE, ranks_record(run_dir, ranks))
    return ranks


def cached_stable_ranks(run_dir: str | Path) -> dict[str, float] | None:
    """The ranks ``ranks.json`` holds for the run folder's weights as they are now (None:
    no cache, a damaged one, or one of other weights).  A stored record
    (:mod:`interp_init.stored`) keeps the ranks of the weights it was stored without."""
    folder = RunFolder(run_dir)
    cache = folder.path / RANKS_FILE
    try:
        data: Any = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("ranks"), dict):
        return None
    if folder.weights_path.exists():
        return data["ranks"] if data.get("stamp") == _weights_stamp(folder) else None
    return data["ranks"] if folder.status() in FINISHED_STATUSES else None  # without weights: finished only if stored


def run_stable_ranks(run_dir: str | Path) -> dict[str, float]:
    """Stable ranks of the first layer's W_Q (heads merged) and of W_E, cached in ``ranks.json``.

    The cache is keyed by the weights file's size and modification time, so the model is
    loaded only when the weights changed since (a launch caches them from the trained
    model, :func:`record_stable_ranks`).  A stored record (kept without its weights,
    :mod:`interp_init.stored`) gives the ranks it was stored with; any other folder without
    weights gives none (empty).
    """
    folder = RunFolder(run_dir)
    cached = cached_stable_ranks(folder.path)
    if cached is not None or not folder.weights_path.exists():
        return cached or {}
    return record_stable_ranks(folder.path, folder.load_model(device="cpu"))


__all__ = ["RANKS_FILE", "RunRecord", "cached_stable_ranks", "ranks_record", "record_stable_ranks", "resume_epoch", "run_stable_ranks", "stable_ranks_of"]
