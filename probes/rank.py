"""Stable rank of weight matrices (docs/science.md#the-analyses; journal Fig. 5C).

The stable rank of a matrix W is ||W||_F^2 / ||W||_2^2 = sum_i (s_i / s_max)^2, a smooth
lower bound of the rank: 1 for a rank-1 matrix, n for an orthogonal n x n matrix,
unchanged by scaling W or rotating it.  The journal paper plots the stable rank of
layer 0's W_Q (all heads merged into one ``d_model x n_heads * d_head`` matrix) over
the (gamma, weight decay) grid: it falls as the phase index rises (small init, reasoning).

Shapes: ``stable_rank`` takes a 2-D tensor ``[rows, cols]``; ``weight_stable_ranks``
returns a DataFrame with one row per weight matrix of a TransformerLens model (3.x or 4.x).

Example::

    >>> import torch
    >>> from probes import stable_rank
    >>> round(stable_rank(torch.eye(5)), 6), round(stable_rank(torch.ones(4, 3)), 6)
    (5.0, 1.0)
"""

from __future__ import annotations

import einops
import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from probes.protocol import HookedModel, check_model, read_weight


def _as_matrix(matrix: Tensor, name: str = "matrix") -> Tensor:
    if not isinstance(matrix, Tensor):
        matrix = torch.as_tensor(matrix)
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {tuple(matrix.shape)}; merge heads first (see merged_weight)")
    if matrix.is_meta:
        raise ValueError(f"{name} is on the meta device (a shape without data); load or build the model on a real device (device='cpu')")
    matrix = matrix.detach().to(torch.float64)
    if not bool(torch.isfinite(matrix).all()):
        raise ValueError(f"{name} has NaN or infinite entries: its singular values are undefined (a diverged model?)")
    return matrix


def _layer_index(layer: object, n_layers: int, name: str) -> int:
    """``layer`` as an int in 0..n_layers-1: integer-like values (``1``, ``1.0``,
    ``numpy.int64(1)``) are accepted, anything else is refused naming the range."""
    try:
        index = int(layer)  # type: ignore[call-overload]
        integral = not isinstance(layer, bool) and index == layer
    except (TypeError, ValueError):
        integral = False
    if not integral or not 0 <= index < n_layers:
        raise ValueError(f"layer must be an integer in 0..{n_layers - 1} for {name}, got {layer!r}")
    return index


def singular_values(matrix: Float[Tensor, "rows cols"]) -> Float[Tensor, " k"]:
    """Singular values of a 2-D matrix, descending (float64)."""
    return torch.linalg.svdvals(_as_matrix(matrix))


def stable_rank(matrix: Float[Tensor, "rows cols"]) -> float:
    """||W||_F^2 / ||W||_2^2 of a 2-D matrix (0 for the zero matrix)."""
    s = singular_values(matrix)
    if s.numel() == 0 or float(s[0]) == 0.0:
        return 0.0
    return float((s / s[0]).pow(2).sum())


def _has_single_mlp(model: HookedModel) -> bool:
    """Whether every block has one MLP with ``W_in`` and ``W_out`` (not attention-only, not experts)."""
    if getattr(model.cfg, "attn_only", False):
        return False
    mlps = [getattr(block, "mlp", None) for block in model.blocks]
    return all(mlp is not None and hasattr(mlp, "W_in") and hasattr(mlp, "W_out") for mlp in mlps)


