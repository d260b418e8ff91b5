"""The report's sections on how each model computes its answer, from its activations:
attention patterns and information flow on the NeurIPS paper's Fig. 3 input, the
journal's key-token and second-anchor masking, and the NeurIPS paper's cosine-similarity
heatmaps of layer 1 (layers numbered from 0, as TransformerLens does).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from torch import Tensor

from interp_init.tasks.anchor_pairs import KEY_HIGH, KEY_LOW
from probes.anchors import candidate_labelings, mask_key, mask_second_anchor
from probes.flow import attention_patterns, information_flow, plot_flow, top_paths
from probes.geometry import (
    Condensation,
    EmbeddingPCA,
    condensation,
    embedding_pca,
    plot_condensation,
    plot_embedding_pca,
    plot_spectra,
    singular_value_spectra,
)
from probes.masking import cluster_scores, plot_projection, project
from probes.rank import merged_weight, weight_stable_ranks
from probes.similarity import (
    SimilarityResult,
    block_score,
    cosine_similarity_matrix,
    equal_mask,
    input_grid,
    plot_similarity,
    residual_similarity,
    value_similarity,
)
from training.studies.report.cells import (
    RUN_COLOURS,
    Cell,
    Context,
    NotApplicable,
    Run,
    Section,
    circuitsvis_view,
    compact,
    html_table,
    measured,
    per_run,
    token_labels,
)

# ------------------------------------------------------------ attention and information flow


def _patterns(run: Run, ctx: Context) -> Tensor:
    """``[layer, head, query, source]`` attention of ``run`` on the sample input."""
    assert run.model is not None
    return ctx.cached(("attention", run.name), lambda: attention_patterns(run.model, ctx.sample(run).tokens)[:, 0])


def _anchors_on_key(run: Run, ctx: Context) -> str:
    """Layer 0's attention of a1 and of a2 on the key (the largest over heads)."""
    patterns, p = _patterns(run, ctx), int(ctx.sample(run).key_positions[0])
    return f"{float(patterns[0, :, p + 1, p].max()):.2f} / {float(patterns[0, :, p + 2, p].max()):.2f}"


def attention_heads_view(run: Run, ctx: Context) -> Cell:
    sample = ctx.sample(run)
    patterns = _patterns(run, ctx)
    n_layers, n_heads = patterns.shape[:2]
    view = circuitsvis_view(
        "AttentionHeads",
        attention=patterns.reshape(n_layers * n_heads, *patterns.shape[2:]).float(),
        tokens=token_labels(sample),
        attentionHeadNames=[f"L{layer}H{head}" for layer in range(n_layers) for head in range(n_heads)],
        maskUpperTri=True,
    )
    pair = sample.anchor_pairs[0].tolist()
    return Cell(
        html=view,
        note=f"the NeurIPS Fig. 3 input (pair ({pair[0]},{pair[1]})); heads L(layer)H(head); each row (query) attends to the columns (sources)",
    )


def section_attention(ctx: Context) -> Section:
    sentence = (
        "Attention patterns of every layer and head on the NeurIPS paper's sample input 35 63 99 4 3 38 42 36 62 (key 99, held-out pair (4,3)), "
        "drawn with circuitsvis: the attention matrices that NeurIPS 2024 Fig. 3a/3c read as information flow. There the inferential "
        "model (small init) moves the key onto each anchor in layer 0 (a1 and a2 attend to x), the symmetric one (large init) fuses the anchors at the last position."
    ) + measured(
        ctx, "layer 0's attention of a1 / a2 on the key x (largest over heads)", lambda run: _anchors_on_key(run, ctx)
    )
    # two views side by side at most: each zoomed pattern is as wide as its cell
    return Section("attention", "Attention patterns", sentence, per_run(ctx, attention_heads_view), columns=2)


