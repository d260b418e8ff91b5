"""Probes on unusual but valid models and inputs: correct results or a clear ValueError."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import foreign_model, n_hooks
from transformer_lens import HookedTransformer

from interp_init.config import InitConfig, ModelConfig
from interp_init.model import build_model
from interp_init.tasks.data import AnchorDataset, make_dataset
from probes import (
    attention_html,
    attention_patterns,
    block_score,
    candidate_labelings,
    cluster_scores,
    condensation,
    cosine_similarity_matrix,
    embedding_pca,
    information_flow,
    input_grid,
    mask_key,
    mask_second_anchor,
    masked_run,
    merged_weight,
    plot_flow,
    project,
    residual_similarity,
    singular_value_spectra,
    stable_rank,
    top_paths,
    value_similarity,
    weight_stable_ranks,
)


def test_rotary_model_has_no_w_pos_and_the_rest_is_ranked() -> None:
    model = foreign_model(positional_embedding_type="rotary", rotary_dim=8)
    frame = weight_stable_ranks(model)
    assert "W_pos" not in set(frame["name"])
    assert len(frame) == 2 + 2 * 6  # W_E, W_U and 6 per block
    with pytest.raises(ValueError, match="W_pos does not exist: the model's positional embedding is 'rotary'"):
        merged_weight(model, "W_pos")


@pytest.mark.parametrize("layer", [1, 1.0, np.int64(1), torch.tensor(1), -1])
def test_integer_like_layer_indices_are_accepted(layer: object) -> None:
    model = foreign_model()
    torch.testing.assert_close(merged_weight(model, "W_Q", layer), merged_weight(model, "W_Q", 1))


@pytest.mark.parametrize("layer", [1.5, True, "1", 2, -3, None])
def test_other_layer_indices_are_refused_naming_the_range(layer: object) -> None:
    with pytest.raises(ValueError, match=r"layer must be an integer in 0\.\.1 \(or -2\.\.-1 from the end\) for W_Q"):
        merged_weight(foreign_model(), "W_Q", layer)


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), float("-inf")])
def test_stable_rank_refuses_non_finite_matrices(bad: float) -> None:
    matrix = torch.ones(3, 3)
    matrix[1, 2] = bad
    with pytest.raises(ValueError, match="NaN or infinite entries"):
        stable_rank(matrix)


def test_attention_only_model_is_ranked_without_mlp_weights() -> None:
    frame = weight_stable_ranks(foreign_model(attn_only=True))
    assert not {"W_in", "W_out"} & set(frame["name"]) and len(frame) == 3 + 2 * 4


def test_one_hook_name_given_as_a_string_is_that_name() -> None:
    model = foreign_model()
    tokens = torch.randint(20, 100, (3, 9))
    run = masked_run(model, tokens, source_positions=[0, 1, 2], names_filter="blocks.1.hook_resid_post")
    assert list(run.cache) == ["blocks.1.hook_resid_post"]


# --- every probe on every kind of model -------------------------------------------------

KINDS = ("attn_only", "no_layernorm", "rotary", "one_layer", "standard", "journal", "neurips")


@functools.cache
def kind_model(kind: str) -> HookedTransformer:
    """A tiny model of each kind: built by TransformerLens itself, or by our three architectures."""
    if kind in ("standard", "journal", "neurips"):
        config = ModelConfig(architecture=kind, n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=32)
        return build_model(config, InitConfig(gamma=0.5), seed=0).eval()
    overrides = {
        "attn_only": dict(attn_only=True),
        "no_layernorm": dict(normalization_type=None),
        "rotary": dict(positional_embedding_type="rotary", rotary_dim=8),
        "one_layer": dict(n_layers=1),
    }[kind]
    return foreign_model(**overrides)


@functools.cache
def anchor_data() -> AnchorDataset:
    return make_dataset("symmetric", "train", 12, seed=0)


@functools.cache
def grid() -> AnchorDataset:
    return input_grid(range(30, 36), [(1, 2), (2, 1), (3, 3)], seed=0)


def plain_cache(model: HookedTransformer, tokens: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens)
    return logits, dict(cache.items())


@pytest.mark.parametrize("kind", KINDS)
def test_attention_patterns_are_the_softmax_of_the_scaled_scores(kind: str) -> None:
    model = kind_model(kind)
    tokens = anchor_data().tokens
    _, cache = plain_cache(model, tokens)
    rot = "rot_" if kind == "rotary" else ""  # rotary models rotate q and k before the scores
    n_pos = tokens.shape[1]
    causal = torch.ones(n_pos, n_pos, dtype=torch.bool).tril()
    expected = []
    for layer in range(model.cfg.n_layers):
        q, k = cache[f"blocks.{layer}.attn.hook_{rot}q"], cache[f"blocks.{layer}.attn.hook_{rot}k"]
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / model.blocks[layer].attn.attn_scale
        expected.append(scores.masked_fill(~causal, float("-inf")).softmax(-1))
    patterns = attention_patterns(model, tokens)
    torch.testing.assert_close(patterns, torch.stack(expected))
    edges = information_flow(model, tokens)
    summed = edges[edges["attn_head"] == "sum"]
    mean_sum = torch.stack(expected).sum(2).mean(1).double()  # [layer, query, source]
    torch.testing.assert_close(
        torch.tensor(summed["weight"].to_numpy()),
        mean_sum[tuple(torch.tensor(summed[c].to_numpy(int)) for c in ("layer", "query", "source"))],
    )
    paths = top_paths(edges, threshold=0.0, k=3)
    assert len(paths) == 3 and all(len(p) == model.cfg.n_layers + 1 and p[-1] == n_pos - 1 for p in paths["path"])
    assert f"L{model.cfg.n_layers - 1}H{model.cfg.n_heads - 1}" in attention_html(model, tokens[0]).html()
    assert n_hooks(model) == 0


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("offset", [0, 2], ids=["mask_key", "mask_second_anchor"])
def test_masking_a_source_in_every_layer_equals_zeroing_its_value_vectors(kind: str, offset: int) -> None:
    model, data = kind_model(kind), anchor_data()
    rows, sources = torch.arange(len(data)), data.key_positions + offset

    def zero_source(v: torch.Tensor, hook) -> torch.Tensor:
        v = v.clone()
        v[rows, sources] = 0.0
        return v

    output = f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"
    store: dict[str, torch.Tensor] = {}
    hooks = [(f"blocks.{layer}.attn.hook_v", zero_source) for layer in range(model.cfg.n_layers)]
    hooks.append((output, lambda act, hook: store.setdefault("out", act.detach())))
    with torch.no_grad():
        logits = model.run_with_hooks(data.tokens, fwd_hooks=hooks)
    probe = mask_key if offset == 0 else mask_second_anchor
    run = probe(model, data)
    torch.testing.assert_close(run.logits, logits)
    torch.testing.assert_close(run.last_position(output), store["out"][:, -1])
    torch.testing.assert_close(masked_run(model, data.tokens, []).logits, plain_cache(model, data.tokens)[0])
    assert n_hooks(model) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_similarities_are_the_cosines_of_a_plain_forwards_vectors(kind: str) -> None:
    model, data = kind_model(kind), grid()
    layer = model.cfg.n_layers - 1
    _, cache = plain_cache(model, data.tokens)
    resid = f"blocks.{layer}.hook_resid_{'post' if kind == 'attn_only' else 'mid'}"  # attention-only: no MLP after attention

    def cosines(vectors: torch.Tensor) -> torch.Tensor:
        unit = torch.nn.functional.normalize(vectors.double(), dim=-1)
        return unit @ unit.T

    result = residual_similarity(model, data, layer=layer)
    assert result.name == resid
    torch.testing.assert_close(result.similarity, cosines(cache[resid][:, -1]))
    values = value_similarity(model, data, layer=layer)
    anchor = cache[f"blocks.{layer}.attn.hook_v"][torch.arange(len(data)), data.key_positions + 1]
    torch.testing.assert_close(values.similarity, cosines(anchor.flatten(1)))
    assert np.isfinite(result.score) and np.isfinite(values.score)
    assert n_hooks(model) == 0


def _merged_by_hand(model: HookedTransformer, layer: int | None, name: str) -> np.ndarray:
    if layer is None:
        return {"W_E": model.W_E, "W_U": model.W_U, "W_pos": getattr(model, "W_pos", None)}[name].detach().numpy()
    block = model.blocks[layer]
    if name in ("W_in", "W_out"):
        return getattr(block.mlp, name).detach().numpy()
    weight = getattr(block.attn, name).detach().numpy()  # [head, d_in, d_out]
    return np.concatenate(list(weight), axis=1 if name != "W_O" else 0)  # heads side by side (W_O: stacked)


@pytest.mark.parametrize("kind", KINDS)
def test_weight_ranks_spectra_and_condensation_match_numpy(kind: str) -> None:
    model = kind_model(kind)
    frame = weight_stable_ranks(model)
    per_layer = ["W_Q", "W_K", "W_V", "W_O"] + ([] if kind == "attn_only" else ["W_in", "W_out"])
    expected = ["W_E"] + ([] if kind == "rotary" else ["W_pos"]) + per_layer * model.cfg.n_layers + ["W_U"]
    assert frame["name"].tolist() == expected
    spectra = singular_value_spectra(model)
    for row in frame.itertuples():
        layer = None if pd.isna(row.layer) else int(row.layer)
        s = np.linalg.svd(_merged_by_hand(model, layer, row.name).astype(np.float64), compute_uv=False)
        assert row.stable_rank == pytest.approx(
            float((s**2).sum() / s[0] ** 2), rel=1e-5
        )  # float32 (probes.rank's tolerance)
        label = row.name if layer is None else f"L{layer} {row.name}"
        np.testing.assert_allclose(
            spectra.loc[spectra["matrix"] == label, "singular_value"].to_numpy(), s, rtol=1e-5, atol=1e-6 * s[0]
        )
    w_q = _merged_by_hand(model, 0, "W_Q").T.astype(np.float64)  # one query neuron per row
    unit = w_q / np.linalg.norm(w_q, axis=1, keepdims=True)
    result = condensation(merged_weight(model, "W_Q", 0).T)
    np.testing.assert_allclose(result.similarity, unit @ unit.T, atol=1e-12)
    assert sum(result.group_sizes) == model.cfg.n_heads * model.cfg.d_head


@pytest.mark.parametrize("kind", KINDS)
def test_embedding_pca_matches_the_covariance_eigenvalues(kind: str) -> None:
    model = kind_model(kind)
    result = embedding_pca(model, tokens=range(20, 100))
    embeddings = model.W_E.detach().double().numpy()[20:100]
    eigenvalues = np.sort(np.linalg.eigvalsh(np.cov(embeddings, rowvar=False)))[::-1]
    np.testing.assert_allclose(result.eigenvalues, eigenvalues.clip(min=0.0), atol=1e-12)
    np.testing.assert_allclose(result.coordinates[["pc1", "pc2"]].var(ddof=1).to_numpy(), eigenvalues[:2], rtol=1e-9)


ONE_LAYER_ONLY = [
    (
        "residual_similarity",
        lambda m: residual_similarity(m, grid(), layer=1),
        r"layer=1 is not a layer of this 1-layer model: use 0\.\.0",
    ),
    (
        "value_similarity",
        lambda m: value_similarity(m, grid(), layer=1),
        r"layer=1 is not a layer of this 1-layer model: use 0\.\.0",
    ),
    (
        "masked_run",
        lambda m: masked_run(m, anchor_data().tokens, 2, layers=1),
        r"layers=1 is not a layer of this 1-layer model: use 0\.\.0",
    ),
    (
        "mask_key",
        lambda m: mask_key(m, anchor_data(), layers=[0, 1]),
        r"layers=1 is not a layer of this 1-layer model: use 0\.\.0",
    ),
    (
        "merged_weight",
        lambda m: merged_weight(m, "W_Q", 1),
        r"layer must be an integer in 0\.\.0 \(or -1\.\.-1 from the end\) for W_Q, got 1",
    ),
]


@pytest.mark.parametrize(
    ("probe", "message"), [(c, msg) for _, c, msg in ONE_LAYER_ONLY], ids=[n for n, _, _ in ONE_LAYER_ONLY]
)
@pytest.mark.parametrize("architecture", ["foreign", "neurips"])
def test_asking_a_one_layer_model_for_its_second_layer_names_the_valid_range(
    probe, message: str, architecture: str
) -> None:
    if architecture == "foreign":
        model = kind_model("one_layer")
    else:
        model = build_model(
            ModelConfig(architecture="neurips", n_layers=1, d_model=16, n_heads=2, d_head=8, d_mlp=32),
            InitConfig(),
            seed=0,
        )
    with pytest.raises(ValueError, match=message):
        probe(model)
    assert n_hooks(model) == 0


def test_models_without_a_stream_between_attention_and_mlp() -> None:
    parallel = foreign_model(parallel_attn_mlp=True)
    with pytest.raises(ValueError, match=r"no blocks\.1\.hook_resid_mid.*in parallel.*activation_similarity"):
        residual_similarity(parallel, grid())
    with pytest.raises(
        ValueError, match=r"unknown hook name.*'blocks\.0\.hook_resid_p"
    ):  # suggests names the model has
        masked_run(kind_model("attn_only"), anchor_data().tokens, 2, names_filter=["blocks.0.hook_resid_mid"])


def test_mixture_of_experts_mlps_are_not_read_as_one_matrix() -> None:
    model = foreign_model(num_experts=2, experts_per_token=1)
    assert not {"W_in", "W_out"} & set(weight_stable_ranks(model)["name"])
    with pytest.raises(
        ValueError, match=r"W_in does not exist: the model's MLP is a mixture of 2 experts.*experts\[i\]\.W_in"
    ):
        merged_weight(model, "W_in", 0)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(d_vocab=50), r"token ids must lie in 0\.\.49 \(the model's vocabulary\)"),
        (dict(n_ctx=5), "exceed the model's context n_ctx=5"),
    ],
    ids=["small_vocabulary", "short_context"],
)
@pytest.mark.parametrize(
    "probe", [mask_key, mask_second_anchor, residual_similarity, value_similarity], ids=lambda f: f.__name__
)
def test_models_that_cannot_read_anchor_inputs_are_refused(overrides: dict, message: str, probe) -> None:
    with pytest.raises(ValueError, match=message):
        probe(foreign_model(**overrides), anchor_data())


def test_raw_tokens_where_an_anchor_dataset_is_needed_are_refused() -> None:
    """candidate_labelings reads each sample's target, which token ids do not hold (mask_key
    and mask_second_anchor take token ids: tests/probes/test_user_calls.py)."""
    with pytest.raises(ValueError, match="must be an AnchorDataset .*make_dataset or probes.input_grid"):
        candidate_labelings(anchor_data().tokens)


# --- integer-like arguments: accepted as their integer (negative: from the end), or refused naming the argument


def _edges() -> pd.DataFrame:
    return information_flow(kind_model("standard"), anchor_data().tokens[:3])


ACCEPTED = [
    (
        "layer numpy",
        lambda: residual_similarity(kind_model("standard"), grid(), layer=np.int64(1)).similarity,
        lambda: residual_similarity(kind_model("standard"), grid(), layer=1).similarity,
    ),
    (
        "layers 0-d array",
        lambda: masked_run(kind_model("standard"), anchor_data().tokens, 2, layers=np.array(1)).logits,
        lambda: masked_run(kind_model("standard"), anchor_data().tokens, 2, layers=1).logits,
    ),
    (
        "heads 0-d tensor",
        lambda: masked_run(kind_model("standard"), anchor_data().tokens, 2, heads=torch.tensor(0)).logits,
        lambda: masked_run(kind_model("standard"), anchor_data().tokens, 2, heads=0).logits,
    ),
    (
        "query tensor",
        lambda: top_paths(_edges(), query=torch.tensor(7))["score"],
        lambda: top_paths(_edges(), query=7)["score"],
    ),
    (
        "head numpy",
        lambda: top_paths(_edges(), head=np.int64(1))["score"],
        lambda: top_paths(_edges(), head=1)["score"],
    ),
    ("top numpy", lambda: top_paths(_edges(), k=np.int64(2))["score"], lambda: top_paths(_edges(), k=2)["score"]),
    (
        "tokens array",
        lambda: embedding_pca(kind_model("standard"), np.arange(20, 100)).eigenvalues,
        lambda: embedding_pca(kind_model("standard"), range(20, 100)).eigenvalues,
    ),
    (
        "keys tensor",
        lambda: input_grid(torch.arange(30, 33), [(1, 2)]).tokens,
        lambda: input_grid(range(30, 33), [(1, 2)]).tokens,
    ),
    (
        "pairs arrays",
        lambda: input_grid(range(30, 33), [np.array([1, 2])]).tokens,
        lambda: input_grid(range(30, 33), [(1, 2)]).tokens,
    ),
    # a negative index counts from the end, as Python's (2 layers, 2 heads, 9 positions)
    (
        "source -1",
        lambda: masked_run(kind_model("standard"), anchor_data().tokens, -1).logits,
        lambda: masked_run(kind_model("standard"), anchor_data().tokens, 8).logits,
    ),
    (
        "per-sample sources -2",
        lambda: masked_run(kind_model("standard"), anchor_data().tokens, torch.full((12,), -2)).logits,
        lambda: masked_run(kind_model("standard"), anchor_data().tokens, 7).logits,
    ),
    (
        "query, layer, head -1",
        lambda: (
            masked_run(
                kind_model("standard"), anchor_data().tokens, 2, layers=-1, heads=[-1], query_positions=-1
            ).logits
        ),
        lambda: (
            masked_run(kind_model("standard"), anchor_data().tokens, 2, layers=1, heads=[1], query_positions=8).logits
        ),
    ),
    ("paths query -1", lambda: top_paths(_edges(), query=-1)["score"], lambda: top_paths(_edges(), query=8)["score"]),
    (
        "similarity layer -2",
        lambda: value_similarity(kind_model("standard"), grid(), layer=-2).similarity,
        lambda: value_similarity(kind_model("standard"), grid(), layer=0).similarity,
    ),
    (
        "patterns layers -1",
        lambda: attention_patterns(kind_model("standard"), anchor_data().tokens, layers=[-1]),
        lambda: attention_patterns(kind_model("standard"), anchor_data().tokens, layers=[1]),
    ),
]


@pytest.mark.parametrize(("given", "plain"), [(g, p) for _, g, p in ACCEPTED], ids=[n for n, _, _ in ACCEPTED])
def test_integer_like_arguments_are_their_integer(given, plain) -> None:
    a, b = given(), plain()
    if isinstance(a, pd.Series):
        pd.testing.assert_series_equal(a, b)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


REFUSED = [
    (
        "k float",
        lambda: top_paths(_edges(), k=2.5),
        r"k \(how many paths to keep; None for all\) must be an integer >= 1, got 2\.5",
    ),
    ("k negative", lambda: top_paths(_edges(), k=-1), r"k .* must be an integer >= 1, got -1"),
    ("max_paths float", lambda: top_paths(_edges(), max_paths=1.5), "max_paths must be an integer >= 1"),
    (
        "threshold string",
        lambda: top_paths(_edges(), threshold="0.1"),
        "threshold must be a finite weight >= 0, got '0.1'",
    ),
    ("head float", lambda: top_paths(_edges(), head=0.5), "head must be a head index or 'sum', got 0.5"),
    ("n_highlight float", lambda: plot_flow(_edges(), n_highlight=2.5), "n_highlight must be an integer >= 0"),
    ("min_weight nan", lambda: plot_flow(_edges(), min_weight=float("nan")), "min_weight must be a finite number"),
    (
        "token float",
        lambda: embedding_pca(kind_model("standard"), [20.5, 30, 40]),
        "each token id must be an integer >= 0, got 20.5",
    ),
    (
        "tokens 2-D",
        lambda: embedding_pca(kind_model("standard"), torch.arange(20, 100).reshape(8, 10)),
        "each token id must be an integer",
    ),
    ("tokens repeated", lambda: embedding_pca(kind_model("standard"), [30, 30, 30]), "at least 3 distinct tokens"),
    ("key float", lambda: input_grid([30.5, 31], [(1, 2)]), "each key must be an integer >= 0, got 30.5"),
    ("anchor float", lambda: input_grid([30, 31], [(1.5, 2)]), "each anchor must be an integer >= 0, got 1.5"),
    (
        "pair of three",
        lambda: input_grid([30, 31], [(1, 2, 3)]),
        r"each anchor pair must be two anchors \(a1, a2\), got \(1, 2, 3\)",
    ),
    ("grid seed float", lambda: input_grid([30, 31], [(1, 2)], seed=1.5), "seed must be an integer >= 0, got 1.5"),
    (
        "noise float",
        lambda: input_grid([30, 31], [(1, 2)], noise=[30.5] * 9),
        "each noise token must be an integer >= 0, got 30.5",
    ),
    (
        "project seed float",
        lambda: project(torch.randn(6, 3), method="pca", seed=1.5),
        "seed must be an integer >= 0, got 1.5",
    ),
    (
        "perplexity tensor",
        lambda: project(torch.randn(6, 3), perplexity=torch.tensor(2.0)),
        "perplexity must be a finite number",
    ),
    (
        "cluster seed float",
        lambda: cluster_scores(torch.randn(6, 3), {"a": [0, 0, 1, 1, 2, 2]}, columns=None, seed=1.5),
        "seed must be an integer >= 0",
    ),
    (
        "key_position from the end",
        lambda: input_grid([30, 31], [(1, 2)], key_position=-1),
        r"key_position=-1 is not a key position \(anchors follow at \+1, \+2\): use 0\.\.6$",
    ),
    (
        "names not names",
        lambda: masked_run(kind_model("standard"), anchor_data().tokens, 2, names_filter=3),
        "names_filter must be hook names",
    ),
    (
        "masked_run without layers",
        lambda: masked_run(foreign_model(n_layers=0), torch.tensor([[1, 2, 3, 4]]), [0, 1, 2]),
        "masked_run: the model has 0 layers, so it has no attention to mask",
    ),
    (
        "attention patterns without layers",
        lambda: attention_patterns(foreign_model(n_layers=0), torch.tensor([[1, 2, 3, 4]])),
        "layers: there is no layer of this 0-layer model",
    ),
    (
        "attention_mask on the meta device",
        lambda: masked_run(
            kind_model("standard"),
            torch.tensor([[1, 2, 3, 4]]),
            1,
            attention_mask=torch.ones(1, 4, dtype=torch.long, device="meta"),
        ),
        "attention_mask is on the meta device",
    ),
    (
        "tokens on the meta device",
        lambda: masked_run(kind_model("standard"), anchor_data().tokens.to("meta"), 2),
        r"tokens are on the meta device \(a shape without data\)",
    ),
]


@pytest.mark.parametrize(("call", "message"), [(c, m) for _, c, m in REFUSED], ids=[n for n, _, _ in REFUSED])
def test_other_arguments_are_refused_naming_them(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_names_filter_none_is_every_hook_point_and_names_a_deprecated_alias() -> None:
    model, tokens = kind_model("standard"), anchor_data().tokens
    _, cache = model.run_with_cache(tokens)  # TransformerLens' names_filter=None: every hook point
    assert sorted(masked_run(model, tokens, [], names_filter=None).cache) == sorted(cache.keys())
    assert list(masked_run(model, tokens, 2).cache) == []  # the default captures nothing
    with pytest.warns(DeprecationWarning, match=r"masked_run\(names=\.\.\.\) is deprecated .* pass names_filter="):
        old = masked_run(model, tokens, 2, names=["resid_post"])
    assert sorted(old.cache) == sorted(masked_run(model, tokens, 2, names_filter="resid_post").cache)
    with pytest.warns(DeprecationWarning, match=r"names=None is names_filter=\(\)"):
        assert list(masked_run(model, tokens, 2, names=None).cache) == []  # what names=None meant
    with pytest.warns(DeprecationWarning):
        assert list(mask_key(model, anchor_data(), names=None).cache) == [
            "blocks.1.hook_resid_post"
        ]  # its default, as before
    for both in (
        lambda: masked_run(model, tokens, 2, None, None, None, False, "resid_post", names="v"),
        lambda: mask_key(model, anchor_data(), names_filter="v", names="v"),
    ):
        with pytest.raises(ValueError, match="got both names_filter= and names="):
            both()


# --- non-finite inputs ----------------------------------------------------------------------


def _with(bad: float, shape: tuple[int, int] = (6, 4)) -> torch.Tensor:
    values = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    values[1, 2] = bad
    return values


NON_FINITE = [
    ("condensation", lambda bad: condensation(_with(bad)), "in weight"),
    ("cosine_similarity_matrix", lambda bad: cosine_similarity_matrix(_with(bad)), "in vectors"),
    ("project", lambda bad: project(_with(bad), method="pca"), "in vectors"),
    ("cluster_scores", lambda bad: cluster_scores(_with(bad), {"a": [0, 0, 1, 1, 2, 2]}, columns=None), "in vectors"),
    (
        "block_score",
        lambda bad: block_score(
            _with(bad, (4, 4)), torch.eye(4, dtype=torch.bool) | torch.eye(4, dtype=torch.bool).roll(1, 0)
        ),
        "in similarity",
    ),
]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize(("call", "where"), [(c, w) for _, c, w in NON_FINITE], ids=[n for n, _, _ in NON_FINITE])
def test_non_finite_vectors_are_refused(call, where: str, bad: float) -> None:
    with pytest.raises(ValueError, match=f"NaN or infinite entries {where}"):
        call(bad)


DIVERGED = [
    ("embedding_pca", lambda m: embedding_pca(m), r"in W_E \(the token embeddings\)"),
    ("masked_run", lambda m: masked_run(m, grid().tokens, 2), "in the model's logits on these tokens"),
    ("mask_key", lambda m: mask_key(m, grid()), "in the model's logits on these tokens"),
    ("residual_similarity", lambda m: residual_similarity(m, grid()), r"in the activation blocks\.1\.hook_resid_mid"),
    ("value_similarity", lambda m: value_similarity(m, grid()), r"in the activation blocks\.1\.attn\.hook_v"),
    (
        "information_flow",
        lambda m: information_flow(m, grid().tokens),
        "in the model's last residual stream on these tokens",
    ),
    (
        "attention_html",
        lambda m: attention_html(m, grid().tokens[0]),
        "in the model's last residual stream on these tokens",
    ),
    ("weight_stable_ranks", lambda m: weight_stable_ranks(m), "NaN or infinite entries"),
    ("singular_value_spectra", lambda m: singular_value_spectra(m), "NaN or infinite entries"),
]


@pytest.mark.parametrize(("call", "message"), [(c, m) for _, c, m in DIVERGED], ids=[n for n, _, _ in DIVERGED])
def test_a_diverged_model_is_refused_not_analysed(call, message: str) -> None:
    model = foreign_model()
    with torch.no_grad():
        model.W_E[grid().tokens.unique()] = float("nan")  # every token the probes read
    with pytest.raises(ValueError, match=message):
        call(model)
    assert n_hooks(model) == 0


def test_the_doubtful_cases_decided_in_issue_56(tmp_path) -> None:
    """Decided (docs/reliability.md): a labeling with one class scores NaN (undefined), one row
    kept; ``read_paths`` of a missing file is Python's FileNotFoundError naming it."""
    import probes

    row = cluster_scores(torch.randn(6, 3), {"a": [0] * 6}, columns=None).iloc[0]
    assert row["n_labels"] == 1 and np.isnan(row["silhouette"]) and np.isnan(row["ari"])
    with pytest.raises(FileNotFoundError, match="paths.csv"):
        probes.read_paths(tmp_path / "paths.csv")
