"""Attention masking after softmax, and the geometry of the masked outputs (docs/science.md#the-analyses).

What it measures: what the model computes at a position when chosen source tokens cannot
be read by attention.  :func:`masked_run` sets ``pattern[batch, head, query, source]`` to 0
at ``blocks.{l}.attn.hook_pattern`` (after the softmax, so the other circuits keep their
weights), for the given sources (per sample), layers, heads and query positions;
``renormalize=True`` rescales each masked row to sum to 1 again.  Without
renormalizing, masking a source in every layer equals zeroing its value vectors: the
softmax denominator still holds the masked key, so its token still has an influence.

Uses (complexity-control journal paper, Fig. 4A-C; NeurIPS 2024 Fig. 3b for the t-SNE):

* :func:`probes.anchors.mask_key` hides the key token (``AnchorDataset.key_positions``): what do the
  anchor pairs alone produce at the last position?  The journal's Fig. 4C draws these
  last-position vectors with t-SNE (perplexity 12, 50 inputs per pair); "symmetric pairs
  merge" becomes a number with :func:`cluster_scores`: the adjusted Rand index of
  clusters against the ordered pair, the unordered pair or the composite shift.
* :func:`probes.anchors.mask_second_anchor` hides the second anchor (key position + 2): what do the key
  and the first anchor produce? (journal Fig. 4D; see :mod:`probes.similarity`).

The projections: ``project(..., method="pca")`` is exact (numpy's SVD, the same on every
call); t-SNE is an approximation (scikit-learn's Barnes-Hut t-SNE from a randomized-PCA
start), made deterministic by ``seed``.  :func:`cluster_scores`' k-means is seeded the
same way; its agglomerative (Ward) clustering is exact.  A missing label (None, NaN or
pandas NA) in a labeling is refused, naming the column and the count, never counted as a
label of its own.

Shapes: ``tokens [batch, pos]`` (token ids, strings with a tokenizer, or a task's samples:
:mod:`probes.inputs`), with ``attention_mask [batch, pos]`` for padded batches; sources an
int or a flat list of ints (the same in every sample), a tensor ``[batch]`` / ``[batch, k]``
or a list of ``batch`` lists (per sample), or a position name; :class:`MaskedRun` holds
``logits [batch, pos, d_vocab]``, the captured activations (an ``ActivationCache``) and the
``[batch, query, source]`` mask; :func:`project` and :func:`cluster_scores` return DataFrames.
The mask follows the model's attention: ``source <= query`` when causal, every pair in a
bidirectional encoder.

Example::

    >>> import torch
    >>> from transformer_lens import HookedTransformer, HookedTransformerConfig
    >>> from interp_init import quiet_deprecation
    >>> from probes import masked_run
    >>> cfg = HookedTransformerConfig(n_layers=2, d_model=16, n_heads=2, d_head=8, n_ctx=9, d_vocab=201, act_fn="gelu")
    >>> with quiet_deprecation():
    ...     model = HookedTransformer(cfg)
    >>> tokens = torch.randint(20, 100, (3, 9), generator=torch.Generator().manual_seed(0))
    >>> run = masked_run(model, tokens, source_positions=torch.tensor([2, 4, 0]), names_filter=["blocks.1.hook_resid_post"])
    >>> run.logits.shape, run.last_position("blocks.1.hook_resid_post").shape
    (torch.Size([3, 9, 201]), torch.Size([3, 16]))
    >>> bool(torch.allclose(masked_run(model, tokens, []).logits, model(tokens)))
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import torch
from jaxtyping import Bool, Float, Int
from sklearn.cluster import AgglomerativeClustering, KMeans
from sklearn.manifold import TSNE
from sklearn.metrics import adjusted_rand_score, silhouette_score
from torch import Tensor

from probes._common import (
    allowed_pairs,
    capture_hooks,
    check_finite,
    check_index,
    check_indices,
    check_int,
    check_number,
    is_filter_function,
    make_cache,
    renamed_keyword,
    run_hooked,
)
from probes.geometry import principal_components
from probes.inputs import Inputs, as_inputs, check_labels
from probes.protocol import HookedModel, check_fired, check_model, require_hooks
from probes.views import TableDisplay

SourcePositions = int | Sequence[int] | Sequence[Sequence[int]] | Tensor


@dataclass(frozen=True)
class MaskedRun(TableDisplay):
    """Result of :func:`masked_run`.

    Indexed like the logits a model returns (``masked[:, -1]`` is ``masked.logits[:, -1]``).

    Attributes:
        logits: ``[batch, pos, d_vocab]`` logits of the masked run.
        cache: the activations asked for, a TransformerLens ``ActivationCache`` where the
            installed line offers one (``cache["resid_post", 1]``, ``accumulated_resid``),
            each as its hook saw it (a captured ``hook_pattern`` is the masked one).
        mask: ``[batch, query, source]`` bool, True where the pattern was zeroed (in
            every masked layer and head; in a causal model only ``source <= query``).
    """

    logits: Float[Tensor, "batch pos d_vocab"]
    cache: Mapping[str, Tensor] = field(default_factory=dict)
    mask: Bool[Tensor, "batch query source"] | None = None

    def __getitem__(self, index: object) -> Tensor:
        """The logits indexed as a tensor is: ``masked[:, -1]`` is ``masked.logits[:, -1]``, as
        with the logits ``model(tokens)`` returns.  A captured activation is read from
        :attr:`cache` (``masked.cache["resid_post", 1]``)."""
        if isinstance(index, str) or (isinstance(index, tuple) and index and isinstance(index[0], str)):
            raise KeyError(
                f"MaskedRun[...] indexes the logits; read the activation {index!r} from its cache: masked.cache[{index!r}]"
            )
        return self.logits[index]

    @property
    def shape(self) -> torch.Size:
        """The logits' shape ``[batch, pos, d_vocab]``."""
        return self.logits.shape

    def table(self) -> pd.DataFrame:
        """One row per tensor returned (the logits, then each captured activation): its shape."""
        rows = [{"tensor": "logits", "shape": tuple(self.logits.shape)}]
        rows += [{"tensor": name, "shape": tuple(value.shape)} for name, value in self.cache.items()]
        frame = pd.DataFrame(rows)
        if self.mask is not None:
            frame["masked (query, source) pairs per sample"] = float(self.mask.sum(dim=(1, 2)).float().mean())
        return frame

    def last_position(self, name: str | None = None) -> Float[Tensor, "batch d"]:
        """The last position's vector of activation ``name`` (``None``: the logits)."""
        if name is None or name == "logits":
            return self.logits[:, -1]
        if name not in list(self.cache):
            raise ValueError(
                f"activation {name!r} was not captured; pass names_filter=[{name!r}] to the run (captured: {sorted(self.cache)})"
            )
        return self.cache[name][:, -1]


