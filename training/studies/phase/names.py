"""The phase diagrams' thresholds and figure names: plain constants, no pandas, no plotly.

They are the choices and defaults of ``interp-init phase-diagram`` (``--figure``,
``--id-threshold``, ``--ood-threshold``, ``--loss-threshold``, ``--pair-threshold``), so
the command line reads them without importing pandas, plotly or torch;
:mod:`training.studies.phase.aggregation` and :mod:`training.studies.phase.figures` use them as defaults.
The phases are defined in docs/science.md (the anchor-function task).
"""

from __future__ import annotations

# The journal's thresholds live with its tasks (interp_init.tasks.anchor): ID accuracy at
# or above ID_THRESHOLD is good (the NeurIPS shaded zones below it), OOD accuracy above
# OOD_THRESHOLD is Phase 3, commutativity below COMMUTATIVITY_THRESHOLD is marked in Fig. 3B.
# The thresholds a results table's epochs_to_* columns are measured with by default live
# with the table (training.studies.sweep.spec): training loss below LOSS_THRESHOLD, per-pair
# training accuracy at or above PAIR_ACC_THRESHOLD.
from interp_init.tasks.anchor import COMMUTATIVITY_THRESHOLD, ID_THRESHOLD, OOD_THRESHOLD
from training.studies.sweep.spec import LOSS_THRESHOLD, PAIR_ACC_THRESHOLD

__all__ = [
    "COMMUTATIVITY_THRESHOLD",
    "FIGURE_NAMES",
    "ID_THRESHOLD",
    "LOSS_THRESHOLD",
    "OOD_THRESHOLD",
    "PAIR_ACC_THRESHOLD",
]

#: The papers' figures, in the order they are drawn (keys of :data:`training.studies.phase.FIGURES`).
FIGURE_NAMES: tuple[str, ...] = (
    "neurips_fig2",
    "journal_fig3a",
    "journal_fig3b",
    "journal_fig5c",
    "complexity_epochs",
    "pair_epochs",
    "journal_fig7c",
)
