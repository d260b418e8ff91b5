"""The training loop (`docs/science.md <../docs/science.md#training>`_).

:func:`train` trains one :class:`RunConfig` and returns the ``HookedTransformer`` with
its metrics.  Given ``out_dir`` it writes a run folder through
:class:`interp_init.runfolder.RunFolder` (``config.json``, ``metrics.json``,
``model.safetensors``, ``checkpoint.pt`` while unfinished; every file written
atomically).  The same call after a kill resumes from the checkpoint and ends with the
same weights and metrics as an uninterrupted run on CPU; a finished run is not trained
again.  A non-finite loss stops the run, marks it ``diverged`` with the step, and keeps
its last good checkpoint.

Batches are taken by indexing a shuffled tensor on the device (no per-sample
``DataLoader``); the loss is cross-entropy at the last position.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm
from transformer_lens import HookedTransformer

from interp_init.data import AnchorDataset, make_dataset
from interp_init.model import build_model, empty_model, load_weights, resolve_device
from interp_init.runfolder import FINISHED_STATUSES, BadRunFile, RunFolder, RunStatus
from interp_init.tasks import task_spec
from training.accuracy import LogitsFn, evaluate, full_forward_last
from training.config import RunConfig
from training.fast import last_position_logits, make_optimizer, train_step


def read_metrics(run_dir: str | Path) -> dict | None:
    """The run's ``metrics.json`` (validated), or ``None`` if it has none yet."""
    return RunFolder(run_dir).read_metrics()


@dataclass
class RunData:
    """The datasets of a run, on its device."""

    train: AnchorDataset
    id_test: AnchorDataset
    heldout: AnchorDataset | None
    train_eval: AnchorDataset


def make_run_data(cfg: RunConfig, device: torch.device | str = "cpu") -> RunData:
    """Generate a run's train, ID-test, held-out and train-evaluation sets from its seeds."""
    d, seeds = cfg.data, cfg.seeds
    opts = dict(k=d.k, offset=d.offset)
    train = make_dataset(d.task, "train", d.n_train, seeds["data.train"], **opts)
    id_test = make_dataset(d.task, "id_test", d.n_test, seeds["data.id_test"], **opts)
    heldout = None
    if task_spec(d.task, **opts).heldout_pairs:
        heldout = make_dataset(d.task, "heldout", d.n_test, seeds["data.heldout"], **opts)
    n_eval = min(cfg.train.eval_samples, d.n_train)
    train_eval = train.subset(slice(0, n_eval))
    return RunData(
        train.to(device), id_test.to(device), heldout.to(device) if heldout is not None else None, train_eval.to(device)
    )


@dataclass
class TrainResult:
    model: HookedTransformer
    metrics: dict
    config: RunConfig


def _check_run_dir(folder: RunFolder, cfg: RunConfig) -> bool:
    """True if ``folder`` already holds this run; error if it holds another."""
    if not folder.config_path.exists():
        return False
    try:
        diffs = folder.config_differences(cfg.to_dict())
    except BadRunFile as err:
        raise BadRunFile(err.path, err.problem, "remove the folder or choose another --out") from None
    if diffs:
        raise ValueError(
            f"{folder.path} holds a run with a different config ({'; '.join(diffs[:5])}); "
            "choose another --out or remove that folder"
        )
    return True


def open_run_folder(folder: str | Path | RunFolder, cfg: RunConfig, dev: torch.device) -> tuple[TrainResult | None, dict | None]:
    """Open ``folder`` for the run ``cfg``: ``(finished result, None)`` if the run is done,
    ``(None, checkpoint)`` to resume it, ``(None, None)`` to start it (``config.json`` is
    then written).  A folder holding another run, or one that cannot be written, is
    refused; temporary files left by a killed process are removed.
    """
    folder = folder if isinstance(folder, RunFolder) else RunFolder(folder)
    folder.create()
    folder.sweep_temporary()
    if not _check_run_dir(folder, cfg):
        folder.write_config(cfg.to_dict())
        return None, None
    metrics = folder.read_metrics()
    if metrics is not None and metrics["status"] in FINISHED_STATUSES and folder.weights_path.exists():
        model = empty_model(cfg.model, dev)
        load_weights(model, cfg.model, folder.weights_path)
        folder.check_bound(metrics)
        return TrainResult(model.eval(), metrics, cfg), None
    if folder.checkpoint_path.exists():
        return None, folder.load_checkpoint(cfg.to_dict())
    return None, None


