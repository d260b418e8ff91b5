"""Gamma-scaled initialization and model construction for TransformerLens models.

``gamma_init_`` re-initializes any ``HookedTransformer`` with std = d_in ** -gamma;
three architectures (``standard``, ``journal``, ``neurips``: :mod:`interp_init.architectures`)
are built by name; ``build_model`` makes one from a :class:`ModelConfig` and an :class:`InitConfig`;
``load_model`` returns the trained model of a run folder.
"""

from interp_init.architectures import JournalBlock, PostLNBlock, architecture_of
from interp_init.config import ARCHITECTURES, CONVENTIONS, InitConfig, ModelConfig
from interp_init.init import bias_bounds, gamma_init_, init_stds
from interp_init.model import (
    build_model,
    empty_model,
    load_model,
    load_weights,
    quiet_deprecation,
    resolve_device,
    save_weights,
)

__all__ = [
    "ARCHITECTURES",
    "CONVENTIONS",
    "JournalBlock",
    "PostLNBlock",
    "architecture_of",
    "bias_bounds",
    "InitConfig",
    "ModelConfig",
    "build_model",
    "empty_model",
    "gamma_init_",
    "init_stds",
    "load_model",
    "load_weights",
    "quiet_deprecation",
    "resolve_device",
    "save_weights",
]
