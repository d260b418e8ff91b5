"""Train many same-shape runs at once with ``torch.func`` (``stack_module_state``, ``vmap``).

:func:`train_ensemble` takes runs that differ only in what does not change the shape of
the computation: the init (``gamma`` and the per-group gammas, the convention), the
learning-rate schedule (``lr``, ``warmup_start_lr``, ``min_lr``, ``warmup_epochs``,
``cosine_epochs``), ``weight_decay``, ``grad_clip`` and the run ``seed`` (hence the
data, init and shuffling seeds).  It stacks the models' parameters, computes every
model's forward and backward in one vectorized call per step, and applies per model
what :func:`training.train` applies per run:

* gradient clipping at each model's own total gradient norm;
* AdamW with decoupled weight decay, written out by hand so that each model has its
  own lr and weight decay (the update of ``torch.optim.AdamW``: ``p *= 1 - lr * wd``,
  then the bias-corrected Adam step);
* each run's own learning-rate schedule (``TrainConfig.lr_at``), batches and shuffling.

It writes the same run folders as :func:`training.train` (``config.json``,
``metrics.json``, ``model.safetensors``, ``checkpoint.pt`` while unfinished, in the same
format, so either trainer resumes the other's folder), evaluating each model unstacked
with :func:`training.accuracy.evaluate`.  Results equal one-by-one training to rounding
(``tests/test_ensemble.py``); ``elapsed_s`` is the ensemble's wall time.

On a GPU, where one small model leaves most of the device idle, this is how a sweep
fills it; on a 2-core CPU it is slower than one by one (0.6-0.8x, benchmarks/README.md).
Attention inside ``vmap`` uses the "math" kernel of ``scaled_dot_product_attention``
(the fused CPU kernel has no batching rule).

Example::

    >>> from training import make_run_config
    >>> from training.ensemble import train_ensemble
    >>> cfgs = [make_run_config("tiny", gamma=g, weight_decay=wd) for g in (0.5, 0.8) for wd in (0.0, 0.1)]
    >>> results = train_ensemble(cfgs, [f"runs/g{c.init.gamma}_wd{c.train.weight_decay}" for c in cfgs])  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor
from torch.func import functional_call, stack_module_state, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel
from tqdm.auto import tqdm
from transformer_lens import HookedTransformer

from interp_init.config import InitConfig
from interp_init.model import build_model, resolve_device
from interp_init.runfolder import RunFolder, RunStatus
from training.accuracy import LogitsFn, evaluate, full_forward_last
from training.config import RunConfig
from training.fast import autocast_context, last_position_logits, make_optimizer
from training.loop import RunData, TrainResult, finish_run, make_run_data, open_run_folder, progress_postfix, save_checkpoint

__all__ = ["ENSEMBLE_VARYING", "check_ensemble", "train_ensemble"]

#: The options in which the runs of one ensemble may differ (all else must be equal).
ENSEMBLE_VARYING: frozenset[str] = frozenset(
    {f.name for f in fields(InitConfig)}
    | {"lr", "warmup_start_lr", "min_lr", "warmup_epochs", "cosine_epochs", "weight_decay", "grad_clip", "seed"}
)


def check_ensemble(cfgs: Sequence[RunConfig]) -> None:
    """Raise ``ValueError`` unless ``cfgs`` can train together (see :data:`ENSEMBLE_VARYING`)."""
    if not cfgs:
        raise ValueError("train_ensemble needs at least one RunConfig")
    for i, cfg in enumerate(cfgs):
        if not isinstance(cfg, RunConfig):
            raise ValueError(f"configs[{i}] is a {type(cfg).__name__}, not a RunConfig")
    first = cfgs[0].flat()
    for i, cfg in enumerate(cfgs[1:], start=1):
        for name, value in cfg.flat().items():
            if name not in ENSEMBLE_VARYING and value != first[name]:
                raise ValueError(
                    f"configs[0] and configs[{i}] differ in {name} ({first[name]!r} vs {value!r}); an ensemble "
                    f"trains same-shape runs that differ only in {sorted(ENSEMBLE_VARYING)}. "
                    "Train them in separate ensembles (group by the other options) or one by one with train()."
                )


class _LogitsModule(torch.nn.Module):
    """``logits_fn(model, tokens)`` as a module, so that ``functional_call`` can swap its parameters."""

    def __init__(self, model: HookedTransformer, logits_fn: LogitsFn) -> None:
        super().__init__()
        self.model = model
        self.logits_fn = logits_fn

    def forward(self, tokens: Tensor) -> Tensor:
        return self.logits_fn(self.model, tokens)


class _OptimizerView:
    """One model's slice of the stacked AdamW state, as ``torch.optim.AdamW.state_dict()`` has it."""

    def __init__(self, groups: list[dict], state: dict[int, dict[str, Tensor]]) -> None:
        self.groups, self.state = groups, state

    def state_dict(self) -> dict[str, Any]:
        return {"state": self.state, "param_groups": self.groups}


