"""Stable rank of weight matrices and of activations (docs/science.md#the-analyses; journal Fig. 5C).

The stable rank of a matrix W is ||W||_F^2 / ||W||_2^2 = sum_i (s_i / s_max)^2, a smooth
lower bound of the rank: 1 for a rank-1 matrix, n for an orthogonal n x n matrix,
unchanged by scaling W or rotating it.  The journal paper plots the stable rank of
layer 0's W_Q (all heads merged into one ``d_model x n_heads * d_head`` matrix) over
the (gamma, weight decay) grid: it falls as the phase index rises (small init, reasoning).

The same for each head's circuits (Elhage et al. 2021): :func:`head_circuits` gives the
OV circuit ``W_V[h] @ W_O[h]`` and the QK circuit ``W_Q[h] @ W_K[h]^T`` of every layer and
head (``d_model x d_model``, rank at most ``d_head``) as a TransformerLens
``FactoredMatrix``; :func:`circuit_stable_ranks` their stable ranks, from the small
``d_head x d_head`` core of each product (never the ``d_model x d_model`` matrix).

The same for what the model computes: :func:`activation_stable_ranks` reads each
activation a names filter picks (TransformerLens' ``names_filter``) as one matrix, a row
per (input, position) and a column per feature, as ``stable_rank(cache[name].reshape(-1,
d))`` would, but leaving padding out (or reading one position per input).

Everything is float32: one SVD per matrix for the spectra, the largest eigenvalue of the
smaller Gram matrix for the stable ranks (within a relative 1e-5 of float64; tested).

Shapes: ``stable_rank`` takes a 2-D tensor ``[rows, cols]``; ``weight_stable_ranks``
returns a DataFrame with one row per weight matrix of a TransformerLens model (3.x or 4.x),
``circuit_stable_ranks`` one row per (layer, head, circuit), ``activation_stable_ranks``
one row per hook point (tokens ``[batch, pos]``; an activation ``[batch, pos, d]`` or
``[batch, pos, head, d_head]`` gives ``batch * pos`` rows).

Example::

    >>> import torch
    >>> from probes import stable_rank
    >>> round(stable_rank(torch.eye(5)), 6), round(stable_rank(torch.ones(4, 3)), 6)
    (5.0, 1.0)
    >>> from transformer_lens import HookedTransformer, HookedTransformerConfig
    >>> from interp_init import quiet_deprecation
    >>> from probes import activation_stable_ranks
    >>> cfg = HookedTransformerConfig(n_layers=2, d_model=16, n_heads=2, d_head=8, n_ctx=9, d_vocab=201, act_fn="gelu")
    >>> with quiet_deprecation():
    ...     model = HookedTransformer(cfg)
    >>> tokens = torch.randint(20, 100, (4, 9), generator=torch.Generator().manual_seed(0))
    >>> ranks = activation_stable_ranks(model, tokens, "resid_post")  # every layer's output: 4 x 9 rows, 16 columns
    >>> ranks[["name", "rows", "cols"]].values.tolist()
    [['blocks.0.hook_resid_post', 36, 16], ['blocks.1.hook_resid_post', 36, 16]]
"""

from __future__ import annotations

from collections.abc import Sequence

import einops
import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from probes._common import capture_hooks, is_filter_function, run_hooked
from probes.inputs import Inputs, as_inputs, is_cache
from probes.protocol import HookedModel, check_fired, check_model, read_weight


def _as_matrix(matrix: Tensor, name: str = "matrix") -> Tensor:
    if not isinstance(matrix, Tensor):
        matrix = torch.as_tensor(matrix)
    if matrix.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D matrix, got shape {tuple(matrix.shape)}; merge heads first (see merged_weight)"
        )
    if matrix.is_meta:
        raise ValueError(
            f"{name} is on the meta device (a shape without data); load or build the model on a real device (device='cpu')"
        )
    matrix = matrix.detach().to(torch.float32)
    if not bool(torch.isfinite(matrix.sum())):  # a NaN or infinity anywhere makes the sum so (no full-size temporary)
        raise ValueError(f"{name} has NaN or infinite entries: its singular values are undefined (a diverged model?)")
    return matrix


