"""Cosine-similarity heatmaps of hidden vectors across inputs (docs/science.md#the-analyses; NeurIPS 2024 Fig. 4).

What it measures: whether inputs with equal targets get similar vectors.

* (a) :func:`residual_similarity`: the last position's residual stream after layer L's
  attention (``blocks.{L}.hook_resid_mid``; L defaults to the model's last layer, the
  papers' second in their two-layer models) across inputs with different (key, anchor
  pair); equal-target cells are those with equal composite f(x; a1, a2) = x + s(a1) +
  s(a2) (NeurIPS Fig. 4a inferential, 4b symmetric).
* (b) :func:`value_similarity`: layer L's value vectors (``blocks.{L}.attn.hook_v``, L
  again the last layer by default, heads merged into ``n_heads * d_head``) at the first
  anchor's position across (key, first anchor); equal-target cells have equal g(x; a1) =
  x + s(a1) (Fig. 4c; the journal's Fig. 4D does the same on second-anchor-masked
  outputs).

A layer or an int position counts from the end when negative (``layer=-1``,
``position=-1``), as Python's indexing does.  Labels with missing values (None, NaN,
pandas NA) are refused, naming the column and the count.

The number: :func:`block_score` = mean similarity over equal-target cells minus the mean
over the other cells, **diagonal excluded** (a vector's similarity with itself is 1 and
its target equals its own, which would add a constant that depends only on the number of
inputs, not on the model).  High when the model groups inputs by the target.

Shapes: a grid from :func:`input_grid` has ``len(pairs) * len(keys)`` inputs, pair-major
(all keys of the first pair, then the next pair); a :class:`SimilarityResult` holds the
``[n, n]`` similarity and mask and an ``n``-row ``inputs`` DataFrame.

Example::

    >>> import torch
    >>> from transformer_lens import HookedTransformer, HookedTransformerConfig
    >>> from interp_init import quiet_deprecation
    >>> from probes import input_grid, residual_similarity, block_score
    >>> cfg = HookedTransformerConfig(n_layers=2, d_model=16, n_heads=2, d_head=8, n_ctx=9, d_vocab=201, act_fn="gelu")
    >>> with quiet_deprecation():
    ...     model = HookedTransformer(cfg)
    >>> grid = input_grid(keys=range(30, 41), pairs=[(3, 3), (2, 2)], seed=0)
    >>> result = residual_similarity(model, grid)
    >>> result.similarity.shape, int(result.equal_target.sum())  # 22 inputs; f(x;3,3) = f(x-6;2,2)
    (torch.Size([22, 22]), 32)
    >>> block_score(torch.eye(3), torch.tensor([[1, 1, 0], [1, 1, 0], [0, 0, 1]]).bool())
    0.0
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import einops
import pandas as pd
import plotly.graph_objects as go
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from interp_init.tasks.anchor_pairs import ANCHORS, KEY_HIGH, KEY_LOW, N_KEY_POSITIONS, SEQ_LEN, SHIFTS, composite
from interp_init.tasks.data import AnchorDataset
from probes._common import capture_hooks, check_finite, check_index, check_int, check_layer, resolve_names, run_hooked
from probes.inputs import Inputs, as_inputs, check_labels
from probes.protocol import HookedModel, check_fired, check_model, require_hooks
from probes.views import TableDisplay


@dataclass(frozen=True)
class SimilarityResult(TableDisplay):
    """A cosine-similarity matrix across inputs and its equal-target mask.

    Attributes:
        similarity: ``[n, n]`` cosine similarities (float64).
        equal_target: ``[n, n]`` bool, True where the two inputs' targets are equal.
        inputs: one row per input: its labels (``label``, or a task's: ``key, a1, a2,
            key_position, target`` for the anchor tasks) and the ``position`` read.
        score: :func:`block_score` of the two (NaN when the inputs have no off-diagonal
            cell of one kind, e.g. no two inputs with equal targets).
        name, position: the activation and the position the vectors came from.
    """

    similarity: Float[Tensor, "n n"]
    equal_target: Bool[Tensor, "n n"]
    inputs: pd.DataFrame
    score: float
    name: str
    position: str | int

    def table(self) -> pd.DataFrame:
        """One row: the activation, the position, the number of inputs and of equal-target pairs, the block score."""
        n = len(self.inputs)
        pairs = (int(self.equal_target.sum()) - n) // 2
        return pd.DataFrame(
            [
                {
                    "activation": self.name,
                    "position": self.position,
                    "inputs": n,
                    "equal-target pairs": pairs,
                    "block score": self.score,
                }
            ]
        )


def input_grid(
    keys: Iterable[int],
    pairs: Sequence[tuple[int, int]],
    key_position: int = 2,
    seed: int | None = 0,
    noise: Sequence[int] | None = None,
) -> AnchorDataset:
    """Every (key, anchor pair) combination as an :class:`AnchorDataset` (targets f), pair-major.

    All inputs share one noise sequence (``noise``: 9 tokens in 20..99, or drawn from
    ``seed``), so they differ only in key and anchors, which sit at ``key_position``,
    ``+1``, ``+2``.
    """
    keys = [check_int(k, "each key") for k in keys]
    pairs = [_anchor_pair(p) for p in pairs]
    if not keys or not pairs:
        raise ValueError(f"input_grid needs at least one key and one pair, got {len(keys)} keys and {len(pairs)} pairs")
    bad_keys = [k for k in keys if not KEY_LOW <= k <= KEY_HIGH]
    if bad_keys:
        raise ValueError(f"keys must lie in {KEY_LOW}..{KEY_HIGH}, got {bad_keys}")
    bad_pairs = [p for p in pairs if p[0] not in ANCHORS or p[1] not in ANCHORS]
    if bad_pairs:
        raise ValueError(f"anchor pairs must use anchors {ANCHORS}, got {bad_pairs}")
    check_index(
        key_position, N_KEY_POSITIONS, "key_position", "key position (anchors follow at +1, +2)", from_end=False
    )
    if noise is None:
        if seed is None:
            raise ValueError("input_grid needs noise=<9 tokens> or seed=<int> to draw them")
        seed = check_int(seed, "seed")
        noise_row = torch.randint(KEY_LOW, KEY_HIGH + 1, (SEQ_LEN,), generator=torch.Generator().manual_seed(seed))
    else:
        noise_row = torch.tensor([check_int(t, "each noise token") for t in noise], dtype=torch.int64)
        if noise_row.shape != (SEQ_LEN,) or int(noise_row.min()) < KEY_LOW or int(noise_row.max()) > KEY_HIGH:
            raise ValueError(f"noise must be {SEQ_LEN} tokens in {KEY_LOW}..{KEY_HIGH}, got {noise_row.tolist()}")
    pair_t = torch.tensor([p for p in pairs for _ in keys], dtype=torch.int64)
    key_t = torch.tensor([k for _ in pairs for k in keys], dtype=torch.int64)
    n = len(key_t)
    tokens = noise_row.repeat(n, 1)
    tokens[:, key_position] = key_t
    tokens[:, key_position + 1] = pair_t[:, 0]
    tokens[:, key_position + 2] = pair_t[:, 1]
    targets = composite(key_t, pair_t[:, 0], pair_t[:, 1])
    return AnchorDataset("grid", "grid", tokens, targets, torch.full((n,), key_position, dtype=torch.int64), pair_t)


def cosine_similarity_matrix(vectors: Float[Tensor, "n d"]) -> Float[Tensor, "n n"]:
    """Pairwise cosine similarity of the rows of a 2-D tensor (float64; a zero row gives 0).

    Vectors with NaN or infinite entries are refused (their cosine is undefined)."""
    vectors = torch.as_tensor(vectors).detach().double()
    if vectors.ndim != 2:
        raise ValueError(f"vectors must be a 2-D [n, d] matrix, got shape {tuple(vectors.shape)}")
    check_finite(vectors, "vectors")
    unit = vectors / vectors.norm(dim=1, keepdim=True).clamp_min(1e-300)
    return unit @ unit.T


def equal_mask(labels: Sequence | Tensor) -> Bool[Tensor, "n n"]:
    """``[n, n]`` bool: True where ``labels[i] == labels[j]``; missing labels (None, NaN, NA) are refused."""
    values = check_labels(torch.as_tensor(labels).tolist() if isinstance(labels, Tensor) else list(labels), "labels")
    labels = torch.as_tensor(pd.factorize(pd.Series(values))[0])
    return labels[:, None] == labels[None, :]


def block_score(similarity: Float[Tensor, "n n"], equal_target: Bool[Tensor, "n n"]) -> float:
    """Mean similarity over off-diagonal equal-target cells minus the mean over the other off-diagonal cells."""
    similarity = torch.as_tensor(similarity).double()
    equal_target = torch.as_tensor(equal_target).bool()
    if similarity.ndim != 2 or similarity.shape[0] != similarity.shape[1] or similarity.shape != equal_target.shape:
        raise ValueError(
            f"similarity and equal_target must be the same square [n, n] shape, got {tuple(similarity.shape)} and {tuple(equal_target.shape)}"
        )
    check_finite(similarity, "similarity")
    off = ~torch.eye(similarity.shape[0], dtype=torch.bool)
    same, other = equal_target & off, ~equal_target & off
    if not bool(same.any()) or not bool(other.any()):
        raise ValueError(
            f"block_score needs off-diagonal cells of both kinds: {int(same.sum())} equal-target and "
            f"{int(other.sum())} other; choose keys and pairs whose targets coincide for some inputs but not all"
        )
    return float(similarity[same].mean() - similarity[other].mean())


def _score(similarity: Tensor, mask: Tensor) -> float:
    off = ~torch.eye(mask.shape[0], dtype=torch.bool)
    if not bool((mask & off).any()) or not bool((~mask & off).any()):
        return float("nan")
    return block_score(similarity, mask)


def _anchor_pair(pair: object) -> tuple[int, int]:
    try:
        first, second = pair  # type: ignore[misc]
    except (TypeError, ValueError):
        raise ValueError(f"each anchor pair must be two anchors (a1, a2), got {pair!r}") from None
    return check_int(first, "each anchor"), check_int(second, "each anchor")


def _after_attention(model: HookedModel, layer: int) -> str:
    """The hook holding the residual stream after layer ``layer``'s attention (and before its MLP)."""
    name = f"blocks.{layer}.hook_resid_mid"
    if getattr(model.cfg, "parallel_attn_mlp", False):
        raise ValueError(
            f"this model has no {name}, the residual stream between layer {layer}'s attention and MLP (attention and MLP run in parallel); "
            f"compare another activation with activation_similarity, e.g. name=('resid_post', {layer})"
        )
    if getattr(model.cfg, "attn_only", False):
        return f"blocks.{layer}.hook_resid_post"  # no MLP: the block's output is resid_pre + attention
    require_hooks(model, [name], "residual_similarity (the stream between attention and MLP)")
    return name


