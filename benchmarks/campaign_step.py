"""The campaign's training steps, fastest first, each checked against the plain one and falling back to it.

The paths (:data:`PATHS`), each a step factory for :func:`training.trainer.ensemble.train_ensemble`:

* ``plain``: :class:`training.trainer.ensemble.VmapStep` eager, bf16 autocast where the run asks it:
  the step that ran on the H200 (there compiled), one clipping and one AdamW call per member;
* ``batched``: :class:`BatchedStep`, the same vectorized forward and backward, then every
  member's gradient clipping and AdamW update as one set of operations over the stacked
  parameters (per-member lr, weight decay and clip as tensors): the work per step no longer
  grows with a Python loop over the members;
* ``compiled``: ``batched`` with the vectorized forward compiled (``torch.compile``, as the
  GPU suite compiles it);
* ``graphs`` (CUDA only): :class:`GraphStep`, ``batched`` captured whole (forward, backward,
  clipping, AdamW) in one CUDA graph and replayed, so a step costs one launch; the last,
  smaller batch of an epoch runs eagerly on the same tensors.

A fast path must pass :func:`self_check` before it trains: a few steps of two throwaway runs
through it and through the plain step, whose parameters must agree to a small fraction of
their update (``graphs`` also checks its capture on the real runs, one replay against one
eager step from the same state).  The runner (``gpu_campaign.py``, ``train_part``) goes down
:data:`LADDERS` on any failure, to ``plain`` last.  :class:`TimedStep` wraps whichever step
trains and records where the time goes (steps, between epochs, a probe window of steps) and,
with a profiler, steps it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from gpu_cost import probe_configs

from interp_init import build_model
from interp_init.runfolder import RunStatus
from training.config import RunConfig
from training.trainer.ensemble import VmapStep, train_ensemble
from training.trainer.loop import Member

#: The step paths, fastest first.
PATHS: tuple[str, ...] = ("graphs", "compiled", "batched", "plain")
#: What each path falls back to, in order (the plain path last).
LADDERS: dict[str, tuple[str, ...]] = {"graphs": ("graphs", "batched", "plain"), "compiled": ("compiled", "batched", "plain"),
                                       "batched": ("batched", "plain"), "plain": ("plain",)}  # fmt: skip
#: A fast path's parameters after the self-check's steps may differ from the plain path's by this fraction of their update.
CHECK_TOLERANCE = 0.05
#: Steps the self-check trains.
CHECK_STEPS = 3


class StepCheckFailed(RuntimeError):
    """A fast path's parameters disagreed with the plain path's."""


def _autocast(dev: torch.device, precision: str):
    # the graph-safe autocast: no weight-cast cache (a captured graph must not reuse a cast made outside it)
    return torch.autocast(device_type=dev.type, dtype=torch.bfloat16, cache_enabled=False, enabled=precision == "bf16")


class BatchedStep(VmapStep):
    """:class:`VmapStep`'s vectorized forward and backward, then clipping and AdamW for every
    member at once (see the module docstring).  The members' optimizers keep their state as
    views into the stacked state, so checkpoints save what they always saved."""

    def __init__(self, members: list[Member], logits_fn: Callable, dev: torch.device) -> None:
        super().__init__(members, logits_fn, dev)
        tc = members[0].cfg.train
        self.beta1, self.beta2, self.eps = tc.beta1, tc.beta2, tc.eps
        m = len(members)
        as_tensor = lambda values: torch.tensor(values, dtype=torch.float32, device=dev)  # noqa: E731
        self.weight_decay = as_tensor([x.cfg.train.weight_decay for x in members])
        self.clip = as_tensor([x.cfg.train.grad_clip for x in members])
        self.lr = torch.zeros(m, dtype=torch.float32, device=dev)
        self.keep_grads = False
        states = [x.optimizer.state for x in members]
        first = [states[j].get(p, {}) for j, named in enumerate(self.member_params) for _, p in named[:1]]
        self.steps = as_tensor([float(s.get("step", 0)) for s in first])
        self.exp_avg: dict[str, Tensor] = {}
        self.exp_avg_sq: dict[str, Tensor] = {}
        for k, name in enumerate(self.params):
            for key, store in (("exp_avg", self.exp_avg), ("exp_avg_sq", self.exp_avg_sq)):
                rows = [states[j].get(named[k][1], {}).get(key) for j, named in enumerate(self.member_params)]
                stacked = torch.zeros_like(self.params[name].detach())
                for j, row in enumerate(rows):
                    if row is not None:  # a resumed member's state
                        stacked[j].copy_(row)
                store[name] = stacked
        for j, named in enumerate(self.member_params):  # the members' optimizers see the stacked state
            for k, (name, p) in enumerate(named):
                states[j][p] = {"step": self.steps[j], "exp_avg": self.exp_avg[name][j], "exp_avg_sq": self.exp_avg_sq[name][j]}

    def loss(self, tokens: Tensor, targets: Tensor) -> Tensor:
        params = {f"model.{k}": v for k, v in self.params.items()}
        buffers = {f"model.{k}": v for k, v in self.buffers.items()}
        with sdpa_kernel([SDPBackend.MATH]), _autocast(self.dev, self.precision):
            logits = self.forward(params, buffers, tokens)
        losses = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), reduction="none")
        return losses.view(targets.shape).mean(dim=1)

    def set_lrs(self, members: Sequence[Member]) -> None:
        """The lrs the loop set in the members' optimizers for this step, onto the device."""
        self.lr.copy_(torch.tensor([m.optimizer.param_groups[0]["lr"] for m in members], dtype=torch.float32), non_blocking=True)

    def forward_backward(self, idx: Tensor) -> Tensor:
        tokens = self.train_tokens[self.source[:, None], idx].long()
        targets = self.train_targets[self.source[:, None], idx]
        loss = self.loss(tokens, targets)
        loss.sum().backward()
        return loss.detach()

    @torch.no_grad()
    def update(self, running: Tensor | None = None) -> None:
        """Every member's clipping (at its own total norm, as ``clip_grad_norm_``) and AdamW step
        (as ``torch.optim.AdamW``), on the stacked tensors; ``running``: which members move."""
        names = [n for n in self.params if self.params[n].grad is not None]  # AdamW leaves a parameter without a gradient alone
        grads = [self.params[n].grad for n in names]
        norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads])
        total = torch.linalg.vector_norm(norms, dim=0)
        coef = torch.where(self.clip > 0, (self.clip / (total + 1e-6)).clamp(max=1.0), torch.ones_like(total))
        self.steps.add_(1.0 if running is None else running.float())
        step_size = self.lr / (1 - self.beta1**self.steps)
        bc2_sqrt = (1 - self.beta2**self.steps).sqrt()
        decay = 1 - self.lr * self.weight_decay
        for name, g in zip(names, grads):
            shape = (-1,) + (1,) * (g.ndim - 1)
            p, m, v = self.params[name], self.exp_avg[name], self.exp_avg_sq[name]
            kept = None if running is None else (p.detach().clone(), m.clone(), v.clone())
            g = g * coef.view(shape)
            p.mul_(decay.view(shape))
            m.lerp_(g, 1 - self.beta1)
            v.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
            p.sub_(m / (v.sqrt() / bc2_sqrt.view(shape)).add_(self.eps) * step_size.view(shape))
            if kept is not None:  # a diverged member is no longer updated
                keep = (~running).view(shape)
                for tensor, old in zip((p, m, v), kept):
                    tensor.copy_(torch.where(keep, old, tensor))

    def __call__(self, members: list[Member], idx: Tensor) -> Tensor:
        self.set_lrs(members)
        if self.keep_grads:
            for p in self.params.values():
                if p.grad is not None:
                    p.grad.zero_()  # the captured graph's own gradient tensors: backward adds into them
        loss = self.forward_backward(idx)
        everyone = all(m.status == RunStatus.RUNNING for m in members)
        self.update(None if everyone else torch.tensor([m.status == RunStatus.RUNNING for m in members], device=self.dev))
        if not self.keep_grads:
            for p in self.params.values():
                p.grad = None
        return loss

    def state(self) -> list[Tensor]:
        """The tensors one step changes (a snapshot is their copy)."""
        return [*self.params.values(), *self.exp_avg.values(), *self.exp_avg_sq.values(), self.steps]


