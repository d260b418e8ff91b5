"""Gamma-scaled initialization of any ``HookedTransformer`` (docs/science.md#gamma-scaled-initialization).

Every weight matrix is drawn from N(0, std = d_in ** -gamma): the *standard deviation*,
not the variance, scales as ``d_in ** -gamma``.  Larger gamma means a smaller
initialization; gamma = 0.5 is about the usual scale.  What ``d_in`` is (the convention)
and what happens to the biases follow the model's registered architecture
(:class:`interp_init.architectures.Architecture`'s ``convention`` and ``biases``), never gamma;
the built-in ones:

* ``standard``: convention ``"reference"``; biases set to zero (TransformerLens' default);
* ``journal``: convention ``"reference"``; biases drawn by PyTorch's default rule for a
  linear layer, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), from the same source of randomness;
* ``neurips``: convention ``"fan_in"``; the attention and MLP have no biases; the
  unembedding's bias drawn by PyTorch's default rule.

LayerNorm parameters are left as they are (ones and zeros in a new model).

Example::

    >>> from transformer_lens import HookedTransformer, HookedTransformerConfig
    >>> from interp_init import gamma_init_, init_stds
    >>> cfg = HookedTransformerConfig(n_layers=1, d_model=16, n_ctx=9, d_head=8,
    ...                               n_heads=2, d_mlp=32, d_vocab=50, act_fn="gelu")
    >>> model = gamma_init_(HookedTransformer(cfg), gamma=0.8, seed=0)
    >>> round(init_stds(model, gamma=0.8)["blocks.0.attn.W_Q"], 4)  # 16 ** -0.8
    0.1088
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace

import torch
from transformer_lens import HookedTransformer

from interp_init.architectures import architecture_of, get_architecture
from interp_init.config import InitConfig

# parameter-name suffix -> (group, which dimension is the fan-in in the "fan_in" convention)
_GROUPS: dict[str, str] = {
    "W_E": "embed",
    "W_pos": "embed",
    "W_Q": "qk",
    "W_K": "qk",
    "_W_K": "qk",
    "W_V": "vo",
    "_W_V": "vo",
    "W_O": "vo",
    "W_in": "mlp",
    "W_gate": "mlp",
    "W_out": "mlp",
    "W_U": "unembed",
}
_RESIDUAL_OUTPUTS = ("W_O", "W_out")
#: bias name -> the weight whose fan-in PyTorch's default bias rule uses
_BIAS_WEIGHT: dict[str, str] = {
    "b_Q": "W_Q",
    "b_K": "W_K",
    "b_V": "W_V",
    "b_O": "W_O",
    "b_in": "W_in",
    "b_out": "W_out",
    "b_U": "W_U",
}


def _weight_params(model: HookedTransformer) -> Iterator[tuple[str, torch.nn.Parameter, str]]:
    for name, param in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if leaf in _GROUPS:
            yield name, param, leaf
        elif leaf.startswith("W_") or leaf.startswith("_W_"):
            raise ValueError(
                f"gamma_init_ does not know the weight matrix {name!r} (shape {tuple(param.shape)}); "
                f"known weights: {sorted(_GROUPS)}"
            )


def _fan_in(model: HookedTransformer, leaf: str, param: torch.Tensor) -> int:
    cfg = model.cfg
    if leaf == "W_O":
        # [n_heads, d_head, d_model]: the true fan-in is n_heads * d_head. TransformerLens'
        # own helper takes shape[1] (d_head) here, which is wrong for a merged output.
        return int(param.shape[0] * param.shape[1])
    if leaf == "W_out":
        return int(param.shape[0])  # [d_mlp, d_model]
    return int(cfg.d_model)


def init_stds(
    model: HookedTransformer,
    gamma: float | None = None,
    convention: str | None = None,
    *,
    config: InitConfig | None = None,
    **group_gammas: float | None,
) -> dict[str, float]:
    """The standard deviation each weight matrix of ``model`` is drawn with.

    Same arguments as :func:`gamma_init_`; returns ``{parameter name: std}``.
    """
    check_model(model, "init_stds")
    cfg = _resolve(gamma, convention, config, group_gammas)
    gammas = cfg.group_gammas
    n_layers = model.cfg.n_layers
    used_convention = cfg.convention or get_architecture(architecture_of(model)).convention
    stds: dict[str, float] = {}
    for name, param, leaf in _weight_params(model):
        gamma_g = gammas[_GROUPS[leaf]]
        if used_convention == "reference":
            std = float(model.cfg.d_model) ** -gamma_g
            if leaf in _RESIDUAL_OUTPUTS:
                std /= math.sqrt(2 * n_layers)
        else:
            std = float(_fan_in(model, leaf, param)) ** -gamma_g
        if not std >= _SMALLEST_STD:  # a float32 draw would be zero (or lose its precision)
            group = _GROUPS[leaf]
            raise ValueError(
                f"gamma {gamma_g!r} of the {group!r} group gives {name} the std {std:.3g}, below float32's smallest normal "
                f"number: its weights would be zero. Use a gamma below {max_gamma(_fan_in(model, leaf, param) if used_convention != 'reference' else model.cfg.d_model):.3g} "
                "(the papers use 0.1-1.5)"
            )
        stds[name] = std
    return stds


#: The smallest std a weight may be drawn with: float32's smallest normal number.
_SMALLEST_STD = float(torch.finfo(torch.float32).tiny)


def max_gamma(d_in: int) -> float:
    """The largest gamma whose std ``d_in ** -gamma`` is a normal float32 number."""
    return math.inf if d_in <= 1 else -math.log(_SMALLEST_STD) / math.log(d_in)


def check_model(model: object, where: str) -> None:
    """Refuse what is not a ``HookedTransformer`` with data: a meta-device model holds
    shapes only, so nothing could be drawn into it or read from it."""
    if not isinstance(model, HookedTransformer):
        raise ValueError(
            f"{where}: model must be a transformer_lens HookedTransformer, got {type(model).__name__} "
            "(any other torch.nn.Module: interp_init.gamma_init_module_)"
        )
    if any(param.is_meta for param in model.parameters()):
        raise ValueError(
            f"{where}: the model is on the meta device (shapes without data); build it on a real device "
            "(build_model(..., device='cpu'), or model.to_empty(device='cpu') first)"
        )


def bias_bounds(model: HookedTransformer) -> dict[str, float]:
    """How :func:`gamma_init_` sets each bias parameter of ``model``: ``{name: bound}``,
    drawn from U(-bound, bound) (PyTorch's default rule, bound = 1/sqrt(fan_in)), or
    set to zero where the bound is 0. Bias buffers (the ``neurips`` attention and MLP,
    which have no biases) are not parameters and are not listed."""
    rule = get_architecture(architecture_of(model)).biases
    params = dict(model.named_parameters())
    bounds: dict[str, float] = {}
    for name, param in params.items():
        prefix, _, leaf = name.rpartition(".")
        if leaf not in _BIAS_WEIGHT:
            continue
        if rule == "zero":
            bounds[name] = 0.0
            continue
        weight_leaf = _BIAS_WEIGHT[leaf]
        weight = params[f"{prefix}.{weight_leaf}" if prefix else weight_leaf]
        bounds[name] = 1.0 / math.sqrt(_fan_in(model, weight_leaf, weight))
    return bounds


def _resolve(
    gamma: float | None, convention: str | None, config: InitConfig | None, group_gammas: dict[str, float | None]
) -> InitConfig:
    if config is not None:
        if gamma is not None or group_gammas:
            raise ValueError("pass either config=InitConfig(...) or gamma and group gammas, not both")
        return config
    if gamma is None:
        raise ValueError("gamma is required (a finite positive number), or pass config=InitConfig(...)")
    allowed = {"gamma_embed", "gamma_qk", "gamma_vo", "gamma_mlp", "gamma_unembed"}
    unknown = sorted(set(group_gammas) - allowed)
    if unknown:
        raise ValueError(f"unknown group gamma(s) {unknown}; allowed: {sorted(allowed)}")
    return replace(InitConfig(gamma=gamma, convention=convention), **group_gammas)


@torch.no_grad()
def gamma_init_(
    model: HookedTransformer,
    gamma: float | None = None,
    convention: str | None = None,
    *,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    config: InitConfig | None = None,
    **group_gammas: float | None,
) -> HookedTransformer:
    """Re-initialize every weight matrix of ``model`` in place and return it.

    Args:
        model: any ``HookedTransformer`` (ours or one built elsewhere, any number of
            layers and heads).
        gamma: the initialization rate; std = d_in ** -gamma.
        convention: ``"reference"`` (the journal's code: d_in = d_model everywhere, W_O
            and W_out divided by sqrt(2 n_layers)), ``"fan_in"`` (true fan-in, no
            scaling; the NeurIPS experiments), or ``None``: the architecture's own.
        seed, generator: the source of randomness, at most one of them; with neither,
            torch's global generator (``torch.manual_seed``), as ``torch.nn.init`` does.
            Weights are drawn on the CPU and copied to the model's device, so a seed
            gives the same weights on any device.
        config: an :class:`InitConfig` instead of ``gamma``/``convention``/group gammas.
        **group_gammas: ``gamma_embed``, ``gamma_qk``, ``gamma_vo``, ``gamma_mlp``,
            ``gamma_unembed``; each defaults to ``gamma``.
    """
    check_model(model, "gamma_init_")
    if seed is not None and generator is not None:
        raise ValueError("pass at most one source of randomness: seed=<int> or generator=<torch.Generator>, not both")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        generator = torch.Generator(device="cpu").manual_seed(seed)
    stds = init_stds(model, gamma, convention, config=config, **group_gammas)
    params = dict(model.named_parameters())
    for name, std in stds.items():
        param = params[name]
        values = torch.randn(param.shape, generator=generator, dtype=torch.float32) * std
        param.copy_(values.to(device=param.device, dtype=param.dtype))
    for name, bound in bias_bounds(model).items():  # after the weights: their draws stay as they were
        param = params[name]
        if bound == 0:
            param.zero_()
            continue
        values = (torch.rand(param.shape, generator=generator, dtype=torch.float32) * 2 - 1) * bound
        param.copy_(values.to(device=param.device, dtype=param.dtype))
    return model