def _flow(run: Run, ctx: Context) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The information-flow edges of ``run`` on the sample input, and its top 5 paths into the last position."""
    assert run.model is not None

    def make() -> tuple[pd.DataFrame, pd.DataFrame]:
        edges = information_flow(run.model, ctx.sample(run).tokens)
        return edges, top_paths(edges, threshold=0.05, k=5)

    return ctx.cached(("flow", run.name), make)


def _top_path(run: Run, ctx: Context) -> str | None:
    paths, labels = _flow(run, ctx)[1], token_labels(ctx.sample(run))
    if paths.empty:
        return None
    return f"{' -> '.join(labels[p] for p in paths['path'].iloc[0])} ({paths['score'].iloc[0]:.2f})"


def flow_cell(run: Run, ctx: Context) -> Cell:
    labels = token_labels(ctx.sample(run))
    edges, paths = _flow(run, ctx)
    fig = plot_flow(edges, labels=labels, paths=paths, min_weight=0.05, n_highlight=3, title=None)
    fig.update_layout(legend=dict(orientation="h", y=-0.25, font=dict(size=9)))
    table = pd.DataFrame(
        {
            "rank": paths["rank"],
            "path": [" -> ".join(labels[p] for p in path) for path in paths["path"]],
            "score": paths["score"],
        }
    )
    return Cell(figure=compact(fig, 420), html=html_table(table), height=420)


def section_flow(ctx: Context) -> Section:
    sentence = (
        "The attention of each layer on that same input as edges from source to query position (line width = attention, "
        "heads summed, edges below 0.05 hidden), with the top paths into the last position ranked by the product of their "
        "weights: NeurIPS 2024 Fig. 3a (symmetric, large init: the anchors fuse at the last position) vs 3c (inferential, small init: the key moves onto each anchor first)."
    ) + measured(ctx, "the top path (its score)", lambda run: _top_path(run, ctx))
    return Section("flow", "Information flow", sentence, per_run(ctx, flow_cell))


# ------------------------------------------------------------------------------ masking


def _masked(run: Run, ctx: Context, kind: str) -> dict[str, Any]:
    """Key-token (``kind="key"``) or second-anchor masking of ``run`` on the balanced inputs:
    the last block's outputs at the last position, their labels and cluster scores (and, for
    the second anchor, the block score of equal g(x; a1))."""
    assert run.model is not None

    def make() -> dict[str, Any]:
        data = ctx.balanced(run)
        masked = (mask_key if kind == "key" else mask_second_anchor)(run.model, data)
        vectors = masked.last_position(f"blocks.{run.model.cfg.n_layers - 1}.hook_resid_post")
        labels = candidate_labelings(data)
        columns = (
            ("ordered_pair", "unordered_pair", "composite_shift")
            if kind == "key"
            else ("ordered_pair", "first_anchor", "single_anchor_target")
        )
        scores = cluster_scores(vectors, labels, columns=columns, method="agglomerative", seed=ctx.config.seed)
        block = (
            None
            if kind == "key"
            else block_score(cosine_similarity_matrix(vectors), equal_mask(labels["single_anchor_target"].tolist()))
        )
        return {"vectors": vectors, "labels": labels, "scores": scores, "block": block}

    return ctx.cached(("masking", kind, run.name), make)


def _ari(run: Run, ctx: Context, *labelings: str) -> str:
    ari = _masked(run, ctx, "key")["scores"].set_index("labeling")["ari"]
    return " / ".join(f"{ari[name]:.2f}" for name in labelings)


def score_table(scores: pd.DataFrame) -> pd.DataFrame:
    """:func:`probes.masking.cluster_scores` as a narrow table for a side-by-side cell: the
    labeling in words with its number of labels, its silhouette and adjusted Rand index."""
    labeling = [
        f"{name.replace('_', ' ')} ({n})" for name, n in zip(scores["labeling"], scores["n_labels"], strict=True)
    ]
    return pd.DataFrame({"labeling (labels)": labeling, "silhouette": scores["silhouette"], "ARI": scores["ari"]})


def masking_cell(kind: str) -> Callable[[Run, Context], Cell]:
    """The cell builder of key-token (``kind="key"``) or second-anchor masking."""

    def build(run: Run, ctx: Context) -> Cell:
        result = _masked(run, ctx, kind)
        n = len(result["labels"])
        colour = "ordered_pair" if kind == "key" else "first_anchor"
        frame = project(
            result["vectors"],
            method=ctx.config.projection,
            perplexity=min(12.0, n - 1.0),
            seed=ctx.config.seed,
            labels=result["labels"],
        )
        fig = plot_projection(frame, color=colour, title=None)
        # the pairs' legend in rows under the plot, so that it does not squeeze the plot
        fig.update_layout(
            legend=dict(
                orientation="h",
                yanchor="top",
                y=-0.2,
                x=0,
                font=dict(size=10),
                entrywidth=44,
                title=dict(text=colour.replace("_", " "), side="top left"),
            )
        )
        note = ""
        if kind != "key":
            note = f"block score of equal g(x; a1) in the cosine similarity of these outputs (journal Fig. 4D): {result['block']:.3f}"
        return Cell(
            figure=compact(fig, 460),
            html=html_table(score_table(result["scores"]), 2, wrap=True, wrap_names=True),
            note=note,
            height=460,
        )

    return build


def section_key_masking(ctx: Context) -> Section:
    sentence = (
        f"Last-block outputs at the last position with the key token masked after the softmax, projected to 2-D ({ctx.config.projection}), "
        "one colour per anchor pair, with how well ordered pairs, unordered (symmetric) pairs and composite shifts explain the clusters "
        "(adjusted Rand index, silhouette): the journal's Fig. 4C, where the symmetric pairs (a,b) and (b,a) merge in Phase 2 with good commutativity "
        "(at an init between Phase 1's large init and Phase 3's small init) "
        "(a higher adjusted Rand index for the unordered pairs than for the ordered ones)."
    ) + measured(
        ctx,
        "the adjusted Rand index of the unordered / ordered pairs",
        lambda run: _ari(run, ctx, "unordered_pair", "ordered_pair"),
    )
    return Section("key-masking", "Key-token masking", sentence, per_run(ctx, masking_cell("key")))


def section_second_anchor_masking(ctx: Context) -> Section:
    sentence = (
        f"Last-block outputs with the second anchor masked, projected to 2-D ({ctx.config.projection}) and coloured by the first anchor, "
        "with cluster scores and the block score of equal g(x; a1) = x + s(a1) in their cosine similarity: what key and first anchor "
        "alone produce, the journal's Fig. 4B/4D, where small init with weight decay (Phase 3) computes the single-anchor step "
        "(a high block score) and large init (Phases 1 and 2) does not."
    ) + measured(ctx, "the block score of equal g(x; a1)", lambda run: f"{_masked(run, ctx, 'second')['block']:.3f}")
    return Section("second-anchor-masking", "Second-anchor masking", sentence, per_run(ctx, masking_cell("second")))


# ------------------------------------------------------------------- similarity heatmaps

#: Inputs of the similarity heatmaps: keys x pairs, with targets that coincide across cells.
SIMILARITY_KEYS = tuple(range(30, 42))
RESIDUAL_PAIRS = ((1, 2), (2, 1), (1, 3), (3, 4), (4, 3), (2, 4))
VALUE_PAIRS = ((1, 3), (2, 3), (3, 3), (4, 3))


def _similarity(run: Run, ctx: Context, kind: str) -> SimilarityResult:
    """Layer 1's residual-stream (``kind="residual"``) or value-vector similarity of ``run``."""
    assert run.model is not None
    if run.model.cfg.n_layers < 2:
        raise NotApplicable(
            f"not applicable: the model has {run.model.cfg.n_layers} layer; this probe reads layer 1 (the second)"
        )

    def make() -> SimilarityResult:
        pairs = RESIDUAL_PAIRS if kind == "residual" else VALUE_PAIRS
        grid = input_grid(keys=SIMILARITY_KEYS, pairs=list(pairs), seed=ctx.config.seed).to(ctx.config.device)
        return (residual_similarity if kind == "residual" else value_similarity)(run.model, grid, layer=1)

    return ctx.cached(("similarity", kind, run.name), make)


