"""Helpers shared by the tests (imported as ``helpers``: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from transformer_lens import HookedTransformer, HookedTransformerConfig

from interp_init import quiet_deprecation

#: The repository's root (scripts under examples/, benchmarks/ and docs/ are not packages).
ROOT = Path(__file__).resolve().parents[1]


def load_script(relative_path: str) -> ModuleType:
    """Import a script of the repository (``"benchmarks/bench_data.py"``) as a module, by path."""
    path = ROOT / relative_path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    return module


def foreign_model(
    n_layers: int = 2, d_model: int = 16, n_heads: int = 2, d_head: int | None = None, **overrides: Any
) -> HookedTransformer:
    """A randomly initialized multi-head model built by TransformerLens itself, not by our code.

    ``d_head`` defaults to ``d_model // n_heads``; ``overrides`` go to
    ``HookedTransformerConfig`` (``d_mlp`` 4 d_model, ``n_ctx`` 9, GELU, LayerNorm unless given).
    """
    kwargs: dict[str, Any] = dict(
        n_layers=n_layers,
        d_model=d_model,
        n_heads=n_heads,
        d_head=d_head or d_model // n_heads,
        d_mlp=4 * d_model,
        n_ctx=9,
        d_vocab=201,
        act_fn="gelu",
        normalization_type="LN",
    )
    kwargs.update(overrides)
    with quiet_deprecation():
        return HookedTransformer(HookedTransformerConfig(**kwargs)).eval()


def n_hooks(model: HookedTransformer) -> int:
    """How many hooks are attached to ``model``'s hook points (0 after every probe call)."""
    return sum(len(hp.fwd_hooks) + len(hp.bwd_hooks) + len(hp._forward_hooks) for hp in model.hook_points())


def read_metrics(run_dir: str | Path) -> dict | None:
    """A run folder's ``metrics.json`` as written (validated), for tests that check the raw file."""
    from interp_init.runfolder import RunFolder

    return RunFolder(run_dir).read_metrics()