def source_mask(source_positions: SourcePositions, batch: int, n_pos: int) -> Bool[Tensor, "batch pos"]:
    """``[batch, pos]`` bool, True at each sample's source positions.

    An int, or a flat list of ints, masks the same position(s) in every sample; a tensor
    ``[batch]`` gives one position per sample and ``[batch, k]`` several; a list of
    per-sample lists (ragged allowed) gives each sample its own.  An empty list masks nothing.
    """
    mask = torch.zeros(batch, n_pos, dtype=torch.bool)
    what = f"position of the {n_pos}-token sequence"

    def mark(row: int | slice, positions: Iterable) -> None:
        for p in positions:
            mask[row, check_index(p, n_pos, "source_positions", what)] = True

    if isinstance(source_positions, np.ndarray):
        source_positions = torch.from_numpy(source_positions)
    if isinstance(source_positions, Tensor):
        sp = source_positions.detach().cpu()
        if sp.ndim == 0:
            mark(slice(None), [sp])
            return mask
        if sp.ndim > 2 or sp.shape[0] != batch:
            raise ValueError(
                f"source_positions as a tensor must be [batch={batch}] or [batch={batch}, k] (per sample), got shape {tuple(sp.shape)}; "
                "for the same position(s) in every sample pass an int or a list of ints"
            )
        sp = sp.reshape(batch, -1)
        for row in range(batch):
            mark(row, sp[row].tolist())
        return mask
    if not isinstance(source_positions, Sequence) or isinstance(source_positions, str):
        mark(slice(None), [source_positions])  # an int: every sample
        return mask
    if len(source_positions) == 0:
        return mask
    nested = [
        isinstance(entry, (Sequence, Tensor, np.ndarray)) and not isinstance(entry, str) for entry in source_positions
    ]
    if not any(nested):
        mark(slice(None), source_positions)  # a flat list: the same positions in every sample
        return mask
    if not all(nested) or len(source_positions) != batch:
        raise ValueError(
            f"source_positions as a list of lists gives one list per sample: {batch} lists expected, got {len(source_positions)} entries; "
            "for the same positions in every sample pass a flat list of ints"
        )
    for row, entry in enumerate(source_positions):
        mark(row, torch.as_tensor(entry).reshape(-1).tolist())
    return mask


