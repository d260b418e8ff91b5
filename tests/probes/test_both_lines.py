"""Every probe on the TransformerLens line that is installed, against a hand-written forward pass.

The default suite runs this file on TransformerLens 3.x (a ``HookedTransformer`` built by
TransformerLens itself); ``.ci/run`` runs it again in ``.venv-tl4`` (transformer-lens 4.3)
on a ``TransformerBridge.boot_native`` model, where the old hook names are aliases and a
hook reports its new name.  The reference is a pre-LN transformer written out here in plain
torch from the model's weights; its logits must equal the model's, so the weights it reads
are the ones the model runs.  TransformerLens' classes are imported only inside ``build``;
nothing of ``training`` and not ``tests/helpers.py`` (both need 3.x).
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import probes
from interp_init.tasks.data import make_dataset

#: 4 on the 4.x line (TransformerBridge, no HookedTransformer), 3 on the 3.x line.
LINE = int(version("transformer-lens").split(".")[0])
DOCS = Path(__file__).resolve().parents[2] / "docs" / "probes.md"
SHAPE = dict(
    n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=32, n_ctx=9, d_vocab=201, act_fn="relu", normalization_type="LN"
)


def build(**overrides) -> torch.nn.Module:
    """A random 2-layer pre-LN model of the installed line (a 3.x HookedTransformer or a 4.x boot_native bridge)."""
    kwargs = {**SHAPE, **overrides}
    if LINE == 4:
        from transformer_lens import TransformerBridge, TransformerBridgeConfig

        model = TransformerBridge.boot_native(TransformerBridgeConfig(**kwargs, seed=0))
    else:
        from transformer_lens import HookedTransformer, HookedTransformerConfig

        from interp_init import quiet_deprecation

        with quiet_deprecation():
            model = HookedTransformer(HookedTransformerConfig(**kwargs, seed=0))
    return model.eval()


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    return build()


@pytest.fixture(scope="module")
def tokens() -> torch.Tensor:
    return torch.randint(20, 100, (5, 9), generator=torch.Generator().manual_seed(1))


def n_hooks(model) -> int:
    points = {id(hp): hp for hp in model.hook_dict.values()}.values()
    return sum(len(getattr(hp, "fwd_hooks", [])) + len(hp._forward_hooks) for hp in points)


def layer_norm(x: torch.Tensor, ln, eps: float) -> torch.Tensor:
    x = x - x.mean(-1, keepdim=True)
    return x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt() * ln.w + ln.b


def hand_forward(
    model, tokens: torch.Tensor, hide: torch.Tensor | None = None, renormalize: bool = False
) -> dict[str, torch.Tensor]:
    """The model's forward pass written out: every activation by its (3.x) name, and the logits.

    ``hide`` ``[batch, query, source]`` zeroes those attention weights after the softmax in
    every layer and head (then rescales the rows to sum to 1 if ``renormalize``; a row with
    nothing left stays 0)."""
    cfg, eps = model.cfg, getattr(model.cfg, "eps", 1e-5)
    n_pos = tokens.shape[1]
    with torch.no_grad():
        x = model.W_E[tokens] + model.W_pos[:n_pos]
        out: dict[str, torch.Tensor] = {}
        causal = torch.ones(n_pos, n_pos, dtype=torch.bool).tril()
        for layer, block in enumerate(model.blocks):
            attn = block.attn
            h = layer_norm(x, block.ln1, eps)
            q = torch.einsum("bpd,hde->bphe", h, attn.W_Q) + attn.b_Q
            k = torch.einsum("bpd,hde->bphe", h, attn.W_K) + attn.b_K
            v = torch.einsum("bpd,hde->bphe", h, attn.W_V) + attn.b_V
            scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(cfg.d_head)
            pattern = scores.masked_fill(~causal, float("-inf")).softmax(-1)
            if hide is not None:
                pattern = pattern.masked_fill(hide[:, None], 0.0)
                if renormalize:  # a row left with nothing to attend to stays 0
                    total = pattern.sum(-1, keepdim=True)
                    pattern = torch.where(total > 0, pattern / total.clamp_min(1e-30), pattern)
            z = torch.einsum("bhqk,bkhe->bqhe", pattern, v)
            x = x + torch.einsum("bqhe,hed->bqd", z, attn.W_O) + attn.b_O
            out[f"blocks.{layer}.attn.hook_pattern"], out[f"blocks.{layer}.attn.hook_v"] = pattern, v
            out[f"blocks.{layer}.hook_resid_mid"] = x
            h = layer_norm(x, block.ln2, eps)
            x = x + torch.relu(h @ block.mlp.W_in + block.mlp.b_in) @ block.mlp.W_out + block.mlp.b_out
            out[f"blocks.{layer}.hook_resid_post"] = x
        out["logits"] = layer_norm(x, model.ln_final, eps) @ model.W_U + model.b_U
    return out


def cosines(vectors: torch.Tensor) -> torch.Tensor:
    vectors = vectors.double()
    return F.cosine_similarity(vectors[:, None], vectors[None], dim=-1)


def hide_at(positions: torch.Tensor, n_pos: int = 9) -> torch.Tensor:
    """``[batch, query, source]``: each sample's source ``positions[i]`` hidden from every query."""
    return F.one_hot(positions, n_pos).bool()[:, None, :].expand(-1, n_pos, -1)


