"""One training step, three ways, side by side in one process.

* ``ours``: what ``training.train`` does: ``training.trainer.step.last_position_logits`` +
  cross-entropy + gradient clipping + AdamW from ``training.trainer.step.make_optimizer``
  (``train_step``); ``ours-bf16`` the same under bfloat16 autocast.
* ``hooked``: ``HookedTransformer`` as is: ``model(tokens)[:, -1]``, default AdamW.
* ``plain``: a plain PyTorch model of identical math written below (fused QKV linear,
  ``F.layer_norm``, ``F.scaled_dot_product_attention``, ``nn.Linear``), full forward at
  every position, default AdamW; its weights are copied from the HookedTransformer and
  its logits checked equal before timing. Written for the ``standard`` block only: for
  the ``journal`` and ``neurips`` architectures the plain column is left out.

Each architecture (``--architecture``, all three by default) is measured in turn.

Variants are interleaved (A B C A B C ...) so background load hits all alike; the
medians are printed with ratios.  A second table gives each variant's matrix-multiply work
per sample (counted by ``torch.utils.flop_counter.FlopCounterMode``: matrix products and
attention, not element-wise work), the rate it achieves, and that rate as a fraction of
the device's matrix-multiply peak, measured here as the rate of one large square matmul
in fp32 (bf16 for ``ours-bf16``) under the process's settings.  Usage::

    python benchmarks/bench_train_step.py                  # d_model 64, 128, 400; all architectures
    python benchmarks/bench_train_step.py --architecture neurips --d-model 128 --d-model 400
    python benchmarks/bench_train_step.py --d-model 64 --reps 3 --threads 2
    python benchmarks/bench_train_step.py --device cuda --batch 2048
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import click
import einops
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode
from transformer_lens import HookedTransformer

from interp_init import InitConfig, architecture_names, ModelConfig, build_model, resolve_device
from training.config import TrainConfig
from training.trainer.step import last_position_logits, make_optimizer, train_step
from training.cli.errors import Script


class PlainBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_head: int, d_mlp: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.scale = d_head**-0.5
        self.ln1 = nn.LayerNorm(d_model, eps=1e-5)
        self.qkv = nn.Linear(d_model, 3 * n_heads * d_head)
        self.out = nn.Linear(n_heads * d_head, d_model)
        self.ln2 = nn.LayerNorm(d_model, eps=1e-5)
        self.fc_in = nn.Linear(d_model, d_mlp)
        self.fc_out = nn.Linear(d_mlp, d_model)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = einops.rearrange(self.qkv(self.ln1(x)), "b p (three h e) -> three b h p e", three=3, h=self.n_heads)
        z = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        x = x + self.out(einops.rearrange(z, "b h p e -> b p (h e)"))
        return x + self.fc_out(F.gelu(self.fc_in(self.ln2(x))))


class PlainTransformer(nn.Module):
    """GPT-2-style pre-LN decoder, the math of the HookedTransformer it copies."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.d_vocab, cfg.d_model)
        self.pos = nn.Parameter(torch.zeros(cfg.n_ctx, cfg.d_model))
        self.blocks = nn.ModuleList(
            PlainBlock(cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp) for _ in range(cfg.n_layers)
        )
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=1e-5)
        self.head = nn.Linear(cfg.d_model, cfg.d_vocab)

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

    @torch.no_grad()
    def copy_from(self, model: HookedTransformer) -> PlainTransformer:
        flat_in = "h d e -> (h e) d"
        self.embed.weight.copy_(model.W_E)
        self.pos.copy_(model.W_pos)
        for mine, theirs in zip(self.blocks, model.blocks):
            a = theirs.attn
            mine.ln1.weight.copy_(theirs.ln1.w), mine.ln1.bias.copy_(theirs.ln1.b)
            mine.ln2.weight.copy_(theirs.ln2.w), mine.ln2.bias.copy_(theirs.ln2.b)
            mine.qkv.weight.copy_(torch.cat([einops.rearrange(w, flat_in) for w in (a.W_Q, a.W_K, a.W_V)]))
            mine.qkv.bias.copy_(torch.cat([a.b_Q.flatten(), a.b_K.flatten(), a.b_V.flatten()]))
            mine.out.weight.copy_(einops.rearrange(a.W_O, "h e d -> d (h e)")), mine.out.bias.copy_(a.b_O)
            mine.fc_in.weight.copy_(theirs.mlp.W_in.T), mine.fc_in.bias.copy_(theirs.mlp.b_in)
            mine.fc_out.weight.copy_(theirs.mlp.W_out.T), mine.fc_out.bias.copy_(theirs.mlp.b_out)
        self.ln_f.weight.copy_(model.ln_final.w), self.ln_f.bias.copy_(model.ln_final.b)
        self.head.weight.copy_(model.W_U.T), self.head.bias.copy_(model.b_U)
        return self


