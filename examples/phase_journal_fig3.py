"""Walkthrough: the journal's Fig. 3A, 3B and 5C (gamma x weight decay) at CPU scale.

Trains the ``journal-fig3-cpu`` sweep preset (30 runs of the id-ood task on the ``cpu``
run preset), then shows the three figures built from its results table: ID and OOD
accuracy against gamma (3A), the OOD-accuracy heatmap with poor-ID hatching and
low-commutativity markers (3B), and the stable rank of the first layer's W_Q with the
phase as bubble size (5C).  Running it again resumes an interrupted sweep.

    python examples/phase_journal_fig3.py --out runs/phase-journal-fig3 --workers 2
    python examples/phase_journal_fig3.py --out /tmp/fig3 --preset tiny   # seconds, for a smoke test

The same with the command line::

    interp-init sweep --preset-name journal-fig3-cpu --out runs/phase-journal-fig3 --workers 2
    interp-init phase-diagram runs/phase-journal-fig3
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from training.studies.phase import (
    add_phase,
    aggregate,
    fig_journal_fig3a,
    fig_journal_fig3b,
    fig_journal_fig5c,
    write_html,
)
from training.studies.study import StudySpec
from training.studies.sweep import SweepOptions, load_preset, run_sweep

PRESET = "journal-fig3-cpu"
#: --preset -> the sweep preset it runs (tiny: the cpu one's smoke test).
SPECS = {"tiny": PRESET, "cpu": PRESET, "paper": "journal-fig3-paper"}
OUT = "runs/phase-journal-fig3"
AXES = ("gamma", "weight_decay")


def parser() -> argparse.ArgumentParser:
    """The walkthroughs' options: ``--preset``, ``--out``, ``--seed``, ``--device`` (as every walkthrough), and the sweep's own."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--preset",
        choices=tuple(SPECS),
        default="cpu",
        help="Size: tiny = a seconds-long smoke run (2 x 2 cells, one seed), cpu = journal-fig3-cpu, paper = journal-fig3-paper (for a GPU).",
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
    table = run_sweep(
        spec, args.out, SweepOptions(workers=args.workers, device=args.device, progress=not args.quiet)
    ).results

    # Mean over seeds per (gamma, weight decay); the phase from mean ID and OOD accuracy.
    cells = aggregate(table, ["id_acc", "ood_acc", "commutativity", "stable_rank_wq0"], cell=list(AXES))
    print(add_phase(cells).round(3).to_string(index=False))

    figures = {
        "journal_fig3a": fig_journal_fig3a(table),
        "journal_fig3b": fig_journal_fig3b(table),
        "journal_fig5c": fig_journal_fig5c(table),
    }
    out = Path(args.out) / "journal_fig3.html"
    write_html(figures, out, title="Journal Fig. 3A, 3B and 5C")
    print(f"figures: {out}")
    return out


if __name__ == "__main__":
    main()
