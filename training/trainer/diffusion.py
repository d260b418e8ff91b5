"""The concept-graph diffusion run (the journal's Fig. 6; docs/concept-graphs.md): its config
(:class:`DiffusionRunConfig`, a kind of run, ``concept-diffusion``), its named sizes
(:data:`DIFFUSION_SIZES`) and its loop (:func:`fit_diffusion`, which writes nothing; the run
folder around it is :func:`training.launch.folders.train_diffusion`, what
:func:`training.launch.execute` calls for it).

A run trains :class:`interp_init.diffusion.ConceptUNet`, gamma-initialized by
:func:`interp_init.gamma_init_module_` (uniform in +-fan_in^-gamma by default, the released
code's rule; 0.5 is PyTorch's default scale), on ``per_code`` renders of each training tuple
(:data:`interp_init.concept_graphs.TRAIN_CODES`) with Adam at ``lr`` decayed linearly to 0 over
the epochs (the released code's), each epoch ``samples_per_epoch`` images drawn with
replacement (the released loader's) in batches of ``batch_size``.  Every random draw is seeded
from the run's seed: the init, the renders, each epoch's images, times and noise (a generator
seeded by the epoch, so a run resumed from a checkpoint after a kill ends with the weights of
an uninterrupted one) and the samples.

At its end a completed run samples ``eval_samples`` images of each unseen tuple
(:data:`~interp_init.concept_graphs.UNSEEN_CODES`) and each training tuple, reads each with
:func:`interp_init.concept_graphs.read_concepts` and records in ``metrics.json``'s ``final``:
per tuple the share of samples with the right shape, size, colour and all three
(``unseen``/``seen``: ``{code: {shape_acc, size_acc, colour_acc, all_acc, empty, n}}``; a
sample that shows no object, ``empty``, is wrong on every concept), and
``id_acc``, the share right on all three over the training tuples (how well the model draws
what it saw).  The run folder is the toolkit's (:class:`interp_init.runfolder.RunFolder`):
``config.json``, ``checkpoint.pt`` while unfinished, ``model.safetensors`` bound to the config
by its digest, ``metrics.json``; a finished run is read, never trained again.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, ClassVar

import torch
from tqdm.auto import tqdm

from interp_init.concept_graphs import TRAIN_CODES, UNSEEN_CODES, ConceptGraphConfig, Concepts, concept_graph_images
from interp_init.config import check_positive_finite
from interp_init.diffusion import ConceptUNet, DDPMSchedule, UNetConfig, ddpm_loss, ddpm_sample
from interp_init.model import resolve_device
from interp_init.module_init import ModuleInitConfig, gamma_init_module_
from interp_init.runfolder import RunStatus
from training.config import derive_seed

__all__ = [
    "DIFFUSION_SIZES",
    "DiffusionData",
    "DiffusionResult",
    "DiffusionRunConfig",
    "DiffusionTrain",
    "build_diffusion_model",
    "diffusion_config",
    "fit_diffusion",
    "judge_samples",
    "sample_code",
]

#: The kind of run (:func:`training.launch.base.run_kind`).
KIND = "concept-diffusion"


def _check_count(name: str, value: Any, low: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


@dataclass(frozen=True)
class DiffusionData:
    """The data of a run: ``per_code`` renders of each training tuple (the released code's 280),
    and ``eval_samples`` samples of each tuple judged at the end (its ``n_sample``, 64)."""

    per_code: int = 280
    eval_samples: int = 64

    def __post_init__(self) -> None:
        _check_count("per_code", self.per_code)
        _check_count("eval_samples", self.eval_samples)


@dataclass(frozen=True)
class DiffusionTrain:
    """The optimization: Adam at ``lr`` decayed linearly to 0 over ``epochs``, each epoch
    ``samples_per_epoch`` images in batches of ``batch_size``; ``checkpoint.pt`` every
    ``checkpoint_every`` epochs."""

    epochs: int = 300
    samples_per_epoch: int = 5000
    batch_size: int = 64
    lr: float = 1e-4
    checkpoint_every: int = 1

    def __post_init__(self) -> None:
        for name in ("epochs", "samples_per_epoch", "batch_size", "checkpoint_every"):
            _check_count(name, getattr(self, name))
        check_positive_finite("lr", self.lr)

    @property
    def steps_per_epoch(self) -> int:
        return -(-self.samples_per_epoch // self.batch_size)

    def lr_at(self, epoch: int) -> float:
        """The released code's linear decay: ``lr * (1 - epoch / epochs)``."""
        return self.lr * (1 - epoch / self.epochs)


_SECTIONS: dict[str, type] = {
    "model": UNetConfig,
    "init": ModuleInitConfig,
    "schedule": DDPMSchedule,
    "data": DiffusionData,
    "train": DiffusionTrain,
}
#: The random sources of a run, each seeded from its seed (:func:`training.config.derive_seed`).
SOURCES: tuple[str, ...] = ("init", "data", "epochs", "samples")


@dataclass(frozen=True)
class DiffusionRunConfig:
    """Everything that makes a concept-graph diffusion run; written to its ``config.json``.
    ``size`` names the :data:`DIFFUSION_SIZES` entry it came from (a label)."""

    kind: ClassVar[str] = KIND
    model: UNetConfig = field(default_factory=UNetConfig)
    init: ModuleInitConfig = field(default_factory=lambda: ModuleInitConfig(gamma=0.5, distribution="uniform"))
    schedule: DDPMSchedule = field(default_factory=DDPMSchedule)
    data: DiffusionData = field(default_factory=DiffusionData)
    train: DiffusionTrain = field(default_factory=DiffusionTrain)
    seed: int = 0
    size: str | None = None

    def __post_init__(self) -> None:
        for name, cls in _SECTIONS.items():
            if not isinstance(getattr(self, name), cls):
                raise ValueError(f"{name} must be a {cls.__name__}, got {type(getattr(self, name)).__name__}")
        _check_count("seed", self.seed, 0)
        if self.size is not None and not isinstance(self.size, str):
            raise ValueError(f"size must be a name or None, got {self.size!r}")
        if self.init.unknown != "error" or self.init.norms != "reset":
            raise ValueError(
                "a diffusion run resets its norms and knows every parameter's fan-in: keep norms and unknown at their defaults"
            )
        ConceptGraphConfig(image_size=self.model.image_size)  # the renders must fit the image size

    @property
    def images(self) -> ConceptGraphConfig:
        """How the run's images are rendered (at the model's image size)."""
        return ConceptGraphConfig(image_size=self.model.image_size)

    @property
    def seeds(self) -> dict[str, int]:
        return {name: derive_seed(self.seed, f"diffusion.{name}") for name in SOURCES}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": KIND, **{name: asdict(getattr(self, name)) for name in _SECTIONS}}
        return out | {"seed": self.seed, "size": self.size, "seeds": self.seeds}

    @classmethod
    def from_dict(cls, data: Any, where: str = "config") -> DiffusionRunConfig:
        """A config from its ``to_dict`` form; a problem is one ``ValueError`` naming ``where``."""
        if not isinstance(data, dict) or data.get("kind") != KIND:
            raise ValueError(f'{where} is not a {KIND} run\'s config (no "kind": "{KIND}")')
        unknown = sorted(set(data) - {*_SECTIONS, "kind", "seed", "size", "seeds"})
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {unknown}")
        try:
            parts = {}
            for name, section in _SECTIONS.items():
                values = data.get(name, {})
                if not isinstance(values, dict):
                    raise ValueError(f"[{name}] must be an object")
                extra = sorted(set(values) - {f.name for f in fields(section)})
                if extra:
                    raise ValueError(f"[{name}] has unknown field(s) {extra}")
                parts[name] = section(**values)
            config = cls(**parts, seed=data.get("seed", 0), size=data.get("size"))
        except (ValueError, TypeError) as err:
            raise ValueError(f"{where}: {err}") from None
        if "seeds" in data and data["seeds"] != config.seeds:
            raise ValueError(f"{where}: its seeds are not the ones its seed gives; restore the file")
        return config


def _tiny() -> dict[str, Any]:
    # Seconds on a CPU: for tests and smoke runs; draws noise.
    return {
        "model": UNetConfig(image_size=16, n_feat=8),
        "schedule": DDPMSchedule(n_steps=10, beta_start=0.1, beta_end=0.6),
        "data": DiffusionData(per_code=8, eval_samples=4),
        "train": DiffusionTrain(epochs=2, samples_per_epoch=64, batch_size=32, lr=1e-3),
    }


def _cpu() -> dict[str, Any]:
    # One thread of a CPU: width 16 at 32 pixels, 200 diffusion steps, 50 epochs of the
    # released code's 5,000 images (3,950 steps); docs/concept-graphs.md states its minutes.
    # Fewer steps with the released betas would leave x_T far from noise (alphabar_200 near
    # e^-2): the betas are the released ones scaled by 500 / 200, so that alphabar at the
    # last step is the released schedule's (near e^-5).
    return {
        "model": UNetConfig(image_size=32, n_feat=16),
        "schedule": DDPMSchedule(n_steps=200, beta_start=2.5e-4, beta_end=0.05),
        "data": DiffusionData(per_code=280, eval_samples=64),
        "train": DiffusionTrain(epochs=50),
    }


def _paper() -> dict[str, Any]:
    # The released code's: width 256 at 64 pixels, 500 steps, 300 epochs (for a GPU).
    return {
        "model": UNetConfig(image_size=64, n_feat=256),
        "schedule": DDPMSchedule(n_steps=500),
        "data": DiffusionData(per_code=280, eval_samples=64),
        "train": DiffusionTrain(epochs=300),
    }


#: The named sizes of a diffusion run, each a function returning its sections: ``tiny``
#: (tests, seconds), ``cpu`` (width 16, 32 px, 200 steps with the released betas scaled by
#: 500/200, 50 epochs) and ``paper`` (the released code's width 256, 64 px, 500 steps, 300 epochs).
DIFFUSION_SIZES: dict[str, Any] = {"tiny": _tiny, "cpu": _cpu, "paper": _paper}


def diffusion_config(
    size: str = "cpu", *, gamma: float = 0.5, distribution: str = "uniform", seed: int = 0, **train: Any
) -> DiffusionRunConfig:
    """A run of a named size at ``gamma`` (``distribution`` ``uniform`` or ``normal``) and
    ``seed``; ``train``: :class:`DiffusionTrain` fields to override (``epochs=...``)."""
    if size not in DIFFUSION_SIZES:
        raise ValueError(f"unknown diffusion size {size!r}; choose one of {sorted(DIFFUSION_SIZES)}")
    parts = DIFFUSION_SIZES[size]()
    unknown = sorted(set(train) - {f.name for f in fields(DiffusionTrain)})
    if unknown:
        raise ValueError(f"unknown training option(s) {unknown}; allowed: {[f.name for f in fields(DiffusionTrain)]}")
    parts["train"] = replace(parts["train"], **train)
    init = ModuleInitConfig(gamma=gamma, distribution=distribution)  # type: ignore[arg-type]
    return DiffusionRunConfig(**parts, init=init, seed=seed, size=size)


def build_diffusion_model(cfg: DiffusionRunConfig, device: torch.device | str = "cpu") -> ConceptUNet:
    """The run's U-Net, gamma-initialized from its init seed (draws on the CPU), on ``device``."""
    model = ConceptUNet(cfg.model)
    gamma_init_module_(model, config=cfg.init, seed=cfg.seeds["init"])
    return model.to(device)


def sample_code(model: ConceptUNet, cfg: DiffusionRunConfig, code: str, n: int | None = None) -> torch.Tensor:
    """The run's ``eval_samples`` samples of the tuple ``code`` (the first ``n`` of them, drawn
    alike), clipped to [0, 1], on the CPU: the images :func:`judge_samples` reads at the run's
    end (seeded by the run and the tuple)."""
    n_all = cfg.data.eval_samples
    concepts = torch.tensor([list(Concepts.from_code(code))] * n_all)
    generator = torch.Generator().manual_seed(cfg.seeds["samples"] + int(code, 2))
    was_training = model.training
    model.eval()
    try:
        images = ddpm_sample(model, cfg.schedule, concepts, generator, batch_size=n_all)
    finally:
        model.train(was_training)
    return images[: n_all if n is None else n].clamp(0, 1)


def judge_samples(images: torch.Tensor, code: str, config: ConceptGraphConfig) -> dict[str, float | int]:
    """The share of ``images`` that :func:`~interp_init.concept_graphs.read_concepts` reads
    with the right shape, size, colour and all three, of tuple ``code``; ``empty``: the share
    that shows no object (blank, a speck or faint smear, a field or noise filling the frame, a
    streak: :func:`~interp_init.concept_graphs.object_problem`), each wrong on every concept;
    ``n``: how many."""
    from interp_init.concept_graphs import read_concepts

    want = Concepts.from_code(code)
    read = [read_concepts(image.numpy(), config) for image in images]
    n = len(read)
    right = {
        name: sum(r is not None and getattr(r, name) == getattr(want, name) for r in read) / n
        for name in ("shape", "size", "colour")
    }
    return {
        **{f"{name}_acc": value for name, value in right.items()},
        "all_acc": sum(r == want for r in read) / n,
        "empty": sum(r is None for r in read) / n,
        "n": n,
    }


def _evaluation(model: ConceptUNet, cfg: DiffusionRunConfig) -> dict[str, Any]:
    unseen = {code: judge_samples(sample_code(model, cfg, code), code, cfg.images) for code in UNSEEN_CODES}
    seen = {code: judge_samples(sample_code(model, cfg, code), code, cfg.images) for code in TRAIN_CODES}
    return {"id_acc": sum(s["all_acc"] for s in seen.values()) / len(seen), "unseen": unseen, "seen": seen}


@dataclass
class DiffusionResult:
    """A run's model (eval mode), its metrics (``metrics.json``) and config; ``finished`` is
    False when a deadline stopped it (its checkpoint written; the same call resumes)."""

    model: ConceptUNet
    metrics: dict[str, Any]
    config: DiffusionRunConfig
    finished: bool = True


def fit_diffusion(
    cfg: DiffusionRunConfig,
    *,
    device: str | torch.device | None = "auto",
    progress: bool = False,
    deadline: float | None = None,
    state: dict[str, Any] | None = None,
    checkpoint: Any = None,
) -> DiffusionResult:
    """Train the run ``cfg`` (from a checkpoint's ``state`` if given); writes nothing itself:
    ``checkpoint(state, metrics)`` receives the training state every ``checkpoint_every``
    epochs and at a ``deadline`` (a ``time.monotonic()`` value: the run stops after the first
    epoch at whose end another as long would pass it, ``finished=False``).  A non-finite loss
    ends the run ``diverged`` (its model the last checkpoint's, or its init)."""
    from training.trainer.loop import check_deadline

    check_deadline(deadline, checkpoint is not None)
    dev = resolve_device(device)
    model = build_diffusion_model(cfg, dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr)
    history: list[dict[str, Any]] = []
    start, step, elapsed = 0, 0, 0.0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        history, elapsed = list(state["history"]), float(state["elapsed_s"])
        start, step = int(state["epoch"]), int(state["step"])
    data = concept_graph_images(TRAIN_CODES, cfg.data.per_code, seed=cfg.seeds["data"] % 2**32, config=cfg.images)
    images, concepts = data.images.to(dev), data.concepts.to(dev)
    tc, size = cfg.train, cfg.model.image_size

    def hand(epoch: int, status: str = str(RunStatus.RUNNING)) -> None:
        if checkpoint is None:
            return
        saved = {
            "config": cfg.to_dict(),
            "model": {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()},
            "optimizer": optimizer.state_dict(),
            "epoch": epoch,
            "step": step,
            "history": history,
            "elapsed_s": elapsed,
        }
        checkpoint(saved, _metrics(status, history, dev, elapsed))

    model.train()
    bar = tqdm(
        range(start, tc.epochs),
        initial=start,
        total=tc.epochs,
        disable=not progress,
        unit="epoch",
        desc=f"concept-diffusion gamma={cfg.init.gamma}",
    )
    diverged_at, stopped = None, False
    for epoch in bar:
        t0 = time.perf_counter()
        lr = tc.lr_at(epoch)
        for group in optimizer.param_groups:
            group["lr"] = lr
        generator = torch.Generator().manual_seed(cfg.seeds["epochs"] + epoch)
        order = torch.randint(len(images), (tc.samples_per_epoch,), generator=generator)
        losses = []
        for i in range(tc.steps_per_epoch):
            batch = order[i * tc.batch_size : (i + 1) * tc.batch_size]
            t = torch.randint(1, cfg.schedule.n_steps + 1, (len(batch),), generator=generator)
            noise = torch.randn((len(batch), cfg.model.channels, size, size), generator=generator)
            loss = ddpm_loss(model, cfg.schedule, images[batch], concepts[batch], t.to(dev), noise.to(dev))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            losses.append(loss.detach())
        mean = float(torch.stack(losses).mean())
        elapsed += time.perf_counter() - t0
        if not math.isfinite(mean):
            diverged_at = step
            break
        history.append({"epoch": epoch + 1, "step": step, "loss": mean, "lr": lr})
        bar.set_postfix(loss=f"{mean:.4f}")
        last = epoch + 1 == tc.epochs
        if last:
            break
        if (epoch + 1) % tc.checkpoint_every == 0:
            hand(epoch + 1)
        if deadline is not None and time.monotonic() + (time.perf_counter() - t0) >= deadline:
            if (epoch + 1) % tc.checkpoint_every:
                hand(epoch + 1)
            stopped = True
            break
    bar.close()
    if stopped:
        return DiffusionResult(model.eval(), _metrics(str(RunStatus.RUNNING), history, dev, elapsed), cfg, False)
    if diverged_at is not None:
        metrics = _metrics(str(RunStatus.DIVERGED), history, dev, elapsed)
        metrics |= {"final": dict(history[-1]) if history else {}, "diverged_at_step": diverged_at}
        return DiffusionResult(model.eval(), metrics, cfg)
    t0 = time.perf_counter()
    final = history[-1] | _evaluation(model, cfg)
    elapsed += time.perf_counter() - t0
    metrics = _metrics(str(RunStatus.COMPLETED), history, dev, elapsed) | {"final": final}
    return DiffusionResult(model.eval(), metrics, cfg)


def _metrics(status: str, history: list[dict[str, Any]], dev: torch.device, elapsed: float) -> dict[str, Any]:
    return {"status": status, "final": {}, "history": history, "device": str(dev), "elapsed_s": round(elapsed, 3)}