def _similarity_cell(kind: str) -> Callable[[Run, Context], Cell]:
    def build(run: Run, ctx: Context) -> Cell:
        result = _similarity(run, ctx, kind)
        fig = plot_similarity(result, title=f"block score {result.score:.3f}")
        fig.update_traces(marker=dict(size=4), selector=dict(type="scatter"))
        labels = list(fig.data[0].x)
        pairs = list(zip(result.inputs["a1"], result.inputs["a2"], strict=True))
        starts = [
            i for i in range(len(pairs)) if i == 0 or pairs[i] != pairs[i - 1]
        ]  # pair-major: one tick per pair block
        ticks = dict(
            showticklabels=True,
            tickmode="array",
            tickvals=[labels[i] for i in starts],
            ticktext=[f"({pairs[i][0]},{pairs[i][1]})" for i in starts],
            tickfont=dict(size=10),
        )
        keys = f"keys {SIMILARITY_KEYS[0]}..{SIMILARITY_KEYS[-1]} within each pair"
        fig.update_layout(
            showlegend=False,
            xaxis=dict(**ticks, title=dict(text=keys, font=dict(size=11)), constrain="domain"),
            yaxis=dict(**ticks, scaleanchor="x", scaleratio=1, constrain="domain"),
        )
        return Cell(figure=compact(fig, 440, title=f"block score {result.score:.3f}"), height=440)

    return build


