"""Phase diagrams from a sweep's results table: the papers' aggregation, phases and figures.

* :mod:`training.studies.phase.names`: the thresholds and figure names, plain constants (the
  ``interp-init phase-diagram`` command's choices and defaults).
* :mod:`training.studies.phase.aggregation`: best over learning rates, mean and spread over
  seeds, the journal's phases (pandas only).
* :mod:`training.studies.phase.figures`: the papers' figures (plotly) and the phase-diagram
  job (the table rebuilt, the figures written as offline HTML, the runs they leave out).

The names below are imported on first use (PEP 562 ``__getattr__``), so that the
command line reads :mod:`training.studies.phase.names` without importing pandas or plotly;
``from training.studies.phase import aggregate`` works as usual.
"""

from __future__ import annotations

from types import ModuleType

from interp_init.lazy import lazy_attributes

_AGGREGATION = ("LOWER_IS_BETTER_PREFIXES", "add_phase", "aggregate", "best_over", "classify_phase", "param_columns")
_FIGURES = (
    "FIGURES",
    "fig_complexity_epochs",
    "fig_journal_fig3a",
    "fig_journal_fig3b",
    "fig_journal_fig5c",
    "fig_journal_fig7c",
    "fig_neurips_fig2",
    "fig_pair_epochs",
    "make_figures",
    "supported_figures",
    "PhaseDiagrams",
    "phase_diagrams",
    "write_html",
)
_NAMES = ("COMMUTATIVITY_THRESHOLD", "FIGURE_NAMES", "ID_THRESHOLD", "OOD_THRESHOLD")

__all__ = sorted((*_NAMES, *_AGGREGATION, *_FIGURES))


def _module_of(name: str) -> ModuleType:
    if name in _NAMES:
        from training.studies.phase import names as module
    elif name in _AGGREGATION:
        from training.studies.phase import aggregation as module
    elif name in _FIGURES:
        from training.studies.phase import figures as module
    else:
        raise AttributeError(f"module 'training.studies.phase' has no attribute {name!r}")
    return module


__getattr__, __dir__ = lazy_attributes(globals(), _module_of, __all__)
