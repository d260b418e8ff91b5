"""Walkthrough: training speed against inferential complexity k (NeurIPS Fig. 6, journal Fig. 8).

Trains the ``complexity-cpu`` sweep preset (16 runs of the complexity task on the ``cpu``
run preset: k x depth x small and large init), then plots the epochs until the training
loss falls below 0.05 against depth, one line per k (8A), and, per anchor pair, the
epochs until its training accuracy reaches 60% (8B).  The papers' prediction: with small
init, more epochs as k grows; with large init, about the same.  A run that never
reaches a threshold within its epochs is left out of that mean (pass
``--loss-threshold`` to read the curves at a looser loss).

    python examples/phase_complexity.py --out runs/phase-complexity --workers 2
    python examples/phase_complexity.py --out /tmp/complexity --scale tiny   # seconds, for a smoke test
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from training.phase import aggregate, fig_complexity_epochs, fig_pair_epochs, write_html
from training.sweep import LOSS_THRESHOLD, SweepOptions, collect_results, load_preset, run_sweep

PRESET = "complexity-cpu"
AXES = ("gamma", "k")


def main(argv: Sequence[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/phase-complexity", help="Sweep folder (resumed if it exists).")
    parser.add_argument("--scale", choices=("cpu", "tiny"), default="cpu", help="tiny: a seconds-long smoke run.")
    parser.add_argument("--workers", type=int, default=1, help="Parallel runs (process pool); 1 = sequential.")
    parser.add_argument("--loss-threshold", type=float, default=LOSS_THRESHOLD, help="Training loss that counts as fitted.")
    parser.add_argument("--quiet", action="store_true", help="No progress bar.")
    args = parser.parse_args(argv)

    spec = load_preset(PRESET)
    if args.scale == "tiny":
        spec = spec.smoke_test(AXES)
    print(f"{PRESET} ({args.scale} scale): {spec.size} runs into {args.out}")
    run_sweep(spec, args.out, SweepOptions(workers=args.workers, progress=not args.quiet))
    table = collect_results(args.out, loss_threshold=args.loss_threshold)

    cells = aggregate(table, ["epochs_to_loss", "final_loss"], cell=["gamma", "n_layers", "k"])
    print(cells.round(3).to_string(index=False))

    figures = {"complexity_epochs": fig_complexity_epochs(table), "pair_epochs": fig_pair_epochs(table)}
    out = Path(args.out) / "complexity.html"
    write_html(figures, out, title="Training speed vs inferential complexity")
    print(f"figures: {out}")
    return out


if __name__ == "__main__":
    main()
