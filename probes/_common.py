"""Input checks and a hook-based activation capture shared by the probe modules (any :class:`~probes.protocol.HookedModel`)."""

from __future__ import annotations

import difflib
import functools
import inspect
import numbers
import operator
import warnings
from collections.abc import Callable, Iterable, Mapping

import numpy as np
import torch
from jaxtyping import Bool
from torch import Tensor

from interp_init.tasks.anchor_pairs import ANCHORS
from interp_init.tasks.data import AnchorDataset
from probes.inputs import Inputs
from probes.protocol import HookedModel, check_model


def bidirectional(model: HookedModel) -> bool:
    """Whether ``model``'s attention reads every position (an encoder: ``cfg.attention_dir == "bidirectional"``) rather than only earlier ones."""
    return str(getattr(model.cfg, "attention_dir", "causal")) == "bidirectional"


def allowed_pairs(model: HookedModel, n_pos: int) -> Bool[Tensor, "query source"]:
    """``[query, source]`` bool: the pairs the model's attention can read (lower triangle when causal, all when bidirectional)."""
    full = torch.ones(n_pos, n_pos, dtype=torch.bool)
    return full if bidirectional(model) else full.tril()


def check_index(value: int, size: int, name: str, what: str, from_end: bool = True) -> int:
    """``value`` as an int in ``0..size-1`` or a ValueError naming ``name``.

    A negative ``value`` counts from the end, as Python's indexing does (``-1`` is
    ``size - 1``), unless ``from_end=False``.  Integer-like values (``numpy.int64(1)``, a
    one-element integer tensor or array) are accepted; floats (even ``1.0``), bools and
    strings are refused."""
    if size == 0:
        raise ValueError(f"{name}={value!r} cannot be chosen: there is no {what}")
    span = f"0..{size - 1}" + (f" (or -{size}..-1 from the end)" if from_end else "")
    try:
        if isinstance(value, bool):
            raise TypeError
        index = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer {what} in {span}, got {value!r}") from None
    if not (-size if from_end else 0) <= index < size:
        raise ValueError(f"{name}={index} is not a {what}: use {span}")
    return index % size if index < 0 else index


def check_indices(values: int | Iterable[int] | None, size: int, name: str, what: str) -> list[int]:
    """``None`` -> all of ``0..size-1``; an int or iterable of ints (negative ones counted
    from the end) -> their sorted unique list."""
    if values is None:
        if size == 0:
            raise ValueError(f"{name}: there is no {what} (none to choose from)")
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
    """``dataset`` if it is an :class:`~interp_init.tasks.data.AnchorDataset`, else a ValueError saying how to get one."""
    if not isinstance(dataset, AnchorDataset):
        raise ValueError(
            f"{name} must be an AnchorDataset (from interp_init.tasks.data.make_dataset or probes.input_grid), "
            f"got {type(dataset).__name__}; for raw token ids use probes.masked_run or probes.attention_patterns"
        )
    # What the probes read from it must mean what they take it for (cheap: two small tensors).
    pairs, keys, n_pos = dataset.anchor_pairs, dataset.key_positions, int(dataset.token_ids.shape[-1])
    if pairs.numel() and not set(pairs.unique().tolist()) <= set(ANCHORS):
        raise ValueError(
            f"{name}.anchor_pairs hold {sorted(set(pairs.unique().tolist()) - set(ANCHORS))}, which are not anchors {list(ANCHORS)}; build the dataset with interp_init.tasks.data.make_dataset or probes.input_grid"
        )
    if keys.numel() and (int(keys.min()) < 0 or int(keys.max()) + 2 >= n_pos):
        raise ValueError(
            f"{name}.key_positions lie in [{int(keys.min())}, {int(keys.max())}], but a key and its two anchors must fit in the {n_pos}-token sequence (positions 0..{n_pos - 3}); build the dataset with interp_init.tasks.data.make_dataset or probes.input_grid"
        )
    return dataset


def check_layer(model: HookedModel, layer: int, name: str = "layer") -> int:
    check_model(model)
    return check_index(layer, model.cfg.n_layers, name, f"layer of this {model.cfg.n_layers}-layer model")


def _act_name(name: str, layer: int | None = None) -> str:
    from transformer_lens.utilities import get_act_name

    return get_act_name(name, layer)


def resolve_names(names_filter: object, model: HookedModel) -> list[str]:
    """Hook names from a names filter as TransformerLens' ``run_with_cache(names_filter=...)``
    takes it: ``None`` (every hook point), a hook name or short name (``"resid_post"``: that
    activation in every layer, via ``transformer_lens.utils.get_act_name``), ``(short name,
    layer)`` (a negative layer counts from the end), a list of these, or a callable
    ``name -> bool`` over the model's hook points.  An empty list picks none."""
    if names_filter is None:
        return list(model.hook_dict)
    names = names_filter
    if callable(names) and not isinstance(names, str):
        return [name for name in model.hook_dict if names(name)]
    if isinstance(names, str) or (
        isinstance(names, tuple) and len(names) == 2 and isinstance(names[0], str) and not isinstance(names[1], str)
    ):
        names = [names]
    elif not isinstance(names, Iterable):
        raise ValueError(
            f"names_filter must be hook names, short names (e.g. 'resid_post'), (name, layer) pairs, a callable filter or None (every hook point), got {names!r}"
        )
    out: list[str] = []
    unknown = []
    for name in names:
        found = _expand(name, model)
        out += found
        if not found:
            unknown.append(name)
    if unknown:
        close = [
            m for n in unknown if isinstance(n, str) for m in difflib.get_close_matches(n, list(model.hook_dict), n=2)
        ]
        example = (
            close
            or [f"blocks.0.{n}" for n in ("hook_resid_pre", "hook_resid_post") if f"blocks.0.{n}" in model.hook_dict][
                :1
            ]
        )
        raise ValueError(
            f"unknown hook name(s) {unknown}: this model has no such hook points; valid names are the model's "
            f"hook_dict keys{', e.g. ' + ', '.join(repr(e) for e in dict.fromkeys(example)) if example else ''}, short names such as 'resid_post', or a callable"
        )
    return list(dict.fromkeys(out))


