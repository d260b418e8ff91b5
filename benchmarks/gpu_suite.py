"""The paper-scale checks, in one command: both tasks on the papers' own models, two inits.

For each task (``symmetric`` on the NeurIPS experiments' ``neurips`` model, ``id-ood`` on
the journal's ``journal`` model), gamma 0.8 (small init) and 0.5 (large init), and each
seed, it trains one run folder under ``--out`` and then writes ``--out/gpu_suite.md``: a
markdown table of what each run learned (ID accuracy, the held-out (4,3) against the
inferential and symmetric targets, OOD accuracy and commutativity) and how fast the
device trained it (samples/s, and that rate's matrix-multiply work as a fraction of the
device's matmul peak, measured here on one large square product).

The runs of one task share their shapes, so with ``--ensemble`` (the default on CUDA)
they train together through :func:`training.ensemble.train_ensemble`, one vectorized
step for all of them: one small model leaves most of a GPU idle.

Scale: ``--scale paper`` (the default on a CUDA machine: d_model 400, 900,000 samples,
210 epochs) or ``tiny`` (the default elsewhere; seconds, for a smoke test).
``--epochs`` shortens the schedule (the table says so). Finished runs are read, not
trained again, so a killed suite resumes. Usage::

    python benchmarks/gpu_suite.py --out runs/gpu-suite                       # CUDA: paper scale
    python benchmarks/gpu_suite.py --out runs/gpu-suite --scale paper --epochs 30 --seeds 0
    python benchmarks/gpu_suite.py --out /tmp/suite --scale tiny --device cpu  # a smoke test
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click
import torch

from interp_init import build_model, resolve_device
from training.config import RunConfig, make_run_config
from training.ensemble import train_ensemble
from training.fast import make_optimizer, train_step
from training.loop import read_metrics, train
from training.reproduce import summary_row

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train_step import matmul_peak, step_flops  # noqa: E402  (a sibling script)

#: task -> the architecture of the paper it comes from
TASKS: dict[str, str] = {"symmetric": "neurips", "id-ood": "journal"}
#: regime -> gamma (the NeurIPS paper's two sides of the flip)
GAMMAS: dict[str, float] = {"small-init": 0.8, "large-init": 0.5}


def suite_configs(scale: str, seeds: tuple[int, ...], epochs: int | None) -> dict[str, list[tuple[str, RunConfig]]]:
    """task -> [(regime, config)] for every regime and seed."""
    out: dict[str, list[tuple[str, RunConfig]]] = {}
    for task, architecture in TASKS.items():
        rows = []
        for regime, gamma in GAMMAS.items():
            for seed in seeds:
                extra = {} if epochs is None else _shortened(scale, task, epochs)
                cfg = make_run_config(scale, task=task, architecture=architecture, gamma=gamma, seed=seed, **extra)
                rows.append((regime, cfg))
        out[task] = rows
    return out


def _shortened(scale: str, task: str, epochs: int) -> dict[str, float]:
    """The preset's schedule compressed to ``epochs``: warmup and cosine in proportion."""
    base = make_run_config(scale, task=task).train
    ratio = epochs / base.epochs
    return dict(epochs=epochs, warmup_epochs=base.warmup_epochs * ratio, cosine_epochs=base.cosine_epochs * ratio)


