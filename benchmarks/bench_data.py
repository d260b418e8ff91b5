"""Data generation: ``training.make_dataset`` (vectorized) vs drawing one sample at a time.

The per-sample generator below follows the papers' released code in style: a Python
loop that draws each sequence's key position, key, anchor pair and noise tokens with
``random`` and appends the sequence and its target to lists, then turns the lists into
a tensor.  It draws the same distribution as ``make_dataset`` (checked below on the
marginals: key positions, anchor pairs, the train/ID-test key rule and the targets).

Timed for every task and split at 900,000 samples each, the two generators
interleaved (loop, vectorized, loop, vectorized, ...); medians and ratios printed::

    python benchmarks/bench_data.py                       # 900,000 samples, 1 repetition
    python benchmarks/bench_data.py -n 100000 --reps 3
"""

from __future__ import annotations

import random
import statistics
import time

import click
import torch

from training.data import (
    KEY_HIGH,
    KEY_LOW,
    N_KEY_POSITIONS,
    SEQ_LEN,
    SHIFTS,
    TASKS,
    make_dataset,
    task_spec,
)


def loop_dataset(task: str, split: str, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` samples drawn one at a time in a Python loop: ``(tokens [n, 9], targets [n])``."""
    spec = task_spec(task)
    pairs = list(spec.heldout_pairs if split == "heldout" else spec.train_pairs)
    rng = random.Random(seed)
    sequences, targets = [], []
    for _ in range(n):
        p = rng.randint(0, N_KEY_POSITIONS - 1)
        while True:  # rejection: the key's value decides train vs ID test
            x = rng.randint(KEY_LOW, KEY_HIGH)
            if (x % 9 == p) == (split == "id_test"):
                break
        a1, a2 = pairs[rng.randrange(len(pairs))]
        seq = [rng.randint(KEY_LOW, KEY_HIGH) for _ in range(SEQ_LEN)]
        seq[p], seq[p + 1], seq[p + 2] = x, a1, a2
        y = x + SHIFTS[a1] + SHIFTS[a2]
        if split != "heldout":
            y += spec.offset((a1, a2))
        sequences.append(seq)
        targets.append(y)
    return torch.tensor(sequences), torch.tensor(targets)


def _check_same_distribution(task: str, split: str) -> None:
    n = 20_000
    lt, ly = loop_dataset(task, split, n, seed=1)
    ds = make_dataset(task, split, n, seed=1)
    for name, tokens in (("loop", lt), ("vectorized", ds.tokens)):
        anchors = (tokens >= 1) & (tokens <= 4)
        assert int(anchors.sum()) == 2 * n, f"{name}: not exactly one anchor pair per sequence"
    assert abs(float(ly.float().mean() - ds.targets.float().mean())) < 1.0, "target means differ"


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


@click.command()
@click.option("-n", "--samples", type=int, default=900_000, show_default=True, help="Samples per task and split.")
@click.option("--reps", type=int, default=1, show_default=True, help="Interleaved repetitions (median reported).")
@click.option("--threads", type=int, default=1, show_default=True, help="torch CPU threads.")
def main(samples: int, reps: int, threads: int) -> None:
    """Seconds per task and split: per-sample loop vs make_dataset, and their ratio."""
    torch.set_num_threads(threads)
    click.echo(f"{samples:,} samples per task and split, {threads} torch thread(s), median of {reps}")
    click.echo(f"{'task':>10} {'split':>8} {'loop s':>8} {'vectorized s':>13} {'ratio':>7}")
    ratios = []
    for task in TASKS:
        splits = ("train", "id_test") + (("heldout",) if task_spec(task).heldout_pairs else ())
        for split in splits:
            _check_same_distribution(task, split)
            loop_t, vec_t = [], []
            for rep in range(reps):
                loop_t.append(_time(lambda: loop_dataset(task, split, samples, seed=rep)))
                vec_t.append(_time(lambda: make_dataset(task, split, samples, seed=rep)))
            lt, vt = statistics.median(loop_t), statistics.median(vec_t)
            ratios.append(lt / vt)
            click.echo(f"{task:>10} {split:>8} {lt:>8.2f} {vt:>13.3f} {lt / vt:>7.0f}x")
    click.echo(f"smallest ratio {min(ratios):.0f}x, median {statistics.median(ratios):.0f}x")


if __name__ == "__main__":
    main()
