"""The training loop (`docs/science.md <../docs/science.md#training>`_).

:func:`train` trains one :class:`RunConfig` and returns the ``HookedTransformer`` with
its metrics.  Its epoch loop (:func:`run_epochs`) also serves an ensemble
(:func:`training.trainer.ensemble.train_ensemble`): it runs a list of :class:`Member` runs (one
here) and owns the shuffling, the learning-rate schedule, the divergence check, the
history records, the evaluation and checkpoint cadence, the deadline and the end of each
run; what differs is the step (:data:`Step`), which here is
:func:`training.trainer.step.train_step` on the one model.  Given ``out_dir`` it writes a run folder through
:class:`interp_init.runfolder.RunFolder` (``config.json``, ``metrics.json``,
``model.safetensors``, ``checkpoint.pt`` while unfinished; every file written
atomically).  The same call after a kill resumes from the checkpoint and ends with the
same weights and metrics as an uninterrupted run on CPU; a finished run is not trained
again.  A non-finite loss stops the run, marks it ``diverged`` with the step, and keeps
its last good checkpoint.  With a ``deadline`` (a ``time.monotonic()`` value) the loop
stops after the first epoch at whose end another epoch as long as it (its measured
duration, evaluation included) would end past the deadline, its checkpoint written, and
returns a result with ``finished=False``; the same call resumes it, and the chunks end
identical to one uninterrupted run.  Evaluation follows the config's cadence
(:meth:`training.TrainConfig.evaluates`): a history entry carries the task's metrics only
on the epochs evaluated.

Batches are taken by indexing a shuffled tensor on the device (no per-sample
``DataLoader``); the loss is cross-entropy at the last position.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from jaxtyping import Float, Int
from torch import Tensor
from torch.utils._pytree import tree_map
from tqdm.auto import tqdm
from transformer_lens import HookedTransformer

from interp_init.model import build_model, empty_model, load_weights, resolve_device
from interp_init.runfolder import FINISHED_STATUSES, RunFolder, RunStatus
from interp_init.tasks.base import RECORD_KEYS, Samples, Task
from interp_init.tasks.checks import checked_split
from training.config import RunConfig
from training.trainer.accuracy import LogitsFn, evaluate, full_forward_last
from training.trainer.preflight import check_fits, check_train_arguments
from training.trainer.step import flush_denormals, last_position_logits, make_optimizer, train_step


@dataclass
class RunData:
    """The datasets of a run, on its device, and the task that drew them."""

    train: Samples
    id_test: Samples
    heldout: Samples | None
    train_eval: Samples
    task: Task


def make_run_data(cfg: RunConfig, device: torch.device | str = "cpu") -> RunData:
    """Generate a run's train, ID-test, held-out and train-evaluation sets from its seeds."""
    d, seeds, task = cfg.data, cfg.seeds, cfg.data.make_task()
    train = checked_split(task, "train", d.n_train, seeds["data.train"], cfg.model.d_vocab)  # a task's output is checked where it enters
    id_test = checked_split(task, "id_test", d.n_test, seeds["data.id_test"], cfg.model.d_vocab)
    heldout = checked_split(task, "heldout", d.n_test, seeds["data.heldout"], cfg.model.d_vocab) if task.has_heldout else None
    n_eval = min(cfg.train.eval_samples, d.n_train)
    train_eval = train.subset(slice(0, n_eval))
    return RunData(
        train.to(device), id_test.to(device), heldout.to(device) if heldout is not None else None, train_eval.to(device), task
    )


@dataclass
class TrainResult:
    """A run's trained model (eval mode), its metrics (the content of ``metrics.json``) and
    config; ``finished`` is False when a deadline stopped it before its last epoch (its
    metrics then say ``"running"``; the same call resumes it)."""

    model: HookedTransformer
    metrics: dict
    config: RunConfig
    finished: bool = True

    def _repr_html_(self) -> str:
        """In Jupyter, a one-row table: task, architecture, gamma, seed, status and the final numbers."""
        import pandas as pd

        final = {k: v for k, v in (self.metrics.get("final") or {}).items() if k != "per_pair"}  # per pair: metrics["final"]["per_pair"]
        final = pd.json_normalize(final, sep=" ").to_dict("records")
        row = {"task": self.config.data.task, "architecture": self.config.model.architecture, "gamma": self.config.init.gamma,
               "seed": self.config.seed, "status": self.metrics.get("status"), **(final[0] if final else {})}  # fmt: skip
        return f"<p><b>TrainResult</b></p>\n{pd.DataFrame([row]).to_html(index=False)}"