def activation_similarity(
    model: HookedModel,
    tokens: Int[Tensor, "batch pos"] | Sequence | str | Inputs,
    name: object,
    labels: Sequence | Tensor | str | None = None,
    position: str | int | Sequence[int] | Tensor = "last",
    *,
    attention_mask: Int[Tensor, "batch pos"] | None = None,
) -> SimilarityResult:
    """Cosine similarity across inputs of activation ``name`` at ``position``; equal cells: equal ``labels``.

    ``tokens``: token ids, strings (with a tokenizer) or a task's samples (see
    :func:`~probes.inputs.as_inputs`).  ``name``: one hook point, as a full name, a short
    name with its layer (``("resid_post", 3)``) or a callable filter that picks one; a
    ``[batch, pos, head, d_head]`` activation has its heads merged.  ``labels``: one per
    input (or a label column of the inputs, e.g. ``"target"``); ``None`` leaves the mask
    the diagonal and the score NaN.  ``position``: an int, one int per input, ``"last"``
    (each input's last real token under ``attention_mask``) or a position name of a task's
    samples.  The model runs only up to ``name`` (no later layer, no unembedding)."""
    inputs = as_inputs(tokens, check_model(model), attention_mask=attention_mask)
    found = resolve_names(name, model)
    if len(found) != 1:
        raise ValueError(
            f"name must pick one hook point, got {len(found)} ({found[:4]}{'...' if len(found) > 4 else ''}); give the layer, e.g. ('resid_post', 1)"
        )
    hook = found[0]
    store: dict[str, Tensor] = {}
    run_hooked(model, inputs, capture_hooks([hook], model, store), stop_after=hook)
    check_fired(store, [hook], f"activation_similarity (capturing {hook})")
    acts = store[hook].cpu()
    if acts.ndim == 4:  # [batch, pos, head, d_head]: merge heads
        acts = einops.rearrange(acts, "batch pos head d_head -> batch pos (head d_head)")
    pos = inputs.position(position)
    vectors = acts[torch.arange(len(pos)), pos]
    check_finite(vectors, f"the activation {hook}", " (check the model's weights with probes.weight_stable_ranks)")
    sim = cosine_similarity_matrix(vectors)
    values = inputs.label(labels)
    frame = inputs.labels.copy()
    if values is None:
        mask = torch.eye(len(inputs), dtype=torch.bool)
    else:
        mask = equal_mask(values)
        if not isinstance(labels, str):
            frame["label"] = values
    frame["position"] = pos.tolist()
    shown = position if isinstance(position, (str, int)) else "per input"
    return SimilarityResult(sim, mask, frame, _score(sim, mask), hook, shown)


