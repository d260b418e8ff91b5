"""The probes on a SCAN model: masking, flow, similarity and ranks on a sequence task.

Trains one ``scan`` run (``interp-init train --task scan``'s code path: the add-primitive
``--split``, a decoder-only GPT-2-style model with gamma init) into ``--out``, then asks,
on out-of-distribution commands (the split's test set) with the probes on plain token tensors:

* masking (``masked_run``): hide each command's first word, then its ``<sep>``, from
  attention: how much exact match (greedy decoding, one teacher-forced pass) and how many of
  the actions (and ``<eos>``) predicted right are left?
* flow (``information_flow``, ``top_paths``): among commands of the most common length, the
  best paths into the ``<sep>`` position, where the first action is predicted;
* similarity (``residual_similarity``): do commands whose first action is the same get similar
  vectors at ``<sep>`` (block score)?
* ranks (``weight_stable_ranks``, ``circuit_stable_ranks``): the stable rank of each weight and
  of each head's OV and QK circuit.

It prints one table and writes ``scan_probes.csv`` and ``scan_probes_flow.html`` into
``--out`` (the run folder is ``--out``/scan_run).  ``tiny`` takes seconds on a CPU and learns
little (the numbers then show the probes working, not a finding); ``cpu`` is the task's
CPU-scale preset::

    python examples/scan_probes.py --preset tiny --out scan_out --seed 0 --device cpu
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import torch
from transformer_lens import HookedTransformer

import probes
from interp_init.tasks.base import Samples, exact_match, token_accuracy
from interp_init.tasks.scan import ScanTask
from training import make_run_config, train


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--preset", choices=["tiny", "cpu", "paper"], default="tiny", help="run preset (tiny: seconds on a CPU)"
    )
    parser.add_argument(
        "--out", default="scan_probes_out", help="folder for the run, scan_probes.csv and scan_probes_flow.html"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="auto|cpu|cuda")
    parser.add_argument(
        "--split", choices=["turn-left", "jump"], default="turn-left", help="SCAN's add-primitive split"
    )
    parser.add_argument("--gamma", type=float, default=0.8, help="the initialization rate (larger: smaller init)")
    parser.add_argument("--inputs", type=int, default=64, help="how many OOD commands the probes read")
    return parser


def probe(model: HookedTransformer, task: ScanTask, data: Samples, out: Path) -> dict[str, float | str]:
    """Masking, flow, similarity and ranks on a SCAN model's OOD commands."""
    tokens, targets = data.tokens.to(model.cfg.device), data.targets.to(model.cfg.device)
    sep = data.meta["source_len"].to(model.cfg.device)  # each command's <sep> position

    def match(run: probes.MaskedRun) -> float:
        return float(exact_match(run.logits.argmax(-1), targets).float().mean())

    def tokens_right(run: probes.MaskedRun) -> float:
        return token_accuracy(run.logits.argmax(-1), targets)

    plain = probes.masked_run(model, tokens, [])  # nothing masked: the plain run
    first_word = probes.masked_run(model, tokens, torch.zeros_like(sep))
    separator = probes.masked_run(model, tokens, sep)
    # flow among commands of the most common length, into their <sep>
    length = int(sep.mode().values)
    same = tokens[sep == length][:16]
    edges = probes.information_flow(model, same)
    paths = probes.top_paths(edges, threshold=0.0, query=length, k=3)
    labels = [f"{i}:{w}" for i, w in enumerate(task.token_labels(same[0].tolist()))]
    probes.plot_flow(edges, labels, paths).write_html(out / "scan_probes_flow.html", include_plotlyjs="cdn")
    first_action = targets[torch.arange(len(tokens)), sep]  # the action predicted at <sep>
    similarity = probes.residual_similarity(model, tokens, labels=first_action.tolist(), position=sep)
    ranks = probes.weight_stable_ranks(model)
    circuits = probes.circuit_stable_ranks(model)
    return {
        "OOD exact match": match(plain),
        "OOD exact match, first word hidden": match(first_word),
        "OOD exact match, <sep> hidden": match(separator),
        "OOD action accuracy": tokens_right(plain),
        "OOD action accuracy, first word hidden": tokens_right(first_word),
        "OOD action accuracy, <sep> hidden": tokens_right(separator),
        "top path into <sep>": " -> ".join(labels[p] for p in paths["path"].iloc[0]),
        "same-first-action block score": similarity.score,
        "W_Q stable rank, layer 0": float(
            ranks[(ranks["name"] == "W_Q") & (ranks["layer"] == 0)]["stable_rank"].iloc[0]
        ),
        "OV stable rank, mean over heads": float(circuits[circuits["circuit"] == "OV"]["stable_rank"].mean()),
        "QK stable rank, mean over heads": float(circuits[circuits["circuit"] == "QK"]["stable_rank"].mean()),
    }


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = make_run_config(args.preset, task="scan", split=args.split, gamma=args.gamma, seed=args.seed)
    result = train(cfg, out / "scan_run", device=args.device, progress=False)
    task = cfg.data.make_task()
    data = task.make_split("heldout", args.inputs, args.seed)
    row = probe(result.model, task, data, out)
    final = result.metrics["final"]
    table = pd.DataFrame(
        [
            {
                "preset": args.preset,
                "split": args.split,
                "gamma": args.gamma,
                "run OOD exact match": final["ood_acc"],
                **row,
            }
        ]
    )
    table.to_csv(out / "scan_probes.csv", index=False)
    print(table.T.to_string(header=False))
    print(f"written: {out / 'scan_probes.csv'}, {out / 'scan_probes_flow.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
