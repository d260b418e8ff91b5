"""Every probe on a researcher's own inputs: plain tokens with their own labels and positions,
padded batches, strings, a task's samples, a bidirectional encoder, TransformerLens' names
filters and cache, circuits, and tables that survive parquet.  Each against an independent
computation (TransformerLens' own ``run_with_cache`` or hooks written here)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from helpers import n_hooks
from transformer_lens import ActivationCache, FactoredMatrix, HookedEncoder, HookedTransformer, HookedTransformerConfig

import probes
from interp_init import quiet_deprecation
from interp_init.tasks.registry import make_task
from probes.inputs import as_inputs


def decoder(**overrides) -> HookedTransformer:
    cfg = {
        "n_layers": 3,
        "d_model": 24,
        "n_heads": 3,
        "d_head": 8,
        "d_mlp": 48,
        "n_ctx": 12,
        "d_vocab": 50,
        "act_fn": "gelu",
        "seed": 0,
    }
    with quiet_deprecation():
        return HookedTransformer(HookedTransformerConfig(**{**cfg, **overrides})).eval()


def encoder() -> HookedEncoder:
    """A random BERT-shaped encoder built from a config (no download)."""
    cfg = HookedTransformerConfig(
        n_layers=2,
        d_model=24,
        n_heads=3,
        d_head=8,
        d_mlp=48,
        n_ctx=10,
        d_vocab=40,
        act_fn="gelu",
        attention_dir="bidirectional",
        seed=0,
    )
    with quiet_deprecation():
        enc = HookedEncoder(cfg).eval()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # HookedEncoder leaves its weights uninitialised: draw them here
        for name, param in enc.named_parameters():
            if ".ln" in name or name.startswith("ln") or "embed.ln" in name:
                param.fill_(1.0 if name.endswith(".w") else 0.0)
            else:
                param.copy_(0.3 * torch.randn(param.shape, generator=gen))
    return enc


@pytest.fixture(scope="module")
def model() -> HookedTransformer:
    return decoder()


@pytest.fixture(scope="module")
def tokens() -> torch.Tensor:
    return torch.randint(0, 50, (6, 12), generator=torch.Generator().manual_seed(0))


LABELS = ["a", "b", "a", "c", "b", "a"]


def cosines(vectors: torch.Tensor) -> torch.Tensor:
    vectors = vectors.double()
    return F.cosine_similarity(vectors[:, None], vectors[None], dim=-1)


# --- plain tokens with the user's labels and positions ---------------------------------------


def test_similarities_on_plain_tokens_with_user_labels_and_positions(model, tokens):
    _, cache = model.run_with_cache(tokens)
    residual = probes.residual_similarity(model, tokens, LABELS)  # default: the model's last layer, the last position
    torch.testing.assert_close(residual.similarity, cosines(cache["resid_mid", 2][:, -1]), atol=1e-6, rtol=1e-6)
    same = torch.tensor([[x == y for y in LABELS] for x in LABELS])
    assert torch.equal(residual.equal_target, same) and residual.name == "blocks.2.hook_resid_mid"
    off = ~torch.eye(6, dtype=torch.bool)
    assert residual.score == pytest.approx(
        float(residual.similarity[same & off].mean() - residual.similarity[~same & off].mean())
    )
    positions = torch.tensor([3, 4, 5, 6, 7, 8])
    value = probes.value_similarity(model, tokens, LABELS, layer=1, position=positions)
    v = cache["v", 1][torch.arange(6), positions].reshape(6, -1)
    torch.testing.assert_close(value.similarity, cosines(v), atol=1e-6, rtol=1e-6)
    assert value.inputs["label"].tolist() == LABELS and value.inputs["position"].tolist() == positions.tolist()
    own = probes.activation_similarity(model, tokens, ("mlp_out", 0), labels=LABELS, position=2)
    torch.testing.assert_close(own.similarity, cosines(cache["mlp_out", 0][:, 2]), atol=1e-6, rtol=1e-6)
    assert np.isnan(probes.residual_similarity(model, tokens).score)  # no labels: no equal cells, no score
    assert probes.plot_similarity(own).data and n_hooks(model) == 0


def test_a_similarity_probe_stops_at_the_layer_it_reads(model, tokens):
    ran = []
    with model.hooks(
        fwd_hooks=[
            (f"blocks.{layer}.hook_resid_post", lambda a, hook, layer=layer: ran.append(layer)) for layer in range(3)
        ]
    ):
        probes.residual_similarity(model, tokens, LABELS, layer=0)
    assert ran == []  # stopped at blocks.0.hook_resid_mid, before any block's output
    assert n_hooks(model) == 0


def test_masking_on_plain_tokens_any_batch(model, tokens):
    for batch in (2, 6):  # a flat list: the same sources in every sample, at any batch size
        run = probes.masked_run(model, tokens[:batch], [2, 3], names_filter=["resid_post"])
        assert run.mask[:, :, [2, 3]].any() and not run.mask[:, :, [0, 1, 4]].any()
        zero_v = [
            (f"blocks.{l}.attn.hook_v", lambda v, hook: v.index_fill(1, torch.tensor([2, 3]), 0.0)) for l in range(3)
        ]
        with (
            torch.no_grad(),
            model.hooks(fwd_hooks=zero_v),
        ):  # independent: hiding a source everywhere = zeroing its values
            expected = model(tokens[:batch])
        torch.testing.assert_close(run.logits, expected, atol=1e-5, rtol=1e-5)
    assert n_hooks(model) == 0


def test_a_padded_batch_reads_its_attention_mask(model):
    gen = torch.Generator().manual_seed(3)
    tokens = torch.randint(1, 50, (3, 12), generator=gen)
    mask = torch.ones(3, 12, dtype=torch.long)
    mask[1, 8:] = 0
    mask[2, 5:] = 0
    with torch.no_grad():
        expected = model(tokens, attention_mask=mask)
        _, cache = model.run_with_cache(tokens, attention_mask=mask)
    run = probes.masked_run(model, tokens, [], attention_mask=mask)
    torch.testing.assert_close(run.logits, expected)
    residual = probes.residual_similarity(
        model, tokens, [0, 1, 0], attention_mask=mask
    )  # "last": each sample's last real token
    torch.testing.assert_close(
        residual.similarity,
        cosines(cache["resid_mid", 2][torch.arange(3), torch.tensor([11, 7, 4])]),
        atol=1e-6,
        rtol=1e-6,
    )
    edges = probes.information_flow(model, tokens, attention_mask=mask)
    row = edges[
        (edges["layer"] == 1) & (edges["attn_head"] == "sum") & (edges["query"] == 6) & (edges["source"] == 2)
    ].iloc[0]
    summed = (
        cache["pattern", 1].sum(1)[:2, 6, 2].double()
    )  # only samples 0 and 1 have query 6 and source 2 as real tokens
    assert row["weight"] == pytest.approx(float(summed.mean()), abs=1e-6) and row["std"] == pytest.approx(
        float(summed.std(correction=0)), abs=1e-6
    )
    patterns = probes.attention_patterns(model, tokens, attention_mask=mask, layers=[1])
    torch.testing.assert_close(patterns[0], cache["pattern", 1])


def test_strings_where_the_model_has_a_tokenizer(tmp_path):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<bos>", "the", "cat", "sat", "on", "mat", "a", "dog"]
    word_level = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="<pad>"))
    word_level.pre_tokenizer = Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=word_level, pad_token="<pad>", bos_token="<bos>", eos_token="<bos>", unk_token="<pad>"
    ).save_pretrained(tmp_path)
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=16, n_heads=2, d_head=8, n_ctx=12, d_vocab=len(words), act_fn="gelu", seed=0
    )
    with quiet_deprecation():
        model = HookedTransformer(cfg, tokenizer=PreTrainedTokenizerFast.from_pretrained(tmp_path)).eval()
    texts = ["the cat sat on the mat", "a dog sat", "the dog sat on a mat"]
    inputs = as_inputs(texts, model)
    assert inputs.tokens[1].tolist()[:4] == [1, 7, 8, 4] and inputs.position("last").tolist() == [6, 3, 6]
    with torch.no_grad():
        expected = model(inputs.tokens, attention_mask=inputs.attention_mask)
    torch.testing.assert_close(probes.masked_run(model, texts, []).logits, expected)
    result = probes.residual_similarity(model, texts, ["cat", "dog", "dog"])
    assert result.similarity.shape == (3, 3) and int(result.equal_target.sum()) == 5
    with pytest.raises(ValueError, match="tokenizer"):
        probes.masked_run(decoder(), ["no tokenizer"], 0)


def test_a_tasks_samples_are_adapters(model):
    task = make_task("addition")
    samples = task.make_split("train", 10, seed=0)
    small = decoder(d_vocab=task.highest_token() + 1, n_ctx=samples.tokens.shape[1])
    result = probes.residual_similarity(small, samples, "target")
    _, cache = small.run_with_cache(samples.tokens)
    torch.testing.assert_close(result.similarity, cosines(cache["resid_mid", 2][:, -1]), atol=1e-6, rtol=1e-6)
    assert torch.equal(result.equal_target, probes.equal_mask(samples.targets.tolist()))
    grid = probes.input_grid(range(30, 36), [(3, 3), (2, 2)], seed=0)
    anchor = decoder(d_vocab=201, n_ctx=9)
    key = probes.mask_key(anchor, grid)
    torch.testing.assert_close(key.logits, probes.masked_run(anchor, grid.tokens, grid.key_positions).logits)


# --- bidirectional attention -------------------------------------------------------------------


def test_masking_on_an_encoder_hides_the_source_from_every_query():
    enc = encoder()
    tokens = torch.randint(0, 40, (3, 8), generator=torch.Generator().manual_seed(1))
    run = probes.masked_run(enc, tokens, 5)
    assert bool(run.mask[:, :, 5].all())  # queries before position 5 too
    zero_v = [(f"blocks.{l}.attn.hook_v", lambda v, hook: v.index_fill(1, torch.tensor([5]), 0.0)) for l in range(2)]
    with torch.no_grad(), enc.hooks(fwd_hooks=zero_v):
        expected = enc(tokens)
    torch.testing.assert_close(run.logits, expected, atol=1e-5, rtol=1e-5)
    assert n_hooks(enc) == 0


def test_an_uninitialized_encoder_is_refused_by_every_forward_probe():
    """TransformerLens 3.9 leaves a new HookedEncoder's weights as torch.empty left them: here NaN."""
    enc = encoder()
    with torch.no_grad():
        for param in enc.parameters():
            param.fill_(float("nan"))
    tokens = torch.randint(0, 40, (3, 8), generator=torch.Generator().manual_seed(1))
    for call in (
        lambda: probes.masked_run(enc, tokens, 5),
        lambda: probes.information_flow(enc, tokens),
        lambda: probes.attention_patterns(enc, tokens),
    ):
        with pytest.raises(ValueError, match="NaN or infinite entries in the model's"):
            call()
    assert n_hooks(enc) == 0