@dataclass
class Member:
    """One run inside the epoch loop: its model and optimizer (``torch.optim.AdamW``), data,
    folder and the record of its training so far."""

    cfg: RunConfig
    folder: RunFolder | None
    model: HookedTransformer
    optimizer: torch.optim.Optimizer
    data: RunData
    history: list[dict] = field(default_factory=list)
    elapsed: float = 0.0
    status: RunStatus = RunStatus.RUNNING
    diverged_step: int | None = None


#: One optimization step of every member on its batch (``idx[j]`` indexes member ``j``'s
#: training set; the learning rates are already in the optimizers); returns each member's
#: loss, detached, on the device.
Step = Callable[[list[Member], Int[Tensor, "model batch"]], Float[Tensor, " model"]]


def open_run_folder(folder: RunFolder, cfg: RunConfig, dev: torch.device) -> tuple[TrainResult | None, dict | None]:
    """Open ``folder`` for the run ``cfg``: ``(finished result, None)`` if the run is done,
    ``(None, checkpoint)`` to resume it, ``(None, None)`` to start it (``config.json`` is
    then written).  A folder holding any file of another run (:meth:`RunFolder.claim`), or
    one that cannot be written, is refused; temporary files left by a killed process are
    removed.
    """
    folder.create()
    folder.sweep_temporary()
    folder.claim(cfg.to_dict())  # another run's files are refused, whichever is missing
    metrics = folder.read_metrics()
    if metrics is not None and metrics["status"] in FINISHED_STATUSES and folder.weights_path.exists():
        model = empty_model(cfg.model, dev)
        load_weights(model, cfg.model, folder.weights_path)
        folder.check_bound(metrics)
        return TrainResult(model.eval(), metrics, cfg), None
    if folder.checkpoint_path.exists():
        return None, folder.load_checkpoint(cfg.to_dict())
    return None, None


def check_deadline(deadline: float | None, has_folders: bool) -> None:
    """Refuse a ``deadline`` that is not a number, or one without a run folder to resume from."""
    if deadline is None:
        return
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not math.isfinite(deadline):
        raise ValueError(f"deadline must be a time.monotonic() value (a finite number), got {deadline!r}")
    if not has_folders:
        raise ValueError("a deadline needs a run folder (out_dir) to write the checkpoint the next call resumes from")


def train(
    cfg: RunConfig, out_dir: str | Path | None = None, *, device: str | torch.device | None = "auto", progress: bool = True,
    logits_fn: LogitsFn | None = None, deadline: float | None = None
) -> TrainResult:
    """Train the run ``cfg``; with ``out_dir``, write (or resume) its run folder.

    Returns the trained ``HookedTransformer`` (eval mode, on ``device``) and its metrics
    (the content of ``metrics.json``).  ``logits_fn`` (training and evaluation) defaults
    to :func:`training.trainer.step.last_position_logits` (``cfg.train.fast_forward``, the
    default) or the hooked forward; ``cfg.train.precision="bf16"`` runs the training
    forward under bfloat16 autocast (evaluation stays fp32).  ``deadline`` (a
    ``time.monotonic()`` value; needs ``out_dir``): after each epoch, if another epoch as
    long as that one would end past the deadline, the run stops before its last epoch with
    its checkpoint on disk; the result then has ``finished=False`` and ``metrics.json``
    says ``"running"``; calling again resumes.
    """
    check_train_arguments(cfg, out_dir)
    check_deadline(deadline, out_dir is not None)
    if logits_fn is None:
        logits_fn = last_position_logits if cfg.train.fast_forward else full_forward_last
    dev = resolve_device(device)
    check_fits(cfg, dev)  # a run that cannot fit is refused before its folder is written
    folder = None if out_dir is None else RunFolder(out_dir)
    with contextlib.nullcontext() if folder is None else folder.lock():  # a second process training this folder meanwhile is refused
        checkpoint = None
        if folder is not None:
            finished, checkpoint = open_run_folder(folder, cfg, dev)
            if finished is not None:
                return finished
        member = new_member(cfg, folder, checkpoint, dev)
        start_epoch, step = (int(checkpoint["epoch"]), int(checkpoint["step"])) if checkpoint is not None else (0, 0)

        def single_step(members: list[Member], idx: Int[Tensor, "model batch"]) -> Float[Tensor, " model"]:
            m, tc = members[0], members[0].cfg.train
            loss = train_step(m.model, m.optimizer, m.data.train.batch_tokens(idx[0]), m.data.train.targets[idx[0]],
                              logits_fn=logits_fn, grad_clip=tc.grad_clip, precision=tc.precision)  # fmt: skip
            return loss[None]

        desc = f"{cfg.data.task} gamma={cfg.init.gamma}"
        return run_epochs([member], single_step, start_epoch, step, dev, logits_fn, progress=progress, deadline=deadline, desc=desc)[0]


