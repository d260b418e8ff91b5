"""Training steps of M same-shape models: one vectorized ensemble step vs M steps one by one.

``ensemble``: ``training.trainer.ensemble.VmapStep`` (``vmap`` over ``functional_call`` of
``last_position_logits`` on the stacked parameters, then each model's clipping and
``torch.optim.AdamW`` step).  ``batched``: the trainer's ``training.trainer.ensemble.BatchedStep``, the
same forward and backward, then every model's clipping and AdamW as one set of operations on
the stacked parameters.  ``one-by-one``:
``training.trainer.step.train_step`` on each model in turn, as ``training.train`` runs them.
Each model gets its own gamma, weight decay, lr and seed.  Interleaved repetitions,
medians, samples/s summed over the models::

    python benchmarks/bench_ensemble.py                       # d_model 64 and 128, 4 and 8 models
    python benchmarks/bench_ensemble.py --models 16 --d-model 64 --device cuda
"""

from __future__ import annotations

import statistics
import time

import click
import torch

from interp_init import build_model, resolve_device
from training.config import make_run_config
from training.trainer.ensemble import BatchedStep, VmapStep
from training.trainer.step import last_position_logits, make_optimizer, train_step
from training.trainer.loop import make_run_data, new_member
from training.cli.errors import Script


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()


def bench(d_model: int, n_models: int, batch: int, reps: int, steps: int, dev: torch.device) -> dict[str, float]:
    cfgs = [
        make_run_config(
            "tiny",
            n_layers=2,
            d_model=d_model,
            n_heads=1,
            d_head=d_model // 2,
            d_mlp=3 * d_model,
            n_train=2 * batch,
            n_test=100,
            eval_samples=100,
            batch_size=batch,
            gamma=0.4 + 0.05 * j,
            weight_decay=[0.0, 0.01, 0.1, 1.0][j % 4],
            lr=1e-4 * (1 + j),
            seed=j,
        )
        for j in range(n_models)
    ]
    members = [new_member(c, dev, make_run_data(c, dev)) for c in cfgs]
    ens = VmapStep(members, last_position_logits, dev)
    batched_members = [new_member(c, dev, m.data) for c, m in zip(cfgs, members)]
    batched = BatchedStep(batched_members, last_position_logits, dev)
    models = [build_model(c.model, c.init, c.seeds["init"], device=dev) for c in cfgs]
    optimizers = [make_optimizer(m, c.train) for m, c in zip(models, cfgs)]
    idx = torch.arange(batch, device=dev).expand(n_models, batch)
    tokens = ens.train_tokens[ens.source[:, None], idx].long()  # as the ensemble's step widens each batch
    targets = ens.train_targets[ens.source[:, None], idx]

    def ensemble_step() -> None:
        ens(members, idx)

    def one_by_one() -> None:
        for j, (m, opt) in enumerate(zip(models, optimizers)):
            train_step(m, opt, tokens[j], targets[j], grad_clip=cfgs[j].train.grad_clip)

    def batched_step() -> None:
        batched(batched_members, idx)

    variants = {"ensemble": ensemble_step, "batched": batched_step, "one-by-one": one_by_one}
    for fn in variants.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(reps):
        for name, fn in variants.items():
            _sync(dev)
            t0 = time.perf_counter()
            for _ in range(steps):
                fn()
            _sync(dev)
            times[name].append((time.perf_counter() - t0) / steps)
    return {name: n_models * batch / statistics.median(t) for name, t in times.items()}


@click.command(cls=Script)
@click.option("--d-model", "d_models", type=int, multiple=True, default=(64, 128), show_default=True)
@click.option("--models", "model_counts", type=int, multiple=True, default=(4, 8), show_default=True)
@click.option("--batch", type=int, default=512, show_default=True)
@click.option("--reps", type=int, default=3, show_default=True)
@click.option("--steps", type=int, default=2, show_default=True)
@click.option("--threads", type=int, default=1, show_default=True)
@click.option("--device", default="cpu", show_default=True)
def main(d_models, model_counts, batch, reps, steps, threads, device) -> None:
    """Samples/s (all models together) of the ensemble step and of one-by-one steps."""
    torch.set_num_threads(threads)
    dev = resolve_device(device)
    click.echo(
        f"torch {torch.__version__}, device {dev}, {threads} thread(s), batch {batch} per model, 2 layers, 1 head"
    )
    click.echo(
        f"{'d_model':>7} {'models':>6} {'one-by-one':>11} {'ensemble':>9} {'batched':>8} {'ratio':>6} {'batched/ensemble':>16}"
    )
    for d in d_models:
        for m in model_counts:
            r = bench(d, m, batch, reps, steps, dev)
            click.echo(
                f"{d:>7} {m:>6} {r['one-by-one']:>11.0f} {r['ensemble']:>9.0f} {r['batched']:>8.0f} {r['ensemble'] / r['one-by-one']:>6.2f} "
                f"{r['batched'] / r['ensemble']:>16.2f}"
            )


if __name__ == "__main__":
    main()
