"""Checks of a run before it starts: its arguments' types, and whether it fits in memory.

:func:`check_fits` estimates a lower bound of the memory a run needs on its device (the
model with its gradients and AdamW state, the activations of one batch, the generated
data sets) and refuses, with a ``ValueError`` naming the size to lower, a run that needs
more than the device has free: such a run could only fail half way (or be killed by the
system) after writing its folder.  :func:`out_of_memory_message` turns an allocation
failure that still happens (other processes use memory too) into one line, and
:func:`check_train_arguments` refuses arguments of :func:`training.train` of the wrong
type before they fail deep inside it.

Example::

    >>> from training.config import make_run_config
    >>> from training.trainer.preflight import estimate
    >>> estimate(make_run_config("tiny")).total < 10**9
    True
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from training.config import RunConfig

#: Bytes per parameter while training: fp32 weights, gradients and AdamW's two moments.
TRAIN_BYTES_PER_PARAM = 16
#: Bytes per generated sample besides its tokens (one byte each or more): an int64
#: target, and two more int64 numbers per sample or so (key position, anchor pair).
SAMPLE_EXTRA_BYTES = 8 + 8 + 16


@dataclass(frozen=True)
class MemoryEstimate:
    """A lower bound of what a run holds in memory, in bytes, by part."""

    model: int
    activations: int
    data: int

    @property
    def total(self) -> int:
        return self.model + self.activations + self.data


def n_parameters(cfg: RunConfig) -> int:
    """The model's parameter count, from its config (biases and LayerNorms left out)."""
    m = cfg.model
    attention = 4 * m.d_model * m.n_heads * m.d_head
    mlp = 2 * m.d_model * m.d_mlp
    return 2 * m.d_vocab * m.d_model + m.n_ctx * m.d_model + m.n_layers * (attention + mlp)


def estimate(cfg: RunConfig) -> MemoryEstimate:
    """A lower bound of the bytes a run needs (:class:`MemoryEstimate`)."""
    m, d, t = cfg.model, cfg.data, cfg.train
    per_sample = cfg.data.make_task().seq_len + SAMPLE_EXTRA_BYTES
    per_position = m.n_layers * (4 * m.d_model + 2 * m.d_mlp + 2 * m.n_heads * (m.d_head + m.n_ctx))
    activations = 4 * t.batch_size * (m.n_ctx * per_position + m.d_vocab)
    return MemoryEstimate(
        TRAIN_BYTES_PER_PARAM * n_parameters(cfg), activations, per_sample * sum(d.split_sizes().values())
    )


