"""The anchor-function tasks: tokens, anchors, pairs, splits and targets (no torch needed).

Tokens 1, 2, 3, 4 are *anchors*, each a function g(x; a) = x + s(a) with
s = {1: +5, 2: +1, 3: -2, 4: -8}.  A sequence holds 9 tokens: noise drawn uniformly from
20..99, a key x at position p (uniform in 0..6) and one adjacent anchor pair (a1, a2) at
positions p+1, p+2.  The target, predicted at the last position, is the composite
f(x; a1, a2) = x + s(a1) + s(a2), unless the task gives the pair another mapping
(`docs/science.md <../docs/science.md#the-task>`_).

Tasks: ``symmetric`` (14 pairs with f, pair (3,4) with the non-inferential x - 6, (4,3)
held out with candidate targets inferential x - 10 and symmetric x - 6), ``id-ood`` (14
pairs with f, (3,4) and (4,3) held out) and ``complexity`` (all 16 pairs; the first ``k``
of the 6 symmetric groups get target f + ``offset``; no held-out pair).

An anchor pair is an :class:`AnchorPair` (a tuple ``(a1, a2)``); in JSON files (a run's
``metrics.json``) and table columns it is written ``"a1,a2"`` (:meth:`AnchorPair.key`).
:mod:`interp_init.tasks.data` draws the samples.

Example::

    >>> from interp_init.tasks.anchor_pairs import task_spec
    >>> spec = task_spec("symmetric")
    >>> spec.heldout_pairs, spec.candidates
    ((AnchorPair(first=4, second=3),), {'inferential': 0, 'symmetric': 4})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NamedTuple, get_args

if TYPE_CHECKING:
    from torch import Tensor


class AnchorPair(NamedTuple):
    """An ordered anchor pair (a1, a2): a1 at position p+1, a2 at p+2.  A plain tuple, so
    ``AnchorPair(4, 3) == (4, 3)``."""

    first: int
    second: int

    @property
    def key(self) -> str:
        """The pair as JSON keys and table columns write it: ``"4,3"``."""
        return f"{self.first},{self.second}"

    @classmethod
    def parse(cls, text: str | tuple[int, int]) -> AnchorPair:
        """``"4,3"``, ``"(4,3)"`` or ``(4, 3)`` -> ``AnchorPair(4, 3)``; anything else is a ``ValueError``."""
        if isinstance(text, tuple):
            parts: list = list(text)
        else:
            parts = str(text).strip().strip("()").split(",")
        try:
            a, b = (int(str(p).strip()) for p in parts)
        except ValueError:
            raise ValueError(f"an anchor pair is written 'a1,a2' with anchors in {ANCHORS}, got {text!r}") from None
        if a not in ANCHORS or b not in ANCHORS:
            raise ValueError(f"an anchor pair is written 'a1,a2' with anchors in {ANCHORS}, got {text!r}")
        return cls(a, b)


#: The anchor tokens 1, 2, 3, 4; each is the function g(x; a) = x + ``SHIFTS[a]``.
ANCHORS: tuple[int, ...] = (1, 2, 3, 4)
#: Each anchor's shift s(a) (the papers' 5, 1, -2, -8): the composite of a pair is x + s(a1) + s(a2).
SHIFTS: dict[int, int] = {1: 5, 2: 1, 3: -2, 4: -8}
KEY_LOW, KEY_HIGH = 20, 99  # inclusive range of keys and noise tokens
SEQ_LEN = 9
N_KEY_POSITIONS = 7  # p in 0..6
#: The distinct (key, key position) inputs of one anchor pair (training keys: x mod 9 != p),
#: what its target depends on; other inputs of the pair differ only in noise tokens.
KEY_INPUTS = sum(1 for p in range(N_KEY_POSITIONS) for x in range(KEY_LOW, KEY_HIGH + 1) if x % 9 != p)
VOCAB_SIZE = 201
Task = Literal["symmetric", "id-ood", "complexity"]
Split = Literal["train", "id_test", "heldout"]
#: The built-in anchor-function tasks' names (``symmetric``, ``id-ood``, ``complexity``).
TASKS: tuple[Task, ...] = get_args(Task)
#: A task's sample splits: the training set, the in-distribution test set, the held-out pairs.
SPLITS: tuple[Split, ...] = get_args(Split)
ALL_PAIRS: tuple[AnchorPair, ...] = tuple(AnchorPair(a, b) for a in ANCHORS for b in ANCHORS)
#: The 6 symmetric groups, in the papers' order; ``complexity`` with ``k`` offsets the first k.
SYMMETRIC_GROUPS: tuple[tuple[tuple[int, int], tuple[int, int]], ...] = (
    ((1, 2), (2, 1)),
    ((1, 3), (3, 1)),
    ((1, 4), (4, 1)),
    ((2, 3), (3, 2)),
    ((2, 4), (4, 2)),
    ((3, 4), (4, 3)),
)
#: Version of the sample stream: the same seed gives the same samples within a version.
#: Bump it whenever a change to :func:`make_dataset` changes what a seed draws; run folders
#: record it, so a folder made with another stream is refused rather than silently mixed.
DATA_VERSION = 4
#: The symmetric task's non-inferential target for (3, 4): x - 6 instead of f = x - 10.
SYMMETRIC_TASK_OFFSET = 4


def composite(x: Tensor | int, a1: Tensor | int, a2: Tensor | int) -> Tensor | int:
    """f(x; a1, a2) = x + s(a1) + s(a2), on ints or tensors of anchors."""
    if isinstance(a1, int) and isinstance(a2, int):
        return x + SHIFTS[a1] + SHIFTS[a2]
    import torch  # only for tensors: the task's definitions need no torch

    table = torch.zeros(max(ANCHORS) + 1, dtype=torch.int64)
    for a, s in SHIFTS.items():
        table[a] = s
    return x + table[torch.as_tensor(a1)] + table[torch.as_tensor(a2)]


#: The released code's sets (sjtuzzw/complexity_control, ``data.py``): ``data_size`` samples
#: split over 32 groups, each anchor pair with training keys (weight 9) and with test keys
#: (weight 1); its 900,000 give each pair 50,625 samples with training keys (the pair's
#: training set, or its held-out set for an unseen pair) and 5,625 with test keys (its ID
#: test set), each drawn independently (with replacement).
RELEASED_PER_PAIR: dict[str, int] = {"train": 50_625, "id_test": 5_625}
#: The same for the complexity experiments' 100,000 samples: 5,625 training samples per
#: pair (their 625 ID test samples per pair make the default ``n_test``, 16 x 625 = 10,000).
RELEASED_COMPLEXITY_PER_PAIR: dict[str, int] = {"train": 5_625}
#: The option that sizes each split (messages name it).
SIZE_FLAGS: dict[str, str] = {"train": "--n-train", "id_test": "--n-test", "heldout": "--n-heldout"}


@dataclass(frozen=True)
class TaskSpec:
    """Which pairs a task trains on, which it holds out, and each pair's target offset from f."""

    name: str
    train_pairs: tuple[AnchorPair, ...]
    heldout_pairs: tuple[AnchorPair, ...]
    offsets: dict[AnchorPair, int] = field(default_factory=dict)
    #: For a held-out pair: named candidate targets as offsets from f.
    candidates: dict[str, int] = field(default_factory=dict)

    def offset(self, pair: tuple[int, int]) -> int:
        return self.offsets.get(pair, 0)

    def split_pairs(self, split: str) -> int:
        """How many anchor pairs a split's samples are drawn from."""
        return len(self.heldout_pairs if split == "heldout" else self.train_pairs)

    def check_sizes(self, sizes: Mapping[str, int], balanced: bool) -> None:
        """Refuse split sizes (split -> samples) this task cannot draw, with a ``ValueError``
        naming the flag: ``balanced`` (each pair gets the same number), a size that is not a
        multiple of the split's pairs."""
        for split, n in sizes.items() if balanced else ():
            pairs, flag = self.split_pairs(split), SIZE_FLAGS[split]
            if n % pairs:
                raise ValueError(
                    f"{flag} {n} is not a multiple of the {pairs} pairs of the {self.name!r} task's {split} split, and "
                    f"--balanced-pairs gives each pair the same number: give e.g. {flag} {n - n % pairs or pairs}, or --no-balanced-pairs"
                )

    def released_sets(self, per_pair: Mapping[str, int] = RELEASED_PER_PAIR) -> dict[str, int | bool]:
        """The options that draw the released code's sets, balanced per pair:
        ``per_pair["train"]`` samples per training pair and per held-out pair, and
        ``per_pair["id_test"]`` (where given) per pair in the ID test set (``symmetric``:
        759,375, 84,375 and 50,625)."""
        sets: dict[str, int | bool] = {"n_train": per_pair["train"] * self.split_pairs("train"), "balanced_pairs": True}
        if "id_test" in per_pair:
            sets["n_test"] = per_pair["id_test"] * self.split_pairs("id_test")
        return sets | ({"n_heldout": per_pair["train"] * self.split_pairs("heldout")} if self.heldout_pairs else {})


