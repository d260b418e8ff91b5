"""Addition with a held-out square (the journal's Fig. 7C; Hu et al., ICML 2024, "leave-square-out").

a + b = c as the token sequence ``[a, +, b, =]``: every operand in ``0..n_operands - 1``
is one token (its value), ``+`` and ``=`` are tokens 199 and 200, and the target is the
token ``c = a + b`` (0..198), read at the last position.  A square block of operand pairs,
``square_low <= a, b < square_low + square_size``, never enters training: a model that
follows the rule of addition gets it right, a model that answers from nearby training
cases does not (Hu et al.'s case-based vs rule-based reasoning).  Outside the square a
fixed tenth of the pairs, drawn once by :data:`ID_TEST_SEED` whatever the run's seed, is the
in-distribution test set, unseen in training but with training pairs all around it; the
rest are the training pairs.  (A lattice such as "a and b end in the same digit" would not
do: for each a it would remove from training every sum with one last digit, and a model
then never answers those sums.)  The defaults (operands 0..99, the square 40..59 x 40..59) are explained in
docs/science.md#the-addition-task.

Splits: ``train`` (samples of the training pairs), ``id_test`` (of the ID test pairs),
``heldout`` (of the square's pairs); pairs are drawn uniformly, with replacement, from a
NumPy generator seeded by the split's seed.  Metrics (:class:`AdditionMetrics`):
``train_acc``, ``id_acc`` and ``square_acc``; the verdict calls a run ``rule-based`` when
its square accuracy reaches :data:`SQUARE_THRESHOLD`.

Example::

    >>> task = AdditionTask()
    >>> data = task.make_split("heldout", 3, seed=0)
    >>> data.tokens.shape, bool(((data.meta["a"] >= 40) & (data.meta["a"] < 60)).all())
    (torch.Size([3, 4]), True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from interp_init.tasks.base import FIT_THRESHOLD, Predict, Samples, Task, TaskMetrics, Verdict, num, status_solution

if TYPE_CHECKING:
    from torch import Tensor

#: Square accuracy at or above which a run generalizes into the held-out square by rule.
SQUARE_THRESHOLD = 0.9
#: The seed of the fixed draw that makes one pair in :data:`ID_TEST_FRACTION`-th outside the square
#: an in-distribution test pair (the same for every run).
ID_TEST_SEED = 2024
ID_TEST_FRACTION = 10
#: The token ids of ``+`` and ``=``: after the largest sum, 198.
PLUS, EQUALS = 199, 200


@dataclass(frozen=True)
class AdditionMetrics(TaskMetrics):
    """Accuracy on training pairs, on ID test pairs and inside the held-out square."""

    square_acc: float

    LABELS: ClassVar[dict[str, str]] = {"square_acc": "square"}

    def deciding(self) -> str:
        return f"square {self.square_acc:.2f}"


@dataclass(frozen=True)
class AdditionTask(Task):
    """a + b = c with a held-out square of (a, b) pairs (see the module docstring)."""

    n_operands: int = 100
    square_low: int = 40
    square_size: int = 20

    metrics_class: ClassVar[type[TaskMetrics]] = AdditionMetrics
    vocab_size: ClassVar[int] = EQUALS + 1
    seq_len: ClassVar[int] = 4
    default_architecture: ClassVar[str] = "journal"
    expected: ClassVar[str] = (
        "The journal (Fig. 7C): small init (large gamma) or large weight decay generalizes by rule into the held-out square; "
        "large init with small weight decay answers from nearby training cases and misses it."
    )

    def __post_init__(self) -> None:
        for name in ("n_operands", "square_low", "square_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name != "square_low" else 0):
                raise ValueError(
                    f"addition task: {name} must be an integer >= {1 if name != 'square_low' else 0}, got {value!r}"
                )
        if 2 * (self.n_operands - 1) >= PLUS:
            raise ValueError(
                f"addition task: n_operands {self.n_operands} gives sums above {PLUS - 1}, the largest number token; use n_operands <= {PLUS // 2}"
            )
        if self.square_low + self.square_size > self.n_operands:
            raise ValueError(
                f"addition task: the square {self.square_low}..{self.square_low + self.square_size - 1} does not fit in the operands 0..{self.n_operands - 1}"
            )
        if self.square_size >= self.n_operands:
            raise ValueError(
                f"addition task: square_size {self.square_size} leaves no training pairs; use square_size < n_operands"
            )

    def preset_overrides(self, preset: str) -> dict[str, Any]:
        # cpu: about 2.5 minutes of one core per run (docs/tasks.md#the-addition-task-on-a-cpu):
        # the journal's 2-layer 1-head model at d_model 64, 30 passes of 50,000 samples
        if preset != "cpu":
            return {}
        return dict(
            d_model=64,
            d_head=32,
            d_mlp=256,
            n_train=50_000,
            epochs=30,
            batch_size=256,
            lr=3e-3,
            warmup_start_lr=1e-4,
            min_lr=1e-4,
            warmup_epochs=1.0,
            cosine_epochs=29.0,
        )

    def in_square(self, a: Any, b: Any) -> Any:
        """Whether (a, b) lies in the held-out square (ints or arrays)."""
        lo, hi = self.square_low, self.square_low + self.square_size
        return (a >= lo) & (a < hi) & (b >= lo) & (b < hi)

    def pairs(self, split: str) -> np.ndarray:
        """The ``[m, 2]`` operand pairs of ``split``, in row-major order."""
        a, b = np.divmod(np.arange(self.n_operands**2), self.n_operands)
        square = self.in_square(a, b)
        outside = np.flatnonzero(~square)
        chosen = np.random.default_rng(ID_TEST_SEED).permutation(outside)[: max(1, len(outside) // ID_TEST_FRACTION)]
        id_test = np.zeros(len(a), dtype=bool)
        id_test[chosen] = True
        masks = {"train": ~square & ~id_test, "id_test": id_test, "heldout": square}
        if split not in masks:
            raise ValueError(f"unknown split {split!r}; choose one of {tuple(masks)}")
        keep = masks[split]
        return np.stack([a[keep], b[keep]], axis=1)

    def make_split(self, split: str, n: int, seed: int) -> Samples:
        import torch

        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n (number of samples) must be an integer >= 1, got {n!r}")
        pairs = self.pairs(split)
        rng = np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed)))
        chosen = pairs[rng.integers(0, len(pairs), size=n)]
        a, b = torch.from_numpy(chosen[:, 0].copy()), torch.from_numpy(chosen[:, 1].copy())
        tokens = torch.stack([a, torch.full_like(a, PLUS), b, torch.full_like(a, EQUALS)], dim=1).to(torch.uint8)
        return Samples(self.name, split, tokens, a + b, {"a": a, "b": b})

    def evaluate(self, predict: Predict, train: Samples, id_test: Samples, heldout: Samples | None) -> AdditionMetrics:
        def acc(data: Samples | None) -> float:
            return float("nan") if data is None else float((predict(data.tokens) == data.targets).float().mean())

        return AdditionMetrics(acc(train), acc(id_test), acc(heldout))

    def verdict(self, final: TaskMetrics | None, status: str) -> Verdict:
        """``rule-based`` when the square's accuracy reaches :data:`SQUARE_THRESHOLD`,
        ``case-based`` when it does not, ``did not fit`` when ID accuracy is below 0.9."""
        id_acc = None if final is None else final.id_acc
        square = None if final is None else final.square_acc
        if id_acc is None or id_acc < FIT_THRESHOLD:
            solution = "did not fit"
        else:
            solution = "rule-based" if square is not None and square >= SQUARE_THRESHOLD else "case-based"
        evidence = f"ID accuracy {num(id_acc)}, held-out square accuracy {num(square)}"
        return Verdict(status_solution(solution, status), evidence, self.expected)

    def sample_input(self) -> Samples:
        import torch

        a, b = self.square_low + self.square_size // 3, self.square_low + (2 * self.square_size) // 3
        tokens = torch.tensor([[a, PLUS, b, EQUALS]])
        return Samples(
            self.name, "heldout", tokens, torch.tensor([a + b]), {"a": torch.tensor([a]), "b": torch.tensor([b])}
        )

    def token_labels(self, tokens: list[int]) -> list[str]:
        return [{PLUS: "+", EQUALS: "="}.get(t, str(t)) for t in tokens]

    def accuracy_grid(self, predict: Predict) -> Tensor:
        """``[n_operands, n_operands]`` correctness (1/0) of every pair (a, b): Hu et al.'s accuracy map."""
        import torch

        a, b = torch.meshgrid(torch.arange(self.n_operands), torch.arange(self.n_operands), indexing="ij")
        tokens = torch.stack(
            [a.reshape(-1), torch.full((a.numel(),), PLUS), b.reshape(-1), torch.full((a.numel(),), EQUALS)], dim=1
        )
        return (predict(tokens) == (a + b).reshape(-1)).float().reshape(self.n_operands, self.n_operands)