def test_the_hand_forward_is_the_models_forward(model, tokens):
    with torch.no_grad():
        torch.testing.assert_close(
            hand_forward(model, tokens)["logits"], model(tokens, return_type="logits"), atol=1e-4, rtol=1e-4
        )


def test_attention_patterns_and_information_flow(model, tokens):
    hand = hand_forward(model, tokens)
    patterns = probes.attention_patterns(model, tokens)
    for layer in range(2):
        torch.testing.assert_close(patterns[layer], hand[f"blocks.{layer}.attn.hook_pattern"], atol=1e-5, rtol=1e-5)
    edges = probes.information_flow(model, tokens)
    summed = hand["blocks.1.attn.hook_pattern"].double().sum(1)  # [batch, q, k], heads summed
    row = edges[
        (edges["layer"] == 1)
        & (edges["attn_head"].astype(str) == "sum")
        & (edges["query"] == 8)
        & (edges["source"] == 3)
    ].iloc[0]
    assert row["weight"] == pytest.approx(float(summed[:, 8, 3].mean()), abs=1e-5)
    assert row["std"] == pytest.approx(float(summed[:, 8, 3].std(correction=0)), abs=1e-5)
    assert probes.top_paths(edges, threshold=0.0, k=1)["path"].iloc[0][-1] == 8
    assert n_hooks(model) == 0


