"""One launcher for every study: a job per run folder, one executor, backends by name.

* :class:`Job` (a run to train: name, config, folder) and :class:`JobReturn` (its status);
* :func:`execute`: the one executor, which trains one job or a same-shape group under the
  one failure policy (:mod:`training.launch.executor`: ``error.txt`` for a failed run, its
  one writer :func:`record_failure`; ``running`` for a run another process trains;
  ``interrupted`` at a deadline; never raises for a run); the run folder it opens around
  the trainer is :mod:`training.launch.folders` (``training.train``);
* :class:`Launcher`, :func:`register_launcher`, :func:`launcher_class`,
  :func:`make_launcher`, :func:`launcher_names`: the backends, registered by name
  (``serial``, ``pool``, ``ensemble``, ``ray``: :mod:`training.launch.backends`; ``slurm``:
  :mod:`training.launch.slurm`, its options :class:`SlurmOptions`);
* :func:`run_study`: a study's jobs into its folder (the refusals of :func:`check_jobs`, the
  study folder held, ended runs skipped by :func:`launch`; a :class:`SubmissionError`, a
  scheduler that refused the jobs or did not answer, leaves the folder as it was).

Importing this package imports no torch and no submitit (the command line lists the
launchers' names; the slurm backend imports submitit when it launches).
"""

from __future__ import annotations

from training.launch.backends import EnsembleLauncher, PoolLauncher, RayLauncher, SerialLauncher, ensemble_key
from training.launch.base import (
    STUDY_BUSY,
    Job,
    JobReturn,
    Launcher,
    SubmissionError,
    check_jobs,
    launch,
    launcher_class,
    launcher_names,
    make_launcher,
    register_launcher,
    run_study,
)
from training.launch.executor import execute, record_failure
from training.launch.slurm import SlurmLauncher, SlurmOptions

__all__ = [
    "EnsembleLauncher",
    "PoolLauncher",
    "RayLauncher",
    "SerialLauncher",
    "ensemble_key",
    "STUDY_BUSY",
    "Job",
    "JobReturn",
    "Launcher",
    "check_jobs",
    "launch",
    "launcher_class",
    "launcher_names",
    "make_launcher",
    "register_launcher",
    "run_study",
    "SubmissionError",
    "execute",
    "record_failure",
    "SlurmLauncher",
    "SlurmOptions",
]