def section_residual_similarity(ctx: Context) -> Section:
    keys = f"{SIMILARITY_KEYS[0]}..{SIMILARITY_KEYS[-1]}"
    sentence = (
        f"Cosine similarity of the last position's residual stream after layer 1's attention (layers numbered from 0, as TransformerLens does) across inputs with keys {keys} "
        f"and pairs {', '.join(f'({a},{b})' for a, b in RESIDUAL_PAIRS)} (pair-major), equal-target cells outlined, with the block score "
        "(mean similarity of equal-target cells minus the others): NeurIPS 2024 Fig. 4a (inferential, small init) / 4b (symmetric, large init), "
        "with clearer equal-target blocks (a higher block score) in the inferential model."
    ) + measured(ctx, "the block score", lambda run: f"{_similarity(run, ctx, 'residual').score:.3f}")
    return Section(
        "residual-similarity",
        "Similarity: residual stream after layer 1's attention",
        sentence,
        per_run(ctx, _similarity_cell("residual")),
    )


def section_value_similarity(ctx: Context) -> Section:
    sentence = (
        "Cosine similarity of layer 1's value vectors at the first anchor's position across (key, first anchor), "
        "cells with equal g(x; a1) = x + s(a1) outlined, with the block score: NeurIPS 2024 Fig. 4c, where the inferential model "
        "(small init) computes the single-anchor step (a high block score), which the symmetric solution of large init does not need; "
        "the journal's Fig. 4D shows the same on second-anchor-masked outputs."
    ) + measured(ctx, "the block score", lambda run: f"{_similarity(run, ctx, 'value').score:.3f}")
    return Section(
        "value-similarity", "Similarity: layer 1's value vectors", sentence, per_run(ctx, _similarity_cell("value"))
    )


# ------------------------------------------------------------------ weights
# The report's sections on the geometry of each model's weights: condensation of layer
# 0's W_Q, the token embeddings' PCA and covariance eigenvalues, the stable ranks and the
# singular spectra of every weight matrix (heads merged).

#: The tokens whose embeddings the report reads: the anchor tasks' keys.
KEY_TOKENS = range(KEY_LOW, KEY_HIGH + 1)

# --------------------------------------------------------------------------- condensation


def _condensation(run: Run, ctx: Context) -> Condensation:
    """Layer 0's W_Q query neurons (heads merged) grouped at cosine similarity > 0.7."""
    assert run.model is not None
    return ctx.cached(
        ("condensation", run.name), lambda: condensation(merged_weight(run.model, "W_Q", 0).T, threshold=0.7)
    )


def condensation_cell(run: Run, ctx: Context) -> Cell:
    result = _condensation(run, ctx)
    fig = plot_condensation(result, title="L0 W_Q")
    fig.update_layout(
        xaxis=dict(showticklabels=False, constrain="domain"),
        yaxis=dict(showticklabels=False, scaleanchor="x", scaleratio=1, constrain="domain"),
    )
    sizes = list(result.group_sizes[:8])
    note = f"{result.n_groups} groups of neurons with similarity > 0.7; largest sizes {sizes}"
    return Cell(figure=compact(fig, 400, title=f"{result.n_groups} groups at > 0.7"), note=note, height=400)


