"""Sequence-to-sequence benchmarks on a decoder-only model (SCAN, COGS): the shared part.

A sample is a source and a target word sequence, encoded as one token sequence
``[source..., <sep>, target..., <eos>, <pad>...]`` of the task's ``seq_len``; the model
reads it left to right and is trained on the target positions only: ``targets[p]`` is the
next token at each position from ``<sep>`` to the last target word (the target words and
``<eos>``), :data:`~interp_init.tasks.base.IGNORE` elsewhere (the loss mask; the released
code's "loss on the target tokens").  A sample is right when greedy decoding from
``[source..., <sep>]`` reproduces the target and ``<eos>``
(:func:`~interp_init.tasks.base.exact_match`, one teacher-forced pass).

A task here (:class:`Seq2SeqTask`) says where its pairs come from (:meth:`Seq2SeqTask.read_pools`:
each split's pool of (source, target) pairs); a split of ``n`` samples is the first ``n`` of
the pool in an order drawn from the split's seed (without replacement: a benchmark's test set
is a set), so a size above the pool's is refused (:meth:`Seq2SeqTask.check_split_sizes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from interp_init.tasks.base import (
    FIT_THRESHOLD,
    IGNORE,
    PredictSequences,
    Samples,
    Task,
    TaskMetrics,
    Verdict,
    exact_match,
    num,
    status_solution,
)

if TYPE_CHECKING:
    from torch import Tensor

#: The special tokens, first in every vocabulary: padding, the source/target separator, the end.
SPECIALS: tuple[str, ...] = ("<pad>", "<sep>", "<eos>")
PAD, SEP, EOS = 0, 1, 2
#: OOD exact-match accuracy at or above which a run is said to generalize compositionally.
OOD_THRESHOLD = 0.9

Pair = tuple[tuple[str, ...], tuple[str, ...]]


def journal_recipe(preset: str) -> dict[str, Any]:
    """The journal's Fig. 7 recipe (the released ``fig_code/fig7``: a GPT-2 from scratch, constant
    lr 5e-5, batch 20, no weight decay, 20 epochs) for ``paper``, and carried to CPU width for
    ``cpu`` (2 layers, d_model 128, batch 64, constant lr 5e-4: the narrower model's); the
    sequence tasks add their data sizes.  None for other presets."""
    constant = dict(warmup_epochs=0.0, cosine_epochs=0.0, weight_decay=0.0)
    if preset == "paper":
        lr = 5e-5
        return dict(
            n_layers=12,
            d_model=768,
            n_heads=12,
            d_head=64,
            d_mlp=3072,
            epochs=20,
            batch_size=20,
            lr=lr,
            warmup_start_lr=lr,
            min_lr=lr,
            **constant,
        )
    if preset == "cpu":
        lr = 5e-4
        return dict(
            n_layers=2,
            d_model=128,
            n_heads=4,
            d_head=32,
            d_mlp=512,
            epochs=20,
            batch_size=64,
            lr=lr,
            warmup_start_lr=lr,
            min_lr=lr,
            **constant,
        )
    return {}


@dataclass(frozen=True)
class Seq2SeqMetrics(TaskMetrics):
    """Exact-match accuracy (greedy decoding) on training samples, the ID test set and the
    out-of-distribution (generalization) set."""

    ood_acc: float

    LABELS: ClassVar[dict[str, str]] = {"ood_acc": "OOD"}

    def deciding(self) -> str:
        return f"OOD {self.ood_acc:.2f}"


@dataclass(frozen=True)
class Seq2SeqTask(Task):
    """The base of the sequence-to-sequence tasks (module docstring).  A subclass sets
    ``vocab_size``, ``seq_len``, ``benchmark`` and defines :meth:`read_pools` and
    :meth:`words` (the vocabulary after :data:`SPECIALS`)."""

    output: ClassVar[str] = "sequence"
    metrics_class: ClassVar[type[TaskMetrics]] = Seq2SeqMetrics
    default_architecture: ClassVar[str] = "standard"
    #: The benchmark's name in messages (``SCAN (turn-left)``).
    benchmark: ClassVar[str] = ""
    #: The report sections that apply (the anchor-only ones do not).
    report_sections: ClassVar[tuple[str, ...]] = (
        "verdict",
        "curves",
        "accuracies",
        "flow",
        "condensation",
        "stable_ranks",
        "spectra",
    )

    def read_pools(self) -> dict[str, list[Pair]]:
        """Every split's (source, target) pairs, in the files' order."""
        raise NotImplementedError

    def words(self) -> tuple[str, ...]:
        """The vocabulary's words (token ids from ``len(SPECIALS)`` on)."""
        raise NotImplementedError

    def describe(self) -> str:
        """The task in messages: its name and options."""
        return self.benchmark or self.name

    def vocabulary(self) -> tuple[str, ...]:
        """Every token's text, by id: :data:`SPECIALS`, then :meth:`words`."""
        return SPECIALS + self.words()

    def pools(self) -> dict[str, list[Pair]]:
        """Every split's pairs (read once per task), each checked to fit ``seq_len``."""
        return _pools(self)

    def pool_sizes(self) -> dict[str, int]:
        """How many pairs each split has."""
        return {split: len(pairs) for split, pairs in self.pools().items()}

    def check_split_sizes(self, sizes: Any) -> None:
        """Refuse a split size above its pool's (the samples are drawn without replacement)."""
        flags = {"train": "--n-train", "id_test": "--n-test", "heldout": "--n-heldout"}
        have = self.pool_sizes()
        for split, n in sizes.items():
            if split in have and n > have[split]:
                raise ValueError(
                    f"{self.describe()}: {flags.get(split, split)} {n} exceeds the {have[split]:,} {split} samples the benchmark has; "
                    f"use {flags.get(split, split)} <= {have[split]}"
                )

    def encode(self, pairs: list[Pair]) -> tuple[Tensor, Tensor]:
        """``token_ids [n, seq_len]`` and ``targets [n, seq_len]`` of (source, target) pairs."""
        import torch

        index = {w: i for i, w in enumerate(self.vocabulary())}
        tokens = np.full((len(pairs), self.seq_len), PAD, dtype=np.int64)
        targets = np.full((len(pairs), self.seq_len), IGNORE, dtype=np.int64)
        for row, (source, target) in enumerate(pairs):
            ids = [index[w] for w in source] + [SEP] + [index[w] for w in target] + [EOS]
            tokens[row, : len(ids)] = ids
            start = len(source)  # <sep>: from here the next token is the target's
            targets[row, start : len(ids) - 1] = ids[start + 1 :]
        dtype = torch.uint8 if len(index) <= 256 else torch.int16
        return torch.from_numpy(tokens).to(dtype), torch.from_numpy(targets)

    def make_split(self, split: str, n: int, seed: int) -> Samples:
        import torch

        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n (number of samples) must be an integer >= 1, got {n!r}")
        pools = self.pools()
        if split not in pools:
            raise ValueError(f"unknown split {split!r} of {self.describe()}; choose one of {tuple(pools)}")
        pool = pools[split]
        if n > len(pool):
            self.check_split_sizes({split: n})
        order = np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed))).permutation(len(pool))[:n]
        tokens, targets = self.encode([pool[i] for i in order])
        meta = {
            "index": torch.from_numpy(order.astype(np.int64)),
            "source_len": torch.tensor([len(pool[i][0]) for i in order]),
        }
        return Samples(self.name, split, tokens, targets, meta)

    def evaluate(
        self, predict: PredictSequences, train: Samples, id_test: Samples, heldout: Samples | None
    ) -> TaskMetrics:
        def acc(data: Samples | None) -> float:
            if data is None:
                return float("nan")
            return float(exact_match(predict(data.tokens, data.targets).argmax, data.targets).float().mean())

        if not self.has_heldout:
            return self.metrics_class(acc(train), acc(id_test))
        return self.metrics_class(acc(train), acc(id_test), acc(heldout))

    def verdict(self, final: TaskMetrics | None, status: str) -> Verdict:
        """``generalizes`` when the OOD exact match reaches :data:`OOD_THRESHOLD`, ``ID only``
        when it does not, ``did not fit`` when the ID exact match is below 0.9."""
        id_acc = None if final is None else final.id_acc
        ood = getattr(final, "ood_acc", None)
        if id_acc is None or id_acc < FIT_THRESHOLD:
            solution = "did not fit"
        elif not self.has_heldout:
            solution = "fit"
        else:
            solution = "generalizes" if ood is not None and ood >= OOD_THRESHOLD else "ID only"
        evidence = f"ID exact match {num(id_acc)}" + (f", OOD exact match {num(ood)}" if self.has_heldout else "")
        return Verdict(status_solution(solution, status), evidence, self.expected)

    def sample_input(self) -> Samples:
        return self.make_split("heldout" if self.has_heldout else "id_test", 1, 0)

    def token_labels(self, tokens: list[int]) -> list[str]:
        vocab = self.vocabulary()
        return [vocab[t] if 0 <= t < len(vocab) else str(t) for t in tokens]

    def text(self, tokens: list[int]) -> str:
        """A token sequence as words, without padding."""
        return " ".join(w for w in self.token_labels(tokens) if w != SPECIALS[PAD])


@lru_cache(maxsize=16)
def _pools(task: Seq2SeqTask) -> dict[str, list[Pair]]:
    pools = task.read_pools()
    known = set(task.words())
    for split, pairs in pools.items():
        for source, target in pairs:
            if len(source) + len(target) + 2 > task.seq_len:
                raise ValueError(
                    f"{task.describe()}: a {split} sample has {len(source) + len(target) + 2} tokens, more than the task's "
                    f"seq_len {task.seq_len}; set the task class's seq_len to at least the longest sample's tokens"
                )
            if unknown := (set(source) | set(target)) - known:
                raise ValueError(
                    f"{task.describe()}: a {split} sample has words outside the vocabulary: {sorted(unknown)[:5]}; "
                    "add them to the task's words()"
                )
    return pools
