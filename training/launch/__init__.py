"""Launchers: where a study's runs train.  A :class:`Job` is one run (name, config, folder);
a :class:`Launcher` trains a list of them and returns one :class:`JobReturn` each;
:func:`train_job` trains one with the failure policy every launcher shares.

* :class:`SlurmLauncher` (``"slurm"``, :mod:`training.launch.slurm`): a Slurm cluster
  through submitit, one job per run in chunks that requeue themselves
  (:class:`SlurmOptions`; ``pip install 'interp-init[slurm]'``; docs/clusters.md).

The names are imported on first use: importing this package imports no torch.
"""

from __future__ import annotations

from types import ModuleType

from interp_init.lazy import lazy_attributes

_BASE = ("Job", "JobReturn", "Launcher", "launcher_class", "register_launcher", "train_job")
_SLURM = ("SlurmLauncher", "SlurmOptions")
__all__ = sorted((*_BASE, *_SLURM))


def _module_of(name: str) -> ModuleType:
    if name in _BASE:
        from training.launch import base as module
    elif name in _SLURM:
        from training.launch import slurm as module
    else:
        raise AttributeError(f"module 'training.launch' has no attribute {name!r}")
    return module


__getattr__, __dir__ = lazy_attributes(globals(), _module_of, __all__)
