"""What the two solutions compute, read off with the probes.

NeurIPS 2024 Fig. 3-5 and the journal's Fig. 4-5 as numbers: for the ``small-init``
and ``large-init`` models of the ``symmetric`` task, the top information-flow path into
the last position on the NeurIPS Fig. 3 input, how well unordered pairs explain the
key-masked outputs (adjusted Rand index; symmetric pairs merge), the block scores of
the second layer's residual and value similarity (equal targets, equal g(x; a1)), the
number of W_Q neuron groups, the embedding's ordinal score and W_Q's stable rank.
Writes the HTML report with every figure.

    python examples/mechanisms_via_probes.py --out runs/examples    # preset cpu: minutes (reuses runs of symmetric_vs_inferential.py)
    python examples/mechanisms_via_probes.py --preset tiny --out /tmp/ex
"""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd
import torch

import probes
from interp_init.tasks.anchor import balanced_inputs
from training import PRESETS, train
from training.studies.study import REGIME_NAMES, regime_config
from training.studies.report import ReportConfig, write_report

DEFAULT_PRESET = "cpu" if "cpu" in PRESETS else "paper"
#: The NeurIPS paper's Fig. 3 input: key 99 at position 2, then the held-out pair (4, 3).
FIG3_INPUT = torch.tensor([35, 63, 99, 4, 3, 38, 42, 36, 62])


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
@click.option("--per-pair", default=20, show_default=True, type=int, help="Probe inputs per anchor pair.")
def main(preset: str, out: Path, seed: int, device: str, per_pair: int) -> None:
    rows, run_dirs = [], []
    data = balanced_inputs("symmetric", per_pair, seed)
    grid = probes.input_grid(range(30, 42), [(1, 2), (2, 1), (1, 3), (3, 4), (4, 3), (2, 4)], seed=seed)
    value_grid = probes.input_grid(range(30, 42), [(a, 3) for a in (1, 2, 3, 4)], seed=seed)
    for regime in REGIME_NAMES:
        run_dir = out / "symmetric" / regime
        model = train(regime_config(preset, regime, "symmetric", seed), run_dir, device=device, progress=False).model
        paths = probes.top_paths(probes.information_flow(model, FIG3_INPUT), threshold=0.05, k=1)
        masked = probes.mask_key(model, data).last_position(f"blocks.{model.cfg.n_layers - 1}.hook_resid_post")
        clusters = probes.cluster_scores(masked, probes.candidate_labelings(data), method="agglomerative").set_index(
            "labeling"
        )
        rows.append(
            {
                "regime": regime,
                "top path": " -> ".join(str(int(FIG3_INPUT[p])) for p in paths["path"].iloc[0]),
                "key-masked ARI ordered": clusters.loc["ordered_pair", "ari"],
                "key-masked ARI unordered": clusters.loc["unordered_pair", "ari"],
                "residual block score": probes.residual_similarity(model, grid).score,
                "value block score": probes.value_similarity(model, value_grid).score,
                "W_Q groups": probes.condensation(probes.merged_weight(model, "W_Q", 0).T, threshold=0.7).n_groups,
                "ordinal score": probes.embedding_pca(model, tokens=range(20, 100)).ordinal_score,
                "W_Q stable rank": probes.stable_rank(probes.merged_weight(model, "W_Q", 0)),
            }
        )
        run_dirs.append(run_dir)
    click.echo(pd.DataFrame(rows).set_index("regime").T.to_string(float_format=lambda v: f"{v:.3f}"))
    report = write_report(
        run_dirs, out / "mechanisms_via_probes.html", ReportConfig(per_pair=per_pair, title="Mechanisms via probes")
    )
    click.echo(f"report: {report}")


if __name__ == "__main__":
    main()
