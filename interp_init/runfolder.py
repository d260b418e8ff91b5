"""A run's folder: its files, their statuses, reading them validated, writing them atomically.

:class:`RunFolder` is the one owner of a run folder; the training loop, ensembles, sweeps,
the report and the phase diagrams read and write runs through it::

    DIR/config.json        the whole run config (written once, at the start)
    DIR/metrics.json       {"status", "final", "history", ...}; "running" while unfinished
    DIR/model.safetensors  the final weights (safetensors: loading never runs code)
    DIR/checkpoint.pt      the training state while the run is unfinished
    DIR/error.txt          a sweep's record of a run that raised

**Bound together.**  A finished run's three files carry one digest: ``config_digest``, the
SHA-256 of ``config.json``'s canonical JSON, is written into the weights' metadata and into
``metrics.json``, and ``metrics.json`` also records the SHA-256 of the weights file
(``weights_sha256``).  Weights or metrics copied from another run are refused by
:meth:`RunFolder.check_bound` (and so by ``load_model``, the command line, sweeps and the
report) with a message naming the file.  Folders written before the digests existed carry
none and are read as they are.

**Validated.**  Every file is checked for encoding, JSON syntax and shape before use; any
problem raises :class:`BadRunFile` (a ``ValueError``) naming the file, the problem and the
fix.

**Atomic.**  :func:`atomic_write` writes a temporary file next to the target and renames it,
so a kill never leaves a half-written file; on failure the temporary file is removed, and
temporary files left by a killed process are removed by :meth:`RunFolder.sweep_temporary`
when a run starts again.  A full disk raises an ``OSError`` naming the path and saying that
the same command resumes the run.

Example::

    >>> from interp_init.runfolder import RunFolder, RunStatus
    >>> folder = RunFolder("runs/demo")
    >>> folder.status() in RunStatus
    True
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp_init.config import ModelConfig

if TYPE_CHECKING:
    import torch
    from transformer_lens import HookedTransformer

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.json"
WEIGHTS_FILE = "model.safetensors"
CHECKPOINT_FILE = "checkpoint.pt"
ERROR_FILE = "error.txt"
#: The format tag of checkpoints written by :meth:`RunFolder.save_checkpoint`.
CHECKPOINT_FORMAT = "interp-init-checkpoint/1"


class RunStatus(StrEnum):
    """Where a run stands.  ``metrics.json`` records the first three; the others are read
    from the folder (:meth:`RunFolder.status`).  A ``StrEnum``: equal to its string."""

    RUNNING = "running"  # metrics.json while training (a checkpoint exists)
    COMPLETED = "completed"
    DIVERGED = "diverged"  # the loss went non-finite; the last good weights are kept
    FAILED = "failed"  # a sweep recorded the run's exception in error.txt
    INTERRUPTED = "interrupted"  # metrics.json says running, but nothing is training it now
    PENDING = "pending"  # nothing finished yet
    ABSENT = "absent"  # a sweep's grid point without a folder
    UNREADABLE = "unreadable"  # a folder whose files are damaged or belong to another run


#: The statuses ``metrics.json`` may hold.
RECORDED_STATUSES: tuple[RunStatus, ...] = (RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.DIVERGED)
#: The statuses of a run that has ended (its weights are final).
FINISHED_STATUSES: tuple[RunStatus, ...] = (RunStatus.COMPLETED, RunStatus.DIVERGED)


class BadRunFile(ValueError):
    """A file the toolkit reads is missing, unreadable or of the wrong shape.

    The message names the file, the problem and the fix: ``"<path> <problem>; <fix>"``.
    """

    def __init__(self, path: str | Path, problem: str, fix: str) -> None:
        self.path, self.problem, self.fix = Path(path), problem, fix
        super().__init__(f"{path} {problem}; {fix}")


class MissingRunFile(BadRunFile, FileNotFoundError):
    """A :class:`BadRunFile` for a file that does not exist (also a ``FileNotFoundError``)."""


# ------------------------------------------------------------------ reading and writing


def read_json(path: str | Path, fix: str) -> Any:
    """The JSON value in ``path`` (UTF-8); :class:`BadRunFile` if it cannot be read or parsed."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise MissingRunFile(path, "does not exist", fix) from None
    except UnicodeDecodeError as err:
        raise BadRunFile(path, f"is not UTF-8 text (byte {err.start})", fix) from None
    except OSError as err:
        raise BadRunFile(path, f"cannot be read ({err.strerror})", fix) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise BadRunFile(path, f"is not valid JSON ({err})", fix) from None


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.tmp(?P<pid>\d+)$")


