"""What a task is: one class, registered by name in one place (:mod:`interp_init.tasks.registry`).

A task (:class:`Task`, a frozen dataclass whose fields are the task's options) owns its
vocabulary size and sequence length, the generator of its splits (``train``, ``id_test``
and, where it has one, ``heldout``), its metrics (a frozen :class:`TaskMetrics` dataclass
that ``metrics.json`` serializes with :meth:`TaskMetrics.to_json` and every reader reads
back with :meth:`TaskMetrics.from_json`), its verdict, its default architecture, its
preset overrides and the report sections that apply to its runs.  Nothing outside the
task modules branches on a task's name: the loop, the sweep's table, the report and the
command line ask the task.

A task is named by its registered name (``symmetric``, ``id-ood``, ``complexity``,
``addition``) or, for a researcher's own task, by its import path
``package.module:ClassName`` (:func:`interp_init.tasks.registry.task_class`), on every
command.  Adding a built-in task is one new module with its class and one line in
:data:`interp_init.tasks.registry.BUILTIN_TASKS` (or a call to ``register_task``);
docs/tasks.md walks through one.

A task predicts one token at the last position (``output = "last"``, the anchor tasks and
``addition``: ``targets [n]``) or a token at every position (``output = "sequence"``:
``targets [n, seq_len]`` holds at each position the next token the model must predict there,
or :data:`IGNORE` where the loss does not look: the loss mask).  A sequence task's
``evaluate`` gets ``predict(tokens, targets)``, a :class:`SequencePredictions` (the argmax
next token and the negative log-likelihood of the target at every target position); greedy decoding
is exact-matched in one teacher-forced pass (:func:`exact_match`: a greedy decoder reproduces
the reference, end token included, exactly when the argmax is right at every target
position), and a language model's perplexity is :func:`perplexity`.

The per-epoch history of a run is read typed with :func:`read_run_metrics`: a
:class:`RunMetrics` whose ``history`` holds one :class:`EpochRecord` per epoch (its
``metrics`` the task's dataclass on evaluated epochs) and whose ``final`` holds the final
metrics.  The layout of ``metrics.json`` is unchanged from before tasks were classes:
each history record is ``{"epoch", "step", "loss", "lr", **metrics.to_json()}``.

Example::

    >>> from interp_init.tasks.registry import make_task
    >>> task = make_task("complexity", k=2)
    >>> task.name, task.seq_len, task.vocab_size, task.default_architecture
    ('complexity', 9, 201, 'neurips')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, fields, is_dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import torch
    from torch import Tensor

#: A run's splits: training samples, in-distribution test samples, held-out (OOD) samples.
SPLITS: tuple[str, ...] = ("train", "id_test", "heldout")
#: The keys of a history record that are not metrics.
RECORD_KEYS: tuple[str, ...] = ("epoch", "step", "loss", "lr")
#: The report sections every task's runs can show (keys of ``training.studies.report`` sections).
GENERIC_SECTIONS: tuple[str, ...] = (
    "verdict",
    "curves",
    "accuracies",
    "flow",
    "condensation",
    "stable_ranks",
    "spectra",
)
#: The task a run trains on unless told otherwise.
DEFAULT_TASK = "symmetric"
#: ID accuracy at or above which a run has fit its training distribution (the papers' 0.9).
FIT_THRESHOLD = 0.9

Predict = Callable[["Tensor"], "Tensor"]
#: What a task predicts: one token at the last position, or the next token at every position.
OUTPUTS: tuple[str, ...] = ("last", "sequence")
#: A sequence task's target where the loss does not look (outside the loss mask).
IGNORE = -1


@dataclass(frozen=True)
class SequencePredictions:
    """A model's predictions on a sequence task's samples, at its target positions:
    ``argmax [n, seq]``, the most likely next token (:data:`IGNORE` where there is no target:
    not computed), and ``nll [n, seq]``, the negative log-likelihood (nats) of the target (0
    where there is none)."""

    argmax: Tensor
    nll: Tensor


def target_mask(targets: Tensor) -> Tensor:
    """``[n, seq]`` True where a sequence task's ``targets`` has a target (the loss mask)."""
    return targets != IGNORE


