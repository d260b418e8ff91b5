"""COGS (Kim and Linzen, EMNLP 2020): English sentences to logical forms, the journal's Fig. 7B.

A sentence (``A rose was helped by a dog .``) maps to its logical form (``rose ( x _ 1 ) AND
help . theme ( x _ 3 , x _ 1 ) AND ...``), both as the benchmark's space-separated tokens.
The files ship with the package (MIT licence; :mod:`interp_init.tasks.shipped` checks their
sha256): ``data/train.tsv`` (24,155 lines) and ``data/test.tsv`` (3,000, the in-distribution
test set).  ``dev.tsv`` (3,000 more ID samples) is not shipped: no split here reads it.

**In distribution only.**  COGS's generalization set ``gen.tsv`` (21,000 samples, the
out-of-distribution test the journal reports) is not in the stored copy of the repository
this package was built from, and no public copy of the official file could be found offline
(copies of other versions, such as variable-free or ReCOGS reformattings, are not the same
data).  So the task has no ``heldout`` split: its metrics are exact match on training
samples and on the ID test set (:class:`CogsMetrics`), and it cannot show the journal's OOD
difference.  Splits (:mod:`interp_init.tasks.seq2seq`): ``train`` from ``train.tsv``,
``id_test`` from ``test.tsv``, drawn without replacement.

Example::

    >>> task = CogsTask()
    >>> task.pool_sizes()
    {'train': 24155, 'id_test': 3000}
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

from interp_init.tasks.base import TaskMetrics
from interp_init.tasks.seq2seq import Pair, Seq2SeqTask, journal_recipe
from interp_init.tasks.shipped import read_lines

#: The shipped files, by split (keys of :data:`interp_init.tasks.shipped.SHIPPED`).
COGS_FILES: dict[str, str] = {"train": "cogs/train.tsv", "id_test": "cogs/test.tsv"}


def parse_line(line: str) -> Pair:
    """``sentence <TAB> logical form <TAB> kind`` as (sentence tokens, logical-form tokens)."""
    parts = line.split("\t")
    if len(parts) != 3:
        raise ValueError(f"not a COGS line (sentence, logical form, kind): {line[:60]!r}")
    return tuple(parts[0].split()), tuple(parts[1].split())


@dataclass(frozen=True)
class CogsMetrics(TaskMetrics):
    """Exact match (greedy decoding) on training samples and on COGS's ID test set."""


@lru_cache(maxsize=1)
def cogs_words() -> tuple[str, ...]:
    """Every word of the shipped sentences and logical forms, sorted (the vocabulary after the specials)."""
    words: set[str] = set()
    for name in COGS_FILES.values():
        for source, target in map(parse_line, read_lines(name)):
            words.update(source, target)
    return tuple(sorted(words))


@dataclass(frozen=True)
class CogsTask(Seq2SeqTask):
    """COGS, in distribution only (see the module docstring)."""

    metrics_class: ClassVar[type[TaskMetrics]] = CogsMetrics
    has_heldout: ClassVar[bool] = False
    #: The specials and the 832 words of the shipped files.
    vocab_size: ClassVar[int] = 835
    #: The longest shipped sample: sentence, ``<sep>``, logical form, ``<eos>``.
    seq_len: ClassVar[int] = 177
    benchmark: ClassVar[str] = "COGS"
    expected: ClassVar[str] = (
        "The journal (Fig. 7B): at 20,000 training samples small and large init both pass 99% ID exact match on COGS, "
        "while their out-of-distribution (gen) accuracy differs; gen is not available here, so only the ID half can be compared."
    )

    def words(self) -> tuple[str, ...]:
        return cogs_words()

    def read_pools(self) -> dict[str, list[Pair]]:
        return {split: [parse_line(line) for line in read_lines(name)] for split, name in COGS_FILES.items()}

    def preset_overrides(self, preset: str) -> dict[str, Any]:
        # tiny: fewer, smaller batches than other tasks' (COGS's samples are up to 177 tokens
        # over a vocabulary of 835), to stay within seconds.  paper and cpu: the journal's recipe
        # (seq2seq.journal_recipe) at its 20,000 training samples.
        if preset == "tiny":
            return dict(n_train=600, n_test=200, batch_size=64, eval_samples=200)
        if preset not in ("paper", "cpu"):
            return {}
        return journal_recipe(preset) | dict(n_train=20_000, n_test=1_000, eval_samples=1_000)