def _default_step(model: nn.Module, optimizer: torch.optim.Optimizer, tokens: Tensor, targets: Tensor) -> Tensor:
    """The plain training step: full forward, last position, default AdamW, clipping."""
    loss = F.cross_entropy(model(tokens)[:, -1], targets)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.detach()


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()


def _cpu_sdpa_flops(query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    return flop_counter.sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_sdpa_backward_flops(grad_out_shape, query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    return flop_counter.sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


#: FlopCounterMode has formulas for the GPU attention kernels but not for the CPU one
#: that ``F.scaled_dot_product_attention`` dispatches to; without these, attention's
#: products would be missing from the CPU counts of ``ours`` and ``plain``.
_CPU_SDPA_FORMULAS = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_sdpa_flops,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_sdpa_backward_flops,
}


def step_flops(step: Callable[[], object]) -> int:
    """Floating-point operations of one call of ``step``, as ``FlopCounterMode`` counts them
    (with the CPU attention kernel counted like the GPU ones: full ``pos x pos`` products,
    no discount for the causal mask)."""
    with FlopCounterMode(display=False, custom_mapping=_CPU_SDPA_FORMULAS) as counter:
        step()
    return counter.get_total_flops()


def matmul_peak(dev: torch.device, dtype: torch.dtype, size: int, reps: int = 5) -> float:
    """FLOP/s of a ``size`` x ``size`` matrix product on ``dev`` in ``dtype`` (median of ``reps``)."""
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randn(size, size, generator=gen).to(dev, dtype) for _ in range(2))
    a @ b  # warm-up
    times = []
    for _ in range(reps):
        _sync(dev)
        t0 = time.perf_counter()
        a @ b
        _sync(dev)
        times.append(time.perf_counter() - t0)
    return 2 * size**3 / statistics.median(times)


