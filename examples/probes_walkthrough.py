"""Every probe on a small-init and a large-init model, figures written as HTML.

Trains two models with the ``tiny`` preset (seconds on a CPU; they learn little, so the
numbers only show the pipeline; ``--preset cpu`` trains models that learn, minutes each)
unless run folders are given, then writes into ``--out``: one HTML file per figure
(sharing one offline ``plotly.min.js``), the circuitsvis attention page of the NeurIPS
input, and ``summary.csv`` with the probes' numbers.

    python examples/probes_walkthrough.py --out probes_out/ --preset tiny --seed 0 --device cpu
    python examples/probes_walkthrough.py --run small=runs/g08 --run large=runs/g03
"""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd
import torch

import probes
from interp_init import load_model, resolve_device
from training import PRESETS, make_dataset, make_run_config, train

#: The NeurIPS paper's Fig. 3 input: key 99 at position 2, pair (4, 3).
FIG3_INPUT = [35, 63, 99, 4, 3, 38, 42, 36, 62]
DEFAULT_GAMMAS = {"small": 0.8, "large": 0.3}  # small init = large gamma


def run_probes(model, label: str, out: Path) -> dict:
    """Every probe on ``model``; figures to ``out/{label}_*.html``; returns the numbers."""

    def save(fig, name: str) -> None:
        fig.write_html(out / f"{label}_{name}.html", include_plotlyjs="directory")

    data = make_dataset("symmetric", "train", n=600, seed=0)
    labels = probes.candidate_labelings(data)
    key_vectors = probes.mask_key(model, data).last_position(f"blocks.{model.cfg.n_layers - 1}.hook_resid_post")
    save(
        probes.plot_projection(
            probes.project(key_vectors, "tsne", perplexity=12, labels=labels), title=f"{label}: key masked (t-SNE)"
        ),
        "key_masked_tsne",
    )
    save(
        probes.plot_projection(probes.project(key_vectors, "pca", labels=labels), title=f"{label}: key masked (PCA)"),
        "key_masked_pca",
    )
    clusters = probes.cluster_scores(key_vectors, labels).set_index("labeling")

    grid = probes.input_grid(range(30, 41), [(a, 1) for a in (1, 2, 3, 4)], seed=0)
    second = probes.mask_second_anchor(model, grid).last_position(f"blocks.{model.cfg.n_layers - 1}.hook_resid_post")
    g = probes.candidate_labelings(grid)["single_anchor_target"].tolist()
    second_sim = probes.cosine_similarity_matrix(second)
    second_score = probes.block_score(second_sim, probes.equal_mask(g))

    tokens = torch.tensor(FIG3_INPUT)
    edges = probes.information_flow(model, tokens)
    paths = probes.top_paths(edges, threshold=0.05)
    save(probes.plot_flow(edges, probes.token_labels(tokens), paths, title=f"{label}: information flow"), "flow")
    probes.attention_html(model, tokens, out / f"{label}_attention.html", title=f"{label}: attention patterns")

    residual = probes.residual_similarity(
        model, probes.input_grid(range(30, 41), [(3, 3), (2, 2), (1, 2), (1, 3)], seed=0)
    )
    value = probes.value_similarity(model, grid)
    save(probes.plot_similarity(residual), "similarity_residual")
    save(probes.plot_similarity(value), "similarity_value")

    cond = probes.condensation(probes.merged_weight(model, "W_Q", 0).T, threshold=0.7)
    emb = probes.embedding_pca(model, tokens=range(20, 100))  # the keys
    save(probes.plot_condensation(cond), "condensation_WQ0")
    save(probes.plot_embedding_pca(emb), "embedding_pca")
    save(probes.plot_eigenvalues(emb), "embedding_eigenvalues")
    save(probes.plot_spectra(probes.singular_value_spectra(model)), "spectra")
    ranks = probes.weight_stable_ranks(model)
    ranks.to_csv(out / f"{label}_stable_ranks.csv", index=False)
    return {
        "model": label,
        "ari_ordered_pair": clusters.loc["ordered_pair", "ari"],
        "ari_unordered_pair": clusters.loc["unordered_pair", "ari"],
        "ari_composite_shift": clusters.loc["composite_shift", "ari"],
        "second_anchor_masked_block_score": second_score,
        "residual_block_score": residual.score,
        "value_block_score": value.score,
        "top_path": " -> ".join(str(FIG3_INPUT[p]) for p in paths["path"].iloc[0]),
        "wq0_groups": cond.n_groups,
        "embedding_ordinal_score": emb.ordinal_score,
        "wq0_stable_rank": float(ranks[(ranks["name"] == "W_Q") & (ranks["layer"] == 0)]["stable_rank"].iloc[0]),
    }


@click.command()
@click.option(
    "--preset",
    type=click.Choice(sorted(PRESETS)),
    default="tiny",
    show_default=True,
    help="Size of the two models trained when no --run is given: tiny = seconds (learns little), cpu = minutes per model, paper = the papers' scale (for a GPU).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("probes_out"),
    show_default=True,
    help="Folder for the figures, summary.csv and the trained runs.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Run seed of the two models trained.")
@click.option(
    "--device",
    default="auto",
    show_default=True,
    help="Where to train and probe: auto (CUDA when available, else CPU), cpu, cuda or cuda:N.",
)
@click.option(
    "--run", "runs", multiple=True, metavar="LABEL=RUN_DIR", help="A trained run folder to probe instead (repeatable)."
)
def main(preset: str, out: Path, seed: int, device: str, runs: tuple[str, ...]) -> None:
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    where = str(resolve_device(device))
    models = {}
    for spec in runs:
        label, sep, run_dir = spec.partition("=")
        if not sep or not label or not run_dir:
            raise click.BadParameter(f"expected LABEL=RUN_DIR, got {spec!r}", param_hint="--run")
        models[label] = load_model(run_dir, device=where)
    if not models:
        for label, gamma in DEFAULT_GAMMAS.items():
            cfg = make_run_config(preset, gamma=gamma, seed=seed)
            models[f"{label}_init"] = train(cfg, out / "runs" / f"{label}_init", device=where, progress=False).model
    summary = pd.DataFrame([run_probes(model.eval(), label, out) for label, model in models.items()])
    summary.to_csv(out / "summary.csv", index=False)
    click.echo(summary.to_string(index=False))
    click.echo(f"figures in {out}/")


if __name__ == "__main__":
    main()