def test_flow_on_an_encoder_keeps_every_pair():
    enc = encoder()
    tokens = torch.randint(0, 40, (4, 8), generator=torch.Generator().manual_seed(2))
    edges = probes.information_flow(enc, tokens)
    _, cache = enc.run_with_cache(tokens)
    assert len(edges) == 2 * 4 * 8 * 8  # layers x (heads + sum) x every (query, source)
    query0 = edges[(edges["layer"] == 0) & (edges["attn_head"] == "0") & (edges["query"] == 0)]
    assert query0["weight"].sum() == pytest.approx(1.0) and query0[query0["source"] > 0]["weight"].sum() > 0.5
    np.testing.assert_allclose(
        query0.sort_values("source")["weight"], cache["pattern", 0][:, 0, 0].double().mean(0).numpy(), atol=1e-6
    )
    paths = probes.top_paths(edges, threshold=0.0, query=0, k=3)
    assert len(paths) == 3 and all(p[-1] == 0 for p in paths["path"]) and any(p[0] > 0 for p in paths["path"])
    view = probes.attention_html(enc, tokens[0])
    assert view.props["maskUpperTri"] is False


# --- missing labels --------------------------------------------------------------------------


@pytest.mark.parametrize("missing", [None, float("nan"), pd.NA], ids=["None", "NaN", "NA"])
def test_missing_labels_are_refused_by_every_probe_that_reads_labels(model, tokens, missing):
    labels = ["a", missing, "a", "c", missing, "a"]
    frame = pd.DataFrame({"topic": labels})
    vectors = torch.randn(6, 5, generator=torch.Generator().manual_seed(0))
    calls = [
        (lambda: probes.residual_similarity(model, tokens, labels), "labels has 2 missing value"),
        (lambda: probes.value_similarity(model, tokens, labels, position=3), "labels has 2 missing value"),
        (
            lambda: probes.activation_similarity(
                model, as_inputs(tokens, labels=frame), ("resid_post", 0), labels="topic"
            ),
            "label column 'topic' has 2 missing value",
        ),
        (lambda: probes.equal_mask(labels), "labels has 2 missing value"),
        (
            lambda: probes.cluster_scores(vectors, frame, columns=["topic"]),
            "labelings column 'topic' has 2 missing value",
        ),
        (
            lambda: probes.plot_projection(probes.project(vectors, "pca", labels=frame), color="topic"),
            "the color column 'topic' has 2 missing value",
        ),
    ]
    for call, where in calls:
        with pytest.raises(
            ValueError,
            match=rf"^{where}\(s\) \(None, NaN or NA\) among 6 samples: a missing label is not a label; give those samples one or leave them out$",
        ):
            call()
    with pytest.raises(ValueError, match="labels has 1 missing"):
        probes.residual_similarity(
            model, tokens, torch.tensor([0.0, 1.0, float("nan"), 1.0, 0.0, 1.0])
        )  # a float tensor's NaN
    assert probes.cluster_scores(vectors, frame.fillna("b"), columns=["topic"])["n_labels"].tolist() == [
        3
    ]  # labelled, it counts