def exact_match(argmax: Tensor, targets: Tensor) -> Tensor:
    """``[n]`` True where the argmax is right at every target position of a sample: the
    greedy decoder's output then equals the reference (by induction over the positions: its
    first wrong token would be the first position where the teacher-forced argmax is wrong),
    so exact match under greedy decoding needs one forward pass, not one per token.
    ``tests/training/test_sequence.py`` checks it against :func:`interp_init.decode.greedy_decode`."""
    return ((argmax == targets) | ~target_mask(targets)).all(dim=1)


def token_accuracy(argmax: Tensor, targets: Tensor) -> float:
    """The share of target positions whose argmax is the target."""
    mask = target_mask(targets)
    return float(((argmax == targets) & mask).sum() / mask.sum().clamp(min=1))


def perplexity(nll: Tensor, targets: Tensor) -> float:
    """``exp`` of the mean negative log-likelihood over the target positions."""
    import math

    mask = target_mask(targets)
    return math.exp(float((nll * mask).sum() / mask.sum().clamp(min=1)))


#: A sequence task's ``predict(tokens, targets)``.
PredictSequences = Callable[["Tensor", "Tensor"], SequencePredictions]


@dataclass(frozen=True)
class TaskMetrics:
    """A task's metrics at one evaluation: the base every task's metrics extend.

    Subclasses are frozen dataclasses; every field is JSON (floats, dicts of floats).
    :meth:`columns` gives the scalars of the sweep's ``results.csv`` and the report's
    tables, :meth:`groups` per-group accuracies (the anchor pairs') for the
    epochs-to-accuracy columns, :meth:`heldout_curves` what the report draws besides the
    training and ID accuracy.
    """

    train_acc: float
    id_acc: float

    #: How the report names a column (default: the column's own name).
    LABELS: ClassVar[dict[str, str]] = {}

    def to_json(self) -> dict[str, Any]:
        """The metrics as ``metrics.json`` writes them (a flat JSON object)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any, where: str = "metrics") -> TaskMetrics:
        """Read :meth:`to_json`'s output back; a missing field is a ``ValueError`` naming it
        (keys that are not fields, such as a history record's ``epoch``, are ignored)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: metrics must be a JSON object, got {type(data).__name__}")
        missing = [
            f.name for f in fields(cls) if f.name not in data and f.default is MISSING and f.default_factory is MISSING
        ]
        if missing:
            raise ValueError(
                f"{where}: the {cls.__name__} metrics lack {missing} (a run written by another task, or a damaged file)"
            )
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    @classmethod
    def column_names(cls) -> tuple[str, ...]:
        """The names :meth:`columns` gives (the results table's metric columns of this task)."""
        return tuple(f.name for f in fields(cls) if f.type in ("float", float))

    def columns(self) -> dict[str, float]:
        """The scalar metrics, by results-table column (default: every float field)."""
        return {
            name: float(getattr(self, name)) for name in self.column_names() if getattr(self, name, None) is not None
        }

    def groups(self) -> dict[str, float]:
        """Accuracy per named group of inputs (e.g. per anchor pair); none by default."""
        return {}

    def heldout_curves(self) -> dict[str, float]:
        """What the report's third curve panel draws: every column but train and ID accuracy."""
        return {self.LABELS.get(k, k): v for k, v in self.columns().items() if k not in ("train_acc", "id_acc")}

    def deciding(self) -> str:
        """The numbers that decide the verdict, in a few words (the report's run table)."""
        rest = self.heldout_curves()
        return ", ".join(f"{k} {v:.2f}" for k, v in rest.items()) if rest else f"ID {self.id_acc:.2f}"


@dataclass(frozen=True)
class Verdict:
    """A run's solution (``solution``), the numbers it rests on (``evidence``) and what the
    papers expect for its task (``expected``)."""

    solution: str
    evidence: str
    expected: str


def num(value: float | None) -> str:
    """A metric for a sentence: two decimals, or ``n/a``."""
    return "n/a" if value is None else f"{value:.2f}"


@dataclass(frozen=True)
class Samples:
    """Encoded samples of a task's split: ``token_ids [n, seq]`` (any integer dtype),
    ``targets [n]`` (``[n, seq]`` for a sequence task, :data:`IGNORE` outside the loss mask) and per-sample metadata ``meta`` (name -> ``[n, ...]`` tensor).

    The trainer reads ``batch_tokens(index)``, ``targets``, ``subset`` and ``to``;
    :class:`interp_init.tasks.data.AnchorDataset` offers the same for the anchor tasks."""

    task: str
    split: str
    token_ids: Tensor
    targets: Tensor
    meta: dict[str, Tensor]

    def __len__(self) -> int:
        return int(self.token_ids.shape[0])

    @cached_property
    def tokens(self) -> Tensor:
        """All input sequences as int64 (made on first use, then kept)."""
        return self.token_ids.long()

    def batch_tokens(self, index: Tensor | slice) -> Tensor:
        """The int64 input sequences at ``index``."""
        return self.token_ids[index].long()

    def to(self, device: str | torch.device) -> Samples:
        """A copy with every tensor on ``device``."""
        return Samples(
            self.task,
            self.split,
            self.token_ids.to(device),
            self.targets.to(device),
            {k: v.to(device) for k, v in self.meta.items()},
        )

    def subset(self, index: Tensor | slice) -> Samples:
        """The samples at ``index`` (a slice, index tensor or boolean mask)."""
        return Samples(
            self.task,
            self.split,
            self.token_ids[index],
            self.targets[index],
            {k: v[index] for k, v in self.meta.items()},
        )


@dataclass(frozen=True)
class Task:
    """The base of every task (see the module docstring); subclasses are frozen dataclasses
    whose fields are the task's options (``complexity``'s ``k`` and ``offset``).

    A subclass sets the class attributes ``metrics_class``, ``vocab_size`` and ``seq_len``
    and defines :meth:`make_split` and :meth:`evaluate`; the rest has defaults.
    """

    #: The frozen dataclass of the task's metrics (a :class:`TaskMetrics` subclass).
    metrics_class: ClassVar[type[TaskMetrics]] = TaskMetrics
    #: The vocabulary a model of this task needs (the default ``d_vocab``).
    vocab_size: ClassVar[int] = 0
    #: The length of the task's input sequences (the default ``n_ctx``).
    seq_len: ClassVar[int] = 0
    #: The architecture a run of this task gets unless one is given.
    default_architecture: ClassVar[str] = "neurips"
    #: What the model predicts (:data:`OUTPUTS`): ``"last"``, one token at the last position
    #: (``targets [n]``), or ``"sequence"``, the next token at every position (``targets [n,
    #: seq_len]``, :data:`IGNORE` outside the loss mask; ``evaluate`` gets
    #: ``predict(tokens, targets)``, a :class:`SequencePredictions`).
    output: ClassVar[str] = "last"
    #: Whether the task has a ``heldout`` split.
    has_heldout: ClassVar[bool] = True
    #: What the papers report for the task, in one sentence (the report's verdict).
    expected: ClassVar[str] = ""
    #: The report sections that apply to the task's runs.
    report_sections: ClassVar[tuple[str, ...]] = GENERIC_SECTIONS
    #: The groups whose accuracy its metrics record (:meth:`TaskMetrics.groups`), for the
    #: results table's ``epochs_to_acc_*`` columns.
    group_names: ClassVar[tuple[str, ...]] = ()
    #: The most probe inputs per group that differ in what the task's targets depend on
    #: (the report's ``--per-pair`` may not exceed it; more would only repeat them); None:
    #: the data set no bound (the report bounds it by memory).
    probe_group_inputs: ClassVar[int | None] = None

    #: The name a built-in task is registered under (:mod:`interp_init.tasks.registry`); a
    #: task of one's own is named by its import path, ``module:ClassName``.
    registered_name: ClassVar[str | None] = None

    @property
    def name(self) -> str:
        """The name runs record: the registered name, or ``module:ClassName``."""
        return task_name(type(self))

    def highest_token(self) -> int:
        """The largest token id the task's inputs or targets use (a model's ``d_vocab`` must exceed it)."""
        return self.vocab_size - 1

    def make_split(self, split: str, n: int, seed: int) -> Samples:
        """``n`` samples of ``split`` drawn from ``seed`` (the same seed, the same samples)."""
        raise NotImplementedError

    def evaluate(self, predict: Predict, train: Any, id_test: Any, heldout: Any | None) -> TaskMetrics:
        """The metrics of a model whose argmax predictions ``predict(tokens)`` gives (a
        sequence task: ``predict(tokens, targets)``, a :class:`SequencePredictions`)."""
        raise NotImplementedError

    def verdict(self, final: TaskMetrics | None, status: str) -> Verdict:
        """The run's solution: ``fit`` or ``did not fit`` its training distribution (ID
        accuracy against :data:`FIT_THRESHOLD`), unless the task says more."""
        id_acc = None if final is None else final.id_acc
        solution = "fit" if id_acc is not None and id_acc >= FIT_THRESHOLD else "did not fit"
        evidence = f"ID accuracy {num(id_acc)}" + (
            "" if final is None else "".join(f", {k} {v:.2f}" for k, v in final.heldout_curves().items())
        )
        return Verdict(status_solution(solution, status), evidence, self.expected)

    def preset_overrides(self, preset: str) -> dict[str, Any]:
        """The flat run options the task changes in a named preset (none by default)."""
        return {}

    def check_split_sizes(self, sizes: Mapping[str, int]) -> None:
        """Refuse, with a ``ValueError`` naming the option, split sizes (split -> samples) the
        task cannot draw; any size >= 1 by default."""

    def regime_overrides(self, preset: str, regime: str) -> dict[str, Any]:
        """The flat run options the task changes in one regime (``small-init``,
        ``large-init``) of ``interp-init reproduce --preset preset`` (none by default)."""
        return {}

    #: Whether the task has the papers' small-init / large-init flip (``interp-init reproduce``).
    reproduces: ClassVar[bool] = False
    #: Whether the race of a seen exception against a held-out pair's two answers applies
    #: (``symmetric``'s (3,4) against (4,3): training/studies/records.py).
    has_race: ClassVar[bool] = False

    def flip_checks(
        self, small: Mapping[str, Any], large: Mapping[str, Any], criteria: Mapping[str, float]
    ) -> dict[str, bool]:
        """Each criterion of the flip, by name, from the summary rows of the small-init and
        large-init runs (their :meth:`TaskMetrics.columns`); only for tasks that reproduce."""
        raise ValueError(f"task {self.name!r} has no small-init / large-init flip to reproduce")

    def flip_readings(
        self, small: Mapping[str, Any], large: Mapping[str, Any], criteria: Mapping[str, float]
    ) -> dict[str, tuple[str, bool]]:
        """Readings shown beside a criterion of :meth:`flip_checks`, never criteria themselves
        (they do not enter whether the flip holds): name -> (the criterion it stands beside,
        whether it holds).  None by default."""
        return {}

    def probe_inputs(self, per_group: int, seed: int) -> Any:
        """Inputs the report's probes run on (default: training samples)."""
        return self.make_split("train", max(2, per_group) * 8, seed)

    def sample_input(self) -> Any:
        """One input the report draws attention and information flow for."""
        return self.make_split("train", 1, 0)

    def token_labels(self, tokens: list[int]) -> list[str]:
        """How the report labels an input's tokens (default: their ids)."""
        return [str(t) for t in tokens]

    def read_metrics(self, data: Any, where: str = "metrics") -> TaskMetrics:
        """The task's metrics from a ``metrics.json`` object (``final`` or a history record)."""
        return self.metrics_class.from_json(data, where)


def task_name(cls: type[Task]) -> str:
    """The name a task class is known by: its registered name, or ``module:ClassName``."""
    return cls.__dict__.get("registered_name") or f"{cls.__module__}:{cls.__qualname__}"


def status_solution(solution: str, status: str) -> str:
    """A solution as the verdict writes it: ``"<status> (<solution> so far)"`` unless completed."""
    return solution if status == "completed" else f"{status} ({solution} so far)"


def check_task_class(cls: Any, name: str) -> None:
    """Refuse a task class that lacks what a task needs, naming every missing part."""
    if not isinstance(cls, type) or not issubclass(cls, Task):
        raise ValueError(f"task {name!r} is {cls!r}, not a subclass of interp_init.tasks.base.Task")
    missing = []
    metrics = cls.metrics_class
    decorated = isinstance(metrics, type) and is_dataclass(metrics) and "__dataclass_params__" in vars(metrics)
    if not (decorated and issubclass(metrics, TaskMetrics) and metrics.__dataclass_params__.frozen):
        missing.append("metrics_class (a @dataclass(frozen=True) subclass of interp_init.tasks.base.TaskMetrics)")
    elif clash := sorted({f.name for f in fields(metrics)} & set(RECORD_KEYS)):
        missing.append(f"metrics field names other than {clash} (a history record's own keys)")
    for attr in ("vocab_size", "seq_len"):
        value = getattr(cls, attr)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            missing.append(f"{attr} (an int >= 1)")
    if cls.output not in OUTPUTS:
        missing.append(f"output (one of {OUTPUTS}, got {cls.output!r})")
    for method in ("make_split", "evaluate"):
        if getattr(cls, method) is getattr(Task, method):
            missing.append(f"{method}()")
    if missing:
        raise ValueError(f"task {name!r} ({cls.__qualname__}) is missing: {'; '.join(missing)} (see docs/tasks.md)")


# ----------------------------------------------------------------- typed metrics.json


@dataclass(frozen=True)
class EpochRecord:
    """One epoch of a run's history: its loss and learning rate, and on evaluated epochs
    the task's metrics (``None`` on epochs without an evaluation)."""

    epoch: int
    step: int
    loss: float
    lr: float
    metrics: TaskMetrics | None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"epoch": self.epoch, "step": self.step, "loss": self.loss, "lr": self.lr}
        return {**out, **(self.metrics.to_json() if self.metrics is not None else {})}

    @classmethod
    def from_json(cls, task: Task, data: Mapping[str, Any], where: str = "history") -> EpochRecord:
        evaluated = any(f.name in data for f in fields(task.metrics_class))
        metrics = task.read_metrics(data, where) if evaluated else None
        return cls(
            int(data["epoch"]), int(data.get("step", 0)), float(data["loss"]), float(data.get("lr", 0.0)), metrics
        )


