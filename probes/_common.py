"""Input checks and a hook-based activation capture shared by the probe modules."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence

import torch
from jaxtyping import Int
from torch import Tensor
from transformer_lens import HookedTransformer


def as_tokens(tokens: Tensor | Sequence[int] | Sequence[Sequence[int]], model: HookedTransformer) -> Int[Tensor, "batch pos"]:
    """``tokens`` as an int64 ``[batch, pos]`` tensor on the model's device (a 1-D input is one sample)."""
    tokens = torch.as_tensor(tokens)
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.ndim != 2 or tokens.shape[0] == 0 or tokens.shape[1] == 0:
        raise ValueError(f"tokens must be a non-empty [batch, pos] (or [pos]) tensor of token ids, got shape {tuple(tokens.shape)}")
    if tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
        raise ValueError(f"tokens must hold integer token ids, got dtype {tokens.dtype}")
    if int(tokens.min()) < 0 or int(tokens.max()) >= model.cfg.d_vocab:
        raise ValueError(f"token ids must lie in 0..{model.cfg.d_vocab - 1} (the model's vocabulary), got {int(tokens.min())}..{int(tokens.max())}")
    if tokens.shape[1] > model.cfg.n_ctx:
        raise ValueError(f"sequences of {tokens.shape[1]} tokens exceed the model's context n_ctx={model.cfg.n_ctx}")
    return tokens.long().to(model.cfg.device)


def check_index(value: int, size: int, name: str, what: str) -> int:
    """``value`` as an int in ``0..size-1`` or a ValueError naming ``name``."""
    try:
        if isinstance(value, bool):
            raise TypeError
        index = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer {what} in 0..{size - 1}, got {value!r}") from None
    if not 0 <= index < size:
        raise ValueError(f"{name}={index} is not a {what}: use 0..{size - 1}")
    return index


def check_indices(values: int | Iterable[int] | None, size: int, name: str, what: str) -> list[int]:
    """``None`` -> all of ``0..size-1``; an int or iterable of ints -> their sorted unique list."""
    if values is None:
        return list(range(size))
    if not isinstance(values, Iterable) or (isinstance(values, Tensor) and values.ndim == 0):
        return [check_index(values, size, name, what)]
    out = sorted({check_index(v, size, name, what) for v in values})
    if not out:
        raise ValueError(f"{name} is empty; pass None for all {what}s (0..{size - 1})")
    return out


def check_layer(model: HookedTransformer, layer: int, name: str = "layer") -> int:
    return check_index(layer, model.cfg.n_layers, name, f"layer of this {model.cfg.n_layers}-layer model")


def capture_hooks(names: Iterable[str], model: HookedTransformer, store: dict[str, Tensor]) -> list[tuple[str, Callable]]:
    """Forward hooks that copy the activations ``names`` into ``store`` (detached).

    ``names`` is an iterable of hook names; one name given as a plain string is taken as
    that one name (not as its characters)."""
    names = list(dict.fromkeys([names] if isinstance(names, str) else names))
    unknown = [n for n in names if n not in model.hook_dict]
    if unknown:
        raise ValueError(f"unknown hook name(s) {unknown}; valid names are the model's hook_dict keys, e.g. 'blocks.0.hook_resid_mid'")

    def save(activation: Tensor, hook) -> None:  # noqa: ANN001 - TransformerLens HookPoint
        store[hook.name] = activation.detach()

    return [(n, save) for n in names]


def run_capturing(model: HookedTransformer, tokens: Tensor, names: Iterable[str]) -> tuple[Tensor, dict[str, Tensor]]:
    """Logits and the activations ``names`` of a plain forward pass (hooks only inside ``model.hooks``)."""
    store: dict[str, Tensor] = {}
    hooks = capture_hooks(names, model, store)
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        logits = model(tokens, return_type="logits")
    return logits, store
