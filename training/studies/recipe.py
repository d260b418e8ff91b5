"""The quantities the papers' training recipe fixes, measured for any run and carried to another width or budget.

A run at another width or length is not the paper's recipe just because it keeps the
paper's gamma and lr: what the init and the optimizer do depends on ``d_model`` and on the
number of steps.  :func:`recipe_of` measures, for one :class:`training.RunConfig`:

* ``forward_scale``: the init's weight std times ``sqrt(d_model)``, i.e.
  ``d_model ** (0.5 - gamma)`` (std ``d_model ** -gamma``): how large the first
  activations are;
* ``adam_step``: the peak Adam step relative to the init, ``lr * sqrt(d_model) / std`` =
  ``lr * d_model ** (0.5 + gamma)`` (Adam moves each weight by about ``lr`` a step, the
  init's entries are about ``std``, and ``sqrt(d_model)`` of them add up in a dot product);
* ``summed_lr``: the learning rate summed over every optimizer step of the schedule
  (:meth:`training.TrainConfig.lr_at` at each step: a linear warm-up from
  ``warmup_start_lr``, a cosine to ``min_lr``, then ``min_lr``), with ``steps_per_epoch``
  steps an epoch;
* ``summed_lr_wd``: ``summed_lr * weight_decay``, how far AdamW's decoupled weight decay
  shrinks the weights (the weights shrink by ``exp(-summed_lr_wd)`` with no gradient);
* ``samples_per_step`` (the batch) and ``samples_per_pair`` (training samples per seen
  anchor pair; None for a task without anchor pairs).

The paper's values (:func:`paper_recipe`, the ``reference`` of :func:`carry_recipe`) are
the NeurIPS 2024 ``symmetric`` recipe as the released code (sjtuzzw/complexity_control)
runs it, which is the ``paper`` preset (d_model 400, batch 2048, lr 1e-5 -> 2.5e-4 over 10
warm-up epochs, cosine over 200 epochs to 1e-5, 210 epochs, weight decay 0.01:
docs/science.md) at gamma 0.8: the released scripts' training set, :data:`PAPER_N_TRAIN` =
759,375 samples balanced per pair (15 seen pairs x 50,625: the text's "900,000" counts the
test sets), and their loader's ``drop_last`` (759,375 // 2048 = 370 steps an epoch, 77,700
steps).  Printed by ``interp-init train --task symmetric --preset cpu --gamma 0.8
--show-recipe`` (the same on any machine: arithmetic on the config)::

    quantity                         this run (d_model 128)  paper (d_model 400)
    forward scale std*sqrt(d)                        0.2333               0.1657
    Adam step / init lr*sqrt(d)/std                  0.2744               0.6034
    summed lr over all steps                          1.232                 10.1
    summed lr x weight decay                        0.01232                0.101
    optimizer steps                                   4,692               77,700
    ...

A run's steps are counted as its loop takes them (:meth:`training.TrainConfig.steps_per_epoch`):
``n_train // batch_size`` an epoch with ``drop_last`` (the ``paper`` preset's), else
``ceil(n_train / batch_size)``, the last, partial batch kept (the ``cpu`` preset's).

:func:`carry_recipe` derives a config at another width (``d_model``) or step budget
(``epochs``, ``n_train``, ``batch_size``) that holds the quantities named in ``hold``
(:data:`HOLDABLE`; default :data:`DEFAULT_HOLD`: the forward scale and the summed
lr x weight decay).  Which ones matter is what the experiments of issue 31 measure
(docs/faithful-models.md); the default holds the two that the width and the length change
most without touching the optimizer's step.  ``interp-init train --carry-recipe`` and
``interp-init reproduce --carry-recipe`` apply it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

from interp_init.config import ModelConfig
from interp_init.tasks.base import DEFAULT_TASK
from interp_init.tasks.registry import task_class
from training.config import OPTION_SECTION, RunConfig, TrainConfig, make_run_config, preset_options

#: The task of the paper's recipe: NeurIPS 2024's ``symmetric``, the default task.
PAPER_TASK = DEFAULT_TASK
#: The released code's training set for the symmetric task (15 seen pairs x 50,625).
PAPER_N_TRAIN = 759_375
#: The gamma of the paper's small init (NeurIPS 2024's reasoning side).
PAPER_GAMMA = 0.8
#: The quantities :func:`carry_recipe` can hold, in the order it sets them: ``forward_scale``
#: (sets gamma), ``adam_step`` (scales the lr schedule), ``summed_lr`` (stretches the
#: schedule's epochs), ``summed_lr_wd`` (sets weight decay).
HOLDABLE: tuple[str, ...] = ("forward_scale", "adam_step", "summed_lr", "summed_lr_wd")
#: What :func:`carry_recipe` holds unless told otherwise.
DEFAULT_HOLD: tuple[str, ...] = ("forward_scale", "summed_lr_wd")

_ROWS = (
    ("forward_scale", "forward scale std*sqrt(d)", "{:.4f}"),
    ("adam_step", "Adam step / init lr*sqrt(d)/std", "{:.4f}"),
    ("summed_lr", "summed lr over all steps", "{:.4g}"),
    ("summed_lr_wd", "summed lr x weight decay", "{:.4g}"),
    ("steps", "optimizer steps", "{:,}"),
    ("steps_per_epoch", "steps per epoch", "{:,}"),
    ("samples_per_step", "samples per step (batch)", "{:,}"),
    ("samples_per_pair", "training samples per seen pair", "{:,.0f}"),
    ("gamma", "gamma", "{:.4g}"),
    ("lr", "peak lr", "{:.4g}"),
    ("weight_decay", "weight decay", "{:.4g}"),
)


@dataclass(frozen=True)
class Recipe:
    """The quantities of one run's recipe (see the module docstring for each one's meaning)."""

    d_model: int
    gamma: float
    lr: float
    weight_decay: float
    forward_scale: float
    adam_step: float
    summed_lr: float
    summed_lr_wd: float
    steps: int
    steps_per_epoch: int
    samples_per_step: int
    samples_per_pair: float | None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and (not math.isfinite(value) or value < 0):
                raise ValueError(f"recipe quantity {f.name} must be a finite number >= 0, got {value!r}")


def summed_lr(train: TrainConfig, n_train: int) -> float:
    """The learning rate summed over every step of ``train``'s schedule on ``n_train`` samples
    (step ``i`` of epoch ``e`` at :meth:`~training.TrainConfig.lr_at` ``(e + i / steps_per_epoch)``,
    as the loop sets it; :meth:`~training.TrainConfig.steps_per_epoch` steps an epoch)."""
    spe = train.steps_per_epoch(n_train)
    return math.fsum(train.lr_at(e + i / spe) for e in range(train.epochs) for i in range(spe))


def _recipe(train: TrainConfig, d_model: int, gamma: float, n_train: int, task: str) -> Recipe:
    spe = train.steps_per_epoch(n_train)
    total = summed_lr(train, n_train)
    spec = getattr(task_class(task)(), "spec", None)
    pairs = len(spec.train_pairs) if spec is not None and getattr(spec, "train_pairs", None) else None
    return Recipe(
        d_model=d_model,
        gamma=gamma,
        lr=train.lr,
        weight_decay=train.weight_decay,
        forward_scale=d_model ** (0.5 - gamma),
        adam_step=train.lr * d_model ** (0.5 + gamma),
        summed_lr=total,
        summed_lr_wd=total * train.weight_decay,
        steps=spe * train.epochs,
        steps_per_epoch=spe,
        samples_per_step=train.batch_size,
        samples_per_pair=None if pairs is None else n_train / pairs,
    )


def recipe_of(cfg: RunConfig) -> Recipe:
    """The recipe's quantities of ``cfg`` (:class:`Recipe`), its steps counted as its loop
    takes them.  (Samples per seen pair: for a task with anchor pairs at its default options.)"""
    return _recipe(cfg.train, cfg.model.d_model, cfg.init.gamma, cfg.data.n_train, cfg.data.task)


def paper_config(gamma: float = PAPER_GAMMA) -> RunConfig:
    """The paper's run as the released code trains it: the ``paper`` preset on ``symmetric``
    at ``gamma`` (:data:`PAPER_N_TRAIN` samples balanced per pair, ``drop_last``)."""
    return make_run_config("paper", task=PAPER_TASK, gamma=gamma)


@lru_cache(maxsize=8)
def paper_recipe(gamma: float = PAPER_GAMMA) -> Recipe:
    """The paper's quantities: :func:`paper_config`'s (read from the ``paper`` preset's
    options without building a model, so ``interp-init train --help`` shows them without
    importing torch; the test checks they equal ``recipe_of(paper_config())``).  At gamma
    0.8: the forward scale 0.1657, the Adam step 0.6034, summed lr 10.10, summed lr x wd
    0.1010, 77,700 steps of 2048 samples, 50,625 samples per seen pair (``--show-recipe``
    above)."""
    options = preset_options("paper", PAPER_TASK)
    train = TrainConfig(**{k: v for k, v in options.items() if OPTION_SECTION.get(k) == "train"})
    d_model = int(options.get("d_model", next(f.default for f in fields(ModelConfig) if f.name == "d_model")))
    return _recipe(train, d_model, gamma, int(options["n_train"]), PAPER_TASK)


def check_hold(hold: Sequence[str]) -> tuple[str, ...]:
    """``hold`` as a tuple in :data:`HOLDABLE`'s order; a ``ValueError`` naming an unknown one."""
    names = tuple(h.strip().replace("-", "_") for h in hold)
    unknown = [h for h in names if h not in HOLDABLE]
    if unknown:
        raise ValueError(
            f"--carry-recipe: unknown quantity {unknown[0]!r}; hold any of {', '.join(h.replace('_', '-') for h in HOLDABLE)} (comma-separated)"
        )
    return tuple(h for h in HOLDABLE if h in names)


