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
DataFrame with one row per (layer, attn_head: a head or "sum", source, query) that the attention can read
(``source <= query`` when causal, every pair in a bidirectional encoder), for the
``layers`` asked for (default all: at GPT-2 small's 12 layers, 12 heads and 128 positions
that is 1.29M rows; ``layers=[l]`` gives one layer's 107k), the inputs run ``batch_size``
at a time; :func:`top_paths` a DataFrame with one row per path (``path``: positions at
levels 0..n_layers, a tuple; :func:`~probes.views.read_paths` gives the tuples back from a Parquet or
CSV file).  :func:`~probes.views.attention_html` draws one input's patterns with
circuitsvis as a :class:`~probes.views.CircuitView`: it displays itself in Jupyter and
saves as a self-contained HTML file, both with the JavaScript inlined (it renders with no
network, unlike circuitsvis' ``str()`` which loads it from a CDN).

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
    (['layer', 'attn_head', 'source', 'query', 'weight', 'std'], 270)
    >>> last = information_flow(model, tokens, layers=-1, batch_size=2)  # the last layer, two inputs at a time
    >>> len(last), bool((last.to_numpy() == edges[edges["layer"] == 1].reset_index(drop=True).to_numpy()).all())
    (135, True)
    >>> paths = top_paths(edges, threshold=0.0, k=3)
    >>> len(paths), paths["path"].iloc[0][-1]  # every path ends at the last position, 8
    (3, 8)
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Callable, Sequence

import einops
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from jaxtyping import Float, Int
from torch import Tensor

from probes._common import (
    allowed_pairs,
    check_finite,
    check_index,
    check_indices,
    check_int,
    check_number,
    renamed_keyword,
    run_hooked,
)
from probes.inputs import Inputs, _as_mask, as_inputs, cache_patterns, is_cache
from probes.protocol import HookedModel, check_fired, check_model, require_hooks

EDGE_COLUMNS = ["layer", "attn_head", "source", "query", "weight", "std"]
OLD_HEAD_COLUMN = "head"  #: the head column's name before 0.1.x (it hid DataFrame.head), still read back
#: The ``attn_head`` value of the rows that sum the heads' patterns.
SUM = "sum"


def _pattern_names(model: HookedModel, layers: list[int], probe: str) -> list[str]:
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in layers]
    require_hooks(model, names, probe)
    return names


def _finite_stop(model: HookedModel, seen: set[str]) -> tuple[str, Callable]:
    """A hook on the last block's output that refuses a non-finite run (TransformerLens sets NaN
    attention weights to 0, so patterns could look valid while the run is NaN)."""
    name = f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"

    def check(resid: Tensor, hook) -> None:
        seen.add(name)
        check_finite(
            resid,
            "the model's last residual stream on these tokens",
            " (check the model's weights with probes.weight_stable_ranks)",
        )

    return name, check


def _run_patterns(
    model: HookedModel, inputs: Inputs, layers: list[int], probe: str, take: Callable[[int, Tensor], None]
) -> None:
    """Run ``model`` up to its last block, handing each layer's pattern to ``take(i, pattern)`` as it is made."""
    names = _pattern_names(model, layers, probe)
    fired: set[str] = set()

    def taker(i: int, name: str) -> Callable:
        def hook(pattern: Tensor, hook) -> None:
            fired.add(name)
            take(i, pattern.detach())

        return hook

    final, check = _finite_stop(model, fired)
    hooks = [(name, taker(i, name)) for i, name in enumerate(names)]
    if final in model.hook_dict:
        hooks.append((final, check))
    run_hooked(model, inputs, hooks, stop_after=final if final in model.hook_dict else None)
    check_fired(fired, names, probe)


def attention_patterns(
    model: HookedModel,
    tokens: Int[Tensor, "batch pos"] | Sequence | str | Inputs,
    *,
    layers: int | Sequence[int] | None = None,
    attention_mask: Int[Tensor, "batch pos"] | None = None,
) -> Float[Tensor, "layer batch head query source"]:
    """The attention patterns of ``layers`` (default all), stacked: ``[n_layers, batch, n_heads, pos, pos]``.

    ``tokens`` may be the ``ActivationCache`` of ``model.run_with_cache(tokens)`` (its
    patterns read, no run).  Each pattern is copied once as its layer runs (no run past the last block).  A model whose run is not finite is refused: TransformerLens sets
    NaN attention weights to 0, so its patterns would look valid while its logits are NaN."""
    check_model(model)
    layers = check_indices(layers, model.cfg.n_layers, "layers", f"layer of this {model.cfg.n_layers}-layer model")
    if is_cache(tokens):
        patterns = cache_patterns(tokens, model, layers, "attention_patterns")
        return torch.stack([pattern.detach().cpu() for pattern in patterns])
    inputs = as_inputs(tokens, model, attention_mask=attention_mask)
    out: list[Tensor] = []

    def take(i: int, pattern: Tensor) -> None:
        if not out:
            out.append(torch.empty((len(layers), *pattern.shape), dtype=pattern.dtype, device="cpu"))
        out[0][i].copy_(pattern)

    _run_patterns(model, inputs, layers, "attention_patterns", take)
    return out[0]


def information_flow(
    model: HookedModel,
    tokens: Int[Tensor, "batch pos"] | Sequence | str | Inputs,
    *,
    layers: int | Sequence[int] | None = None,
    batch_size: int | None = None,
    attention_mask: Int[Tensor, "batch pos"] | None = None,
) -> pd.DataFrame:
    """Edges (layer, attn_head, source, query, weight, std) of the attention graph.

    ``attn_head`` (``head`` before 0.1.x, which hid ``DataFrame.head``) is a string column: a
    head index (``"0"``, ``"1"``, ...) or ``"sum"`` (the heads' patterns summed per input, so
    its rows sum to n_heads); ``weight`` is the mean over the inputs and ``std`` the
    population standard deviation over them (0 for a single input); with an
    ``attention_mask`` only inputs where both positions are real tokens count.  The pairs
    listed are those the attention can read: ``source <= query`` in a causal model, every
    pair in a bidirectional one (an encoder).

    ``tokens``: token ids (or strings, or a task's samples), or the ``ActivationCache`` of
    ``model.run_with_cache(tokens)``, whose ``hook_pattern`` s are read with no run.
    ``layers``: the layers whose edges are returned (ints, negative ones from the end;
    default all); :func:`top_paths` and :func:`plot_flow` need the layers from 0 up to the
    last they follow.  ``batch_size``: how many inputs run at a time (default all at once);
    the result is the same, to float32 rounding.  The means are accumulated layer by layer
    as the model runs: no pattern is kept."""
    check_model(model)
    layers = check_indices(layers, model.cfg.n_layers, "layers", f"layer of this {model.cfg.n_layers}-layer model")
    size = (
        None
        if batch_size is None
        else check_int(batch_size, "batch_size (inputs per forward pass; None for all at once)", low=1)
    )
    cached = cache_patterns(tokens, model, layers, "information_flow") if is_cache(tokens) else None
    inputs = None if cached is not None else as_inputs(tokens, model, attention_mask=attention_mask)
    n_heads, n_pos = model.cfg.n_heads, cached[0].shape[-1] if cached is not None else inputs.tokens.shape[1]
    count = torch.zeros(n_pos, n_pos, dtype=torch.float64)
    total = torch.zeros(len(layers), n_heads + 1, n_pos, n_pos, dtype=torch.float64)
    squares = torch.zeros_like(total)
    if cached is not None:  # one chunk: the cache's patterns, handed over as a run would
        real = (
            _as_mask(attention_mask, (cached[0].shape[0], n_pos))
            if attention_mask is not None
            else torch.ones(cached[0].shape[0], n_pos)
        )
        chunks = [(real, lambda take: [take(i, pattern.detach()) for i, pattern in enumerate(cached)])]
    else:
        chunks = (
            (
                c.attention_mask if c.attention_mask is not None else torch.ones_like(c.tokens),
                lambda take, c=c: _run_patterns(model, c, layers, "information_flow", take),
            )
            for c in inputs.batches(size)
        )
    for real, feed in chunks:
        both = einops.einsum(
            real.double().cpu(), real.double().cpu(), "batch q, batch k -> batch q k"
        )  # [batch, q, k]: 1 where both are real tokens
        count += both.sum(0)

        def take(i: int, pattern: Tensor, both: Tensor = both) -> None:
            values = pattern.cpu().double() * both[:, None]
            values = torch.cat([values, values.sum(1, keepdim=True)], dim=1)  # [batch, head + sum, q, k]
            total[i] += values.sum(0)
            squares[i] += values.pow(2).sum(0)

        feed(take)
    count = count.clamp_min(1.0)
    mean = total / count
    std = (squares / count - mean.pow(2)).clamp_min(0.0).sqrt()
    index, head, query, source = np.meshgrid(
        np.arange(len(layers)), np.arange(n_heads + 1), np.arange(n_pos), np.arange(n_pos), indexing="ij"
    )
    keep = allowed_pairs(model, n_pos).numpy()[query.ravel(), source.ravel()]
    head_labels = np.array([str(h) for h in range(n_heads)] + [SUM], dtype=object)
    return pd.DataFrame(
        {
            "layer": np.asarray(layers, dtype=np.int64)[index.ravel()[keep]],
            "attn_head": pd.array(head_labels[head.ravel()[keep]], dtype="string"),
            "source": source.ravel()[keep].astype(np.int64),
            "query": query.ravel()[keep].astype(np.int64),
            "weight": mean.numpy().ravel()[keep],
            "std": std.numpy().ravel()[keep],
        },
        columns=EDGE_COLUMNS,
    )


def _edge_tensor(edges: pd.DataFrame, head: int | str) -> tuple[np.ndarray, np.ndarray]:
    """``[layer, query, source]`` weights of head ``head`` and whether each edge is listed (an attention pair)."""
    if "attn_head" not in edges.columns and OLD_HEAD_COLUMN in edges.columns:  # a table written before the rename
        edges = edges.rename(columns={OLD_HEAD_COLUMN: "attn_head"})
    missing = [c for c in EDGE_COLUMNS[:5] if c not in edges.columns]
    if missing:
        raise ValueError(f"edges lacks column(s) {missing}: pass the DataFrame returned by information_flow")
    if not isinstance(head, str):  # a head index: integer-like values are accepted
        try:
            head = str(operator.index(head)) if not isinstance(head, bool) else repr(head)
        except TypeError:
            raise ValueError(f"head must be a head index or 'sum', got {head!r}") from None
    chosen = edges[edges["attn_head"].astype(str) == head]
    if chosen.empty:
        raise ValueError(
            f"no edges for head {head!r}; the edges have heads {sorted(edges['attn_head'].astype(str).unique())}"
        )
    present = sorted({int(layer) for layer in chosen["layer"]})
    if present != list(range(present[-1] + 1)):
        raise ValueError(
            f"the edges hold layers {present}, but a path runs from the input tokens through every layer 0..{present[-1]}: "
            f"compute them with information_flow(..., layers=range({present[-1] + 1})) or layers=None"
        )
    n_layers = present[-1] + 1
    n_pos = int(max(edges["query"].max(), edges["source"].max())) + 1
    weights = np.zeros((n_layers, n_pos, n_pos))  # [layer, query, source]
    listed = np.zeros((n_layers, n_pos, n_pos), dtype=bool)
    index = (chosen["layer"].to_numpy(int), chosen["query"].to_numpy(int), chosen["source"].to_numpy(int))
    weights[index] = chosen["weight"].to_numpy(float)
    listed[index] = True
    return weights, listed


@renamed_keyword("top", "k", old_none=None)
def top_paths(
    edges: pd.DataFrame,
    threshold: float = 0.05,
    head: int | str = "sum",
    query: int | None = None,
    k: int | None = 10,
    max_paths: int = 200_000,
) -> pd.DataFrame:
    """The ``k`` best paths through all layers that end at ``query`` (default the last position).

    ``k`` is ``torch.topk``'s name; ``top=``, its earlier name, still works and warns.

    A path is ``(p_0, ..., p_L)``: input position ``p_0``, then the query position
    ``p_{l+1}`` that layer l's edge from ``p_l`` reaches.  Its ``score`` is the product
    of its L edge weights (of head ``head``, default the sum over heads); paths with an
    edge below ``threshold`` are dropped.  Returns columns ``rank, score, path,
    weights``: ``path`` a tuple of ints, ``weights`` a tuple of floats (Parquet gives such
    cells back as numpy arrays and CSV as text; :func:`~probes.views.read_paths` restores the tuples).
    ``query`` may count from the end (``-1``: the last position).

    With ``k`` set, the search keeps the ``k`` best partial paths per position and
    layer (a k-best dynamic programme, from ``query`` back to the inputs): exact, in time
    ``n_layers * pos^2 * k``, so a 12-layer model at 128 positions takes well under a
    second.  ``k=None`` lists every path, refused beyond ``max_paths``.
    """
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, numbers.Real)
        or not np.isfinite(threshold)
        or threshold < 0
    ):
        raise ValueError(f"threshold must be a finite weight >= 0, got {threshold!r}")
    top = None if k is None else check_int(k, "k (how many paths to keep; None for all)", low=1)
    max_paths = check_int(max_paths, "max_paths", low=1)
    weights, listed = _edge_tensor(edges, head)
    n_layers, n_pos, _ = weights.shape
    query = n_pos - 1 if query is None else check_index(query, n_pos, "query", "position of the edges")
    passes = listed & (weights >= threshold)  # [layer, query, source]
    if top is None:
        paths = _every_path(passes, query, max_paths, threshold)
    else:
        paths = _best_paths(weights, passes, query, top)
    rows = [
        {"score": float(np.prod(ws)), "path": path, "weights": ws}
        for path in paths
        for ws in [tuple(float(weights[l, path[l + 1], path[l]]) for l in range(n_layers))]
    ]
    frame = pd.DataFrame(rows, columns=["score", "path", "weights"]).sort_values(
        "score", ascending=False, kind="stable"
    )
    frame = frame.head(top) if top is not None else frame
    frame.insert(0, "rank", range(1, len(frame) + 1))
    return frame.reset_index(drop=True)