# --- TransformerLens' conventions -------------------------------------------------------------


def test_names_filters_and_the_cache_as_transformerlens_takes_them(model, tokens):
    _, expected = model.run_with_cache(tokens)
    everything = probes.masked_run(model, tokens, [], names_filter=lambda name: True)
    assert isinstance(everything.cache, ActivationCache) and sorted(everything.cache) == sorted(expected.keys())
    torch.testing.assert_close(everything.cache["resid_post", 1], expected["resid_post", 1])
    torch.testing.assert_close(everything.cache.accumulated_resid(), expected.accumulated_resid())
    torch.testing.assert_close(everything.cache.decompose_resid(), expected.decompose_resid())
    short = probes.masked_run(model, tokens, [], names_filter=["resid_post", ("pattern", 0)])
    assert sorted(short.cache) == [
        "blocks.0.attn.hook_pattern",
        "blocks.0.hook_resid_post",
        "blocks.1.hook_resid_post",
        "blocks.2.hook_resid_post",
    ]
    assert list(probes.masked_run(model, tokens, [], names_filter=("v", -1)).cache) == ["blocks.2.attn.hook_v"]
    with pytest.raises(ValueError, match="unknown hook name"):
        probes.masked_run(model, tokens, [], names_filter=["no_such_thing"])
    with pytest.raises(ValueError, match="one hook point"):
        probes.activation_similarity(model, tokens, "resid_post")


