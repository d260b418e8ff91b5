"""Training: configs and presets, the loop, ensembles, sweeps, the reproduction, the report and the command line.

The task names and ``make_dataset`` are re-exported from :mod:`interp_init.tasks` and
:mod:`interp_init.data`.

The public names below are imported on first use (PEP 562 ``__getattr__``), so that
``import training.cli`` (the ``interp-init`` command and its ``--help``) imports neither
torch nor TransformerLens; ``from training import train`` works as usual.
"""

from __future__ import annotations

from types import ModuleType

from interp_init.lazy import lazy_attributes

_CONFIG = ("OPTIONS", "PRESETS", "DataConfig", "RunConfig", "TrainConfig", "derive_seed", "make_run_config", "preset_options")
_TASKS = ("ANCHORS", "SHIFTS", "SPLITS", "SYMMETRIC_GROUPS", "TASKS", "AnchorPair", "composite", "task_spec")
_DATA = ("AnchorDataset", "make_dataset")
_EVALUATE = ("evaluate", "predict")
_LOOP = ("TrainResult", "make_run_data", "read_metrics", "train")

__all__ = sorted((*_CONFIG, *_TASKS, *_DATA, *_EVALUATE, *_LOOP, "last_position_logits", "train_ensemble"))


def _module_of(name: str) -> ModuleType:
    if name in _CONFIG:
        from training import config as module
    elif name in _TASKS:
        from interp_init import tasks as module
    elif name in _DATA:
        from interp_init import data as module
    elif name in _EVALUATE:
        from training import accuracy as module
    elif name in _LOOP:
        from training import loop as module
    elif name == "last_position_logits":
        from training import fast as module
    elif name == "train_ensemble":
        from training import ensemble as module
    else:
        raise AttributeError(f"module 'training' has no attribute {name!r}")
    return module


__getattr__, __dir__ = lazy_attributes(globals(), _module_of, __all__)
