"""One launcher: a run to train (:class:`Job`), what came of it (:class:`JobReturn`), the
backends registered by name (:class:`Launcher`), which decide where and when the one
executor (:func:`training.launch.executor.execute`, the one failure policy) trains each job,
and the study folder's refusals and lock (:func:`check_jobs`, :func:`run_study`,
:func:`launch`).  :func:`make_launcher` builds a backend by name from the options its
constructor takes (``--backend NAME`` and its own options).  Imports no torch.
"""

from __future__ import annotations

import contextlib
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from interp_init.config import check_int
from interp_init.outputs import output_folder
from interp_init.runfolder import FINISHED_STATUSES, RunFolder, atomic_write
from training.config import RunConfig

#: What a second process launching into a held study folder is told (``{owner}``: the holder).
STUDY_BUSY = "is being trained into by another process ({owner}); wait for it to finish, or choose another --out"


@dataclass(frozen=True)
class Job:
    """One run to train: its name inside the study folder (a relative path), its config and folder."""

    name: str
    config: RunConfig  # or another kind of run's config (:func:`run_kind`)
    run_dir: Path


@dataclass(frozen=True)
class JobReturn:
    """What came of one job: a :class:`~interp_init.runfolder.RunStatus` value and, for
    ``failed`` or ``running`` (busy in another process), one line saying why."""

    name: str
    status: str
    error: str | None = None


class SubmissionError(ValueError):
    """A backend could not start its jobs: its scheduler refused them or did not answer
    (``sbatch``'s error, a Ray address that does not answer).  One line quoting the
    scheduler's own words and saying what to check; raised before anything trains, by a
    launcher that has removed the files it made for the submission.  :func:`run_study` then
    puts the study folder back as it was (a sweep's new ``sweep.json`` removed), and the
    command line exits 2."""


def check_count(name: str, value: int | None) -> None:
    """Refuse a count option (workers, threads, ensemble size) that is not an integer >= 1 or None."""
    check_int(name, value, hint=" (or None for automatic)", optional=True)


class Launcher(ABC):
    """A backend: ``launch(jobs)`` returns one :class:`JobReturn` per job, in order, each job
    trained by :func:`~training.launch.executor.execute` (the one failure policy) where and
    when the backend decides; ``on_return`` (e.g. a progress bar) sees each as it comes."""

    name: ClassVar[str]
    #: The kinds of run (:func:`run_kind`) the backend trains; None: every kind (each job
    #: handed to the executor, which trains it by its kind's trainer).
    kinds: ClassVar[tuple[str, ...] | None] = None
    on_return: Callable[[JobReturn], None] | None = None

    @property
    def waits(self) -> bool:
        """Whether :meth:`launch` returns only once the jobs it started have ended (False: it
        submits them and returns, their returns ``running``: Slurm with ``--slurm-no-wait``)."""
        return True

    @abstractmethod
    def launch(self, jobs: Sequence[Job]) -> list[JobReturn]: ...

    def refuse_kinds(self, jobs: Sequence[Job]) -> None:
        """Refuse, in one line naming the fix, a job of a kind of run this backend does not
        train (:attr:`kinds`); :func:`run_study` asks before anything is written."""
        if self.kinds is None:
            return
        for job in jobs:
            kind = run_kind(job.config)
            if kind not in self.kinds:
                raise ValueError(
                    f"the {self.name} backend trains {' and '.join(repr(k) for k in self.kinds)} runs only, and {job.name} "
                    f"is a {kind!r} run; use the local backend (--backend local), or another that trains any kind of run"
                )

    def notify(self, on_return: Callable[[JobReturn], None] | None) -> Launcher:
        """Set :attr:`on_return` (also on a frozen dataclass backend) and return the launcher."""
        object.__setattr__(self, "on_return", on_return)
        return self

    def returned(self, ret: JobReturn) -> JobReturn:
        """Hand ``ret`` to :attr:`on_return` (if set) and return it."""
        if self.on_return is not None:
            self.on_return(ret)
        return ret


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


# ------------------------------------------------------------------ kinds of run
# What a job's config is decides which trainer the executor hands it to: a ``RunConfig``
# (no ``kind`` attribute) is a ``transformer`` run (:func:`training.launch.folders.train`);
# another config names its kind by a ``kind`` class attribute, and its module registers the
# kind's trainer when it is imported (so a config that exists has its trainer registered, in
# a worker process too): ``train(config, run_dir, *, device, progress, deadline)``, which
# opens, trains (or resumes) and finishes the run folder and returns a result with
# ``finished`` and ``metrics``, as ``training.train`` does.

_RUN_KINDS: dict[str, Callable[..., Any]] = {}


