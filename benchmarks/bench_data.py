"""Data generation: ``training.make_dataset`` (vectorized) vs drawing one sample at a time.

Two per-sample baselines, both drawing the same distribution as ``make_dataset``
(checked below on the marginals):

* ``released`` follows the structure of the papers' released generator
  (``anchor_function_pub``: ``data.py`` and ``data_generator/composition.py``): one list
  comprehension per anchor pair ("data mode") with its share of the samples, each sample a
  call that draws ``seq_len + 1`` noise tokens with ``random.randint``, a key position and
  a key with ``random.choice`` from the split's key list, computes the target with two
  calls of the single-anchor function, and writes it into the last slot; the groups are
  joined with list ``+``, then one ``np.array``.  This is the issue's baseline.
* ``lean`` is the fastest per-sample loop we could write: a key drawn by rejection, a
  random pair per sample, one ``torch.tensor`` at the end.

Timed for every task and split at 900,000 samples each, the generators interleaved
(released, lean, 5 x vectorized, ...); medians and ratios printed.  The ``cold`` column
is ``make_dataset``'s first call in a fresh Python process (imports done, nothing
allocated yet): it pays the page faults of the 37 MB of new output memory that later
calls in a long process mostly reuse, and its ratio is the one a user making one dataset
sees::

    python benchmarks/bench_data.py                       # 900,000 samples, 1 repetition
    python benchmarks/bench_data.py -n 100000 --reps 3
    python benchmarks/bench_data.py --threads 2          # blocks drawn on 2 threads
"""

from __future__ import annotations

import math
import random
import statistics
import subprocess
import sys
import time

import click
import numpy as np
import torch

from interp_init.tasks.anchor_pairs import KEY_HIGH, KEY_LOW, N_KEY_POSITIONS, SEQ_LEN, SHIFTS, TASKS, task_spec
from interp_init.tasks.data import make_dataset
from training.cli.errors import Script


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


def released_dataset(task: str, split: str, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` samples in the structure of the papers' released generator: ``(tokens [n, 9], targets [n])``."""
    spec = task_spec(task)
    pairs = list(spec.heldout_pairs if split == "heldout" else spec.train_pairs)
    rng = random.Random(seed)
    keys_for = [
        [x for x in range(KEY_LOW, KEY_HIGH + 1) if (x % 9 == p) == (split == "id_test")]
        for p in range(N_KEY_POSITIONS)
    ]
    anchors, shifts = list(SHIFTS), list(SHIFTS.values())

    def single_func(x: int, anchor: int) -> int:
        return x + shifts[anchors.index(anchor)]

    def generate_sequence(mode: tuple[int, int]) -> list[int]:
        seq = [rng.randint(KEY_LOW, KEY_HIGH) for _ in range(SEQ_LEN + 1)]
        a1, a2 = mode
        pos = rng.randint(0, N_KEY_POSITIONS - 1)
        x = rng.choice(keys_for[pos])
        seq[pos], seq[pos + 1], seq[pos + 2] = x, a1, a2
        y = single_func(single_func(x, a2), a1)
        if split != "heldout":
            y += spec.offset(mode)
        seq[-1] = y
        return seq

    seq_list: list[list[int]] = []
    for mode in pairs:  # one "data mode" per pair, each with its share of the samples
        group = [generate_sequence(mode) for _ in range(math.ceil(n / len(pairs)))]
        seq_list = seq_list + group
    data = torch.from_numpy(np.array(seq_list[:n]))
    return data[:, :SEQ_LEN], data[:, SEQ_LEN]


def _check_same_distribution(task: str, split: str) -> None:
    n = 20_000
    lt, ly = loop_dataset(task, split, n, seed=1)
    rt, ry = released_dataset(task, split, n, seed=1)
    ds = make_dataset(task, split, n, seed=1)
    for name, tokens in (("released", rt), ("lean", lt), ("vectorized", ds.tokens)):
        anchors = (tokens >= 1) & (tokens <= 4)
        assert int(anchors.sum()) == 2 * n, f"{name}: not exactly one anchor pair per sequence"
    for name, targets in (("released", ry), ("lean", ly)):
        assert abs(float(targets.float().mean() - ds.targets.float().mean())) < 1.0, f"{name}: target means differ"


def _cold_seconds(task: str, split: str, samples: int, threads: int) -> float:
    """Seconds of ``make_dataset``'s first call in a fresh Python process."""
    code = (
        "import time, torch; from training import make_dataset; "
        f"torch.set_num_threads({threads}); t0 = time.perf_counter(); "
        f"make_dataset({task!r}, {split!r}, {samples}, seed=0); print(time.perf_counter() - t0)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


@click.command(cls=Script)
@click.option("-n", "--samples", type=int, default=900_000, show_default=True, help="Samples per task and split.")
@click.option("--reps", type=int, default=1, show_default=True, help="Interleaved repetitions (median reported).")
@click.option(
    "--threads",
    type=int,
    default=1,
    show_default=True,
    help="torch CPU threads (make_dataset draws its blocks on them).",
)
@click.option(
    "--cold/--no-cold", default=True, show_default=True, help="Also time make_dataset's first call in a fresh process."
)
def main(samples: int, reps: int, threads: int, cold: bool) -> None:
    """Seconds per task and split: the per-sample loops vs make_dataset, and their ratios."""
    torch.set_num_threads(threads)
    click.echo(f"{samples:,} samples per task and split, {threads} torch thread(s), median of {reps}")
    click.echo(
        f"{'task':>10} {'split':>8} {'released s':>11} {'lean s':>7} {'vectorized s':>13} {'cold s':>7} "
        f"{'vs released':>12} {'cold vs released':>17} {'vs lean':>8}"
    )
    vs_released, vs_lean, cold_vs_released = [], [], []
    for task in TASKS:
        splits = ("train", "id_test") + (("heldout",) if task_spec(task).heldout_pairs else ())
        for split in splits:
            _check_same_distribution(task, split)
            rel_t, lean_t, vec_t = [], [], []
            for rep in range(reps):
                rel_t.append(_time(lambda: released_dataset(task, split, samples, seed=rep)))
                lean_t.append(_time(lambda: loop_dataset(task, split, samples, seed=rep)))
                # the vectorized call takes ~1% of a loop's time: 5 calls per repetition
                vec_t += [_time(lambda: make_dataset(task, split, samples, seed=rep * 5 + i)) for i in range(5)]
            rt, lt, vt = statistics.median(rel_t), statistics.median(lean_t), statistics.median(vec_t)
            vs_released.append(rt / vt)
            vs_lean.append(lt / vt)
            cold_s = cold_x = "-"
            if cold:
                ct = _cold_seconds(task, split, samples, threads)
                cold_vs_released.append(rt / ct)
                cold_s, cold_x = f"{ct:.3f}", f"{rt / ct:.0f}x"
            click.echo(
                f"{task:>10} {split:>8} {rt:>11.2f} {lt:>7.2f} {vt:>13.3f} {cold_s:>7} {rt / vt:>11.0f}x {cold_x:>17} {lt / vt:>7.0f}x"
            )
    for name, ratios in (("released", vs_released), ("released, cold", cold_vs_released), ("lean", vs_lean)):
        if ratios:
            click.echo(f"vs {name}: smallest ratio {min(ratios):.0f}x, median {statistics.median(ratios):.0f}x")


if __name__ == "__main__":
    main()
