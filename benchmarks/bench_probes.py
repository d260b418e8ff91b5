"""Each probe against the TransformerLens code one would write by hand, at GPT-2 shape, in one process.

A GPT-2-shaped ``HookedTransformer`` (12 layers, d_model 768, 12 heads, d_mlp 3072,
vocabulary 50257, random weights, no download) reads ``--batch`` random sequences of
``--seq`` tokens.  For each probe the script times the probe and its hand-written
TransformerLens equivalent alternately (probe, hand, probe, hand, ... ``--reps`` times;
medians) and measures each one's peak memory above what the process held before it (the
resident set's high-water mark, reset through ``/proc/self/clear_refs`` before each call;
Linux only).  It prints one row per probe: seconds and MiB of both, and the ratios
probe/hand (below 1: the probe is cheaper).

    OMP_NUM_THREADS=1 python benchmarks/bench_probes.py --batch 8 --batch 32
    python benchmarks/bench_probes.py --layers 2 --d-model 64 --heads 4 --vocab 500 --seq 16 --batch 4   # seconds

The hand-written equivalents: ``run_with_hooks`` with a pattern-zeroing hook (masking);
``run_with_cache(names_filter=hook_pattern)`` then ``torch.stack`` (patterns), plus the
mean and standard deviation over the batch (flow); ``run_with_cache(stop_at_layer=...)``
then cosines (similarities); a float32 Gram eigenvalue per merged weight (stable ranks);
one float32 SVD per merged weight (spectra); ``model.OV.S`` / ``model.QK.S`` (circuits);
one ``add_shape`` per group on a plotly heatmap (condensation plot); circuitsvis'
``attention_heads`` of every head (attention view, its size in MB in place of memory).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

import click
import einops
import numpy as np
import plotly.graph_objects as go
import torch
import torch.nn.functional as F
from transformer_lens import HookedTransformer, HookedTransformerConfig

import probes
from interp_init import quiet_deprecation
from training.cli.errors import Script


def rss_mib(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(call: Callable[[], object]) -> tuple[float, float, object]:
    """(seconds, peak MiB above the start, result) of one call."""
    gc.collect()
    with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
        refs.write("5")  # reset the high-water mark to the current resident set
    base = rss_mib("VmRSS")
    start = time.perf_counter()
    result = call()
    seconds = time.perf_counter() - start
    return seconds, rss_mib("VmHWM") - base, result


def build(layers: int, d_model: int, heads: int, vocab: int, seq: int) -> HookedTransformer:
    cfg = HookedTransformerConfig(
        n_layers=layers,
        d_model=d_model,
        n_heads=heads,
        d_head=d_model // heads,
        d_mlp=4 * d_model,
        d_vocab=vocab,
        n_ctx=seq,
        act_fn="gelu_new",
        normalization_type="LN",
        seed=0,
    )
    with quiet_deprecation():
        return HookedTransformer(cfg).eval()


def cosines(vectors: torch.Tensor) -> torch.Tensor:
    unit = F.normalize(vectors.double(), dim=-1)
    return unit @ unit.T


def merged(model: HookedTransformer) -> list[torch.Tensor]:
    out = [model.W_E, model.W_pos]
    for block in model.blocks:
        a = block.attn
        out += [einops.rearrange(w, "h d e -> d (h e)") for w in (a.W_Q, a.W_K, a.W_V)] + [
            einops.rearrange(a.W_O, "h e d -> (h e) d")
        ]
        out += [block.mlp.W_in, block.mlp.W_out]
    return [w.detach() for w in out + [model.W_U]]


def cases(model: HookedTransformer, tokens: torch.Tensor) -> dict[str, tuple[Callable, Callable]]:
    """probe name -> (the probe, the hand-written TransformerLens equivalent)."""
    n_layers, batch = model.cfg.n_layers, tokens.shape[0]
    labels = [i % 4 for i in range(batch)]
    mid = n_layers // 2
    source = torch.zeros(batch, dtype=torch.long)
    last = f"blocks.{n_layers - 1}.hook_resid_post"

    def hand_masked() -> object:
        keep = {}

        def zero(pattern: torch.Tensor, hook) -> torch.Tensor:
            return pattern.index_fill(-1, source[:1], 0.0)

        def save(resid: torch.Tensor, hook) -> None:
            keep["resid"] = resid.detach()

        with torch.no_grad():
            logits = model.run_with_hooks(
                tokens, fwd_hooks=[(lambda n: n.endswith("hook_pattern"), zero), (last, save)]
            )
        return logits, keep

    def hand_patterns() -> torch.Tensor:
        with torch.no_grad():
            _, cache = model.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_pattern"))
        return torch.stack([cache["pattern", layer] for layer in range(n_layers)])

    def hand_flow() -> tuple[torch.Tensor, torch.Tensor]:
        patterns = hand_patterns().double()
        stacked = torch.cat([patterns, patterns.sum(2, keepdim=True)], dim=2)
        return stacked.mean(1), stacked.std(1, correction=0)

    def hand_similarity(name: str) -> Callable:
        def run() -> torch.Tensor:
            with torch.no_grad():
                _, cache = model.run_with_cache(tokens, names_filter=name, stop_at_layer=mid + 1)
            acts = cache[name]
            if acts.ndim == 4:
                acts = einops.rearrange(acts, "b p h e -> b p (h e)")
            return cosines(acts[:, -1])

        return run

    def hand_ranks() -> list[float]:
        out = []
        for w in merged(model):
            w = w.float()
            gram = w.T @ w if w.shape[1] <= w.shape[0] else w @ w.T
            out.append(float(w.pow(2).sum() / torch.linalg.eigvalsh(gram)[-1]))
        return out

    def hand_spectra() -> list[torch.Tensor]:
        return [torch.linalg.svdvals(w.float()) for w in merged(model)]

    def hand_circuits() -> list[torch.Tensor]:
        out = []
        for circuit in (model.OV, model.QK):
            s = circuit.S
            out.append(s.pow(2).sum(-1) / s[..., 0].pow(2))
        return out

    return {
        "masked_run": (lambda: probes.masked_run(model, tokens, source, names_filter=[last]), hand_masked),
        "attention_patterns": (lambda: probes.attention_patterns(model, tokens), hand_patterns),
        "information_flow": (lambda: probes.information_flow(model, tokens), hand_flow),
        f"residual_similarity (layer {mid})": (
            lambda: probes.residual_similarity(model, tokens, labels, layer=mid),
            hand_similarity(f"blocks.{mid}.hook_resid_mid"),
        ),
        f"value_similarity (layer {mid})": (
            lambda: probes.value_similarity(model, tokens, labels, layer=mid),
            hand_similarity(f"blocks.{mid}.attn.hook_v"),
        ),
        "weight_stable_ranks": (lambda: probes.weight_stable_ranks(model), hand_ranks),
        "singular_value_spectra": (lambda: probes.singular_value_spectra(model), hand_spectra),
        "circuit_stable_ranks": (lambda: probes.circuit_stable_ranks(model), hand_circuits),
    }


def plot_cases(model: HookedTransformer, tokens: torch.Tensor) -> dict[str, tuple[Callable, Callable]]:
    """Views: the condensation plot of layer 0's d_model query neurons, one input's attention page."""
    result = probes.condensation(probes.merged_weight(model, "W_Q", 0).T, threshold=0.1)

    def hand_condensation() -> go.Figure:
        order = result.order
        fig = go.Figure(go.Heatmap(z=result.reordered, x=[str(i) for i in order], y=[str(i) for i in order]))
        edge = -0.5
        for size in result.group_sizes:
            fig.add_shape(type="rect", x0=edge, x1=edge + size, y0=edge, y1=edge + size, xref="x", yref="y")
            edge += size
        return fig

    def hand_view() -> str:
        import circuitsvis

        with torch.no_grad():
            _, cache = model.run_with_cache(tokens[:1], names_filter=lambda n: n.endswith("hook_pattern"))
        patterns = torch.cat([cache["pattern", layer][0] for layer in range(model.cfg.n_layers)])
        return str(circuitsvis.attention.attention_heads(patterns, [str(int(t)) for t in tokens[0]]))

    def view() -> str:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return probes.attention_html(model, tokens[0]).html()

    return {
        f"plot_condensation ({len(result.groups)} neurons, {result.n_groups} groups)": (
            lambda: probes.plot_condensation(result),
            hand_condensation,
        ),
        "attention_html (1 input; MB of page)": (view, hand_view),
    }


def row(name: str, probe: Callable, hand: Callable, reps: int, size_of: Callable | None = None) -> dict:
    times = {"probe": [], "hand": []}
    peaks = {"probe": [], "hand": []}
    sizes = {}
    for _ in range(reps):
        for kind, call in (("probe", probe), ("hand", hand)):
            seconds, peak, result = measure(call)
            times[kind].append(seconds)
            peaks[kind].append(peak)
            if size_of is not None:
                sizes[kind] = size_of(result)
            del result
    t = {k: statistics.median(v) for k, v in times.items()}
    m = {k: statistics.median(v) for k, v in peaks.items()} if size_of is None else sizes
    return {
        "probe": name,
        "probe s": t["probe"],
        "hand s": t["hand"],
        "time ratio": t["probe"] / t["hand"],
        "probe MiB": m["probe"],
        "hand MiB": m["hand"],
        "memory ratio": m["probe"] / max(m["hand"], 1e-9),
    }


@click.command(cls=Script)
@click.option(
    "--batch",
    "batches",
    type=int,
    multiple=True,
    default=(8, 32),
    show_default=True,
    help="batch sizes (repeat the option)",
)
@click.option("--seq", type=int, default=128, show_default=True)
@click.option("--layers", type=int, default=12, show_default=True)
@click.option("--d-model", type=int, default=768, show_default=True)
@click.option("--heads", type=int, default=12, show_default=True)
@click.option("--vocab", type=int, default=50257, show_default=True)
@click.option("--reps", type=int, default=1, show_default=True, help="alternating repetitions per probe (medians)")
@click.option("--threads", type=int, default=1, show_default=True, help="torch threads")
@click.option("--only", multiple=True, help="probes whose name contains this (repeat the option; default all)")
def main(
    batches: tuple[int, ...],
    seq: int,
    layers: int,
    d_model: int,
    heads: int,
    vocab: int,
    reps: int,
    threads: int,
    only: tuple[str, ...],
) -> None:
    """Time and peak memory of each probe against hand-written TransformerLens code, as ratios."""
    torch.set_num_threads(threads)
    model = build(layers, d_model, heads, vocab, seq)
    print(
        f"model: {layers} layers, d_model {d_model}, {heads} heads, vocabulary {vocab}, seq {seq}; {threads} torch thread(s), {reps} rep(s)"
    )

    def chosen(table: dict) -> dict:
        return {name: pair for name, pair in table.items() if not only or any(o in name for o in only)}

    warm = torch.randint(0, vocab, (2, min(seq, 4)), generator=torch.Generator().manual_seed(0))
    for probe, hand in chosen(cases(model, warm)).values():  # lazy imports and first-call set-up, outside the timings
        probe(), hand()
    for batch in batches:
        tokens = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(batch))
        rows = [row(name, probe, hand, reps) for name, (probe, hand) in chosen(cases(model, tokens)).items()]
        if batch == batches[0]:  # the views read one input: once
            for name, (probe, hand) in chosen(plot_cases(model, tokens)).items():
                size = (lambda page: len(page.encode()) / 2**20) if "MB" in name else None
                rows.append(row(name, probe, hand, reps, size_of=size))
        print(f"\nbatch {batch}:")
        print("| probe | probe s | hand s | time ratio | probe MiB | hand MiB | memory ratio |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            memory = f"{r['memory ratio']:.2f}" if r["hand MiB"] >= 1 else "n/a (under 1 MiB)"
            print(
                f"| {r['probe']} | {r['probe s']:.2f} | {r['hand s']:.2f} | {r['time ratio']:.2f} | {r['probe MiB']:.1f} | {r['hand MiB']:.1f} | {memory} |"
            )
    if only and not any(o in "top_paths" for o in only):
        return
    edges = probes.information_flow(model, tokens[:1])
    seconds, _, paths = measure(lambda: probes.top_paths(edges, threshold=0.0, k=10))
    print(
        f"\ntop_paths on the {layers}-layer, {seq}-position flow (k=10, threshold 0): {seconds:.2f} s, best score {paths['score'].iloc[0]:.3g}"
    )


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
