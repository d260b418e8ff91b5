"""Anchor-function samples, generated without a per-sample Python loop.

:mod:`interp_init.tasks.anchor_pairs` defines the tasks; this module draws their samples.  One encoded
example (task ``symmetric``, split ``train``)::

    position   0   1   2   3   4   5   6   7   8
    tokens    35  63  99   1   2  38  42  36  62     key x = 99 at p = 2, pair (1, 2)
    target    99 + 5 + 1 = 105

Splits, by key value and key position (the papers' appendix, as their code does it):
``train`` keys satisfy x mod 9 != p, ``id_test`` keys x mod 9 == p, so the two never
share a (key, position) yet every key value occurs in training.  ``heldout`` holds the
task's unseen pair(s), keys drawn as in training.  Each sample's pair is drawn uniformly,
or, with ``balanced=True``, each pair gets exactly ``n / pairs`` samples, as the released
code draws its sets (``--balanced-pairs``, docs/science.md).

Samples are drawn in blocks of :data:`BLOCK_SIZE`, each from its own NumPy generator
(SFC64, seeded by the dataset's seed and the block's index through ``SeedSequence``), on
torch's threads: the same seed gives the same samples on any number of threads and any
platform (within one :data:`~interp_init.tasks.anchor_pairs.DATA_VERSION`).  Every value is exactly
uniform on its range, drawn from 16-bit words by Lemire's multiply-shift with rejection
(:func:`_below`); no per-sample Python loop.  Token ids are stored as uint8
(``AnchorDataset.token_ids``) and widened to int64 where a model reads them (``tokens``,
``batch_tokens``).

Example::

    >>> from interp_init.tasks.data import make_dataset
    >>> ds = make_dataset("symmetric", "heldout", n=4, seed=0)
    >>> ds.tokens.shape, sorted(ds.candidate_targets)
    (torch.Size([4, 9]), ['inferential', 'symmetric'])
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor

from interp_init.tasks.anchor_pairs import KEY_HIGH, KEY_LOW, N_KEY_POSITIONS, SEQ_LEN, SPLITS, composite, task_spec

#: Samples are drawn in blocks of this many, each from its own generator seeded by the
#: dataset's seed and the block's index: blocks are drawn on all of torch's threads, their
#: scratch arrays (about 1 MB) stay in cache, and the same seed gives the same samples on
#: any thread count.
BLOCK_SIZE = 1 << 15


@dataclass(frozen=True)
class AnchorDataset:
    """Encoded anchor-function samples with their per-sample metadata.

    Token ids are stored compactly (``token_ids``: uint8 from :func:`make_dataset`, since the
    vocabulary has 201 tokens: 8x less memory than int64, on the GPU too) and widened to
    int64, what a ``HookedTransformer`` takes, where they are used: ``tokens`` (all of them,
    made on first use and kept) or ``batch_tokens(index)`` (a batch, as the trainer does).

    Attributes:
        token_ids: ``[n, 9]`` input sequences, any integer dtype (uint8 from ``make_dataset``).
        tokens: ``[n, 9]`` int64 input sequences (``token_ids`` widened; cached).
        targets: ``[n]`` int64 designated targets (for a held-out pair: the composite f).
        key_positions: ``[n]`` int64 position p of the key (anchors at p+1, p+2).
        anchor_pairs: ``[n, 2]`` int64 the anchor pair (a1, a2).
        candidate_targets: for ``symmetric``'s held-out pair, ``{"inferential": [n],
            "symmetric": [n]}``; empty otherwise.
    """

    task: str
    split: str
    token_ids: Int[Tensor, "n 9"]
    targets: Int[Tensor, " n"]
    key_positions: Int[Tensor, " n"]
    anchor_pairs: Int[Tensor, "n 2"]
    candidate_targets: dict[str, Tensor] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.token_ids.shape[0])

    @cached_property
    def tokens(self) -> Int[Tensor, "n 9"]:
        """All input sequences as int64 (made from ``token_ids`` on first use, then kept)."""
        return self.token_ids.long()

    def batch_tokens(self, index: Tensor | slice) -> Int[Tensor, "batch 9"]:
        """The int64 input sequences at ``index``, without widening the whole dataset."""
        return self.token_ids[index].long()

    @property
    def keys(self) -> Int[Tensor, " n"]:
        """The key value x of each sample."""
        return self.token_ids.gather(1, self.key_positions[:, None]).squeeze(1).long()

    def to(self, device: str | torch.device) -> AnchorDataset:
        """A copy with every tensor on ``device``."""
        return AnchorDataset(
            self.task,
            self.split,
            self.token_ids.to(device),
            self.targets.to(device),
            self.key_positions.to(device),
            self.anchor_pairs.to(device),
            {k: v.to(device) for k, v in self.candidate_targets.items()},
        )

    def subset(self, index: Tensor | slice) -> AnchorDataset:
        """The samples at ``index`` (a slice, index tensor or boolean mask)."""
        return AnchorDataset(
            self.task,
            self.split,
            self.token_ids[index],
            self.targets[index],
            self.key_positions[index],
            self.anchor_pairs[index],
            {k: v[index] for k, v in self.candidate_targets.items()},
        )

    def swapped(self) -> AnchorDataset:
        """The same inputs with each anchor pair (a, b) swapped to (b, a), key and noise kept.

        Targets are recomputed as the composite f (which is symmetric); use it for
        commutativity, which compares predictions, not targets.
        """
        tokens = self.token_ids.clone()
        rows = torch.arange(len(self), device=tokens.device)
        p = self.key_positions
        tokens[rows, p + 1] = self.anchor_pairs[:, 1].to(tokens.dtype)
        tokens[rows, p + 2] = self.anchor_pairs[:, 0].to(tokens.dtype)
        return AnchorDataset(self.task, self.split, tokens, self.targets, p, self.anchor_pairs.flip(1), {})


def _key_table(split: str) -> tuple[np.ndarray, np.ndarray]:
    """Per key position p: the allowed key values (uint8, zero-padded rows) and how many there are."""
    values = np.arange(KEY_LOW, KEY_HIGH + 1)
    allowed = [values[(values % 9 == p) == (split == "id_test")] for p in range(N_KEY_POSITIONS)]
    counts = np.array([len(a) for a in allowed])
    table = np.zeros((N_KEY_POSITIONS, counts.max()), dtype=np.uint8)
    for p, a in enumerate(allowed):
        table[p, : len(a)] = a
    return table, counts


def _below(words: np.ndarray, bound: int | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exactly uniform integers in ``[0, bound)`` from uniform 16-bit ``words`` (any shape).

    Lemire's multiply-shift: ``(word * bound) >> 16``, rejecting the ``2**16 mod bound``
    words whose low half falls below ``2**16 mod bound`` (so each value keeps exactly
    ``2**16 // bound`` words); a rejected word (at most 0.03% of them for the task's
    bounds, all <= 80) is replaced by a fresh exact draw from ``rng``.  ``bound`` is an int
    or an array of ``words``' shape, each in 1..2**16.  Returns uint32 values.
    """
    bound = np.asarray(bound, dtype=np.uint32)
    scaled = words.astype(np.uint32)
    scaled *= bound
    low = scaled.astype(np.uint16)  # the product's low 16 bits
    scaled >>= 16
    rejected = np.flatnonzero(low < np.uint32(1 << 16) % bound)
    if rejected.size:
        redraw = bound if bound.ndim == 0 else bound.reshape(-1)[rejected]
        scaled.reshape(-1)[rejected] = rng.integers(0, redraw, size=rejected.size)
    return scaled


