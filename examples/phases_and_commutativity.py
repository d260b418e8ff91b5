"""Phases 1-3 and commutativity on the id-ood task, over the init rate gamma.

The journal paper's Fig. 3 (ID and OOD accuracy against gamma and weight decay, phases,
commutativity) and Fig. 5C (stable rank of the first layer's W_Q falls as the phase
rises), in miniature: trains one model per (gamma, weight decay) on the ``id-ood`` task
(the pairs (3,4) and (4,3) are never seen), prints ID accuracy, OOD accuracy,
commutativity, the phase (1: poor ID; 2: good ID, OOD <= 0.5; 3: good ID, OOD > 0.5)
and the stable rank of W_Q, and writes the HTML report comparing the models.

    python examples/phases_and_commutativity.py --out runs/examples                 # preset cpu: minutes per model
    python examples/phases_and_commutativity.py --gamma 0.3 --gamma 0.8 --weight-decay 0.1
    python examples/phases_and_commutativity.py --preset tiny --out /tmp/ex        # seconds, learns little
"""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd

from interp_init import load_model
from probes import merged_weight, stable_rank
from training import PRESETS, make_run_config, train
from training.studies.phase import classify_phase
from training.studies.report import ReportConfig, write_report

DEFAULT_PRESET = "cpu" if "cpu" in PRESETS else "paper"


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
    "--gamma",
    "gammas",
    multiple=True,
    type=float,
    default=(0.4, 0.6, 0.8),
    show_default=True,
    help="Init rates (repeatable).",
)
@click.option(
    "--weight-decay", "weight_decays", multiple=True, type=float, default=(0.01,), show_default=True, help="Repeatable."
)
@click.option("--seed", default=0, show_default=True, type=int, help="Run seed of every model trained.")
@click.option(
    "--device",
    default="auto",
    show_default=True,
    help="Where to train: auto (CUDA when available, else CPU), cpu, cuda or cuda:N.",
)
@click.option("--per-pair", default=20, show_default=True, type=int, help="Report probe inputs per anchor pair.")
def main(
    preset: str,
    out: Path,
    gammas: tuple[float, ...],
    weight_decays: tuple[float, ...],
    seed: int,
    device: str,
    per_pair: int,
) -> None:
    rows, run_dirs = [], []
    for weight_decay in weight_decays:
        for gamma in gammas:
            cfg = make_run_config(preset, task="id-ood", gamma=gamma, weight_decay=weight_decay, seed=seed)
            run_dir = out / "id-ood" / f"gamma{gamma}-wd{weight_decay}"
            final = train(cfg, run_dir, device=device, progress=False).metrics["final"]
            w_q = merged_weight(load_model(run_dir), "W_Q", 0)
            rows.append(
                {
                    "gamma": gamma,
                    "weight decay": weight_decay,
                    "ID acc": final["id_acc"],
                    "OOD acc": final["ood_acc"],
                    "commutativity": final["commutativity"],
                    "W_Q stable rank": stable_rank(w_q),
                }
            )
            run_dirs.append(run_dir)
    table = pd.DataFrame(rows)
    table.insert(4, "phase", classify_phase(table["ID acc"], table["OOD acc"]).to_numpy())
    click.echo(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    report = write_report(
        run_dirs,
        out / "phases_and_commutativity.html",
        ReportConfig(per_pair=per_pair, title="Phases and commutativity"),
    )
    click.echo(f"report: {report}")


if __name__ == "__main__":
    main()