def _layer_index(layer: object, n_layers: int, name: str) -> int:
    """``layer`` as an int in 0..n_layers-1 (a negative one counts from the end): integer-like
    values (``1``, ``1.0``, ``numpy.int64(1)``) are accepted, anything else is refused naming the range."""
    try:
        index = int(layer)  # type: ignore[call-overload]
        integral = not isinstance(layer, bool) and index == layer
    except (TypeError, ValueError):
        integral = False
    if not integral or not -n_layers <= index < n_layers:
        raise ValueError(
            f"layer must be an integer in 0..{n_layers - 1} (or -{n_layers}..-1 from the end) for {name}, got {layer!r}"
        )
    return index % n_layers


def singular_values(matrix: Float[Tensor, "rows cols"]) -> Float[Tensor, " k"]:
    """Singular values of a 2-D matrix, descending: one float32 SVD (``torch.linalg.svdvals``).

    Each is within 1e-5 times the largest of the float64 values (tested on GPT-2-shaped matrices)."""
    return torch.linalg.svdvals(_as_matrix(matrix))


def _norms(matrix: Tensor) -> tuple[float, float]:
    """(spectral norm, Frobenius norm) in float32: the largest eigenvalue of the smaller Gram matrix."""
    matrix = _as_matrix(matrix)
    gram = matrix.T @ matrix if matrix.shape[1] <= matrix.shape[0] else matrix @ matrix.T
    top = float(torch.linalg.eigvalsh(gram)[-1].clamp_min(0.0)) if gram.numel() else 0.0
    return top**0.5, float(gram.diagonal().sum().clamp_min(0.0)) ** 0.5  # ||W||_F^2 = trace of the Gram matrix


def stable_rank(matrix: Float[Tensor, "rows cols"]) -> float:
    """||W||_F^2 / ||W||_2^2 of a 2-D matrix (0 for the zero matrix).

    In float32 from the largest eigenvalue of the smaller Gram matrix ``W^T W`` or
    ``W W^T``: within a relative 1e-5 of the float64 SVD's value (tested on GPT-2-shaped
    and nearly rank-1 matrices)."""
    spectral, frobenius = _norms(matrix)
    return 0.0 if spectral == 0.0 else frobenius**2 / spectral**2


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
        pattern = (
            "h d_head d_model -> (h d_head) d_model" if name == "W_O" else "h d_model d_head -> d_model (h d_head)"
        )
        if weight.ndim != 3:
            raise ValueError(
                f"this {type(model).__name__}'s blocks.{layer}.attn.{name} has shape {tuple(weight.shape)}, not [head, ..., ...]"
            )
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


def weight_names(model: HookedModel) -> list[tuple[int | None, str]]:
    """``(layer, name)`` of every weight matrix of ``model`` (no ``W_pos`` where the positional
    embedding is not learned, e.g. rotary; no ``W_in``, ``W_out`` in an attention-only or
    mixture-of-experts model)."""
    check_model(model)
    names = ["W_Q", "W_K", "W_V", "W_O"] + (["W_in", "W_out"] if _has_single_mlp(model) else [])
    first = [(None, "W_E")] + ([(None, "W_pos")] if hasattr(model, "pos_embed") else [])
    return first + [(layer, name) for layer in range(model.cfg.n_layers) for name in names] + [(None, "W_U")]


def weight_matrices(model: HookedModel) -> list[tuple[int | None, str, Tensor]]:
    """Every weight matrix of ``model`` as ``(layer, name, 2-D matrix)``, heads merged (see :func:`weight_names`)."""
    return [(layer, name, merged_weight(model, name, layer)) for layer, name in weight_names(model)]


RANK_COLUMNS = ["layer", "name", "rows", "cols", "stable_rank", "spectral_norm", "frobenius_norm"]


def weight_stable_ranks(model: HookedModel) -> pd.DataFrame:
    """One row per weight matrix: layer, name, rows, cols, stable_rank, spectral_norm, frobenius_norm (float32, see :func:`stable_rank`)."""
    rows = []
    for layer, name in weight_names(model):  # one merged matrix at a time
        matrix = merged_weight(model, name, layer)
        spectral, frobenius = _norms(matrix)
        rank = 0.0 if spectral == 0.0 else frobenius**2 / spectral**2
        rows.append(
            {
                "layer": layer,
                "name": name,
                "rows": matrix.shape[0],
                "cols": matrix.shape[1],
                "stable_rank": rank,
                "spectral_norm": spectral,
                "frobenius_norm": frobenius,
            }
        )
    frame = pd.DataFrame(rows, columns=RANK_COLUMNS)
    frame["layer"] = frame["layer"].astype("Int64")  # embeddings and unembedding have no layer (<NA>)
    return frame