def section_condensation(ctx: Context) -> Section:
    sentence = (
        "Cosine similarity between the input weight vectors of layer 0's query neurons (W_Q, heads merged), "
        "grouped at similarity > 0.7: a few large blocks mean condensation; NeurIPS 2024 Fig. 5a (small init) / 5b (large init) "
        "and the journal's Fig. 5A, where small init condenses the neurons into a few groups and large init leaves many."
    ) + measured(
        ctx,
        "the groups",
        lambda run: f"{_condensation(run, ctx).n_groups} groups of {len(_condensation(run, ctx).groups)} neurons",
    )
    return Section("condensation", "W_Q condensation", sentence, per_run(ctx, condensation_cell))


# ------------------------------------------------------------------------ token embeddings

#: Components the embedding-covariance figure shows.
EIGEN_TOP = 10


def _embedding_pca(run: Run, ctx: Context) -> EmbeddingPCA:
    assert run.model is not None
    return ctx.cached(("embedding-pca", run.name), lambda: embedding_pca(run.model, tokens=KEY_TOKENS))


def embedding_cell(run: Run, ctx: Context) -> Cell:
    result = _embedding_pca(run, ctx)
    fig = plot_embedding_pca(result, title="")
    fig.update_layout(coloraxis_showscale=False)
    fig.update_traces(textfont=dict(size=8))
    title = f"ordinal score {result.ordinal_score:.2f} ({result.ordinal_component})"
    return Cell(figure=compact(fig, 400, title=title), height=400)


def section_embedding(ctx: Context) -> Section:
    found = measured(ctx, "the ordinal score", lambda run: f"{_embedding_pca(run, ctx).ordinal_score:.2f}")
    sentence = (
        "The token embeddings of 20..99 projected on their first two principal components, each token written at its place, "
        "with the ordinal score (largest |Spearman correlation| of token value and PC1 or PC2, 1 for a perfectly ordered layout). "
        "NeurIPS 2024 Fig. 5c/5d and the journal's Fig. 5B expect an ordinal layout (tokens in the order of their values) under "
        "small init and none under large init." + found
    )
    return Section("embedding-pca", "Embedding PCA", sentence, per_run(ctx, embedding_cell))


def variance_shares(eigenvalues: Any, top: int = EIGEN_TOP) -> list[float]:
    """Share of the total variance in each of the ``top`` largest covariance eigenvalues."""
    values = [max(float(v), 0.0) for v in eigenvalues]
    total = sum(values)
    return [v / total if total > 0 else math.nan for v in values[:top]]


def eigenvalue_cell(run: Run, ctx: Context) -> Cell:
    shares = variance_shares(_embedding_pca(run, ctx).eigenvalues)
    index = list(range(1, len(shares) + 1))
    cumulative = [sum(shares[:i]) for i in index]
    fig = go.Figure(
        [
            go.Bar(
                x=index,
                y=shares,
                name="share of variance",
                marker_color="#636efa",
                text=[f"{v:.2f}" for v in shares],
                textposition="outside",
                hovertemplate="component %{x}: %{y:.3f} of the variance<extra></extra>",
            ),
            go.Scatter(
                x=index,
                y=cumulative,
                name="cumulative",
                mode="lines+markers",
                line=dict(color="#444", dash="dot"),
                hovertemplate="components 1..%{x}: %{y:.3f}<extra></extra>",
            ),
        ]
    )
    fig.update_layout(
        xaxis=dict(title="principal component", dtick=1),
        yaxis=dict(title="share of the variance", range=[0, 1.08]),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
    )
    note = f"top 2 components: {sum(shares[:2]):.2f} of the variance; top {len(shares)}: {cumulative[-1]:.2f}"
    return Cell(figure=compact(fig, 340), note=note, height=340)


def section_eigenvalues(ctx: Context) -> Section:
    found = measured(
        ctx,
        "the share of the variance in the top 2 components",
        lambda run: f"{sum(variance_shares(_embedding_pca(run, ctx).eigenvalues)[:2]):.2f}",
    )
    sentence = (
        f"The {EIGEN_TOP} largest eigenvalues of the covariance of the token embeddings 20..99, each as its share of the total variance "
        "(bars), with the cumulative share (dotted). NeurIPS 2024 Fig. 7 expects a few large eigenvalues (most of the variance in the "
        "first components) under small init and a flatter spectrum under large init." + found
    )
    return Section("embedding-eigenvalues", "Embedding covariance eigenvalues", sentence, per_run(ctx, eigenvalue_cell))


