"""Hook-based analyses of any TransformerLens ``HookedTransformer`` (SPEC section 6).

Each analysis returns data first (tensors, arrays or DataFrames); figures are drawn by
separate functions.
"""

from probes.rank import merged_weight, singular_values, stable_rank, weight_matrices, weight_stable_ranks

__all__ = ["merged_weight", "singular_values", "stable_rank", "weight_matrices", "weight_stable_ranks"]
