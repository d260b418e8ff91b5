"""Resumable sweeps over a grid of runs, on one machine or a Ray cluster, and their results table.

A sweep is a :class:`training.studies.study.StudySpec` with a grid (a ``base`` of run options and a ``grid`` of values);
:func:`run_sweep` trains every point of its cartesian product into its own run folder of
``DIR`` (resumable: a finished run is never trained twice) and writes ``DIR/results.csv``
(:func:`collect_results`, :func:`load_results`).  See ``docs/sweeps.md``.

Modules by concern:

* :mod:`training.studies.sweep.spec`: :class:`SweepOptions`, the shipped presets
  (``training/studies/sweep/presets/*.json``), the one-sweep-per-folder rule and the results
  table's column names (imports neither torch nor TransformerLens);
* :mod:`training.studies.sweep.runner`: :func:`run_sweep`, through the one launcher
  (:mod:`training.launch`: ``local``, ``ray``, ``ensemble`` or any registered backend);
* :mod:`training.studies.sweep.results`: the results table, and the weights' stable ranks
  (computed on first read, cached in ``ranks.json``).

The names below are imported on first use (PEP 562 ``__getattr__``): importing
:mod:`training.studies.sweep.spec` (the command line's ``--backend`` choices) imports no torch.
"""

from __future__ import annotations

from types import ModuleType

from interp_init.lazy import lazy_attributes

_SPEC = ("SPEC_FILE", "SweepOptions", "check_sweep_folder", "load_preset", "preset_names")
_RUNNER = ("SweepSummary", "run_sweep")
_RESULTS = ("RESULTS_FILE", "collect_results", "incomplete_runs", "load_results", "problem_summary", "write_results")
__all__ = sorted((*_SPEC, *_RUNNER, *_RESULTS))


def _module_of(name: str) -> ModuleType:
    if name in _SPEC:
        from training.studies.sweep import spec as module
    elif name in _RUNNER:
        from training.studies.sweep import runner as module
    elif name in _RESULTS:
        from training.studies.sweep import results as module
    else:
        raise AttributeError(f"module 'training.studies.sweep' has no attribute {name!r}")
    return module


__getattr__, __dir__ = lazy_attributes(globals(), _module_of, __all__)
