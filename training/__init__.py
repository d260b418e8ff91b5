"""Training: configs and presets, the loop, ensembles, and the pipeline every study goes
through (spec -> launcher -> records -> analyses: docs/pipeline.md).

What a user calls (each name's own docstring says more):

* ``PRESETS``, ``RunConfig``, ``make_run_config``: a run's config, from a named preset and overrides;
* ``make_dataset``: a task's samples (:mod:`interp_init.tasks.data`), to probe a trained model on;
* ``train``, ``TrainResult``: train one run (into a run folder: resumable; the loop itself,
  :mod:`training.trainer`, knows no folders);
* ``train_ensemble``: same-shape runs trained together (GPUs);
* ``last_position_logits``: the fast training forward, equal to ``model(tokens)[:, -1]``;
* ``RunRecord``: the one reader of a run folder (config, typed metrics and history, status);
* ``StudySpec``, ``run_study``: a study (a base config and a grid or named points: a sweep,
  a reproduction over seeds, a search), trained by one launcher (:mod:`training.launch`;
  ``training.studies.population.reproduce`` is ``interp-init reproduce``); sweeps are
  :mod:`training.studies.sweep`, phase diagrams :mod:`training.studies.phase`, the report :mod:`training.studies.report`.

The names are imported on first use (PEP 562 ``__getattr__``), so that ``import
training.cli`` (the ``interp-init`` command and its ``--help``) imports neither torch nor
TransformerLens.
"""

from __future__ import annotations

from types import ModuleType

from interp_init.lazy import lazy_attributes

_WHERE = {
    "PRESETS": "config",
    "RunConfig": "config",
    "make_run_config": "config",
    "make_dataset": "data",
    "TrainResult": "loop",
    "train": "folders",
    "train_ensemble": "folders",
    "last_position_logits": "step",
    "RunRecord": "records",
    "StudySpec": "study",
    "run_study": "launch",
}
__all__ = sorted(_WHERE)


def _module_of(name: str) -> ModuleType:
    where = _WHERE.get(name)
    if where == "config":
        from training import config as module
    elif where == "data":
        from interp_init.tasks import data as module
    elif where == "loop":
        from training.trainer import loop as module
    elif where == "folders":
        from training.launch import folders as module
    elif where == "step":
        from training.trainer import step as module
    elif where == "records":
        from training.studies import records as module
    elif where == "launch":
        from training import launch as module
    elif where == "study":
        from training.studies import study as module
    else:
        raise AttributeError(f"module 'training' has no attribute {name!r}")
    return module


__getattr__, __dir__ = lazy_attributes(globals(), _module_of, __all__)