def test_ov_and_qk_circuits_per_head(model):
    table = probes.circuit_stable_ranks(model)
    assert len(table) == 2 * 3 * 3 and table["circuit"].tolist()[:1] == ["OV"]
    for layer, head, kind in itertools.product(range(3), range(3), ("OV", "QK")):
        attn = model.blocks[layer].attn
        dense = attn.W_V[head] @ attn.W_O[head] if kind == "OV" else attn.W_Q[head] @ attn.W_K[head].T
        s = np.linalg.svd(dense.detach().double().numpy(), compute_uv=False)
        row = table[(table["layer"] == layer) & (table["head"] == head) & (table["circuit"] == kind)].iloc[0]
        assert row["stable_rank"] == pytest.approx(float((s**2).sum() / s[0] ** 2), rel=1e-4)
        assert row["spectral_norm"] == pytest.approx(s[0], rel=1e-5)
    ov = probes.head_circuits(model, "OV")
    assert isinstance(ov, FactoredMatrix) and ov.shape == (3, 3, 24, 24)
    torch.testing.assert_close(ov[1, 2].AB, model.blocks[1].attn.W_V[2] @ model.blocks[1].attn.W_O[2])
    with pytest.raises(ValueError, match="'OV' or 'QK'"):
        probes.head_circuits(model, "VO")