def train_ensemble(
    cfgs: Sequence[RunConfig],
    out_dirs: Sequence[str | Path] | None = None,
    device: str | torch.device | None = "auto",
    progress: bool = True,
) -> list[TrainResult]:
    """Train the runs ``cfgs`` together; with ``out_dirs`` (one per run), write or resume their folders.

    Returns one :class:`training.loop.TrainResult` per config, in order, as
    :func:`training.train` would have returned it.  Runs already finished in their
    folder are loaded, not trained; the others must resume from the same epoch.
    """
    cfgs = list(cfgs)
    check_ensemble(cfgs)
    if out_dirs is not None and len(out_dirs) != len(cfgs):
        raise ValueError(f"out_dirs has {len(out_dirs)} folders for {len(cfgs)} configs; give one per config or None")
    folders = [RunFolder(d) for d in out_dirs] if out_dirs is not None else [None] * len(cfgs)
    if out_dirs is not None and len({f.path.resolve() for f in folders}) != len(folders):
        raise ValueError("out_dirs must be distinct folders, one per run")
    dev = resolve_device(device)
    with contextlib.ExitStack() as locks:
        for folder in folders:
            if folder is not None:
                locks.enter_context(folder.lock())  # another process training one of them is refused
        return _train_ensemble(cfgs, folders, dev, progress)


def _train_ensemble(cfgs: list[RunConfig], folders: list[RunFolder | None], dev: torch.device, progress: bool) -> list[TrainResult]:
    results: list[TrainResult | None] = [None] * len(cfgs)
    checkpoints: list[dict | None] = [None] * len(cfgs)
    for i, (cfg, folder) in enumerate(zip(cfgs, folders)):
        if folder is not None:
            results[i], checkpoints[i] = open_run_folder(folder, cfg, dev)
    todo = [i for i in range(len(cfgs)) if results[i] is None]
    if todo:
        starts = {int(checkpoints[i]["epoch"]) if checkpoints[i] else 0 for i in todo}
        if len(starts) > 1:
            where = {str(folders[i]): int(checkpoints[i]["epoch"]) if checkpoints[i] else 0 for i in todo}
            raise ValueError(f"the unfinished runs stopped at different epochs ({where}); finish them one by one with train()")
        trained = _Ensemble([cfgs[i] for i in todo], [folders[i] for i in todo], [checkpoints[i] for i in todo], dev, progress).run()
        for i, result in zip(todo, trained):
            results[i] = result
    return results  # type: ignore[return-value]


