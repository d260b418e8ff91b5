"""Input checks and a hook-based activation capture shared by the probe modules (any :class:`~probes.protocol.HookedModel`)."""

from __future__ import annotations

import difflib
import numbers
import operator
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor

from interp_init.data import AnchorDataset
from interp_init.tasks import ANCHORS
from probes.protocol import HookedModel, check_fired, check_model


def as_tokens(tokens: Tensor | Sequence[int] | Sequence[Sequence[int]], model: HookedModel) -> Int[Tensor, "batch pos"]:
    """``tokens`` as an int64 ``[batch, pos]`` tensor on the model's device (a 1-D input is one sample)."""
    check_model(model)
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
    """``value`` as an int in ``0..size-1`` or a ValueError naming ``name``.

    Integer-like values (``numpy.int64(1)``, a one-element integer tensor or array) are
    accepted; floats (even ``1.0``), bools and strings are refused."""
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
    if not isinstance(values, Iterable) or (isinstance(values, (Tensor, np.ndarray)) and values.ndim == 0):
        return [check_index(values, size, name, what)]
    out = sorted({check_index(v, size, name, what) for v in values})
    if not out:
        raise ValueError(f"{name} is empty; pass None for all of 0..{size - 1}")
    return out


def check_int(value: object, name: str, low: int = 0) -> int:
    """``value`` as an int >= ``low`` (integer-like values accepted, floats and bools refused)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}") from None
    if number < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {number}")
    return number


def check_number(value: object, name: str) -> float:
    """``value`` as a finite float (ints, floats, numpy scalars; not bools, strings or tensors)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def check_finite(values: Tensor | np.ndarray, name: str, hint: str = "") -> None:
    """A ValueError naming ``name`` where ``values`` hold NaN or infinite entries."""
    finite = bool(torch.isfinite(values).all()) if isinstance(values, Tensor) else bool(np.isfinite(values).all())
    if not finite:
        raise ValueError(f"NaN or infinite entries in {name}{hint}: no analysis of them is defined (a diverged model?)")


def check_dataset(dataset: object, name: str = "dataset") -> AnchorDataset:
    """``dataset`` if it is an :class:`~interp_init.data.AnchorDataset`, else a ValueError saying how to get one."""
    if not isinstance(dataset, AnchorDataset):
        raise ValueError(
            f"{name} must be an AnchorDataset (from interp_init.data.make_dataset or probes.input_grid), "
            f"got {type(dataset).__name__}; for raw token ids use probes.masked_run or probes.attention_patterns"
        )
    # What the probes read from it must mean what they take it for (cheap: two small tensors).
    pairs, keys, n_pos = dataset.anchor_pairs, dataset.key_positions, int(dataset.token_ids.shape[-1])
    if pairs.numel() and not set(pairs.unique().tolist()) <= set(ANCHORS):
        raise ValueError(f"{name}.anchor_pairs hold {sorted(set(pairs.unique().tolist()) - set(ANCHORS))}, which are not anchors {list(ANCHORS)}; build the dataset with interp_init.data.make_dataset or probes.input_grid")
    if keys.numel() and (int(keys.min()) < 0 or int(keys.max()) + 2 >= n_pos):
        raise ValueError(f"{name}.key_positions lie in [{int(keys.min())}, {int(keys.max())}], but a key and its two anchors must fit in the {n_pos}-token sequence (positions 0..{n_pos - 3}); build the dataset with interp_init.data.make_dataset or probes.input_grid")
    return dataset


def check_layer(model: HookedModel, layer: int, name: str = "layer") -> int:
    check_model(model)
    return check_index(layer, model.cfg.n_layers, name, f"layer of this {model.cfg.n_layers}-layer model")


def capture_hooks(names: Iterable[str] | str | None, model: HookedModel, store: dict[str, Tensor]) -> list[tuple[str, Callable]]:
    """Forward hooks that copy the activations ``names`` into ``store`` (detached), keyed by the name asked for.

    ``names`` is an iterable of hook names; one name given as a plain string is taken as
    that one name (not as its characters); ``None`` is no name.  The key is the name given,
    not the hook's ``hook.name``: on TransformerLens 4.x an old name such as
    ``blocks.1.hook_resid_post`` is an alias, and its hook point reports its new name
    (``blocks.1.hook_out``)."""
    if names is None:
        names = []
    elif isinstance(names, str):
        names = [names]
    elif not isinstance(names, Iterable):
        raise ValueError(f"names must be hook names (a string or a list of strings), got {names!r}")
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if not isinstance(n, str) or n not in model.hook_dict]
    if unknown:
        close = [m for n in unknown if isinstance(n, str) for m in difflib.get_close_matches(n, list(model.hook_dict), n=2)]
        example = close or [f"blocks.0.{n}" for n in ("hook_resid_pre", "hook_resid_post") if f"blocks.0.{n}" in model.hook_dict][:1]
        raise ValueError(
            f"unknown hook name(s) {unknown}: this model has no such hook points; valid names are the model's "
            f"hook_dict keys{', e.g. ' + ', '.join(repr(e) for e in dict.fromkeys(example)) if example else ''}"
        )

    def saver(name: str) -> Callable:
        def save(activation: Tensor, hook) -> None:  # noqa: ANN001 - TransformerLens HookPoint
            store[name] = activation.detach()

        return save

    return [(n, saver(n)) for n in names]


def run_capturing(model: HookedModel, tokens: Tensor, names: Iterable[str]) -> tuple[Tensor, dict[str, Tensor]]:
    """Logits and the activations ``names`` of a plain forward pass (hooks only inside ``model.hooks``)."""
    store: dict[str, Tensor] = {}
    hooks = capture_hooks(names, model, store)
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        logits = model(tokens, return_type="logits")
    check_fired(store, [name for name, _ in hooks], "capturing activations")
    return logits, store
