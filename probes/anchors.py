"""The anchor tasks' helpers, built on the generic probes: key masking and candidate labelings (journal Fig. 4).

What it measures: on the anchor tasks' inputs (an :class:`~interp_init.tasks.data.AnchorDataset`,
e.g. from :func:`probes.input_grid`, or their token ids ``[batch, 9]`` as a TransformerLens
user holds them, each key found before its two anchor tokens by :func:`anchor_positions`), :func:`mask_key` and :func:`mask_second_anchor` are
:func:`probes.masked_run` with the inputs' named positions ``"key"`` and ``"second_anchor"``
(:mod:`probes.inputs` reads them from the dataset), and :func:`candidate_labelings` gives
the labelings whose clusters :func:`probes.cluster_scores` compares (the journal's
Fig. 4C: do symmetric pairs merge?).  Nothing else in :mod:`probes` needs these tasks.

Shapes: a dataset of ``n`` inputs ``[n, 9]``; :class:`~probes.masking.MaskedRun` as
:func:`probes.masked_run` returns it; :func:`candidate_labelings` one row per input.

Example::

    >>> import torch
    >>> from transformer_lens import HookedTransformer, HookedTransformerConfig
    >>> from interp_init import quiet_deprecation
    >>> from probes import input_grid, mask_key, masked_run, candidate_labelings
    >>> cfg = HookedTransformerConfig(n_layers=2, d_model=16, n_heads=2, d_head=8, n_ctx=9, d_vocab=201, act_fn="gelu")
    >>> with quiet_deprecation():
    ...     model = HookedTransformer(cfg)
    >>> grid = input_grid(keys=range(30, 33), pairs=[(1, 2), (2, 1)], seed=0)
    >>> key = mask_key(model, grid)
    >>> bool(torch.equal(key.logits, masked_run(model, grid.tokens, grid.key_positions).logits))
    True
    >>> bool(torch.equal(mask_key(model, grid.tokens)[:, -1], key[:, -1]))  # token ids: the keys are found
    True
    >>> candidate_labelings(grid)["unordered_pair"].tolist()
    ['1,2', '1,2', '1,2', '1,2', '1,2', '1,2']
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor

from interp_init.tasks.anchor_pairs import ANCHORS, SHIFTS
from interp_init.tasks.data import AnchorDataset
from probes._common import check_dataset, renamed_keyword
from probes.masking import MaskedRun, masked_run
from probes.protocol import HookedModel, check_model

#: What :func:`mask_key` and :func:`mask_second_anchor` capture by default: the last block's output.
OUTPUT = ("resid_post", -1)


def anchor_positions(tokens: Int[Tensor, "batch pos"] | Sequence) -> Int[Tensor, " batch"]:
    """Each input's key position: the position ``p`` whose next two tokens are anchors
    (``1``-``4``), as the anchor tasks lay out ``key, a1, a2`` among noise tokens (which are
    never anchors).  ``tokens``: ``[batch, pos]`` or ``[pos]`` token ids.  An input without
    two adjacent anchor tokens, or with more than one such pair, is refused by its row."""
    ids = torch.as_tensor(tokens).detach().cpu()
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(
            f"tokens must be integer token ids [batch, pos] or [pos], got {ids.dtype} of shape {tuple(ids.shape)}"
        )
    is_anchor = torch.isin(ids.long(), torch.tensor(ANCHORS))
    pair = is_anchor[:, 1:-1] & is_anchor[:, 2:]  # [batch, pos - 2]: True at p where p+1 and p+2 are anchors
    counts = pair.sum(1)
    bad = torch.nonzero(counts != 1).flatten().tolist()
    if bad:
        row = bad[0]
        why = (
            "no two adjacent anchor tokens"
            if int(counts[row]) == 0
            else f"{int(counts[row])} places with two adjacent anchor tokens"
        )
        raise ValueError(
            f"tokens row {row} ({ids[row].tolist()}) has {why} ({len(bad)} of {len(ids)} rows alike): an anchor-task input holds "
            f"key, a1, a2 with anchors in {list(ANCHORS)} once; for other inputs pass source positions to probes.masked_run"
        )
    return pair.long().argmax(1)


def _mask_named(
    model: HookedModel,
    dataset: AnchorDataset | Tensor | Sequence,
    position: str,
    layers: int | Iterable[int] | None,
    heads: int | Iterable[int] | None,
    query_positions: int | Iterable[int] | None,
    renormalize: bool,
    names_filter: object,
) -> MaskedRun:
    """:func:`masked_run` hiding the dataset's named ``position`` (token ids: found by :func:`anchor_positions`)."""
    check_model(model)
    if isinstance(dataset, AnchorDataset) or hasattr(dataset, "key_positions"):
        dataset = check_dataset(dataset)
        return masked_run(
            model, dataset, position, layers, heads, query_positions, renormalize, names_filter=names_filter
        )
    if not isinstance(dataset, (Tensor, Sequence, np.ndarray)) or isinstance(dataset, str):
        check_dataset(dataset)  # the one-line error naming what is taken
    keys = anchor_positions(dataset)
    sources = keys if position == "key" else keys + 2
    return masked_run(model, dataset, sources, layers, heads, query_positions, renormalize, names_filter=names_filter)