@pytest.mark.parametrize("renormalize", [False, True])
def test_masked_run_equals_the_hand_forward_with_the_weights_zeroed(model, tokens, renormalize):
    sources = torch.tensor([0, 3, 5, 8, 2])
    run = probes.masked_run(model, tokens, sources, renormalize=renormalize, names_filter=["blocks.1.hook_resid_post"])
    hand = hand_forward(model, tokens, hide_at(sources), renormalize=renormalize)
    torch.testing.assert_close(run.logits, hand["logits"], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(
        run.cache["blocks.1.hook_resid_post"], hand["blocks.1.hook_resid_post"], atol=1e-4, rtol=1e-4
    )
    assert float((run.logits - hand_forward(model, tokens)["logits"]).abs().max()) > 1e-3  # the mask did something
    assert n_hooks(model) == 0


def test_mask_key_and_second_anchor_capture_under_the_names_asked_for(model):
    data = make_dataset("symmetric", "train", n=12, seed=0)
    key = probes.mask_key(model, data)
    assert list(key.cache) == ["blocks.1.hook_resid_post"]
    hand = hand_forward(model, data.tokens, hide_at(data.key_positions))
    torch.testing.assert_close(
        key.last_position("blocks.1.hook_resid_post"), hand["blocks.1.hook_resid_post"][:, -1], atol=1e-4, rtol=1e-4
    )
    names = ["blocks.1.hook_resid_mid", "blocks.0.attn.hook_pattern"]
    second = probes.mask_second_anchor(model, data, names_filter=names)
    assert sorted(second.cache) == sorted(names)
    hand = hand_forward(model, data.tokens, hide_at(data.key_positions + 2))
    for name in names:
        torch.testing.assert_close(second.cache[name], hand[name], atol=1e-4, rtol=1e-4)


def test_similarities_are_cosines_of_the_hand_vectors(model):
    grid = probes.input_grid(range(30, 41), [(3, 3), (2, 2), (1, 2)], seed=0)
    hand = hand_forward(model, grid.tokens)
    residual = probes.residual_similarity(model, grid)
    torch.testing.assert_close(
        residual.similarity, cosines(hand["blocks.1.hook_resid_mid"][:, -1]), atol=1e-6, rtol=1e-6
    )
    assert residual.name == "blocks.1.hook_resid_mid" and not math.isnan(residual.score)
    grid = probes.input_grid(range(30, 40), [(a, 1) for a in (1, 2, 3, 4)], key_position=1, seed=0)
    value = probes.value_similarity(model, grid)
    v = hand_forward(model, grid.tokens)["blocks.1.attn.hook_v"][:, 2].reshape(len(grid), -1)  # first anchor at 1 + 1
    torch.testing.assert_close(value.similarity, cosines(v), atol=1e-6, rtol=1e-6)


def test_weights_ranks_spectra_and_condensation_match_numpy(model):
    w_q = np.concatenate(
        [model.blocks[0].attn.W_Q.detach().numpy()[h] for h in range(2)], axis=1
    )  # [d_model, heads * d_head]
    s = np.linalg.svd(w_q.astype(np.float64), compute_uv=False)
    np.testing.assert_allclose(probes.merged_weight(model, "W_Q", 0).numpy(), w_q)
    assert probes.stable_rank(probes.merged_weight(model, "W_Q", 0)) == pytest.approx(
        float((s**2).sum() / s[0] ** 2), rel=1e-5
    )  # float32
    table = probes.weight_stable_ranks(model)
    assert len(table) == 3 + 2 * 6  # W_E, W_pos, W_U and six per layer
    row = table[(table["name"] == "W_Q") & (table["layer"] == 0)].iloc[0]
    assert row["stable_rank"] == pytest.approx(float((s**2).sum() / s[0] ** 2), rel=1e-5) and row[
        "spectral_norm"
    ] == pytest.approx(s[0], rel=1e-5)
    spectra = probes.singular_value_spectra(model)
    np.testing.assert_allclose(
        spectra[spectra["matrix"] == "L0 W_Q"]["singular_value"].to_numpy(), s, rtol=0, atol=1e-5 * s[0]
    )
    units = w_q.T.astype(np.float64) / np.linalg.norm(w_q.T.astype(np.float64), axis=1, keepdims=True)
    np.testing.assert_allclose(
        probes.condensation(probes.merged_weight(model, "W_Q", 0).T).similarity, units @ units.T, atol=1e-10
    )
    w_in = model.blocks[1].mlp.W_in.detach().numpy()
    np.testing.assert_allclose(probes.merged_weight(model, "W_in", 1).numpy(), w_in)


def test_embedding_pca_matches_the_covariance(model):
    result = probes.embedding_pca(model, tokens=range(20, 100))
    emb = model.W_E.detach().numpy()[20:100].astype(np.float64)
    np.testing.assert_allclose(
        result.eigenvalues, np.sort(np.linalg.eigvalsh(np.cov(emb, rowvar=False)))[::-1].clip(0), rtol=1e-8, atol=1e-12
    )


def test_attention_view(model, tokens, tmp_path):
    view = probes.attention_html(model, tokens[0], tmp_path / "a.html")
    hand = hand_forward(model, tokens[:1])
    expected = torch.cat([hand[f"blocks.{layer}.attn.hook_pattern"][0] for layer in range(2)])  # [layer * head, q, k]
    np.testing.assert_allclose(view.props["attention"], expected.numpy(), atol=5e-5)  # the page rounds to 4 decimals
    page = (tmp_path / "a.html").read_text(encoding="utf-8")
    assert "L1H1" in page and page.count("data-circuitsvis-bundle") == 1
    assert n_hooks(model) == 0


def test_captures_are_keyed_by_the_name_asked_for_not_the_name_a_hook_reports(tokens):
    """On 4.x ``blocks.1.hook_resid_post`` is an alias whose hook reports ``blocks.1.hook_out``;
    on 3.x the hook points are renamed here to the same effect."""
    model = build()
    asked = ["blocks.1.hook_resid_post", "blocks.0.hook_resid_mid", "blocks.1.attn.hook_v"]
    reported = {}

    def note(activation, hook, name):
        reported[name] = hook.name

    if LINE == 3:
        for name in asked:
            model.hook_dict[name].name = "renamed." + name
    with torch.no_grad(), model.hooks(fwd_hooks=[(n, lambda a, hook, n=n: note(a, hook, n)) for n in asked]):
        model(tokens, return_type="logits")
    assert (
        reported["blocks.1.hook_resid_post"] != "blocks.1.hook_resid_post"
    )  # what a hook.name-keyed capture would file it under
    run = probes.masked_run(model, tokens, 2, names_filter=asked)
    assert sorted(run.cache) == sorted(asked)
    hand = hand_forward(model, tokens, hide_at(torch.full((5,), 2)))
    for name in asked:
        torch.testing.assert_close(run.cache[name], hand[name], atol=1e-4, rtol=1e-4)
    data = make_dataset("symmetric", "train", n=6, seed=0)
    assert probes.mask_key(model, data).last_position("blocks.1.hook_resid_post").shape == (6, 16)
    assert probes.residual_similarity(
        model, probes.input_grid(range(30, 36), [(3, 3), (2, 2)], seed=0)
    ).similarity.shape == (12, 12)
    assert probes.value_similarity(
        model, probes.input_grid(range(30, 36), [(3, 3), (2, 2)], seed=0)
    ).similarity.shape == (12, 12)


def _one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message and message
    return message


def test_a_missing_hook_point_is_one_line_naming_it(tokens, monkeypatch):
    model = build()
    kept = {
        name: point
        for name, point in model.hook_dict.items()
        if not name.endswith(("hook_pattern", "hook_v", "hook_resid_mid"))
    }
    if isinstance(getattr(type(model), "hook_dict", None), property):  # 4.x: computed from the modules
        monkeypatch.setattr(type(model), "hook_dict", property(lambda self: kept))
    else:
        monkeypatch.setattr(model, "hook_dict", kept)
    data = make_dataset("symmetric", "train", n=6, seed=0)
    grid = probes.input_grid(range(30, 36), [(3, 3), (2, 2)], seed=0)
    for call, missing in [
        (lambda: probes.masked_run(model, tokens, 2), "blocks.0.attn.hook_pattern"),
        (lambda: probes.mask_key(model, data), "blocks.0.attn.hook_pattern"),
        (lambda: probes.information_flow(model, tokens), "blocks.0.attn.hook_pattern"),
        (lambda: probes.residual_similarity(model, grid), "blocks.1.hook_resid_mid"),
        (lambda: probes.value_similarity(model, grid), "blocks.1.attn.hook_v"),
    ]:
        with pytest.raises(ValueError) as error:
            call()
        assert missing in _one_line(error)


def test_a_hook_point_that_never_runs_is_one_line_not_a_silent_unmasked_run(tokens):
    """A hook point listed by the model but never called in its forward pass (here replaced
    by an identity; on 4.x an adapter whose attention forms no explicit pattern)."""
    model = build()
    model.blocks[0].attn.hook_pattern = torch.nn.Identity()
    data = make_dataset("symmetric", "train", n=6, seed=0)
    for call in (
        lambda: probes.masked_run(model, tokens, 2),
        lambda: probes.mask_key(model, data, layers=0),
        lambda: probes.masked_run(model, tokens, 2, layers=1, names_filter=["blocks.0.attn.hook_pattern"]),
        lambda: probes.information_flow(model, tokens),
    ):
        with pytest.raises(ValueError) as error:
            call()
        assert "blocks.0.attn.hook_pattern" in _one_line(error)
    assert probes.masked_run(model, tokens, 2, layers=1).logits.shape == (5, 9, 201)  # layer 1 still masks


def test_a_missing_weight_is_one_line_naming_it(monkeypatch):
    rotary = (
        build(positional_embedding_type="rotary", rotary_dim=8)
        if LINE == 3
        else build(positional_embedding_type="rotary")
    )
    with pytest.raises(ValueError) as error:
        probes.merged_weight(rotary, "W_pos")
    assert "W_pos does not exist" in _one_line(error)
    assert "W_pos" not in set(probes.weight_stable_ranks(rotary)["name"])
    attn_only = build(attn_only=True)
    with pytest.raises(ValueError) as error:
        probes.merged_weight(attn_only, "W_in", 0)
    assert "attention-only" in _one_line(error)

    model = build()

    def unsupported(self):
        raise NotImplementedError("this adapter cannot split the fused query-key-value weight\nmore detail")

    monkeypatch.setattr(
        type(model.blocks[0].attn), "W_Q", property(unsupported), raising=False
    )  # 3.x: a parameter, 4.x: a property
    for call in (
        lambda: probes.merged_weight(model, "W_Q", 0),
        lambda: probes.weight_stable_ranks(model),
        lambda: probes.singular_value_spectra(model),
    ):
        with pytest.raises(ValueError) as error:
            call()
        assert "blocks.0.attn.W_Q" in _one_line(error) and "fused" in str(error.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: probes.information_flow(m, torch.zeros(1, 3, dtype=torch.long)),
        lambda m: probes.mask_key(m, make_dataset("symmetric", "train", n=4, seed=0)),
        lambda m: probes.residual_similarity(m, probes.input_grid(range(30, 33), [(3, 3)], seed=0)),
        lambda m: probes.embedding_pca(m),
        lambda m: probes.weight_stable_ranks(m),
    ],
)
def test_something_that_is_not_a_transformerlens_model_is_one_line(call):
    with pytest.raises(ValueError) as error:
        call(torch.nn.Linear(2, 2))
    assert "hook_dict" in _one_line(error) and "TransformerBridge" in str(error.value)