def new_member(cfg: RunConfig, folder: RunFolder | None, checkpoint: dict | None, dev: torch.device, data: RunData | None = None) -> Member:
    """A run's :class:`Member`: its model built from its seed, its optimizer
    (:func:`training.trainer.step.make_optimizer`), its data, and the state of ``checkpoint`` if given."""
    model = build_model(cfg.model, cfg.init, cfg.seeds["init"], device=dev)
    member = Member(cfg, folder, model, make_optimizer(model, cfg.train), data if data is not None else make_run_data(cfg, dev))
    if checkpoint is not None:
        member.model.load_state_dict(checkpoint["model"])
        member.optimizer.load_state_dict(checkpoint["optimizer"])
        member.history, member.elapsed = list(checkpoint["history"]), float(checkpoint["elapsed_s"])
    return member



@flush_denormals()
def run_epochs(
    members: list[Member], step_fn: Step, start_epoch: int, step: int, dev: torch.device, logits_fn: LogitsFn, *, progress: bool,
    deadline: float | None, desc: str
) -> list[TrainResult]:
    """The epoch loop of one run or of an ensemble (see the module docstring); returns one
    :class:`TrainResult` per member, in order.  The members share the shape of the schedule
    (epochs, batch size, evaluation and checkpoint cadence) and stand at ``start_epoch``."""
    tc = members[0].cfg.train
    n = len(members[0].data.train)
    steps_per_epoch = math.ceil(n / tc.batch_size)
    bar = tqdm(range(start_epoch, tc.epochs), initial=start_epoch, total=tc.epochs, desc=desc, disable=not progress, unit="epoch")
    for m in members:
        m.model.train()
    stopped = False
    for epoch in bar:
        if not any(m.status == RunStatus.RUNNING for m in members):
            break
        t0 = time.perf_counter()
        perms = _shuffles([m.cfg.seeds["shuffle"] + epoch for m in members], n).to(dev)
        losses = torch.zeros(len(members), steps_per_epoch, device=dev)
        for i in range(steps_per_epoch):
            lrs = [m.cfg.train.lr_at(epoch + i / steps_per_epoch) for m in members]
            for m, lr in zip(members, lrs):
                for group in m.optimizer.param_groups:
                    group["lr"] = lr
            losses[:, i] = step_fn(members, perms[:, i * tc.batch_size : (i + 1) * tc.batch_size])
            step += 1
        finite = torch.isfinite(losses).cpu()
        last = epoch + 1 == tc.epochs
        on_cadence = not last and (epoch + 1) % tc.checkpoint_every == 0
        for j, m in enumerate(members):
            if m.status != RunStatus.RUNNING:
                continue
            if not bool(finite[j].all()):
                m.diverged_step = step - steps_per_epoch + int((~finite[j]).nonzero()[0]) + 1  # 1-based, like history's step counts
                m.status = RunStatus.DIVERGED
                m.elapsed += time.perf_counter() - t0
                continue
            evaluation = None
            if tc.evaluates(epoch + 1):  # the cadence (eval_every, eval_dense_epochs) and the last epoch
                evaluation = evaluate(m.model, m.data.task, m.data.train_eval, m.data.id_test, m.data.heldout, logits_fn=logits_fn)
            # metrics.json's history entry (read back as interp_init.tasks.base.EpochRecord): the epoch's numbers and its evaluation
            record = {"epoch": epoch + 1, "step": step, "loss": float(losses[j].mean()), "lr": lrs[j]}
            m.history.append(record if evaluation is None else record | evaluation.to_json())
            m.elapsed += time.perf_counter() - t0
            if m.folder is not None and on_cadence:
                save_checkpoint(m, epoch + 1, step, dev)
        running = [m for m in members if m.status == RunStatus.RUNNING]
        if len(running) == 1 and running[0].history:
            latest = running[0].history[-1]  # the progress bar shows its loss and its measures
            shown = {k.replace("_acc", ""): f"{v:.2f}" for k, v in latest.items() if k not in RECORD_KEYS and isinstance(v, float)}
            bar.set_postfix({"loss": f"{latest['loss']:.3f}", **shown})
        # stop before an epoch that, as long as this one, would end past the deadline
        if deadline is not None and not last and running and time.monotonic() + (time.perf_counter() - t0) >= deadline:
            for m in running if not on_cadence else []:  # the checkpoint the next call resumes from
                save_checkpoint(m, epoch + 1, step, dev)
            stopped = True
            break
    bar.close()
    # a run a deadline stopped has its checkpoint and ``running`` metrics on disk
    unfinished = [stopped and m.status == RunStatus.RUNNING for m in members]
    return [TrainResult(m.model.eval(), _progress_metrics(m, dev), m.cfg, False) if u else finish_run(m, dev) for m, u in zip(members, unfinished)]


