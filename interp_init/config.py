"""Frozen, validated configuration for the model architecture and its initialization.

One dataclass per concern (nanoGPT's ``GPTConfig`` style): :class:`ModelConfig` says
what network is built, :class:`InitConfig` how its weights are drawn.  Both validate in
``__post_init__`` and raise ``ValueError`` naming the field, the value and what is
allowed.  Neither touches global state.  The defaults are the papers' values; every
field's meaning and choices are recorded with it (:func:`option`), and the command line's
flags and help are built from them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, get_args

from interp_init.tasks.anchor_pairs import SEQ_LEN, VOCAB_SIZE

ActFn = Literal["gelu", "gelu_new", "relu", "silu", "gelu_fast"]
ACT_FNS: tuple[ActFn, ...] = get_args(ActFn)
Normalization = Literal["LN", "LNPre", "RMS", "RMSPre"]
NORMALIZATIONS: tuple[Normalization, ...] = get_args(Normalization)

Convention = Literal["reference", "fan_in"]
#: What d_in means in the gamma init (:attr:`InitConfig.convention`): ``reference`` (the journal's
#: code: d_model for every matrix) or ``fan_in`` (each matrix's true input width: the NeurIPS experiments).
CONVENTIONS: tuple[Convention, ...] = get_args(Convention)


def option(default: Any, help: str, choices: tuple[str, ...] | None = None) -> Any:
    """A config field with its default, what it means, and its allowed values (if a list):
    the command line's ``--flag`` and help are made from these."""
    return field(default=default, metadata={"help": help, "choices": choices})


def check_int(name: str, value: Any, minimum: int = 1, hint: str = "", *, optional: bool = False) -> None:
    """Raise a one-line ``ValueError`` naming ``name`` unless ``value`` is an integer (not a bool)
    >= ``minimum`` (or None, where ``optional``); ``hint`` follows the bound in the message."""
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}{hint}, got {value!r}")


def check_positive_finite(name: str, value: Any) -> None:
    """Raise ``ValueError`` unless ``value`` is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of the decoder-only transformer (docs/science.md).

    ``architecture`` names a registered architecture (:mod:`interp_init.architectures`):
    built in are ``"neurips"`` (post-LN, ReLU, no attention/MLP biases, no final
    LayerNorm; the NeurIPS 2024 experiments' model, the default), ``"journal"`` (pre-LN
    with only the query normalized, biases; the journal paper's released model) and
    ``"standard"`` (TransformerLens' pre-LN GPT-2 block); an unregistered name is refused
    (checking it imports the registry, hence torch). ``act_fn`` defaults to the
    architecture's (ReLU for ``neurips``, GELU otherwise); ``normalization_type`` must be
    one the architecture accepts (other than ``"LN"``: ``standard`` only). Learned positional embeddings, causal attention. Paper sizes:
    ``d_model=400``, ``d_mlp=1200``, one head with ``d_head=200``.
    """

    architecture: str = option(
        "neurips",
        "Transformer block, a registered architecture: neurips (post-LN, ReLU, no attention or MLP biases: the NeurIPS 2024 model), journal (pre-LN on the query only, with biases: the journal paper's model), standard (TransformerLens' GPT-2 block), or one registered with interp_init.architectures.register_architecture (docs/architectures.md). Default: the task's paper's (neurips for symmetric and complexity, journal for id-ood).",
    )
    n_layers: int = option(2, "Number of transformer blocks.")
    d_model: int = option(400, "Width of the residual stream (the embedding size).")
    n_heads: int = option(1, "Attention heads per layer.")
    d_head: int = option(200, "Width of each attention head (its query, key and value size).")
    d_mlp: int = option(1200, "Hidden width of each MLP.")
    d_vocab: int = option(VOCAB_SIZE, "Vocabulary size; the anchor tasks use tokens 0..200, so 201.")
    n_ctx: int = option(SEQ_LEN, "Context length in tokens; the anchor tasks' sequences have 9.")
    act_fn: ActFn | None = option(
        None, "MLP activation. Default: the architecture's (relu for neurips, gelu otherwise).", choices=ACT_FNS
    )
    normalization_type: Normalization = option(
        "LN",
        "Normalization layer: LayerNorm (LN) or its variants; other than LN for --architecture standard only.",
        choices=NORMALIZATIONS,
    )

    def __post_init__(self) -> None:
        arch = self.arch  # an unregistered name raises here
        for name in ("n_layers", "d_model", "n_heads", "d_head", "d_mlp", "d_vocab", "n_ctx"):
            check_int(name, getattr(self, name))
        if self.act_fn is not None and self.act_fn not in ACT_FNS:
            raise ValueError(f"act_fn must be one of {ACT_FNS}, got {self.act_fn!r}")
        if self.normalization_type not in NORMALIZATIONS:
            raise ValueError(f"normalization_type must be one of {NORMALIZATIONS}, got {self.normalization_type!r}")
        if self.normalization_type not in arch.normalizations:
            raise ValueError(
                f"normalization_type {self.normalization_type!r} is not one the {self.architecture!r} architecture "
                f"accepts ({arch.normalizations}); other than 'LN' is for architecture 'standard' only"
            )

    @classmethod
    def from_dict(cls, data: Any, where: str = "model config") -> ModelConfig:
        """Build from a ``config.json`` section. A section without ``architecture`` was
        written before there was a choice and describes the ``"standard"`` block."""
        if isinstance(data, dict) and "architecture" not in data:
            data = {**data, "architecture": "standard"}
        return config_from_dict(cls, data, where)

    @property
    def arch(self) -> Any:
        """The registered :class:`interp_init.architectures.Architecture` of this config."""
        from interp_init.architectures import get_architecture  # the registry imports torch

        return get_architecture(self.architecture)

    @property
    def activation(self) -> str:
        """The MLP activation: ``act_fn``, or the architecture's own where it is ``None``."""
        return self.act_fn or self.arch.activation

    @property
    def d_attn(self) -> int:
        """Width of the merged attention heads, ``n_heads * d_head``."""
        return self.n_heads * self.d_head

    def to_hooked_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``transformer_lens.HookedTransformerConfig``."""
        return dict(
            n_layers=self.n_layers,
            d_model=self.d_model,
            n_heads=self.n_heads,
            d_head=self.d_head,
            d_mlp=self.d_mlp,
            d_vocab=self.d_vocab,
            n_ctx=self.n_ctx,
            act_fn=self.activation,
            # a model without a final norm (neurips) has none in its config; its blocks make their own
            normalization_type=self.normalization_type if self.arch.final_norm else None,
            positional_embedding_type="standard",
            attn_only=False,
            default_prepend_bos=False,
        )


#: float32's smallest normal number: a weight std below it draws zeros.
FLOAT32_TINY = 2.0**-126


def check_init_scale(model: ModelConfig, init: InitConfig) -> None:
    """Refuse a gamma whose std ``d_in ** -gamma`` would be below float32's smallest normal
    number for one of the model's widths (the weights would be drawn as zeros), naming
    the largest gamma that the model's widest layer takes."""
    widest = max(model.d_model, model.n_heads * model.d_head, model.d_mlp)
    if widest <= 1:
        return
    limit = -math.log(FLOAT32_TINY / math.sqrt(2 * model.n_layers)) / math.log(widest)
    for group, gamma in init.group_gammas.items():
        if gamma > limit:
            name = "gamma" if gamma == init.gamma else f"gamma_{group}"
            raise ValueError(
                f"{name} must be a number in (0, {limit:.3g}] for this model (above, std = d_in^-gamma falls below float32's "
                f"smallest number at d_in {widest}: the weights would be zeros), got {gamma!r}; the papers use 0.1-1.5"
            )


