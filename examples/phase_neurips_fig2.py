"""Walkthrough: the NeurIPS Fig. 2 phase diagram (gamma x depth) at CPU scale.

Trains the ``neurips-fig2-cpu`` sweep preset (24 runs of the ``cpu`` model at lr 1e-3, 12 epochs; on 2
cores use ``--workers 2``), aggregates it as the paper does (best over learning rates,
mean over seeds), prints the cells with their phase, and writes the figure as offline
HTML.  Interrupt it at any time: running it again resumes.

    python examples/phase_neurips_fig2.py --out runs/phase-neurips-fig2 --workers 2
    python examples/phase_neurips_fig2.py --out /tmp/fig2 --preset tiny   # seconds, for a smoke test

The same with the command line::

    interp-init sweep --preset-name neurips-fig2-cpu --out runs/phase-neurips-fig2 --workers 2
    interp-init phase-diagram runs/phase-neurips-fig2
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from training.studies.phase import add_phase, aggregate, fig_neurips_fig2, write_html
from training.studies.study import StudySpec
from training.studies.sweep import SweepOptions, load_preset, run_sweep

PRESET = "neurips-fig2-cpu"
#: --preset -> the sweep preset it runs (tiny: the cpu one's smoke test).
SPECS = {"tiny": PRESET, "cpu": PRESET, "paper": "neurips-fig2-paper"}
OUT = "runs/phase-neurips-fig2"
AXES = ("gamma", "n_layers")


def parser() -> argparse.ArgumentParser:
    """The walkthroughs' options: ``--preset``, ``--out``, ``--seed``, ``--device`` (as every walkthrough), and the sweep's own."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--preset",
        choices=tuple(SPECS),
        default="cpu",
        help="Size: tiny = a seconds-long smoke run (2 x 2 cells, one seed), cpu = neurips-fig2-cpu, paper = neurips-fig2-paper (for a GPU).",
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
    summary = run_sweep(spec, args.out, SweepOptions(workers=args.workers, device=args.device, progress=not args.quiet))
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