def _every_path(passes: np.ndarray, query: int, max_paths: int, threshold: float) -> list[tuple[int, ...]]:
    partial: list[tuple[int, ...]] = [(int(query),)]
    for layer in reversed(range(passes.shape[0])):  # extend each path backwards by one layer
        grown = [(int(source), *path) for path in partial for source in np.flatnonzero(passes[layer, path[0]])]
        if len(grown) > max_paths:
            raise ValueError(
                f"more than {max_paths} paths pass threshold={threshold}; raise the threshold or pass k=<n> for the n best"
            )
        partial = grown
    return partial


def _best_paths(weights: np.ndarray, passes: np.ndarray, query: int, k: int) -> list[tuple[int, ...]]:
    """The k best paths into ``query``: per layer, each position keeps its k best partial paths onward."""
    n_layers, n_pos, _ = weights.shape
    scores = np.full((n_pos, k), -1.0)  # -1: no path
    scores[query, 0] = 1.0
    paths = np.zeros((n_pos, k, n_layers + 1), dtype=np.int64)
    paths[query, 0, n_layers] = query
    for layer in reversed(range(n_layers)):
        edge = np.where(passes[layer], weights[layer], -1.0)  # [query, source]
        ok = (edge[:, :, None] >= 0) & (scores[:, None, :] >= 0)  # [query, source, j]
        cand = np.where(ok, edge[:, :, None] * scores[:, None, :], -1.0)
        cand = cand.transpose(1, 0, 2).reshape(n_pos, n_pos * k)  # [source, (query j)]
        best = np.argsort(-cand, axis=1, kind="stable")[:, :k]
        scores = np.take_along_axis(cand, best, axis=1)
        from_query, from_rank = np.divmod(best, k)
        paths = paths[from_query, from_rank]
        paths[:, :, layer] = np.arange(n_pos)[:, None]
    flat = scores.reshape(-1)
    order = [i for i in np.argsort(-flat, kind="stable")[:k] if flat[i] >= 0]
    return [tuple(int(p) for p in paths.reshape(-1, n_layers + 1)[i]) for i in order]


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
    ``n_highlight`` rows of ``paths`` (from :func:`top_paths`) are drawn in colour.  The
    edges of at least ``min_weight`` are drawn in 8 traces (one per band of width), so a
    12-layer, 128-position graph draws as fast as a small one.
    """
    min_weight = check_number(min_weight, "min_weight")
    n_highlight = check_int(n_highlight, "n_highlight")
    weights, listed = _edge_tensor(edges, head)
    n_layers, n_pos, _ = weights.shape
    labels = [str(p) for p in range(n_pos)] if labels is None else list(labels)
    if len(labels) != n_pos:
        raise ValueError(f"labels has {len(labels)} entries for {n_pos} positions")
    top_weight = max(float(weights.max()), 1e-12)
    fig = go.Figure()
    layer, query, source = np.nonzero(listed & (weights >= min_weight))
    values = weights[layer, query, source]
    bands = np.minimum((values / top_weight * 8).astype(int), 7)
    for band in range(8):
        chosen = np.flatnonzero(bands == band)
        if not len(chosen):
            continue
        xs = np.stack([source[chosen], query[chosen], np.full(len(chosen), np.nan)], 1).ravel()
        ys = np.stack([layer[chosen], layer[chosen] + 1, np.full(len(chosen), np.nan)], 1).ravel()
        text = [
            f"layer {l}: {labels[k]} -> {labels[q]}: {w:.3f}"
            for l, q, k, w in zip(layer[chosen], query[chosen], source[chosen], values[chosen], strict=True)
        ]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                showlegend=False,
                hoverinfo="text",
                hovertext=[t for t in text for _ in range(3)],
                line={"width": 0.5 + (band + 0.5), "color": "rgba(90,90,90,0.45)"},
            )
        )
    colors = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
    if paths is not None:
        for i, row in enumerate(paths.head(n_highlight).itertuples()):
            fig.add_trace(
                go.Scatter(
                    x=list(row.path),
                    y=list(range(len(row.path))),
                    mode="lines",
                    line={"width": 3, "color": colors[i % len(colors)]},
                    name=f"path {i + 1}: {' -> '.join(labels[p] for p in row.path)} ({row.score:.3f})",
                )
            )
    xs, ys = np.meshgrid(np.arange(n_pos), np.arange(n_layers + 1))
    fig.add_trace(
        go.Scatter(
            x=xs.ravel(),
            y=ys.ravel(),
            mode="markers",
            marker={"size": 9, "color": "black"},
            showlegend=False,
            hoverinfo="skip",
        )
    )
    fig.update_layout(
        title=title,
        xaxis={"tickmode": "array", "tickvals": list(range(n_pos)), "ticktext": labels, "title": "position: token"},
        yaxis={
            "tickmode": "array",
            "tickvals": list(range(n_layers + 1)),
            "ticktext": ["input"] + [f"after layer {l}" for l in range(n_layers)],
        },
        plot_bgcolor="white",
    )
    return fig
