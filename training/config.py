"""Frozen configs for data and training, the whole-run config, and the named presets.

A run is a :class:`RunConfig`: model (:class:`interp_init.ModelConfig`), init
(:class:`interp_init.InitConfig`), data (:class:`DataConfig`), training
(:class:`TrainConfig`) and a seed.  Every field has a unique name across the four
sections, so a run can be described by one flat mapping of options (the CLI's flags,
with dashes for underscores, and a sweep spec's keys).  :func:`make_run_config` builds a
run from a preset plus such overrides.
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, get_args

from interp_init.config import (
    InitConfig,
    ModelConfig,
    check_init_scale,
    check_int,
    check_positive_finite,
    config_from_dict,
    config_to_dict,
    option,
)
from interp_init.tasks.anchor_pairs import DATA_VERSION
from interp_init.tasks.base import DEFAULT_TASK, Task
from interp_init.tasks.registry import make_task, task_class, tasks_taking

#: Training precisions: fp32, or bf16 autocast of the forward pass.
Precision = Literal["fp32", "bf16"]
PRECISIONS: tuple[Precision, ...] = get_args(Precision)


@dataclass(frozen=True)
class DataConfig:
    """Which task, how many samples (docs/science.md#the-anchor-function-task).

    ``task`` is a registered task's name or a task class's import path
    ``package.module:ClassName`` (:mod:`interp_init.tasks.base`); ``k`` and ``offset`` are
    options of the tasks that take them (``complexity``), ``balanced_pairs`` of the anchor
    tasks, and must keep their defaults for the others.  ``n_heldout`` (default
    ``n_test``; one equal to ``n_test`` is kept as unset) sizes the held-out split; a task
    without one refuses it.  The sizes are
    checked against the task here (:meth:`~interp_init.tasks.base.Task.check_split_sizes`:
    with ``balanced_pairs``, a multiple of each split's pairs)."""

    task: str = DEFAULT_TASK
    n_train: int = option(900_000, "Number of training samples.")
    n_test: int = option(
        10_000, "Number of samples in each test split (in-distribution test, held-out pairs; see --n-heldout)."
    )
    n_heldout: int | None = option(
        None, "Number of held-out samples, where the task has a held-out split [default: --n-test]."
    )
    balanced_pairs: bool = option(
        False,
        "anchor tasks only: draw each split's samples in equal numbers per anchor pair (the released code), not each sample's pair at random; each split's size must then be a multiple of its number of pairs.",
    )
    k: int = option(
        0,
        "complexity task only: how many of the 6 symmetric anchor-pair groups get a non-inferential target, shifted by --offset (0..6).",
    )
    offset: int = option(
        4,
        "complexity task only: the shift (non-zero) of a non-inferential target from the composite x + s(a1) + s(a2).",
    )
    split: str | None = option(
        None,
        "scan task only: the benchmark's split, turn-left or jump (SCAN's add-primitive splits) [default: turn-left].",
    )
    hops: int | None = option(
        None,
        "prontoqa task only: the deepest chain of rules a training question needs, 1..5 (the held-out questions need one more) [default: 3].",
    )

    def __post_init__(self) -> None:
        if not isinstance(self.task, str):
            raise ValueError(f"task must be a task's name or package.module:ClassName, got {self.task!r}")
        check_int("n_train", self.n_train)
        check_int("n_test", self.n_test)
        check_int("n_heldout", self.n_heldout, hint=" (or unset: --n-test)", optional=True)
        if not isinstance(self.balanced_pairs, bool):
            raise ValueError(f"balanced_pairs must be true or false, got {self.balanced_pairs!r}")
        task = self.make_task()  # validates the task and its options
        if self.n_heldout is not None and not task.has_heldout:
            raise ValueError(
                f"n_heldout sizes a held-out split, and task {self.task!r} has none: leave --n-heldout unset"
            )
        if self.n_heldout == self.n_test:  # one config, one form: as unset (a folder written before the option matches)
            object.__setattr__(self, "n_heldout", None)
        task.check_split_sizes(self.split_sizes(task))

    @property
    def heldout_size(self) -> int:
        """The held-out split's size: ``n_heldout``, or ``n_test`` where it is unset."""
        return self.n_test if self.n_heldout is None else self.n_heldout

    def split_sizes(self, task: Task | None = None) -> dict[str, int]:
        """How many samples each of the task's splits draws (``heldout`` only where it has one)."""
        task = self.make_task() if task is None else task
        sizes = {"train": self.n_train, "id_test": self.n_test}
        return sizes | ({"heldout": self.heldout_size} if task.has_heldout else {})

    def make_task(self) -> Task:
        """The run's :class:`~interp_init.tasks.base.Task`, with the options its class takes."""
        takes = {f.name for f in fields(task_class(self.task))}
        options = {}
        for f in fields(self):
            if f.name in ("task", "n_train", "n_test", "n_heldout"):
                continue
            value = getattr(self, f.name)
            if f.name in takes:
                if value is not None or f.default is not None:  # an option unset (None) leaves the task's own default
                    options[f.name] = value
            elif value != f.default:
                names = " or ".join(repr(n) for n in tasks_taking(f.name))
                raise ValueError(f"{f.name} applies to the {names} task only, not {self.task!r}: leave it unset")
        return make_task(self.task, **options)


@dataclass(frozen=True)
class TrainConfig:
    """The optimization recipe (docs/science.md#training).

    The learning rate warms up linearly from ``warmup_start_lr`` to ``lr`` over
    ``warmup_epochs``, then follows a cosine from ``lr`` to ``min_lr`` over
    ``cosine_epochs``, then stays at ``min_lr``; it is updated every step (epochs may be
    fractional).  The papers: ``lr = multiplier * 1e-5`` (25 in NeurIPS, 15 in the
    journal), warmup 10 epochs from 1e-5, cosine over 200 epochs to 1e-5, 210 epochs.
    Their released code also drops each epoch's last, partial batch (``drop_last``, the
    ``paper`` preset's) and stops once an epoch's mean training loss is below 1e-7
    (``stop_below_loss``, off unless given): docs/science.md#where-the-papers-the-released-code-and-this-toolkit-differ.
    """

    epochs: int = option(210, "Passes over the training set.")
    batch_size: int = option(2048, "Samples per optimizer step.")
    lr: float = option(2.5e-4, "Peak learning rate of AdamW, reached at the end of the warmup.")
    warmup_start_lr: float = option(1e-5, "Learning rate at the start of the linear warmup.")
    min_lr: float = option(1e-5, "Learning rate at the end of the cosine decay, and after it.")
    warmup_epochs: float = option(10.0, "Epochs of linear warmup from --warmup-start-lr to --lr (may be fractional).")
    cosine_epochs: float = option(
        200.0, "Epochs of cosine decay from --lr to --min-lr after the warmup (0: --lr throughout)."
    )
    weight_decay: float = option(0.01, "AdamW weight decay.")
    beta1: float = option(0.9, "AdamW decay rate of the gradient's running mean, in [0, 1).")
    beta2: float = option(0.999, "AdamW decay rate of the squared gradient's running mean, in [0, 1).")
    eps: float = option(1e-8, "AdamW epsilon (added to the denominator).")
    grad_clip: float = option(1.0, "Clip the gradient's norm to this value (0: no clipping).")
    eval_every: int = option(1, "Evaluate every this many epochs (and after the last one).")
    eval_dense_epochs: int = option(
        0,
        "Evaluate after each of the first this many epochs, then every --eval-every (0: --eval-every from the start).",
    )
    eval_samples: int = option(10_000, "Training samples on which each evaluation measures the training accuracy.")
    checkpoint_every: int = option(
        1, "Write checkpoint.pt, the point a killed run resumes from, every this many epochs."
    )
    fast_forward: bool = option(
        True,
        "Train through the forward restricted to the last position (the same function, faster), or, with --no-fast-forward, through the full hooked forward.",
    )
    precision: Precision = option(
        "fp32",
        "Forward precision: fp32, or bf16 (bfloat16 autocast; weights, optimizer and evaluation stay fp32).",
        choices=PRECISIONS,
    )
    drop_last: bool = option(
        False,
        "Drop each epoch's last, partial batch (the released code's loader: n_train // batch_size steps an epoch), or, with --no-drop-last, train on it too.",
    )
    stop_below_loss: float = option(
        0.0,
        "End the run, completed, after the first epoch whose mean training loss is below this (the released code's 1e-7; 0: never).",
    )

    def __post_init__(self) -> None:
        for name in ("fast_forward", "drop_last"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        for name in ("epochs", "batch_size", "eval_every", "eval_samples", "checkpoint_every"):
            check_int(name, getattr(self, name))
        hint = " (0: evaluate every --eval-every epochs from the start)"
        check_int("eval_dense_epochs", self.eval_dense_epochs, 0, hint)
        for name in ("lr", "warmup_start_lr", "min_lr", "eps"):
            check_positive_finite(name, getattr(self, name))
        for name in ("warmup_epochs", "cosine_epochs", "weight_decay", "grad_clip", "stop_below_loss"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        for name in ("beta1", "beta2"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
        self._check_schedule()
        if self.eps > 1:  # above, eps swamps the gradient's scale and AdamW's steps vanish: nothing trains
            raise ValueError(
                f"eps must be a number in (0, 1] (AdamW's denominator term; default 1e-8), got {self.eps!r}"
            )

    def _check_schedule(self) -> None:
        """The schedule as a whole (:data:`SCHEDULE_FIELDS`): its phases' bounds ordered (the
        warmup ends within the run) and every lr it can produce between its floor and its
        peak ``lr``: the warmup climbs to ``lr`` (``warmup_start_lr <= lr``) and the cosine
        descends from it (``min_lr <= lr``)."""
        if self.warmup_epochs > self.epochs:  # the lr would never reach its peak
            raise ValueError(
                f"warmup_epochs ({self.warmup_epochs!r}) is longer than the run's {self.epochs} epochs: the learning rate would never reach "
                f"--lr; give --warmup-epochs at most {self.epochs} (or more --epochs)"
            )
        for name, phase, used in (
            ("warmup_start_lr", "the warmup would start at", self.warmup_epochs > 0),
            ("min_lr", "the cosine would climb to", self.cosine_epochs > 0),
        ):
            value, flag = getattr(self, name), "--" + name.replace("_", "-")
            if used and value > self.lr:
                raise ValueError(
                    f"{name} ({flag} {value:g}) is above the peak lr (--lr {self.lr:g}): {phase} {value:g}, {value / self.lr:,.4g}x the peak; "
                    f"give {flag} at most --lr (the papers: 1e-5 under a peak of 2.5e-4), or a larger --lr"
                )

    def evaluates(self, epoch: int) -> bool:
        """Whether the loop evaluates after ``epoch`` (1-based): each of the first
        ``eval_dense_epochs``, then every ``eval_every``-th, and always the last."""
        return epoch <= self.eval_dense_epochs or epoch % self.eval_every == 0 or epoch == self.epochs

    def steps_per_epoch(self, n_train: int) -> int:
        """Optimizer steps an epoch on ``n_train`` samples: ``n_train // batch_size`` with
        ``drop_last``, else ``ceil(n_train / batch_size)`` (the last batch smaller)."""
        return n_train // self.batch_size if self.drop_last else -(-n_train // self.batch_size)

    def stops_at(self, loss: float) -> bool:
        """Whether an epoch whose mean training loss is ``loss`` ends the run (``stop_below_loss``)."""
        return loss < self.stop_below_loss

    def lr_at(self, epoch: float) -> float:
        """The learning rate at a (fractional) epoch."""
        if epoch < self.warmup_epochs:
            return self.warmup_start_lr + (self.lr - self.warmup_start_lr) * epoch / self.warmup_epochs
        t = epoch - self.warmup_epochs
        if self.cosine_epochs == 0 or t >= self.cosine_epochs:
            return self.min_lr if self.cosine_epochs > 0 else self.lr
        return self.min_lr + 0.5 * (self.lr - self.min_lr) * (1 + math.cos(math.pi * t / self.cosine_epochs))


#: The fields of :class:`TrainConfig` that :meth:`TrainConfig.lr_at` reads: the schedule,
#: validated as a whole (:meth:`TrainConfig._check_schedule`).
SCHEDULE_FIELDS: tuple[str, ...] = ("epochs", "lr", "warmup_start_lr", "min_lr", "warmup_epochs", "cosine_epochs")

SECTIONS: dict[str, type] = {"model": ModelConfig, "init": InitConfig, "data": DataConfig, "train": TrainConfig}
#: Flat option name -> its section.
OPTION_SECTION: dict[str, str] = {}
for _section, _cls in SECTIONS.items():
    for _f in fields(_cls):
        if _f.name in OPTION_SECTION or _f.name in ("seed", "init_seed", "data_seed"):
            raise RuntimeError(f"option {_f.name!r} is defined twice")  # pragma: no cover
        OPTION_SECTION[_f.name] = _section
#: The run's seed and its two optional overrides (:class:`RunConfig`), beside the sections' options.
SEED_OPTIONS: tuple[str, ...] = ("seed", "init_seed", "data_seed")
OPTIONS: tuple[str, ...] = (*OPTION_SECTION, *SEED_OPTIONS)
"""Every flat option a run config takes (``make_run_config(preset, **options)``,
:meth:`RunConfig.with_options`, a sweep's ``base`` and ``grid`` keys, ``interp-init train
--OPTION``): each field of the four sections (:data:`OPTION_SECTION` says which) and the seeds."""


def derive_seed(seed: int, name: str) -> int:
    """A 63-bit seed for one random source (``"data.train"``, ``"init"``, ...) of a run."""
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


#: Options added after runs were recorded, with the default that reads as the behaviour
#: before them: ``config.json`` holds one only when it differs, so a folder written before
#: it existed keeps its config digest and resumes (:meth:`RunConfig.to_dict`).
LATER_OPTIONS: dict[str, Any] = {
    "eval_dense_epochs": 0,
    "n_heldout": None,
    "balanced_pairs": False,
    "drop_last": False,
    "stop_below_loss": 0.0,
    "split": None,
    "hops": None,
}

#: The random sources of a run: the init's draw, and the data's (the three sample sets and the order).
INIT_SOURCES: tuple[str, ...] = ("init",)
DATA_SOURCES: tuple[str, ...] = ("data.train", "data.id_test", "data.heldout", "shuffle")


def check_seed(name: str, value: Any, optional: bool = False) -> None:
    """A ``ValueError`` naming ``name`` unless ``value`` is a non-negative integer (or None, if ``optional``)."""
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer{' or None' if optional else ''}, got {value!r}")


@dataclass(frozen=True)
class RunConfig:
    """Everything needed to rebuild a run; written to the run folder's ``config.json``.

    ``seed`` decides every random source (:attr:`seeds`).  ``init_seed`` and ``data_seed``
    (default None: derived from ``seed``) seed the init's draw and the data's (sample sets
    and order) apart, to learn which of the two decides a run's outcome: a population that
    varies one with the other fixed.  They appear in ``config.json`` only when set, so a
    config without them keeps its digest.
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    init: InitConfig = field(default_factory=InitConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    seed: int = 0
    preset: str | None = None
    init_seed: int | None = None
    data_seed: int | None = None

    def __post_init__(self) -> None:
        check_seed("seed", self.seed)
        check_seed("init_seed", self.init_seed, optional=True)
        check_seed("data_seed", self.data_seed, optional=True)
        # the model as a whole must fit the task: checked here, before any file is written
        task = self.data.make_task()
        needed = task.highest_token() + 1
        if self.model.d_vocab < needed:
            raise ValueError(
                f"d_vocab {self.model.d_vocab} is too small for the {self.data.task!r} task, whose tokens and "
                f"targets reach {needed - 1}: use d_vocab >= {needed} (the task's default is {task.vocab_size})"
            )
        if self.model.n_ctx < task.seq_len:
            raise ValueError(
                f"n_ctx {self.model.n_ctx} is shorter than the task's {task.seq_len}-token sequences: use n_ctx >= {task.seq_len}"
            )
        check_init_scale(self.model, self.init)
        if self.train.drop_last and self.data.n_train < self.train.batch_size:
            raise ValueError(
                f"drop_last drops every batch of {self.train.batch_size} samples short of full, and n_train is {self.data.n_train}: "
                "no step would train; give --batch-size at most --n-train, or --no-drop-last"
            )

    @property
    def seeds(self) -> dict[str, int]:
        """The seed of every random source, derived from :attr:`seed` (the init's from
        ``init_seed`` and the data's from ``data_seed`` where those are set)."""
        init = self.seed if self.init_seed is None else self.init_seed
        data = self.seed if self.data_seed is None else self.data_seed
        out = {name: derive_seed(init, name) for name in INIT_SOURCES}
        out.update({name: derive_seed(data, name) for name in DATA_SOURCES})
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: config_to_dict(getattr(self, name)) for name in SECTIONS}
        for name, default in LATER_OPTIONS.items():  # written only when set: older configs keep their digest
            if out[OPTION_SECTION[name]][name] == default:
                del out[OPTION_SECTION[name]][name]
        out["seed"] = self.seed
        for name in ("init_seed", "data_seed"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        out["preset"] = self.preset
        out["seeds"] = self.seeds
        out["data_version"] = DATA_VERSION
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "config") -> RunConfig:
        if not isinstance(data, dict):
            raise ValueError(f"{where} must be a mapping")
        if data.get("kind", "transformer") != "transformer":  # another kind of run (training.launch.register_run_kind)
            raise ValueError(
                f"{where} is a {data['kind']!r} run's config; this reads transformer runs: give their folders"
            )
        unknown = sorted(set(data) - set(SECTIONS) - {*SEED_OPTIONS, "preset", "seeds", "data_version"})
        if unknown:
            raise ValueError(f"{where}: unknown section(s) {unknown}")
        try:
            parts = {
                name: config_from_dict(cls_, data.get(name, {}), f"{where} [{name}]")
                for name, cls_ in SECTIONS.items()
                if name != "model"
            }
            parts["model"] = ModelConfig.from_dict(data.get("model", {}), f"{where} [model]")
            seeds = {name: data.get(name) for name in ("init_seed", "data_seed")}
            return cls(**parts, seed=data.get("seed", 0), preset=data.get("preset"), **seeds)
        except (ValueError, TypeError) as err:  # every message names the file it came from
            if where in str(err):
                raise
            raise ValueError(f"{where}: {err}") from None

    def flat(self) -> dict[str, Any]:
        """All options as one flat mapping (the CLI's and the sweep's names)."""
        out = {name: getattr(getattr(self, section), name) for name, section in OPTION_SECTION.items()}
        out.update({name: getattr(self, name) for name in SEED_OPTIONS})
        return out

    def with_options(self, **options: Any) -> RunConfig:
        """A copy with flat options replaced (validated)."""
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError(f"unknown option(s) {unknown}; allowed: {sorted(OPTIONS)}")
        seeds = {name: options.pop(name) for name in SEED_OPTIONS if name in options}
        per_section: dict[str, dict[str, Any]] = {}
        for name, value in options.items():
            per_section.setdefault(OPTION_SECTION[name], {})[name] = value
        parts = {s: replace(getattr(self, s), **kw) for s, kw in per_section.items()}
        return replace(self, **parts, **seeds)


# Presets: each a set of overrides of the dataclass defaults (the papers' values), naming only what differs.


def _paper() -> dict[str, Any]:
    # The papers' recipe (docs/science.md#training) is the defaults, with the released
    # code's loader, which drops each epoch's last, partial batch; a task changes what its
    # paper did otherwise (Task.preset_overrides: the anchor tasks draw the released code's
    # sets, balanced per pair, e.g. symmetric's 759,375 training samples, 370 steps an epoch).
    return {"drop_last": True}


def _tiny() -> dict[str, Any]:
    # Seconds on a CPU: for tests and smoke runs; learns little.
    return dict(
        d_model=32,
        n_heads=2,
        d_head=16,
        d_mlp=64,
        n_train=2_000,
        n_test=500,
        epochs=3,
        batch_size=256,
        lr=1e-3,
        warmup_start_lr=1e-4,
        min_lr=1e-4,
        warmup_epochs=1.0,
        cosine_epochs=2.0,
        eval_samples=500,
    )


def _cpu() -> dict[str, Any]:
    # The search in docs/faithful-models.md chose it on the papers' own architectures:
    # 200,000 samples and 12 epochs at d_model 128; lr 5e-4 (a task may change it: id-ood's is 1e-3).
    lr = 5e-4
    return dict(
        d_model=128,
        d_head=64,
        d_mlp=384,
        n_train=200_000,
        n_test=2_000,
        epochs=12,
        batch_size=512,
        lr=lr,
        warmup_start_lr=lr / 20,
        min_lr=lr / 20,
        warmup_epochs=1.0,
        cosine_epochs=11.0,
        eval_samples=2_000,
    )


PRESETS: dict[str, Any] = {"paper": _paper, "tiny": _tiny, "cpu": _cpu}
"""The named run presets (``make_run_config(name)``, ``--preset NAME``), each a function returning
its overrides of the defaults, before a task's own (:meth:`interp_init.tasks.base.Task.preset_overrides`):
``paper`` the papers' recipe as their released code runs it (d_model 400, ``drop_last``, on the anchor
tasks the released sets, balanced per pair: docs/science.md); ``cpu`` d_model 128 on 200,000 samples for
12 epochs (docs/faithful-models.md); ``tiny`` d_model 32 for 3 epochs, for tests (learns little)."""


def preset_options(preset: str, task: str = DEFAULT_TASK) -> dict[str, Any]:
    """The flat options of a named preset for a task (the preset's, then the task's own
    overrides, :meth:`interp_init.tasks.base.Task.preset_overrides`)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    return {**PRESETS[preset](), **task_class(task)().preset_overrides(preset)}


def make_run_config(preset: str = "paper", **options: Any) -> RunConfig:
    """A :class:`RunConfig` from a preset and flat overrides (``gamma=0.8, seed=1, ...``).

    Unless given (or set by the preset), the architecture is the task's paper's
    (``Task.default_architecture``: the NeurIPS experiments' post-LN model for
    ``symmetric`` and ``complexity``, the journal's model for ``id-ood``) and the
    vocabulary and context are the task's (``Task.vocab_size``, ``Task.seq_len``)."""
    task = options.get("task", DEFAULT_TASK)
    cls = task_class(task)
    own = {"architecture": cls.default_architecture, "d_vocab": cls.vocab_size, "n_ctx": cls.seq_len}
    merged = {**own, **preset_options(preset, task), **options}
    # the base already has the task's data sizes and context: a task whose data is finite
    # (scan) or whose sequences are long refuses the defaults' 900,000 samples or n_ctx
    data = {f.name: merged[f.name] for f in fields(DataConfig) if f.name in merged and f.name != "task"}
    model = ModelConfig(d_vocab=cls.vocab_size, n_ctx=cls.seq_len)
    base = RunConfig(model=model, data=DataConfig(task=task, **data), preset=preset)
    return base.with_options(**merged)


# ------------------------------------------------------------------ options
# The command line's option values, without click: the table of run options (one per
# config field), the default preset, and the parsing and checking of option values
# (``training.cli`` builds the options and commands from them).
#
# It imports neither torch nor click at import time (``--help`` stays fast).

#: The click type of a config field, by its annotation (fields with choices are strings).
_KINDS: dict[str, str] = {
    "int": "int",
    "int | None": "int",
    "float": "float",
    "float | None": "float",
    "bool": "bool",
    "str": "str",
    "str | None": "str",
}


def _option_table() -> dict[str, tuple[str, str, str, tuple[str, ...] | None]]:
    """Every run-config field but ``task`` (its own option): flat name -> (section, type,
    what it means, choices or None), read from the config dataclasses' fields
    (:func:`interp_init.config.option`)."""
    table = {}
    for section, cls in SECTIONS.items():
        for f in fields(cls):
            if f.name == "task":
                continue
            choices = f.metadata.get("choices")
            kind = "str" if choices else _KINDS[str(f.type)]
            table[f.name] = (section, kind, f.metadata["help"], tuple(choices) if choices else None)
    return table


FIELDS = _option_table()


def check_device(device: str) -> None:
    """Refuse a device this machine lacks (or ``meta``) before anything is written."""
    from interp_init.model import resolve_device  # torch: only here, --help must not pay for it

    resolve_device(device)


def default_preset(device: str) -> tuple[str, str]:
    """The run preset ``train`` uses without ``--preset``, and why: ``paper`` on a CUDA GPU,
    ``cpu`` otherwise (never a paper-scale run on a CPU by default)."""
    if device == "cpu":
        return "cpu", "--device cpu"
    if device.startswith("cuda"):
        return "paper", f"--device {device}"
    import torch  # only here: --help must not pay for it

    if torch.cuda.is_available():
        return "paper", "a CUDA GPU is available"
    return "cpu", "no CUDA GPU found; --preset paper would take hours on a CPU"


def parse_workers(value: str) -> int | None:
    """``--workers``: a positive integer, or ``auto`` (None: one per core)."""
    if value == "auto":
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"--workers must be a positive integer or 'auto', got {value!r}") from None
    if number < 1:
        raise ValueError(f"--workers must be a positive integer or 'auto', got {value!r}")
    return number


def machine_cores() -> int:
    """The CPU cores this process may run on (its affinity; every core where that is not known)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def check_cores(value: int | None, option: str, what: str) -> None:
    """Refuse a count of ``what`` (``torch threads per run``, ``worker processes``) above
    this machine's cores, before any work: more only contend for them (and a huge one
    exhausts the OpenMP runtime or the process table, leaving the command half done)."""
    cores = machine_cores()
    if value is not None and not isinstance(value, bool) and isinstance(value, int) and value > cores:
        raise ValueError(
            f"{option} {value:,} asks for more {what} than this machine's {cores} CPU core(s); give {option} at most {cores}"
        )


def parse_list(text: str, kind: type, name: str) -> tuple[Any, ...]:
    """A comma-separated command-line list (``31,32,33``, ``1e-4,2e-4``) as a tuple of ``kind``."""
    parts = [p.strip() for p in text.split(",")]
    if any(not p for p in parts) and any(parts):
        raise ValueError(
            f"{name} has an empty entry in {text!r} (two commas in a row, or one at an end); give each value once, e.g. {'31,32,33' if kind is int else '1e-4,2e-4,3e-4'}"
        )
    try:
        values = tuple(kind(p) for p in parts if p)
    except ValueError:
        raise ValueError(
            f"{name} must be a comma-separated list of {kind.__name__}s, e.g. {'31,32,33' if kind is int else '1e-4,2e-4,3e-4'}; got {text!r}"
        ) from None
    if not values:
        raise ValueError(f"{name} is empty; give at least one value")
    return values


def one_line(exc: BaseException) -> str:
    """An error as the one line ``interp-init: error: ...`` prints."""
    from interp_init.fileio import temporary_target

    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
        name = str(exc.filename or "")
        return f"the path {name[:60]}{'...' if len(name) > 60 else ''} is longer than the file system takes (a name over 255 bytes, or the whole over 4,096); choose a shorter one"
    if isinstance(exc, OSError) and exc.filename is not None:
        name = temporary_target(exc.filename) or exc.filename  # never a temporary file's name
        return f"cannot write or read {name}: {exc.strerror or exc}"
    return " ".join(str(exc).split())
