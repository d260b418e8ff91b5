"""What every launcher shares: a :class:`Job` (one run to train), its :class:`JobReturn`,
:func:`train_job` (one run with the failure policy) and the :class:`Launcher` registry.

A minimal version on top of :func:`training.sweep.runner.run_point`; the launchers of
:mod:`training.launch` stand on these names only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from training.config import RunConfig


@dataclass(frozen=True)
class Job:
    """One run to train: its name inside the study folder (a relative path), config and folder."""

    name: str
    config: RunConfig
    run_dir: Path


@dataclass(frozen=True)
class JobReturn:
    """How a job ended: a :class:`~interp_init.runfolder.RunStatus` value (``completed``,
    ``diverged``, ``failed``, ``running``: busy elsewhere or stopped by a deadline) and the error, if any."""

    name: str
    status: str
    error: str | None = None


def train_job(job: Job, device: str = "auto", threads: int | None = None, deadline: float | None = None) -> JobReturn:
    """Train ``job`` into its folder (``error.txt`` on failure; a folder another process
    trains is ``running``); with ``deadline`` (a ``time.monotonic()`` value) stop after the
    epoch that passes it, checkpointed (``running``).  Never raises."""
    from training.sweep.runner import run_point

    status, error = run_point(job.config, job.run_dir, device, threads, deadline=deadline)
    return JobReturn(job.name, status, error or None)


class Launcher(ABC):
    """Trains a list of jobs somewhere and says how each ended."""

    name: ClassVar[str]

    @abstractmethod
    def launch(self, jobs: Sequence[Job]) -> list[JobReturn]:
        """Train (or skip, or resume) every job; one :class:`JobReturn` per job, in order."""


_LAUNCHERS: dict[str, type[Launcher]] = {}


def register_launcher(cls: type[Launcher]) -> type[Launcher]:
    """Register a launcher class under its ``name`` (a class decorator)."""
    _LAUNCHERS[cls.name] = cls
    return cls


def launcher_class(name: str) -> type[Launcher]:
    """The launcher registered as ``name`` (importing the built-in backends first)."""
    import training.launch.slurm  # noqa: F401 - registers "slurm"

    if name not in _LAUNCHERS:
        raise ValueError(f"unknown launcher {name!r}; choose one of {sorted(_LAUNCHERS)}")
    return _LAUNCHERS[name]
