"""The training step: the last-position logits of a ``HookedTransformer`` without the work the
loss does not need, the optimizer, denormal flushing and one step (:func:`train_step`).

The anchor-function loss reads one position: the last.  :func:`last_position_logits`
computes exactly ``model(tokens)[:, -1]`` from the model's own parameters (read from its
modules on every call, so gradients flow into ``model.parameters()``) and skips what
that position does not depend on:

* every block but the last runs at all positions (the last position attends to them);
* in the last block, the query, the attention pattern, the attention output, the MLP,
  ``ln_final`` and the unembedding run at the last position only, and keys and values
  are never formed: the one query is folded into ``W_K`` and the pattern applied to the
  normalized residual before ``W_V`` (re-association, exact in real arithmetic; see
  :func:`interp_init.architectures.kernels.attention_last_position`).

Each block is computed by its registered architecture's own fast forward
(:class:`interp_init.architectures.Architecture`'s ``all_positions`` and
``last_position``, made of the fused kernels of :mod:`interp_init.architectures.kernels`)
instead of TransformerLens' hook-point-by-hook-point code.  The result equals the hooked
forward to fp32 rounding (``tests/training/test_step.py`` checks logits and every parameter's
gradient, for every registered architecture).  A block class no architecture registered
is an error, never read as another architecture.

Hook points are bypassed, so whenever a hook is attached to the model (``with
model.hooks(...)``), or the model's config asks for something this function does not
reproduce exactly (see :func:`fast_forward_unsupported`), it falls back to the hooked
forward ``model(tokens)[:, -1]``: the answer is always the model's.

A sequence task (:attr:`interp_init.tasks.base.Task.output` ``"sequence"``) reads every
position: :func:`all_position_logits` is ``model(tokens)`` by the same fused blocks (every
block at all positions, then ``ln_final`` and the unembedding), with the same fallback, and
:func:`train_step` takes the mean cross-entropy over the target positions (the loss mask:
targets :data:`interp_init.tasks.base.IGNORE` elsewhere).

Example::

    >>> import torch
    >>> from interp_init import ModelConfig, InitConfig, build_model
    >>> from training.trainer.step import last_position_logits
    >>> cfg = ModelConfig(n_layers=2, d_model=32, n_heads=2, d_head=16, d_mlp=64)
    >>> model = build_model(cfg, InitConfig(gamma=0.5), seed=0)
    >>> tokens = torch.randint(0, 201, (4, 9))
    >>> torch.allclose(last_position_logits(model, tokens), model(tokens)[:, -1], atol=1e-5)
    True
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens import HookedTransformer
from transformer_lens.hook_points import HookPoint

from interp_init.architectures import architecture_of, get_architecture
from interp_init.architectures.kernels import norm
from interp_init.tasks.base import IGNORE
from training.config import TrainConfig

__all__ = [
    "all_position_logits",
    "autocast_context",
    "fast_forward_unsupported",
    "has_hooks",
    "last_position_logits",
    "make_optimizer",
    "sequence_loss",
    "target_logits",
    "train_step",
]

_NORMS = ("LN", "LNPre", "RMS", "RMSPre")
_ACT_FNS = ("gelu", "gelu_new", "relu", "silu", "gelu_fast")
_FLOAT_DTYPES = (torch.float32, torch.float64)


def fast_forward_unsupported(model: HookedTransformer) -> str | None:
    """Why :func:`last_position_logits` must use the hooked forward for ``model``, or ``None``.

    Supported: every registered architecture (:mod:`interp_init.architectures`; a block
    class none registered raises ``ValueError``), standard (learned) positional embeddings, causal global multi-head attention (any
    ``n_heads``, any attention scale), blocks with an MLP,
    normalization ``LN``, ``LNPre``, ``RMS`` or ``RMSPre``, activation ``gelu``,
    ``gelu_new``, ``relu``, ``silu`` or ``gelu_fast``, fp32 or fp64 weights, one device,
    no hook attached.  Everything :class:`interp_init.ModelConfig` can build is supported.
    """
    cfg = model.cfg
    # a model without a final norm (neurips) has none in its config (its blocks carry their own)
    model_norms = _NORMS if get_architecture(architecture_of(model)).final_norm else (None,)
    checks: tuple[tuple[bool, str], ...] = (
        (cfg.positional_embedding_type != "standard", f"positional_embedding_type={cfg.positional_embedding_type!r}"),
        (cfg.attn_only, "attn_only=True"),
        (cfg.normalization_type not in model_norms, f"normalization_type={cfg.normalization_type!r}"),
        (cfg.act_fn not in _ACT_FNS, f"act_fn={cfg.act_fn!r}"),
        (cfg.n_key_value_heads is not None, "grouped-query attention (n_key_value_heads set)"),
        (bool(cfg.use_local_attn), "use_local_attn=True"),
        (bool(cfg.parallel_attn_mlp), "parallel_attn_mlp=True"),
        (bool(cfg.use_normalization_before_and_after), "use_normalization_before_and_after=True"),
        (bool(cfg.post_embedding_ln), "post_embedding_ln=True"),
        (bool(cfg.gated_mlp), "gated_mlp=True"),
        (cfg.num_experts is not None, "mixture of experts"),
        (bool(cfg.use_qk_norm), "use_qk_norm=True"),
        (cfg.clip_qkv is not None, "clip_qkv set"),
        (bool(getattr(cfg, "use_attention_sinks", False)), "use_attention_sinks=True"),
        (bool(cfg.use_logn_attn), "use_logn_attn=True"),
        (cfg.attention_dir != "causal", f"attention_dir={cfg.attention_dir!r}"),
        (_softcap(cfg.attn_scores_soft_cap), "attn_scores_soft_cap set"),
        (_softcap(cfg.output_logits_soft_cap), "output_logits_soft_cap set"),
        (cfg.n_devices != 1, f"n_devices={cfg.n_devices}"),
        (bool(cfg.load_in_4bit), "load_in_4bit=True"),
        (cfg.dtype not in _FLOAT_DTYPES, f"dtype={cfg.dtype}"),
        (
            cfg.original_architecture not in (None, "GPT2LMHeadModel", "neel"),
            f"original_architecture={cfg.original_architecture!r}",
        ),
        (model.tokenizer is not None and model.tokenizer.padding_side == "left", "a left-padding tokenizer"),
    )
    for failed, reason in checks:
        if failed:
            return reason
    if has_hooks(model):
        return "hooks are attached"
    return None


def _softcap(cap: float | None) -> bool:
    return cap is not None and cap > 0


def has_hooks(model: HookedTransformer) -> bool:
    """True if any hook point of ``model`` has a forward or backward hook attached."""
    return any(
        hp._forward_hooks or hp._forward_pre_hooks or hp._backward_hooks or hp._backward_pre_hooks
        for hp in model.hook_dict.values()
        if isinstance(hp, HookPoint)
    )


def _embedded(model: HookedTransformer, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos d_model"]:
    """The fused forwards' residual stream after the token and position embeddings, the
    tokens' shape and length checked against the model first."""
    if tokens.ndim != 2:
        raise ValueError(f"tokens must be a [batch, pos] integer tensor, got shape {tuple(tokens.shape)}")
    n_pos = tokens.shape[1]
    if n_pos > model.cfg.n_ctx:
        raise ValueError(f"tokens have {n_pos} positions but the model's n_ctx is {model.cfg.n_ctx}")
    tokens = tokens.to(model.embed.W_E.device)
    resid = F.embedding(tokens, model.embed.W_E) + model.pos_embed.W_pos[:n_pos]
    return resid