def flops_per_sample(cfg: RunConfig, dev: torch.device, batch: int = 64) -> float:
    """Matrix-multiply FLOPs of one training sample (forward and backward) on the fast path."""
    model = build_model(cfg.model, cfg.init, seed=0, device=dev)
    optimizer = make_optimizer(model, cfg.train)
    tokens = torch.randint(20, 100, (batch, cfg.model.n_ctx), device=dev)
    targets = torch.randint(0, cfg.model.d_vocab, (batch,), device=dev)
    return step_flops(lambda: train_step(model, optimizer, tokens, targets, grad_clip=cfg.train.grad_clip)) / batch


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def markdown(rows: list[dict], speed: dict[str, dict], device_name: str, peak: float, scale: str, epochs: int | None) -> str:
    """The suite's table: one line per run (``rows``: :func:`training.reproduce.summary_row`
    with task, architecture, regime and seed), then one speed line per task."""
    lines = [
        f"Device: {device_name}; torch {torch.__version__}; scale `{scale}`"
        + ("" if epochs is None else f", shortened to {epochs} epochs")
        + f"; fp32 matmul peak measured {peak / 1e12:.1f} TFLOP/s.",
        "",
        "| task | architecture | regime | gamma | seed | ID acc | (4,3) inferential | (4,3) symmetric | OOD acc | commutativity | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['task']} | {r['architecture']} | {r['regime']} | {r['gamma']} | {r['seed']} | {_fmt(r['id_acc'])} "
            f"| {_fmt(r.get('heldout_inferential'))} | {_fmt(r.get('heldout_symmetric'))} | {_fmt(r.get('ood_acc'))} "
            f"| {_fmt(r.get('commutativity'))} | {r['status']} |"
        )
    lines += ["", "| task | runs trained together | wall s | samples/s (all runs) | MFLOP/sample | fraction of fp32 matmul peak |", "|---|---|---|---|---|---|"]
    for task, s in speed.items():
        if s["trained"] == 0:
            lines.append(f"| {task} | 0 (all read from earlier) | - | - | {s['flops'] / 1e6:.2f} | - |")
            continue
        rate = s["samples"] / s["seconds"]
        lines.append(f"| {task} | {s['trained']} | {s['seconds']:.0f} | {rate:,.0f} | {s['flops'] / 1e6:.2f} | {rate * s['flops'] / peak:.1%} |")
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder for the run folders and gpu_suite.md.")
@click.option("--scale", type=click.Choice(["paper", "cpu", "tiny"]), default=None, help="Preset of every run [default: paper on CUDA, else tiny].")
@click.option("--seeds", type=int, multiple=True, default=(0, 1, 2), show_default=True, help="Run seeds (repeat the option).")
@click.option("--epochs", type=int, default=None, help="Shorten every run's schedule to this many epochs [default: the preset's].")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--ensemble/--one-by-one", default=None, help="Train a task's runs together [default: together on CUDA].")
def main(out: str, scale: str | None, seeds: tuple[int, ...], epochs: int | None, device: str, ensemble: bool | None) -> None:
    """Train both tasks on the papers' models at gamma 0.5 and 0.8 and write a markdown table."""
    dev = resolve_device(device)
    scale = scale or ("paper" if dev.type == "cuda" else "tiny")
    ensemble = dev.type == "cuda" if ensemble is None else ensemble
    device_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    root = Path(out)
    rows, speed = [], {}
    for task, runs in suite_configs(scale, tuple(seeds), epochs).items():
        folders = [root / task / f"{regime}-seed{cfg.seed}" for regime, cfg in runs]
        todo = [i for i, f in enumerate(folders) if (read_metrics(f) or {}).get("status") != "completed"]
        click.echo(f"[{task}] {len(runs)} runs, {len(todo)} to train, {'together' if ensemble else 'one by one'}, on {dev}", err=True)
        start = time.perf_counter()
        if todo and ensemble:
            train_ensemble([runs[i][1] for i in todo], [folders[i] for i in todo], device=dev, progress=False)
        else:
            for i in todo:
                train(runs[i][1], folders[i], device=dev, progress=False)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        seconds = time.perf_counter() - start
        cfg0 = runs[0][1]
        samples = sum(runs[i][1].data.n_train * runs[i][1].train.epochs for i in todo)
        speed[task] = {"trained": len(todo), "seconds": seconds, "samples": samples, "flops": flops_per_sample(cfg0, dev)}
        for (regime, cfg), folder in zip(runs, folders):
            row = summary_row(task, cfg, read_metrics(folder), folder)
            rows.append({"task": task, "architecture": cfg.model.architecture, "regime": regime, "seed": cfg.seed, **row})
    peak = matmul_peak(dev, torch.float32, 8192 if dev.type == "cuda" else 1024)
    text = markdown(rows, speed, device_name, peak, scale, epochs)
    (root / "gpu_suite.md").write_text(text)
    click.echo(text)
    failed = [r for r in rows if r["status"] != "completed"]
    if failed:
        raise click.ClickException(f"{len(failed)} run(s) did not complete: see the table's status column")


if __name__ == "__main__":
    main()
