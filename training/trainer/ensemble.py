"""Train many same-shape runs at once with ``torch.func`` (``stack_module_state``, ``vmap``).

:func:`fit_ensemble` takes runs that differ only in what does not change the shape of
the computation: the init (``gamma`` and the per-group gammas, the convention), the
learning-rate schedule (``lr``, ``warmup_start_lr``, ``min_lr``, ``warmup_epochs``,
``cosine_epochs``), ``weight_decay``, ``grad_clip`` and the run ``seed`` (hence the
data, init and shuffling seeds).  It trains them through the same epoch loop as
:func:`training.trainer.loop.fit` (:func:`~training.trainer.loop.run_epochs`: shuffling, schedule,
divergence, history, evaluation, checkpoints, deadline); only the step differs
(:class:`VmapStep`): the models' parameters are stacked (each model's parameters are
views into the stacked tensors), every model's forward and backward runs in one
vectorized call, and then, per model, what :func:`training.trainer.step.train_step` does: the
gradient clipped at the model's own total norm (``torch.nn.utils.clip_grad_norm_``) and
its own ``torch.optim.AdamW`` step (fused where torch has the kernel; the model's own lr
and weight decay) on its slice of the stacked parameters.

Like :func:`~training.trainer.loop.fit` it writes nothing: each run hands its checkpoints
and history to its own :class:`~training.trainer.loop.Sinks`.  :func:`training.train_ensemble`
(:mod:`training.launch.folders`) trains them into the same run folders as
:func:`training.train`: each model's checkpoint is the single-run checkpoint (its model's
and its AdamW's ``state_dict``), so either resumes the other's folder.  Results equal one-by-one training to fp32 rounding
(``tests/training/test_ensemble.py``); ``elapsed_s`` is the ensemble's wall time.

On a GPU, where one small model leaves most of the device idle, this is how a sweep
fills it; on a 2-core CPU it is slower than one by one (benchmarks/README.md).
Attention inside ``vmap`` uses the "math" kernel of ``scaled_dot_product_attention``
(the fused CPU kernel has no batching rule).

Example::

    >>> from training import make_run_config
    >>> from training import train_ensemble
    >>> cfgs = [make_run_config("tiny", gamma=g, weight_decay=wd) for g in (0.5, 0.8) for wd in (0.0, 0.1)]
    >>> results = train_ensemble(cfgs, [f"runs/g{c.init.gamma}_wd{c.train.weight_decay}" for c in cfgs])  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor
from torch.func import functional_call, stack_module_state, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformer_lens import HookedTransformer

from interp_init.config import InitConfig
from interp_init.model import empty_model, resolve_device
from interp_init.runfolder import RunStatus
from training.config import RunConfig
from training.trainer.loop import (
    LogitsFn,
    Member,
    RunData,
    Sinks,
    Step,
    TrainResult,
    check_deadline,
    full_forward_last,
    make_run_data,
    new_member,
    run_epochs,
    start_of,
)
from training.trainer.step import autocast_context, last_position_logits

__all__ = [
    "ENSEMBLE_STEPS",
    "ENSEMBLE_VARYING",
    "BatchedStep",
    "StepFactory",
    "VmapStep",
    "check_ensemble",
    "fit_ensemble",
]

#: The options in which the runs of one ensemble may differ (all else must be equal).
ENSEMBLE_VARYING: frozenset[str] = frozenset(
    {f.name for f in fields(InitConfig)}
    | {
        "lr",
        "warmup_start_lr",
        "min_lr",
        "warmup_epochs",
        "cosine_epochs",
        "weight_decay",
        "grad_clip",
        "seed",
        "init_seed",
        "data_seed",
    }
)


#: What builds an ensemble's step: ``(members, logits_fn, device) -> Step`` (:class:`VmapStep` is one).
StepFactory = Callable[[list[Member], LogitsFn, torch.device], Step]


def check_ensemble(cfgs: Sequence[RunConfig]) -> None:
    """Raise ``ValueError`` unless ``cfgs`` can train together (see :data:`ENSEMBLE_VARYING`)."""
    if not cfgs:
        raise ValueError("train_ensemble needs at least one RunConfig")
    for i, cfg in enumerate(cfgs):
        if not isinstance(cfg, RunConfig):
            raise ValueError(f"configs[{i}] is a {type(cfg).__name__}, not a RunConfig")
    task = cfgs[0].data.make_task()
    if task.output != "last":  # the stacked step's loss reads the last position
        raise ValueError(
            f"task {task.name!r} predicts sequences, and an ensemble trains last-position tasks only; train its runs one by one with train()"
        )
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


def _data_key(cfg: RunConfig) -> tuple[int, ...]:
    """What decides a run's data sets in an ensemble (whose members share the data config):
    the seeds of its splits, so runs of one ``seed`` but another ``data_seed`` get their own."""
    return tuple(seed for source, seed in cfg.seeds.items() if source.startswith("data."))


def fit_ensemble(
    cfgs: Sequence[RunConfig],
    device: str | torch.device | None = "auto",
    progress: bool = True,
    *,
    logits_fn: LogitsFn | None = None,
    deadline: float | None = None,
    states: Sequence[dict | None] | None = None,
    sinks: Sequence[Sinks | None] | None = None,
    step: StepFactory | str | None = None,
    data_fn: Callable[[RunConfig, torch.device], RunData] | None = None,
) -> list[TrainResult]:
    """Train the runs ``cfgs`` together, each from its ``states`` entry (a checkpoint's, if
    given) and handing its progress to its ``sinks`` entry; writes nothing.  The runs must
    resume from the same epoch; ``logits_fn``, ``deadline`` (here it needs every run's
    checkpoint sink) and the results are :func:`training.train_ensemble`'s, which opens the
    run folders around this loop.  ``step`` builds the step from the members, ``logits_fn``
    and the device, or names one of :data:`ENSEMBLE_STEPS` (default :class:`VmapStep`; another
    must keep the members' parameters and optimizers the state that checkpoints save); ``data_fn`` makes a run's data (default
    :func:`training.trainer.loop.make_run_data`; a caller training several ensembles on the
    same data can hand out one copy).
    """
    cfgs = list(cfgs)
    check_ensemble(cfgs)
    states = list(states) if states is not None else [None] * len(cfgs)
    sinks = [s or Sinks() for s in sinks] if sinks is not None else [Sinks()] * len(cfgs)
    if len(states) != len(cfgs) or len(sinks) != len(cfgs):
        raise ValueError(
            f"give one state and one sink per config: {len(cfgs)} configs, {len(states)} states, {len(sinks)} sinks"
        )
    check_deadline(deadline, all(s.checkpoint is not None for s in sinks))
    if isinstance(step, str):
        if step not in ENSEMBLE_STEPS:
            raise ValueError(f"unknown ensemble step {step!r}; the steps are {sorted(ENSEMBLE_STEPS)}")
        step = ENSEMBLE_STEPS[step]
    starts = {start_of(state) for state in states}
    if len(starts) > 1:
        raise ValueError(
            f"the runs stopped at different epochs ({[start_of(s)[0] for s in states]}); finish them one by one with train()"
        )
    if logits_fn is None:
        logits_fn = last_position_logits if cfgs[0].train.fast_forward else full_forward_last
    dev = resolve_device(device)
    first = {_data_key(cfg): cfg for cfg in reversed(cfgs)}  # runs drawing the same data share the first one's
    datas = {key: (data_fn or make_run_data)(cfg, dev) for key, cfg in first.items()}
    members = [
        new_member(cfg, dev, datas[_data_key(cfg)], state, sink) for cfg, state, sink in zip(cfgs, states, sinks)
    ]
    eager_fn = getattr(logits_fn, "_torchdynamo_orig_callable", logits_fn)  # the function a torch.compile wraps
    return run_epochs(
        members,
        (step or VmapStep)(members, logits_fn, dev),
        *starts.pop(),
        dev,
        eager_fn,
        progress=progress,
        deadline=deadline,
        desc=f"ensemble of {len(members)}",
    )


class VmapStep:
    """The ensemble's step (a :data:`training.trainer.loop.Step`): one vectorized forward and backward
    of every member, then each running member's own gradient clipping and AdamW step.

    Built once for the members: their parameters are stacked (``stack_module_state``) and
    each member's parameters become views into the stacked tensors (the same ``Parameter``
    objects, so their optimizers, and checkpoints, are unchanged); an optimizer's in-place
    update is then an update of the stacked tensors the next forward reads.
    """

    def __init__(self, members: list[Member], logits_fn: LogitsFn, dev: torch.device) -> None:
        self.dev, self.precision = dev, members[0].cfg.train.precision
        params, buffers = stack_module_state([m.model for m in members])
        self.params: dict[str, Tensor] = params
        self.buffers: dict[str, Tensor] = buffers
        self.member_params = [list(m.model.named_parameters()) for m in members]
        with torch.no_grad():
            for j, named in enumerate(self.member_params):
                for name, p in named:
                    p.data = params[name].detach()[j]
        plain_fn = getattr(logits_fn, "_torchdynamo_orig_callable", None)  # set on a torch.compile'd function
        self.module = _LogitsModule(
            empty_model(members[0].cfg.model, dev), plain_fn or logits_fn
        )  # a template: its own weights are never read
        # one static graph per batch shape (the last batch of an epoch may be smaller): vmap
        # cannot run on tensors with symbolic sizes
        self.forward = vmap(self._one) if plain_fn is None else torch.compile(vmap(self._one), dynamic=False)
        datas = list({id(m.data): m.data for m in members}.values())  # members of one seed share their data
        self.source = torch.tensor([next(k for k, d in enumerate(datas) if d is m.data) for m in members], device=dev)
        self.train_tokens = torch.stack([d.train.token_ids for d in datas])  # compact; widened per batch
        self.train_targets = torch.stack([d.train.targets for d in datas])

    def loss(
        self, tokens: Int[Tensor, "model batch pos"], targets: Int[Tensor, "model batch"]
    ) -> Float[Tensor, " model"]:
        """Each member's mean last-position cross-entropy on its batch, in one vectorized call."""
        params = {f"model.{k}": v for k, v in self.params.items()}
        buffers = {f"model.{k}": v for k, v in self.buffers.items()}
        with sdpa_kernel([SDPBackend.MATH]), autocast_context(self.dev, self.precision):
            logits = self.forward(params, buffers, tokens)
        losses = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), reduction="none")
        return losses.view(targets.shape).mean(dim=1)

    def _one(self, p: dict, b: dict, tok: Tensor) -> Tensor:
        return functional_call(self.module, (p, b), (tok,))

    def __call__(self, members: list[Member], idx: Int[Tensor, "model batch"]) -> Float[Tensor, " model"]:
        tokens = self.train_tokens[self.source[:, None], idx].long()
        targets = self.train_targets[self.source[:, None], idx]
        loss = self.loss(tokens, targets)
        loss.sum().backward()
        for j, m in enumerate(members):
            if m.status != RunStatus.RUNNING:
                continue  # a diverged member is no longer updated
            for name, p in self.member_params[j]:
                grad = self.params[name].grad
                p.grad = None if grad is None else grad[j]
            if m.cfg.train.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(
                    [p for _, p in self.member_params[j]], m.cfg.train.grad_clip, foreach=True
                )
            m.optimizer.step()
            m.optimizer.zero_grad(set_to_none=True)
        for p in self.params.values():
            p.grad = None
        return loss.detach()