def _shuffles(seeds: list[int], n: int) -> Int[Tensor, "model n"]:
    """One epoch's order of each member's ``n`` training samples (``randperm`` seeded by its
    shuffle seed and the epoch), drawn on threads when there are several (the same orders)."""

    def draw(seed: int) -> Tensor:
        return torch.randperm(n, generator=torch.Generator().manual_seed(seed))

    if len(seeds) == 1:
        return draw(seeds[0])[None]
    with ThreadPoolExecutor(max_workers=min(len(seeds), os.cpu_count() or 1, 16)) as pool:
        return torch.stack(list(pool.map(draw, seeds)))


def finish_run(member: Member, dev: torch.device) -> TrainResult:
    """End a run (the loop's and an ensemble's): its metrics and, with a folder, its weights,
    metrics and checkpoint (:meth:`RunFolder.finish`).  A run that did not diverge has
    completed; a diverged one keeps its last good checkpoint's weights as its model."""
    cfg, model, folder = member.cfg, member.model, member.folder
    status = RunStatus.COMPLETED if member.status == RunStatus.RUNNING else member.status
    # ``final``: the last history record (a completed run's last epoch is always evaluated;
    # a diverged run's is its last good epoch's)
    metrics = _progress_metrics(member, dev) | {"status": str(status), "final": dict(member.history[-1]) if member.history else {}}
    if member.diverged_step is not None:
        metrics["diverged_at_step"] = member.diverged_step
    if folder is not None:
        if status == RunStatus.DIVERGED:
            if folder.checkpoint_path.exists():
                model.load_state_dict(folder.load_checkpoint(cfg.to_dict())["model"])
            else:
                model = build_model(cfg.model, cfg.init, cfg.seeds["init"], device=dev)
        metrics = folder.finish(metrics, model, cfg.model)
    return TrainResult(model.eval(), metrics, cfg)


def _progress_metrics(member: Member, dev: torch.device) -> dict:
    """The ``metrics.json`` of a run still training (its checkpoint beside it)."""
    return {"status": str(RunStatus.RUNNING), "final": {}, "history": member.history, "device": str(dev), "elapsed_s": round(member.elapsed, 3)}


def save_checkpoint(member: Member, epoch: int, step: int, dev: torch.device) -> None:
    """Write ``member``'s training state after ``epoch`` and a ``running`` metrics.json beside it."""
    assert member.folder is not None
    # copies: an ensemble member's tensors are views into the stacked ones, whose whole
    # storage torch.save would otherwise write
    model = {k: v.detach().to("cpu", copy=True) for k, v in member.model.state_dict().items()}
    optimizer = tree_map(lambda v: v.detach().to("cpu") if isinstance(v, Tensor) else v, member.optimizer.state_dict())
    state = {"config": member.cfg.to_dict(), "model": model, "optimizer": optimizer, "epoch": epoch, "step": step, "history": member.history, "elapsed_s": member.elapsed}
    member.folder.save_checkpoint(state)
    member.folder.write_metrics(_progress_metrics(member, dev))
