"""Hook-based analyses of any TransformerLens model (`docs/science.md <../docs/science.md>`_).

Every probe takes a 3.x ``HookedTransformer`` or a 4.x ``TransformerBridge`` (e.g. from
``TransformerBridge.boot_native``): they read a model through :class:`~probes.protocol.HookedModel`
and import neither class, so ``probes`` imports where only TransformerLens 4.x is installed.

Each analysis returns data first (tensors, arrays or DataFrames); figures are drawn by
separate ``plot_*`` functions.  Modules: :mod:`probes.masking` (attention masking after
softmax, projections and cluster scores), :mod:`probes.flow` (information flow, top
paths, circuitsvis HTML), :mod:`probes.similarity` (cosine-similarity heatmaps and block
scores), :mod:`probes.geometry` (neuron condensation, embedding PCA, spectra),
:mod:`probes.rank` (stable rank), :mod:`probes.protocol` (what a model must offer) and
:mod:`probes.views` (circuit views for Jupyter and files; results as tables).
Every module stands on :mod:`interp_init`'s data and tasks only.
"""

from probes.flow import (
    attention_html,
    attention_patterns,
    information_flow,
    plot_flow,
    token_labels,
    top_paths,
)
from probes.geometry import (
    Condensation,
    EmbeddingPCA,
    condensation,
    embedding_pca,
    plot_condensation,
    plot_eigenvalues,
    plot_embedding_pca,
    plot_spectra,
    singular_value_spectra,
)
from probes.masking import (
    MaskedRun,
    candidate_labelings,
    cluster_scores,
    mask_key,
    mask_second_anchor,
    masked_run,
    plot_projection,
    project,
    source_mask,
)
from probes.protocol import HookedModel
from probes.rank import merged_weight, singular_values, stable_rank, weight_matrices, weight_stable_ranks
from probes.similarity import (
    SimilarityResult,
    block_score,
    cosine_similarity_matrix,
    equal_mask,
    input_grid,
    plot_similarity,
    residual_similarity,
    value_similarity,
)
from probes.views import CircuitView, TableDisplay, fix_self_closing_divs, offline_html, standalone_html

__all__ = [
    "CircuitView",
    "Condensation",
    "EmbeddingPCA",
    "HookedModel",
    "MaskedRun",
    "SimilarityResult",
    "TableDisplay",
    "attention_html",
    "attention_patterns",
    "block_score",
    "candidate_labelings",
    "cluster_scores",
    "condensation",
    "cosine_similarity_matrix",
    "embedding_pca",
    "equal_mask",
    "fix_self_closing_divs",
    "information_flow",
    "input_grid",
    "mask_key",
    "mask_second_anchor",
    "masked_run",
    "merged_weight",
    "offline_html",
    "plot_condensation",
    "plot_eigenvalues",
    "plot_embedding_pca",
    "plot_flow",
    "plot_projection",
    "plot_similarity",
    "plot_spectra",
    "project",
    "residual_similarity",
    "singular_value_spectra",
    "singular_values",
    "source_mask",
    "stable_rank",
    "standalone_html",
    "token_labels",
    "top_paths",
    "value_similarity",
    "weight_matrices",
    "weight_stable_ranks",
]
