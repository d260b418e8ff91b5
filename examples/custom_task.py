"""A task of your own, end to end: one class, trained by the same code as ``interp-init train``.

The task below is modular addition, a + b mod 23, with every pair whose difference a - b
is a multiple of 7 held out of training: does the model compose the rule for pairs it
never saw?  It is a :class:`interp_init.tasks.base.Task` (a frozen dataclass) with its
vocabulary and sequence length, its splits (:meth:`ModSumTask.make_split`), its metrics
(a frozen :class:`~interp_init.tasks.base.TaskMetrics` dataclass, written to ``metrics.json``)
and its evaluation.  Nothing in the package is edited: the command line is given the
class as ``custom_task:ModSumTask`` (this file's module name and the class; a script run has
its folder on the import path), trains it into a run folder and writes the report of that run.  docs/tasks.md explains each part.

    python examples/custom_task.py --out /tmp/custom                # preset tiny: seconds
    python examples/custom_task.py --preset cpu --out runs/custom   # minutes
    interp-init train --task custom_task:ModSumTask --preset tiny --out /tmp/run   # with examples/ on PYTHONPATH
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import click
import numpy as np
import torch

from interp_init import Samples, Task, TaskMetrics

MODULUS = 23
EQUALS = MODULUS  # the token of "=", after the residues 0..22


@dataclass(frozen=True)
class ModSumMetrics(TaskMetrics):
    """Accuracy on the training pairs, on unseen pairs outside the held-out set, and on the held-out pairs."""

    heldout_acc: float


@dataclass(frozen=True)
class ModSumTask(Task):
    """a + b mod 23 as ``[a, b, =]``; pairs with (a - b) mod 7 == 0 held out; one in ten of the
    others (a + 2b mod 10 == 0) is the in-distribution test set."""

    metrics_class: ClassVar[type[TaskMetrics]] = ModSumMetrics
    vocab_size: ClassVar[int] = MODULUS + 1
    seq_len: ClassVar[int] = 3

    def pairs(self, split: str) -> np.ndarray:
        a, b = np.divmod(np.arange(MODULUS**2), MODULUS)
        heldout = (a - b) % 7 == 0
        id_test = ~heldout & ((a + 2 * b) % 10 == 0)
        keep = {"train": ~heldout & ~id_test, "id_test": id_test, "heldout": heldout}[split]
        return np.stack([a[keep], b[keep]], axis=1)

    def make_split(self, split: str, n: int, seed: int) -> Samples:
        pairs = self.pairs(split)
        chosen = torch.from_numpy(pairs[np.random.default_rng(seed).integers(0, len(pairs), size=n)])
        tokens = torch.cat([chosen, torch.full((n, 1), EQUALS)], dim=1)
        return Samples(self.name, split, tokens, chosen.sum(1) % MODULUS, {})

    def evaluate(self, predict, train: Samples, id_test: Samples, heldout: Samples | None) -> ModSumMetrics:
        def acc(data: Samples) -> float:
            return float((predict(data.tokens) == data.targets).float().mean())

        return ModSumMetrics(acc(train), acc(id_test), acc(heldout))


@click.command()
@click.option("--preset", default="tiny", show_default=True, help="Run size: tiny (seconds), cpu (minutes) or paper.")
@click.option(
    "--out",
    default="runs/examples/custom_task",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder: the run folder and the report.",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Run seed.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
def main(preset: str, out: Path, seed: int, device: str) -> None:
    from training.cli import main as interp_init

    run = out / "mod-sum"
    argv = [
        "train",
        "--task",
        "custom_task:ModSumTask",
        "--preset",
        preset,
        "--seed",
        str(seed),
        "--device",
        device,
        "--quiet",
        "--out",
        str(run),
    ]
    print("interp-init " + " ".join(argv))
    code = interp_init(argv)
    if code == 0:
        code = interp_init(
            [
                "report",
                str(run),
                "--out",
                str(out / "custom_task.html"),
                "--device",
                "cpu" if device == "auto" else device,
            ]
        )
    sys.exit(code)


if __name__ == "__main__":
    main()
