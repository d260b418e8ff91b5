"""The anchor-function data against an independent, scalar statement of the task (docs/science.md#the-anchor-function-task)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from scipy.stats import chi2

from interp_init.tasks.anchor_pairs import DATA_VERSION, SYMMETRIC_GROUPS
from interp_init.tasks.data import BLOCK_SIZE, _below
from training import make_dataset

SHIFT = {1: 5, 2: 1, 3: -2, 4: -8}


def _scalar_target(task: str, x: int, a1: int, a2: int, k: int = 0, offset: int = 4) -> int:
    f = x + SHIFT[a1] + SHIFT[a2]
    if task == "symmetric" and (a1, a2) == (3, 4):
        return x - 6
    if task == "complexity":
        offset_pairs = {pair for group in SYMMETRIC_GROUPS[:k] for pair in group}
        if (a1, a2) in offset_pairs:
            return f + offset
    return f


def _check_rules(ds, task: str, k: int = 0, offset: int = 4) -> None:
    assert ds.tokens.dtype == torch.int64 and ds.tokens.shape[1] == 9
    for tokens, target, p, pair in zip(
        ds.tokens.tolist(), ds.targets.tolist(), ds.key_positions.tolist(), ds.anchor_pairs.tolist()
    ):
        assert 0 <= p <= 6
        anchors = [i for i, t in enumerate(tokens) if t in SHIFT]
        assert anchors == [p + 1, p + 2], tokens  # exactly one adjacent anchor pair, right after the key
        assert [tokens[p + 1], tokens[p + 2]] == pair
        assert all(20 <= t <= 99 for i, t in enumerate(tokens) if i not in anchors)
        x = tokens[p]
        if ds.split == "id_test":
            assert x % 9 == p
        else:
            assert x % 9 != p
        want = (
            x + SHIFT[pair[0]] + SHIFT[pair[1]]
            if ds.split == "heldout"
            else _scalar_target(task, x, *pair, k=k, offset=offset)
        )
        assert target == want


@pytest.mark.parametrize("task", ["symmetric", "id-ood"])
@pytest.mark.parametrize("split", ["train", "id_test", "heldout"])
def test_targets_follow_spec(task: str, split: str) -> None:
    _check_rules(make_dataset(task, split, 400, seed=1), task)


@pytest.mark.parametrize("k", [0, 3, 6])
def test_complexity_targets(k: int) -> None:
    ds = make_dataset("complexity", "train", 600, seed=2, k=k, offset=4)
    _check_rules(ds, "complexity", k=k)
    assert len({tuple(p) for p in ds.anchor_pairs.tolist()}) == 16


def test_symmetric_heldout_candidates() -> None:
    ds = make_dataset("symmetric", "heldout", 200, seed=0)
    assert (ds.anchor_pairs == torch.tensor([4, 3])).all()
    assert torch.equal(ds.candidate_targets["inferential"], ds.keys - 10)
    assert torch.equal(ds.candidate_targets["symmetric"], ds.keys - 6)


def test_train_and_id_test_share_no_key_position() -> None:
    for task in ("symmetric", "id-ood", "complexity"):
        train = make_dataset(task, "train", 20_000, seed=0)
        test = make_dataset(task, "id_test", 5_000, seed=1)
        combos = lambda ds: set(zip(ds.keys.tolist(), ds.key_positions.tolist()))  # noqa: E731
        assert not combos(train) & combos(test)
        assert set(train.keys.tolist()) == set(range(20, 100))  # every key value is seen in training


@pytest.mark.parametrize("task,heldout", [("symmetric", {(4, 3)}), ("id-ood", {(3, 4), (4, 3)})])
def test_heldout_pairs_never_in_training(task: str, heldout: set) -> None:
    train = make_dataset(task, "train", 20_000, seed=0)
    pairs = {tuple(p) for p in train.anchor_pairs.tolist()}
    assert not pairs & heldout
    assert len(pairs) == 16 - (len(heldout) if task == "id-ood" else 1)
    assert {tuple(p) for p in make_dataset(task, "heldout", 500, seed=0).anchor_pairs.tolist()} == heldout


def test_targets_stay_in_vocabulary() -> None:
    for task, kw in (("symmetric", {}), ("id-ood", {}), ("complexity", {"k": 6})):
        ds = make_dataset(task, "train", 50_000, seed=0, **kw)
        assert int(ds.targets.min()) >= 4 and int(ds.targets.max()) <= 109


def test_same_seed_same_data_other_seed_other_data() -> None:
    a, b, c = (make_dataset("symmetric", "train", 1000, seed=s) for s in (5, 5, 6))
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.targets, b.targets)
    assert not torch.equal(a.tokens, c.tokens)


#: sha256 (first 16 hex digits) of tokens, targets, key positions and pairs of
#: BLOCK_SIZE + 1,000 samples (two blocks), seed 7, per task and split, as drawn by the
#: generator of ``DATA_VERSION`` 4.
STREAM_DIGESTS = {
    ("symmetric", "train"): "d23fe466b6c991db",
    ("symmetric", "id_test"): "c2c955b288f28c52",
    ("symmetric", "heldout"): "3b702ca87a9cfa11",
    ("id-ood", "train"): "8382e961629af303",
    ("id-ood", "id_test"): "4af7d9f1bb60dac8",
    ("id-ood", "heldout"): "b5ca0ce99ba3d432",
    ("complexity", "train"): "60f9af6eedc88f89",
    ("complexity", "id_test"): "792e698b894f958f",
}


@pytest.mark.parametrize(("task", "split"), list(STREAM_DIGESTS))
def test_a_seed_draws_what_it_drew_under_this_data_version(task: str, split: str) -> None:
    """Run folders trust ``DATA_VERSION``: a change to what a seed draws must bump it."""
    ds = make_dataset(task, split, BLOCK_SIZE + 1000, seed=7, **({"k": 3} if task == "complexity" else {}))
    h = hashlib.sha256()
    for t in (ds.tokens, ds.targets, ds.key_positions, ds.anchor_pairs):
        h.update(t.numpy().tobytes())
    assert DATA_VERSION == 4 and h.hexdigest()[:16] == STREAM_DIGESTS[task, split], (
        "make_dataset now draws other samples for the same seed: bump interp_init.tasks.anchor_pairs.DATA_VERSION "
        "and record the new digests here"
    )


class _MarkRedraws:
    """Stands in for the generator ``_below`` redraws rejected words from: marks them ``bound``."""

    def integers(self, low, high, size):
        return np.broadcast_to(np.asarray(high), (size,)).copy()


@pytest.mark.parametrize("bound", [1, 2, 7, 8, 9, 14, 15, 16, 71, 72, 80, 1000, 65535, 65536])
def test_below_keeps_exactly_as_many_words_for_every_value(bound: int) -> None:
    """Over all 2**16 words, each value in [0, bound) comes from exactly 2**16 // bound of
    them and the other 2**16 % bound go to a redraw: exactly uniform, no modulo bias."""
    values = _below(np.arange(1 << 16, dtype=np.uint16), bound, _MarkRedraws())
    counts = np.bincount(values, minlength=bound + 1)
    assert (counts[:bound] == (1 << 16) // bound).all()
    assert counts[bound] == (1 << 16) % bound


def test_below_takes_one_bound_per_word() -> None:
    words = np.tile(np.arange(1 << 16, dtype=np.uint16), 3)
    bounds = np.repeat(np.array([71, 72, 9]), 1 << 16)
    values = _below(words, bounds, _MarkRedraws())
    for i, bound in enumerate((71, 72, 9)):
        counts = np.bincount(values[i << 16 : (i + 1) << 16], minlength=bound + 1)
        assert (counts[:bound] == (1 << 16) // bound).all() and counts[bound] == (1 << 16) % bound
    # and with a real generator the redraws land in range
    real = _below(words, bounds, np.random.default_rng(0))
    assert (real < bounds).all()


def _chi2_p(counts: np.ndarray) -> float:
    """p-value of counts under a uniform distribution (Pearson's chi-square)."""
    expected = counts.sum() / counts.size
    return float(chi2.sf(((counts - expected) ** 2 / expected).sum(), counts.size - 1))


def test_every_drawn_value_is_uniform_on_its_range() -> None:
    """200,000 training samples: noise tokens, key positions, keys given the position and
    pairs pass a chi-square test of uniformity (fixed seed: deterministic, not flaky)."""
    ds = make_dataset("id-ood", "train", 200_000, seed=0)
    tokens, p = ds.tokens.numpy(), ds.key_positions.numpy()
    window = (np.arange(9) >= p[:, None]) & (np.arange(9) <= p[:, None] + 2)
    assert _chi2_p(np.bincount(tokens[~window] - 20, minlength=80)) > 1e-4
    assert _chi2_p(np.bincount(p, minlength=7)) > 1e-4
    keys = ds.keys.numpy()
    for position in range(7):
        allowed = [x for x in range(20, 100) if x % 9 != position]
        assert _chi2_p(np.bincount(keys[p == position], minlength=100)[allowed]) > 1e-4
    codes = ds.anchor_pairs[:, 0].numpy() * 5 + ds.anchor_pairs[:, 1].numpy()
    assert _chi2_p(np.unique(codes, return_counts=True)[1]) > 1e-4


def test_same_samples_on_any_number_of_threads() -> None:
    """Blocks are drawn on torch's threads; each has its own generator, so the count does not matter."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = make_dataset("id-ood", "heldout", 3 * BLOCK_SIZE + 5, seed=3)
        torch.set_num_threads(2)
        two = make_dataset("id-ood", "heldout", 3 * BLOCK_SIZE + 5, seed=3)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one.token_ids, two.token_ids) and torch.equal(one.targets, two.targets)
    assert torch.equal(one.anchor_pairs, two.anchor_pairs) and torch.equal(one.key_positions, two.key_positions)


def test_seed_and_generator_are_one_source() -> None:
    a = make_dataset("symmetric", "train", 500, seed=11)
    b = make_dataset("symmetric", "train", 500, generator=torch.Generator().manual_seed(11))
    assert torch.equal(a.token_ids, b.token_ids)


def test_tokens_are_stored_compactly_and_widened_on_use() -> None:
    ds = make_dataset("symmetric", "train", 100, seed=0)
    assert ds.token_ids.dtype == torch.uint8 and ds.tokens.dtype == torch.int64
    assert ds.tokens is ds.tokens  # widened once, then kept
    assert torch.equal(ds.batch_tokens(torch.tensor([3, 1])), ds.tokens[[3, 1]])
    assert torch.equal(ds.keys, ds.tokens.gather(1, ds.key_positions[:, None]).squeeze(1))


def test_swapped_exchanges_the_pair_only() -> None:
    ds = make_dataset("id-ood", "heldout", 100, seed=0)
    sw = ds.swapped()
    rows = torch.arange(len(ds))
    assert torch.equal(sw.tokens[rows, ds.key_positions + 1], ds.tokens[rows, ds.key_positions + 2])
    assert torch.equal(sw.tokens[rows, ds.key_positions + 2], ds.tokens[rows, ds.key_positions + 1])
    other = torch.ones_like(ds.tokens, dtype=torch.bool)
    other[rows, ds.key_positions + 1] = False
    other[rows, ds.key_positions + 2] = False
    assert torch.equal(sw.tokens[other], ds.tokens[other])


@pytest.mark.parametrize(
    ("task", "split", "pairs"),
    [("symmetric", "train", 15), ("symmetric", "heldout", 1), ("id-ood", "heldout", 2), ("complexity", "id_test", 16)],
)
def test_balanced_draws_as_many_samples_of_every_pair(task: str, split: str, pairs: int) -> None:
    """``balanced``: each pair exactly n / pairs times (counted by hand, across a block
    boundary), keys, positions and noise drawn as without it; n not a multiple is refused."""
    n = pairs * (BLOCK_SIZE // pairs + 3)
    ds = make_dataset(task, split, n, seed=3, balanced=True)
    counts: dict[tuple[int, int], int] = {}
    for pair in ds.anchor_pairs.tolist():
        counts[tuple(pair)] = counts.get(tuple(pair), 0) + 1
    assert len(counts) == pairs and set(counts.values()) == {n // pairs}
    _check_rules(ds.subset(slice(0, 300)), task)
    _check_rules(ds.subset(slice(BLOCK_SIZE - 150, BLOCK_SIZE + 150)), task)
    drawn = make_dataset(task, split, n, seed=3)  # pairs at random: the same keys at the same positions
    assert torch.equal(ds.keys, drawn.keys) and torch.equal(ds.key_positions, drawn.key_positions)
    if pairs > 1:
        with pytest.raises(ValueError, match=f"n \\({n + 1}\\) must be a multiple of the {pairs} pairs"):
            make_dataset(task, split, n + 1, seed=3, balanced=True)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(task="nope", split="train", n=5, seed=0), "unknown task 'nope'"),
        (dict(task="symmetric", split="valid", n=5, seed=0), "unknown split 'valid'"),
        (dict(task="symmetric", split="train", n=0, seed=0), "n \\(number of samples\\) must be an integer >= 1"),
        (dict(task="complexity", split="heldout", n=5, seed=0), "has no held-out pair"),
        (
            dict(task="complexity", split="train", n=5, seed=0, k=7),
            "k \\(inferential complexity\\) must be an integer in 0..6",
        ),
        (dict(task="complexity", split="train", n=5, seed=0, k=-1), "must be an integer in 0..6"),
        (dict(task="symmetric", split="train", n=5, seed=0, k=2), "k applies to the 'complexity' task only"),
        (dict(task="complexity", split="train", n=5, seed=0, k=6, offset=200), "outside the vocabulary"),
        (dict(task="symmetric", split="train", n=5), "exactly one source of randomness"),
    ],
)
def test_bad_input_is_rejected(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_dataset(**kwargs)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(
    task=st.sampled_from(["symmetric", "id-ood", "complexity"]),
    split=st.sampled_from(["train", "id_test", "heldout"]),
    n=st.integers(1, 300),
    seed=st.integers(0, 2**63 - 1),
    k=st.integers(0, 6),
    offset=st.integers(-10, 40).filter(lambda o: o != 0),
)
def test_generated_data_always_obeys_spec(task: str, split: str, n: int, seed: int, k: int, offset: int) -> None:
    if task != "complexity":
        k, offset = 0, 4
    if task == "complexity" and split == "heldout":
        with pytest.raises(ValueError, match="no held-out pair"):
            make_dataset(task, split, n, seed=seed, k=k, offset=offset)
        return
    ds = make_dataset(task, split, n, seed=seed, k=k, offset=offset)
    assert len(ds) == n
    _check_rules(ds, task, k=k, offset=offset)