def make_dataset(
    task: str,
    split: str,
    n: int,
    seed: int | None = None,
    *,
    generator: torch.Generator | None = None,
    k: int = 0,
    offset: int = 4,
    balanced: bool = False,
) -> AnchorDataset:
    """Draw ``n`` samples of ``task``'s ``split`` (see the module docstring).

    Args:
        task: ``"symmetric"``, ``"id-ood"`` or ``"complexity"``.
        split: ``"train"``, ``"id_test"`` or ``"heldout"`` (not for ``complexity``).
        n: number of samples (>= 1).
        seed, generator: the source of randomness; exactly one. The same seed gives
            the same samples.
        k, offset: for ``complexity``: how many symmetric groups get target f + offset.
        balanced: each of the split's pairs gets exactly ``n / pairs`` samples (sample i
            the pair ``i mod pairs``, in the order of the task's pairs; ``n`` must be a
            multiple of the number of pairs), as the released code draws a fixed number
            per pair; otherwise each sample's pair is drawn uniformly.  Keys, positions and
            noise are drawn alike either way (independently, with replacement).
    """
    spec = task_spec(task, k=k, offset=offset)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n (number of samples) must be an integer >= 1, got {n!r}")
    if (seed is None) == (generator is None):
        raise ValueError(
            "make_dataset needs exactly one source of randomness: seed=<int> or generator=<torch.Generator>"
        )
    if generator is None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        generator = torch.Generator().manual_seed(seed)
    if split == "heldout":
        if not spec.heldout_pairs:
            raise ValueError(f"task {task!r} has no held-out pair; its splits are 'train' and 'id_test'")
        pairs = torch.tensor(spec.heldout_pairs)
    else:
        pairs = torch.tensor(spec.train_pairs)
    if balanced and n % len(pairs):
        raise ValueError(
            f"balanced: n ({n}) must be a multiple of the {len(pairs)} pairs of {task!r}'s {split!r} split, e.g. {n - n % len(pairs) or len(pairs)}"
        )

    # One draw from the source of randomness seeds every block's generator.
    base_seed = int(torch.randint(0, 1 << 62, (1,), generator=generator))
    key_table, key_counts = _key_table("id_test" if split == "id_test" else "train")
    pair_table = pairs.numpy().astype(np.uint8)
    # f + the task's offset for each of the split's pairs, indexed like pair_table
    pair_shift = np.array(
        [composite(0, a, b) + (0 if split == "heldout" else spec.offset((a, b))) for a, b in pairs.tolist()]
    )

    token_ids = torch.empty(n, SEQ_LEN, dtype=torch.uint8)
    targets = torch.empty(n, dtype=torch.int64)
    key_positions = torch.empty(n, dtype=torch.int64)
    anchor_pairs = torch.empty(n, 2, dtype=torch.int64)
    out_tokens, out_targets, out_p, out_pairs = (t.numpy() for t in (token_ids, targets, key_positions, anchor_pairs))

    def draw_block(block: int) -> None:
        lo, hi = block * BLOCK_SIZE, min(n, (block + 1) * BLOCK_SIZE)
        m = hi - lo
        rng = np.random.Generator(np.random.SFC64(np.random.SeedSequence([base_seed, block])))
        # 12 uniform 16-bit words per sample: 9 noise tokens per sample, then for every
        # sample its p, its key's index among the keys allowed at p, and its pair's index.
        words = rng.bit_generator.random_raw(3 * m).astype("<u8", copy=False).view("<u2")
        noise, p_words, key_words, pair_words = words[: 9 * m].reshape(m, 9), *words[9 * m :].reshape(3, m)
        tokens = out_tokens[lo:hi]
        np.add(_below(noise, KEY_HIGH - KEY_LOW + 1, rng), KEY_LOW, out=tokens, casting="unsafe")
        p = out_p[lo:hi]
        p[:] = _below(p_words, N_KEY_POSITIONS, rng)
        keys = key_table.take(p * key_table.shape[1] + _below(key_words, key_counts.take(p), rng))
        code = np.arange(lo, hi) % len(pair_table) if balanced else _below(pair_words, len(pair_table), rng)
        pair = pair_table.take(code, axis=0)
        out_pairs[lo:hi] = pair
        at = np.arange(0, m * SEQ_LEN, SEQ_LEN) + p  # flat index of each key in the block
        flat = tokens.reshape(-1)
        for values in (keys, pair[:, 0], pair[:, 1]):
            flat[at] = values
            at += 1
        np.add(keys, pair_shift.take(code), out=out_targets[lo:hi])

    n_blocks = -(-n // BLOCK_SIZE)
    workers = min(torch.get_num_threads(), n_blocks)
    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(draw_block, range(n_blocks)))
    else:
        for block in range(n_blocks):
            draw_block(block)
    candidates: dict[str, Tensor] = {}
    if split == "heldout":
        candidates = {name: targets + off for name, off in spec.candidates.items()}
    return AnchorDataset(task, split, token_ids, targets, key_positions, anchor_pairs, candidates)