@renamed_keyword("names", "names_filter", old_none=())
def masked_run(
    model: HookedModel,
    tokens: Int[Tensor, "batch pos"] | Sequence | str | Inputs,
    source_positions: SourcePositions | str,
    layers: int | Iterable[int] | None = None,
    heads: int | Iterable[int] | None = None,
    query_positions: int | Iterable[int] | None = None,
    renormalize: bool = False,
    names_filter: object = (),
    *,
    attention_mask: Int[Tensor, "batch pos"] | None = None,
) -> MaskedRun:
    """Run ``model`` with attention to ``source_positions`` zeroed after the softmax.

    Reads the model's attention direction: in a causal model a query sees only sources at
    or before it, so only those pairs are masked; in a bidirectional one (a
    ``HookedEncoder``, ``cfg.attention_dir == "bidirectional"``) every query's attention to
    a masked source is zeroed.  A model whose run is not finite (NaN or infinite logits,
    e.g. a ``HookedEncoder`` never initialized) is refused, as every forward probe does; so
    is a model without layers (``n_layers=0``: nothing to mask) and tokens on the meta device.

    Args:
        model: any TransformerLens model (:class:`~probes.protocol.HookedModel`: 3.x
            ``HookedTransformer`` or ``HookedEncoder``, 4.x ``TransformerBridge``).
        tokens: token ids ``[batch, pos]`` (or ``[pos]``), strings where the model has a
            tokenizer, or a task's samples (see :func:`~probes.inputs.as_inputs`).
        source_positions: see :func:`source_mask` (a negative position counts from the
            end); or a position name of the inputs (``"last"``: each sample's last real
            token; a task adapter's, e.g. ``"key"``).
        layers, heads: which to mask (``None``: all); an int or ints (negative: from the end).
        query_positions: the query positions whose attention is masked, the same for
            every sample (``None``: all).
        renormalize: rescale each masked row of the pattern to sum to 1 (a row left with
            nothing to attend to stays 0).
        names_filter: the activations to return in ``cache``, captured after the
            masking, picked as TransformerLens' ``run_with_cache(names_filter=...)`` picks
            them: a hook name or a list of them, short names (``"resid_post"``: every
            layer), ``(name, layer)``, a callable on hook names, or ``None`` (every hook
            point); the default ``()`` captures none.  ``names=``, its old name, still
            works and warns (``names=None`` there meant none).
        attention_mask: ``[batch, pos]`` 1 at real tokens, 0 at padding (passed to the model).
    """
    inputs = as_inputs(tokens, check_model(model), attention_mask=attention_mask)
    batch, n_pos = inputs.tokens.shape
    if (
        model.cfg.n_layers < 1
    ):  # no attention to mask: the run would be the plain forward under a mask that claims otherwise
        raise ValueError(
            f"masked_run: the model has {model.cfg.n_layers} layers, so it has no attention to mask; give a model with at least one layer"
        )
    layers = check_indices(layers, model.cfg.n_layers, "layers", f"layer of this {model.cfg.n_layers}-layer model")
    heads = check_indices(heads, model.cfg.n_heads, "heads", f"head of this {model.cfg.n_heads}-head model")
    queries = check_indices(query_positions, n_pos, "query_positions", f"position of the {n_pos}-token sequence")
    if isinstance(source_positions, str):
        source_positions = inputs.position(source_positions)
    sources = source_mask(source_positions, batch, n_pos)
    query_mask = torch.zeros(n_pos, dtype=torch.bool)
    query_mask[queries] = True
    mask = sources[:, None, :] & query_mask[None, :, None] & allowed_pairs(model, n_pos)  # [batch, query, source]
    head_mask = torch.zeros(model.cfg.n_heads, dtype=torch.bool)
    head_mask[heads] = True
    full = (mask[:, None] & head_mask[None, :, None, None]).to(inputs.tokens.device)  # [batch, head, query, source]
    rows = full.any(-1, keepdim=True)

    masked_in: set[str] = set()

    def masker(name: str):
        def mask_pattern(pattern: Float[Tensor, "batch head query source"], hook) -> Tensor:
            masked_in.add(name)
            return masked(pattern)

        return mask_pattern

    def masked(pattern: Float[Tensor, "batch head query source"]) -> Tensor:
        out = pattern.masked_fill(full, 0.0)
        if renormalize:
            total = out.sum(-1, keepdim=True)
            out = torch.where(rows & (total > 0), out / total.clamp_min(torch.finfo(out.dtype).tiny), out)
        return out

    store: dict[str, Tensor] = {}
    patterns = [f"blocks.{layer}.attn.hook_pattern" for layer in layers if bool(full.any())]
    require_hooks(model, patterns, "masked_run (attention masking after the softmax)")
    captures = capture_hooks(names_filter, model, store)  # after the masking hooks: captures see masked values
    logits = run_hooked(model, inputs, [(name, masker(name)) for name in patterns] + captures)
    check_fired(masked_in, patterns, "masked_run (attention masking after the softmax)")
    if not is_filter_function(
        names_filter
    ):  # a callable filter (or None) takes what runs, as TransformerLens' names_filter does
        check_fired(store, [name for name, _ in captures], "masked_run (capturing activations)")
    check_finite(
        logits,
        "the model's logits on these tokens",
        " (check the model's weights with probes.weight_stable_ranks; a new HookedEncoder must be initialized first)",
    )
    return MaskedRun(logits=logits, cache=make_cache(store, model), mask=mask)