def carried_gamma(gamma: float, d_model: int, reference_d_model: int) -> float:
    """The gamma at ``d_model`` whose forward scale ``d ** (0.5 - gamma)`` equals the one
    ``gamma`` gives at ``reference_d_model``: ``0.5 + (gamma - 0.5) ln(d_ref) / ln(d)``."""
    return 0.5 + (gamma - 0.5) * math.log(reference_d_model) / math.log(d_model)


def carry_recipe(cfg: RunConfig, hold: Sequence[str] = DEFAULT_HOLD, reference_d_model: int = 400) -> RunConfig:
    """``cfg`` with the options that make it hold the paper's quantities named in ``hold``.

    ``cfg``'s gamma (and each group's gamma that is set) is read as the paper's gamma, i.e.
    at the reference width ``reference_d_model`` (the paper's 400); the reference values are
    :func:`paper_recipe` at that gamma.  ``cfg``'s width (``d_model``) and budget (``epochs``,
    ``n_train``, ``batch_size``) are kept; in :data:`HOLDABLE`'s order:

    * ``forward_scale``: gamma (every group's) set by :func:`carried_gamma`;
    * ``adam_step``: lr, ``warmup_start_lr`` and ``min_lr`` scaled by one factor (the
      schedule's shape kept) so that ``lr * d ** (0.5 + gamma)`` is the paper's;
    * ``summed_lr``: ``epochs``, ``warmup_epochs`` and ``cosine_epochs`` stretched by one
      factor to the fewest whole epochs whose summed lr reaches the paper's;
    * ``summed_lr_wd``: weight decay set to the paper's summed lr x wd over this run's
      summed lr.

    Carried values are rounded to 4 significant digits.  Apply it once, to a config whose
    gamma is the paper's: carrying a carried config again carries its gamma again.  The
    ``paper`` preset is its fixed point: at the reference width with the paper's data and
    schedule (:func:`paper_config`) it changes nothing, whatever it holds
    (``tests/training/test_recipe.py``).
    """
    held = check_hold(hold)
    d = cfg.model.d_model
    ref = paper_recipe(cfg.init.gamma)
    if reference_d_model != ref.d_model:
        raise ValueError(f"reference_d_model must be the paper's {ref.d_model}, got {reference_d_model!r}")
    options: dict[str, Any] = {}
    gamma = cfg.init.gamma
    if "forward_scale" in held:
        gamma = _round(carried_gamma(cfg.init.gamma, d, reference_d_model))
        options["gamma"] = gamma
        for group in ("gamma_embed", "gamma_qk", "gamma_vo", "gamma_mlp", "gamma_unembed"):
            value = getattr(cfg.init, group)
            if value is not None:
                options[group] = _round(carried_gamma(value, d, reference_d_model))
    out = cfg.with_options(**options)
    if "adam_step" in held:
        factor = ref.adam_step / (out.train.lr * d ** (0.5 + gamma))
        tc = out.train
        out = out.with_options(
            lr=_round(tc.lr * factor),
            warmup_start_lr=_round(tc.warmup_start_lr * factor),
            min_lr=_round(tc.min_lr * factor),
        )
    if "summed_lr" in held:
        out = _stretch(out, ref.summed_lr)
    if "summed_lr_wd" in held:
        out = out.with_options(weight_decay=_round(ref.summed_lr_wd / summed_lr(out.train, out.data.n_train)))
    return out