def train(
    cfg: RunConfig,
    out_dir: str | Path | None = None,
    *,
    device: str | torch.device | None = "auto",
    progress: bool = True,
    logits_fn: LogitsFn | None = None,
) -> TrainResult:
    """Train the run ``cfg``; with ``out_dir``, write (or resume) its run folder.

    Returns the trained ``HookedTransformer`` (eval mode, on ``device``) and its metrics
    (the content of ``metrics.json``).  ``logits_fn`` (training and evaluation) defaults
    to :func:`training.fast.last_position_logits` (``cfg.train.fast_forward``, the
    default) or the hooked forward; ``cfg.train.precision="bf16"`` runs the training
    forward under bfloat16 autocast (evaluation stays fp32).
    """
    if logits_fn is None:
        logits_fn = last_position_logits if cfg.train.fast_forward else full_forward_last
    dev = resolve_device(device)
    if out_dir is None:
        return _train(cfg, None, dev, progress, logits_fn)
    folder = RunFolder(out_dir)
    with folder.lock():  # a second process training this folder meanwhile is refused
        return _train(cfg, folder, dev, progress, logits_fn)


def _train(cfg: RunConfig, folder: RunFolder | None, dev: torch.device, progress: bool, logits_fn: LogitsFn) -> TrainResult:
    start_epoch, step, history, elapsed = 0, 0, [], 0.0
    model: HookedTransformer | None = None
    checkpoint = None
    if folder is not None:
        finished, checkpoint = open_run_folder(folder, cfg, dev)
        if finished is not None:
            return finished

    model = build_model(cfg.model, cfg.init, cfg.seeds["init"], device=dev)
    tc = cfg.train
    optimizer = make_optimizer(model, tc)
    if checkpoint is not None:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        start_epoch, step = int(checkpoint["epoch"]), int(checkpoint["step"])
        history, elapsed = list(checkpoint["history"]), float(checkpoint["elapsed_s"])

    data = make_run_data(cfg, dev)
    n = len(data.train)
    steps_per_epoch = math.ceil(n / tc.batch_size)
    status, diverged_step = RunStatus.RUNNING, None
    bar = tqdm(
        range(start_epoch, tc.epochs),
        initial=start_epoch,
        total=tc.epochs,
        desc=f"{cfg.data.task} gamma={cfg.init.gamma}",
        disable=not progress,
        unit="epoch",
    )
    model.train()
    for epoch in bar:
        t0 = time.perf_counter()
        gen = torch.Generator().manual_seed(cfg.seeds["shuffle"] + epoch)
        perm = torch.randperm(n, generator=gen).to(dev)
        losses = torch.zeros(steps_per_epoch, device=dev)
        for i in range(steps_per_epoch):
            idx = perm[i * tc.batch_size : (i + 1) * tc.batch_size]
            lr = tc.lr_at(epoch + i / steps_per_epoch)
            for group in optimizer.param_groups:
                group["lr"] = lr
            losses[i] = train_step(
                model,
                optimizer,
                data.train.batch_tokens(idx),
                data.train.targets[idx],
                logits_fn=logits_fn,
                grad_clip=tc.grad_clip,
                precision=tc.precision,
            )
            step += 1
        finite = torch.isfinite(losses)
        if not bool(finite.all()):
            bad = int((~finite).nonzero()[0])
            diverged_step = step - steps_per_epoch + bad + 1  # 1-based, like history's step counts
            status = RunStatus.DIVERGED
            elapsed += time.perf_counter() - t0
            break
        record: dict[str, Any] = {"epoch": epoch + 1, "step": step, "loss": float(losses.mean()), "lr": lr}
        if (epoch + 1) % tc.eval_every == 0 or epoch + 1 == tc.epochs:
            record.update(evaluate(model, data.train_eval, data.id_test, data.heldout, logits_fn=logits_fn))
            model.train()
        history.append(record)
        elapsed += time.perf_counter() - t0
        bar.set_postfix(progress_postfix(record))
        last = epoch + 1 == tc.epochs
        if folder is not None and not last and (epoch + 1) % tc.checkpoint_every == 0:
            save_checkpoint(folder, cfg, model, optimizer, epoch + 1, step, history, elapsed, dev)
    bar.close()
    return finish_run(cfg, model, data, history, status, diverged_step, elapsed, dev, logits_fn, folder)


