"""Walkthrough: training speed against inferential complexity k (NeurIPS Fig. 6, journal Fig. 8).

Trains the ``complexity-cpu`` sweep preset (16 runs of the complexity task on the ``cpu``
run preset: k x depth x small and large init), then plots the epochs until the training
loss falls below 0.05 against depth, one line per k (8A), and, per anchor pair, the
epochs until its training accuracy reaches 60% (8B).  The papers' prediction: with small
init, more epochs as k grows; with large init, about the same.  A run that never
reaches a threshold within its epochs is left out of that mean (pass
``--loss-threshold`` to read the curves at a looser loss).

    python examples/phase_complexity.py --out runs/phase-complexity --workers 2
    python examples/phase_complexity.py --out /tmp/complexity --preset tiny   # seconds, for a smoke test
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from training.studies.phase import aggregate, fig_complexity_epochs, fig_pair_epochs, write_html
from training.studies.study import StudySpec
from training.studies.sweep import SweepOptions, collect_results, load_preset, run_sweep
from training.studies.sweep.results import LOSS_THRESHOLD

PRESET = "complexity-cpu"
#: --preset -> the sweep preset it runs (tiny: the cpu one's smoke test).
SPECS = {"tiny": PRESET, "cpu": PRESET, "paper": "complexity-paper"}
OUT = "runs/phase-complexity"
AXES = ("gamma", "k")


def parser() -> argparse.ArgumentParser:
    """The walkthroughs' options: ``--preset``, ``--out``, ``--seed``, ``--device`` (as every walkthrough), and the sweep's own."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--preset",
        choices=tuple(SPECS),
        default="cpu",
        help="Size: tiny = a seconds-long smoke run (2 x 2 cells, one seed), cpu = complexity-cpu, paper = complexity-paper (for a GPU).",
    )
    parser.add_argument("--out", default=OUT, help="Sweep folder (resumed if it exists).")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="First seed: the sweep's seeds become SEED, SEED+1, ... (as many as the preset has).",
    )
    parser.add_argument(
        "--device", default="auto", help="Where to train: auto (CUDA when available, else CPU), cpu, cuda or cuda:N."
    )
    parser.add_argument("--workers", type=int, default=1, help="Parallel runs (process pool); 1 = sequential.")
    parser.add_argument(
        "--loss-threshold", type=float, default=LOSS_THRESHOLD, help="Training loss that counts as fitted."
    )
    parser.add_argument("--quiet", action="store_true", help="No progress bar.")
    return parser


def sweep_spec(preset: str, seed: int) -> StudySpec:
    """The sweep preset of ``preset`` (tiny: the cpu one's smoke test), its seeds starting at ``seed``."""
    spec = load_preset(SPECS[preset])
    if preset == "tiny":
        spec = spec.smoke_test(AXES)
    return spec.seeded_from(seed)


def main(argv: Sequence[str] | None = None) -> Path:
    args = parser().parse_args(argv)

    spec = sweep_spec(args.preset, args.seed)
    print(f"{SPECS[args.preset]} ({args.preset} scale): {spec.size} runs into {args.out}")
    run_sweep(spec, args.out, SweepOptions(workers=args.workers, device=args.device, progress=not args.quiet))
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
