"""PrOntoQA-style k-hop reasoning over a fictional ontology (Saparov and He, ICLR 2023), generated
here from the paper's description: the journal's Fig. 7E.

Each sample is a small world in words, then a true/false question about it::

    every wumpus is a yumpus . every yumpus is a zumpus . every zumpus is not red .
    every dumpus is a rompus . every rompus is a numpus . every numpus is red .
    alex is a wumpus . question : alex is red ? -> false

Two chains of ``hops`` "every A is a B" rules over fictional concepts (drawn without
replacement from :data:`CONCEPTS`) each end in a rule about the same property, one of them
negated; the entity is a member of the first concept of one chain.  The question asks whether
it has the property (or not: half the questions are negated), so the answer follows only by
walking the entity's own chain for ``hops`` steps to its property rule: the other chain's rule
says the opposite.  The sentences are shuffled (PrOntoQA's shuffled ordering), the sequence is
left-padded to :attr:`PrOntoQATask.seq_len`, and the target, read at the last position, is
``true`` or ``false`` (balanced).  Unlike the paper, no chain-of-thought is trained: the model
answers in one token (the journal's setting for this figure is not in its released code).

Splits: ``train`` and ``id_test`` draw chains of 1..``hops`` hops (uniformly), from the
split's seed; ``heldout`` draws chains of ``hops + 1`` hops: one more step of reasoning than
any training sample needs (the out-of-distribution set).  The data size is ``--n-train``;
the depth is ``--hops`` (1..:data:`MAX_HOPS`).  Metrics: accuracy on each
(:class:`PrOntoQAMetrics`: ``train_acc``, ``id_acc``, ``ood_acc``).

Example::

    >>> task = PrOntoQATask(hops=2)
    >>> data = task.make_split("train", 1, seed=0)
    >>> " ".join(task.token_labels(data.token_ids[0].tolist())).split(" question ")[1]
    ': polly is hot ?'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from interp_init.tasks.base import FIT_THRESHOLD, Predict, Samples, Task, TaskMetrics, Verdict, num, status_solution

#: Fictional concept names (the paper's kind of made-up nouns).
CONCEPTS: tuple[str, ...] = (
    "wumpus",
    "yumpus",
    "zumpus",
    "dumpus",
    "rompus",
    "numpus",
    "tumpus",
    "vumpus",
    "impus",
    "jompus",
    "gorpus",
    "shumpus",
    "lempus",
    "sterpus",
    "grimpus",
    "lorpus",
    "brimpus",
    "rempus",
    "felpus",
    "kerpus",
    "timpus",
    "yimpus",
    "zhumpus",
    "bempus",
)
#: The properties a rule may give.
PROPERTIES: tuple[str, ...] = (
    "red",
    "blue",
    "small",
    "large",
    "hot",
    "cold",
    "fast",
    "slow",
    "happy",
    "sad",
    "bright",
    "dull",
)
#: The entities a question is about.
NAMES: tuple[str, ...] = ("alex", "fae", "max", "polly", "rex", "sally", "sam", "wren")
#: The function words, the two answers and the padding.
WORDS: tuple[str, ...] = ("<pad>", "every", "is", "a", "not", ".", "question", ":", "?", "true", "false")
VOCABULARY: tuple[str, ...] = WORDS + CONCEPTS + PROPERTIES + NAMES
PAD, TRUE, FALSE = VOCABULARY.index("<pad>"), VOCABULARY.index("true"), VOCABULARY.index("false")
#: The deepest chain ``--hops`` may ask for (the held-out split's is one more).
MAX_HOPS = 5
#: OOD accuracy at or above which a run is said to generalize to the deeper chains.
OOD_THRESHOLD = 0.9


@dataclass(frozen=True)
class PrOntoQAMetrics(TaskMetrics):
    """Answer accuracy on training samples, ID test samples (1..hops hops) and ``hops + 1``-hop samples."""

    ood_acc: float

    LABELS: ClassVar[dict[str, str]] = {"ood_acc": "OOD (hops + 1)"}

    def deciding(self) -> str:
        return f"OOD {self.ood_acc:.2f}"


@dataclass(frozen=True)
class PrOntoQATask(Task):
    """k-hop true/false questions over a generated fictional ontology (module docstring)."""

    hops: int = 3

    metrics_class: ClassVar[type[TaskMetrics]] = PrOntoQAMetrics
    vocab_size: ClassVar[int] = len(VOCABULARY)
    #: Two chains of MAX_HOPS + 1 rules (6 tokens each), two property rules (up to 6), the fact (5) and the question (up to 7).
    seq_len: ClassVar[int] = 2 * (MAX_HOPS + 1) * 6 + 2 * 6 + 5 + 7
    default_architecture: ClassVar[str] = "standard"
    expected: ClassVar[str] = (
        "The journal (Fig. 7E): on PrOntoQA, small init converges faster and generalizes better; large init's convergence "
        "is non-monotone in the data size (it memorizes, then reasons)."
    )

    def __post_init__(self) -> None:
        if isinstance(self.hops, bool) or not isinstance(self.hops, int) or not 1 <= self.hops <= MAX_HOPS:
            raise ValueError(f"prontoqa task: hops must be an integer in 1..{MAX_HOPS}, got {self.hops!r} (--hops)")

    def sentences(self, rng: np.random.Generator, hops: int) -> tuple[list[list[str]], bool]:
        """One world's sentences (shuffled, the question last) and its answer."""
        concepts = rng.choice(len(CONCEPTS), size=2 * (hops + 1), replace=False)
        chains = [[CONCEPTS[c] for c in concepts[: hops + 1]], [CONCEPTS[c] for c in concepts[hops + 1 :]]]
        prop = PROPERTIES[rng.integers(len(PROPERTIES))]
        negated = bool(rng.integers(2))  # whether the entity's own chain ends in "is not P"
        world = []
        for i, chain in enumerate(chains):
            world += [["every", a, "is", "a", b, "."] for a, b in zip(chain[:-1], chain[1:])]
            world.append(["every", chain[-1], "is", *(["not"] if negated == (i == 0) else []), prop, "."])
        name = NAMES[rng.integers(len(NAMES))]
        world.append([name, "is", "a", chains[0][0], "."])
        order = rng.permutation(len(world))
        asked_not = bool(rng.integers(2))
        question = ["question", ":", name, "is", *(["not"] if asked_not else []), prop, "?"]
        return [world[i] for i in order] + [question], asked_not == negated

    def make_split(self, split: str, n: int, seed: int) -> Samples:
        import torch

        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n (number of samples) must be an integer >= 1, got {n!r}")
        if split not in ("train", "id_test", "heldout"):
            raise ValueError(f"unknown split {split!r} of prontoqa; choose one of ('train', 'id_test', 'heldout')")
        rng = np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed)))
        index = {w: i for i, w in enumerate(VOCABULARY)}
        tokens = np.full((n, self.seq_len), PAD, dtype=np.uint8)
        answers = np.zeros(n, dtype=np.int64)
        depth = np.full(n, self.hops + 1) if split == "heldout" else rng.integers(1, self.hops + 1, size=n)
        for row in range(n):
            sentences, answer = self.sentences(rng, int(depth[row]))
            ids = [index[w] for s in sentences for w in s]
            tokens[row, self.seq_len - len(ids) :] = ids  # left-padded: the question ends at the last position
            answers[row] = TRUE if answer else FALSE
        return Samples(
            self.name,
            split,
            torch.from_numpy(tokens),
            torch.from_numpy(answers),
            {"hops": torch.from_numpy(depth.astype(np.int64))},
        )

    def evaluate(self, predict: Predict, train: Samples, id_test: Samples, heldout: Samples | None) -> PrOntoQAMetrics:
        def acc(data: Samples | None) -> float:
            return float("nan") if data is None else float((predict(data.tokens) == data.targets).float().mean())

        return PrOntoQAMetrics(acc(train), acc(id_test), acc(heldout))

    def verdict(self, final: TaskMetrics | None, status: str) -> Verdict:
        """``generalizes`` when the ``hops + 1`` accuracy reaches :data:`OOD_THRESHOLD`, ``ID only``
        when it does not, ``did not fit`` when the ID accuracy is below 0.9."""
        id_acc = None if final is None else final.id_acc
        ood = getattr(final, "ood_acc", None)
        if id_acc is None or id_acc < FIT_THRESHOLD:
            solution = "did not fit"
        else:
            solution = "generalizes" if ood is not None and ood >= OOD_THRESHOLD else "ID only"
        return Verdict(
            status_solution(solution, status),
            f"ID accuracy {num(id_acc)}, {self.hops + 1}-hop accuracy {num(ood)}",
            self.expected,
        )

    def token_labels(self, tokens: list[int]) -> list[str]:
        return [VOCABULARY[t] if 0 <= t < len(VOCABULARY) else str(t) for t in tokens]

    def preset_overrides(self, preset: str) -> dict[str, Any]:
        # paper and cpu: the journal's Fig. 7 recipe (interp_init.tasks.seq2seq.journal_recipe);
        # the data size is the figure's swept variable (--n-train).
        from interp_init.tasks.seq2seq import journal_recipe

        if preset not in ("paper", "cpu"):
            return {}
        return journal_recipe(preset) | dict(n_train=20_000, n_test=1_000, eval_samples=1_000)