def finish_run(
    cfg: RunConfig,
    model: HookedTransformer,
    data: RunData,
    history: list[dict],
    status: RunStatus,
    diverged_step: int | None,
    elapsed: float,
    dev: torch.device,
    logits_fn: LogitsFn,
    folder: RunFolder | None,
) -> TrainResult:
    """End a run (the loop's and an ensemble's): its metrics and, with a folder, its weights,
    metrics and checkpoint (:meth:`RunFolder.finish`).  A run that did not diverge has
    completed; a diverged one keeps its last good checkpoint's weights as its model."""
    if status == RunStatus.RUNNING:
        status = RunStatus.COMPLETED
    metrics = _metrics(cfg, model, data, history, status, diverged_step, elapsed, dev, logits_fn)
    if folder is not None:
        if status == RunStatus.DIVERGED:
            if folder.checkpoint_path.exists():
                model.load_state_dict(folder.load_checkpoint(cfg.to_dict())["model"])
            else:
                model = build_model(cfg.model, cfg.init, cfg.seeds["init"], device=dev)
        metrics = folder.finish(metrics, model, cfg.model)
    return TrainResult(model.eval(), metrics, cfg)


def progress_postfix(record: dict) -> dict[str, str]:
    """The progress bar's summary of one history record."""
    out = {"loss": f"{record['loss']:.3f}"}
    for key in ("train_acc", "id_acc", "ood_acc"):
        if key in record:
            out[key.replace("_acc", "")] = f"{record[key]:.2f}"
    for pair, accs in record.get("heldout", {}).items():
        out[pair] = "/".join(f"{k[:3]} {v:.2f}" for k, v in accs.items())
    return out


def _metrics(cfg, model, data, history, status, diverged_step, elapsed, dev, logits_fn) -> dict:
    final: dict[str, Any] = {}
    if status == RunStatus.COMPLETED:
        final = dict(history[-1]) if history and "train_acc" in history[-1] else {}
        if not final:
            final = {"epoch": cfg.train.epochs, **evaluate(model, data.train_eval, data.id_test, data.heldout, logits_fn)}
    elif history:
        final = dict(history[-1])
    out = {
        "status": str(status),
        "final": final,
        "history": history,
        "device": str(dev),
        "elapsed_s": round(elapsed, 3),
    }
    if diverged_step is not None:
        out["diverged_at_step"] = diverged_step
    return out


def save_checkpoint(folder: RunFolder, cfg: RunConfig, model: HookedTransformer, optimizer: Any, epoch: int, step: int, history: list[dict], elapsed: float, dev: torch.device) -> None:
    """Write the training state after ``epoch`` and a ``running`` metrics.json beside it."""
    state = {
        "config": cfg.to_dict(),
        "model": {k: v.detach().to("cpu") for k, v in model.state_dict().items()},
        "optimizer": _to_cpu(optimizer.state_dict()),
        "epoch": epoch,
        "step": step,
        "history": history,
        "elapsed_s": elapsed,
    }
    folder.save_checkpoint(state)
    progress = {"status": str(RunStatus.RUNNING), "final": {}, "history": history, "device": str(dev), "elapsed_s": round(elapsed, 3)}
    folder.write_metrics(progress)


def _to_cpu(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu")
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_to_cpu(v) for v in obj]
    return obj
