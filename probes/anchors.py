"""The anchor tasks' helpers, built on the generic probes: key masking and candidate labelings (journal Fig. 4).

What it measures: on the anchor tasks' inputs (an :class:`~interp_init.tasks.data.AnchorDataset`,
e.g. from :func:`probes.input_grid`), :func:`mask_key` and :func:`mask_second_anchor` are
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
    >>> candidate_labelings(grid)["unordered_pair"].tolist()
    ['1,2', '1,2', '1,2', '1,2', '1,2', '1,2']
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from interp_init.tasks.anchor_pairs import SHIFTS
from interp_init.tasks.data import AnchorDataset
from probes._common import check_dataset, renamed_keyword
from probes.masking import MaskedRun, masked_run
from probes.protocol import HookedModel, check_model

#: What :func:`mask_key` and :func:`mask_second_anchor` capture by default: the last block's output.
OUTPUT = ("resid_post", -1)


def _mask_named(
    model: HookedModel, dataset: AnchorDataset, position: str, layers: int | Iterable[int] | None, heads: int | Iterable[int] | None,
    query_positions: int | Iterable[int] | None, renormalize: bool, names_filter: object,
) -> MaskedRun:  # fmt: skip
    """:func:`masked_run` hiding the dataset's named ``position``."""
    dataset = check_dataset(dataset)
    check_model(model)
    return masked_run(model, dataset, position, layers, heads, query_positions, renormalize, names_filter=names_filter)


@renamed_keyword("names", "names_filter", old_none=OUTPUT)
def mask_key(
    model: HookedModel,
    dataset: AnchorDataset,
    *,
    layers: int | Iterable[int] | None = None,
    heads: int | Iterable[int] | None = None,
    query_positions: int | Iterable[int] | None = None,
    renormalize: bool = False,
    names_filter: object = OUTPUT,
) -> MaskedRun:
    """:func:`masked_run` hiding each sample's key token (``dataset.key_positions``): the anchor tasks' case of it.

    ``names_filter`` (as :func:`masked_run` takes it) defaults to ``("resid_post", -1)``,
    the last block's output ``blocks.{L-1}.hook_resid_post`` (the journal's "output
    embedding", before the final LayerNorm and unembedding).  ``names=``, its old name,
    still works and warns.
    """
    return _mask_named(model, dataset, "key", layers, heads, query_positions, renormalize, names_filter)


@renamed_keyword("names", "names_filter", old_none=OUTPUT)
def mask_second_anchor(
    model: HookedModel,
    dataset: AnchorDataset,
    *,
    layers: int | Iterable[int] | None = None,
    heads: int | Iterable[int] | None = None,
    query_positions: int | Iterable[int] | None = None,
    renormalize: bool = False,
    names_filter: object = OUTPUT,
) -> MaskedRun:
    """:func:`masked_run` hiding each sample's second anchor (key position + 2); ``names_filter`` as :func:`mask_key`."""
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
