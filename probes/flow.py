"""Information flow through the attention layers (docs/science.md#the-analyses; NeurIPS 2024 Fig. 3a/3c).

What it measures: each layer's attention pattern read as edges of a graph whose nodes
are (level, position), level 0 being the input tokens and level l + 1 the residual
stream after layer l: an edge of layer l goes from source position k at level l to
query position q at level l + 1 with weight ``pattern[q, k]``, per head and summed over
heads, averaged over the given inputs (with its standard deviation over them).  The
paths that reach the last position are ranked by the product of their edge weights.
The NeurIPS paper draws these graphs for one input (35 63 99 4 3 38 42 36 62) to show
that the symmetric solution fuses the two anchors at the last position in layer 1 while
the inferential solution first moves the key onto each anchor (Fig. 3a vs 3c).

Shapes: ``tokens [batch, pos]`` (or ``[pos]``); :func:`information_flow` returns a
DataFrame with one row per (layer, head or "sum", source <= query); :func:`top_paths`
a DataFrame with one row per path (``path``: positions at levels 0..n_layers).
:func:`attention_html` draws one input's patterns with circuitsvis as a
:class:`~probes.views.CircuitView`: it displays itself in Jupyter and saves as a
self-contained HTML file, both with the JavaScript inlined (it renders with no network,
unlike circuitsvis' ``str()`` which loads it from a CDN).

Example::

    >>> import torch
    >>> from transformer_lens import HookedTransformer, HookedTransformerConfig
    >>> from interp_init import quiet_deprecation
    >>> from probes import information_flow, top_paths
    >>> cfg = HookedTransformerConfig(n_layers=2, d_model=16, n_heads=2, d_head=8, n_ctx=9, d_vocab=201, act_fn="gelu")
    >>> with quiet_deprecation():
    ...     model = HookedTransformer(cfg)
    >>> tokens = torch.randint(20, 100, (4, 9), generator=torch.Generator().manual_seed(0))
    >>> edges = information_flow(model, tokens)
    >>> list(edges.columns), len(edges)  # 2 layers x (2 heads + sum) x 45 causal pairs
    (['layer', 'head', 'source', 'query', 'weight', 'std'], 270)
    >>> paths = top_paths(edges, threshold=0.0, top=3)
    >>> len(paths), paths["path"].iloc[0][-1]  # every path ends at the last position, 8
    (3, 8)
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from jaxtyping import Float, Int
from torch import Tensor

from probes._common import as_tokens, check_finite, check_index, check_int, check_number, run_capturing
from probes.protocol import HookedModel, require_hooks
from probes.views import CircuitView

EDGE_COLUMNS = ["layer", "head", "source", "query", "weight", "std"]


def attention_patterns(model: HookedModel, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "layer batch head query source"]:
    """The attention patterns of every layer, stacked: ``[n_layers, batch, n_heads, pos, pos]``.

    A model whose run is not finite is refused: TransformerLens sets NaN attention
    weights to 0, so its patterns would look valid while its logits are NaN."""
    tokens = as_tokens(tokens, model)
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(model.cfg.n_layers)]
    require_hooks(model, names, "attention_patterns")
    logits, cache = run_capturing(model, tokens, names)
    patterns = torch.stack([cache[name] for name in names]).cpu()
    for values, what in ((patterns, "the attention pattern"), (logits, "the model's logits on these tokens")):
        check_finite(values, what, " (check the model's weights with probes.weight_stable_ranks)")
    return patterns


def information_flow(model: HookedModel, tokens: Int[Tensor, "batch pos"]) -> pd.DataFrame:
    """Edges (layer, head, source, query, weight, std) of the attention graph.

    ``head`` is a head index or ``"sum"`` (the heads' patterns summed per input, so its
    rows sum to n_heads); ``weight`` is the mean over the inputs and ``std`` the
    population standard deviation over them (0 for a single input).  Only causal
    pairs (source <= query) are listed.
    """
    patterns = attention_patterns(model, tokens).double()  # [layer, batch, head, q, k]
    summed = patterns.sum(2, keepdim=True)
    stacked = torch.cat([patterns, summed], dim=2)  # head index n_heads = "sum"
    mean, std = stacked.mean(1), stacked.std(1, correction=0)  # [layer, head+1, q, k]
    n_layers, n_head_rows, n_pos, _ = mean.shape
    layer, head, query, source = np.meshgrid(np.arange(n_layers), np.arange(n_head_rows), np.arange(n_pos), np.arange(n_pos), indexing="ij")
    causal = (source <= query).ravel()
    head_labels = np.array(list(range(n_head_rows - 1)) + ["sum"], dtype=object)
    return pd.DataFrame(
        {
            "layer": layer.ravel()[causal],
            "head": head_labels[head.ravel()[causal]],
            "source": source.ravel()[causal],
            "query": query.ravel()[causal],
            "weight": mean.numpy().ravel()[causal],
            "std": std.numpy().ravel()[causal],
        },
        columns=EDGE_COLUMNS,
    )


def _edge_tensor(edges: pd.DataFrame, head: int | str) -> np.ndarray:
    missing = [c for c in EDGE_COLUMNS[:5] if c not in edges.columns]
    if missing:
        raise ValueError(f"edges lacks column(s) {missing}: pass the DataFrame returned by information_flow")
    if not isinstance(head, str):  # a head index: integer-like values are accepted
        try:
            head = str(operator.index(head)) if not isinstance(head, bool) else repr(head)
        except TypeError:
            raise ValueError(f"head must be a head index or 'sum', got {head!r}") from None
    chosen = edges[edges["head"].astype(str) == head]
    if chosen.empty:
        raise ValueError(f"no edges for head {head!r}; the edges have heads {sorted(edges['head'].astype(str).unique())}")
    n_layers = int(edges["layer"].max()) + 1
    n_pos = int(edges["query"].max()) + 1
    weights = np.zeros((n_layers, n_pos, n_pos))  # [layer, query, source]
    weights[chosen["layer"].to_numpy(int), chosen["query"].to_numpy(int), chosen["source"].to_numpy(int)] = chosen["weight"].to_numpy(float)
    return weights


def top_paths(
    edges: pd.DataFrame,
    threshold: float = 0.05,
    head: int | str = "sum",
    query: int | None = None,
    top: int | None = 10,
    max_paths: int = 200_000,
) -> pd.DataFrame:
    """The paths through all layers that end at ``query`` (default the last position), best first.

    A path is ``(p_0, ..., p_L)``: input position ``p_0``, then the query position
    ``p_{l+1}`` that layer l's edge from ``p_l`` reaches.  Its ``score`` is the product
    of its L edge weights (of head ``head``, default the sum over heads); paths with an
    edge below ``threshold`` are dropped.  Returns columns ``rank, score, path,
    weights`` for the ``top`` best paths (``None``: all).
    """
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not np.isfinite(threshold) or threshold < 0:
        raise ValueError(f"threshold must be a finite weight >= 0, got {threshold!r}")
    top = None if top is None else check_int(top, "top (how many paths to keep; None for all)")
    max_paths = check_int(max_paths, "max_paths", low=1)
    weights = _edge_tensor(edges, head)
    n_layers, n_pos, _ = weights.shape
    query = n_pos - 1 if query is None else check_index(query, n_pos, "query", "position of the edges")
    partial: list[tuple[tuple[int, ...], tuple[float, ...]]] = [((int(query),), ())]
    for layer in reversed(range(n_layers)):  # extend each path backwards by one layer
        grown = []
        for path, ws in partial:
            row = weights[layer, path[0], : path[0] + 1]  # causal: sources up to the query
            for source in np.flatnonzero(row >= threshold):
                grown.append(((int(source), *path), (float(row[source]), *ws)))
        if len(grown) > max_paths:
            raise ValueError(f"more than {max_paths} paths pass threshold={threshold}; raise the threshold")
        partial = grown
    rows = [{"score": float(np.prod(ws)), "path": path, "weights": ws} for path, ws in partial]
    frame = pd.DataFrame(rows, columns=["score", "path", "weights"]).sort_values("score", ascending=False, kind="stable")
    frame = frame.head(top) if top is not None else frame
    frame.insert(0, "rank", range(1, len(frame) + 1))
    return frame.reset_index(drop=True)


def token_labels(tokens: Sequence[int] | Tensor) -> list[str]:
    """``"pos:token"`` labels of one input (unique, so plotting libraries keep them apart)."""
    return [f"{i}:{int(t)}" for i, t in enumerate(torch.as_tensor(tokens).reshape(-1).tolist())]


def plot_flow(
    edges: pd.DataFrame,
    labels: Sequence[str] | None = None,
    paths: pd.DataFrame | None = None,
    head: int | str = "sum",
    min_weight: float = 0.05,
    n_highlight: int = 3,
    title: str | None = "Information flow",
) -> go.Figure:
    """Positions per level as nodes, attention edges as lines of width ~ weight (NeurIPS Fig. 3a/3c).

    ``labels`` names the input positions (e.g. :func:`token_labels`); the first
    ``n_highlight`` rows of ``paths`` (from :func:`top_paths`) are drawn in colour.
    """
    min_weight = check_number(min_weight, "min_weight")
    n_highlight = check_int(n_highlight, "n_highlight")
    weights = _edge_tensor(edges, head)
    n_layers, n_pos, _ = weights.shape
    labels = [str(p) for p in range(n_pos)] if labels is None else list(labels)
    if len(labels) != n_pos:
        raise ValueError(f"labels has {len(labels)} entries for {n_pos} positions")
    scale = 8.0 / max(float(weights.max()), 1e-12)
    fig = go.Figure()
    for layer in range(n_layers):
        for q in range(n_pos):
            for k in range(q + 1):
                w = weights[layer, q, k]
                if w >= min_weight:
                    fig.add_trace(
                        go.Scatter(
                            x=[k, q], y=[layer, layer + 1], mode="lines", showlegend=False,
                            line={"width": 0.5 + w * scale, "color": "rgba(90,90,90,0.45)"},
                            hovertext=f"layer {layer}: {labels[k]} -> {labels[q]}: {w:.3f}", hoverinfo="text",
                        )
                    )  # fmt: skip
    colors = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
    if paths is not None:
        for i, row in enumerate(paths.head(n_highlight).itertuples()):
            fig.add_trace(
                go.Scatter(
                    x=list(row.path), y=list(range(len(row.path))), mode="lines",
                    line={"width": 3, "color": colors[i % len(colors)]},
                    name=f"path {i + 1}: {' -> '.join(labels[p] for p in row.path)} ({row.score:.3f})",
                )
            )  # fmt: skip
    xs, ys = np.meshgrid(np.arange(n_pos), np.arange(n_layers + 1))
    fig.add_trace(go.Scatter(x=xs.ravel(), y=ys.ravel(), mode="markers", marker={"size": 9, "color": "black"}, showlegend=False, hoverinfo="skip"))
    fig.update_layout(
        title=title,
        xaxis={"tickmode": "array", "tickvals": list(range(n_pos)), "ticktext": labels, "title": "position: token"},
        yaxis={"tickmode": "array", "tickvals": list(range(n_layers + 1)), "ticktext": ["input"] + [f"after layer {l}" for l in range(n_layers)]},
        plot_bgcolor="white",
    )
    return fig


def attention_html(
    model: HookedModel,
    tokens: Int[Tensor, " pos"],
    path: str | Path | None = None,
    labels: Sequence[str] | None = None,
    title: str = "Attention patterns",
) -> CircuitView:
    """One input's attention patterns (every layer and head) as a circuitsvis view.

    Drawn with circuitsvis' ``AttentionHeads`` (heads named ``L{l}H{h}``) from its local
    JavaScript bundle: the returned :class:`~probes.views.CircuitView` displays itself in
    Jupyter offline, ``.save(path)`` writes a self-contained page and ``.html()`` returns
    it.  Written to ``path`` too if given.
    """
    tokens = as_tokens(tokens, model)
    if tokens.shape[0] != 1:
        raise ValueError(f"attention_html draws one input; got a batch of {tokens.shape[0]} (pass tokens[i])")
    labels = token_labels(tokens[0]) if labels is None else [str(s) for s in labels]
    if len(labels) != tokens.shape[1]:
        raise ValueError(f"labels has {len(labels)} entries for {tokens.shape[1]} positions")
    patterns = attention_patterns(model, tokens)[:, 0]  # [layer, head, q, k]
    n_layers, n_heads = patterns.shape[:2]
    props = {
        "attention": patterns.reshape(n_layers * n_heads, *patterns.shape[2:]).float().numpy(),
        "tokens": labels,
        "attentionHeadNames": [f"L{l}H{h}" for l in range(n_layers) for h in range(n_heads)],
        "maskUpperTri": True,
    }
    view = CircuitView("AttentionHeads", props, title=title)
    if path is not None:
        view.save(path)
    return view