def _anchor_labels(dataset: object, kind: str) -> list[int] | None:
    """The anchor tasks' equal-target labels: f(x; a1, a2) for the residual stream, g(x; a1) for the values."""
    if not isinstance(dataset, AnchorDataset):
        return None
    keys, a1, a2 = dataset.keys.cpu(), dataset.anchor_pairs[:, 0].cpu(), dataset.anchor_pairs[:, 1].cpu()
    if kind == "residual":
        return composite(keys, a1, a2).tolist()
    return (keys + torch.tensor([SHIFTS.get(int(a), 0) for a in a1.tolist()], dtype=torch.int64)).tolist()


def _with_target(result: SimilarityResult, labels: list[int] | None) -> SimilarityResult:
    if labels is None:
        return result
    frame = result.inputs.drop(columns=["label"], errors="ignore").assign(target=labels)
    return SimilarityResult(result.similarity, result.equal_target, frame, result.score, result.name, result.position)


def residual_similarity(
    model: HookedModel,
    tokens: Int[Tensor, "batch pos"] | Sequence | str | Inputs,
    labels: Sequence | Tensor | str | None = None,
    layer: int | None = None,
    position: str | int | Sequence[int] | Tensor = "last",
    *,
    attention_mask: Int[Tensor, "batch pos"] | None = None,
) -> SimilarityResult:
    """(a) Similarity of the residual stream after layer ``layer``'s attention (``blocks.{layer}.hook_resid_mid``).

    :func:`activation_similarity` at that hook; ``layer`` defaults to the model's last.
    An :class:`~interp_init.tasks.data.AnchorDataset` without ``labels`` is labelled by its
    composite f(x; a1, a2) (NeurIPS Fig. 4a/b).  An attention-only model has no MLP, so
    its stream after layer L's attention is ``blocks.{layer}.hook_resid_post`` (the
    result's ``name``); a model whose attention and MLP run in parallel has no such
    stream and is refused.
    """
    check_model(model)
    layer = check_layer(model, model.cfg.n_layers - 1 if layer is None else layer)
    anchor = _anchor_labels(tokens, "residual") if labels is None else None
    result = activation_similarity(
        model,
        tokens,
        _after_attention(model, layer),
        anchor if anchor is not None else labels,
        position,
        attention_mask=attention_mask,
    )
    return _with_target(result, anchor)


