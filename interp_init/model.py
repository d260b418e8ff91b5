"""Build ``HookedTransformer`` models from configs, and save and load their weights.

A weights file (safetensors, so loading never executes pickled code) carries the model
config in its metadata, so that weights of another architecture or size are refused with
a clear message, and, when written for a run folder, the run's config digest.  This module
knows nothing of run folders: :mod:`interp_init.runfolder` stands on it (one way), and
its ``load_model`` reads a run folder's trained model.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save
from transformer_lens import HookedTransformer, HookedTransformerConfig

from interp_init.architectures import install_blocks
from interp_init.config import InitConfig, ModelConfig, config_to_dict
from interp_init.fileio import BadRunFile, MissingRunFile, atomic_write
from interp_init.init import gamma_init_

__all__ = [
    "build_model",
    "empty_model",
    "load_weights",
    "quiet_deprecation",
    "resolve_device",
    "save_weights",
    "weights_metadata",
]


@contextlib.contextmanager
def quiet_deprecation() -> Iterator[None]:
    """Silence TransformerLens' own "HookedTransformer is deprecated" warning, nothing else."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"HookedTransformer is deprecated", category=DeprecationWarning)
        yield


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """``"auto"``/``None`` -> CUDA when available, else CPU; anything else as given, once
    checked: ``meta`` (shapes without data) and devices this machine lacks are refused
    with a ``ValueError`` naming the device and what to use instead."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}") from err
    if resolved.type == "meta":
        raise ValueError(
            "device 'meta' holds shapes without data: no model can be trained, loaded or probed on it; use 'cpu', 'cuda' or 'auto'"
        )
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} was asked for but CUDA is not available; use --device cpu or auto")
        if resolved.index is not None and resolved.index >= torch.cuda.device_count():
            raise ValueError(
                f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s), cuda:0..cuda:{torch.cuda.device_count() - 1}"
            )
    elif resolved.type == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(
                f"device {device!r} was asked for but this machine has no Apple GPU (MPS); use --device cpu or auto"
            )
    elif resolved.type != "cpu":
        raise ValueError(f"device {device!r} is not supported; use 'auto', 'cpu', 'cuda' or 'cuda:N'")
    return resolved


def empty_model(model_cfg: ModelConfig, device: str | torch.device | None = "cpu") -> HookedTransformer:
    """A ``HookedTransformer`` of the given architecture (its own block class where it is
    not TransformerLens' standard one) with uninitialized weight matrices."""
    hooked_cfg = HookedTransformerConfig(
        **model_cfg.to_hooked_kwargs(), init_weights=False, device=str(resolve_device(device))
    )
    with quiet_deprecation():
        model = HookedTransformer(hooked_cfg)
    install_blocks(model, model_cfg.architecture)
    return model.to(resolve_device(device), print_details=False)


def build_model(
    model_cfg: ModelConfig,
    init_cfg: InitConfig,
    seed: int,
    device: str | torch.device | None = "cpu",
) -> HookedTransformer:
    """Make the model of ``model_cfg`` with weights drawn per ``init_cfg`` from ``seed``.

    The same configs and seed give the same weights on any device (they are drawn on
    the CPU). Biases follow the architecture (:func:`interp_init.gamma_init_`);
    LayerNorm weights are one and biases zero.
    """
    model = empty_model(model_cfg, device)
    return gamma_init_(model, config=init_cfg, seed=seed)


def _canonical_header(data: bytes) -> bytes:
    """The safetensors bytes ``data`` with their JSON header's keys sorted.

    safetensors writes the header's metadata in hash-map order, which differs from one
    call to the next, so equal weights would give different files. The header is
    ``8-byte little-endian length + JSON``, padded with spaces to a multiple of 8 bytes;
    the tensor data after it is unchanged (its offsets are relative to the header's end).
    """
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + length])
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + length :]


def save_weights(
    model: HookedTransformer, model_cfg: ModelConfig, path: str | Path, *, run_digest: str | None = None
) -> Path:
    """Write ``model``'s weights to ``path`` (safetensors, atomically), tagged with its config
    (and, for a run folder, the run's config digest).

    Equal weights and config give byte-identical files (``sha256sum`` can compare runs)."""
    path = Path(path)
    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items() if not k.endswith(".IGNORE")}
    metadata = {"model_config": json.dumps(config_to_dict(model_cfg), sort_keys=True), "format": "interp-init/1"}
    if run_digest is not None:
        metadata["run_digest"] = run_digest
    return atomic_write(path, _canonical_header(save(state, metadata=metadata)))


def _unreadable(path: Path, err: Exception) -> BadRunFile:
    try:  # the file may be fine and only closed to this user
        path.open("rb").close()
    except OSError as os_err:
        return BadRunFile(
            path,
            f"cannot be opened ({os_err.strerror})",
            "give this user read access to it (chmod), or run as its owner",
        )
    return BadRunFile(
        path,
        f"is not a readable safetensors weights file ({err}); it may be truncated or foreign",
        "restore the file or retrain the run",
    )


def weights_metadata(path: str | Path) -> dict[str, str]:
    """The metadata of a weights file written by :func:`save_weights`."""
    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as handle:
            return dict(handle.metadata() or {})
    except (SafetensorError, OSError, ValueError) as err:
        raise _unreadable(path, err) from None


def load_weights(model: HookedTransformer, model_cfg: ModelConfig, path: str | Path) -> HookedTransformer:
    """Load weights saved by :func:`save_weights` into ``model``, checking the config matches."""
    path = Path(path)
    if not path.is_file():
        raise MissingRunFile(
            path,
            "does not exist",
            "the run has not finished (train it to the end with the same command), or give its run folder",
        )
    metadata = weights_metadata(path)
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise _unreadable(path, err) from None
    saved_cfg = metadata.get("model_config")
    if saved_cfg is None:
        raise ValueError(f"{path} carries no model config: it was not written by interp-init")
    try:
        saved = ModelConfig.from_dict(json.loads(saved_cfg), where=f"{path} metadata")
    except ValueError as err:
        raise ValueError(f"{path} carries an unreadable model config ({err})") from err
    if saved != model_cfg:
        raise ValueError(
            f"{path} holds weights for the model config {saved_cfg}, which differs from the run's "
            f"config {json.dumps(config_to_dict(model_cfg), sort_keys=True)}: the checkpoint is from another config"
        )
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith(".IGNORE")]
    if missing or unexpected:
        raise ValueError(f"{path} does not match the model: missing {missing}, unexpected {unexpected}")
    return model
