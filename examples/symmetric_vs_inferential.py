"""Symmetric or inferential? The held-out pair (4,3) under small and large init.

NeurIPS 2024 Fig. 2 (which target the unseen pair (4,3) follows), Fig. 3 (information
flow) and Fig. 5 (condensation, embeddings), in miniature: trains the ``small-init`` and
``large-init`` regimes of a preset on the ``symmetric`` task (14 pairs follow
f(x; a1, a2) = x + s(a1) + s(a2), (3,4) is mapped to x - 6 instead of x - 10, and (4,3)
is never seen), prints how often (4,3) gets the inferential target x - 10 and how often
the symmetric x - 6, and writes the HTML report comparing the two models.

    python examples/symmetric_vs_inferential.py --out runs/examples     # preset cpu: minutes
    python examples/symmetric_vs_inferential.py --preset tiny --out /tmp/ex   # seconds, learns little

Finished runs are read back, not retrained (``examples/mechanisms_via_probes.py`` with
the same ``--out`` reuses them).
"""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd

from training import PRESETS, train
from training.studies.study import REGIME_NAMES, regime_config
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
@click.option("--seed", default=0, show_default=True, type=int, help="Run seed of every model trained.")
@click.option(
    "--device",
    default="auto",
    show_default=True,
    help="Where to train: auto (CUDA when available, else CPU), cpu, cuda or cuda:N.",
)
@click.option("--per-pair", default=20, show_default=True, type=int, help="Report probe inputs per anchor pair.")
def main(preset: str, out: Path, seed: int, device: str, per_pair: int) -> None:
    rows, run_dirs = [], []
    for regime in REGIME_NAMES:
        cfg = regime_config(preset, regime, "symmetric", seed)
        run_dir = out / "symmetric" / regime
        final = train(cfg, run_dir, device=device, progress=False).metrics["final"]
        heldout = final["heldout"]["4,3"]
        rows.append(
            {
                "regime": regime,
                "gamma": cfg.init.gamma,
                "ID acc": final["id_acc"],
                "(4,3) inferential x-10": heldout["inferential"],
                "(4,3) symmetric x-6": heldout["symmetric"],
            }
        )
        run_dirs.append(run_dir)
    click.echo(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    report = write_report(
        run_dirs,
        out / "symmetric_vs_inferential.html",
        ReportConfig(per_pair=per_pair, title="Symmetric vs inferential"),
    )
    click.echo(f"report: {report}")


if __name__ == "__main__":
    main()