def _fault_point(path: Path, stage: str) -> None:
    """Deterministic kill points for tests: ``INTERP_INIT_KILL_AT="<stage>:<file name>:<n>"``
    SIGKILLs this process at the n-th atomic write of that file, ``before`` its rename (the
    temporary file is complete) or ``after`` it."""
    spec = os.environ.get("INTERP_INIT_KILL_AT")
    if not spec:
        return
    want_stage, name, count = spec.split(":")
    if want_stage != stage or name != path.name:
        return
    key = f"INTERP_INIT_KILL_AT_SEEN_{stage}_{name}"
    seen = int(os.environ.get(key, "0")) + 1
    os.environ[key] = str(seen)
    if seen == int(count):
        os.kill(os.getpid(), signal.SIGKILL)


def _write_temporary(tmp: Path, data: bytes | str | Callable[[Path], None]) -> None:
    if isinstance(data, str):
        tmp.write_text(data, encoding="utf-8")
    elif isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        data(tmp)


def atomic_write(path: str | Path, data: bytes | str | Callable[[Path], None]) -> Path:
    """Write ``data`` (bytes, text, or a function writing a given path) to ``path`` atomically.

    A temporary file next to ``path`` is written, then renamed onto it.  On any failure
    the temporary file is removed; a full disk raises ``OSError(ENOSPC)`` naming ``path``.
    """
    path = Path(path)
    tmp = _temporary(path)
    try:
        _write_temporary(tmp, data)
        _fault_point(path, "before")
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno == errno.ENOSPC:
            raise OSError(
                errno.ENOSPC, "no space left on the device; free some space and run the same command again to resume", str(path)
            ) from err
        raise
    _fault_point(path, "after")
    return path


def write_json(path: str | Path, data: Any) -> Path:
    """``data`` as indented JSON, written atomically."""
    return atomic_write(path, json.dumps(data, indent=2) + "\n")


