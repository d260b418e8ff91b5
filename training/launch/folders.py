"""The run folder opened around the trainer (which knows none): :func:`train` one run,
:func:`train_ensemble` same-shape runs together, each into its folder
(:class:`interp_init.runfolder.RunFolder`), held while it trains, opened
(:func:`open_run_folder`: another run's files refused, a finished run read, an unfinished
one resumed from its checkpoint, an earlier try's ``error.txt`` removed), handed to the
trainer as its checkpoint sink (:func:`folder_sinks`) and finished bound together
(:func:`finish_in_folder`; a diverged run keeps its last good checkpoint's weights).  A run
stopped before its end (a deadline, a signal, an error) has ``interrupted`` in its
``metrics.json``.  The same call after a kill ends with the same weights and metrics as an
uninterrupted run.  A concept-graph diffusion run (:mod:`training.trainer.diffusion`, the
kind ``concept-diffusion``, registered here) has its folder opened the same way by
:func:`train_diffusion`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from interp_init.diffusion import ConceptUNet
from interp_init.fileio import atomic_write, file_sha256
from interp_init.model import build_model, empty_model, load_weights, resolve_device
from interp_init.runfolder import FINISHED_STATUSES, RunFolder, RunStatus
from training.config import RunConfig
from training.launch.base import register_run_kind
from training.trainer.diffusion import KIND, DiffusionResult, DiffusionRunConfig, build_diffusion_model, fit_diffusion
from training.trainer.ensemble import StepFactory, check_ensemble, fit_ensemble
from training.trainer.loop import LogitsFn, RunData, Sinks, TrainResult, check_deadline, fit
from training.trainer.preflight import check_fits, check_train_arguments

__all__ = [
    "finish_in_folder",
    "folder_sinks",
    "load_diffusion_run",
    "open_run_folder",
    "train",
    "train_diffusion",
    "train_ensemble",
]


def open_run_folder(folder: RunFolder, cfg: RunConfig, dev: torch.device) -> tuple[TrainResult | None, dict | None]:
    """Open ``folder`` (held by this process) for the run ``cfg``: ``(finished result, None)``
    if the run is done, ``(None, checkpoint)`` to resume it, ``(None, None)`` to start it
    (``config.json`` is then written).  A folder holding any file of another run
    (:meth:`RunFolder.claim`), or one that cannot be written, is refused; temporary files
    left by a killed process, and the ``error.txt`` of an earlier try, are removed."""
    folder.create()
    folder.sweep_temporary()
    folder.claim(cfg.to_dict())  # another run's files are refused, whichever is missing
    folder.error_path.unlink(missing_ok=True)  # this try is the run's status now, not the last one's failure
    metrics = folder.read_metrics()
    if metrics is not None and metrics["status"] in FINISHED_STATUSES and folder.weights_path.exists():
        model = empty_model(cfg.model, dev)
        load_weights(model, cfg.model, folder.weights_path)
        folder.check_bound(metrics)
        return TrainResult(model.eval(), metrics, cfg), None
    if folder.checkpoint_path.exists():
        return None, folder.load_checkpoint(cfg.to_dict())
    return None, None


def folder_sinks(folder: RunFolder) -> Sinks:
    """The trainer's sinks for ``folder``: each checkpoint written as ``checkpoint.pt`` with a
    ``running`` ``metrics.json`` beside it."""

    def checkpoint(state: dict, metrics: dict) -> None:
        folder.save_checkpoint(state)
        folder.write_metrics(metrics)

    return Sinks(checkpoint=checkpoint)


def finish_in_folder(folder: RunFolder, result: TrainResult, dev: torch.device) -> TrainResult:
    """Write a run that ended (:meth:`RunFolder.finish`: weights, then metrics bound to them);
    a diverged run's model is its last good checkpoint's (its init without one).  A run a
    deadline stopped is ``interrupted`` (its checkpoint is on disk; :meth:`RunFolder.mark_interrupted`)."""
    if not result.finished:
        folder.mark_interrupted()
        return replace(result, metrics={**result.metrics, "status": str(RunStatus.INTERRUPTED)})
    cfg, model = result.config, result.model
    if result.metrics["status"] == RunStatus.DIVERGED:
        if folder.checkpoint_path.exists():
            model.load_state_dict(folder.load_checkpoint(cfg.to_dict())["model"])
        else:
            model = build_model(cfg.model, cfg.init, cfg.seeds["init"], device=dev)
    return TrainResult(model.eval(), folder.finish(result.metrics, model, cfg.model), cfg)


def in_folders(
    cfgs: Sequence[RunConfig],
    folders: Sequence[RunFolder],
    dev: torch.device,
    fit_todo: Callable[[list[RunConfig], list[dict | None], list[Sinks]], list[TrainResult]],
) -> list[TrainResult]:
    """Hold ``folders``, open each for its config, train the unfinished ones with ``fit_todo``
    (their configs, checkpoints and sinks) and write each one that ended."""
    with contextlib.ExitStack() as locks:
        for folder in folders:
            locks.enter_context(folder.lock())  # another process training one of them is refused
        opened = [open_run_folder(folder, cfg, dev) for cfg, folder in zip(cfgs, folders)]
        results = [result for result, _ in opened]
        todo = [i for i, result in enumerate(results) if result is None]
        try:
            if todo:
                trained = fit_todo(
                    [cfgs[i] for i in todo], [opened[i][1] for i in todo], [folder_sinks(folders[i]) for i in todo]
                )
                for i, result in zip(todo, trained, strict=True):
                    results[i] = finish_in_folder(folders[i], result, dev)
        except (
            BaseException
        ):  # a signal (SIGTERM, Ctrl-C, a cancelled Slurm job) or an error: the runs it stopped say so
            for i in todo:
                folders[i].mark_interrupted()
            raise
        return results  # type: ignore[return-value]


def train(
    cfg: RunConfig,
    out_dir: str | Path | None = None,
    *,
    device: str | torch.device | None = "auto",
    progress: bool = True,
    logits_fn: LogitsFn | None = None,
    deadline: float | None = None,
) -> TrainResult:
    """Train the run ``cfg``; with ``out_dir``, write (or resume) its run folder.

    Returns the trained ``HookedTransformer`` (eval mode, on ``device``) and its metrics
    (the content of ``metrics.json``).  ``logits_fn`` (training and evaluation) defaults
    to :func:`training.trainer.step.last_position_logits` (``cfg.train.fast_forward``, the
    default) or the hooked forward; ``cfg.train.precision="bf16"`` runs the training
    forward under bfloat16 autocast (evaluation stays fp32).  ``deadline`` (a
    ``time.monotonic()`` value; needs ``out_dir``): after each epoch, once its checkpoint
    is on disk, a passed deadline stops the run before its last epoch; the result then has
    ``finished=False`` and ``metrics.json`` says ``"interrupted"``; calling again resumes.
    The loop itself is :func:`training.trainer.loop.fit`, which writes nothing.
    """
    check_train_arguments(cfg, out_dir)
    check_deadline(deadline, out_dir is not None)
    dev = resolve_device(device)
    if out_dir is None:
        return fit(cfg, device=dev, progress=progress, logits_fn=logits_fn)
    check_fits(cfg, dev)  # a run that cannot fit is refused before its folder is written

    def fit_one(cfgs: list[RunConfig], states: list[dict | None], sinks: list[Sinks]) -> list[TrainResult]:
        return [
            fit(
                cfgs[0],
                device=dev,
                progress=progress,
                logits_fn=logits_fn,
                deadline=deadline,
                state=states[0],
                sinks=sinks[0],
            )
        ]

    return in_folders([cfg], [RunFolder(out_dir)], dev, fit_one)[0]


def train_ensemble(
    cfgs: Sequence[RunConfig],
    out_dirs: Sequence[str | Path] | None = None,
    device: str | torch.device | None = "auto",
    progress: bool = True,
    *,
    logits_fn: LogitsFn | None = None,
    deadline: float | None = None,
    step: StepFactory | str | None = None,
    data_fn: Callable[[RunConfig, torch.device], RunData] | None = None,
) -> list[TrainResult]:
    """Train the same-shape runs ``cfgs`` together (:func:`training.trainer.ensemble.fit_ensemble`);
    with ``out_dirs`` (one per run), write or resume their folders.

    Returns one :class:`~training.trainer.loop.TrainResult` per config, in order, as
    :func:`train` would have returned it.  Runs already finished in their folder are
    loaded, not trained; the others must resume from the same epoch.  ``logits_fn`` is the
    per-model last-position logits function of the vectorized step and of evaluation
    (default: as :func:`train` chooses it).  Given a ``torch.compile``'d one, the step
    compiles its whole vectorized forward (torch cannot ``vmap`` a compiled function from
    eager mode, pytorch/pytorch#128711: it would run eagerly) and evaluation runs the
    function eagerly.  ``deadline`` is :func:`train`'s (needs ``out_dirs``).  ``step`` and
    ``data_fn`` are :func:`~training.trainer.ensemble.fit_ensemble`'s (the step's factory and
    what makes a run's data).
    """
    cfgs = list(cfgs)
    check_ensemble(cfgs)
    if out_dirs is not None and len(out_dirs) != len(cfgs):
        raise ValueError(f"out_dirs has {len(out_dirs)} folders for {len(cfgs)} configs; give one per config or None")
    check_deadline(deadline, out_dirs is not None)
    if out_dirs is None:
        return fit_ensemble(cfgs, device, progress, logits_fn=logits_fn, step=step, data_fn=data_fn)
    folders = [RunFolder(d) for d in out_dirs]
    if len({f.path.resolve() for f in folders}) != len(folders):
        raise ValueError("out_dirs must be distinct folders, one per run")
    dev = resolve_device(device)

    def fit_todo(todo: list[RunConfig], states: list[dict | None], sinks: list[Sinks]) -> list[TrainResult]:
        return fit_ensemble(
            todo,
            dev,
            progress,
            logits_fn=logits_fn,
            deadline=deadline,
            states=states,
            sinks=sinks,
            step=step,
            data_fn=data_fn,
        )

    return in_folders(cfgs, folders, dev, fit_todo)


# ------------------------------------------------------------------ concept-diffusion runs


def _save_weights(folder: RunFolder, model: ConceptUNet) -> None:
    from safetensors.torch import save

    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    atomic_write(
        folder.weights_path,
        save(state, metadata={"run_digest": folder.digest(), "format": "interp-init/1", "kind": KIND}),
    )


def load_diffusion_run(run_dir: str | Path, device: str | torch.device = "cpu") -> DiffusionResult:
    """A finished diffusion run's model (eval mode), metrics and config, its files checked
    bound together (:meth:`RunFolder.check_bound`)."""
    from safetensors.torch import load_file

    folder = RunFolder(run_dir)
    cfg = DiffusionRunConfig.from_dict(folder.read_config(), str(folder.config_path))
    metrics = folder.read_metrics()
    if metrics is None or metrics["status"] not in FINISHED_STATUSES or not folder.weights_path.exists():
        raise ValueError(f"{folder.path} holds no finished run (train it first: the same command resumes it)")
    folder.check_bound(metrics)
    model = ConceptUNet(cfg.model)
    model.load_state_dict(load_file(str(folder.weights_path)))
    return DiffusionResult(model.to(device).eval(), metrics, cfg)


def train_diffusion(
    cfg: DiffusionRunConfig,
    out_dir: str | Path,
    *,
    device: str | torch.device | None = "auto",
    progress: bool = False,
    deadline: float | None = None,
) -> DiffusionResult:
    """Train (or resume, or read) the run ``cfg`` in its folder ``out_dir``, held while it
    trains: another run's files are refused, a finished run is read, an unfinished one
    resumes from its checkpoint; a run stopped before its end says ``interrupted``."""
    if not isinstance(cfg, DiffusionRunConfig):
        raise ValueError(f"train_diffusion takes a DiffusionRunConfig, got {type(cfg).__name__}")
    dev = resolve_device(device)
    folder = RunFolder(out_dir)
    with folder.lock():
        folder.sweep_temporary()
        folder.claim(cfg.to_dict())
        folder.error_path.unlink(missing_ok=True)
        metrics = folder.read_metrics()
        if metrics is not None and metrics["status"] in FINISHED_STATUSES and folder.weights_path.exists():
            return load_diffusion_run(out_dir, dev)
        state = folder.load_checkpoint(cfg.to_dict()) if folder.checkpoint_path.exists() else None

        def checkpoint(saved: dict[str, Any], running: dict[str, Any]) -> None:
            folder.save_checkpoint(saved)
            folder.write_metrics(running)

        try:
            result = fit_diffusion(
                cfg, device=dev, progress=progress, deadline=deadline, state=state, checkpoint=checkpoint
            )
        except BaseException:
            folder.mark_interrupted()
            raise
        if not result.finished:
            folder.mark_interrupted()
            return replace(result, metrics={**result.metrics, "status": str(RunStatus.INTERRUPTED)})
        model = result.model
        if result.metrics["status"] == RunStatus.DIVERGED:
            model = build_diffusion_model(cfg, dev)
            if folder.checkpoint_path.exists():
                model.load_state_dict(folder.load_checkpoint(cfg.to_dict())["model"])
        _save_weights(folder, model)
        metrics = {
            **result.metrics,
            "config_digest": folder.digest(),
            "weights_sha256": file_sha256(folder.weights_path),
        }
        folder.write_metrics(metrics)
        if metrics["status"] == RunStatus.COMPLETED:
            folder.checkpoint_path.unlink(missing_ok=True)
        return DiffusionResult(model.eval(), metrics, cfg)


register_run_kind(KIND, train_diffusion)