def merged_weight(model: HookedModel, name: str, layer: int | None = None) -> Float[Tensor, "d_in d_out"]:
    """A weight of ``model`` as one 2-D ``[d_in, d_out]`` matrix, heads merged.

    ``name`` is ``W_Q``, ``W_K``, ``W_V`` (``[d_model, n_heads * d_head]``), ``W_O``
    (``[n_heads * d_head, d_model]``), ``W_in``, ``W_out`` (need ``layer``), or ``W_E``,
    ``W_pos``, ``W_U``.  With grouped-query attention ``W_K`` and ``W_V`` are as each
    query head reads them on TransformerLens 3.x (the shared key-value heads repeated) and
    one per key-value head on 4.x; the stable rank is the same either way.  A weight the
    model does not have is a one-line ValueError naming it.
    """
    check_model(model)
    if name in ("W_E", "W_pos", "W_U"):
        if name == "W_pos" and not hasattr(model, "pos_embed"):
            kind = getattr(model.cfg, "positional_embedding_type", "not a learned one")
            raise ValueError(f"W_pos does not exist: the model's positional embedding is {kind!r}, not learned")
        return read_weight(model, name, name, model)
    layer = _layer_index(layer, model.cfg.n_layers, name)
    block = model.blocks[layer]
    if name in ("W_Q", "W_K", "W_V", "W_O"):
        attn = getattr(block, "attn", None)
        weight = read_weight(attn, name, f"blocks.{layer}.attn.{name}", model)
        pattern = "h d_head d_model -> (h d_head) d_model" if name == "W_O" else "h d_model d_head -> d_model (h d_head)"
        if weight.ndim != 3:
            raise ValueError(f"this {type(model).__name__}'s blocks.{layer}.attn.{name} has shape {tuple(weight.shape)}, not [head, ..., ...]")
        return einops.rearrange(weight, pattern)
    if name in ("W_in", "W_out"):
        if getattr(model.cfg, "attn_only", False):
            raise ValueError(f"{name} does not exist: the model is attention-only")
        mlp = getattr(block, "mlp", None)
        if mlp is not None and hasattr(mlp, "experts"):
            raise ValueError(
                f"{name} does not exist: the model's MLP is a mixture of {getattr(model.cfg, 'num_experts', 'several')} experts, "
                f"each with its own {name} (read model.blocks[{layer}].mlp.experts[i].{name})"
            )
        return read_weight(mlp, name, f"blocks.{layer}.mlp.{name}", model)
    raise ValueError(f"unknown weight {name!r}; use W_Q, W_K, W_V, W_O, W_in, W_out, W_E, W_pos or W_U")


def weight_matrices(model: HookedModel) -> list[tuple[int | None, str, Tensor]]:
    """Every weight matrix of ``model`` as ``(layer, name, 2-D matrix)``, heads merged
    (no ``W_pos`` where the positional embedding is not learned, e.g. rotary; no
    ``W_in``, ``W_out`` in an attention-only or mixture-of-experts model)."""
    check_model(model)
    out: list[tuple[int | None, str, Tensor]] = [(None, "W_E", merged_weight(model, "W_E"))]
    if hasattr(model, "pos_embed"):
        out.append((None, "W_pos", merged_weight(model, "W_pos")))
    names = ["W_Q", "W_K", "W_V", "W_O"] + (["W_in", "W_out"] if _has_single_mlp(model) else [])
    for layer in range(model.cfg.n_layers):
        out += [(layer, name, merged_weight(model, name, layer)) for name in names]
    out.append((None, "W_U", merged_weight(model, "W_U")))
    return out


def weight_stable_ranks(model: HookedModel) -> pd.DataFrame:
    """One row per weight matrix: layer, name, shape, stable_rank, spectral_norm, frobenius_norm."""
    rows = []
    for layer, name, matrix in weight_matrices(model):
        s = singular_values(matrix)
        rows.append(
            {
                "layer": layer,
                "name": name,
                "shape": tuple(matrix.shape),
                "stable_rank": stable_rank(matrix),
                "spectral_norm": float(s[0]),
                "frobenius_norm": float(s.pow(2).sum().sqrt()),
            }
        )
    frame = pd.DataFrame(rows, columns=["layer", "name", "shape", "stable_rank", "spectral_norm", "frobenius_norm"])
    frame["layer"] = frame["layer"].astype("Int64")  # embeddings and unembedding have no layer (<NA>)
    return frame
