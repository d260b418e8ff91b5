"""What bf16 autocast trades: train the same runs in fp32 and in bf16, print accuracies and time.

Two configurations of the ``symmetric`` task: the ``tiny`` preset, and a d_model-128
model like FINDINGS.md's (2 layers, 1 head, d_head 64, d_mlp 384, 40,000 samples,
batch 512, lr 1e-3, 5% warmup then cosine to 5% of the peak).  Each is trained with
``precision="fp32"`` and ``"bf16"`` from the same seed; the table shows the final
train / ID / held-out (4,3) accuracies and the training time, then a ``bf16 - fp32`` line with
the differences and the largest accuracy difference (the question the GPU suite's bf16
default has to answer: does bf16 keep the papers' results?).  The runs are the named points of
one study (:class:`training.studies.study.StudySpec`) trained by the one launcher
(:func:`training.launch.run_study`, one after another here) into ``--out`` (default: a
temporary folder, removed after), and read back from their run folders::

    python benchmarks/bf16_accuracy.py                  # tiny, then d_model 128 (minutes)
    python benchmarks/bf16_accuracy.py --only tiny --out runs/bf16   # kept: a rerun reads them
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import click
import torch

from interp_init.outputs import refuse_nested
from training import RunRecord, StudySpec, run_study
from training.cli.errors import Script
from training.cli.flags import Number
from training.config import one_line
from training.launch import SerialLauncher
from training.studies.study import record_study, refuse_strangers


def _configs(epochs_128: int, gamma_128: float) -> dict[str, dict]:
    return {
        "tiny": dict(preset="tiny"),
        "d128": dict(
            preset="tiny",
            n_layers=2,
            d_model=128,
            n_heads=1,
            d_head=64,
            d_mlp=384,
            n_train=40_000,
            n_test=2_000,
            eval_samples=2_000,
            batch_size=512,
            epochs=epochs_128,
            lr=1e-3,
            warmup_start_lr=1e-5,
            min_lr=5e-5,
            warmup_epochs=0.05 * epochs_128,
            cosine_epochs=0.95 * epochs_128,
            eval_every=epochs_128,
            gamma=gamma_128,
        ),
    }


@click.command(cls=Script)
@click.option("--only", type=click.Choice(["tiny", "d128"]), default=None, help="Run one configuration only.")
@click.option("--epochs-128", type=int, default=12, show_default=True)
@click.option("--gamma-128", type=Number(0, min_open=True), default=0.7, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--threads", type=int, default=1, show_default=True)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Folder of the runs (resumable) [default: a temporary folder, removed after].",
)
def main(only: str | None, epochs_128: int, gamma_128: float, seed: int, threads: int, out: str | None) -> None:
    """Final accuracies and training time, fp32 vs bf16 autocast."""
    torch.set_num_threads(threads)
    click.echo(f"torch {torch.__version__}, {threads} thread(s), seed {seed}")
    configs = {name: opts for name, opts in _configs(epochs_128, gamma_128).items() if only in (None, name)}
    named = {
        f"{name}-{precision}": {k: v for k, v in opts.items() if k != "preset"} | {"precision": precision}
        for name, opts in configs.items()
        for precision in ("fp32", "bf16")
    }
    spec = StudySpec({"preset": "tiny", "task": "symmetric", "seed": seed}, named=named)
    with tempfile.TemporaryDirectory(prefix="bf16-accuracy-") as scratch:
        root = Path(out or scratch)
        jobs = spec.jobs(root)
        try:  # --out: a folder of its own, never nested in a run or in a study that does not name its runs (one line, exit 2)
            refuse_nested(root, "the bf16 comparison", "search", "--out")
            refuse_strangers(jobs, root, "the bf16 comparison", "--out")
            returns = run_study(
                jobs,
                root,
                SerialLauncher(device="cpu", threads=threads),
                held=lambda: record_study(root, "search", jobs),
                kind="search",
            )
        except ValueError as err:
            raise click.UsageError(one_line(str(err))) from None
        failed = [r for r in returns if r.status != "completed"]
        if failed:
            raise click.ClickException(
                f"{failed[0].name} {failed[0].status}: {failed[0].error or 'see its metrics.json'}"
            )
        records = {job.name: RunRecord.read(job.run_dir) for job in spec.jobs(root)}
    click.echo(
        f"{'config':>6} {'precision':>9} {'train':>6} {'ID':>6} {'inferential':>11} {'symmetric':>9} {'final loss':>10} {'time s':>7}"
    )
    for name in configs:
        values = {}
        for precision in ("fp32", "bf16"):
            record = records[f"{name}-{precision}"]
            final = record.final_columns()
            values[precision] = v = [
                final["train_acc"],
                final["id_acc"],
                final["heldout_inferential"],
                final["heldout_symmetric"],
                record.history[-1].loss,
                record.elapsed_s,
            ]
            click.echo(
                f"{name:>6} {precision:>9} {v[0]:>6.3f} {v[1]:>6.3f} {v[2]:>11.3f} {v[3]:>9.3f} {v[4]:>10.4f} {v[5]:>7.1f}"
            )
        d = [b - a for a, b in zip(values["fp32"], values["bf16"])]
        click.echo(
            f"{name:>6} {'bf16-fp32':>9} {d[0]:>+6.3f} {d[1]:>+6.3f} {d[2]:>+11.3f} {d[3]:>+9.3f} {d[4]:>+10.4f} {d[5]:>+7.1f}"
            f"   largest accuracy difference {max(abs(x) for x in d[:4]):.4f}"
        )


if __name__ == "__main__":
    main()
