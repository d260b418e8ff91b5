"""Hook-based analyses of any TransformerLens model (`docs/science.md <../docs/science.md>`_).

Every probe takes a 3.x ``HookedTransformer`` or a 4.x ``TransformerBridge`` (e.g. from
``TransformerBridge.boot_native``): they read a model through :class:`~probes.protocol.HookedModel`
and import neither class, so ``probes`` imports where only TransformerLens 4.x is installed.

Every probe takes a researcher's own inputs: token ids (or strings where the model has a
tokenizer) with an ``attention_mask`` for padded batches, their own labels and positions
(:mod:`probes.inputs`); a task's samples (the anchor tasks' ``AnchorDataset``, any
interp_init ``Samples``) are adapters onto these.  Activations are picked by a
``names_filter=`` as TransformerLens' ``run_with_cache`` takes it (hook names, short names
such as ``"resid_post"``, ``(name, layer)``, callables, ``None`` for every hook point);
captured activations come back as an ``ActivationCache``.  Layers and positions count from
the end when negative.  Masking and flow read whether attention is causal or bidirectional
(a ``HookedEncoder``; TransformerLens 3.9 leaves a new one uninitialized, see
``docs/probes.md``).  Start from ``examples/own_model.py``; TransformerLens' own
interventions (activation patching, ``run_with_hooks``) work on every model here too
(``examples/activation_patching.py``).

Each analysis returns data first (tensors, arrays or DataFrames); figures are drawn by
separate ``plot_*`` functions.  Modules: :mod:`probes.masking` (attention masking after
softmax, projections and cluster scores), :mod:`probes.flow` (information flow, top
paths), :mod:`probes.similarity` (cosine-similarity heatmaps and block
scores), :mod:`probes.geometry` (neuron condensation, embedding PCA, spectra),
:mod:`probes.rank` (stable ranks of weights, of each head's OV and QK circuits and of activations),
:mod:`probes.inputs` (tokens, labels, positions), :mod:`probes.anchors` (the anchor tasks'
helpers), :mod:`probes.protocol` (what a model must offer) and
:mod:`probes.views` (circuitsvis views of attention for Jupyter and files; results as tables).
Only the anchor-task helpers (``mask_key``, ``input_grid``, ``candidate_labelings``) read :mod:`interp_init`'s tasks.

What a researcher calls, each documented on its module's page (the helpers below them, such as
:func:`~probes.masking.source_mask` or :func:`~probes.inputs.as_inputs`, stay importable
from their modules).  Where a probe takes inputs it takes token ids as TransformerLens
models do (the anchor tasks' too: :func:`mask_key` finds each key); where it needs only
the activations (:func:`information_flow`, :func:`attention_patterns`,
:func:`activation_stable_ranks`) it also takes the ``ActivationCache`` of ``model.run_with_cache(tokens)``:

* masking: :func:`masked_run`, :func:`mask_key` and :func:`mask_second_anchor` (the anchor
  tasks' cases, on a dataset or on token ids: :func:`anchor_positions`), :func:`project`,
  :func:`plot_projection`, :func:`cluster_scores`, :func:`candidate_labelings`; the result
  :class:`MaskedRun` (indexed like logits: ``masked[:, -1]``);
* information flow: :func:`information_flow`, :func:`top_paths` (``k=`` best), :func:`read_paths`,
  :func:`plot_flow`, :func:`attention_patterns`, :func:`attention_html`, :func:`token_labels`;
* similarity: :func:`residual_similarity`, :func:`value_similarity`,
  :func:`activation_similarity`, :func:`cosine_similarity_matrix`, :func:`equal_mask`,
  :func:`block_score`, :func:`plot_similarity`, :func:`input_grid`; the result
  :class:`SimilarityResult` (``.score``: the block score);
* geometry: :func:`condensation`, :func:`plot_condensation`, :func:`embedding_pca`,
  :func:`plot_embedding_pca`, :func:`singular_value_spectra`, :func:`plot_spectra`,
  :func:`plot_eigenvalues`;
* stable rank: :func:`stable_rank`, :func:`merged_weight`, :func:`weight_stable_ranks`,
  :func:`head_circuits`, :func:`circuit_stable_ranks`, :func:`activation_stable_ranks`;
* :class:`HookedModel`, the protocol of what a model must offer (for type annotations).
"""

from probes.anchors import anchor_positions, candidate_labelings, mask_key, mask_second_anchor
from probes.flow import attention_patterns, information_flow, plot_flow, token_labels, top_paths
from probes.geometry import (
    condensation,
    embedding_pca,
    plot_condensation,
    plot_eigenvalues,
    plot_embedding_pca,
    plot_spectra,
    singular_value_spectra,
)
from probes.masking import MaskedRun, cluster_scores, masked_run, plot_projection, project
from probes.protocol import HookedModel
from probes.rank import (
    activation_stable_ranks,
    circuit_stable_ranks,
    head_circuits,
    merged_weight,
    stable_rank,
    weight_stable_ranks,
)
from probes.similarity import (
    activation_similarity,
    block_score,
    cosine_similarity_matrix,
    equal_mask,
    input_grid,
    SimilarityResult,
    plot_similarity,
    residual_similarity,
    value_similarity,
)
from probes.views import attention_html, read_paths

__all__ = [
    "HookedModel",
    "MaskedRun",
    "SimilarityResult",
    "activation_similarity",
    "activation_stable_ranks",
    "anchor_positions",
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
    "head_circuits",
    "information_flow",
    "input_grid",
    "mask_key",
    "mask_second_anchor",
    "masked_run",
    "merged_weight",
    "plot_condensation",
    "plot_eigenvalues",
    "plot_embedding_pca",
    "plot_flow",
    "plot_projection",
    "plot_similarity",
    "plot_spectra",
    "project",
    "read_paths",
    "residual_similarity",
    "singular_value_spectra",
    "stable_rank",
    "token_labels",
    "top_paths",
    "value_similarity",
    "weight_stable_ranks",
]
