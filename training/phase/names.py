"""The phase diagrams' thresholds and figure names: plain constants, no pandas, no plotly.

They are the choices and defaults of ``interp-init phase-diagram`` (``--figure``,
``--id-threshold``, ``--ood-threshold``, ``--loss-threshold``, ``--pair-threshold``), so
the command line reads them without importing pandas, plotly or torch;
:mod:`training.phase.aggregation` and :mod:`training.phase.figures` use them as defaults.
The phases are defined in docs/science.md (the anchor-function task).
"""

from __future__ import annotations

#: ID accuracy at or above which ID generalization is "good" (NeurIPS shadow zones).
ID_THRESHOLD = 0.9
#: OOD accuracy above which a good-ID cell is Phase 3 (journal Fig. 5C).
OOD_THRESHOLD = 0.5
#: Commutativity below which journal Fig. 3B marks a cell.
COMMUTATIVITY_THRESHOLD = 0.7

#: The thresholds a results table's ``epochs_to_*`` columns are measured with by default
#: (the values of :data:`training.sweep.LOSS_THRESHOLD` and
#: :data:`training.sweep.PAIR_ACC_THRESHOLD`): training loss below it, and per-pair
#: training accuracy at or above it.
LOSS_THRESHOLD = 0.05
PAIR_ACC_THRESHOLD = 0.6

#: The papers' figures, in the order they are drawn (keys of :data:`training.phase.FIGURES`).
FIGURE_NAMES: tuple[str, ...] = (
    "neurips_fig2",
    "journal_fig3a",
    "journal_fig3b",
    "journal_fig5c",
    "complexity_epochs",
    "pair_epochs",
)