def test_every_table_survives_parquet(model, tokens, tmp_path):
    edges = probes.information_flow(model, tokens)
    masked = probes.masked_run(model, tokens, 2, names_filter=["resid_post"])
    grid = probes.input_grid(range(30, 41), [(3, 3), (2, 2), (1, 2)], seed=0)
    similarity = probes.residual_similarity(model, tokens, LABELS)
    vectors = masked.last_position("blocks.2.hook_resid_post")
    tables = {
        "information_flow": edges,
        "top_paths": probes.top_paths(edges, threshold=0.0, k=5),
        "weight_stable_ranks": probes.weight_stable_ranks(model),
        "circuit_stable_ranks": probes.circuit_stable_ranks(model),
        "singular_value_spectra": probes.singular_value_spectra(model),
        "candidate_labelings": probes.candidate_labelings(grid),
        "project": probes.project(vectors, "pca", labels=pd.DataFrame({"label": LABELS})),
        "cluster_scores": probes.cluster_scores(vectors, {"label": LABELS}, columns=None),
        "MaskedRun": masked.table(),
        "SimilarityResult": similarity.table(),
        "SimilarityResult.inputs": similarity.inputs,
        "Condensation": probes.condensation(probes.merged_weight(model, "W_Q", 0).T).table(),
        "EmbeddingPCA": probes.embedding_pca(model).table(),
        "EmbeddingPCA.coordinates": probes.embedding_pca(model).coordinates,
    }
    for name, frame in tables.items():
        for column in frame.columns:
            kinds = {type(v) for v in frame[column] if v is not pd.NA and not (np.isscalar(v) and pd.isna(v))}
            assert len(kinds) <= 1, (name, column, kinds)
        path = tmp_path / f"{name}.parquet"
        frame.to_parquet(path)
        back = pd.read_parquet(path)
        if (
            name == "top_paths"
        ):  # its reader gives the tuples back (test_top_paths_come_back_as_tuples_from_parquet_and_csv)
            back = probes.read_paths(path)
        listed = [c for c in frame.columns if len(frame) and isinstance(frame[c].iloc[0], (tuple, list))]
        for column in listed:  # a table for display: its shape tuples come back as arrays
            kind = type(frame[column].iloc[0])
            back[column] = [kind(v.tolist()) if isinstance(v, np.ndarray) else v for v in back[column]]
        pd.testing.assert_frame_equal(back, frame, check_dtype=False, obj=name)