# ------------------------------------------------------------------ ranks and spectra


def section_stable_ranks(ctx: Context) -> Section:
    fig = go.Figure()
    rows, ranks = [], {}
    for i, run in enumerate(ctx.runs):
        if run.model is None:
            continue
        frame = weight_stable_ranks(run.model)
        labels = [
            name if pd.isna(layer) else f"L{layer} {name}"
            for layer, name in zip(frame["layer"], frame["name"], strict=True)
        ]
        fig.add_trace(
            go.Bar(x=labels, y=frame["stable_rank"], name=run.name, marker_color=RUN_COLOURS[i % len(RUN_COLOURS)])
        )
        w_q = frame[(frame["name"] == "W_Q") & (frame["layer"] == 0)]["stable_rank"]
        ranks[run.name] = float(w_q.iloc[0]) if len(w_q) else math.nan
        rows.append(
            {
                "run": run.name,
                "L0 W_Q stable rank": ranks[run.name],
                "mean over matrices": float(frame["stable_rank"].mean()),
            }
        )
    sentence = (
        "Stable rank ||W||_F^2 / ||W||_2^2 of every weight matrix (heads merged; L0 is layer 0, as TransformerLens numbers layers); the journal's Fig. 5C colours its "
        "(gamma, weight decay) grid by layer 0's W_Q stable rank, which falls as the phase index rises: lower under small init (and larger weight decay) than under large init."
    ) + measured(ctx, "layer 0's W_Q stable rank", lambda run: f"{ranks[run.name]:.2f}" if run.name in ranks else None)
    if not rows:
        return Section("stable-ranks", "Stable ranks", sentence, [Cell(note="no run has weights yet")], combined=True)
    fig.update_layout(barmode="group", yaxis_title="stable rank")
    compact(fig, 380)
    return Section(
        "stable-ranks",
        "Stable ranks",
        sentence,
        [Cell(figure=fig, html=html_table(pd.DataFrame(rows), 2), height=380)],
        combined=True,
    )


#: Singular values whose share of ||W||_F^2 the spectra's caption states.
SPECTRA_TOP = 3


def _spectra(run: Run, ctx: Context) -> pd.DataFrame:
    assert run.model is not None
    return ctx.cached(("spectra", run.name), lambda: singular_value_spectra(run.model))


def top_share(spectra: pd.DataFrame, top: int = SPECTRA_TOP) -> float:
    """The share of sum s_i^2 = ||W||_F^2 in the ``top`` largest singular values, averaged over the matrices of ``spectra``."""
    squares = spectra.assign(square=spectra["normalized"] ** 2)
    shares = squares.groupby("matrix")["square"].apply(
        lambda s: s.iloc[:top].sum() / s.sum() if s.sum() > 0 else math.nan
    )
    return float(shares.mean())


def spectra_cell(run: Run, ctx: Context) -> Cell:
    fig = plot_spectra(_spectra(run, ctx), normalized=True, title=None)
    fig.update_traces(marker=dict(size=3), line=dict(width=1.5))
    # the matrices' legend in rows under the plot, so that it does not squeeze the plot; as
    # tall as its entries need (maxheight 1: the whole figure's height), never scrolled
    fig.update_layout(
        legend=dict(
            orientation="h",
            yanchor="top",
            y=-0.22,
            x=0,
            font=dict(size=9),
            entrywidth=62,
            maxheight=1,
            title=dict(text="matrix", side="top left"),
        ),
        yaxis_title="s_i / s_max",
    )
    return Cell(figure=compact(fig, 560), height=560)


def section_spectra(ctx: Context) -> Section:
    sentence = (
        "Singular values of every weight matrix (heads merged), divided by the largest, on a log scale: a few dominant "
        "directions mean a condensed, low-complexity matrix (the spectra behind the stable ranks of the journal's Fig. 5C), expected under small init, not under large init."
    ) + measured(
        ctx,
        f"the share of sum s_i^2 in the top {SPECTRA_TOP} singular values (mean over the matrices)",
        lambda run: f"{top_share(_spectra(run, ctx)):.2f}",
    )
    return Section("spectra", "Singular spectra", sentence, per_run(ctx, spectra_cell))
