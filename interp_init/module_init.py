"""Gamma-scaled initialization of any ``torch.nn.Module`` (docs/science.md#any-pytorch-model).

:func:`gamma_init_` re-initializes ``HookedTransformer`` models by their architecture's
conventions; :func:`gamma_init_module_` does the same for any other network (a CNN, an MLP,
a diffusion U-Net, a plain ``nn.Transformer``): every parameter with a fan-in is drawn with
scale ``fan_in ** -gamma``, either

* ``distribution="normal"``: N(0, std = fan_in ** -gamma), as :func:`gamma_init_`, or
* ``distribution="uniform"``: U(-fan_in ** -gamma, +fan_in ** -gamma), the rule of the
  journal's released diffusion code (``fig_code/fig6/train.py``: every conv, transposed conv
  and linear weight *and bias*; its ``std_rate`` is gamma, 0.5 being PyTorch's
  kaiming-uniform scale 1/sqrt(fan_in) that the prior work used).

The fan-in of each layer type (:func:`module_init_plan` lists each parameter's):

* ``nn.Linear`` (and ``nn.MultiheadAttention``'s ``out_proj``): ``in_features``.
* ``nn.Conv1d/2d/3d``: ``in_channels / groups`` x the kernel's elements (``prod(kernel_size)``),
  the number of inputs one output sums.
* ``nn.ConvTranspose1d/2d/3d``: PyTorch's own convention
  (``torch.nn.init._calculate_fan_in_and_fan_out``): the weight has shape
  ``(in_channels, out_channels / groups, *kernel_size)`` and PyTorch takes its second
  dimension, so fan-in = ``out_channels / groups`` x ``prod(kernel_size)``. That is what
  PyTorch's default init and the released diffusion code use, and it is kept here so that
  gamma 0.5 uniform is PyTorch's default scale (the number of inputs one output of a
  transposed conv actually sums is ``in_channels / groups`` x ``prod(kernel_size / stride)``).
* ``nn.MultiheadAttention``'s own projection parameters: ``in_proj_weight`` (or
  ``q/k/v_proj_weight``) the input width (``embed_dim``, ``kdim``, ``vdim``: the weight's second
  dimension); ``in_proj_bias`` ``embed_dim``; ``bias_k``/``bias_v`` (``add_bias_kv``) ``kdim``/``vdim``.
* ``nn.Embedding`` / ``nn.EmbeddingBag``: ``embedding_dim``. A lookup's true fan-in would be
  the one-hot width ``num_embeddings``, which would shrink the embeddings with the vocabulary;
  ``embedding_dim`` is what PyTorch's helper gives for the weight ``(num_embeddings,
  embedding_dim)`` and what :func:`gamma_init_` uses for TransformerLens' ``W_E`` (``d_model``),
  so the two paths agree. A ``padding_idx`` row is set to zero again, as PyTorch does.
* ``nn.Bilinear``: ``in1_features`` (PyTorch's default rule's fan-in).

A bias gets its layer's weight's fan-in. ``biases`` says how it is set: ``"same"`` (the
default: drawn by the weights' rule, as the released code does), ``"zero"``, or ``"keep"``
(left as it is). Normalization layers (``LayerNorm``, ``GroupNorm``, ``BatchNorm*``,
``InstanceNorm*``, ``RMSNorm``, ``LocalResponseNorm``) have no fan-in: with ``norms="reset"``
(the default) their weights are set to one and biases to zero, running statistics left as
they are; ``norms="keep"`` leaves them untouched. A parameter of any other module (a raw
``nn.Parameter`` of your own) is refused, naming it, unless ``unknown="keep"``.

Draws are made on the CPU in float32 and copied to each parameter's device and dtype, one
parameter after another in ``model.named_parameters()`` order (each tied parameter once), so
a seed gives the same weights on any device.

Example::

    >>> import torch
    >>> from interp_init import gamma_init_module_, module_init_plan
    >>> net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.GroupNorm(2, 8), torch.nn.Conv2d(8, 4, 1))
    >>> net = gamma_init_module_(net, gamma=0.8, distribution="uniform", seed=0)
    >>> plan = module_init_plan(net, gamma=0.8)
    >>> plan["0.weight"].fan_in, plan["0.weight"].scale == 27**-0.8  # 3 channels x 3 x 3
    (27, True)
    >>> bool(net[0].weight.detach().abs().max() <= 27**-0.8)
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Literal, get_args

import torch
from torch import nn

from interp_init.config import check_positive_finite

Distribution = Literal["normal", "uniform"]
DISTRIBUTIONS: tuple[Distribution, ...] = get_args(Distribution)
BiasRule = Literal["same", "zero", "keep"]
BIAS_RULES: tuple[BiasRule, ...] = get_args(BiasRule)
NormRule = Literal["reset", "keep"]
NORM_RULES: tuple[NormRule, ...] = get_args(NormRule)
UnknownRule = Literal["error", "keep"]
UNKNOWN_RULES: tuple[UnknownRule, ...] = get_args(UnknownRule)

_NORMS = (
    nn.LayerNorm,
    nn.GroupNorm,
    nn.LocalResponseNorm,
    nn.modules.batchnorm._NormBase,  # BatchNorm1d/2d/3d, SyncBatchNorm, InstanceNorm1d/2d/3d
    *((nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ()),
)
_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
#: float32's smallest normal number: a scale below it would draw zeros.
_SMALLEST_SCALE = float(torch.finfo(torch.float32).tiny)


@dataclass(frozen=True)
class ModuleInitConfig:
    """How :func:`gamma_init_module_` draws a model's parameters (module docstring: the fan-ins).

    Args:
        gamma: the initialization rate: scale = fan_in ** -gamma (the std of a normal draw, the
            bound of a uniform one). Large gamma is a small init; 0.5 uniform is PyTorch's default.
        distribution: ``"normal"`` (N(0, std = scale)) or ``"uniform"`` (U(-scale, scale), the
            journal's released diffusion code).
        biases: ``"same"`` (drawn by the weights' rule with the layer's fan-in), ``"zero"`` or ``"keep"``.
        norms: ``"reset"`` (normalization weights one, biases zero) or ``"keep"``.
        unknown: a parameter of a module with no known fan-in: ``"error"`` (refused, naming it) or ``"keep"``.
    """

    gamma: float = 0.5
    distribution: Distribution = "normal"
    biases: BiasRule = "same"
    norms: NormRule = "reset"
    unknown: UnknownRule = "error"

    def __post_init__(self) -> None:
        check_positive_finite("gamma", self.gamma)
        for name, allowed in (
            ("distribution", DISTRIBUTIONS),
            ("biases", BIAS_RULES),
            ("norms", NORM_RULES),
            ("unknown", UNKNOWN_RULES),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class ParamInit:
    """How one parameter is set: ``rule`` is ``"draw"`` (with ``fan_in`` and ``scale``: the std
    of a normal draw or the bound of a uniform one), ``"one"``, ``"zero"`` or ``"keep"``."""

    rule: Literal["draw", "one", "zero", "keep"]
    fan_in: int | None = None
    scale: float | None = None


def _fan_in(module: nn.Module, leaf: str, param: torch.Tensor) -> int | None:
    """The fan-in of ``module``'s own parameter ``leaf``, or ``None`` for a module type with none."""
    if isinstance(module, nn.Linear):  # includes MultiheadAttention's out_proj
        return int(module.in_features)
    if isinstance(module, _CONVS):
        weight = module.weight
        return int(weight.shape[1] * math.prod(weight.shape[2:]))  # PyTorch's convention, both conv kinds
    if isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
        return int(module.embedding_dim)
    if isinstance(module, nn.Bilinear):
        return int(module.in1_features)
    if isinstance(module, nn.MultiheadAttention):
        widths = {
            "in_proj_weight": param.shape[-1] if param.dim() == 2 else None,
            "q_proj_weight": module.embed_dim,
            "k_proj_weight": module.kdim,
            "v_proj_weight": module.vdim,
            "in_proj_bias": module.embed_dim,
            "bias_k": module.kdim,
            "bias_v": module.vdim,
        }
        width = widths.get(leaf)
        return None if width is None else int(width)
    return None


def _is_bias(module: nn.Module, leaf: str) -> bool:
    return leaf == "bias" or (
        isinstance(module, nn.MultiheadAttention) and leaf in ("in_proj_bias", "bias_k", "bias_v")
    )


def _config(gamma: float | None, config: ModuleInitConfig | None, options: dict[str, object]) -> ModuleInitConfig:
    if config is not None:
        if gamma is not None or options:
            raise ValueError("pass either config=ModuleInitConfig(...) or gamma and its options, not both")
        return config
    if gamma is None:
        raise ValueError("gamma is required (a finite positive number), or pass config=ModuleInitConfig(...)")
    allowed = [f.name for f in fields(ModuleInitConfig) if f.name != "gamma"]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; allowed: {allowed}")
    return ModuleInitConfig(gamma=gamma, **options)  # type: ignore[arg-type]


def _check_module(model: object, where: str) -> None:
    from transformer_lens import HookedTransformer

    if isinstance(model, HookedTransformer):
        raise ValueError(
            f"{where}: model is a HookedTransformer; use interp_init.gamma_init_ (its conventions and group gammas)"
        )
    if not isinstance(model, nn.Module):
        raise ValueError(f"{where}: model must be a torch.nn.Module, got {type(model).__name__}")
    for name, param in model.named_parameters():
        if isinstance(param, nn.parameter.UninitializedParameter):
            raise ValueError(
                f"{where}: parameter {name!r} is uninitialized (a lazy module); run one forward pass first"
            )
        if param.is_meta:
            raise ValueError(
                f"{where}: parameter {name!r} is on the meta device (shapes without data); "
                "model.to_empty(device='cpu') first"
            )


def module_init_plan(
    model: nn.Module, gamma: float | None = None, *, config: ModuleInitConfig | None = None, **options: object
) -> dict[str, ParamInit]:
    """How :func:`gamma_init_module_` sets each parameter of ``model``: ``{name: ParamInit}``.

    Same arguments as :func:`gamma_init_module_` (without the randomness); each parameter
    once, under its first name in ``model.named_parameters()``.
    """
    _check_module(model, "module_init_plan")
    cfg = _config(gamma, config, options)
    plan: dict[str, ParamInit] = {}
    seen: set[int] = set()
    for module_name, module in model.named_modules():
        for leaf, param in module.named_parameters(recurse=False):
            if id(param) in seen:
                continue
            seen.add(id(param))
            name = f"{module_name}.{leaf}" if module_name else leaf
            if isinstance(module, _NORMS):
                if cfg.norms == "keep":
                    plan[name] = ParamInit("keep")
                else:
                    plan[name] = ParamInit("one" if leaf == "weight" else "zero")
                continue
            fan_in = _fan_in(module, leaf, param)
            if fan_in is None:
                if cfg.unknown == "keep":
                    plan[name] = ParamInit("keep")
                    continue
                raise ValueError(
                    f"gamma_init_module_: parameter {name!r} (shape {tuple(param.shape)}) of a "
                    f"{type(module).__name__} has no known fan-in; set it yourself and pass unknown='keep'"
                )
            if _is_bias(module, leaf) and cfg.biases != "same":
                plan[name] = ParamInit("zero" if cfg.biases == "zero" else "keep")
                continue
            scale = float(fan_in) ** -cfg.gamma
            if not scale >= _SMALLEST_SCALE:
                raise ValueError(
                    f"gamma {cfg.gamma!r} gives {name} (fan-in {fan_in}) the scale {scale:.3g}, below float32's smallest "
                    f"normal number: it would be drawn as zeros. Use a gamma below {-math.log(_SMALLEST_SCALE) / math.log(fan_in):.3g}"
                )
            plan[name] = ParamInit("draw", fan_in, scale)
    # Order the plan as named_parameters() does (the order of the draws).
    order = {name: i for i, (name, _) in enumerate(model.named_parameters())}
    return dict(sorted(plan.items(), key=lambda item: order.get(item[0], len(order))))


def draw(
    shape: torch.Size | tuple[int, ...], scale: float, distribution: Distribution, generator: torch.Generator | None
) -> torch.Tensor:
    """One parameter's draw, on the CPU in float32: ``randn * scale`` (normal) or
    ``(rand * 2 - 1) * scale`` (uniform), the draws :func:`gamma_init_module_` makes."""
    if distribution == "normal":
        return torch.randn(shape, generator=generator, dtype=torch.float32) * scale
    return (torch.rand(shape, generator=generator, dtype=torch.float32) * 2 - 1) * scale


@torch.no_grad()
def gamma_init_module_(
    model: nn.Module,
    gamma: float | None = None,
    *,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    config: ModuleInitConfig | None = None,
    **options: object,
) -> nn.Module:
    """Re-initialize every parameter of ``model`` with a fan-in, in place, and return the model.

    Args:
        model: any ``torch.nn.Module`` other than a ``HookedTransformer`` (that is
            :func:`interp_init.gamma_init_`'s): Linear, Conv, ConvTranspose, Embedding, Bilinear,
            MultiheadAttention and normalization layers anywhere in it (the fan-ins: the module docstring).
        gamma: the initialization rate: scale = fan_in ** -gamma.
        seed, generator: the source of randomness, at most one of them; with neither, torch's
            global generator. Draws are made on the CPU, so a seed gives the same weights on any device.
        config: a :class:`ModuleInitConfig` instead of ``gamma`` and ``options``.
        **options: the other :class:`ModuleInitConfig` fields: ``distribution`` (``"normal"`` or
            ``"uniform"``), ``biases`` (``"same"``, ``"zero"``, ``"keep"``), ``norms`` (``"reset"``,
            ``"keep"``), ``unknown`` (``"error"``, ``"keep"``).
    """
    if seed is not None and generator is not None:
        raise ValueError("pass at most one source of randomness: seed=<int> or generator=<torch.Generator>, not both")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        generator = torch.Generator(device="cpu").manual_seed(seed)
    cfg = _config(gamma, config, options)
    plan = module_init_plan(model, config=cfg)
    params = dict(model.named_parameters())
    for name, how in plan.items():
        param = params[name]
        if how.rule == "draw":
            assert how.scale is not None
            param.copy_(
                draw(param.shape, how.scale, cfg.distribution, generator).to(device=param.device, dtype=param.dtype)
            )
        elif how.rule == "one":
            param.fill_(1.0)
        elif how.rule == "zero":
            param.zero_()
    names = {id(p): name for name, p in model.named_parameters()}
    for module in model.modules():  # PyTorch keeps an embedding's padding row at zero
        padded = isinstance(module, (nn.Embedding, nn.EmbeddingBag)) and module.padding_idx is not None
        if padded and plan[names[id(module.weight)]].rule == "draw":
            module.weight[module.padding_idx].zero_()
    return model