@dataclass(frozen=True)
class RunMetrics:
    """A run's ``metrics.json``, typed: ``status``, ``final`` (the task's metrics, ``None``
    until the run ends), ``history`` (one :class:`EpochRecord` per epoch), ``elapsed_s``,
    and why it ended early where it did (``diverged_at_step``, ``stopped_early``)."""

    status: str
    final: TaskMetrics | None
    history: tuple[EpochRecord, ...]
    elapsed_s: float | None = None
    diverged_at_step: int | None = None
    #: A completed run that ended before its last epoch (``stop_below_loss``): that epoch, its loss and the threshold.
    stopped_early: Mapping[str, Any] | None = None

    def evaluated(self) -> tuple[EpochRecord, ...]:
        """The epochs that carry metrics."""
        return tuple(r for r in self.history if r.metrics is not None)


def read_run_metrics(task: Task, data: Mapping[str, Any], where: str = "metrics.json") -> RunMetrics:
    """A run's ``metrics.json`` object read typed for ``task`` (today's layout, which is
    also the layout of every run written before tasks were classes)."""
    final_json = data.get("final") or {}
    evaluated = any(f.name in final_json for f in fields(task.metrics_class))
    final = task.read_metrics(final_json, f"{where} [final]") if evaluated else None
    history = tuple(
        EpochRecord.from_json(task, r, f"{where} [history {i}]") for i, r in enumerate(data.get("history") or [])
    )
    elapsed = data.get("elapsed_s")
    stopped = data.get("stopped_early")
    return RunMetrics(
        str(data.get("status", "")),
        final,
        history,
        None if elapsed is None else float(elapsed),
        data.get("diverged_at_step"),
        stopped if isinstance(stopped, Mapping) else None,
    )