def device_memory(device: torch.device) -> int | None:
    """The memory the device has free now, in bytes (None where it cannot be told): CUDA's
    free memory, or the system's available memory (``MemAvailable``)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX system
        return None


def _gb(n: int) -> str:
    return f"{n / 1e9:,.1f} GB"


#: The most optimizer steps a run may take (the paper preset takes about 740,000): above,
#: a run would not end in any time a user means (``--epochs 1000000000``).
MAX_STEPS = 10**8


def check_steps(cfg: RunConfig) -> None:
    """Refuse a run of more than :data:`MAX_STEPS` optimizer steps, saying how many it asks
    for (epochs x steps per epoch): such a run would not end."""
    t = cfg.train
    per_epoch = t.steps_per_epoch(cfg.data.n_train)
    steps = t.epochs * per_epoch
    if steps > MAX_STEPS:
        raise ValueError(
            f"this run asks for {steps:,} optimizer steps ({t.epochs:,} epochs x {per_epoch:,} steps of batch_size {t.batch_size}), "
            f"more than the {MAX_STEPS:,} a run may take (the paper preset takes about 740,000; hours on a GPU): lower --epochs (or --n-train)"
        )


#: How the memory message names each split's size.
_SPLIT_NAMES = {"train": "n_train", "id_test": "n_test", "heldout": "held-out"}


def check_fits(cfg: RunConfig, device: torch.device) -> None:
    """Refuse a run that needs more memory than ``device`` has free, naming the size to
    lower (then one that asks for more than :data:`MAX_STEPS` steps: :func:`check_steps`)."""
    have = device_memory(device)
    need = estimate(cfg)
    if have is None or need.total <= have:
        check_steps(cfg)
        return
    m, d, t = cfg.model, cfg.data, cfg.train
    parts = {
        "model": (
            need.model,
            f"the model ({n_parameters(cfg):,} parameters, with gradients and AdamW state; "
            f"d_model {m.d_model}, d_mlp {m.d_mlp}, n_layers {m.n_layers}, n_heads x d_head {m.n_heads} x {m.d_head}, "
            f"d_vocab {m.d_vocab})",
            "--d-model, --d-mlp, --n-layers, --n-heads, --d-head, --d-vocab or --n-ctx",
        ),
        "activations": (
            need.activations,
            f"one batch's activations and logits (batch_size {t.batch_size}, n_ctx {m.n_ctx}, n_layers {m.n_layers})",
            "--batch-size, or the model's sizes (--d-model, --d-mlp, --n-layers, --n-heads, --d-head, --d-vocab, --n-ctx)",
        ),
        "data": (
            need.data,
            f"the data sets ({' + '.join(f'{_SPLIT_NAMES[k]} {n:,}' for k, n in d.split_sizes().items())} samples)",
            "--n-train, --n-test or --n-heldout",
        ),
    }
    size, what, lower = max(parts.values(), key=lambda part: part[0])
    raise ValueError(
        f"this run needs at least {_gb(need.total)} of memory, more than the {device.type} device's {_gb(have)} free: "
        f"{what} alone take {_gb(size)}; lower {lower}"
    )


def check_ensemble_fits(
    cfgs: Sequence[RunConfig], device: torch.device, size: int | None, option: str = "--ensemble-size"
) -> None:
    """Refuse an ensemble size (``size`` same-shape runs trained at once; None: all of a
    shape) whose runs need more memory together than ``device`` has free, naming the
    largest size that fits."""
    have = device_memory(device)
    if have is None or not cfgs:
        return
    largest = max(Counter(repr(cfg.model) for cfg in cfgs).values())
    at_once = largest if size is None else min(size, largest)
    per_run = max(estimate(cfg).total for cfg in cfgs)
    if per_run * at_once > have:
        given = f"{option} {size}" if size is not None else f"the default {option} (every same-shape run, {largest})"
        raise ValueError(
            f"{given}: {at_once} runs trained at once need at least {_gb(per_run * at_once)}, more than the {device.type} device's "
            f"{_gb(have)} free ({_gb(per_run)} each): give {option} at most {max(1, have // per_run)}"
        )


def out_of_memory_message(err: BaseException) -> str | None:
    """One line for an allocation failure (``MemoryError``, torch's out-of-memory errors),
    or None for any other exception."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if isinstance(err, MemoryError) or (
        isinstance(err, RuntimeError) and ("out of memory" in text.lower() or "can't allocate memory" in text)
    ):
        return f"out of memory ({text[:200]}): lower the model's sizes (--d-model, --d-mlp, --n-layers), --batch-size or --n-train"
    return None


def check_train_arguments(cfg: object, out_dir: object) -> None:
    """Refuse arguments of :func:`training.train` of the wrong type, naming the fix."""
    if not isinstance(cfg, RunConfig):
        raise ValueError(
            f"cfg must be a training.RunConfig, got {type(cfg).__name__} {cfg!r:.80}; "
            "make one with training.make_run_config('tiny', gamma=0.8, ...) or RunConfig.from_dict(config)"
        )
    if out_dir is not None and not isinstance(out_dir, str | os.PathLike):
        raise ValueError(
            f"out_dir must be a folder path (str or pathlib.Path) or None, got {type(out_dir).__name__} {out_dir!r:.80}"
        )