class GraphStep(BatchedStep):
    """:class:`BatchedStep` captured in one CUDA graph (see the module docstring)."""

    def __init__(self, members: list[Member], logits_fn: Callable, dev: torch.device) -> None:
        if dev.type != "cuda":
            raise RuntimeError(f"CUDA graphs need a CUDA device, not {dev}")
        super().__init__(members, logits_fn, dev)
        self.batch = members[0].cfg.train.batch_size
        n = self.train_tokens.shape[1]
        self.static_idx = torch.arange(self.batch, device=dev).remainder(n).expand(len(members), -1).contiguous()
        self.set_lrs(members)
        snapshot = [t.detach().clone() for t in self.state()]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the graph (cuBLAS workspaces, autograd's streams)
            for _ in range(3):
                super().__call__(members, self.static_idx)
        torch.cuda.current_stream().wait_stream(side)
        self._restore(snapshot)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_loss = self.forward_backward(self.static_idx)
            self.update()
        self.keep_grads = True
        self._restore(snapshot)  # the check: one replay against one eager step from the same state
        self.graph.replay()
        replayed = [p.detach().clone() for p in self.params.values()]
        self._restore(snapshot)
        super().__call__(members, self.static_idx)
        eager = [p.detach().clone() for p in self.params.values()]
        self._restore(snapshot)
        drift = _relative_drift(replayed, eager, [s for s in snapshot[: len(replayed)]])
        if not drift <= CHECK_TOLERANCE:
            raise StepCheckFailed(f"the captured step's parameters differ from the eager step's by {drift:.3g} of the update")
        self.check = {"capture_drift": drift}

    def _restore(self, snapshot: list[Tensor]) -> None:
        with torch.no_grad():
            for t, s in zip(self.state(), snapshot):
                t.copy_(s)

    def __call__(self, members: list[Member], idx: Tensor) -> Tensor:
        if idx.shape[1] != self.batch or not all(m.status == RunStatus.RUNNING for m in members):
            return super().__call__(members, idx)  # the last, smaller batch, or a member diverged: eagerly
        self.set_lrs(members)
        self.static_idx.copy_(idx)
        self.graph.replay()
        return self.static_loss.clone()


def _relative_drift(a: Sequence[Tensor], b: Sequence[Tensor], start: Sequence[Tensor]) -> float:
    """``|a - b|`` over ``|b - start|``: how far two paths' parameters differ, as a fraction of the update."""
    diff = sum(float((x.float() - y.float()).pow(2).sum()) for x, y in zip(a, b)) ** 0.5
    moved = sum(float((y.float() - s.float()).pow(2).sum()) for y, s in zip(b, start)) ** 0.5
    return diff / moved if moved > 0 else (0.0 if diff == 0 else float("inf"))


def step_factory(path: str) -> Callable | None:
    """The :func:`training.trainer.ensemble.train_ensemble` ``step`` of a path (None: the plain :class:`VmapStep`)."""
    return {"graphs": GraphStep, "compiled": BatchedStep, "batched": BatchedStep, "plain": None}[path]


def self_check(path: str, cfgs: Sequence[RunConfig], dev: torch.device, logits_fn: Callable | None) -> dict[str, Any]:
    """Train throwaway copies of two runs through ``path`` and through the plain step; raise
    :class:`StepCheckFailed` unless their parameters agree to :data:`CHECK_TOLERANCE` of the update."""
    t0 = time.perf_counter()
    probe = probe_configs(list(cfgs[:2]), CHECK_STEPS)
    fast = train_ensemble(probe, None, dev, progress=False, logits_fn=logits_fn, step=step_factory(path))
    plain = train_ensemble(probe, None, dev, progress=False)
    start = [build_model(c.model, c.init, c.seeds["init"], device=dev) for c in probe]
    flat = lambda results: [p.detach() for r in results for p in r.model.parameters()]  # noqa: E731
    drift = _relative_drift(flat(fast), flat(plain), [p.detach() for m in start for p in m.parameters()])
    if not drift <= CHECK_TOLERANCE:
        raise StepCheckFailed(f"the {path} step's parameters differ from the plain step's by {drift:.3g} of the update after {CHECK_STEPS} steps")
    return {"path": path, "drift": drift, "seconds": round(time.perf_counter() - t0, 3)}


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


class TimedStep:
    """Wraps a step: times each epoch's steps (synchronized at the epoch's last step) and the
    time between epochs (evaluation, bookkeeping), a probe window of steps in the first epoch,
    and steps a profiler if given."""

    def __init__(self, inner: Callable, members: Sequence[Member], dev: torch.device, profiler: Any = None) -> None:
        self.inner, self.dev, self.profiler = inner, dev, profiler
        self.batch = members[0].cfg.train.batch_size
        self.per_epoch = -(-len(members[0].data.train) // self.batch)
        self.members = len(members)
        self.calls = 0
        self.epoch_start: list[float] = []
        self.epoch_end: list[float] = []
        self.probe_start = min(10, self.per_epoch // 4)
        self.probe_steps = max(0, min(30, self.per_epoch - self.probe_start - 1))
        self.probe: dict[str, float] | None = None
        self.samples = 0
        self.created = time.perf_counter()

    def __call__(self, members: list[Member], idx: Tensor) -> Tensor:
        k = self.calls % self.per_epoch
        if k == 0:
            self.epoch_start.append(time.perf_counter())
        if self.calls == self.probe_start and self.probe_steps:
            _sync(self.dev)
            self._probe_t0 = time.perf_counter()
        out = self.inner(members, idx)
        self.samples += idx.numel()
        if self.probe_steps and self.calls == self.probe_start + self.probe_steps - 1:
            _sync(self.dev)
            seconds = time.perf_counter() - self._probe_t0
            self.probe = {"steps": self.probe_steps, "seconds": seconds, "samples_per_s": self.probe_steps * self.batch * self.members / seconds}
        if k == self.per_epoch - 1:
            _sync(self.dev)
            self.epoch_end.append(time.perf_counter())
        if self.profiler is not None:
            self.profiler.step()
        self.calls += 1
        return out

    def timing(self, end: float) -> dict[str, Any]:
        """Seconds per epoch of steps and between epochs (the last one until ``end``)."""
        starts = self.epoch_start[1:] + [end]
        return {"steps_s": [round(b - a, 4) for a, b in zip(self.epoch_start, self.epoch_end)],
                "between_s": [round(b - a, 4) for a, b in zip(self.epoch_end, starts)], "probe": self.probe}  # fmt: skip


def timed(path: str, record: list[TimedStep], profiler: Any = None) -> Callable:
    """A step factory for ``path`` whose step is wrapped in a :class:`TimedStep`, kept in ``record``."""
    inner = step_factory(path) or VmapStep

    def make(members: list[Member], logits_fn: Callable, dev: torch.device) -> TimedStep:
        step = TimedStep(inner(members, logits_fn, dev), members, dev, profiler)
        record.append(step)
        return step

    return make


__all__ = ["LADDERS", "PATHS", "BatchedStep", "GraphStep", "StepCheckFailed", "TimedStep", "self_check", "step_factory", "timed"]
