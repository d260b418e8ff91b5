"""One launcher: a run to train (:class:`Job`), what came of it (:class:`JobReturn`), the one
failure policy (:func:`train_job`), the backends registered by name (:class:`Launcher`) and
the study folder's refusals and lock (:func:`check_jobs`, :func:`run_study`, :func:`launch`).

The policy, the same for every backend: a run another process trains is ``running``, never
``failed``; a run that raises is ``failed`` with its traceback in ``error.txt`` and the
study goes on (the next launch retries it); a non-finite loss is ``diverged``; signals
propagate (locks and temporary files are removed).  :func:`make_launcher` builds a backend
by name from the options its constructor takes (``--backend NAME`` and its own options).
Imports no torch.
"""

from __future__ import annotations

import inspect
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from interp_init.fileio import is_disk_full
from interp_init.outputs import output_folder
from interp_init.runfolder import FINISHED_STATUSES, RunFolder, RunFolderBusy, RunStatus, atomic_write
from training.config import RunConfig

#: What a second process launching into a held study folder is told (``{owner}``: the holder).
STUDY_BUSY = "is being trained into by another process ({owner}); wait for it to finish, or choose another --out"


@dataclass(frozen=True)
class Job:
    """One run to train: its name inside the study folder (a relative path), its config and folder."""

    name: str
    config: RunConfig
    run_dir: Path


@dataclass(frozen=True)
class JobReturn:
    """What came of one job: a :class:`~interp_init.runfolder.RunStatus` value and, for
    ``failed`` or ``running`` (busy in another process), one line saying why."""

    name: str
    status: str
    error: str | None = None


def check_count(name: str, value: int | None) -> None:
    """Refuse a count option (workers, threads, ensemble size) that is not an integer >= 1 or None."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be an integer >= 1 (or None for automatic), got {value!r}")


def failed(job: Job, err: BaseException, tb: str | None = None) -> JobReturn:
    """Record ``err`` as ``job``'s failure (``error.txt``, and ``config.json`` so that the run
    has a row in the tables) and return its :class:`JobReturn`."""
    line = f"{type(err).__name__}: {err}"
    folder = RunFolder(job.run_dir)
    folder.path.mkdir(parents=True, exist_ok=True)
    if not folder.config_path.exists():
        folder.write_config(job.config.to_dict())
    atomic_write(folder.error_path, f"{line}\n\n{tb}" if tb else f"{line}\n")
    return JobReturn(job.name, RunStatus.FAILED, line)


def finished(job: Job, status: str, model: Any) -> JobReturn:
    """A job that trained to its end: its ``error.txt`` from an earlier try removed, its
    stable ranks cached from the model just trained (the results table reads them)."""
    from training.studies.records import record_stable_ranks

    RunFolder(job.run_dir).error_path.unlink(missing_ok=True)
    if status in FINISHED_STATUSES:
        record_stable_ranks(job.run_dir, model)
    return JobReturn(job.name, str(status))


def train_job(job: Job, device: str = "auto", threads: int | None = None, deadline: float | None = None, progress: bool = False) -> JobReturn:
    """Train ``job`` into its folder under the one failure policy (see the module); never
    raises for a failed run.  ``threads``: torch threads while it trains (restored after)."""
    import torch

    from training.trainer.loop import train

    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        result = train(job.config, job.run_dir, device=device, progress=progress, deadline=deadline)
        if not result.finished:  # stopped at the deadline: resumed by the next call
            return JobReturn(job.name, RunStatus.RUNNING, "stopped at its deadline; a later launch resumes it")
        return finished(job, str(result.metrics["status"]), result.model)
    except RunFolderBusy as err:  # another process trains it now: not a failure, and not ours to record
        return JobReturn(job.name, RunStatus.RUNNING, str(err))
    except OSError as err:
        if is_disk_full(err):  # every run would fail alike: the study stops, as train does (exit 2), and resumes once space is freed
            raise
        return failed(job, err, traceback.format_exc())
    except Exception as err:  # noqa: BLE001 - a failed run is recorded, the study goes on
        return failed(job, err, traceback.format_exc())
    finally:
        torch.set_num_threads(previous)


class Launcher(ABC):
    """A backend: ``launch(jobs)`` returns one :class:`JobReturn` per job, in order, each
    through :func:`train_job`'s policy; ``on_return`` (e.g. a progress bar) sees each as it comes."""

    name: ClassVar[str]
    on_return: Callable[[JobReturn], None] | None = None

    @property
    def waits(self) -> bool:
        """Whether :meth:`launch` returns only once the jobs it started have ended (False: it
        submits them and returns, their returns ``running``: Slurm with ``--slurm-no-wait``)."""
        return True

    @abstractmethod
    def launch(self, jobs: Sequence[Job]) -> list[JobReturn]: ...

    def notify(self, on_return: Callable[[JobReturn], None] | None) -> Launcher:
        """Set :attr:`on_return` (also on a frozen dataclass backend) and return the launcher."""
        object.__setattr__(self, "on_return", on_return)
        return self

    def returned(self, ret: JobReturn) -> JobReturn:
        """Hand ``ret`` to :attr:`on_return` (if set) and return it."""
        if self.on_return is not None:
            self.on_return(ret)
        return ret

    def gathered(self, futures: Mapping[Future, Job], jobs: Sequence[Job]) -> list[JobReturn]:
        """The returns of ``jobs`` from their ``futures`` (of :func:`train_job`), each handed to
        :meth:`returned` as it completes; a future that raises (its worker died: killed by the
        OS, a node lost) fails its job."""
        returns: dict[str, JobReturn] = {}
        for future in as_completed(futures):
            job = futures[future]
            try:
                ret = future.result()
            except Exception as err:  # the worker itself died
                if is_disk_full(err):  # a worker's full disk stops the study (train_job)
                    raise
                ret = failed(job, err)
            returns[job.name] = self.returned(ret)
        return [returns[job.name] for job in jobs]


