"""Training speed against inferential complexity k, under small and large init.

NeurIPS 2024 Fig. 6 and the journal's Fig. 8: on the ``complexity`` task, k of the 6
symmetric groups of anchor pairs get a non-inferential target (f + 4).  Small init
(reasoning) fits the data more slowly as k grows; large init (memorizing) takes about
the same time whatever k.  Trains each regime at each k, prints the epochs until the
training loss first falls below 0.05 and, per kind of pair, the mean epochs until a
pair's training accuracy reaches 60%, for the slowest pair of each kind (NaN: not reached within the preset's epochs), and
writes the HTML report of the runs at the smallest and largest k.

    python examples/complexity_and_speed.py --out runs/examples          # preset cpu: minutes per model
    python examples/complexity_and_speed.py --k 0 --k 6
    python examples/complexity_and_speed.py --preset tiny --out /tmp/ex
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import click
import numpy as np
import pandas as pd

from interp_init.tasks.anchor_pairs import SYMMETRIC_GROUPS
from training import PRESETS, train
from training.studies.records import RunRecord
from training.studies.study import REGIME_NAMES, regime_config
from training.studies.report import ReportConfig, write_report
from training.studies.sweep.results import LOSS_THRESHOLD, PAIR_ACC_THRESHOLD, epochs_to_loss, epochs_to_pair_accuracy

DEFAULT_PRESET = "cpu" if "cpu" in PRESETS else "paper"


def _slowest(epochs: Iterable[float]) -> float:
    """The epoch by which every pair got there (NaN if one never did, or there are none)."""
    epochs = list(epochs)
    return max(epochs) if epochs and not any(np.isnan(epochs)) else np.nan


@click.command()
@click.option(
    "--preset",
    type=click.Choice(sorted(PRESETS)),
    default=DEFAULT_PRESET,
    show_default=True,
    help="Size: tiny = seconds (learns little), cpu = minutes per model on a CPU, paper = the papers' scale (for a GPU).",
)
@click.option(
    "--out",
    default="runs/examples",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the run folders and the report (finished runs are read back, not retrained).",
)
@click.option(
    "--k",
    "ks",
    multiple=True,
    type=int,
    help="Inferential complexities (repeatable). Default: 0, 3 and 6; 0 and 6 with --preset tiny (under a minute on 2 cores).",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Run seed of every model trained.")
@click.option(
    "--device",
    default="auto",
    show_default=True,
    help="Where to train: auto (CUDA when available, else CPU), cpu, cuda or cuda:N.",
)
@click.option("--per-pair", default=20, show_default=True, type=int, help="Report probe inputs per anchor pair.")
def main(preset: str, out: Path, ks: tuple[int, ...], seed: int, device: str, per_pair: int) -> None:
    ks = ks or ((0, 6) if preset == "tiny" else (0, 3, 6))
    rows, report_dirs = [], []
    for regime in REGIME_NAMES:
        for k in sorted(ks):
            cfg = regime_config(preset, regime, "complexity", seed).with_options(k=k)
            run_dir = out / "complexity" / f"{regime}-k{k}"
            train(cfg, run_dir, device=device, progress=False)
            history = RunRecord.read(run_dir).history  # typed: one EpochRecord per epoch
            offset_pairs = {f"{a},{b}" for group in SYMMETRIC_GROUPS[:k] for a, b in group}
            pair_epochs = epochs_to_pair_accuracy(history)
            rows.append(
                {
                    "regime": regime,
                    "gamma": cfg.init.gamma,
                    "k": k,
                    f"epochs to loss < {LOSS_THRESHOLD}": epochs_to_loss(history),
                    f"all offset pairs at {PAIR_ACC_THRESHOLD:.0%}": _slowest(
                        e for p, e in pair_epochs.items() if p in offset_pairs
                    ),
                    f"all inferential pairs at {PAIR_ACC_THRESHOLD:.0%}": _slowest(
                        e for p, e in pair_epochs.items() if p not in offset_pairs
                    ),
                    "final loss": history[-1].loss,
                }
            )
            if k in (min(ks), max(ks)):
                report_dirs.append(run_dir)
    click.echo(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    report = write_report(
        report_dirs,
        out / "complexity_and_speed.html",
        ReportConfig(per_pair=per_pair, title="Complexity and training speed"),
    )
    click.echo(f"report: {report}")


if __name__ == "__main__":
    main()