def _round(value: float) -> float:
    """A carried value to 4 significant digits (what a user would type; the paper's own
    values come back exactly)."""
    return float(f"{value:.4g}")


def _stretch(cfg: RunConfig, target: float) -> RunConfig:
    """``cfg`` with its epochs (and warm-up and cosine epochs, by the same factor) at the
    fewest whole epochs whose summed lr reaches ``target`` (found by bisection: the sum grows
    with the factor)."""
    tc = cfg.train

    def at(epochs: int) -> RunConfig:
        k = epochs / tc.epochs
        return cfg.with_options(epochs=epochs, warmup_epochs=tc.warmup_epochs * k, cosine_epochs=tc.cosine_epochs * k)

    lo, hi = 1, tc.epochs
    while summed_lr(at(hi).train, cfg.data.n_train) < target:
        lo, hi = hi, hi * 2
        if hi > 1_000_000:
            raise ValueError(
                f"summed lr {target:.3g} is out of reach of this schedule's lr {tc.lr:g}: raise --lr or hold fewer quantities"
            )
    while lo < hi:
        mid = (lo + hi) // 2
        if summed_lr(at(mid).train, cfg.data.n_train) >= target:
            hi = mid
        else:
            lo = mid + 1
    return at(hi)


def train_epilog() -> str:
    """``interp-init train --help``'s note on the recipe, with the paper's numbers."""
    p = paper_recipe()
    return (
        "Recipe: --show-recipe prints the quantities the papers' recipe fixes for the resolved run, beside the paper's "
        f"(the released code's symmetric run at d_model {p.d_model}, gamma {p.gamma:g}): forward scale std*sqrt(d) {p.forward_scale:.3f}, "
        f"Adam step relative to the init lr*sqrt(d)/std {p.adam_step:.3f}, summed lr over all steps {p.summed_lr:.1f}, "
        f"summed lr x weight decay {p.summed_lr_wd:.3f}, {p.samples_per_step} samples a step, {p.samples_per_pair:,.0f} per seen pair. "
        "--carry-recipe reads --gamma as the paper's and holds these quantities at this run's width and length."
    )


