"""The training loop, which knows no folders (`docs/science.md <../docs/science.md#training>`_).

:func:`fit` trains one run and returns its ``HookedTransformer`` with its metrics; its epoch
loop (:func:`run_epochs`) also serves an ensemble (:func:`training.trainer.ensemble.fit_ensemble`):
it runs a list of :class:`Member` runs (one here) and owns the shuffling, the learning-rate
schedule, the divergence check, the history records, the evaluation and checkpoint cadence,
the deadline and the end of each run; what differs is the step (:data:`Step`), which here is
:func:`training.trainer.step.train_step` on the one model.

Like SAELens' ``SAETrainer``, the loop is handed what it needs and writes nothing itself:
each run's data (:class:`RunData`), its evaluation (the task's metrics,
:func:`training.trainer.loop.evaluate`), the state to resume from (a checkpoint's), and
its :class:`Sinks`: where its checkpoints go (the training state and the metrics so far,
after each epoch on the checkpoint cadence and at a deadline) and where its history goes
(each epoch's record as it is made).  The run folder (``config.json``, ``metrics.json``,
the weights, ``checkpoint.pt``) is opened around it by :func:`training.train`
(:mod:`training.launch.folders`), which hands the loop the folder's sinks.  A non-finite
loss stops the run and marks it ``diverged`` with the step.  With ``stop_below_loss`` (the
released code's early stop) a run ends, completed, after the first epoch whose mean training
loss is below it, evaluated there (its metrics record ``stopped_early``: the epoch, its loss
and the threshold; an ensemble's other members train on without it); with ``drop_last`` each
epoch drops the last, partial batch of its shuffled order.  With a ``deadline`` (a
``time.monotonic()`` value) the loop stops after the first epoch at whose end another epoch
as long as it (its measured duration, evaluation included) would end past the deadline, its
checkpoint handed to the sink, and returns a result with ``finished=False``.  Evaluation
follows the config's cadence (:meth:`training.TrainConfig.evaluates`): a history entry
carries the task's metrics only on the epochs evaluated.

Batches are taken by indexing a shuffled tensor on the device (no per-sample
``DataLoader``); the loss is cross-entropy at the last position, or, for a sequence task
(:attr:`interp_init.tasks.base.Task.output` ``"sequence"``), over its target positions
(:func:`training.trainer.step.sequence_loss`), whose evaluation reads every position
(:func:`predict_sequences`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor
from torch.utils._pytree import tree_map
from tqdm.auto import tqdm
from transformer_lens import HookedTransformer

from interp_init.model import build_model, resolve_device
from interp_init.runfolder import RunStatus
from interp_init.tasks.base import IGNORE, RECORD_KEYS, Samples, SequencePredictions, Task, TaskMetrics
from interp_init.tasks.checks import checked_evaluation, checked_split
from training.config import RunConfig
from training.trainer.preflight import check_fits, check_train_arguments
from training.trainer.step import (
    all_position_logits,
    flush_denormals,
    last_position_logits,
    make_optimizer,
    target_logits,
    train_step,
)

__all__ = [
    "LogitsFn",
    "Member",
    "RunData",
    "Sinks",
    "Step",
    "TrainResult",
    "check_deadline",
    "default_logits_fn",
    "evaluate",
    "finish_run",
    "fit",
    "full_forward_all",
    "full_forward_last",
    "hand_checkpoint",
    "make_run_data",
    "new_member",
    "predict",
    "predict_sequences",
    "progress_metrics",
    "run_epochs",
    "start_of",
]

# ------------------------------------------------------------------ accuracy
# A model's metrics on a task's splits: the task's own (:meth:`interp_init.tasks.base.Task.evaluate`)
# on the model's argmax predictions at the last position.
#
# * :func:`predict`: the argmax token at the last position of every input, in batches;
# * :func:`evaluate`: the task's typed metrics (:class:`~interp_init.tasks.base.TaskMetrics`) of
#   a model on a training subset, the ID test set and the held-out set.

LogitsFn = Callable[[HookedTransformer, Tensor], Tensor]


def full_forward_last(model: HookedTransformer, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch vocab"]:
    """``model(tokens)[:, -1]``: the plain hooked forward, last position."""
    return model(tokens)[:, -1]


def full_forward_all(model: HookedTransformer, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos vocab"]:
    """``model(tokens)``: the plain hooked forward, every position (a sequence task's)."""
    return model(tokens)


def default_logits_fn(task: Task, fast_forward: bool) -> LogitsFn:
    """The forward a run of ``task`` trains and evaluates with: the last position's
    (:func:`~training.trainer.step.last_position_logits`) or, for a sequence task, every
    position's (:func:`~training.trainer.step.all_position_logits`); the plain hooked
    forward without ``fast_forward``."""
    if task.output == "sequence":
        return all_position_logits if fast_forward else full_forward_all
    return last_position_logits if fast_forward else full_forward_last


@torch.inference_mode()
def predict_sequences(
    model: HookedTransformer,
    tokens: Int[Tensor, "n pos"],
    targets: Int[Tensor, "n pos"],
    batch_size: int = 512,
    logits_fn: LogitsFn = full_forward_all,
) -> SequencePredictions:
    """A sequence task's predictions at its target positions, in batches: the argmax next
    token (``IGNORE`` at positions without a target: not computed) and the target's negative
    log-likelihood (0 there); the logits come from :func:`~training.trainer.step.target_logits`."""
    targets = targets.long()
    mask = targets != IGNORE
    argmax = torch.full(targets.shape, IGNORE, dtype=torch.long, device=targets.device)
    nll = torch.zeros(targets.shape, device=targets.device)
    for i in range(0, len(tokens), batch_size):
        logits, target = target_logits(model, tokens[i : i + batch_size], targets[i : i + batch_size], logits_fn)
        logits, where = logits.float(), mask[i : i + batch_size]
        argmax[i : i + batch_size][where] = logits.argmax(-1)  # into the slice's view: argmax itself
        nll[i : i + batch_size][where] = torch.nn.functional.cross_entropy(logits, target, reduction="none")
    return SequencePredictions(argmax, nll)


@torch.inference_mode()
def predict(
    model: HookedTransformer,
    tokens: Int[Tensor, "n pos"],
    batch_size: int = 4096,
    logits_fn: LogitsFn = full_forward_last,
) -> Int[Tensor, " n"]:
    """The argmax token at the last position for every input, computed in batches."""
    out = [logits_fn(model, tokens[i : i + batch_size]).argmax(-1) for i in range(0, len(tokens), batch_size)]
    return torch.cat(out)


def evaluate(
    model: HookedTransformer,
    task: Task,
    train: Any,
    id_test: Any,
    heldout: Any | None = None,
    logits_fn: LogitsFn = full_forward_last,
) -> TaskMetrics:
    """The metrics of ``model`` on a train subset, the ID test set and the held-out set, as
    ``task`` defines them (e.g. the ``symmetric`` task's
    :class:`~interp_init.tasks.anchor.SymmetricMetrics`); ``to_json()`` gives what
    ``metrics.json`` records.  The model is evaluated in eval mode and left as it was.
    A sequence task's ``evaluate`` gets :func:`predict_sequences` (``logits_fn`` then gives
    every position's logits: :func:`default_logits_fn`)."""
    was_training = model.training
    model.eval()
    if task.output == "sequence":
        if logits_fn is full_forward_last:
            logits_fn = full_forward_all

        def predictor(tokens: Tensor, targets: Tensor) -> SequencePredictions:
            return predict_sequences(model, tokens, targets, logits_fn=logits_fn)
    else:

        def predictor(tokens: Tensor) -> Tensor:  # type: ignore[misc]
            return predict(model, tokens, logits_fn=logits_fn)

    try:
        return checked_evaluation(task, lambda: task.evaluate(predictor, train, id_test, heldout))
    finally:
        model.train(was_training)


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
    train = checked_split(
        task, "train", d.n_train, seeds["data.train"], cfg.model.d_vocab
    )  # a task's output is checked where it enters
    id_test = checked_split(task, "id_test", d.n_test, seeds["data.id_test"], cfg.model.d_vocab)
    heldout = (
        checked_split(task, "heldout", d.heldout_size, seeds["data.heldout"], cfg.model.d_vocab)
        if task.has_heldout
        else None
    )
    n_eval = min(cfg.train.eval_samples, d.n_train)
    train_eval = train.subset(slice(0, n_eval))
    return RunData(
        train.to(device),
        id_test.to(device),
        heldout.to(device) if heldout is not None else None,
        train_eval.to(device),
        task,
    )


@dataclass
class TrainResult:
    """A run's trained model (eval mode), its metrics (the content of ``metrics.json``) and
    config; ``finished`` is False when a deadline stopped it before its last epoch (its
    metrics say ``"running"``, and ``"interrupted"`` once a run folder recorded the stop,
    :mod:`training.launch.folders`; the same call resumes it)."""

    model: HookedTransformer
    metrics: dict
    config: RunConfig
    finished: bool = True

    def _repr_html_(self) -> str:
        """In Jupyter, a one-row table: task, architecture, gamma, seed, status and the final numbers."""
        import pandas as pd

        final = {
            k: v for k, v in (self.metrics.get("final") or {}).items() if k != "per_pair"
        }  # per pair: metrics["final"]["per_pair"]
        final = pd.json_normalize(final, sep=" ").to_dict("records")
        row = {
            "task": self.config.data.task,
            "architecture": self.config.model.architecture,
            "gamma": self.config.init.gamma,
            "seed": self.config.seed,
            "status": self.metrics.get("status"),
            **(final[0] if final else {}),
        }
        return f"<p><b>TrainResult</b></p>\n{pd.DataFrame([row]).to_html(index=False)}"


@dataclass(frozen=True)
class Sinks:
    """Where a run's progress goes while it trains (the loop writes nothing itself).

    ``checkpoint(state, metrics)``: after each epoch on the checkpoint cadence, and at a
    deadline, the training state to resume from (``config``, ``model`` and ``optimizer``
    state dicts on the CPU, ``epoch``, ``step``, ``history``, ``elapsed_s``: what
    :func:`fit` takes back as ``state``) and the run's metrics so far (status ``running``).
    ``history(record)``: each epoch's history record as it is made (``metrics.json``'s
    ``history`` entry).  None: not kept."""

    checkpoint: Callable[[dict[str, Any], dict[str, Any]], None] | None = None
    history: Callable[[dict[str, Any]], None] | None = None


@dataclass
class Member:
    """One run inside the epoch loop: its model and optimizer (``torch.optim.AdamW``), data,
    sinks and the record of its training so far."""

    cfg: RunConfig
    model: HookedTransformer
    optimizer: torch.optim.Optimizer
    data: RunData
    sinks: Sinks = field(default_factory=Sinks)
    history: list[dict] = field(default_factory=list)
    elapsed: float = 0.0
    status: RunStatus = RunStatus.RUNNING
    diverged_step: int | None = None
    stopped_early: dict | None = None


#: One optimization step of every member on its batch (``idx[j]`` indexes member ``j``'s
#: training set; the learning rates are already in the optimizers); returns each member's
#: loss, detached, on the device.
Step = Callable[[list[Member], Int[Tensor, "model batch"]], Float[Tensor, " model"]]


def check_deadline(deadline: float | None, resumable: bool) -> None:
    """Refuse a ``deadline`` that is not a number, or one without a checkpoint sink to resume from."""
    if deadline is None:
        return
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not math.isfinite(deadline):
        raise ValueError(f"deadline must be a time.monotonic() value (a finite number), got {deadline!r}")
    if not resumable:
        raise ValueError("a deadline needs a run folder (out_dir) to write the checkpoint the next call resumes from")


def start_of(state: dict | None) -> tuple[int, int]:
    """The epoch and step a run resumes from (``(0, 0)`` without a ``state``)."""
    return (int(state["epoch"]), int(state["step"])) if state is not None else (0, 0)


def fit(
    cfg: RunConfig,
    *,
    device: str | torch.device | None = "auto",
    progress: bool = True,
    logits_fn: LogitsFn | None = None,
    deadline: float | None = None,
    state: dict | None = None,
    sinks: Sinks | None = None,
    data: RunData | None = None,
) -> TrainResult:
    """Train the run ``cfg`` (from ``state``, a checkpoint's, if given), handing its progress
    to ``sinks``; writes nothing.  ``logits_fn``, ``deadline`` (here it needs a checkpoint
    sink) and the result are :func:`training.train`'s, which opens the run folder around
    this loop; ``data``: the run's data sets (default: drawn from its seeds)."""
    check_train_arguments(cfg, None)
    sinks = sinks or Sinks()
    check_deadline(deadline, sinks.checkpoint is not None)
    if logits_fn is None:
        logits_fn = default_logits_fn(cfg.data.make_task(), cfg.train.fast_forward)
    dev = resolve_device(device)
    check_fits(cfg, dev)
    member = new_member(cfg, dev, data, state, sinks)

    def single_step(members: list[Member], idx: Int[Tensor, "model batch"]) -> Float[Tensor, " model"]:
        m, tc = members[0], members[0].cfg.train
        loss = train_step(
            m.model,
            m.optimizer,
            m.data.train.batch_tokens(idx[0]),
            m.data.train.targets[idx[0]],
            logits_fn=logits_fn,
            grad_clip=tc.grad_clip,
            precision=tc.precision,
        )
        return loss[None]

    desc = f"{cfg.data.task} gamma={cfg.init.gamma}"
    return run_epochs(
        [member], single_step, *start_of(state), dev, logits_fn, progress=progress, deadline=deadline, desc=desc
    )[0]


def new_member(
    cfg: RunConfig,
    dev: torch.device,
    data: RunData | None = None,
    state: dict | None = None,
    sinks: Sinks | None = None,
) -> Member:
    """A run's :class:`Member`: its model built from its seed, its optimizer
    (:func:`training.trainer.step.make_optimizer`), its data (default: drawn from its seeds),
    the training ``state`` of a checkpoint if given, and its ``sinks``."""
    model = build_model(cfg.model, cfg.init, cfg.seeds["init"], device=dev)
    member = Member(
        cfg,
        model,
        make_optimizer(model, cfg.train),
        data if data is not None else make_run_data(cfg, dev),
        sinks or Sinks(),
    )
    if state is not None:
        member.model.load_state_dict(state["model"])
        member.optimizer.load_state_dict(state["optimizer"])
        member.history, member.elapsed = list(state["history"]), float(state["elapsed_s"])
    return member


@flush_denormals()
def run_epochs(
    members: list[Member],
    step_fn: Step,
    start_epoch: int,
    step: int,
    dev: torch.device,
    logits_fn: LogitsFn,
    *,
    progress: bool,
    deadline: float | None,
    desc: str,
) -> list[TrainResult]:
    """The epoch loop of one run or of an ensemble (see the module docstring); returns one
    :class:`TrainResult` per member, in order.  The members share the shape of the schedule
    (epochs, batch size, evaluation and checkpoint cadence) and stand at ``start_epoch``."""
    tc = members[0].cfg.train
    n = len(members[0].data.train)
    steps_per_epoch = tc.steps_per_epoch(n)  # with drop_last, the last partial batch of each epoch's order is dropped
    bar = tqdm(
        range(start_epoch, tc.epochs),
        initial=start_epoch,
        total=tc.epochs,
        desc=desc,
        disable=not progress,
        unit="epoch",
    )
    for m in members:
        m.model.train()
    stopped, done = False, {}  # done: the results of runs the early stop finished
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
                m.diverged_step = (
                    step - steps_per_epoch + int((~finite[j]).nonzero()[0]) + 1
                )  # 1-based, like history's step counts
                m.status = RunStatus.DIVERGED
                m.elapsed += time.perf_counter() - t0
                continue
            loss = float(
                losses[j].mean()
            )  # the epoch's mean training loss (equal batches with drop_last: the sample mean)
            stops = not last and m.cfg.train.stops_at(loss)  # --stop-below-loss: the run ends here, completed
            evaluation = None
            if (
                tc.evaluates(epoch + 1) or stops
            ):  # the cadence (eval_every, eval_dense_epochs), the last epoch, an early stop
                evaluation = evaluate(
                    m.model, m.data.task, m.data.train_eval, m.data.id_test, m.data.heldout, logits_fn=logits_fn
                )
            # metrics.json's history entry (read back as interp_init.tasks.base.EpochRecord): the epoch's numbers and its evaluation
            record = {"epoch": epoch + 1, "step": step, "loss": loss, "lr": lrs[j]}
            m.history.append(record if evaluation is None else record | evaluation.to_json())
            m.elapsed += time.perf_counter() - t0
            if m.sinks.history is not None:
                m.sinks.history(m.history[-1])
            if stops:  # --stop-below-loss: the run ends here, completed; an ensemble's other members train on
                m.status, m.stopped_early = (
                    RunStatus.COMPLETED,
                    {"epoch": epoch + 1, "loss": loss, "stop_below_loss": m.cfg.train.stop_below_loss},
                )
                done[j] = finish_run(m, dev)
            elif on_cadence:
                hand_checkpoint(m, epoch + 1, step, dev)
        running = [m for m in members if m.status == RunStatus.RUNNING]
        if len(running) == 1 and running[0].history:
            latest = running[0].history[-1]  # the progress bar shows its loss and its measures
            shown = {
                k.replace("_acc", ""): f"{v:.2f}"
                for k, v in latest.items()
                if k not in RECORD_KEYS and isinstance(v, float)
            }
            bar.set_postfix({"loss": f"{latest['loss']:.3f}", **shown})
        # stop before an epoch that, as long as this one, would end past the deadline
        if deadline is not None and not last and running and time.monotonic() + (time.perf_counter() - t0) >= deadline:
            for m in running if not on_cadence else []:  # the checkpoint the next call resumes from
                hand_checkpoint(m, epoch + 1, step, dev)
            stopped = True
            break
    bar.close()
    # a run a deadline stopped has handed its checkpoint and ``running`` metrics to its sink
    unfinished = [stopped and m.status == RunStatus.RUNNING for m in members]
    return [
        done[j]
        if j in done
        else TrainResult(m.model.eval(), progress_metrics(m, dev), m.cfg, False)
        if u
        else finish_run(m, dev)
        for j, (m, u) in enumerate(zip(members, unfinished))
    ]


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
    """The end of a run (the loop's and an ensemble's): its model and metrics.  A run that did
    not diverge has completed; a diverged one records the step (its model is the one that
    diverged: the run folder's last good checkpoint replaces it, :mod:`training.launch.folders`)."""
    status = RunStatus.COMPLETED if member.status == RunStatus.RUNNING else member.status
    # ``final``: the last history record (a completed run's last epoch is always evaluated;
    # a diverged run's is its last good epoch's)
    metrics = progress_metrics(member, dev) | {
        "status": str(status),
        "final": dict(member.history[-1]) if member.history else {},
    }
    if member.diverged_step is not None:
        metrics["diverged_at_step"] = member.diverged_step
    if member.stopped_early is not None:  # why a completed run ended before its last epoch
        metrics["stopped_early"] = member.stopped_early
    return TrainResult(member.model.eval(), metrics, member.cfg)


def progress_metrics(member: Member, dev: torch.device) -> dict:
    """The ``metrics.json`` of a run still training (its checkpoint beside it)."""
    return {
        "status": str(RunStatus.RUNNING),
        "final": {},
        "history": member.history,
        "device": str(dev),
        "elapsed_s": round(member.elapsed, 3),
    }


def hand_checkpoint(member: Member, epoch: int, step: int, dev: torch.device) -> None:
    """Hand ``member``'s training state after ``epoch`` and its ``running`` metrics to its checkpoint sink."""
    if member.sinks.checkpoint is None:
        return
    # copies: an ensemble member's tensors are views into the stacked ones, whose whole
    # storage torch.save would otherwise write
    model = {k: v.detach().to("cpu", copy=True) for k, v in member.model.state_dict().items()}
    optimizer = tree_map(lambda v: v.detach().to("cpu") if isinstance(v, Tensor) else v, member.optimizer.state_dict())
    state = {
        "config": member.cfg.to_dict(),
        "model": model,
        "optimizer": optimizer,
        "epoch": epoch,
        "step": step,
        "history": member.history,
        "elapsed_s": member.elapsed,
    }
    member.sinks.checkpoint(state, progress_metrics(member, dev))
