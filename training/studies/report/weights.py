"""The report's sections on the geometry of each model's weights: condensation of layer
0's W_Q, the token embeddings' PCA and covariance eigenvalues, the stable ranks and the
singular spectra of every weight matrix (heads merged).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from interp_init.tasks.anchor_pairs import KEY_HIGH, KEY_LOW
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
from probes.rank import merged_weight, weight_stable_ranks
from training.studies.report.cells import RUN_COLOURS, Cell, Context, Section, compact, html_table, measured, per_run
from training.studies.report.runs import Run

#: The tokens whose embeddings the report reads: the anchor tasks' keys.
KEY_TOKENS = range(KEY_LOW, KEY_HIGH + 1)

# --------------------------------------------------------------------------- condensation


def _condensation(run: Run, ctx: Context) -> Condensation:
    """Layer 0's W_Q query neurons (heads merged) grouped at cosine similarity > 0.7."""
    assert run.model is not None
    return ctx.cached(("condensation", run.name), lambda: condensation(merged_weight(run.model, "W_Q", 0).T, threshold=0.7))


def condensation_cell(run: Run, ctx: Context) -> Cell:
    result = _condensation(run, ctx)
    fig = plot_condensation(result, title="L0 W_Q")
    fig.update_layout(xaxis=dict(showticklabels=False, constrain="domain"), yaxis=dict(showticklabels=False, scaleanchor="x", scaleratio=1, constrain="domain"))
    sizes = list(result.group_sizes[:8])
    note = f"{result.n_groups} groups of neurons with similarity > 0.7; largest sizes {sizes}"
    return Cell(figure=compact(fig, 400, title=f"{result.n_groups} groups at > 0.7"), note=note, height=400)


def section_condensation(ctx: Context) -> Section:
    sentence = (
        "Cosine similarity between the input weight vectors of layer 0's query neurons (W_Q, heads merged), "
        "grouped at similarity > 0.7: a few large blocks mean condensation; NeurIPS 2024 Fig. 5a (small init) / 5b (large init) "
        "and the journal's Fig. 5A, where small init condenses the neurons into a few groups and large init leaves many."
    ) + measured(ctx, "the groups", lambda run: f"{_condensation(run, ctx).n_groups} groups of {len(_condensation(run, ctx).groups)} neurons")
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
            go.Bar(x=index, y=shares, name="share of variance", marker_color="#636efa", text=[f"{v:.2f}" for v in shares], textposition="outside",
                   hovertemplate="component %{x}: %{y:.3f} of the variance<extra></extra>"),
            go.Scatter(x=index, y=cumulative, name="cumulative", mode="lines+markers", line=dict(color="#444", dash="dot"),
                       hovertemplate="components 1..%{x}: %{y:.3f}<extra></extra>"),
        ]
    )  # fmt: skip
    fig.update_layout(
        xaxis=dict(title="principal component", dtick=1),
        yaxis=dict(title="share of the variance", range=[0, 1.08]),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
    )
    note = f"top 2 components: {sum(shares[:2]):.2f} of the variance; top {len(shares)}: {cumulative[-1]:.2f}"
    return Cell(figure=compact(fig, 340), note=note, height=340)


def section_eigenvalues(ctx: Context) -> Section:
    found = measured(ctx, "the share of the variance in the top 2 components", lambda run: f"{sum(variance_shares(_embedding_pca(run, ctx).eigenvalues)[:2]):.2f}")
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
        labels = [name if pd.isna(layer) else f"L{layer} {name}" for layer, name in zip(frame["layer"], frame["name"], strict=True)]
        fig.add_trace(go.Bar(x=labels, y=frame["stable_rank"], name=run.name, marker_color=RUN_COLOURS[i % len(RUN_COLOURS)]))
        w_q = frame[(frame["name"] == "W_Q") & (frame["layer"] == 0)]["stable_rank"]
        ranks[run.name] = float(w_q.iloc[0]) if len(w_q) else math.nan
        rows.append({"run": run.name, "L0 W_Q stable rank": ranks[run.name], "mean over matrices": float(frame["stable_rank"].mean())})
    sentence = (
        "Stable rank ||W||_F^2 / ||W||_2^2 of every weight matrix (heads merged; L0 is layer 0, as TransformerLens numbers layers); the journal's Fig. 5C colours its "
        "(gamma, weight decay) grid by layer 0's W_Q stable rank, which falls as the phase index rises: lower under small init (and larger weight decay) than under large init."
    ) + measured(ctx, "layer 0's W_Q stable rank", lambda run: f"{ranks[run.name]:.2f}" if run.name in ranks else None)
    if not rows:
        return Section("stable-ranks", "Stable ranks", sentence, [Cell(note="no run has weights yet")], combined=True)
    fig.update_layout(barmode="group", yaxis_title="stable rank")
    compact(fig, 380)
    return Section("stable-ranks", "Stable ranks", sentence, [Cell(figure=fig, html=html_table(pd.DataFrame(rows), 2), height=380)], combined=True)


#: Singular values whose share of ||W||_F^2 the spectra's caption states.
SPECTRA_TOP = 3


def _spectra(run: Run, ctx: Context) -> pd.DataFrame:
    assert run.model is not None
    return ctx.cached(("spectra", run.name), lambda: singular_value_spectra(run.model))


def top_share(spectra: pd.DataFrame, top: int = SPECTRA_TOP) -> float:
    """The share of sum s_i^2 = ||W||_F^2 in the ``top`` largest singular values, averaged over the matrices of ``spectra``."""
    squares = spectra.assign(square=spectra["normalized"] ** 2)
    shares = squares.groupby("matrix")["square"].apply(lambda s: s.iloc[:top].sum() / s.sum() if s.sum() > 0 else math.nan)
    return float(shares.mean())


def spectra_cell(run: Run, ctx: Context) -> Cell:
    fig = plot_spectra(_spectra(run, ctx), normalized=True, title=None)
    fig.update_traces(marker=dict(size=3), line=dict(width=1.5))
    # the matrices' legend in rows under the plot, so that it does not squeeze the plot; as
    # tall as its entries need (maxheight 1: the whole figure's height), never scrolled
    fig.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.22, x=0, font=dict(size=9), entrywidth=62, maxheight=1,
                                  title=dict(text="matrix", side="top left")), yaxis_title="s_i / s_max")  # fmt: skip
    return Cell(figure=compact(fig, 560), height=560)


def section_spectra(ctx: Context) -> Section:
    sentence = (
        "Singular values of every weight matrix (heads merged), divided by the largest, on a log scale: a few dominant "
        "directions mean a condensed, low-complexity matrix (the spectra behind the stable ranks of the journal's Fig. 5C), expected under small init, not under large init."
    ) + measured(ctx, f"the share of sum s_i^2 in the top {SPECTRA_TOP} singular values (mean over the matrices)", lambda run: f"{top_share(_spectra(run, ctx)):.2f}")
    return Section("spectra", "Singular spectra", sentence, per_run(ctx, spectra_cell))