class _Ensemble:
    """The state of one ensemble training: stacked parameters, AdamW moments, data."""

    def __init__(self, cfgs: list[RunConfig], folders: list[RunFolder | None], checkpoints: list[dict | None], dev: torch.device, progress: bool) -> None:
        self.cfgs, self.folders, self.dev, self.progress = cfgs, folders, dev, progress
        self.tc = cfgs[0].train  # the fields shared by all (check_ensemble)
        self.n_models = len(cfgs)
        self.models = [build_model(c.model, c.init, c.seeds["init"], device=dev) for c in cfgs]
        self.groups = [make_optimizer(m, c.train).state_dict()["param_groups"] for m, c in zip(self.models, cfgs)]
        self.names = [name for name, _ in self.models[0].named_parameters()]
        self.start_epoch, self.step = 0, 0
        self.histories: list[list[dict]] = [[] for _ in cfgs]
        self.elapsed = [0.0] * self.n_models
        moments: list[dict[str, tuple[Tensor, Tensor]]] = [{} for _ in cfgs]
        for j, ckpt in enumerate(checkpoints):
            if ckpt is None:
                continue
            self.models[j].load_state_dict(ckpt["model"])
            self.start_epoch, self.step = int(ckpt["epoch"]), int(ckpt["step"])
            self.histories[j], self.elapsed[j] = list(ckpt["history"]), float(ckpt["elapsed_s"])
            state = ckpt["optimizer"]["state"]
            for k, name in enumerate(self.names):
                if k in state:
                    moments[j][name] = (state[k]["exp_avg"].to(dev), state[k]["exp_avg_sq"].to(dev))
        params, buffers = stack_module_state(self.models)
        self.params: dict[str, Tensor] = params
        self.buffers: dict[str, Tensor] = buffers
        self.exp_avg = {n: torch.zeros_like(p) for n, p in params.items()}
        self.exp_avg_sq = {n: torch.zeros_like(p) for n, p in params.items()}
        for j, per_model in enumerate(moments):
            for name, (m, v) in per_model.items():
                self.exp_avg[name][j] = m
                self.exp_avg_sq[name][j] = v
        # Per-run data, shared between runs with the same seed.
        self.data: list[RunData] = []
        by_seed: dict[int, RunData] = {}
        for c in cfgs:
            if c.seed not in by_seed:
                by_seed[c.seed] = make_run_data(c, dev)
            self.data.append(by_seed[c.seed])
        seeds = list(by_seed)
        self.source = torch.tensor([seeds.index(c.seed) for c in cfgs], device=dev)
        self.train_tokens = torch.stack([by_seed[s].train.token_ids for s in seeds])  # compact; widened per batch
        self.train_targets = torch.stack([by_seed[s].train.targets for s in seeds])
        self.logits_fn: LogitsFn = last_position_logits if self.tc.fast_forward else full_forward_last
        self.module = _LogitsModule(copy.deepcopy(self.models[0]), self.logits_fn)
        self.weight_decay = self._per_model([c.train.weight_decay for c in cfgs])
        self.grad_clip = torch.tensor([c.train.grad_clip for c in cfgs], device=dev)

    def _per_model(self, values: list[float]) -> Tensor:
        return torch.tensor(values, device=self.dev, dtype=torch.float32)

    def _loss(self, tokens: Int[Tensor, "model batch pos"], targets: Int[Tensor, "model batch"]) -> Float[Tensor, " model"]:
        params = {f"model.{k}": v for k, v in self.params.items()}
        buffers = {f"model.{k}": v for k, v in self.buffers.items()}

        def one(p: dict, b: dict, tok: Tensor) -> Tensor:
            return functional_call(self.module, (p, b), (tok,))

        with sdpa_kernel([SDPBackend.MATH]), autocast_context(self.dev, self.tc.precision):
            logits = vmap(one)(params, buffers, tokens)
        losses = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), reduction="none")
        return losses.view(targets.shape).mean(dim=1)

    @torch.no_grad()
    def _update(self, lr: Float[Tensor, " model"], step: int) -> None:
        """Per-model gradient clipping, then AdamW (torch's update, per-model lr and decay)."""
        grads = {n: p.grad for n, p in self.params.items()}
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()], dim=1).norm(dim=1)
        clip = torch.where(self.grad_clip > 0, (self.grad_clip / (norms + 1e-6)).clamp(max=1.0), torch.ones_like(norms))
        beta1, beta2, eps = self.tc.beta1, self.tc.beta2, self.tc.eps
        bias1, bias2 = 1 - beta1**step, 1 - beta2**step
        for name, p in self.params.items():
            shape = (-1,) + (1,) * (p.ndim - 1)
            g = grads[name] * clip.view(shape)
            p.mul_((1 - lr * self.weight_decay).view(shape))
            m, v = self.exp_avg[name], self.exp_avg_sq[name]
            m.lerp_(g, 1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            denom = (v.sqrt() / math.sqrt(bias2)).add_(eps)
            p.addcdiv_(m, denom * (bias1 / lr).view(shape), value=-1.0)
            p.grad = None

    @torch.no_grad()
    def _unstack(self, j: int) -> HookedTransformer:
        model = self.models[j]
        for name, p in model.named_parameters():
            p.copy_(self.params[name][j])
        return model

    def _optimizer_view(self, j: int) -> _OptimizerView:
        step = torch.tensor(float(self.step))
        state = {
            k: {"step": step.clone(), "exp_avg": self.exp_avg[name][j].detach(), "exp_avg_sq": self.exp_avg_sq[name][j].detach()}
            for k, name in enumerate(self.names)
        }
        return _OptimizerView(copy.deepcopy(self.groups[j]), state)

    def run(self) -> list[TrainResult]:
        tc, n_models = self.tc, self.n_models
        n = len(self.data[0].train)
        steps_per_epoch = math.ceil(n / tc.batch_size)
        status = [RunStatus.RUNNING] * n_models
        diverged_step: list[int | None] = [None] * n_models
        bar = tqdm(
            range(self.start_epoch, tc.epochs),
            initial=self.start_epoch,
            total=tc.epochs,
            desc=f"ensemble of {n_models}",
            disable=not self.progress,
            unit="epoch",
        )
        for epoch in bar:
            active = [j for j in range(n_models) if status[j] == RunStatus.RUNNING]
            if not active:
                break
            t0 = time.perf_counter()
            perms = torch.stack([torch.randperm(n, generator=torch.Generator().manual_seed(c.seeds["shuffle"] + epoch)) for c in self.cfgs]).to(self.dev)
            losses = torch.zeros(n_models, steps_per_epoch, device=self.dev)
            for i in range(steps_per_epoch):
                idx = perms[:, i * tc.batch_size : (i + 1) * tc.batch_size]
                lr = self._per_model([c.train.lr_at(epoch + i / steps_per_epoch) for c in self.cfgs])
                tokens = self.train_tokens[self.source[:, None], idx].long()
                targets = self.train_targets[self.source[:, None], idx]
                loss = self._loss(tokens, targets)
                loss.sum().backward()
                self.step += 1
                self._update(lr, self.step)
                losses[:, i] = loss.detach()
            finite = torch.isfinite(losses).cpu()
            epoch_time = time.perf_counter() - t0
            for j in active:
                if not bool(finite[j].all()):
                    bad = int((~finite[j]).nonzero()[0])
                    diverged_step[j] = self.step - steps_per_epoch + bad + 1
                    status[j] = RunStatus.DIVERGED
                    self.elapsed[j] += epoch_time
                    continue
                lr_j = self.cfgs[j].train.lr_at(epoch + (steps_per_epoch - 1) / steps_per_epoch)
                record: dict[str, Any] = {"epoch": epoch + 1, "step": self.step, "loss": float(losses[j].mean()), "lr": lr_j}
                if (epoch + 1) % tc.eval_every == 0 or epoch + 1 == tc.epochs:
                    data = self.data[j]
                    record.update(evaluate(self._unstack(j), data.train_eval, data.id_test, data.heldout, logits_fn=self.logits_fn))
                self.histories[j].append(record)
                self.elapsed[j] += time.perf_counter() - t0
                folder = self.folders[j]
                if folder is not None and epoch + 1 != tc.epochs and (epoch + 1) % tc.checkpoint_every == 0:
                    save_checkpoint(
                        folder, self.cfgs[j], self._unstack(j), self._optimizer_view(j), epoch + 1, self.step, self.histories[j], self.elapsed[j], self.dev
                    )
            if len(active) == 1 and self.histories[active[0]]:
                bar.set_postfix(progress_postfix(self.histories[active[0]][-1]))
        bar.close()
        return [self._finish(j, status[j], diverged_step[j]) for j in range(n_models)]

    def _finish(self, j: int, status: RunStatus, diverged_step: int | None) -> TrainResult:
        """As :func:`training.train` ends a run (:func:`training.loop.finish_run`)."""
        return finish_run(
            self.cfgs[j], self._unstack(j), self.data[j], self.histories[j], status, diverged_step, self.elapsed[j], self.dev, self.logits_fn, self.folders[j]
        )