#: ``--carry-recipe``'s help (train and reproduce).
CARRY_HELP = (
    "Carry the paper's recipe to this run's --d-model and length: hold the quantities named (comma-separated, any of "
    + ", ".join(h.replace("_", "-") for h in HOLDABLE)
    + "; given alone: "
    + ",".join(h.replace("_", "-") for h in DEFAULT_HOLD)
    + "), setting gamma, the lr schedule, the epochs or the weight decay (training/studies/recipe.py). --gamma is read as the paper's gamma at d_model 400."
)


def recipe_columns(cfg: RunConfig) -> dict[str, str]:
    """The report's run-table cells of ``cfg``'s recipe: each quantity, and the paper's at the
    same gamma in parentheses."""
    mine, ref = recipe_of(cfg), paper_recipe(cfg.init.gamma)
    names = {
        "forward_scale": "std*sqrt(d)",
        "adam_step": "lr*sqrt(d)/std",
        "summed_lr": "summed lr",
        "summed_lr_wd": "summed lr x wd",
    }
    return {label: f"{getattr(mine, name):.3g} (paper {getattr(ref, name):.3g})" for name, label in names.items()}


def recipe_table(cfg: RunConfig, paper_gamma: float | None = None) -> str:
    """``cfg``'s quantities beside the paper's at ``paper_gamma`` (default: ``cfg``'s gamma;
    for a carried config, the gamma it was carried from): what ``--show-recipe`` prints."""
    mine = recipe_of(cfg)
    ref = paper_recipe(cfg.init.gamma if paper_gamma is None else paper_gamma)
    heads = ("quantity", f"this run (d_model {mine.d_model})", f"paper (d_model {ref.d_model})")
    rows = [
        (label, *("-" if getattr(r, name) is None else fmt.format(getattr(r, name)) for r in (mine, ref)))
        for name, label, fmt in _ROWS
    ]
    widths = [max(len(row[i]) for row in (heads, *rows)) for i in range(3)]
    lines = [
        "  ".join((row[0].ljust(widths[0]), row[1].rjust(widths[1]), row[2].rjust(widths[2]))) for row in (heads, *rows)
    ]
    paper = (
        f"paper: the released code's symmetric run (sjtuzzw/complexity_control) at gamma {ref.gamma:g}: {PAPER_N_TRAIN:,} samples "
        f"balanced per pair, drop_last ({ref.steps_per_epoch} steps an epoch)"
    )
    this = (
        f"this run: {cfg.data.n_train:,} samples, "
        + ("balanced per pair" if cfg.data.balanced_pairs else "pairs drawn at random")
        + (", drop_last" if cfg.train.drop_last else ", each epoch's last, partial batch kept")
    )
    return "\n".join([*lines, paper, this])