@renamed_keyword("names", "names_filter", old_none=OUTPUT)
def mask_key(
    model: HookedModel,
    dataset: AnchorDataset | Int[Tensor, "batch pos"] | Sequence,
    *,
    layers: int | Iterable[int] | None = None,
    heads: int | Iterable[int] | None = None,
    query_positions: int | Iterable[int] | None = None,
    renormalize: bool = False,
    names_filter: object = OUTPUT,
) -> MaskedRun:
    """:func:`masked_run` hiding each sample's key token (``dataset.key_positions``): the anchor tasks' case of it.

    ``dataset``: an :class:`~interp_init.tasks.data.AnchorDataset`, or the anchor tasks'
    token ids ``[batch, 9]`` (or ``[9]``) as a tensor or nested list, each key found by
    :func:`anchor_positions`.

    ``names_filter`` (as :func:`masked_run` takes it) defaults to ``("resid_post", -1)``,
    the last block's output ``blocks.{L-1}.hook_resid_post`` (the journal's "output
    embedding", before the final LayerNorm and unembedding).  ``names=``, its old name,
    still works and warns.
    """
    return _mask_named(model, dataset, "key", layers, heads, query_positions, renormalize, names_filter)


@renamed_keyword("names", "names_filter", old_none=OUTPUT)
def mask_second_anchor(
    model: HookedModel,
    dataset: AnchorDataset | Int[Tensor, "batch pos"] | Sequence,
    *,
    layers: int | Iterable[int] | None = None,
    heads: int | Iterable[int] | None = None,
    query_positions: int | Iterable[int] | None = None,
    renormalize: bool = False,
    names_filter: object = OUTPUT,
) -> MaskedRun:
    """:func:`masked_run` hiding each sample's second anchor (key position + 2); ``dataset`` and ``names_filter`` as :func:`mask_key`."""
    return _mask_named(model, dataset, "second_anchor", layers, heads, query_positions, renormalize, names_filter)


def candidate_labelings(dataset: AnchorDataset) -> pd.DataFrame:
    """One row per sample: candidate labels for clustering the masked outputs.

    Columns: ``ordered_pair`` ("1,2"), ``unordered_pair`` ("1,2" for (1,2) and (2,1)),
    ``composite_shift`` (s(a1) + s(a2)), ``target_shift`` (the designated target minus
    the key: differs from the composite shift where the task gives a pair another
    mapping, e.g. (3,4) in ``symmetric``), ``first_anchor``, ``key``,
    ``single_anchor_target`` (g(x; a1) = x + s(a1)) and ``target`` (the dataset's).
    With the papers' shifts (5, 1, -2, -8) the ten unordered pairs have ten distinct
    sums, so ``composite_shift`` groups inputs exactly as ``unordered_pair`` does.
    """
    pairs = check_dataset(dataset).anchor_pairs.cpu().tolist()
    keys = dataset.keys.cpu().tolist()
    return pd.DataFrame(
        {
            "ordered_pair": [f"{a},{b}" for a, b in pairs],
            "unordered_pair": [f"{min(a, b)},{max(a, b)}" for a, b in pairs],
            "composite_shift": [SHIFTS[a] + SHIFTS[b] for a, b in pairs],
            "target_shift": [t - x for t, x in zip(dataset.targets.cpu().tolist(), keys, strict=True)],
            "first_anchor": [a for a, _ in pairs],
            "key": keys,
            "single_anchor_target": [x + SHIFTS[a] for x, (a, _) in zip(keys, pairs, strict=True)],
            "target": dataset.targets.cpu().tolist(),
        }
    )