def bench(
    d_model: int, batch: int, reps: int, steps: int, n_layers: int, dev: torch.device, architecture: str = "standard"
) -> tuple[dict[str, float], dict[str, int]]:
    """Samples/s of each variant's training step, and its FLOPs per step (no ``plain``
    variant unless ``architecture`` is ``"standard"``)."""
    cfg = ModelConfig(
        architecture=architecture, n_layers=n_layers, d_model=d_model, n_heads=1, d_head=d_model // 2, d_mlp=3 * d_model
    )
    tc = TrainConfig(lr=1e-4, weight_decay=0.01, grad_clip=1.0)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(20, 100, (batch, cfg.n_ctx), generator=gen).to(dev)
    targets = torch.randint(0, cfg.d_vocab, (batch,), generator=gen).to(dev)

    def hooked_model() -> HookedTransformer:
        return build_model(cfg, InitConfig(gamma=0.5), seed=0, device=dev)

    reference = hooked_model()
    plain = PlainTransformer(cfg).to(dev).copy_from(reference) if architecture == "standard" else None
    with torch.no_grad():
        expected = reference(tokens)
        if plain is not None:
            torch.testing.assert_close(plain(tokens), expected, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(last_position_logits(reference, tokens), expected[:, -1], rtol=1e-4, atol=1e-4)

    ours, ours16, hooked = hooked_model(), hooked_model(), hooked_model()
    variants = {
        "ours": lambda opt: train_step(ours, opt, tokens, targets, grad_clip=1.0),
        "ours-bf16": lambda opt: train_step(ours16, opt, tokens, targets, grad_clip=1.0, precision="bf16"),
        "hooked": lambda opt: _default_step(hooked, opt, tokens, targets),
    }
    optimizers = {
        "ours": make_optimizer(ours, tc),
        "ours-bf16": make_optimizer(ours16, tc),
        "hooked": torch.optim.AdamW(hooked.parameters(), lr=1e-4, weight_decay=0.01),
    }
    if plain is not None:
        variants["plain"] = lambda opt: _default_step(plain, opt, tokens, targets)
        optimizers["plain"] = torch.optim.AdamW(plain.parameters(), lr=1e-4, weight_decay=0.01)
    flops = {name: step_flops(lambda: step(optimizers[name])) for name, step in variants.items()}  # also the warm-up
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(reps):
        for name, step in variants.items():
            _sync(dev)
            t0 = time.perf_counter()
            for _ in range(steps):
                step(optimizers[name])
            _sync(dev)
            times[name].append((time.perf_counter() - t0) / steps)
    return {name: batch / statistics.median(t) for name, t in times.items()}, flops


@click.command(cls=Script)
@click.option("--d-model", "d_models", type=int, multiple=True, default=(64, 128, 400), show_default=True)
@click.option(
    "--architecture",
    "architectures",
    type=click.Choice(architecture_names()),
    multiple=True,
    default=architecture_names(),
    show_default=True,
    help="The blocks to measure (repeat the option for several).",
)
@click.option("--batch", type=int, default=512, show_default=True)
@click.option("--n-layers", type=int, default=2, show_default=True)
@click.option("--reps", type=int, default=5, show_default=True, help="Interleaved repetitions (median reported).")
@click.option("--steps", type=int, default=3, show_default=True, help="Steps per timed repetition.")
@click.option("--threads", type=int, default=1, show_default=True, help="torch CPU threads.")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or auto.")
@click.option(
    "--peak-size",
    type=int,
    default=None,
    help="Side of the square matmul that measures the peak [default: 2048 on CPU, 8192 on a GPU].",
)
def main(
    d_models: tuple[int, ...],
    architectures: tuple[str, ...],
    batch: int,
    n_layers: int,
    reps: int,
    steps: int,
    threads: int,
    device: str,
    peak_size: int | None,
) -> None:
    """Samples/s of one training step: ours vs HookedTransformer as is vs plain PyTorch."""
    torch.set_num_threads(threads)
    dev = resolve_device(device)
    click.echo(
        f"torch {torch.__version__}, device {dev}, {threads} thread(s), batch {batch}, {n_layers} layers, 1 head, d_head = d_model/2, d_mlp = 3 d_model"
    )
    click.echo(
        f"{'arch.':>8} {'d_model':>7} {'hooked':>9} {'plain':>9} {'ours':>9} {'ours-bf16':>10}  "
        f"{'ours/hooked':>11} {'ours/plain':>10} {'plain/hooked':>12} {'bf16/ours':>9}"
    )
    work = {}

    def cell(value: float | None, spec: str) -> str:
        return "-".rjust(int(spec.split(".")[0][1:])) if value is None else format(value, spec)

    for arch in architectures:
        for d in d_models:
            r, flops = bench(d, batch, reps, steps, n_layers, dev, arch)
            work[arch, d] = (r, flops)
            plain = r.get("plain")
            click.echo(
                f"{arch:>8} {d:>7} {r['hooked']:>9.0f} {cell(plain, '>9.0f')} {r['ours']:>9.0f} {r['ours-bf16']:>10.0f}  "
                f"{r['ours'] / r['hooked']:>11.2f} {cell(plain and r['ours'] / plain, '>10.2f')} "
                f"{cell(plain and plain / r['hooked'], '>12.2f')} {r['ours-bf16'] / r['ours']:>9.2f}"
            )
    size = peak_size or (2048 if dev.type == "cpu" else 8192)
    peak = {"fp32": matmul_peak(dev, torch.float32, size), "bf16": matmul_peak(dev, torch.bfloat16, size)}
    click.echo(
        f"\nmatmul peak measured on a {size} x {size} product: fp32 {peak['fp32'] / 1e9:.1f} GFLOP/s, bf16 {peak['bf16'] / 1e9:.1f} GFLOP/s"
    )
    click.echo(f"{'arch.':>8} {'d_model':>7} {'variant':>10} {'MFLOP/sample':>13} {'GFLOP/s':>9} {'of peak':>8}")
    for (arch, d), (r, flops) in work.items():
        for name in ("hooked", "plain", "ours", "ours-bf16"):
            if name not in r:
                continue
            rate = flops[name] / batch * r[name]
            fraction = rate / peak["bf16" if name.endswith("bf16") else "fp32"]
            click.echo(
                f"{arch:>8} {d:>7} {name:>10} {flops[name] / batch / 1e6:>13.2f} {rate / 1e9:>9.2f} {fraction:>8.1%}"
            )


if __name__ == "__main__":
    main()
