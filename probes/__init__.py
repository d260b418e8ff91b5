"""Hook-based analyses of any TransformerLens model (`docs/science.md <../docs/science.md>`_).

Every probe takes a 3.x ``HookedTransformer`` or a 4.x ``TransformerBridge`` (e.g. from
``TransformerBridge.boot_native``): they read a model through :class:`~probes.protocol.HookedModel`
and import neither class, so ``probes`` imports where only TransformerLens 4.x is installed.

Every probe takes a researcher's own inputs: token ids (or strings where the model has a
tokenizer) with an ``attention_mask`` for padded batches, their own labels and positions
(:mod:`probes.inputs`); a task's samples (the anchor tasks' ``AnchorDataset``, any
interp_init ``Samples``) are adapters onto these.  Names filters are TransformerLens'
(hook names, short names such as ``"resid_post"``, callables); captured activations come
back as an ``ActivationCache``.  Masking and flow read whether attention is causal or
bidirectional (a ``HookedEncoder``).  Start from ``examples/own_model.py``.

Each analysis returns data first (tensors, arrays or DataFrames); figures are drawn by
separate ``plot_*`` functions.  Modules: :mod:`probes.masking` (attention masking after
softmax, projections and cluster scores), :mod:`probes.flow` (information flow, top
paths, circuitsvis HTML), :mod:`probes.similarity` (cosine-similarity heatmaps and block
scores), :mod:`probes.geometry` (neuron condensation, embedding PCA, spectra),
:mod:`probes.rank` (stable ranks of weights and of each head's OV and QK circuits),
:mod:`probes.inputs` (tokens, labels, positions), :mod:`probes.anchors` (the anchor tasks'
helpers), :mod:`probes.protocol` (what a model must offer) and
:mod:`probes.views` (circuit views for Jupyter and files; results as tables).
Only the anchor-task helpers (``mask_key``, ``input_grid``, ``candidate_labelings``) read :mod:`interp_init`'s tasks.
"""

from probes.flow import attention_html, attention_patterns, information_flow, plot_flow, token_labels, top_paths
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
from probes.inputs import Inputs, as_inputs
from probes.anchors import candidate_labelings, mask_key, mask_second_anchor
from probes.masking import (
    MaskedRun,
    cluster_scores,
    masked_run,
    plot_projection,
    project,
    source_mask,
)
from probes.protocol import HookedModel
from probes.rank import (
    circuit_stable_ranks,
    head_circuits,
    merged_weight,
    singular_values,
    stable_rank,
    weight_matrices,
    weight_stable_ranks,
)
from probes.similarity import (
    SimilarityResult,
    activation_similarity,
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
    "Inputs",
    "MaskedRun",
    "SimilarityResult",
    "TableDisplay",
    "activation_similarity",
    "as_inputs",
    "attention_html",
    "attention_patterns",
    "block_score",
    "candidate_labelings",
    "circuit_stable_ranks",
    "cluster_scores",
    "condensation",
    "cosine_similarity_matrix",
    "embedding_pca",
    "equal_mask",
    "fix_self_closing_divs",
    "head_circuits",
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