def task_spec(task: Task | str, k: int = 0, offset: int = 4) -> TaskSpec:
    """The :class:`TaskSpec` of a task name (see the module docstring)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {TASKS}")
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= len(SYMMETRIC_GROUPS):
        raise ValueError(f"k (inferential complexity) must be an integer in 0..{len(SYMMETRIC_GROUPS)}, got {k!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset == 0:
        raise ValueError(
            f"offset must be a non-zero integer (the shift of a non-inferential target from f), got {offset!r}"
        )
    if task != "complexity" and k != 0:
        raise ValueError(f"k applies to the 'complexity' task only, not {task!r}: leave it unset")
    if task == "symmetric":
        train = tuple(p for p in ALL_PAIRS if p != (4, 3))
        return TaskSpec(
            task,
            train,
            (AnchorPair(4, 3),),
            offsets={AnchorPair(3, 4): SYMMETRIC_TASK_OFFSET},
            candidates={"inferential": 0, "symmetric": SYMMETRIC_TASK_OFFSET},
        )
    if task == "id-ood":
        train = tuple(p for p in ALL_PAIRS if p not in ((3, 4), (4, 3)))
        return TaskSpec(task, train, (AnchorPair(3, 4), AnchorPair(4, 3)))
    offsets = {AnchorPair(*pair): offset for group in SYMMETRIC_GROUPS[:k] for pair in group}
    lowest = KEY_LOW + min(composite(0, a, b) + offsets.get((a, b), 0) for a, b in ALL_PAIRS)
    highest = KEY_HIGH + max(composite(0, a, b) + offsets.get((a, b), 0) for a, b in ALL_PAIRS)
    if lowest < 0 or highest >= VOCAB_SIZE:
        raise ValueError(
            f"offset {offset} puts targets in {lowest}..{highest}, outside the vocabulary 0..{VOCAB_SIZE - 1}"
        )
    return TaskSpec(task, ALL_PAIRS, (), offsets=offsets)


def highest_token(task: str, k: int = 0, offset: int = 4) -> int:
    """The largest token id a task's sequences or targets use (inputs, designated and
    candidate targets): a model's vocabulary must be larger than it."""
    spec = task_spec(task, k=k, offset=offset)
    extra = max([0, *spec.candidates.values()])
    targets = [
        composite(0, a, b) + spec.offset((a, b)) + (extra if (a, b) in spec.heldout_pairs else 0) for a, b in ALL_PAIRS
    ]
    return max(KEY_HIGH, KEY_HIGH + max(targets))
