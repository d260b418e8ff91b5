"""What a GPU-suite chunk costs before it is paid: FLOPs, the device's matmul peak, minutes.

* :func:`run_flops` counts one run's matrix-multiply work (``FlopCounterMode``, as
  ``bench_train_step.py`` counts it): a training sample on the fast path (forward and
  backward of :func:`training.trainer.step.last_position_logits`), and an evaluation sample
  (that forward alone); :func:`plan_flops` multiplies them by the samples still to train
  and evaluate (``n_train`` per epoch; ``train_eval``, ``id_test`` and ``heldout`` at each
  evaluation).
* :func:`peaks` measures the device's dense matmul rate in fp32 (TF32 where the process
  allows it) and bf16 on one large square product.
* :func:`probe_efficiency` times a few training steps of throwaway copies of a group's
  runs (same shapes, a throwaway study: :func:`training.launch.run_study` under the ensemble
  launcher, into a temporary folder) and returns the fraction of the peak they reached: the efficiency the
  predictions use before a task has trained; :func:`measured_efficiency` the fraction its
  run folders record once it has (samples trained over ``elapsed_s``, evaluations included).

Run as a script, it prints what the GPU suite's paper-scale population (both tasks, gamma
0.8 and 0.5, three seeds: twelve runs) costs on each common GPU type, at the vendors' stated
dense bf16 peaks and 20% or 40% of them, so that a user knows what to ask a cluster for
(docs/clusters.md)::

    python benchmarks/gpu_cost.py
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from interp_init import build_model
from interp_init.tasks.anchor_pairs import task_spec
from training.config import RunConfig
from training.launch import EnsembleLauncher, Job, run_study
from training.studies.population import reproduction_spec
from training.studies.records import RunRecord
from training.trainer.step import last_position_logits, make_optimizer, train_step

from bench_train_step import matmul_peak, step_flops  # a sibling script (its folder is on the path of a script run)


@dataclass(frozen=True)
class RunFlops:
    """Matrix-multiply FLOPs of one run's samples."""

    train: float  # one training sample: forward and backward
    forward: float  # one evaluation sample: forward only

    def epoch(self, cfg: RunConfig, evaluated: bool) -> float:
        """One epoch of ``cfg``: every training sample, and the evaluation if ``evaluated``."""
        return cfg.data.n_train * self.train + (eval_samples(cfg) * self.forward if evaluated else 0.0)


def eval_samples(cfg: RunConfig) -> int:
    """Samples one evaluation runs forward: train_eval, id_test and (if the task has it) heldout."""
    d = cfg.data
    heldout = bool(task_spec(d.task, k=d.k, offset=d.offset).heldout_pairs)
    return min(cfg.train.eval_samples, d.n_train) + d.n_test + (d.heldout_size if heldout else 0)


def run_flops(cfg: RunConfig, dev: torch.device, batch: int = 16) -> RunFlops:
    """Count one training step and one forward of ``cfg``'s model on ``batch`` samples."""
    model = build_model(cfg.model, cfg.init, seed=0, device=dev)
    optimizer = make_optimizer(model, cfg.train)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(20, 100, (batch, cfg.model.n_ctx), generator=gen).to(dev)
    targets = torch.randint(0, cfg.model.d_vocab, (batch,), generator=gen).to(dev)
    step = step_flops(lambda: train_step(model, optimizer, tokens, targets, grad_clip=cfg.train.grad_clip))
    with torch.no_grad():
        forward = step_flops(lambda: last_position_logits(model, tokens))
    return RunFlops(train=step / batch, forward=forward / batch)


def remaining_flops(cfg: RunConfig, flops: RunFlops, done: int) -> float:
    """FLOPs of epochs ``done + 1 .. epochs`` of ``cfg``, evaluations included (at the
    config's cadence, :meth:`training.TrainConfig.evaluates`)."""
    tc = cfg.train
    return sum(flops.epoch(cfg, tc.evaluates(e + 1)) for e in range(done, tc.epochs))


def peaks(dev: torch.device, size: int | None = None) -> dict[str, float]:
    """Measured dense matmul FLOP/s of ``dev`` (a ``size`` x ``size`` product): ``bf16``, ``fp32``
    without TF32 and ``tf32`` (fp32 with TF32 allowed); the process's setting is restored."""
    size = size or (8192 if dev.type == "cuda" else 1024)
    before, out = torch.get_float32_matmul_precision(), {"bf16": matmul_peak(dev, torch.bfloat16, size)}
    try:
        for key, setting in (("fp32", "highest"), ("tf32", "high")):
            torch.set_float32_matmul_precision(setting)
            out[key] = matmul_peak(dev, torch.float32, size)
    finally:
        torch.set_float32_matmul_precision(before)
    return out


def probe_configs(cfgs: list[RunConfig], steps: int) -> list[RunConfig]:
    """Throwaway copies of ``cfgs``: one epoch of ``steps`` full batches, evaluated once, no warm-up."""
    batch = cfgs[0].train.batch_size
    # one epoch of ``steps`` steps: the schedule shrinks with it (a warm-up longer than the run is refused)
    small = dict(
        n_train=steps * batch,
        n_test=batch,
        eval_samples=batch,
        epochs=1,
        checkpoint_every=1,
        eval_every=1,
        warmup_epochs=0.0,
        cosine_epochs=1.0,
        n_heldout=None,
        balanced_pairs=False,
    )  # throwaway sizes: pairs at random
    return [c.with_options(**small) for c in cfgs]