def last_position_logits(model: HookedTransformer, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch vocab"]:
    """``model(tokens)[:, -1]``, computed only where the last position needs it (module docstring).

    ``tokens`` may have any integer dtype: compact ids (``AnchorDataset.token_ids`` is
    uint8) are widened to int64, what the embedding lookup takes.
    """
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise ValueError(f"tokens must be integer token ids, got dtype {tokens.dtype}; pass e.g. AnchorDataset.tokens")
    if tokens.dtype != torch.int64:
        tokens = tokens.long()
    if fast_forward_unsupported(model) is not None:
        return model(tokens)[:, -1]
    resid = _embedded(model, tokens)
    arch = get_architecture(architecture_of(model))
    for block in model.blocks[:-1]:
        resid = arch.all_positions(block, resid)
    last = arch.last_position(model.blocks[-1], resid)
    if arch.final_norm:
        last = norm(model.ln_final, last)
    return torch.addmm(model.unembed.b_U, last, model.unembed.W_U)


def all_position_logits(
    model: HookedTransformer, tokens: Int[Tensor, "batch pos"], where: Tensor | None = None
) -> Float[Tensor, "batch pos vocab"] | Float[Tensor, "k vocab"]:
    """``model(tokens)``: the logits at every position, by the architectures' fused blocks
    (the hooked forward where :func:`fast_forward_unsupported` says so).  With ``where``
    (a ``[batch, pos]`` boolean mask), ``model(tokens)[where]``: the final norm and the
    unembedding run at those positions only (a sequence task's target positions: the
    unembedding over a large vocabulary at every position is most of a step's work)."""
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise ValueError(f"tokens must be integer token ids, got dtype {tokens.dtype}")
    if tokens.dtype != torch.int64:
        tokens = tokens.long()
    if fast_forward_unsupported(model) is not None:
        return model(tokens) if where is None else model(tokens)[where]
    resid = _embedded(model, tokens)
    arch = get_architecture(architecture_of(model))
    for block in model.blocks:
        resid = arch.all_positions(block, resid)
    if where is not None:
        resid = resid[where.to(resid.device)]
    if arch.final_norm:
        resid = norm(model.ln_final, resid)
    return resid @ model.unembed.W_U + model.unembed.b_U


def target_logits(
    model: HookedTransformer,
    tokens: Int[Tensor, "batch pos"],
    targets: Int[Tensor, "batch pos"],
    logits_fn: Callable[[HookedTransformer, Tensor], Tensor] = all_position_logits,
) -> tuple[Float[Tensor, "k vocab"], Int[Tensor, " k"]]:
    """The logits at a sequence task's target positions and their targets (``k`` of them).

    Exact shortcuts: the positions after the batch's last target are dropped (a causal
    model's earlier positions do not read them), and with :func:`all_position_logits` the
    unembedding runs at the target positions only (another ``logits_fn`` gives every
    position's logits, which are then selected)."""
    mask = targets != IGNORE
    keep = int(mask.any(0).nonzero().max()) + 1 if bool(mask.any()) else 1
    tokens, mask = tokens[:, :keep], mask[:, :keep]
    logits = (
        all_position_logits(model, tokens, where=mask)
        if logits_fn is all_position_logits
        else logits_fn(model, tokens)[mask]
    )
    return logits, targets[:, :keep][mask]


def sequence_loss(logits: Float[Tensor, "batch pos vocab"], targets: Int[Tensor, "batch pos"]) -> Float[Tensor, ""]:
    """The mean cross-entropy over the target positions (``targets`` :data:`~interp_init.tasks.base.IGNORE` elsewhere)."""
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


# ------------------------------------------------------------------ the training step


def make_optimizer(model: torch.nn.Module, train_cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW with ``train_cfg``'s hyperparameters; the fused kernel where torch has one
    (CPU and CUDA, float parameters), which does the same update in one pass."""
    params = list(model.parameters())
    fused = all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for p in params)
    return torch.optim.AdamW(
        params,
        lr=train_cfg.lr,
        betas=(train_cfg.beta1, train_cfg.beta2),
        eps=train_cfg.eps,
        weight_decay=train_cfg.weight_decay,
        fused=fused or None,
    )


@contextlib.contextmanager
def flush_denormals() -> Iterator[None]:
    """Treat subnormal floats (below 1.2e-38 in fp32) as zero while training on the CPU.

    Once a run has fit its data, some activations and gradients fall into the subnormal
    range, where x86 CPUs compute many times slower: a converged ``cpu``-preset run of the
    id-ood task stepped 5.6-7.2x faster with them flushed (benchmarks/README.md,
    ``bench_denormal.py``).  Values that small do not move an AdamW update (its epsilon is
    1e-8).  Restores torch's default (no flushing) on exit; usable as a decorator.
    """
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def autocast_context(device: torch.device | str, precision: str) -> contextlib.AbstractContextManager:
    """``torch.autocast`` to bfloat16 on ``device`` for ``precision="bf16"``; nothing for ``"fp32"``."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision == "bf16":
        return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
    raise ValueError(f"precision must be 'fp32' or 'bf16', got {precision!r}")


def train_step(
    model: HookedTransformer,
    optimizer: torch.optim.Optimizer,
    tokens: Int[Tensor, "batch pos"],
    targets: Int[Tensor, " batch"] | Int[Tensor, "batch pos"],
    *,
    logits_fn: Callable[[HookedTransformer, Tensor], Tensor] = last_position_logits,
    grad_clip: float = 1.0,
    precision: str = "fp32",
) -> Float[Tensor, ""]:
    """One optimization step on the last-position cross-entropy (``targets [batch]``), or on
    the target positions' (:func:`sequence_loss`, ``targets [batch, pos]`` with a ``logits_fn``
    of every position, :func:`all_position_logits`, computed by :func:`target_logits`); returns the loss (detached, on the
    device: reading it is left to the caller, so the step never waits on the device)."""
    with autocast_context(tokens.device, precision):
        if targets.ndim == 1:
            logits = logits_fn(model, tokens)
        else:  # the target positions only (target_logits): the mean over them is sequence_loss's
            logits, targets = target_logits(model, tokens, targets, logits_fn)
    loss = F.cross_entropy(logits.float(), targets)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip, foreach=True)
    optimizer.step()
    return loss.detach()
