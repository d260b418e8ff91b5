"""Resumable sweeps over a grid of runs, on one machine or a Ray cluster, and their results table.

A sweep is a :class:`SweepSpec` (a ``base`` of run options and a ``grid`` of values);
:func:`run_sweep` trains every point of its cartesian product into its own run folder of
``DIR`` (resumable: a finished run is never trained twice) and writes ``DIR/results.csv``
(:func:`collect_results`, :func:`load_results`).  See ``docs/sweeps.md``.

Modules by concern:

* :mod:`training.sweep.spec`: the spec, :class:`SweepOptions`, the shipped presets
  (``training/sweep/presets/*.json``) and the one-sweep-per-folder rule (imports neither
  torch nor TransformerLens);
* :mod:`training.sweep.pool`: worker processes that never outlive the sweep;
* :mod:`training.sweep.runner`: :func:`run_sweep`, :func:`run_point` and the backends
  (``local``, ``ray``, ``ensemble``);
* :mod:`training.sweep.results`: the results table.

The names below are imported on first use (PEP 562 ``__getattr__``): importing
:mod:`training.sweep.spec` (the command line's ``--backend`` choices) imports no torch.
"""

from __future__ import annotations

from types import ModuleType

from interp_init.lazy import lazy_attributes

_SPEC = (
    "BACKENDS", "BASE_EXTRA_KEYS", "PRESETS_FOLDER", "SPEC_FILE", "SweepOptions", "SweepPoint", "SweepSpec",
    "check_sweep_folder", "format_value", "load_preset", "preset_names",
)  # fmt: skip

_POOL = ("PARENT_POLL_S", "Terminated", "watch_parent", "worker_pool")
_RUNNER = ("SweepSummary", "ensemble_key", "run_point", "run_sweep")
_RESULTS = (
    "CONTEXT_COLUMNS", "ERROR_FILE", "LOSS_THRESHOLD", "METRIC_COLUMNS", "PAIR_ACC_THRESHOLD", "PAIR_COLUMNS",
    "PROBLEM_STATUSES", "RANKS_FILE", "RESULTS_FILE", "TIMING_COLUMNS", "collect_results", "epochs_to_loss",
    "epochs_to_pair_accuracy", "incomplete_runs", "load_results", "pair_column", "problem_summary", "run_row",
    "run_stable_ranks", "run_status", "write_results",
)  # fmt: skip
__all__ = sorted((*_SPEC, *_POOL, *_RUNNER, *_RESULTS))


def _module_of(name: str) -> ModuleType:
    if name in _SPEC:
        from training.sweep import spec as module
    elif name in _POOL:
        from training.sweep import pool as module
    elif name in _RUNNER:
        from training.sweep import runner as module
    elif name in _RESULTS:
        from training.sweep import results as module
    else:
        raise AttributeError(f"module 'training.sweep' has no attribute {name!r}")
    return module


__getattr__, __dir__ = lazy_attributes(globals(), _module_of, __all__)
