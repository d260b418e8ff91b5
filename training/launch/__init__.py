"""One launcher for every study: a job per run folder, one failure policy, backends by name.

* :class:`Job` (a run to train: name, config, folder) and :class:`JobReturn` (its status);
* :func:`train_job`: train one job under the one failure policy (``error.txt`` for a
  failed run, ``running`` for a run another process trains; never raises for a run);
* :class:`Launcher`, :func:`register_launcher`, :func:`launcher_class`,
  :func:`make_launcher`, :func:`launcher_names`: the backends, registered by name
  (``serial``, ``pool``, ``ensemble``, ``ray``: :mod:`training.launch.backends`; ``slurm``:
  :mod:`training.launch.slurm`, its options :class:`SlurmOptions`);
* :func:`run_study`: a study's jobs into its folder (the refusals of :func:`check_jobs`, the
  study folder held, ended runs skipped by :func:`launch`).

Importing this package imports no torch and no submitit (the command line lists the
launchers' names; the slurm backend imports submitit when it launches).
"""

from __future__ import annotations

from training.launch.backends import EnsembleLauncher, PoolLauncher, RayLauncher, SerialLauncher, ensemble_key
from training.launch.base import STUDY_BUSY, Job, JobReturn, Launcher, check_jobs, launch, launcher_class, launcher_names
from training.launch.base import make_launcher, register_launcher, run_study, train_job
from training.launch.slurm import SlurmLauncher
from training.launch.slurm_options import SlurmOptions

__all__ = [
    "EnsembleLauncher", "PoolLauncher", "RayLauncher", "SerialLauncher", "ensemble_key", "STUDY_BUSY", "Job", "JobReturn", "Launcher", "check_jobs", "launch", "launcher_class", "launcher_names",
    "make_launcher", "register_launcher", "run_study", "train_job", "SlurmLauncher", "SlurmOptions",
]  # fmt: skip