def _as_array(vectors: Tensor | np.ndarray) -> np.ndarray:
    array = (
        vectors.detach().cpu().double().numpy()
        if isinstance(vectors, Tensor)
        else np.asarray(vectors, dtype=np.float64)
    )
    if array.ndim != 2 or array.shape[0] < 2:
        raise ValueError(f"vectors must be a 2-D [n_samples >= 2, dim] array, got shape {array.shape}")
    check_finite(array, "vectors")
    return array


#: The journal's t-SNE perplexity (Fig. 4C), the default of :func:`project` where the inputs allow it.
PERPLEXITY = 12.0


def default_perplexity(n: int) -> float:
    """:data:`PERPLEXITY` (12), lowered to ``(n - 1) / 3`` for fewer than 37 inputs (at least 1).

    Each point's neighbourhood then holds about a third of the others, the usual bound
    (``3 * perplexity < n - 1``) below scikit-learn's own (``perplexity < n``)."""
    return min(PERPLEXITY, max(1.0, (n - 1) / 3))


def project(
    vectors: Float[Tensor, "n d"] | np.ndarray,
    method: str = "tsne",
    perplexity: float | None = None,
    seed: int = 0,
    labels: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """A 2-D projection of ``vectors``: columns ``x``, ``y`` (plus the ``labels`` columns).

    ``method`` is ``"tsne"`` or ``"pca"``.  ``"pca"`` is exact: the first two principal
    components from numpy's SVD of the centred vectors (each component's sign fixed so
    that its largest loading is positive), the same on every call.  ``"tsne"`` is
    scikit-learn's t-SNE, an approximation (Barnes-Hut, started from a randomized PCA),
    deterministic for a given ``seed``; ``perplexity`` must lie below the number of
    inputs and defaults to the journal's 12, lowered for fewer than 37 inputs to
    ``(n - 1) / 3`` (:func:`default_perplexity`), so that small inputs work; the value
    used is in the frame's ``attrs["perplexity"]``.
    """
    array = _as_array(vectors)
    seed = check_int(seed, "seed")
    frame_attrs: dict[str, object] = {"method": method}
    if method == "tsne":
        perplexity = (
            default_perplexity(array.shape[0]) if perplexity is None else check_number(perplexity, "perplexity")
        )
        if not 0 < perplexity < array.shape[0]:
            raise ValueError(
                f"perplexity must be in (0, n_samples={array.shape[0]}), got {perplexity}; use more inputs, a smaller perplexity, or perplexity=None for {default_perplexity(array.shape[0]):.3g}"
            )
        xy = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(array)
        frame_attrs.update(perplexity=float(perplexity), seed=seed)
    elif method == "pca":
        xy = principal_components(array, 2)[0]
    else:
        raise ValueError(f"method must be 'tsne' or 'pca', got {method!r}")
    frame = pd.DataFrame({"x": xy[:, 0], "y": xy[:, 1]})
    frame.attrs.update(frame_attrs)
    if labels is not None:
        if len(labels) != len(frame):
            raise ValueError(f"labels has {len(labels)} rows for {len(frame)} vectors")
        frame = pd.concat([frame, labels.reset_index(drop=True)], axis=1)
        frame.attrs.update(frame_attrs)
    return frame


DEFAULT_LABELINGS = ("ordered_pair", "unordered_pair", "composite_shift")


def cluster_scores(
    vectors: Float[Tensor, "n d"] | np.ndarray,
    labelings: pd.DataFrame | Mapping[str, Sequence],
    columns: Sequence[str] | None = DEFAULT_LABELINGS,
    method: str = "kmeans",
    seed: int = 0,
) -> pd.DataFrame:
    """How well each candidate labeling describes the clusters of ``vectors``.

    For each labeling with k distinct labels: ``silhouette`` of the vectors under that
    labeling (Euclidean, -1..1: high when its groups are compact and apart) and ``ari``,
    the adjusted Rand index between the labeling and k clusters found without labels
    (``method`` ``"kmeans"`` or ``"agglomerative"`` (Ward); 1 = identical, ~0 = chance).
    A score is NaN where undefined (k < 2 or k >= n).  Returns one row per labeling:
    ``labeling, n_labels, silhouette, ari, method``.  k-means is seeded (``seed``, 10
    starts), so a call gives the same scores every time.  A labeling with missing values
    (None, NaN, pandas NA) is refused, naming its column and the count: drop those inputs
    first (from ``vectors`` and ``labelings`` alike).
    """
    array = _as_array(vectors)
    seed = check_int(seed, "seed")
    frame = pd.DataFrame(labelings)
    columns = list(frame.columns) if columns is None else list(columns)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"labelings has no column(s) {missing}; it has {list(frame.columns)}")
    if len(frame) != len(array):
        raise ValueError(f"labelings has {len(frame)} rows for {len(array)} vectors")
    if method not in ("kmeans", "agglomerative"):
        raise ValueError(f"method must be 'kmeans' or 'agglomerative', got {method!r}")
    rows = []
    for column in columns:
        check_labels(frame[column], f"labelings column {column!r}")
        labels = pd.factorize(frame[column])[0]
        k = int(labels.max()) + 1
        silhouette = ari = float("nan")
        if 2 <= k < len(array):
            silhouette = float(silhouette_score(array, labels))
            if method == "kmeans":
                found = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(array)
            else:
                found = AgglomerativeClustering(n_clusters=k).fit_predict(array)
            ari = float(adjusted_rand_score(labels, found))
        rows.append({"labeling": column, "n_labels": k, "silhouette": silhouette, "ari": ari, "method": method})
    return pd.DataFrame(rows, columns=["labeling", "n_labels", "silhouette", "ari", "method"])


def plot_projection(
    frame: pd.DataFrame, color: str = "ordered_pair", title: str | None = "Masked last-position vectors"
) -> go.Figure:
    """Scatter of a :func:`project` frame, coloured by the label column ``color`` (refused where it has missing values)."""
    if color not in frame.columns:
        raise ValueError(f"color column {color!r} is not in the frame; it has {list(frame.columns)}")
    check_labels(frame[color], f"the color column {color!r}")
    hover = [c for c in frame.columns if c not in ("x", "y")]
    data = frame.assign(**{color: frame[color].astype(str)})
    return px.scatter(data, x="x", y="y", color=color, hover_data=hover, title=title)