def probe_efficiency(
    cfgs: list[RunConfig],
    flops: RunFlops,
    peak: float,
    dev: torch.device,
    together: bool,
    logits_fn: Callable | None,
    steps: int = 3,
) -> tuple[float, float]:
    """Fraction of ``peak`` that ``steps`` training steps of ``cfgs`` reach, and the seconds
    the first (warm-up, compilation) call took.  Throwaway models, nothing written: a call of
    1 step and one of ``1 + steps``, each after the warm-up, differ by ``steps`` steps alone
    (set-up, data, evaluation, the run folder's files and any recompilation cancel)."""

    def run(n: int) -> float:
        probe = probe_configs(cfgs if together else cfgs[:1], n)
        with tempfile.TemporaryDirectory(prefix="gpu-cost-probe-") as scratch:
            jobs = [Job(f"probe-{i}", cfg, Path(scratch) / "probe" / f"probe-{i}") for i, cfg in enumerate(probe)]
            _sync(dev)
            t0 = time.perf_counter()
            launcher = EnsembleLauncher(device=str(dev), ensemble_size=None if together else 1, logits_fn=logits_fn)
            returns = run_study(jobs, Path(scratch) / "probe", launcher, kind="sweep")
            _sync(dev)
            seconds = time.perf_counter() - t0
        failed = [r for r in returns if r.status != "completed"]
        if failed:
            raise RuntimeError(f"the efficiency probe's throwaway run {failed[0].status}: {failed[0].error}")
        return seconds

    warmup = run(1)
    base, longer = run(1), run(1 + steps)
    work = (len(cfgs) if together else 1) * steps * cfgs[0].train.batch_size * flops.train
    return work / max(longer - base, 1e-9) / peak, warmup


def measured_efficiency(
    cfgs: list[RunConfig], records: list[RunRecord | None], flops: RunFlops, peak: float, together: bool
) -> float | None:
    """Fraction of ``peak`` the runs' training reached so far, from their records
    (:class:`training.studies.records.RunRecord`; None before any epoch): training FLOPs over
    ``elapsed_s`` (the ensemble's wall time when ``together``, else the runs' sum)."""
    trained = [(c, r) for c, r in zip(cfgs, records) if r is not None and r.epochs_run]
    if not trained:
        return None
    work = sum(r.epochs_run * c.data.n_train * flops.train for c, r in trained)
    elapsed = [r.elapsed_s or 0.0 for _, r in trained]
    seconds = max(elapsed) if together else sum(elapsed)
    return work / seconds / peak if seconds > 0 else None


#: Dense bf16 tensor-core peaks as the vendors state them (TFLOP/s, without sparsity): not measurements.
STATED_BF16_TFLOPS: dict[str, float] = {
    "H200": 989,
    "H100 SXM": 989,
    "H100 PCIe": 756,
    "A100": 312,
    "L40S": 362,
    "A10": 125,
    "L4": 121,
}
#: The fractions of the peak every estimate is given at.
EFFICIENCIES = (0.2, 0.4)


def population_cost(seeds: tuple[int, ...] = (0, 1, 2)) -> tuple[float, int]:
    """FLOPs of the GPU suite's paper-scale population (``interp-init reproduce --preset paper``
    in bf16 on the flip's tasks, every epoch and evaluation) and its run count."""
    spec = reproduction_spec("paper", None, ",".join(map(str, seeds)), "strict", None, precision="bf16")
    by_task: dict[str, list[RunConfig]] = {}
    for job in spec.jobs(Path("/nonexistent-gpu-cost")):
        by_task.setdefault(job.task, []).append(job.config)
    total = 0.0
    for configs in by_task.values():
        flops = run_flops(configs[0], torch.device("cpu"))
        total += sum(remaining_flops(cfg, flops, 0) for cfg in configs)
    return total, sum(map(len, by_task.values()))


def cost_table(total: float, runs: int) -> str:
    """Per GPU type: the stated peak, and hours on one GPU at each of :data:`EFFICIENCIES`."""
    head = (
        "| GPU | stated dense bf16 TFLOP/s | " + " | ".join(f"hours on one GPU at {e:.0%}" for e in EFFICIENCIES) + " |"
    )
    lines = [
        f"The paper-scale population: {runs} runs, {total:.3g} FLOP (training and evaluation).",
        "",
        head,
        "|---|---|" + "---|" * len(EFFICIENCIES),
    ]
    for gpu, tflops in STATED_BF16_TFLOPS.items():
        hours = [total / (tflops * 1e12 * e) / 3600 for e in EFFICIENCIES]
        lines.append(f"| {gpu} | {tflops:g} | " + " | ".join(f"{h:.2f}" for h in hours) + " |")
    return "\n".join(lines)


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


if __name__ == "__main__":
    print(cost_table(*population_cost()))