# --- a researcher's own inputs: plain tokens with their labels, names filters, padding, circuits ---


def test_plain_tokens_with_user_labels_and_positions(model, tokens):
    labels = ["x", "y", "x", "y", "z"]
    hand = hand_forward(model, tokens)
    residual = probes.residual_similarity(model, tokens, labels)  # the last layer, the last position
    torch.testing.assert_close(
        residual.similarity, cosines(hand["blocks.1.hook_resid_mid"][:, -1]), atol=1e-6, rtol=1e-6
    )
    assert torch.equal(residual.equal_target, torch.tensor([[a == b for b in labels] for a in labels]))
    positions = torch.tensor([1, 2, 3, 4, 5])
    value = probes.value_similarity(model, tokens, labels, layer=0, position=positions)
    torch.testing.assert_close(
        value.similarity,
        cosines(hand["blocks.0.attn.hook_v"][torch.arange(5), positions].reshape(5, -1)),
        atol=1e-6,
        rtol=1e-6,
    )
    run = probes.masked_run(model, tokens[:2], [3, 5])  # a flat list: the same sources in every sample
    hide = torch.zeros(2, 9, 9, dtype=torch.bool)
    hide[:, :, [3, 5]] = True
    torch.testing.assert_close(run.logits, hand_forward(model, tokens[:2], hide)["logits"], atol=1e-4, rtol=1e-4)
    assert n_hooks(model) == 0


