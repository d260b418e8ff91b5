"""Walkthrough: the NeurIPS Fig. 2 phase diagram (gamma x depth) at CPU scale.

Trains the ``neurips-fig2-cpu`` sweep preset (24 runs of the ``cpu`` model at lr 1e-3, 12 epochs; on 2
cores use ``--workers 2``), aggregates it as the paper does (best over learning rates,
mean over seeds), prints the cells with their phase, and writes the figure as offline
HTML.  Interrupt it at any time: running it again resumes.

    python examples/phase_neurips_fig2.py --out runs/phase-neurips-fig2 --workers 2
    python examples/phase_neurips_fig2.py --out /tmp/fig2 --scale tiny   # seconds, for a smoke test

The same with the command line::

    interp-init sweep --preset-name neurips-fig2-cpu --out runs/phase-neurips-fig2 --workers 2
    interp-init phase-diagram runs/phase-neurips-fig2
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from training.phase import add_phase, aggregate, fig_neurips_fig2, write_html
from training.sweep import SweepOptions, load_preset, run_sweep

PRESET = "neurips-fig2-cpu"
AXES = ("gamma", "n_layers")


def main(argv: Sequence[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/phase-neurips-fig2", help="Sweep folder (resumed if it exists).")
    parser.add_argument("--scale", choices=("cpu", "tiny"), default="cpu", help="tiny: a seconds-long smoke run.")
    parser.add_argument("--workers", type=int, default=1, help="Parallel runs (process pool); 1 = sequential.")
    parser.add_argument("--quiet", action="store_true", help="No progress bar.")
    args = parser.parse_args(argv)

    spec = load_preset(PRESET)
    if args.scale == "tiny":
        spec = spec.smoke_test(AXES)
    print(f"{PRESET} ({args.scale} scale): {spec.size} runs into {args.out}")
    summary = run_sweep(spec, args.out, SweepOptions(workers=args.workers, progress=not args.quiet))
    table = summary.results

    # Best over learning rates within (cell, seed), then mean and spread over seeds.
    cells = aggregate(table, ["heldout_symmetric", "heldout_inferential", "id_acc"], cell=list(AXES))
    # Phase 3 here = good ID and the held-out pair follows the inferential target.
    cells = add_phase(cells, ood_col="heldout_inferential_mean")
    print(cells.round(3).to_string(index=False))

    out = Path(args.out) / "neurips_fig2.html"
    write_html({"neurips_fig2": fig_neurips_fig2(table)}, out)
    print(f"figure: {out}")
    return out


if __name__ == "__main__":
    main()
