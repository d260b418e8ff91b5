"""A byte-level language model on code: a stand-in for the journal's Fig. 7D.

The journal trains GPT-2 on SlimPajama's GitHub and Wikipedia sections and finds a lower
test perplexity at smaller init.  SlimPajama is not available offline; this task's corpus is
one every machine with Python has: **the Python standard library's own sources** (the running
interpreter's ``sysconfig.get_paths()["stdlib"]``: its ``.py`` files, without test suites,
``idlelib`` and installed packages).  It is a stand-in, not the same data: one language (Python)
and a smaller corpus, and it differs from one Python version to the next (the run's
``metrics.json`` does not record which; ``corpus_files`` says what a task instance reads).

Files are split, not lines: a file whose relative path's CRC-32 is a multiple of
:data:`TEST_EVERY` is a test file, every other a training file (the same file lands on the
same side on every machine).  Each side's files, in sorted order, are joined and cut into
windows of ``seq_len + 1`` bytes; a sample is one window, its tokens the first ``seq_len``
bytes (token id = byte value), its targets the next byte at every position (the loss at every
position, as a language model's).  Windows are drawn without replacement in an order from the
split's seed.  Metrics (:class:`CodeLmMetrics`): next-byte accuracy and perplexity on training
windows and on test windows.

Example::

    >>> task = CodeLmTask()
    >>> data = task.make_split("id_test", 2, seed=0)
    >>> data.tokens.shape, bool((data.targets[:, :-1] == data.tokens[:, 1:]).all())
    (torch.Size([2, 128]), True)
"""

from __future__ import annotations

import os
import sysconfig
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from interp_init.tasks.base import (
    PredictSequences,
    Samples,
    Task,
    TaskMetrics,
    Verdict,
    num,
    perplexity,
    status_solution,
    token_accuracy,
)
from interp_init.tasks.seq2seq import journal_recipe

#: One file in this many (by the CRC-32 of its path) is a test file.
TEST_EVERY = 10
#: Folders of the standard library left out: test suites, the IDLE editor, installed packages.
EXCLUDED = frozenset({"test", "tests", "idlelib", "site-packages", "dist-packages", "__pycache__"})


@dataclass(frozen=True)
class CodeLmMetrics(TaskMetrics):
    """Next-byte accuracy (``train_acc``, ``id_acc``: on test files) and perplexity per byte."""

    train_ppl: float
    test_ppl: float

    LABELS: ClassVar[dict[str, str]] = {"train_ppl": "train perplexity", "test_ppl": "test perplexity"}

    def deciding(self) -> str:
        return f"test perplexity {self.test_ppl:.2f}"


def corpus_files(root: str | Path | None = None) -> list[Path]:
    """The standard library's ``.py`` files under ``root`` (default: this interpreter's), sorted by relative path."""
    root = Path(sysconfig.get_paths()["stdlib"] if root is None else root)
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in EXCLUDED)
        found.extend(Path(folder) / f for f in files if f.endswith(".py"))
    if not found:
        raise ValueError(
            f"code-lm task: no .py files under {root}, the standard library this corpus is read from; run with a Python "
            "whose standard library has its .py sources (some minimal or frozen installs ship compiled files only)"
        )
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def is_test_file(relative: str) -> bool:
    """Whether the file at ``relative`` (a POSIX path under the standard library) is a test file."""
    return zlib.crc32(relative.encode()) % TEST_EVERY == 0