def test_names_filters_and_cache_indexing(model, tokens):
    hand = hand_forward(model, tokens)
    run = probes.masked_run(model, tokens, [], names_filter=["resid_post", ("pattern", 0)])
    assert sorted(run.cache) == ["blocks.0.attn.hook_pattern", "blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]
    torch.testing.assert_close(
        run.cache["blocks.1.hook_resid_post"], hand["blocks.1.hook_resid_post"], atol=1e-4, rtol=1e-4
    )
    torch.testing.assert_close(
        run.cache["resid_post", 1], hand["blocks.1.hook_resid_post"], atol=1e-4, rtol=1e-4
    )  # an ActivationCache's indexing
    chosen = probes.masked_run(model, tokens, [], names_filter=lambda name: name.endswith("hook_resid_mid"))
    assert {"blocks.0.hook_resid_mid", "blocks.1.hook_resid_mid"} <= set(chosen.cache)
    torch.testing.assert_close(
        chosen.cache["blocks.0.hook_resid_mid"], hand["blocks.0.hook_resid_mid"], atol=1e-4, rtol=1e-4
    )


def test_a_padded_batch_and_the_circuits(model, tokens):
    mask = torch.ones(5, 9, dtype=torch.long)
    mask[3, 6:] = 0
    with torch.no_grad():
        expected = model(tokens, attention_mask=mask)
    torch.testing.assert_close(
        probes.masked_run(model, tokens, [], attention_mask=mask).logits, expected, atol=1e-5, rtol=1e-5
    )
    result = probes.residual_similarity(model, tokens, [0, 1, 0, 1, 0], attention_mask=mask)
    assert result.inputs["position"].tolist() == [8, 8, 8, 5, 8]
    table = probes.circuit_stable_ranks(model)
    attn = model.blocks[1].attn
    dense = (attn.W_V[0] @ attn.W_O[0]).detach().double().numpy()
    s = np.linalg.svd(dense, compute_uv=False)
    row = table[(table["layer"] == 1) & (table["head"] == 0) & (table["circuit"] == "OV")].iloc[0]
    assert row["stable_rank"] == pytest.approx(float((s**2).sum() / s[0] ** 2), rel=1e-4)
    torch.testing.assert_close(probes.head_circuits(model, "OV")[1, 0].AB, attn.W_V[0] @ attn.W_O[0])


# --- the examples of docs/probes.md, each on its line ---------------------------------------------


def docs_example(marker: str) -> tuple[str, str | None]:
    """The python block of docs/probes.md after ``<!-- tested on ...: marker -->``, and the text block it says it prints."""
    found = re.search(
        rf"<!-- tested on [34]\.x: {marker} -->\n```python\n(.*?)```\n(?:\nprints\n\n```text\n(.*?)```)?",
        DOCS.read_text(encoding="utf-8"),
        re.DOTALL,
    )
    assert found, f"docs/probes.md has no example marked {marker!r}"
    return found.group(1), found.group(2)


@pytest.mark.skipif(
    LINE != 4,
    reason="the TransformerBridge.boot_native example needs TransformerLens 4.x (.ci/run runs it in .venv-tl4)",
)
def test_the_docs_boot_native_example_prints_what_the_docs_say():
    code, printed = docs_example("boot_native")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exec(compile(code, str(DOCS), "exec"), {})  # noqa: S102 - the docs' own example
    assert stdout.getvalue() == printed


@pytest.mark.skipif(LINE != 3, reason="HookedEncoder is TransformerLens 3.x's")
def test_the_docs_encoder_initialization_makes_a_probeable_encoder():
    code, _ = docs_example("encoder")
    scope: dict = {}
    exec(compile(code, str(DOCS), "exec"), scope)  # noqa: S102 - the docs' own example
    encoder = scope["encoder"].eval()
    tokens = torch.randint(0, 100, (3, 12), generator=torch.Generator().manual_seed(0))
    assert all(bool(torch.isfinite(p).all()) for p in encoder.parameters())
    run = probes.masked_run(encoder, tokens, 5, names_filter=("resid_post", -1))
    assert bool(run.mask[:, :, 5].all()) and bool(
        torch.isfinite(run.logits).all()
    )  # every query, before position 5 too
    stds = [float(p.std()) for n, p in encoder.named_parameters() if n.endswith("W_Q")]
    assert all(abs(s / encoder.cfg.initializer_range - 1) < 0.2 for s in stds)
