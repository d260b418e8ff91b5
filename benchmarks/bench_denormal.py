"""Training steps of a fitted model with and without subnormal floats flushed to zero.

A run that has fit its data has some activations and gradients in fp32's subnormal range
(below 1.2e-38), where x86 CPUs compute many times slower.  ``training.trainer.step.flush_denormals``
(which the training loop applies) treats them as zero.  This script loads the weights of a
trained run folder (the model and optimizer state of its ``checkpoint.pt``, or, for a
finished run, ``model.safetensors`` with a fresh optimizer) and times the same training
steps on that run's own training batches with flushing off and on, interleaved (off, on, off, on, ...) so background load hits both alike;
it prints the medians and their ratio.  A model that has not fit shows a ratio near 1.
Usage::

    interp-init train --task id-ood --preset cpu --gamma 0.4 --seed 0 --out runs/idood-g04
    python benchmarks/bench_denormal.py runs/idood-g04 --steps 10 --reps 3
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import click
import torch

from interp_init import build_model
from interp_init.model import load_weights
from interp_init.runfolder import RunFolder
from training.config import RunConfig
from training.trainer.step import last_position_logits, make_optimizer, train_step
from training.trainer.loop import make_run_data
from training.cli.errors import Script


def _model_and_optimizer(folder: RunFolder, cfg: RunConfig) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The run's model and AdamW: from ``checkpoint.pt`` (weights and optimizer state) when
    there is one, else the final weights with a fresh optimizer."""
    model = build_model(cfg.model, cfg.init, 0, device="cpu")
    optimizer = make_optimizer(model, cfg.train)
    if folder.checkpoint_path.exists():
        checkpoint = torch.load(folder.checkpoint_path, weights_only=False, map_location="cpu")
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
    elif folder.weights_path.exists():
        load_weights(model, cfg.model, folder.weights_path)
    else:
        raise click.UsageError(
            f"{folder.path} holds neither {folder.checkpoint_path.name} nor {folder.weights_path.name}: give a trained run folder"
        )
    return model, optimizer


@click.command(cls=Script)
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--steps", default=10, show_default=True, help="Training steps per timing.")
@click.option("--reps", default=3, show_default=True, help="Timings of each setting (interleaved).")
@click.option("--threads", default=1, show_default=True, help="Torch threads.")
def main(run_dir: Path, steps: int, reps: int, threads: int) -> None:
    torch.set_num_threads(threads)
    folder = RunFolder(run_dir)
    cfg = RunConfig.from_dict(folder.read_config(), str(folder.config_path))
    data = make_run_data(cfg, "cpu")
    batch = cfg.train.batch_size
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(reps):
        for flush in (False, True):
            model, optimizer = _model_and_optimizer(folder, cfg)
            torch.set_flush_denormal(flush)
            t0 = time.perf_counter()
            for i in range(steps):
                idx = torch.arange(i * batch, (i + 1) * batch) % len(data.train)
                train_step(
                    model,
                    optimizer,
                    data.train.batch_tokens(idx),
                    data.train.targets[idx],
                    logits_fn=last_position_logits,
                    grad_clip=cfg.train.grad_clip,
                )
            times[flush].append((time.perf_counter() - t0) / steps)
    torch.set_flush_denormal(False)
    off, on = statistics.median(times[False]), statistics.median(times[True])
    print(
        f"run {run_dir} ({cfg.data.task}, {cfg.model.architecture}, gamma {cfg.init.gamma}, d_model {cfg.model.d_model}, batch {batch}), {threads} thread(s)"
    )
    print(
        f"seconds per step, median of {reps} x {steps} steps: subnormals kept {off:.4f}, flushed {on:.4f}; ratio {off / on:.2f}x"
    )


if __name__ == "__main__":
    main()