CIRCUITS = ("OV", "QK")


def _circuit_factors(model: HookedModel, kind: str) -> tuple[Tensor, Tensor]:
    """``(A, B)`` with ``A @ B`` the circuit of every layer and head: ``[layer, head, d_model, d_head]`` and ``[layer, head, d_head, d_model]``."""
    check_model(model)
    if kind not in CIRCUITS:
        raise ValueError(f"kind must be 'OV' or 'QK', got {kind!r}")
    names = ("W_V", "W_O") if kind == "OV" else ("W_Q", "W_K")
    left, right = [], []
    for layer, block in enumerate(model.blocks):
        attn = getattr(block, "attn", None)
        a = read_weight(attn, names[0], f"blocks.{layer}.attn.{names[0]}", model)
        b = read_weight(attn, names[1], f"blocks.{layer}.attn.{names[1]}", model)
        n_heads = model.cfg.n_heads
        if kind == "OV" and a.shape[0] != n_heads:  # grouped-query attention: each query head reads its key-value head
            a = a.repeat_interleave(n_heads // a.shape[0], dim=0)
        if kind == "QK":
            if b.shape[0] != n_heads:
                b = b.repeat_interleave(n_heads // b.shape[0], dim=0)
            b = b.transpose(-1, -2)
        left.append(a)
        right.append(b)
    return torch.stack(left).float(), torch.stack(right).float()


def head_circuits(model: HookedModel, kind: str = "OV") -> object:
    """The ``kind`` ("OV" or "QK") circuit of every layer and head, ``[layer, head, d_model, d_model]``.

    A TransformerLens ``FactoredMatrix`` (``.AB`` the product, ``.S`` its singular values,
    ``[layer, head]`` indexing) where the installed line has one, else the factors
    ``(A, B)``.  OV: ``W_V[h] @ W_O[h]``; QK: ``W_Q[h] @ W_K[h]^T`` (unscaled); with
    grouped-query attention the shared key-value heads are repeated per query head."""
    a, b = _circuit_factors(model, kind)
    try:
        from transformer_lens import FactoredMatrix
    except ImportError:
        return a, b
    return FactoredMatrix(a, b)


CIRCUIT_COLUMNS = ["layer", "head", "circuit", "stable_rank", "spectral_norm", "frobenius_norm"]


def circuit_stable_ranks(model: HookedModel) -> pd.DataFrame:
    """One row per (layer, head, circuit OV or QK): its stable rank, spectral and Frobenius norms.

    From the factors: with ``A = Q_A R_A`` and ``B^T = Q_B R_B`` (QR), ``A B`` has the
    singular values of the ``d_head x d_head`` matrix ``R_A R_B^T`` (float32)."""
    rows = []
    for kind in CIRCUITS:
        a, b = _circuit_factors(model, kind)
        if not bool(torch.isfinite(a).all() and torch.isfinite(b).all()):
            raise ValueError(
                f"the {kind} circuit weights have NaN or infinite entries: their singular values are undefined (a diverged model?)"
            )
        r_a = torch.linalg.qr(a, mode="r").R
        r_b = torch.linalg.qr(b.transpose(-1, -2), mode="r").R
        s = torch.linalg.svdvals(r_a @ r_b.transpose(-1, -2))  # [layer, head, d_head]
        top, fro = s[..., 0], s.pow(2).sum(-1).sqrt()
        rank = torch.where(top > 0, fro.pow(2) / top.clamp_min(torch.finfo(s.dtype).tiny).pow(2), torch.zeros_like(top))
        for layer in range(s.shape[0]):
            for head in range(s.shape[1]):
                rows.append(
                    {
                        "layer": layer,
                        "head": head,
                        "circuit": kind,
                        "stable_rank": float(rank[layer, head]),
                        "spectral_norm": float(top[layer, head]),
                        "frobenius_norm": float(fro[layer, head]),
                    }
                )
    return pd.DataFrame(rows, columns=CIRCUIT_COLUMNS)


ACTIVATION_COLUMNS = ["name", "rows", "cols", "stable_rank", "spectral_norm", "frobenius_norm"]


def activation_stable_ranks(
    model: HookedModel,
    tokens: Int[Tensor, "batch pos"] | Sequence | str | Inputs,
    names_filter: object = "resid_post",
    *,
    position: str | int | Sequence[int] | Tensor | None = None,
    attention_mask: Int[Tensor, "batch pos"] | None = None,
) -> pd.DataFrame:
    """The stable rank of each activation ``names_filter`` picks, over ``tokens``: one row per hook point.

    ``names_filter`` as TransformerLens' ``run_with_cache`` takes it (default
    ``"resid_post"``: every layer's output).  Each activation is one matrix with a row per
    (input, position) and a column per feature, not centred: ``[batch, pos, d]`` as is,
    ``[batch, pos, head, d_head]`` with its heads merged, an attention pattern ``[batch,
    head, query, key]`` with a row per (input, query) and a column per (head, key).  Under
    an ``attention_mask`` only real tokens' rows count; ``position`` (``"last"``, an int,
    one per input) keeps one row per input.  Columns: ``name, rows, cols, stable_rank,
    spectral_norm, frobenius_norm`` (float32, as :func:`stable_rank`).  ``tokens`` may be the
    ``ActivationCache`` of ``model.run_with_cache(tokens)`` (with its batch dimension): the
    activations are read from it, with no run."""
    check_model(model)
    store: dict[str, Tensor] = {}
    captures = capture_hooks(names_filter, model, store)
    if not captures:
        raise ValueError("names_filter picks no hook point: give one, e.g. 'resid_post' or ('resid_post', -1)")
    if is_cache(tokens):  # the activations a user already has: read, not run
        missing = [name for name, _ in captures if name not in set(tokens.keys())]
        if missing and not is_filter_function(names_filter):
            raise ValueError(
                f"activation_stable_ranks: the cache holds no {missing[0]} ({len(missing)} of those names_filter picks are missing); "
                "cache them with model.run_with_cache(tokens, names_filter=...) or pass the tokens"
            )
        store = {name: tokens[name] for name, _ in captures if name not in missing}
        first = next(iter(store.values()))
        n_pos = first.shape[2] if next(iter(store)).endswith(("hook_pattern", "hook_attn_scores")) else first.shape[1]
        inputs = as_inputs(torch.zeros(first.shape[0], n_pos, dtype=torch.long), attention_mask=attention_mask)
    else:
        inputs = as_inputs(tokens, model, attention_mask=attention_mask)
        run_hooked(model, inputs, captures)
        if not is_filter_function(names_filter):
            check_fired(store, [name for name, _ in captures], "activation_stable_ranks (capturing activations)")
    batch, n_pos = inputs.tokens.shape
    real = (
        torch.ones(batch, n_pos, dtype=torch.bool)
        if inputs.attention_mask is None
        else inputs.attention_mask.cpu().bool()
    )
    if position is not None:
        real = torch.zeros(batch, n_pos, dtype=torch.bool)
        real[torch.arange(batch), inputs.position(position)] = True
    rows = []
    for name, activation in store.items():
        activation = activation.cpu()
        if name.endswith(("hook_pattern", "hook_attn_scores")) and activation.ndim == 4:
            activation = einops.rearrange(activation, "batch head query key -> batch query (head key)")
        elif activation.ndim == 4:
            activation = einops.rearrange(activation, "batch pos head d_head -> batch pos (head d_head)")
        if activation.ndim != 3 or tuple(activation.shape[:2]) != (batch, n_pos):
            raise ValueError(
                f"activation_stable_ranks reads [batch, pos, ...] activations; {name} has shape {tuple(activation.shape)}: leave it out of names_filter"
            )
        matrix = _as_matrix(activation[real], f"the activation {name}")
        spectral, frobenius = _norms(matrix)
        rank = 0.0 if spectral == 0.0 else frobenius**2 / spectral**2
        rows.append(
            {
                "name": name,
                "rows": matrix.shape[0],
                "cols": matrix.shape[1],
                "stable_rank": rank,
                "spectral_norm": spectral,
                "frobenius_norm": frobenius,
            }
        )
    return pd.DataFrame(rows, columns=ACTIVATION_COLUMNS)
