"""Condensation of neurons, embedding structure and weight spectra (docs/science.md#the-analyses).

What it measures: how simple the learned weights are.

* :func:`condensation`: the cosine similarity between neurons' input weight vectors and
  the groups of neurons that point the same way (NeurIPS 2024 Fig. 5a/b; the journal's
  Fig. 5A).  Small init (inferential) condenses into a few directions; large init
  (symmetric) does not.  For layer 0's query weights pass
  ``merged_weight(model, "W_Q", 0).T``: its rows are the ``n_heads * d_head`` query
  neurons (head-major: row ``h * d_head + i`` is head h's i-th query unit), each a
  vector of length ``d_model`` (the weights it reads from the residual stream).
  Grouping is order-independent: SciPy hierarchical clustering with average linkage on
  the distance 1 - |cosine|, cut at 1 - ``threshold`` (the papers' text: > 0.7; their code
  grouped greedily at > 0.4, which depends on the order of the neurons). A condensed
  neuron aligns *or anti-aligns* with its direction (the papers' similarity maps show
  both signs), so by default the sign is ignored (``signed=False``); ``signed=True``
  groups by the signed cosine.
* :func:`embedding_pca`: PCA of the token embeddings (default the whole vocabulary; the
  papers read the anchor tasks' keys 20..99: NeurIPS Fig. 5c/d, the journal's Fig. 5B), the eigenvalues of the embedding covariance and an ordinal score,
  the largest |Spearman correlation| between the token value and its PC1 or PC2
  coordinate (1: the tokens lie in numeric order along that axis).  Exact: numpy's SVD
  of the centred embeddings (:func:`principal_components`), the same on every call.
* :func:`singular_value_spectra`: the singular values of every weight matrix (heads
  merged), the spectrum behind :func:`probes.stable_rank` (journal Fig. 5C).

Shapes: ``condensation`` takes a 2-D ``[neurons, inputs]`` matrix; the similarity is
``[neurons, neurons]``.  ``embedding_pca`` returns ``[n_tokens]`` rows of coordinates
and ``[d_model]`` eigenvalues.

Example::

    >>> import torch
    >>> from probes import condensation
    >>> directions = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    >>> weight = directions[[0, 1, 0, 0, 1]] * torch.tensor([[1.0], [2.0], [3.0], [0.5], [1.0]])
    >>> result = condensation(weight, threshold=0.7)
    >>> result.n_groups, result.group_sizes, result.groups.tolist()
    (2, (3, 2), [0, 1, 0, 0, 1])
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import torch
from jaxtyping import Float
from scipy.cluster.hierarchy import fcluster, leaves_list, linkage
from scipy.spatial.distance import squareform
from scipy.stats import spearmanr
from torch import Tensor

from probes._common import check_finite, check_int
from probes.protocol import HookedModel, check_model
from probes.rank import merged_weight, singular_values, weight_names
from probes.similarity import cosine_similarity_matrix
from probes.views import TableDisplay


@dataclass(frozen=True)
class Condensation(TableDisplay):
    """Result of :func:`condensation`.

    Attributes:
        similarity: ``[n, n]`` cosine similarity of the rows (float64 numpy).
        groups: ``[n]`` group id of each row; ids 0, 1, ... by decreasing size (ties:
            by the smallest row index in the group), so they do not depend on row order.
        group_sizes: sizes of groups 0, 1, ...
        order: ``[n]`` rows sorted by group, then by the dendrogram within a group.
        threshold: the similarity above which (on average) rows are grouped.
        signed: whether the grouping used the signed cosine (``False``: its absolute value).
    """

    similarity: np.ndarray
    groups: np.ndarray
    group_sizes: tuple[int, ...]
    order: np.ndarray
    threshold: float
    signed: bool = False

    @property
    def n_groups(self) -> int:
        return len(self.group_sizes)

    def table(self) -> pd.DataFrame:
        """One row per group: its size and rows (neurons), and the mean |cosine| (or cosine) within it."""
        values = self.similarity if self.signed else np.abs(self.similarity)
        rows = []
        for group, size in enumerate(self.group_sizes):
            members = np.flatnonzero(self.groups == group)
            block = values[np.ix_(members, members)]
            within = float((block.sum() - np.trace(block)) / (size * (size - 1))) if size > 1 else float("nan")
            rows.append({"group": group, "size": size, "rows": members.tolist(), "mean similarity within": within})
        return pd.DataFrame(rows)

    @property
    def reordered(self) -> np.ndarray:
        """The similarity matrix with rows and columns in :attr:`order` (blocks = groups)."""
        return self.similarity[np.ix_(self.order, self.order)]


def condensation(weight: Float[Tensor, "neurons inputs"], threshold: float = 0.7, signed: bool = False) -> Condensation:
    """Group the rows of ``weight`` (one neuron's input weights per row) by direction.

    Rows whose average-linkage |cosine similarity| (``signed=True``: the cosine itself)
    exceeds ``threshold`` (in [-1, 1]) share a group: a row and its negation are one
    direction.  A zero row has similarity 0 with every row.
    """
    matrix = torch.as_tensor(weight)
    if matrix.ndim != 2:
        raise ValueError(
            f"weight must be a 2-D [neurons, inputs] matrix, got shape {tuple(matrix.shape)}; for W_Q use merged_weight(model, 'W_Q', 0).T"
        )
    if matrix.shape[0] < 1 or matrix.shape[1] < 1:
        raise ValueError(f"weight must have at least one row and column, got shape {tuple(matrix.shape)}")
    if not isinstance(signed, bool):
        raise ValueError(f"signed must be True or False, got {signed!r}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not -1.0 <= float(threshold) <= 1.0:
        raise ValueError(f"threshold is a cosine similarity and must lie in [-1, 1], got {threshold!r}")
    check_finite(matrix, "weight")
    sim = cosine_similarity_matrix(matrix).numpy()
    n = sim.shape[0]
    if n == 1:
        return Condensation(sim, np.zeros(1, dtype=int), (1,), np.zeros(1, dtype=int), float(threshold), bool(signed))
    distance = np.clip(1.0 - (sim if signed else np.abs(sim)), 0.0, 2.0)
    np.fill_diagonal(distance, 0.0)
    distance = (distance + distance.T) / 2
    tree = linkage(squareform(distance, checks=False), method="average")
    raw = fcluster(tree, t=1.0 - float(threshold), criterion="distance")
    members = {label: np.flatnonzero(raw == label) for label in np.unique(raw)}
    ranked = sorted(members.values(), key=lambda rows: (-len(rows), rows.min()))
    groups = np.empty(n, dtype=int)
    for gid, rows in enumerate(ranked):
        groups[rows] = gid
    leaf_rank = np.empty(n, dtype=int)
    leaf_rank[leaves_list(tree)] = np.arange(n)
    order = np.lexsort((leaf_rank, groups))
    return Condensation(sim, groups, tuple(len(r) for r in ranked), order, float(threshold), bool(signed))


def plot_condensation(
    result: Condensation, title: str | None = "Cosine similarity of neurons' input weights"
) -> go.Figure:
    """Heatmap of the reordered similarity, with the group boundaries drawn (one trace of squares, however many groups).

    The heatmap and the squares share one pair of axes (cell ``i`` of the grouped order at
    ``i``, the neuron ids as tick labels), so the outlines stay on their cells however the
    axes are later constrained (``scaleanchor``, ``constrain="domain"``)."""
    order = result.order
    n = len(order)
    cells = list(range(n))
    fig = go.Figure(
        go.Heatmap(
            z=result.reordered,
            x=cells,
            y=cells,
            zmin=-1,
            zmax=1,
            colorscale="RdBu_r",
            colorbar={"title": "cosine"},
            hovertemplate="cells %{y} and %{x} of the grouped order: cosine %{z:.2f}<extra></extra>",
        )
    )
    starts = np.concatenate([[0], np.cumsum(result.group_sizes)[:-1]]) - 0.5
    ends = starts + np.asarray(result.group_sizes)
    gap = np.full(len(starts), np.nan)
    xs = np.stack([starts, ends, ends, starts, starts, gap], 1).ravel()  # every group's square in one trace
    ys = np.stack([starts, starts, ends, ends, starts, gap], 1).ravel()
    fig.add_trace(
        go.Scatter(x=xs, y=ys, mode="lines", line={"color": "black", "width": 1.5}, showlegend=False, hoverinfo="skip")
    )
    ticks = {"tickmode": "array", "tickvals": cells, "ticktext": [str(i) for i in order]}
    fig.update_layout(
        title=f"{title + ': ' if title else ''}{result.n_groups} groups at > {result.threshold:g} (sizes {list(result.group_sizes[:8])}{'...' if result.n_groups > 8 else ''})",
        xaxis={**ticks, "title": "neuron", "range": [-0.5, n - 0.5], "showgrid": False, "zeroline": False},
        yaxis={**ticks, "title": "neuron", "range": [n - 0.5, -0.5], "showgrid": False, "zeroline": False},
    )
    return fig


def principal_components(array: np.ndarray, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Exact PCA of the rows of a 2-D array: ``(coordinates [n, k], explained variance ratios [k])``.

    From numpy's SVD of the centred rows in float64 (LAPACK; no random start), so every
    call gives the same result.  Each component's sign is fixed so that its
    largest-magnitude loading is positive (scikit-learn's convention); components beyond
    the rank of the data are zero."""
    array = np.asarray(array, dtype=np.float64)
    centred = array - array.mean(axis=0)
    u, s, vt = np.linalg.svd(centred, full_matrices=False)
    signs = np.sign(vt[np.arange(len(vt)), np.abs(vt).argmax(axis=1)])
    signs[signs == 0] = 1.0
    coordinates = np.zeros((len(array), k))
    shown = min(k, len(s))
    coordinates[:, :shown] = (u * (s * signs))[:, :shown]
    variances = s**2
    ratios = np.zeros(k)
    if variances.sum() > 0:
        ratios[:shown] = variances[:shown] / variances.sum()
    return coordinates, ratios


@dataclass(frozen=True)
class EmbeddingPCA(TableDisplay):
    """Result of :func:`embedding_pca`.

    Attributes:
        coordinates: one row per token: ``token, pc1, pc2``.
        explained_variance_ratio: of PC1 and PC2.
        eigenvalues: ``[d_model]`` eigenvalues of the embeddings' covariance
            (``ddof=1``), descending; the PCA variances are the first of them.
        ordinal_score: max over PC1, PC2 of |Spearman correlation| of token value and coordinate.
        ordinal_component: ``"pc1"`` or ``"pc2"``, where the score was found.
    """

    coordinates: pd.DataFrame
    explained_variance_ratio: np.ndarray
    eigenvalues: np.ndarray
    ordinal_score: float
    ordinal_component: str

    def table(self) -> pd.DataFrame:
        """One row: tokens, the variance PC1 and PC2 explain, and the ordinal score with its component."""
        return pd.DataFrame(
            [
                {
                    "tokens": len(self.coordinates),
                    "PC1 variance": float(self.explained_variance_ratio[0]),
                    "PC2 variance": float(self.explained_variance_ratio[1]),
                    "ordinal score": self.ordinal_score,
                    "ordinal component": self.ordinal_component,
                }
            ]
        )


def embedding_pca(model: HookedModel, tokens: Iterable[int] | None = None) -> EmbeddingPCA:
    """PCA of the rows of ``W_E`` for ``tokens`` (default the model's whole vocabulary).

    ``tokens`` are integer token ids (at least 3 distinct ones; the anchor tasks' keys are
    ``range(20, 100)``); the model needs ``d_model >= 2`` and finite embeddings.  Exact
    and deterministic (:func:`principal_components`: numpy's SVD, signs fixed)."""
    check_model(model)
    if tokens is None:
        tokens = range(model.cfg.d_vocab)
    if isinstance(tokens, (Tensor, np.ndarray)):
        tokens = tokens.reshape(-1) if tokens.ndim <= 1 else tokens
    tokens = [check_int(t, "each token id") for t in tokens]
    if len(set(tokens)) < 3:
        raise ValueError(f"embedding_pca needs at least 3 distinct tokens, got {sorted(set(tokens))}")
    bad = [t for t in tokens if not 0 <= t < model.cfg.d_vocab]
    if bad:
        raise ValueError(
            f"tokens must lie in 0..{model.cfg.d_vocab - 1} (the vocabulary), got {bad[:5]}; pass tokens=<ids within it>"
        )
    if model.cfg.d_model < 2:
        raise ValueError(
            f"embedding_pca projects onto 2 components and needs d_model >= 2, got d_model={model.cfg.d_model}"
        )
    emb = merged_weight(model, "W_E")[tokens].double().cpu().numpy()
    check_finite(emb, "W_E (the token embeddings)")
    xy, ratios = principal_components(emb, 2)
    eigenvalues = np.sort(np.linalg.eigvalsh(np.cov(emb, rowvar=False)))[::-1].clip(min=0.0)
    rhos = [abs(float(spearmanr(tokens, xy[:, i]).statistic)) for i in range(2)]
    rhos = [0.0 if np.isnan(r) else r for r in rhos]
    best = int(np.argmax(rhos))
    coords = pd.DataFrame({"token": tokens, "pc1": xy[:, 0], "pc2": xy[:, 1]})
    return EmbeddingPCA(coords, ratios, eigenvalues, rhos[best], f"pc{best + 1}")


def plot_embedding_pca(result: EmbeddingPCA, title: str | None = "Token embeddings, PCA") -> go.Figure:
    """Token values written at their (PC1, PC2) position, coloured by value."""
    frame = result.coordinates
    evr = result.explained_variance_ratio
    fig = px.scatter(frame, x="pc1", y="pc2", text="token", color="token", color_continuous_scale="Viridis")
    fig.update_traces(textposition="top center", marker={"size": 5})
    fig.update_layout(
        title=f"{title + ': ' if title else ''}ordinal score {result.ordinal_score:.2f} ({result.ordinal_component})",
        xaxis_title=f"PC1 ({evr[0]:.1%})",
        yaxis_title=f"PC2 ({evr[1]:.1%})",
    )
    return fig


def plot_eigenvalues(result: EmbeddingPCA, title: str | None = "Eigenvalues of the embedding covariance") -> go.Figure:
    """The covariance eigenvalues, descending, on a log axis."""
    fig = go.Figure(go.Scatter(x=np.arange(1, len(result.eigenvalues) + 1), y=result.eigenvalues, mode="lines+markers"))
    fig.update_layout(title=title, xaxis_title="index", yaxis={"type": "log", "title": "eigenvalue"})
    return fig


def singular_value_spectra(model: HookedModel) -> pd.DataFrame:
    """Singular values of every weight matrix (heads merged), long format.

    Columns: ``matrix`` ("L0 W_Q", "W_E", ...), ``layer`` (<NA> for embeddings and
    unembedding), ``name``, ``index`` (0 = largest), ``singular_value``, ``normalized``
    (divided by the largest).
    """
    frames = []
    for layer, name in weight_names(model):  # one merged matrix at a time
        s = singular_values(merged_weight(model, name, layer)).numpy()
        frames.append(
            pd.DataFrame(
                {
                    "matrix": name if layer is None else f"L{layer} {name}",
                    "layer": layer,
                    "name": name,
                    "index": np.arange(len(s)),
                    "singular_value": s,
                    "normalized": s / s[0] if s[0] > 0 else np.zeros_like(s),
                }
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    frame["layer"] = frame["layer"].astype("Int64")
    return frame


def plot_spectra(
    spectra: pd.DataFrame, normalized: bool = True, title: str | None = "Singular-value spectra"
) -> go.Figure:
    """One line per weight matrix: its singular values (divided by the largest if ``normalized``)."""
    column = "normalized" if normalized else "singular_value"
    fig = px.line(spectra, x="index", y=column, color="matrix", log_y=True, markers=True, title=title)
    return fig