@lru_cache(maxsize=4)
def _windows(width: int) -> dict[str, np.ndarray]:
    root = Path(sysconfig.get_paths()["stdlib"])
    sides: dict[str, list[bytes]] = {"train": [], "id_test": []}
    for path in corpus_files(root):
        sides["id_test" if is_test_file(path.relative_to(root).as_posix()) else "train"].append(path.read_bytes())
    out = {}
    for split, texts in sides.items():
        data = np.frombuffer(b"\n".join(texts), dtype=np.uint8)
        out[split] = data[: len(data) // width * width].reshape(-1, width)
    return out


@dataclass(frozen=True)
class CodeLmTask(Task):
    """A byte-level language model on the Python standard library's sources (module docstring)."""

    output: ClassVar[str] = "sequence"
    metrics_class: ClassVar[type[TaskMetrics]] = CodeLmMetrics
    vocab_size: ClassVar[int] = 256
    seq_len: ClassVar[int] = 128
    default_architecture: ClassVar[str] = "standard"
    has_heldout: ClassVar[bool] = False
    report_sections: ClassVar[tuple[str, ...]] = (
        "verdict",
        "curves",
        "accuracies",
        "flow",
        "condensation",
        "stable_ranks",
        "spectra",
    )
    expected: ClassVar[str] = (
        "The journal (Fig. 7D): a GPT-2 trained on code (SlimPajama's GitHub section) reaches a lower test perplexity "
        "at smaller init; this corpus (the Python standard library) is a stand-in, not the same data."
    )

    def pools(self) -> dict[str, np.ndarray]:
        """Each split's windows of ``seq_len + 1`` bytes (read once per process)."""
        return _windows(self.seq_len + 1)

    def check_split_sizes(self, sizes: Any) -> None:
        flags = {"train": "--n-train", "id_test": "--n-test"}
        have = {split: len(w) for split, w in self.pools().items()}
        for split, n in sizes.items():
            if split in have and n > have[split]:
                raise ValueError(
                    f"code-lm: {flags[split]} {n} exceeds the {have[split]:,} {split} windows of the corpus; use {flags[split]} <= {have[split]}"
                )

    def make_split(self, split: str, n: int, seed: int) -> Samples:
        import torch

        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n (number of samples) must be an integer >= 1, got {n!r}")
        pools = self.pools()
        if split not in pools:
            raise ValueError(f"unknown split {split!r} of code-lm; choose one of {tuple(pools)}")
        if n > len(pools[split]):
            self.check_split_sizes({split: n})
        order = np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed))).permutation(len(pools[split]))[:n]
        windows = torch.from_numpy(pools[split][order].copy())
        return Samples(
            self.name,
            split,
            windows[:, :-1],
            windows[:, 1:].long(),
            {"index": torch.from_numpy(order.astype(np.int64))},
        )

    def evaluate(
        self, predict: PredictSequences, train: Samples, id_test: Samples, heldout: Samples | None
    ) -> CodeLmMetrics:
        tr, te = predict(train.tokens, train.targets), predict(id_test.tokens, id_test.targets)
        return CodeLmMetrics(
            token_accuracy(tr.argmax, train.targets),
            token_accuracy(te.argmax, id_test.targets),
            perplexity(tr.nll, train.targets),
            perplexity(te.nll, id_test.targets),
        )

    def verdict(self, final: TaskMetrics | None, status: str) -> Verdict:
        """A language model has no solution to name: ``language model``, with its test perplexity."""
        ppl = getattr(final, "test_ppl", None)
        evidence = f"test perplexity {num(ppl)} per byte, next-byte accuracy {num(None if final is None else final.id_acc)} on test files"
        return Verdict(status_solution("language model", status), evidence, self.expected)

    def token_labels(self, tokens: list[int]) -> list[str]:
        return [repr(chr(t))[1:-1] if t < 128 else f"\\x{t:02x}" for t in tokens]

    def preset_overrides(self, preset: str) -> dict[str, Any]:
        # tiny: fewer windows than other tasks' samples (128 positions each), to stay within
        # seconds.  paper and cpu: the journal's recipe (seq2seq.journal_recipe) on 40,000
        # windows, 10 epochs at cpu.
        if preset == "tiny":
            return dict(n_train=1_000, n_test=250, batch_size=128, eval_samples=250)
        if preset not in ("paper", "cpu"):
            return {}
        return (
            journal_recipe(preset)
            | dict(n_train=40_000, n_test=2_000, eval_samples=2_000)
            | ({"epochs": 10} if preset == "cpu" else {})
        )
