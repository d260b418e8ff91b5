"""Fused pieces of a block's forward, for an architecture's ``all_positions`` and ``last_position``.

Each reads the module's own parameters on every call (so gradients flow into them) and
computes what TransformerLens' hook-point-by-hook-point code computes, with fused PyTorch
kernels (``F.layer_norm`` / ``F.rms_norm``, one matrix product for Q, K and V where they
read the same input, ``F.scaled_dot_product_attention``, ``torch.addmm``); the activation
is the MLP's own (``mlp.act_fn``), the attention scale the attention's own
(``attn.attn_scale``).
"""

from __future__ import annotations

import einops
import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor

__all__ = ["attention_all_positions", "attention_last_position", "mlp", "norm"]


def norm(module: torch.nn.Module, x: Float[Tensor, "... d"]) -> Float[Tensor, "... d"]:
    """The normalization ``module`` (LN, LNPre, RMS or RMSPre) applied with a fused kernel."""
    shape = (x.shape[-1],)
    kind = type(module).__name__
    if kind == "LayerNorm":
        return F.layer_norm(x, shape, module.w, module.b, module.eps)
    if kind == "LayerNormPre":
        return F.layer_norm(x, shape, None, None, module.eps)
    if kind == "RMSNorm":
        return F.rms_norm(x, shape, module.w, module.eps)
    if kind == "RMSNormPre":
        return F.rms_norm(x, shape, None, module.eps)
    raise ValueError(f"unsupported normalization module {kind}")


def mlp(module: torch.nn.Module, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
    """The MLP ``module``: ``act(x W_in + b_in) W_out + b_out``."""
    rows = x.reshape(-1, x.shape[-1])
    hidden = module.act_fn(torch.addmm(module.b_in, rows, module.W_in))
    return torch.addmm(module.b_out, hidden, module.W_out).view(x.shape)


def _flat_in(w: Float[Tensor, "head d_model d_head"]) -> Float[Tensor, "head_x_d_head d_model"]:
    return einops.rearrange(w, "head d_model d_head -> (head d_head) d_model")


def _attn_out(attn: torch.nn.Module, z: Float[Tensor, "rows head_x_d_head"]) -> Float[Tensor, "rows d_model"]:
    w_o = einops.rearrange(attn.W_O, "head d_head d_model -> (head d_head) d_model")
    return torch.addmm(attn.b_O, z, w_o)


def attention_all_positions(
    attn: torch.nn.Module, q_in: Float[Tensor, "batch pos d_model"], kv_in: Float[Tensor, "batch pos d_model"]
) -> Float[Tensor, "batch pos d_model"]:
    """Causal attention at every position, queries read from ``q_in``, keys and values from
    ``kv_in`` (one matrix product for Q, K and V when they are the same tensor)."""
    batch, n_pos, d_model = q_in.shape
    n_heads = attn.b_Q.shape[0]
    if q_in is kv_in:
        w_qkv = torch.cat([_flat_in(attn.W_Q), _flat_in(attn.W_K), _flat_in(attn.W_V)])
        b_qkv = torch.cat([attn.b_Q.flatten(), attn.b_K.flatten(), attn.b_V.flatten()])
        qkv = F.linear(q_in, w_qkv, b_qkv)
    else:  # Q from one input, K and V (one product) from the other
        q = F.linear(q_in, _flat_in(attn.W_Q), attn.b_Q.flatten())
        w_kv = torch.cat([_flat_in(attn.W_K), _flat_in(attn.W_V)])
        kv = F.linear(kv_in, w_kv, torch.cat([attn.b_K.flatten(), attn.b_V.flatten()]))
        qkv = torch.cat([q, kv], dim=-1)
    q, k, v = einops.rearrange(
        qkv, "batch pos (three head d_head) -> three batch head pos d_head", three=3, head=n_heads
    )
    z = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / float(attn.attn_scale))
    z = einops.rearrange(z, "batch head pos d_head -> (batch pos) (head d_head)")
    return _attn_out(attn, z).view(batch, n_pos, d_model)


def attention_last_position(
    attn: torch.nn.Module, q_last: Float[Tensor, "batch d_model"], kv_in: Float[Tensor, "batch pos d_model"]
) -> Float[Tensor, "batch d_model"]:
    """The attention output at the last position, its query read from ``q_last``, keys and
    values from ``kv_in``; keys and values are never formed.

    With one query per head the attention is re-associated (exact in real arithmetic):
    ``q . (x_j W_K + b_K) = x_j . (W_K q) + q . b_K``, and since the pattern sums to 1,
    ``sum_j a_j (x_j W_V + b_V) = (sum_j a_j x_j) W_V + b_V``.  That costs two
    ``d_model x d_head`` products per head and sample instead of two per head and
    *position*.  (The ``q . b_K`` shift changes no pattern; it is kept so that ``b_K``
    gets the gradient, zero up to rounding, that the hooked forward gives it.)
    """
    n_heads = attn.b_Q.shape[0]
    w_q = einops.rearrange(attn.W_Q, "head d_model d_head -> d_model (head d_head)")
    q = torch.addmm(attn.b_Q.flatten(), q_last, w_q)
    q = einops.rearrange(q, "batch (head d_head) -> batch head d_head", head=n_heads)
    q_k = einops.einsum(q, attn.W_K, "batch head d_head, head d_model d_head -> batch head d_model")
    shift = einops.einsum(q, attn.b_K, "batch head d_head, head d_head -> batch head")
    scores = einops.einsum(q_k, kv_in, "batch head d_model, batch pos d_model -> batch head pos") + shift.unsqueeze(-1)
    pattern = torch.softmax(scores / attn.attn_scale, dim=-1)
    mixed = einops.einsum(pattern, kv_in, "batch head pos, batch pos d_model -> batch head d_model")
    z = einops.einsum(mixed, attn.W_V, "batch head d_model, head d_model d_head -> batch head d_head") + attn.b_V
    return _attn_out(attn, einops.rearrange(z, "batch head d_head -> batch (head d_head)"))