def register_run_kind(kind: str, trainer: Callable[..., Any]) -> None:
    """Register a kind of run: configs whose ``kind`` attribute is ``kind`` are trained by
    ``trainer(config, run_dir, *, device, progress, deadline)``."""
    if not isinstance(kind, str) or not kind or kind == "transformer":
        raise ValueError(f"a run kind is a non-empty name other than 'transformer', got {kind!r}")
    if not callable(trainer):
        raise ValueError(f"a run kind's trainer is a function train(config, run_dir, ...), got {trainer!r}")
    _RUN_KINDS[kind] = trainer


def run_kind(config: Any) -> str:
    """The kind of run ``config`` describes (``transformer`` for a ``RunConfig``)."""
    return getattr(config, "kind", "transformer")


def run_kind_names() -> tuple[str, ...]:
    """The kinds of run registered so far (``transformer`` first)."""
    return ("transformer", *_RUN_KINDS)


def kind_trainer(config: Any) -> Callable[..., Any]:
    """The registered trainer of ``config``'s kind of run, other than ``transformer`` (the
    executor's own, :func:`training.launch.folders.train`); a one-line ``ValueError`` for a
    kind not registered."""
    kind = run_kind(config)
    if kind not in _RUN_KINDS:
        raise ValueError(f"unknown kind of run {kind!r}; registered: {list(run_kind_names())}")
    return _RUN_KINDS[kind]


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
                raise ValueError(
                    f"{job.run_dir} holds a run with another config than this study's {job.name} ({'; '.join(diffs[:3])}); "
                    "use another --out, or remove that folder"
                )
        elif folder.path.is_dir():
            folder.check_holds(job.config.to_dict())  # the finished files of another run, config.json missing


def launch(jobs: Sequence[Job], launcher: Launcher) -> list[JobReturn]:
    """Train ``jobs`` with ``launcher``, the ended ones (``completed`` or ``diverged``: read,
    never trained again) skipped; one return per job, in order.  (The caller holds the study
    folder: :func:`run_study`.)"""
    returns = {
        j.name: JobReturn(j.name, str(status))
        for j in jobs
        if (status := RunFolder(j.run_dir).status()) in FINISHED_STATUSES
    }
    todo = [j for j in jobs if j.name not in returns]
    if todo:
        returns.update((r.name, r) for r in launcher.launch(todo))
    return [returns[j.name] for j in jobs]


def run_study(
    jobs: Sequence[Job],
    out: str | Path,
    launcher: Launcher,
    busy: str = STUDY_BUSY,
    held: Callable[[], Any] | None = None,
    kind: str = "reproduction",
) -> list[JobReturn]:
    """Train ``jobs`` into the study folder ``out`` with ``launcher``: refuse a folder that
    holds another run before anything trains, create and hold ``out`` (a ``kind`` folder:
    ``sweep`` or ``reproduction``; a second process is refused with ``busy``, a folder that
    would nest folders of runs in one another is refused first, and refused input leaves no
    folder this call made: :func:`interp_init.outputs.output_folder`), call ``held``
    (checks and records that need the folder held), skip the runs that ended, launch the
    rest; one :class:`~training.launch.JobReturn` per job, in order.  A job of a kind of
    run the launcher does not train is refused first (:meth:`Launcher.refuse_kinds`)."""
    launcher.refuse_kinds(jobs)
    check_jobs(jobs)
    with output_folder(out, f"a {kind}", kind, busy) as folder:
        before = _study_files(folder)
        try:
            if held is not None:
                held()
            check_jobs(jobs)  # again: another process may have changed the folder before this one held it
            return launch(jobs, launcher)
        except SubmissionError:
            _restore_study_files(folder, before)
            raise


#: The largest study file (``sweep.json``, ``results.csv``) a failed submission restores.
_RESTORED_BYTES = 2**20


def _study_files(folder: Path) -> dict[str, bytes | None]:
    """The study folder's own files (its top level; not its run folders) and their bytes
    (None above :data:`_RESTORED_BYTES`)."""
    return {
        p.name: p.read_bytes() if p.stat().st_size <= _RESTORED_BYTES else None
        for p in folder.iterdir()
        if p.is_file() and not p.is_symlink()
    }


def _restore_study_files(folder: Path, before: dict[str, bytes | None]) -> None:
    """Put the study folder's top level back as :func:`_study_files` saw it before a launch
    whose submission failed: the files it made removed (and its empty folders), the ones it
    changed restored.  The lock file is the caller's."""
    from interp_init.fileio import LOCK_FILE

    for path in folder.iterdir():
        if path.name == LOCK_FILE:
            continue
        if path.name not in before:
            if path.is_dir() and not path.is_symlink():
                with contextlib.suppress(OSError):  # a folder with content is not the launch's
                    path.rmdir()
            else:
                path.unlink()
        elif before[path.name] is not None and path.read_bytes() != before[path.name]:
            atomic_write(path, before[path.name])
