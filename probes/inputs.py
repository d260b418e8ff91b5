"""What a probe reads: token ids, their padding mask, the user's labels and positions (any model, any task).

What it holds: every probe takes plain token ids (a ``[batch, pos]`` tensor, a list of
lists of ints, one sequence) or strings where the model has a tokenizer, and optionally
an ``attention_mask`` (1 = real token, 0 = padding), the user's own ``labels`` (one per
sample) and positions (an int, ``"last"``, one per sample).  :func:`as_inputs` turns any
of these into one :class:`Inputs`; a task's samples are adapters onto it: anything with a
``tokens`` attribute (an :class:`interp_init.tasks.data.AnchorDataset`, an interp_init
``Samples`` of any task, e.g. the addition task's) brings its ``targets`` as the label
``target``, its 1-D ``meta`` entries as further labels, and an anchor dataset its key and
anchor positions (``"key"``, ``"first_anchor"``, ``"second_anchor"``) and the labels
``key``, ``a1``, ``a2``, ``key_position``.  No default comes from a task: without labels
there is none; ``"last"`` is each sample's last real token.  A position given as an int
counts from the end when negative, as Python's indexing does (``-1``: the last position
of the padded sequence; ``"last"``: each sample's last real token).

Missing labels are refused: a label that is None, NaN or pandas NA would otherwise count
as one more label, so every probe that reads labels (the similarity probes, their
``equal_mask``, :func:`probes.cluster_scores`, :func:`probes.plot_projection`) raises a
one-line ValueError naming the column and how many are missing (:func:`check_labels`):
leave those samples out, or give them a label.

Shapes: ``tokens [batch, pos]``, ``attention_mask [batch, pos]``; ``labels`` a DataFrame
with ``batch`` rows; each named position a ``[batch]`` int64 tensor.  (The papers'
figures read these inputs through :mod:`probes.masking` Fig. 4, :mod:`probes.flow`
Fig. 3, :mod:`probes.similarity` Fig. 4.)

Example::

    >>> import torch
    >>> from probes.inputs import as_inputs
    >>> inputs = as_inputs([[5, 6, 7, 0], [8, 9, 0, 0]], attention_mask=[[1, 1, 1, 0], [1, 1, 0, 0]], labels=["a", "b"])
    >>> inputs.tokens.shape, inputs.position("last").tolist(), inputs.label("label")
    (torch.Size([2, 4]), [2, 1], ['a', 'b'])
    >>> inputs.position(0).tolist(), inputs.position([3, 2]).tolist()
    ([0, 0], [3, 2])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

#: The names :meth:`Inputs.position` knows for every input; a task adapter adds its own.
LAST = "last"


@dataclass(frozen=True)
class Inputs:
    """Token ids with their padding mask, per-sample labels and named positions.

    Attributes:
        tokens: ``[batch, pos]`` int64 token ids.
        attention_mask: ``[batch, pos]`` int64, 1 at real tokens and 0 at padding (``None``: no padding).
        labels: one row per sample; columns are label names (``"label"`` for labels given
            as a plain list, ``"target"`` for a task's targets).
        positions: named ``[batch]`` positions (``"last"`` always; a task adapter adds its own).
    """

    tokens: Int[Tensor, "batch pos"]
    attention_mask: Int[Tensor, "batch pos"] | None = None
    labels: pd.DataFrame = field(default_factory=pd.DataFrame)
    positions: Mapping[str, Int[Tensor, " batch"]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        tokens = self.tokens
        if not isinstance(tokens, Tensor) or tokens.ndim != 2 or tokens.shape[0] == 0 or tokens.shape[1] == 0:
            raise ValueError(
                f"tokens must be a non-empty [batch, pos] tensor of token ids, got {getattr(tokens, 'shape', tokens)!r}"
            )
        if self.attention_mask is not None and tuple(self.attention_mask.shape) != tuple(tokens.shape):
            raise ValueError(
                f"attention_mask has shape {tuple(self.attention_mask.shape)}; it must match the tokens' {tuple(tokens.shape)}"
            )
        if len(self.labels.columns) and len(self.labels) != len(self):
            raise ValueError(f"labels has {len(self.labels)} rows for {len(self)} samples: give one label per sample")
        if LAST not in self.positions:
            last = _last_real(tokens.shape, self.attention_mask)
            object.__setattr__(self, "positions", {**self.positions, LAST: last})

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def position(self, which: str | int | Sequence[int] | Tensor) -> Int[Tensor, " batch"]:
        """``[batch]`` positions: a name (``"last"`` or the adapter's), an int for every sample, or one per sample."""
        n, n_pos = self.tokens.shape
        if isinstance(which, str):
            if which not in self.positions:
                raise ValueError(
                    f"position must be an int, one int per sample, or one of {sorted(self.positions)} for these inputs; got {which!r}"
                )
            return self.positions[which].cpu().long()
        values = torch.as_tensor(np.asarray(which) if not isinstance(which, Tensor) else which).detach().cpu()
        if values.dtype.is_floating_point or values.dtype == torch.bool:
            raise ValueError(f"position must hold integers, got {which!r}")
        values = values.long().reshape(-1)
        if values.numel() == 1:
            values = values.expand(n).clone()
        if values.numel() != n:
            raise ValueError(
                f"position gives {values.numel()} entries for {n} samples: give one int for all or one per sample"
            )
        values = torch.where(values < 0, values + n_pos, values)
        if bool(((values < 0) | (values >= n_pos)).any()):
            raise ValueError(f"position={which!r} lies outside 0..{n_pos - 1} (the {n_pos}-token sequences)")
        return values

    def label(self, which: str | Sequence | Tensor | None) -> list | None:
        """One label per sample: a column name of :attr:`labels`, the labels themselves, or
        ``None`` (none).  Missing labels are refused (:func:`check_labels`)."""
        if which is None:
            return None
        if isinstance(which, str):
            if which not in self.labels.columns:
                raise ValueError(
                    f"label {which!r} is not a column of these inputs' labels {list(self.labels.columns)}; pass one label per sample instead"
                )
            return check_labels(self.labels[which], f"label column {which!r}")
        values = which.detach().cpu().tolist() if isinstance(which, Tensor) else list(which)
        if len(values) != len(self):
            raise ValueError(f"labels has {len(values)} entries for {len(self)} samples: give one label per sample")
        return check_labels(values, "labels")

    def batches(self, size: int | None) -> list[Inputs]:
        """These inputs in consecutive pieces of at most ``size`` samples (``None``: one piece),
        each with its rows of the mask, the labels and the named positions."""
        if size is None or size >= len(self):
            return [self]
        return [self[start : start + size] for start in range(0, len(self), size)]

    def __getitem__(self, rows: slice) -> Inputs:
        """The samples ``rows`` (a slice) as :class:`Inputs`."""
        mask = None if self.attention_mask is None else self.attention_mask[rows]
        labels = self.labels.iloc[rows].reset_index(drop=True) if len(self.labels.columns) else self.labels
        return Inputs(self.tokens[rows], mask, labels, {name: value[rows] for name, value in self.positions.items()})


def check_labels(values: Sequence | pd.Series, where: str) -> list:
    """``values`` as a list, or a one-line ValueError naming ``where`` and how many are missing.

    Missing means None, NaN or pandas NA (``pandas.isna``): counted as a label, it would
    put every unlabelled sample into one group of its own."""
    values = list(values)
    missing = int(pd.isna(pd.Series(values, dtype=object)).sum()) if values else 0
    if missing:
        raise ValueError(
            f"{where} has {missing} missing value(s) (None, NaN or NA) among {len(values)} samples: "
            "a missing label is not a label; give those samples one or leave them out"
        )
    return values


def _last_real(shape: torch.Size, attention_mask: Tensor | None) -> Tensor:
    batch, n_pos = shape
    if attention_mask is None:
        return torch.full((batch,), n_pos - 1, dtype=torch.int64)
    index = torch.arange(n_pos).expand(batch, n_pos)
    return torch.where(attention_mask.cpu().bool(), index, -1).max(dim=1).values


def _as_mask(attention_mask: object, shape: torch.Size) -> Tensor | None:
    if attention_mask is None:
        return None
    mask = torch.as_tensor(
        np.asarray(attention_mask) if not isinstance(attention_mask, Tensor) else attention_mask
    ).detach()
    if mask.is_meta:
        raise ValueError(
            "attention_mask is on the meta device (a shape without data): give it on a real device (attention_mask.to('cpu'))"
        )
    if mask.ndim == 1:
        mask = mask[None]
    if tuple(mask.shape) != tuple(shape):
        raise ValueError(
            f"attention_mask has shape {tuple(mask.shape)}; it must match the tokens' {tuple(shape)} (1 = real token, 0 = padding)"
        )
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError("attention_mask must hold 1 (real token) and 0 (padding) only")
    if not bool(mask.bool().any(dim=1).all()):
        raise ValueError("attention_mask leaves a sample with no real token: every row needs at least one 1")
    return mask.long()


def _is_strings(source: object) -> bool:
    return isinstance(source, str) or (
        isinstance(source, Sequence) and len(source) > 0 and all(isinstance(s, str) for s in source)
    )


def _from_strings(source: str | Sequence[str], model: object) -> tuple[Tensor, Tensor | None]:
    tokenizer = getattr(model, "tokenizer", None)
    if model is None or tokenizer is None or not hasattr(model, "to_tokens"):
        raise ValueError(
            "strings need a model with a tokenizer (model.tokenizer); this model has none: pass token ids ([batch, pos] ints) instead"
        )
    tokens = model.to_tokens(source)
    if isinstance(source, str) or len(source) == 1:
        return tokens, None
    from transformer_lens.utilities import get_attention_mask

    prepend_bos = getattr(getattr(model, "cfg", None), "default_prepend_bos", True)
    return tokens, get_attention_mask(tokenizer, tokens, prepend_bos).long()


def _dataset_labels(source: object, n: int) -> tuple[pd.DataFrame, dict[str, Tensor]]:
    """The labels and named positions a task's samples bring (targets, 1-D meta; an anchor dataset's key and anchors)."""
    columns: dict[str, list] = {}
    positions: dict[str, Tensor] = {}
    key_positions = getattr(source, "key_positions", None)
    pairs = getattr(source, "anchor_pairs", None)
    if isinstance(key_positions, Tensor) and isinstance(pairs, Tensor):
        kp = key_positions.detach().cpu().long()
        positions = {"key": kp, "first_anchor": kp + 1, "second_anchor": kp + 2}
        columns["key"] = source.keys.detach().cpu().tolist()  # type: ignore[attr-defined]
        columns["a1"] = pairs[:, 0].detach().cpu().tolist()
        columns["a2"] = pairs[:, 1].detach().cpu().tolist()
        columns["key_position"] = kp.tolist()
    targets = getattr(source, "targets", None)
    if isinstance(targets, Tensor) and targets.ndim == 1 and len(targets) == n:
        columns["target"] = targets.detach().cpu().tolist()
    for name, value in (getattr(source, "meta", None) or {}).items():
        if isinstance(value, Tensor) and value.ndim == 1 and len(value) == n and name not in columns:
            columns[name] = value.detach().cpu().tolist()
    return pd.DataFrame(columns), positions


def as_inputs(
    source: object,
    model: object | None = None,
    *,
    attention_mask: object = None,
    labels: Sequence | Tensor | Mapping[str, Sequence] | pd.DataFrame | None = None,
) -> Inputs:
    """Any input a probe takes as :class:`Inputs` (token ids checked against ``model`` where given).

    ``source``: an :class:`Inputs` (returned as is, ``labels`` added), a ``[batch, pos]``
    or ``[pos]`` tensor or nested list of token ids, a string or list of strings (the
    model's tokenizer; padded batches get their attention mask), or a task's samples
    (anything with ``tokens``: ``AnchorDataset``, interp_init ``Samples``).  ``labels``: one
    per sample (a list or tensor, kept as the column ``"label"``), or named columns (a
    mapping or DataFrame)."""
    if isinstance(source, Inputs):
        inputs = source
        if attention_mask is not None:
            inputs = Inputs(
                inputs.tokens,
                _as_mask(attention_mask, inputs.tokens.shape),
                inputs.labels,
                {k: v for k, v in inputs.positions.items() if k != LAST},
            )
    else:
        mask = None
        table, positions = pd.DataFrame(), {}
        if _is_strings(source):
            tokens, mask = _from_strings(source, model)  # type: ignore[arg-type]
        elif hasattr(source, "tokens") and not isinstance(source, (Tensor, np.ndarray)):
            tokens = source.tokens  # type: ignore[attr-defined]
            table, positions = _dataset_labels(source, int(torch.as_tensor(tokens).shape[0]))
        else:
            tokens = source
        tokens = _as_token_tensor(tokens)
        mask = _as_mask(attention_mask, tokens.shape) if attention_mask is not None else mask
        inputs = Inputs(tokens, mask, table, positions)
    if model is not None:
        inputs = Inputs(check_tokens(inputs.tokens, model), inputs.attention_mask, inputs.labels, inputs.positions)
    if labels is not None:
        extra = (
            pd.DataFrame(labels)
            if isinstance(labels, (Mapping, pd.DataFrame))
            else pd.DataFrame({"label": inputs.label(labels)})
        )
        if len(extra) != len(inputs):
            raise ValueError(f"labels has {len(extra)} rows for {len(inputs)} samples: give one label per sample")
        table = pd.concat(
            [
                inputs.labels.drop(columns=[c for c in extra.columns if c in inputs.labels.columns]),
                extra.reset_index(drop=True),
            ],
            axis=1,
        )
        inputs = Inputs(inputs.tokens, inputs.attention_mask, table, inputs.positions)
    return inputs


def _as_token_tensor(tokens: object) -> Tensor:
    try:
        tokens = torch.as_tensor(tokens) if not isinstance(tokens, Tensor) else tokens
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValueError(
            f"tokens must be [batch, pos] token ids of one length (pad them and pass attention_mask), or strings: {error}"
        ) from None
    if tokens.is_meta:
        raise ValueError(
            "tokens are on the meta device (a shape without data): nothing can be probed; give token ids on a real device (tokens.to('cpu'))"
        )
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.ndim != 2 or tokens.shape[0] == 0 or tokens.shape[1] == 0:
        raise ValueError(
            f"tokens must be a non-empty [batch, pos] (or [pos]) tensor of token ids, got shape {tuple(tokens.shape)}"
        )
    if tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
        raise ValueError(f"tokens must hold integer token ids, got dtype {tokens.dtype}")
    return tokens


def check_tokens(tokens: Tensor, model: object) -> Int[Tensor, "batch pos"]:
    """``tokens`` as int64 on the model's device, or a one-line ValueError (ids outside the vocabulary, too long)."""
    cfg = model.cfg  # type: ignore[attr-defined]
    if int(tokens.min()) < 0 or int(tokens.max()) >= cfg.d_vocab:
        raise ValueError(
            f"token ids must lie in 0..{cfg.d_vocab - 1} (the model's vocabulary), got {int(tokens.min())}..{int(tokens.max())}"
        )
    if tokens.shape[1] > cfg.n_ctx:
        raise ValueError(f"sequences of {tokens.shape[1]} tokens exceed the model's context n_ctx={cfg.n_ctx}")
    return tokens.long().to(cfg.device)


def is_cache(source: object) -> bool:
    """Whether ``source`` is a TransformerLens ``ActivationCache`` or a mapping of hook names
    to activations (rather than token ids, strings or a task's samples)."""
    if isinstance(source, (Tensor, np.ndarray, str, Inputs, pd.DataFrame)):
        return False
    if type(source).__name__ == "ActivationCache":
        return True
    return isinstance(source, Mapping) and all(isinstance(key, str) for key in source)


def cache_patterns(
    cache: object, model: object, layers: list[int], probe: str
) -> list[Float[Tensor, "batch head query source"]]:
    """Each of ``layers``' attention pattern ``[batch, head, query, source]`` from ``cache``
    (one of ``cache.remove_batch_dim()``'s ``[head, query, source]`` gets its batch of one)."""
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in layers]
    held = set(cache.keys())
    missing = [name for name in names if name not in held]
    if missing:
        raise ValueError(
            f"{probe}: the cache holds no {missing[0]} ({len(missing)} of the {len(names)} patterns needed are missing); "
            "cache them with model.run_with_cache(tokens) or names_filter=lambda name: name.endswith('hook_pattern'), or pass the tokens"
        )
    out = []
    for name in names:
        pattern = cache[name]
        pattern = pattern[None] if pattern.ndim == 3 else pattern
        if pattern.ndim != 4 or pattern.shape[1] != model.cfg.n_heads or pattern.shape[-1] != pattern.shape[-2]:
            raise ValueError(
                f"{probe}: the cache's {name} has shape {tuple(pattern.shape)}, not [batch, {model.cfg.n_heads} heads, pos, pos]: pass the cache this model's run_with_cache gave"
            )
        if not bool(torch.isfinite(pattern).all()):
            raise ValueError(
                f"{probe}: NaN or infinite entries in the cache's {name} (a run that was not finite): no analysis of them is defined"
            )
        out.append(pattern)
    if len({p.shape[0] for p in out}) > 1 or len({p.shape[-1] for p in out}) > 1:
        raise ValueError(
            f"{probe}: the cache's patterns differ in batch or positions: pass the cache of one run_with_cache"
        )
    return out
