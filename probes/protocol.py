"""What the probes use of a model, on both TransformerLens lines.

The probes read a model through :class:`HookedModel`, a structural protocol: a
TransformerLens 3.x ``HookedTransformer`` and a 4.x ``TransformerBridge`` (from
``TransformerBridge.boot_native`` or a Hugging Face model through an adapter) both match
it, and nothing here imports either class, so ``probes`` imports where only one line is
installed.

What a probe needs, and where a 4.x model differs:

* ``cfg``: ``n_layers``, ``n_heads``, ``d_model``, ``d_vocab``, ``n_ctx``, ``device``
  (``attn_only``, ``parallel_attn_mlp``, ``positional_embedding_type`` where present).
* ``hook_dict`` and ``hooks(fwd_hooks=...)``: the hook points by name, hooks attached only
  inside the context.  On 4.x the old names (``blocks.1.hook_resid_post``) are aliases of
  new hook points, and inside a hook function ``hook.name`` reports the new name
  (``blocks.1.hook_out``): the probes key every capture by the name they asked for.
* ``model(tokens, return_type="logits")``.
* Weights: ``W_E``, ``W_U``, ``W_pos`` (learned positions only) on the model,
  ``blocks[l].attn.W_Q/W_K/W_V/W_O`` (``[head, d_model, d_head]`` and
  ``[head, d_head, d_model]``) and ``blocks[l].mlp.W_in/W_out``.

A model that lacks a hook point or a weight a probe needs, or whose hook point does not run
in the forward pass, gets a one-line ``ValueError`` naming it (:func:`require_hooks`,
:func:`check_fired`, :func:`read_weight`), not an error from deep inside TransformerLens and
not a silently unmasked run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from torch import Tensor

#: The protocol's members, checked by :func:`check_model`.
REQUIRED = ("cfg", "hook_dict", "hooks", "blocks")
CFG_FIELDS = ("n_layers", "n_heads", "d_model", "d_vocab", "n_ctx", "device")


@runtime_checkable
class HookedModel(Protocol):
    """A TransformerLens model as the probes use it (3.x ``HookedTransformer``, 4.x ``TransformerBridge``)."""

    @property
    def cfg(self) -> Any: ...

    @property
    def hook_dict(self) -> Mapping[str, Any]: ...

    @property
    def blocks(self) -> Any: ...

    def hooks(
        self, fwd_hooks: list[tuple[str, Callable]] = ..., *args: Any, **kwargs: Any
    ) -> AbstractContextManager: ...

    def __call__(self, tokens: Tensor, *args: Any, **kwargs: Any) -> Any: ...


def check_model(model: object) -> HookedModel:
    """``model`` if it has what the probes read, else a one-line ValueError naming what is missing."""
    missing = [name for name in REQUIRED if not hasattr(model, name)]
    if not missing:
        missing = [f"cfg.{name}" for name in CFG_FIELDS if not hasattr(model.cfg, name)]  # type: ignore[attr-defined]
    if missing:
        raise ValueError(
            f"the probes need a TransformerLens model (3.x HookedTransformer or 4.x TransformerBridge); "
            f"this {type(model).__name__} has no {', '.join(missing)}"
        )
    if hasattr(model, "parameters") and any(param.is_meta for param in model.parameters()):  # type: ignore[attr-defined]
        raise ValueError(
            "the model is on the meta device (shapes without data): nothing can be probed; load or build it on a real device (device='cpu')"
        )
    return model  # type: ignore[return-value]


def require_hooks(model: HookedModel, names: Iterable[str], probe: str) -> None:
    """A one-line ValueError where ``model`` has no hook point of one of ``names``."""
    missing = [name for name in names if name not in model.hook_dict]
    if missing:
        raise ValueError(
            f"{probe} needs the hook point(s) {', '.join(missing)}, which this {type(model).__name__} does not have "
            f"(its hook names are model.hook_dict's keys)"
        )


def read_weight(owner: object, attribute: str, where: str, model: object) -> Tensor:
    """``owner.attribute`` detached, or a one-line ValueError saying that ``model`` has no ``where``.

    TransformerLens 4.x computes weights such as ``W_Q`` from the wrapped module on access;
    a module that cannot supply one raises there (AttributeError, NotImplementedError, ...),
    which becomes this one line."""
    try:
        value = getattr(owner, attribute)
    except Exception as error:  # noqa: BLE001 - whatever the adapter raises, the user gets one line
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"this {type(model).__name__} has no {where} ({reason})") from None
    if not isinstance(value, Tensor):
        raise ValueError(f"this {type(model).__name__} has no {where} (found a {type(value).__name__}, not a tensor)")
    return value.detach()


def check_fired(fired: Iterable[str], names: Iterable[str], probe: str) -> None:
    """A one-line ValueError where a hook point of ``names`` exists but did not run in the forward pass.

    A 4.x adapter may list a hook point its module never calls (an attention that does not
    form the pattern explicitly): a mask there would change nothing, a capture would be empty."""
    fired = set(fired)
    silent = [name for name in dict.fromkeys(names) if name not in fired]
    if silent:
        raise ValueError(
            f"{probe}: the hook point(s) {', '.join(silent)} did not run in this model's forward pass, "
            "so nothing was masked or captured there"
        )