class BatchedStep(VmapStep):
    """:class:`VmapStep`'s vectorized forward and backward, then every running member's
    gradient clipping (at its own total norm, as ``clip_grad_norm_``) and AdamW update (as
    ``torch.optim.AdamW``) as one set of operations over the stacked parameters, each member's
    lr, weight decay and clipping threshold a tensor: the host's work per step no longer grows
    with a loop over the members (1.4-1.5x :class:`VmapStep`'s samples/s with 27 small models
    on the CPU, benchmarks/README.md, "Ensemble vs one by one").  The members' optimizers keep
    their state as views into the stacked state, so checkpoints save what they always saved
    and either step resumes the other's."""

    def __init__(self, members: list[Member], logits_fn: LogitsFn, dev: torch.device) -> None:
        super().__init__(members, logits_fn, dev)
        tc = members[0].cfg.train
        self.beta1, self.beta2, self.eps = tc.beta1, tc.beta2, tc.eps

        def as_tensor(values: Sequence[float]) -> Tensor:
            return torch.tensor(values, dtype=torch.float32, device=dev)

        self.weight_decay = as_tensor([m.cfg.train.weight_decay for m in members])
        self.clip = as_tensor([m.cfg.train.grad_clip for m in members])
        states = [m.optimizer.state for m in members]
        first = [states[j].get(named[0][1], {}) for j, named in enumerate(self.member_params)]
        self.steps = as_tensor([float(s.get("step", 0)) for s in first])
        self.moments: dict[str, dict[str, Tensor]] = {"exp_avg": {}, "exp_avg_sq": {}}
        for k, name in enumerate(self.params):
            for key, store in self.moments.items():
                store[name] = torch.zeros_like(self.params[name].detach())
                for j, named in enumerate(self.member_params):
                    row = states[j].get(named[k][1], {}).get(key)
                    if row is not None:  # a resumed member's state
                        store[name][j].copy_(row)
        for j, named in enumerate(self.member_params):  # the members' optimizers see the stacked state
            for name, p in named:
                states[j][p] = {"step": self.steps[j], **{key: store[name][j] for key, store in self.moments.items()}}

    @torch.no_grad()
    def update(self, lr: Float[Tensor, " model"], running: Tensor | None) -> None:
        """Every member's clipping and AdamW step on the stacked tensors; ``running``: which
        members move (None: all)."""
        names = [
            n for n in self.params if self.params[n].grad is not None
        ]  # AdamW leaves a parameter without one alone
        grads = [self.params[n].grad for n in names]
        norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads])
        total = torch.linalg.vector_norm(norms, dim=0)
        coef = torch.where(self.clip > 0, (self.clip / (total + 1e-6)).clamp(max=1.0), torch.ones_like(total))
        self.steps.add_(1.0 if running is None else running.float())
        step_size = lr / (1 - self.beta1**self.steps)
        bc2_sqrt = (1 - self.beta2**self.steps).sqrt()
        decay = 1 - lr * self.weight_decay
        exp_avg, exp_avg_sq = self.moments["exp_avg"], self.moments["exp_avg_sq"]
        for name, g in zip(names, grads, strict=True):
            shape = (-1,) + (1,) * (g.ndim - 1)
            p, m, v = self.params[name], exp_avg[name], exp_avg_sq[name]
            kept = None if running is None else (p.detach().clone(), m.clone(), v.clone())
            g = g * coef.view(shape)
            p.mul_(decay.view(shape))
            m.lerp_(g, 1 - self.beta1)
            v.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
            p.sub_(m / (v.sqrt() / bc2_sqrt.view(shape)).add_(self.eps) * step_size.view(shape))
            if kept is not None:  # a diverged member is no longer updated
                keep = (~running).view(shape)
                for tensor, old in zip((p, m, v), kept, strict=True):
                    tensor.copy_(torch.where(keep, old, tensor))

    def __call__(self, members: list[Member], idx: Int[Tensor, "model batch"]) -> Float[Tensor, " model"]:
        lr = torch.tensor([m.optimizer.param_groups[0]["lr"] for m in members], dtype=torch.float32).to(self.dev)
        tokens = self.train_tokens[self.source[:, None], idx].long()
        targets = self.train_targets[self.source[:, None], idx]
        loss = self.loss(tokens, targets)
        loss.sum().backward()
        running = [m.status == RunStatus.RUNNING for m in members]
        self.update(lr, None if all(running) else torch.tensor(running, device=self.dev))
        for p in self.params.values():
            p.grad = None
        return loss.detach()


#: The ensemble's steps by name (:func:`fit_ensemble`'s ``step``): ``vmap`` one AdamW call per
#: member, ``batched`` one update of every member at once.
ENSEMBLE_STEPS: dict[str, StepFactory] = {"vmap": VmapStep, "batched": BatchedStep}
