"""SCAN (Lake and Baroni, ICML 2018), the "add primitive" splits: the journal's Fig. 7A.

A command (``jump opposite left twice``) maps to an action sequence (``I_TURN_LEFT
I_TURN_LEFT I_JUMP ...``).  In the add-primitive splits a primitive is seen in training
only alone (``turn left``, or ``jump``) and the test set is every command that composes it:
a model that learned the grammar's rules gets them right.  The split files ship with the
package (BSD licence; :mod:`interp_init.tasks.shipped` checks their sha256):

* ``turn-left``: ``tasks_train_addprim_turn_left.txt`` (21,890 lines), test 1,208;
* ``jump``: ``tasks_train_addprim_jump.txt`` (14,670 lines), test 7,706.

Splits (:mod:`interp_init.tasks.seq2seq`): ``heldout`` is the benchmark's test file (the
out-of-distribution set); SCAN has no in-distribution test set, so ``id_test`` is a fixed
tenth (:data:`ID_TEST_FRACTION`, drawn once by :data:`ID_TEST_SEED`) of the commands that
occur once in the training file, never trained on (a repeated line, such as the primitive's
own ``turn left``, stays in training); ``train`` is the rest of the training file.  Metrics:
exact match (greedy decoding) on each (:class:`~interp_init.tasks.seq2seq.Seq2SeqMetrics`:
``train_acc``, ``id_acc``, ``ood_acc``).

Example::

    >>> task = ScanTask(split="turn-left")
    >>> data = task.make_split("heldout", 2, seed=0)
    >>> task.text(data.token_ids[0].tolist()).split(" <sep> ")[0]  # a command with "turn left" in it
    'turn left twice and turn right'
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from interp_init.tasks.seq2seq import Pair, Seq2SeqTask, journal_recipe
from interp_init.tasks.shipped import read_lines

#: Each split's training and test file (keys of :data:`interp_init.tasks.shipped.SHIPPED`).
SCAN_SPLITS: dict[str, tuple[str, str]] = {
    "turn-left": ("scan/tasks_train_addprim_turn_left.txt", "scan/tasks_test_addprim_turn_left.txt"),
    "jump": ("scan/tasks_train_addprim_jump.txt", "scan/tasks_test_addprim_jump.txt"),
}
#: SCAN's command words and actions (the whole grammar's).
COMMAND_WORDS: tuple[str, ...] = (
    "jump",
    "walk",
    "run",
    "look",
    "turn",
    "left",
    "right",
    "opposite",
    "around",
    "twice",
    "thrice",
    "and",
    "after",
)
ACTIONS: tuple[str, ...] = ("I_JUMP", "I_WALK", "I_RUN", "I_LOOK", "I_TURN_LEFT", "I_TURN_RIGHT")
#: The seed of the fixed draw of the ID test commands (the same for every run).
ID_TEST_SEED = 2024
ID_TEST_FRACTION = 10


def parse_line(line: str) -> Pair:
    """``IN: <command> OUT: <actions>`` as (command words, actions)."""
    if not line.startswith("IN: ") or " OUT: " not in line:
        raise ValueError(f"not a SCAN line (IN: ... OUT: ...): {line[:60]!r}")
    command, actions = line[4:].split(" OUT: ", 1)
    return tuple(command.split()), tuple(actions.split())


@dataclass(frozen=True)
class ScanTask(Seq2SeqTask):
    """SCAN's add-primitive splits (see the module docstring); ``split``: ``turn-left`` or ``jump``."""

    split: str = "turn-left"

    vocab_size: ClassVar[int] = 3 + len(COMMAND_WORDS) + len(ACTIONS)
    #: The longest command (9 words), ``<sep>``, the longest action sequence (48), ``<eos>``.
    seq_len: ClassVar[int] = 59
    expected: ClassVar[str] = (
        "The journal (Fig. 7A): on SCAN's add-primitive turn-left split, small init (large gamma) or large weight decay "
        "reaches higher out-of-distribution exact match than large init, across training-set sizes."
    )

    def __post_init__(self) -> None:
        if self.split not in SCAN_SPLITS:
            raise ValueError(f"scan task: unknown split {self.split!r}; choose one of {tuple(SCAN_SPLITS)} (--split)")

    def describe(self) -> str:
        return f"SCAN ({self.split})"

    def words(self) -> tuple[str, ...]:
        return COMMAND_WORDS + ACTIONS

    def read_pools(self) -> dict[str, list[Pair]]:
        train_file, test_file = SCAN_SPLITS[self.split]
        train = [parse_line(line) for line in read_lines(train_file)]
        counts = Counter(train)
        once = [i for i, pair in enumerate(train) if counts[pair] == 1]
        chosen = np.random.default_rng(ID_TEST_SEED).permutation(once)[: len(once) // ID_TEST_FRACTION]
        held = set(chosen.tolist())
        return {
            "train": [pair for i, pair in enumerate(train) if i not in held],
            "id_test": [train[i] for i in sorted(held)],
            "heldout": [parse_line(line) for line in read_lines(test_file)],
        }

    def preset_overrides(self, preset: str) -> dict[str, Any]:
        # The journal's recipe (seq2seq.journal_recipe): paper at the released script's 10,000
        # training samples, cpu at 12,000 (both splits' pools hold them; jump's is the smaller).
        sizes = {"paper": 10_000, "cpu": 12_000}
        if preset not in sizes:
            return {}
        return journal_recipe(preset) | dict(n_train=sizes[preset], n_test=1_000, n_heldout=1_000, eval_samples=1_000)