def test_top_paths_come_back_as_tuples_from_parquet_and_csv(model, tokens, tmp_path):
    paths = probes.top_paths(probes.information_flow(model, tokens), threshold=0.0, k=5)
    assert all(type(p) is tuple and type(p[0]) is int for p in paths["path"]) and all(
        type(w[0]) is float for w in paths["weights"]
    )
    paths.to_parquet(tmp_path / "paths.parquet")
    paths.to_csv(tmp_path / "paths.csv", index=False)
    assert isinstance(
        pd.read_parquet(tmp_path / "paths.parquet")["path"].iloc[0], np.ndarray
    )  # what parquet alone gives
    for back in (
        probes.read_paths(tmp_path / "paths.parquet"),
        probes.read_paths(tmp_path / "paths.csv"),
        probes.read_paths(pd.read_parquet(tmp_path / "paths.parquet")),
    ):
        pd.testing.assert_frame_equal(back, paths, check_exact=False, rtol=1e-15)
        assert all(type(p) is tuple for p in back["path"]) and back["path"].tolist() == paths["path"].tolist()
    one_layer = probes.top_paths(probes.information_flow(decoder(n_layers=1), tokens), threshold=0.0, k=2)
    one_layer.to_csv(tmp_path / "one.csv", index=False)  # a 1-layer model's weights: one-element tuples, "(0.5,)"
    pd.testing.assert_frame_equal(probes.read_paths(tmp_path / "one.csv"), one_layer)
    with pytest.raises(ValueError, match=r"read_paths reads a \.parquet or \.csv file"):
        probes.read_paths(tmp_path / "paths.json")


# --- scale --------------------------------------------------------------------------------------


def _random_edges(n_layers: int, n_pos: int, seed: int) -> pd.DataFrame:
    gen = np.random.default_rng(seed)
    rows = []
    for layer in range(n_layers):
        weights = np.tril(gen.random((n_pos, n_pos)) ** 4)
        weights /= weights.sum(1, keepdims=True)
        rows += [
            {"layer": layer, "attn_head": "sum", "source": k, "query": q, "weight": weights[q, k], "std": 0.0}
            for q in range(n_pos)
            for k in range(q + 1)
        ]
    return pd.DataFrame(rows)


def test_top_paths_best_k_equals_every_path_ranked():
    edges = _random_edges(4, 7, seed=0)
    every = probes.top_paths(edges, threshold=0.0, k=None)
    best = probes.top_paths(edges, threshold=0.0, k=12)
    pd.testing.assert_frame_equal(best, every.head(12))
    assert (
        probes.top_paths(edges, threshold=0.2, k=5)["score"].tolist()
        == probes.top_paths(edges, threshold=0.2, k=None)["score"].head(5).tolist()
    )


def test_top_paths_on_twelve_layers():
    edges = _random_edges(12, 24, seed=1)
    paths = probes.top_paths(edges, threshold=0.0, k=10)
    assert len(paths) == 10 and all(len(p) == 13 and p[-1] == 23 for p in paths["path"])
    assert paths["score"].is_monotonic_decreasing
    with pytest.raises(ValueError, match="k=<n>"):
        probes.top_paths(edges, threshold=0.0, k=None)


def test_views_stay_small():
    weight = torch.eye(40)[torch.arange(300) % 40] + 0.01 * torch.randn(
        300, 40, generator=torch.Generator().manual_seed(0)
    )
    figure = probes.plot_condensation(probes.condensation(weight))
    assert len(figure.data) == 2  # the heatmap and one trace of 40 squares
    model = decoder(n_ctx=12)
    tokens = torch.randint(0, 50, (12,), generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        view = probes.attention_html(model, tokens, max_weights=4 * 144)
    assert view.props["attentionHeadNames"] == ["L0H0", "L0H1", "L0H2", "L1H0"]
    assert any("first 4 of 9 heads" in str(w.message) for w in caught)
    assert probes.attention_html(model, tokens, layers=2, heads=[1]).props["attentionHeadNames"] == ["L2H1"]
