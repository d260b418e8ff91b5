"""Training steps of the sequence tasks: the every-position fast path against the hooked forward.

``hooked``: ``HookedTransformer`` as is, ``model(tokens)``, and the mean cross-entropy over the
target positions (``training.trainer.step.sequence_loss``).  ``fused``: the same loss from
``training.trainer.step.all_position_logits`` (the architectures' fused blocks at every
position).  ``ours``: what ``training.train`` runs, ``train_step`` with ``all_position_logits``,
which computes through ``target_logits`` (positions after the batch's last target cut, the final
norm and unembedding at the target positions only).  Every variant then does the same
backward, clipping and fused AdamW step.  The three losses are checked equal first.  A task's
``cpu`` preset shapes the model and batch; interleaved repetitions, medians, samples/s::

    python benchmarks/bench_sequence_step.py                   # scan, cogs and code-lm
    python benchmarks/bench_sequence_step.py --task cogs --reps 3
"""

from __future__ import annotations

import statistics
import time

import click
import torch

from interp_init import build_model, resolve_device
from training.cli.errors import Script
from training.config import make_run_config
from training.trainer.step import all_position_logits, make_optimizer, sequence_loss, target_logits, train_step

TASKS = ("scan", "cogs", "code-lm")


def _step(model, optimizer, loss: torch.Tensor, clip: float) -> None:  # noqa: ANN001
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip, foreach=True)
    optimizer.step()


def bench(
    task: str, preset: str, reps: int, steps: int, dev: torch.device, batch: int | None = None
) -> dict[str, float]:
    """Samples/s of each variant on ``task``'s ``preset`` model and batch (median of ``reps``)."""
    options = {} if batch is None else {"batch_size": batch, "n_train": max(batch, 64)}
    cfg = make_run_config(preset, task=task, **options)
    data = cfg.data.make_task().make_split("train", cfg.train.batch_size, 0)
    tokens, targets = data.tokens.to(dev), data.targets.to(dev)
    models = {
        name: build_model(cfg.model, cfg.init, cfg.seeds["init"], device=dev) for name in ("hooked", "fused", "ours")
    }
    optimizers = {name: make_optimizer(m, cfg.train) for name, m in models.items()}
    with torch.no_grad():  # the same loss three ways before timing
        ref = sequence_loss(models["hooked"](tokens), targets)
        fused = sequence_loss(all_position_logits(models["fused"], tokens), targets)
        ours = torch.nn.functional.cross_entropy(*target_logits(models["ours"], tokens, targets))
    torch.testing.assert_close(fused, ref, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-5)
    clip = cfg.train.grad_clip

    variants = {
        "hooked": lambda: _step(
            models["hooked"], optimizers["hooked"], sequence_loss(models["hooked"](tokens), targets), clip
        ),
        "fused": lambda: _step(
            models["fused"],
            optimizers["fused"],
            sequence_loss(all_position_logits(models["fused"], tokens), targets),
            clip,
        ),
        "ours": lambda: train_step(
            models["ours"], optimizers["ours"], tokens, targets, logits_fn=all_position_logits, grad_clip=clip
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for name, run in variants.items():  # warm up
        run()
    for _ in range(reps):
        for name, run in variants.items():  # interleaved
            if dev.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(steps):
                run()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - start)
    return {name: steps * len(tokens) / statistics.median(t) for name, t in times.items()}


@click.command(cls=Script)
@click.option("--task", "tasks", multiple=True, type=click.Choice(TASKS), help="task (repeatable; default all three)")
@click.option("--preset", default="cpu", show_default=True, help="the preset whose model and batch are timed")
@click.option("--batch", type=int, default=None, help="batch size (default: the preset's)")
@click.option("--reps", default=5, show_default=True)
@click.option("--steps", default=3, show_default=True)
@click.option("--device", default="cpu", show_default=True)
def main(tasks: tuple[str, ...], preset: str, batch: int | None, reps: int, steps: int, device: str) -> None:
    """Print samples/s of the hooked, fused and our sequence step per task, and the ratios."""
    dev = resolve_device(device)
    print(
        f"| task | seq_len | vocab | batch | hooked | fused | ours | ours/hooked | fused/hooked |  ({preset} preset, {torch.get_num_threads()} thread(s), {dev})"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for task in tasks or TASKS:
        cfg = make_run_config(preset, task=task)
        speed = bench(task, preset, reps, steps, dev, batch)
        print(
            f"| {task} | {cfg.model.n_ctx} | {cfg.model.d_vocab} | {batch or cfg.train.batch_size} | {speed['hooked']:.0f} | {speed['fused']:.0f} | "
            f"{speed['ours']:.0f} | {speed['ours'] / speed['hooked']:.2f} | {speed['fused'] / speed['hooked']:.2f} |"
        )


if __name__ == "__main__":
    main()