def config_digest(config: dict) -> str:
    """SHA-256 of a run config's canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# -------------------------------------------------------------------------- the folder


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class RunFolder:
    """The folder of one run (see the module docstring for its files)."""

    path: Path

    def __post_init__(self) -> None:
        if str(self.path) == "":
            raise ValueError("a run folder's path is empty; give a folder such as runs/demo")
        object.__setattr__(self, "path", Path(self.path))

    def __fspath__(self) -> str:
        return str(self.path)

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def metrics_path(self) -> Path:
        return self.path / METRICS_FILE

    @property
    def weights_path(self) -> Path:
        return self.path / WEIGHTS_FILE

    @property
    def checkpoint_path(self) -> Path:
        return self.path / CHECKPOINT_FILE

    @property
    def error_path(self) -> Path:
        return self.path / ERROR_FILE

    def is_run(self) -> bool:
        """True if the folder holds a run (a ``config.json``)."""
        return self.config_path.is_file()

    # ------------------------------------------------------------------ config.json

    def read_config(self) -> dict[str, Any]:
        """``config.json`` as a dict (a JSON object with a ``model`` section), validated."""
        fix = f"{self.path} is not a run folder or its config is damaged (train one with `interp-init train`)"
        data = read_json(self.config_path, fix)
        if not isinstance(data, dict):
            raise BadRunFile(self.config_path, f"holds a JSON {type(data).__name__}, not an object", fix)
        if not isinstance(data.get("model"), dict):
            raise BadRunFile(self.config_path, "has no 'model' section (an object)", fix)
        return data

    def model_config(self) -> ModelConfig:
        """The run's :class:`~interp_init.config.ModelConfig` (``config.json``'s ``model``)."""
        data = self.read_config()
        try:
            return ModelConfig.from_dict(data["model"], where=f"{self.config_path} [model]")
        except (TypeError, KeyError, AttributeError) as err:
            raise BadRunFile(self.config_path, f"has a malformed 'model' section ({err})", "restore the file or retrain the run") from None

    def write_config(self, config: dict[str, Any]) -> Path:
        return write_json(self.config_path, config)

    def digest(self) -> str:
        """The run's config digest (:func:`config_digest` of ``config.json``)."""
        return config_digest(self.read_config())

    # ----------------------------------------------------------------- metrics.json

    def read_metrics(self) -> dict[str, Any] | None:
        """``metrics.json`` validated, or ``None`` if the folder has none yet."""
        if not self.metrics_path.exists():
            return None
        fix = "remove metrics.json (and checkpoint.pt) to train the run again, or restore the file"
        data = read_json(self.metrics_path, fix)
        if not isinstance(data, dict):
            raise BadRunFile(self.metrics_path, f"holds a JSON {type(data).__name__}, not an object", fix)
        if data.get("status") not in RECORDED_STATUSES:
            raise BadRunFile(self.metrics_path, f"has status {data.get('status')!r}, not one of {[s.value for s in RECORDED_STATUSES]}", fix)
        for key, kind in (("final", dict), ("history", list)):
            if not isinstance(data.get(key), kind):
                raise BadRunFile(self.metrics_path, f"has a {key!r} that is not a JSON {'object' if kind is dict else 'array'}", fix)
        if not all(isinstance(record, dict) for record in data["history"]):
            raise BadRunFile(self.metrics_path, "has a 'history' entry that is not a JSON object", fix)
        return data

    def write_metrics(self, metrics: dict[str, Any]) -> Path:
        return write_json(self.metrics_path, metrics)

    def finish(self, metrics: dict[str, Any], model: HookedTransformer, model_cfg: ModelConfig) -> dict[str, Any]:
        """Write a finished run's weights, then its metrics bound to them and to the config
        (``config_digest``, ``weights_sha256``); the checkpoint is removed once the run has
        completed, kept when it diverged.  Returns the metrics as written."""
        from interp_init.model import save_weights

        digest = self.digest()
        save_weights(model, model_cfg, self.weights_path, run_digest=digest)
        metrics = {**metrics, "config_digest": digest, "weights_sha256": file_sha256(self.weights_path)}
        self.write_metrics(metrics)
        if metrics["status"] == RunStatus.COMPLETED:
            self.checkpoint_path.unlink(missing_ok=True)
        return metrics

    # ---------------------------------------------------------------------- status

    def status(self) -> RunStatus:
        """Where the run stands, from its files (a damaged ``metrics.json`` reads as unfinished)."""
        try:
            metrics = self.read_metrics()
        except BadRunFile:
            metrics = None
        status = metrics.get("status") if metrics else None
        if status in FINISHED_STATUSES and self.weights_path.exists():
            return RunStatus(status)
        if self.error_path.exists():
            return RunStatus.FAILED
        if status == RunStatus.RUNNING:
            return RunStatus.INTERRUPTED
        return RunStatus.PENDING

    def check_bound(self, metrics: dict[str, Any] | None = None) -> None:
        """Refuse weights or metrics that belong to another run (see the module docstring).

        Checks the weights' recorded config digest against ``config.json`` and, for a
        finished run, ``metrics.json``'s digests against both; files without digests (older
        folders) pass."""
        from interp_init.model import weights_metadata

        digest = self.digest()
        fix = "the file was copied from another run: restore this run's own file, or retrain it"
        if self.weights_path.exists():
            recorded = weights_metadata(self.weights_path).get("run_digest")
            if recorded is not None and recorded != digest:
                raise BadRunFile(self.weights_path, "holds the weights of another run (its run digest differs from config.json's)", fix)
        metrics = self.read_metrics() if metrics is None else metrics
        if metrics is None or metrics.get("status") not in FINISHED_STATUSES:
            return
        if metrics.get("config_digest") not in (None, digest):
            raise BadRunFile(self.metrics_path, "holds the metrics of another run (its config_digest differs from config.json's)", fix)
        recorded_sha = metrics.get("weights_sha256")
        if recorded_sha is not None and self.weights_path.exists() and file_sha256(self.weights_path) != recorded_sha:
            raise BadRunFile(self.weights_path, "is not the file this run finished with (its SHA-256 differs from metrics.json's weights_sha256)", fix)

    # --------------------------------------------------------------- weights, model

    def load_model(self, device: str | torch.device | None = "cpu") -> HookedTransformer:
        """The run's trained ``HookedTransformer`` in eval mode, after :meth:`check_bound`."""
        from interp_init.model import empty_model, load_weights

        model_cfg = self.model_config()
        model = empty_model(model_cfg, device)
        load_weights(model, model_cfg, self.weights_path)  # weights of another shape are refused first
        self.check_bound()
        return model.eval()

    # ------------------------------------------------------------------- checkpoint

    def save_checkpoint(self, state: dict[str, Any]) -> Path:
        """Write the training state ``state`` (a dict of tensors and plain values) atomically."""
        import torch

        # Serialized in memory first: torch.save reports a full disk as a RuntimeError, a
        # plain file write as OSError(ENOSPC), which atomic_write explains.
        buffer = io.BytesIO()
        torch.save({"format": CHECKPOINT_FORMAT, **state}, buffer)
        return atomic_write(self.checkpoint_path, buffer.getvalue())

    def load_checkpoint(self, config: dict[str, Any]) -> dict[str, Any]:
        """The checkpoint of the run whose config is ``config`` (never unpickled: tensors and
        plain values only); :class:`BadRunFile` if it is unreadable or from another config."""
        import torch

        path = self.checkpoint_path
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001 - any unreadable file gets the same clear message
            raise BadRunFile(
                path, f"is not a readable checkpoint ({type(err).__name__}: {err}); it may be truncated or foreign", "remove it to restart the run"
            ) from None
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise BadRunFile(path, "is not an interp-init checkpoint", "remove it to restart the run")
        if state.get("config") != config:
            raise BadRunFile(path, "is a checkpoint from another config", "remove it or choose another --out")
        return state

    # -------------------------------------------------------------------- tidying

    def sweep_temporary(self) -> list[Path]:
        """Remove temporary files left by killed processes (those whose process is gone)."""
        removed = []
        if not self.path.is_dir():
            return removed
        for entry in self.path.iterdir():
            match = _TEMPORARY.match(entry.name)
            if match and entry.is_file() and not _pid_alive(int(match["pid"])):
                entry.unlink(missing_ok=True)
                removed.append(entry)
        return removed
