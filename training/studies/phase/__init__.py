"""Phase diagrams from a sweep's results table: the papers' aggregation, phases and figures.

* here: the thresholds and figure names, plain constants (the ``interp-init phase-diagram``
  command's choices and defaults; aggregation and figures use them as defaults).
* :mod:`training.studies.phase.aggregation`: best over learning rates, mean and spread over
  seeds, the journal's phases (pandas only).
* :mod:`training.studies.phase.figures`: the papers' figures (plotly) and the phase-diagram
  job (the table rebuilt, the figures written as offline HTML, the runs they leave out).

The names below are imported on first use (PEP 562 ``__getattr__``), so that the
command line reads the constants without importing pandas, plotly or torch;
``from training.studies.phase import aggregate`` works as usual.
"""

from __future__ import annotations

from types import ModuleType

from interp_init.lazy import lazy_attributes

# The journal's thresholds live with its tasks (interp_init.tasks.anchor): ID accuracy at
# or above ID_THRESHOLD is good (the NeurIPS shaded zones below it), OOD accuracy above
# OOD_THRESHOLD is Phase 3, commutativity below COMMUTATIVITY_THRESHOLD is marked in Fig. 3B.
# The thresholds a results table's epochs_to_* columns are measured with by default live
# with the table (training.studies.sweep.spec): training loss below LOSS_THRESHOLD, per-pair
# training accuracy at or above PAIR_ACC_THRESHOLD.
from interp_init.tasks.anchor import COMMUTATIVITY_THRESHOLD, ID_THRESHOLD, OOD_THRESHOLD  # noqa: F401 (in __all__)
from training.studies.sweep.spec import LOSS_THRESHOLD, PAIR_ACC_THRESHOLD  # noqa: F401 (in __all__)

#: The papers' figures, in the order they are drawn (keys of :data:`FIGURES`).
FIGURE_NAMES: tuple[str, ...] = (
    "neurips_fig2",
    "journal_fig3a",
    "journal_fig3b",
    "journal_fig5c",
    "complexity_epochs",
    "pair_epochs",
    "journal_fig7c",
)

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
_NAMES = (
    "COMMUTATIVITY_THRESHOLD",
    "FIGURE_NAMES",
    "ID_THRESHOLD",
    "LOSS_THRESHOLD",
    "OOD_THRESHOLD",
    "PAIR_ACC_THRESHOLD",
)

__all__ = sorted((*_NAMES, *_AGGREGATION, *_FIGURES))


def _module_of(name: str) -> ModuleType:
    if name in _AGGREGATION:
        from training.studies.phase import aggregation as module
    elif name in _FIGURES:
        from training.studies.phase import figures as module
    else:
        raise AttributeError(f"module 'training.studies.phase' has no attribute {name!r}")
    return module


__getattr__, __dir__ = lazy_attributes(globals(), _module_of, __all__)
