"""Gamma-scaled initialization and model construction for TransformerLens models.

``gamma_init_`` re-initializes any ``HookedTransformer`` with std = d_in ** -gamma;
``build_model`` makes one from a :class:`ModelConfig` and an :class:`InitConfig`;
``load_model`` returns the trained model of a run folder.
"""

from interp_init.config import CONVENTIONS, InitConfig, ModelConfig
from interp_init.init import gamma_init_, init_stds
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
    "CONVENTIONS",
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