_LAUNCHERS: dict[str, type[Launcher]] = {}


def register_launcher(cls: type[Launcher]) -> type[Launcher]:
    """Register a :class:`Launcher` subclass under ``cls.name`` (a class decorator)."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"launcher {cls.__qualname__} has no name (a class attribute, e.g. name = 'serial')")
    if not (isinstance(cls, type) and issubclass(cls, Launcher)):
        raise ValueError(f"launcher {name!r} ({cls!r}) is not a subclass of training.launch.Launcher")
    _LAUNCHERS[name] = cls
    return cls


def launcher_names() -> tuple[str, ...]:
    """The registered launchers' names."""
    return tuple(_LAUNCHERS)


def launcher_class(name: str) -> type[Launcher]:
    """The launcher registered as ``name`` (a one-line ``ValueError`` naming the choices)."""
    if name not in _LAUNCHERS:
        raise ValueError(f"unknown launcher {name!r}; choose one of {list(_LAUNCHERS)}")
    return _LAUNCHERS[name]


def make_launcher(name: str, **options: Any) -> Launcher:
    """A launcher by name, built from the ``options`` its constructor takes (others, and
    options left at ``None``, are left out: each backend takes its own)."""
    cls = launcher_class(name)
    accepted = inspect.signature(cls).parameters
    return cls(**{k: v for k, v in options.items() if k in accepted and v is not None})


# ------------------------------------------------------------------ the study folder


def check_jobs(jobs: Sequence[Job]) -> None:
    """Refuse, before anything trains, a job whose folder holds another run (by any of its
    files: :meth:`~interp_init.runfolder.RunFolder.check_holds`), and two jobs in one folder."""
    seen: dict[Path, str] = {}
    for job in jobs:
        key = Path(job.run_dir).absolute()
        if key in seen:
            raise ValueError(f"jobs {seen[key]!r} and {job.name!r} would train into one folder {job.run_dir}")
        seen[key] = job.name
        folder = RunFolder(job.run_dir)
        if folder.config_path.exists():
            diffs = folder.config_differences(job.config.to_dict())
            if diffs:
                raise ValueError(f"{job.run_dir} holds a run with another config than this study's {job.name} ({'; '.join(diffs[:3])}); "
                                 "use another --out, or remove that folder")  # fmt: skip
        elif folder.path.is_dir():
            folder.check_holds(job.config.to_dict())  # the finished files of another run, config.json missing


def launch(jobs: Sequence[Job], launcher: Launcher) -> list[JobReturn]:
    """Train ``jobs`` with ``launcher``, the ended ones (``completed`` or ``diverged``: read,
    never trained again) skipped; one return per job, in order.  (The caller holds the study
    folder: :func:`run_study`.)"""
    returns = {j.name: JobReturn(j.name, str(status)) for j in jobs if (status := RunFolder(j.run_dir).status()) in FINISHED_STATUSES}
    todo = [j for j in jobs if j.name not in returns]
    if todo:
        returns.update((r.name, r) for r in launcher.launch(todo))
    return [returns[j.name] for j in jobs]


def run_study(
    jobs: Sequence[Job], out: str | Path, launcher: Launcher, busy: str = STUDY_BUSY, held: Callable[[], Any] | None = None, kind: str = "reproduction"
) -> list[JobReturn]:
    """Train ``jobs`` into the study folder ``out`` with ``launcher``: refuse a folder that
    holds another run before anything trains, create and hold ``out`` (a ``kind`` folder:
    ``sweep`` or ``reproduction``; a second process is refused with ``busy``, a folder that
    would nest folders of runs in one another is refused first, and refused input leaves no
    folder this call made: :func:`interp_init.outputs.output_folder`), call ``held``
    (checks and records that need the folder held), skip the runs that ended, launch the
    rest; one :class:`~training.launch.JobReturn` per job, in order."""
    check_jobs(jobs)
    with output_folder(out, f"a {kind}", kind, busy):
        if held is not None:
            held()
        check_jobs(jobs)  # again: another process may have changed the folder before this one held it
        return launch(jobs, launcher)
