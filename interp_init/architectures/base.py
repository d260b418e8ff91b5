"""What an architecture is, and the registry that names them.

An :class:`Architecture` is one frozen object that says everything the toolkit needs to
build, initialize and train a model with that block: the block class (a subclass of
TransformerLens' ``TransformerBlock``, or that class itself), the init convention, the
bias rule, whether the model has a final LayerNorm, the MLP activation, the
normalizations it accepts, and its last-position forward for the fast training path
(``all_positions`` for every block but the last, ``last_position`` for the last one;
:mod:`interp_init.architectures.kernels` has the fused pieces they are made of).

:func:`register_architecture` adds one to the registry by name (SAELens'
``register_sae_class`` style); every lookup goes through :func:`get_architecture`, which
refuses an unknown name with the list of registered ones.  The built-in three are
registered in :mod:`interp_init.architectures` (one line each).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from jaxtyping import Float
from torch import Tensor
from transformer_lens.components import TransformerBlock

__all__ = [
    "BIAS_RULES",
    "Architecture",
    "architecture_names",
    "get_architecture",
    "refuse_extras",
    "register_architecture",
    "registered",
    "unregister_architecture",
]

#: ``"zero"``: zero bias parameters; ``"default"``: parameters drawn by PyTorch's rule for a
#: linear layer, U(-1/sqrt(fan_in), 1/sqrt(fan_in)); ``"none"``: the attention and MLP have
#: no biases (zero buffers) and the unembedding's bias follows ``"default"``.
BIAS_RULES: tuple[str, ...] = ("zero", "default", "none")
_CONVENTIONS = ("reference", "fan_in")
_ACT_FNS = ("gelu", "gelu_new", "relu", "silu", "gelu_fast")
_NORMALIZATIONS = ("LN", "LNPre", "RMS", "RMSPre")

BlockForward = Callable[[TransformerBlock, Float[Tensor, "batch pos d_model"]], Tensor]


@dataclass(frozen=True)
class Architecture:
    """One transformer architecture, declared in one place (see the module docstring).

    Attributes:
        name: the name configs and the command line use (``ModelConfig.architecture``).
        description: one line for the docs and ``--help``.
        block: the block class; ``TransformerBlock`` keeps TransformerLens' own.
        convention: the init convention (``"reference"`` or ``"fan_in"``,
            :class:`interp_init.InitConfig`).
        biases: the bias rule, one of :data:`BIAS_RULES`.
        final_norm: whether the model ends with ``ln_final`` before the unembedding.
        activation: the MLP activation when ``ModelConfig.act_fn`` is not given.
        all_positions: ``f(block, resid[batch, pos, d]) -> resid_post[batch, pos, d]``,
            the block at every position with fused kernels; equal to the block's forward.
        last_position: ``f(block, resid[batch, pos, d]) -> resid_post[batch, d]``, the
            block's output at the last position only; equal to ``block(resid)[:, -1]``.
        normalizations: the ``normalization_type`` values it accepts (the first is used
            by default).
    """

    name: str
    description: str
    block: type[TransformerBlock]
    convention: str
    biases: str
    final_norm: bool
    activation: str
    all_positions: BlockForward
    last_position: BlockForward
    normalizations: tuple[str, ...] = ("LN",)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or not self.name.replace("-", "_").isidentifier():
            raise ValueError(f"an architecture's name must be a word such as 'parallel', got {self.name!r}")
        if not (isinstance(self.block, type) and issubclass(self.block, TransformerBlock)):
            raise ValueError(
                f"architecture {self.name!r}: block must be a TransformerBlock subclass, got {self.block!r}"
            )
        if self.convention not in _CONVENTIONS:
            raise ValueError(
                f"architecture {self.name!r}: convention must be one of {_CONVENTIONS}, got {self.convention!r}"
            )
        if self.biases not in BIAS_RULES:
            raise ValueError(f"architecture {self.name!r}: biases must be one of {BIAS_RULES}, got {self.biases!r}")
        if self.activation not in _ACT_FNS:
            raise ValueError(
                f"architecture {self.name!r}: activation must be one of {_ACT_FNS}, got {self.activation!r}"
            )
        if not isinstance(self.final_norm, bool):
            raise ValueError(f"architecture {self.name!r}: final_norm must be True or False, got {self.final_norm!r}")
        if not self.normalizations or not set(self.normalizations) <= set(_NORMALIZATIONS):
            raise ValueError(
                f"architecture {self.name!r}: normalizations must be a non-empty subset of {_NORMALIZATIONS}"
            )
        for field_name in ("all_positions", "last_position"):
            if not callable(getattr(self, field_name)):
                raise ValueError(f"architecture {self.name!r}: {field_name} must be a function f(block, resid)")


_REGISTRY: dict[str, Architecture] = {}


def register_architecture(architecture: Architecture) -> Architecture:
    """Add ``architecture`` to the registry under its name and return it.

    A name already registered to another architecture, or a block class already used by
    another one, is refused (each model's blocks must say which architecture they are)."""
    if not isinstance(architecture, Architecture):
        raise ValueError(f"register_architecture takes an Architecture, got {type(architecture).__name__}")
    known = _REGISTRY.get(architecture.name)
    if known is not None and known != architecture:
        raise ValueError(f"an architecture named {architecture.name!r} is already registered; choose another name")
    for other in _REGISTRY.values():
        if other.name != architecture.name and other.block is architecture.block:
            raise ValueError(
                f"architecture {architecture.name!r} uses the block class {architecture.block.__name__} of {other.name!r}; give it its own"
            )
    _REGISTRY[architecture.name] = architecture
    return architecture


def unregister_architecture(name: str) -> None:
    """Remove the architecture ``name`` from the registry (an unknown name is an error)."""
    get_architecture(name)
    del _REGISTRY[name]


@contextlib.contextmanager
def registered(architecture: Architecture) -> Iterator[Architecture]:
    """Register ``architecture`` for the duration of a ``with`` block (tests, experiments);
    one registered before the block stays registered after it."""
    already = _REGISTRY.get(architecture.name) is architecture
    register_architecture(architecture)
    try:
        yield architecture
    finally:
        if not already:
            _REGISTRY.pop(architecture.name, None)


def architecture_names() -> tuple[str, ...]:
    """The names of the registered architectures, in registration order."""
    return tuple(_REGISTRY)


def get_architecture(name: str) -> Architecture:
    """The registered architecture ``name``; a ``ValueError`` naming the registered ones otherwise."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"architecture must be one of {architecture_names()}, got {name!r}; "
            "a new one is registered with interp_init.architectures.register_architecture (docs/architectures.md)"
        ) from None


def architecture_of_block(block: TransformerBlock) -> Architecture:
    """The registered architecture whose block class ``block`` is (exactly)."""
    for architecture in _REGISTRY.values():
        if type(block) is architecture.block:
            return architecture
    raise ValueError(
        f"the block class {type(block).__name__} is no registered architecture's (registered: {architecture_names()}); "
        "register it with interp_init.architectures.register_architecture"
    )


def refuse_extras(args: tuple, kwargs: dict) -> None:
    """The project's blocks support neither a key-value cache, attention masks nor
    shortformer positions (none of which the tasks use): refuse them rather than ignore them."""
    given = [v for v in (*args, *kwargs.values()) if v is not None]
    if given:
        raise ValueError(
            "this architecture's blocks take no key-value cache, attention mask or shortformer "
            "positions; run the model on [batch, pos] tokens without them"
        )
