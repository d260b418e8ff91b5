"""The regimes of a reproduction: small init reasons, large init memorizes (docs/science.md).

The two regimes of a preset, ``small-init`` and ``large-init``, are data (:data:`REGIMES`:
per preset, per regime, flat run options over the preset's; a key that names a task holds
that task's options).  They share the preset's model, data and schedule and differ in their
init; each task trains on its paper's architecture.  On ``symmetric`` the held-out (4,3)
follows the inferential x - 10 under small init and the symmetric x - 6 under large init
(NeurIPS 2024, Fig. 2); on ``id-ood`` small init composes the unseen pairs (the journal's
Phase 3), large init fits the seen ones (Phase 2).  The flip's criteria live with the
tasks (:meth:`interp_init.tasks.base.Task.flip_checks`).  The regimes are the named points of
:meth:`training.studies.study.StudySpec.reproduction`; importing this module imports no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from interp_init.tasks.registry import make_task, registered_tasks, task_class
from training.config import PRESETS, RunConfig, make_run_config
from training.studies.recipe import carry_recipe

#: The tasks a reproduction trains by default, in order: the registered tasks with a flip
#: (``Task.reproduces``).
REPRODUCE_TASKS: tuple[str, ...] = tuple(name for name in registered_tasks() if task_class(name).reproduces)
#: The regimes, in order.
REGIME_NAMES: tuple[str, ...] = ("small-init", "large-init")

#: preset -> regime -> flat run options (keys naming a task hold that task's options).
#: ``cpu`` and ``paper``: the NeurIPS paper's two sides of the flip (gamma 0.8 small init,
#: gamma 0.5 large init); a task may change a regime's options
#: (:meth:`interp_init.tasks.base.Task.regime_overrides`: ``cpu`` takes gamma 0.4 for id-ood's
#: large init); what ``cpu`` shows over seeds is in docs/faithful-models.md.
#: ``tiny``: smoke tests only; it learns too little to show the flip.
REGIMES: dict[str, dict[str, dict[str, Any]]] = {
    "cpu": {"small-init": {"gamma": 0.8}, "large-init": {"gamma": 0.5}},
    "paper": {"small-init": {"gamma": 0.8}, "large-init": {"gamma": 0.5}},
    "tiny": {"small-init": {"gamma": 0.8}, "large-init": {"gamma": 0.3}},
}

#: What a second ``reproduce`` into a folder another process is reproducing into is told.
REPRODUCE_BUSY = "is being reproduced into by another process ({owner}); wait for it to finish, or choose another --out"


def regime_options(preset: str, regime: str, task: str) -> dict[str, Any]:
    """The flat options a regime adds to ``preset`` for ``task``."""
    if preset not in REGIMES or preset not in PRESETS:
        known = sorted(set(REGIMES) & set(PRESETS))
        raise ValueError(f"unknown preset {preset!r} for reproduce; choose one of {known}")
    regimes = REGIMES[preset]
    if regime not in regimes:
        raise ValueError(f"unknown regime {regime!r} of preset {preset!r}; choose one of {sorted(regimes)}")
    task_class(task)  # an unknown task is refused here
    spec = regimes[regime]
    shared = {k: v for k, v in spec.items() if k not in registered_tasks()}
    return {**shared, **make_task(task).regime_overrides(preset, regime), **spec.get(task, {})}


def regime_config(
    preset: str, regime: str, task: str, seed: int, precision: str = "fp32", carry: Sequence[str] | None = None
) -> RunConfig:
    """The :class:`training.RunConfig` of one regime on one task (``precision``: ``"fp32"``,
    or ``"bf16"`` for the forward under bfloat16 autocast); ``carry``: the recipe's
    quantities to hold (:func:`training.studies.recipe.carry_recipe`, the regime's gamma read as
    the paper's; None: the preset as it is)."""
    cfg = make_run_config(preset, task=task, seed=seed, precision=precision, **regime_options(preset, regime, task))
    return cfg if carry is None else carry_recipe(cfg, carry)