def value_similarity(
    model: HookedModel,
    tokens: Int[Tensor, "batch pos"] | Sequence | str | Inputs,
    labels: Sequence | Tensor | str | None = None,
    layer: int | None = None,
    position: str | int | Sequence[int] | Tensor | None = None,
    *,
    attention_mask: Int[Tensor, "batch pos"] | None = None,
) -> SimilarityResult:
    """(b) Similarity of ``blocks.{layer}.attn.hook_v`` (heads merged) at ``position``.

    :func:`activation_similarity` at that hook; ``layer`` defaults to the model's last,
    ``position`` to ``"last"``.  An :class:`~interp_init.tasks.data.AnchorDataset` without
    ``labels`` is labelled by g(x; a1) at its ``"first_anchor"`` (NeurIPS Fig. 4c): with
    causal attention the value vector there does not depend on the second anchor, so a
    grid with one second anchor, e.g. ``input_grid(keys, [(a, 1) for a in (1, 2, 3, 4)])``,
    covers every (key, first anchor).
    """
    check_model(model)
    layer = check_layer(model, model.cfg.n_layers - 1 if layer is None else layer)
    name = f"blocks.{layer}.attn.hook_v"
    require_hooks(model, [name], "value_similarity")
    anchor = _anchor_labels(tokens, "value") if labels is None else None
    if position is None:
        position = "first_anchor" if isinstance(tokens, AnchorDataset) else "last"
    result = activation_similarity(
        model, tokens, name, anchor if anchor is not None else labels, position, attention_mask=attention_mask
    )
    return _with_target(result, anchor)


def plot_similarity(result: SimilarityResult, title: str | None = None) -> go.Figure:
    """Heatmap of ``result.similarity`` with the off-diagonal equal-target cells outlined."""
    frame = result.inputs
    if {"key", "a1", "a2"} <= set(frame.columns):
        labels = [
            f"x={k} ({a},{b}) #{i}"
            for i, (k, a, b) in enumerate(zip(frame["key"], frame["a1"], frame["a2"], strict=True))
        ]
    else:
        named = (
            frame["label"]
            if "label" in frame.columns
            else frame["target"]
            if "target" in frame.columns
            else [""] * len(frame)
        )
        labels = [f"{label} #{i}" for i, label in enumerate(named)]
    fig = go.Figure(
        go.Heatmap(
            z=result.similarity.numpy(),
            x=labels,
            y=labels,
            zmin=-1,
            zmax=1,
            colorscale="RdBu_r",
            colorbar={"title": "cosine"},
        )
    )
    rows, cols = torch.nonzero(result.equal_target & ~torch.eye(len(labels), dtype=torch.bool), as_tuple=True)
    fig.add_trace(
        go.Scatter(
            x=[labels[c] for c in cols.tolist()],
            y=[labels[r] for r in rows.tolist()],
            mode="markers",
            marker={"symbol": "square-open", "size": 9, "color": "black", "line": {"width": 1.5}},
            name="equal target",
        )
    )
    fig.update_layout(
        title=title or f"{result.name} at {result.position}: block score {result.score:.3f}",
        yaxis={"autorange": "reversed"},
        xaxis={"showticklabels": len(labels) <= 60},
    )
    return fig