@dataclass(frozen=True)
class InitConfig:
    """Gamma-scaled initialization (docs/science.md): weights ~ N(0, std = d_in ** -gamma).

    ``convention`` picks what ``d_in`` is; ``None`` (the default) takes the model
    architecture's own: ``"fan_in"`` for ``neurips``, ``"reference"`` for ``journal`` and
    ``standard``.

    * ``"reference"`` (the journal's released code): ``d_in = d_model`` for every
      weight matrix, embeddings and unembedding included, and the two residual output
      projections (attention ``W_O``, MLP ``W_out``) further divided by
      ``sqrt(2 * n_layers)`` (GPT-2 residual scaling).
    * ``"fan_in"`` (the NeurIPS experiments): the true input dimension (``n_heads * d_head`` for ``W_O``,
      ``d_mlp`` for ``W_out``, ``d_model`` elsewhere; embeddings use ``d_model``), no
      residual scaling.

    ``gamma_embed`` (W_E, W_pos), ``gamma_qk`` (W_Q, W_K), ``gamma_vo`` (W_V, W_O),
    ``gamma_mlp`` (W_in, W_out) and ``gamma_unembed`` (W_U) default to ``gamma``.
    """

    gamma: float = option(
        0.5,
        "Initialization scale: weights drawn from N(0, std = d_in^-gamma). Large gamma is small init (the papers' reasoning regime), small gamma is large init (memorizing).",
    )
    convention: Convention | None = option(
        None,
        "What d_in is: reference (d_model for every matrix, output projections further divided by sqrt(2 n_layers): the journal's code) or fan_in (each matrix's true input width: the NeurIPS experiments). Default: the architecture's (fan_in for neurips, reference otherwise).",
        choices=CONVENTIONS,
    )
    gamma_embed: float | None = option(None, "Gamma of the embeddings W_E and W_pos. Default: --gamma.")
    gamma_qk: float | None = option(None, "Gamma of the attention's W_Q and W_K. Default: --gamma.")
    gamma_vo: float | None = option(None, "Gamma of the attention's W_V and W_O. Default: --gamma.")
    gamma_mlp: float | None = option(None, "Gamma of the MLPs' W_in and W_out. Default: --gamma.")
    gamma_unembed: float | None = option(None, "Gamma of the unembedding W_U. Default: --gamma.")

    def __post_init__(self) -> None:
        check_positive_finite("gamma", self.gamma)
        for name in ("gamma_embed", "gamma_qk", "gamma_vo", "gamma_mlp", "gamma_unembed"):
            value = getattr(self, name)
            if value is not None:
                check_positive_finite(name, value)
        if self.convention is not None and self.convention not in CONVENTIONS:
            raise ValueError(f"convention must be one of {CONVENTIONS}, got {self.convention!r}")

    @property
    def group_gammas(self) -> dict[str, float]:
        """The gamma of each parameter group, defaults resolved."""
        return {
            "embed": self.gamma if self.gamma_embed is None else self.gamma_embed,
            "qk": self.gamma if self.gamma_qk is None else self.gamma_qk,
            "vo": self.gamma if self.gamma_vo is None else self.gamma_vo,
            "mlp": self.gamma if self.gamma_mlp is None else self.gamma_mlp,
            "unembed": self.gamma if self.gamma_unembed is None else self.gamma_unembed,
        }


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """A plain-JSON dict of a config dataclass."""
    return asdict(cfg)


def config_from_dict(cls: type, data: dict[str, Any], where: str = "config") -> Any:
    """Build ``cls`` from a dict, rejecting unknown keys with a message naming them."""
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a mapping, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(known)}")
    return cls(**data)