def is_filter_function(names_filter: object) -> bool:
    """Whether ``names_filter`` picks from the hook points that exist (``None`` or a callable) rather than naming them."""
    return names_filter is None or (callable(names_filter) and not isinstance(names_filter, str))


def renamed_keyword(old: str, new: str, old_none: object) -> Callable[[Callable], Callable]:
    """A decorator keeping the keyword ``old=`` working as ``new=``, with a ``DeprecationWarning``.

    ``old=None`` is passed on as ``old_none`` (what ``None`` meant under the old name);
    ``old=`` and ``new=`` together are a one-line ValueError."""

    def decorate(function: Callable) -> Callable:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def wrapper(*args: object, **kwargs: object) -> object:
            if old in kwargs:
                value = kwargs.pop(old)
                if new in kwargs or new in signature.bind_partial(*args).arguments:
                    raise ValueError(
                        f"{function.__name__} got both {new}= and {old}=, its deprecated name: pass {new}= only"
                    )
                warnings.warn(
                    f"{function.__name__}({old}=...) is deprecated and will be removed in interp-init 0.2: pass {new}=... "
                    f"(TransformerLens' name{f'; {old}=None is {new}={old_none!r}' if value is None else ''})",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = old_none if value is None else value
            return function(*args, **kwargs)

        return wrapper

    return decorate


def _expand(name: object, model: HookedModel) -> list[str]:
    if isinstance(name, tuple) and len(name) == 2 and isinstance(name[0], str):
        layer = name[1]
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
            return []
        layer = int(layer) + (model.cfg.n_layers if int(layer) < 0 else 0)
        full = _act_name(name[0], layer)
        return [full] if full in model.hook_dict else []
    if not isinstance(name, str):
        return []
    if name in model.hook_dict:
        return [name]
    if "." in name:
        return []
    plain = _act_name(name)
    if plain in model.hook_dict:
        return [plain]
    return [full for layer in range(model.cfg.n_layers) if (full := _act_name(name, layer)) in model.hook_dict]


def capture_hooks(names_filter: object, model: HookedModel, store: dict[str, Tensor]) -> list[tuple[str, Callable]]:
    """Forward hooks that copy the activations ``names_filter`` picks (see :func:`resolve_names`) into ``store`` (detached), keyed by hook name.

    The key is the name asked for (or its full name for a short one), not the hook's
    ``hook.name``: on TransformerLens 4.x an old name such as ``blocks.1.hook_resid_post``
    is an alias, and its hook point reports its new name (``blocks.1.hook_out``)."""

    def saver(name: str) -> Callable:
        def save(activation: Tensor, hook) -> None:
            store[name] = activation.detach()

        return save

    return [(n, saver(n)) for n in resolve_names(names_filter, model)]


class _Stop(Exception):
    """Raised by the last hook a probe needs: the rest of the forward pass is not run."""


def forward_kwargs(model: HookedModel, attention_mask: Tensor | None) -> dict:
    """The keyword that passes a padding mask to ``model`` (``one_zero_attention_mask`` for a ``HookedEncoder``)."""
    if attention_mask is None:
        return {}
    encoder = "one_zero_attention_mask" in inspect.signature(model.forward).parameters  # type: ignore[attr-defined]
    return {"one_zero_attention_mask" if encoder else "attention_mask": attention_mask.to(model.cfg.device)}


def run_hooked(
    model: HookedModel,
    inputs: Inputs,
    hooks: list[tuple[str, Callable]],
    stop_after: str | None = None,
) -> Tensor | None:
    """Run ``model`` on ``inputs`` with ``hooks`` (attached only inside ``model.hooks``); the logits.

    With ``stop_after`` (a hook name) the run ends once that hook point has run (what
    ``run_with_cache(stop_at_layer=...)`` does, at any hook point and on both
    TransformerLens lines): no later layer, no unembedding; returns ``None``."""
    fwd = list(hooks)
    if stop_after is not None:

        def stop(activation: Tensor, hook) -> None:
            raise _Stop

        fwd.append((stop_after, stop))
    try:
        with torch.no_grad(), model.hooks(fwd_hooks=fwd):
            return model(inputs.tokens, return_type="logits", **forward_kwargs(model, inputs.attention_mask))
    except _Stop:
        return None


def make_cache(store: dict[str, Tensor], model: HookedModel) -> Mapping[str, Tensor]:
    """``store`` as a TransformerLens ``ActivationCache`` (indexing ``cache["resid_post", 1]``,
    ``accumulated_resid``, ``decompose_resid``) where the installed line offers one, else the dict."""
    try:
        from transformer_lens import ActivationCache

        return ActivationCache(store, model)
    except Exception:  # noqa: BLE001 - a line without ActivationCache keeps the plain mapping
        return store
