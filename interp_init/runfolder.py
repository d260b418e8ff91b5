"""A run's folder: its files, their statuses, reading them validated, writing them atomically.

:class:`RunFolder` is the one owner of a run folder; the training loop, ensembles, sweeps,
the report and the phase diagrams read and write runs through it::

    DIR/config.json        the whole run config (written once, at the start)
    DIR/metrics.json       {"status", "final", "history", ...}; "running" while training, "interrupted" once stopped
    DIR/model.safetensors  the final weights (safetensors: loading never runs code)
    DIR/checkpoint.pt      the training state while the run is unfinished
    DIR/error.txt          a sweep's record of a run that raised
    DIR/stored.json        a stored record: the run kept without its weights (:mod:`interp_init.stored`)

**Bound together.**  A finished run's three files carry one digest: ``config_digest``, the
SHA-256 of ``config.json``'s canonical JSON, is written into the weights' metadata and into
``metrics.json``, and ``metrics.json`` also records the SHA-256 of the weights file
(``weights_sha256``).  Weights or metrics copied from another run are refused by
:meth:`RunFolder.check_bound` (and so by ``load_model``, the command line, sweeps and the
report) with a message naming the file.  Folders written before the digests existed carry
none and are read as they are.

**Validated.**  Every file is checked (encoding, JSON, shape) before use; a problem raises
:class:`BadRunFile` (a ``ValueError``) naming the file, the problem and the fix.

**Atomic.**  Every file is written atomically (:mod:`interp_init.fileio`); temporary files
left by a killed process are removed (:meth:`RunFolder.sweep_temporary`) when a run starts
again.  **Held.**  The process training a run holds the folder (:meth:`RunFolder.lock`): a
second process asking for it meanwhile is refused with :class:`RunFolderBusy`.
**Never overwritten.**  A folder holding any file of another run, whichever file is
missing, is refused (:meth:`RunFolder.claim`), and a finished run is never trained again
from the start: a folder holding its final weights or its finished metrics without the
other resumes only from a checkpoint (:meth:`RunFolder.refuse_retraining`).  **A leaf.**
A run folder holds one run and nothing else: no run, sweep or diagram is written inside
one (:func:`refuse_inside_run`); the guards on where commands write live in
:mod:`interp_init.outputs`.

Example::

    >>> from interp_init.runfolder import RunFolder, RunStatus
    >>> folder = RunFolder("runs/demo")
    >>> folder.status() in RunStatus
    True
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp_init.config import ModelConfig
from interp_init.fileio import (
    BadRunFile,
    MissingRunFile,
    RunFolderBusy,
    atomic_write,
    check_folder_path,
    config_digest,
    file_sha256,
    folder_is_held,
    hold_folder,
    json_kind,
    read_json,
    remove_made_folders,
    remove_stale_temporaries,
    write_json,
)
from interp_init.metrics_values import check_metrics_values
from interp_init.outputs import (
    CHECKPOINT_FILE,
    CHECKPOINT_FORMAT,
    CONFIG_FILE,
    ERROR_FILE,
    METRICS_FILE,
    WEIGHTS_FILE,
    looks_like_run,
    refuse_inside_run,
    refuse_non_run_folder,
)
from interp_init.stored import is_stored, refuse_stored_weights

__all__ = [
    "BadRunFile",
    "MissingRunFile",
    "RunFolder",
    "RunFolderBusy",
    "RunStatus",
    "atomic_write",
    "config_digest",
    "file_sha256",
    "hold_folder",
    "load_model",
    "looks_like_run",
    "refuse_inside_run",
    "refuse_non_run_folder",
    "write_json",
]

if TYPE_CHECKING:
    import torch
    from transformer_lens import HookedTransformer


class RunStatus(StrEnum):
    """Where a run stands.  ``metrics.json`` records the first three and ``interrupted``; the
    others are read from the folder (:meth:`RunFolder.status`).  A ``StrEnum``: equal to its string."""

    RUNNING = "running"  # metrics.json while training; the status of a run a live process trains
    COMPLETED = "completed"
    DIVERGED = "diverged"  # the loss went non-finite; the last good weights are kept
    FAILED = "failed"  # a sweep recorded the run's exception in error.txt
    INTERRUPTED = (
        "interrupted"  # stopped before its end, its checkpoint kept (metrics.json says so; "running" after a SIGKILL)
    )
    PENDING = "pending"  # nothing finished yet
    ABSENT = "absent"  # a sweep's grid point without a folder
    UNREADABLE = "unreadable"  # a folder whose files are damaged or belong to another run


#: The statuses ``metrics.json`` may hold, and those of a run that has ended (final weights).
RECORDED_STATUSES: tuple[RunStatus, ...] = (
    RunStatus.RUNNING,
    RunStatus.COMPLETED,
    RunStatus.DIVERGED,
    RunStatus.INTERRUPTED,
)
FINISHED_STATUSES: tuple[RunStatus, ...] = (RunStatus.COMPLETED, RunStatus.DIVERGED)


def _differences(folder: dict, asked: dict, prefix: str = "") -> list[str]:
    diffs = []
    for key in sorted(set(folder) | set(asked)):
        va, vb = folder.get(key), asked.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            diffs += _differences(va, vb, f"{prefix}{key}.")
        elif va != vb:
            diffs.append(f"{prefix}{key}: {va!r} (folder) vs {vb!r} (asked)")
    return diffs


_EDITED = "was changed after the run finished (model.safetensors and metrics.json both carry the digest of the config they were trained with)"
_UNSURE = "holds the weights of another config than config.json's (their digests differ): config.json was edited or the weights copied"


@dataclass(frozen=True)
class RunFolder:
    """The folder of one run (see the module docstring for its files)."""

    path: Path

    def __post_init__(self) -> None:
        if isinstance(self.path, RunFolder):
            object.__setattr__(self, "path", self.path.path)
        if not isinstance(self.path, str | os.PathLike):
            raise ValueError(
                f"a run folder is a path (str or pathlib.Path), got {type(self.path).__name__} {self.path!r:.80}; give the folder a run was trained into"
            )
        if str(self.path) == "":
            raise ValueError("a run folder's path is empty; give a folder such as runs/demo")
        object.__setattr__(self, "path", Path(self.path))

    def __fspath__(self) -> str:
        return str(self.path)

    config_path = property(lambda self: self.path / CONFIG_FILE, doc="``DIR/config.json``")
    metrics_path = property(lambda self: self.path / METRICS_FILE, doc="``DIR/metrics.json``")
    weights_path = property(lambda self: self.path / WEIGHTS_FILE, doc="``DIR/model.safetensors``")
    checkpoint_path = property(lambda self: self.path / CHECKPOINT_FILE, doc="``DIR/checkpoint.pt``")
    error_path = property(lambda self: self.path / ERROR_FILE, doc="``DIR/error.txt``")

    def create(self) -> None:
        """Make the folder (and its parents); a clear ``ValueError`` if it cannot be made or written."""
        check_folder_path(self.path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ValueError(f"cannot create the run folder {self.path}: {err.strerror}") from err
        if not os.access(self.path, os.W_OK):
            raise ValueError(f"the run folder {self.path} is not writable; choose another --out")

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder while this process trains its run: another process asking for it
        meanwhile gets :class:`RunFolderBusy` (:func:`hold_folder`).  A folder inside a run
        folder, or one holding a sweep or other runs, is refused first (nothing written);
        refused input (a ``ValueError``) in a folder this call made leaves nothing behind."""
        refuse_inside_run(self.path, "a run")
        refuse_non_run_folder(self.path)
        check_folder_path(self.path)
        made = [p for p in (self.path, *self.path.parents) if not p.exists()]
        fresh = not made and not any(self.path.iterdir()) if self.path.is_dir() else True
        self.create()
        try:
            with hold_folder(
                self.path,
                "is being trained by another process ({owner}); wait for it to finish or choose another --out",
            ):
                yield
        except ValueError as err:
            if fresh and not isinstance(err, RunFolderBusy) and {p.name for p in self.path.iterdir()} <= {CONFIG_FILE}:
                self.config_path.unlink(missing_ok=True)
                remove_made_folders(made)
            raise

    def is_busy(self) -> bool:
        """True if a live process holds the folder (:meth:`lock`): its run is being trained now."""
        return folder_is_held(self.path)

    def is_run(self) -> bool:
        """True if the folder holds a run (a ``config.json``)."""
        return self.config_path.is_file()

    # ------------------------------------------------------------------ config.json

    def read_config(self) -> dict[str, Any]:
        """``config.json`` as a dict (a JSON object with a ``model`` section), validated."""
        fix = f"{self.path} is not a run folder or its config is damaged (train one with `interp-init train`)"
        data = read_json(self.config_path, fix)
        if not isinstance(data, dict):
            raise BadRunFile(self.config_path, f"holds {json_kind(data)}, not a JSON object", fix)
        if not isinstance(data.get("model"), dict):
            raise BadRunFile(self.config_path, "has no 'model' section (an object)", fix)
        return data

    def model_config(self) -> ModelConfig:
        """The run's :class:`~interp_init.config.ModelConfig` (``config.json``'s ``model``)."""
        data = self.read_config()
        try:
            return ModelConfig.from_dict(data["model"], where=f"{self.config_path} [model]")
        except (TypeError, KeyError, AttributeError) as err:
            raise BadRunFile(
                self.config_path, f"has a malformed 'model' section ({err})", "restore the file or retrain the run"
            ) from None

    def write_config(self, config: dict[str, Any]) -> Path:
        """Write ``config.json`` (atomically)."""
        return write_json(self.config_path, config)

    def config_differences(self, config: dict[str, Any]) -> list[str]:
        """How ``config.json`` differs from ``config``, one ``"section.field: folder vs asked"``
        line per differing field (empty: the folder holds this run)."""
        return _differences(self.read_config(), config)

    def digest(self) -> str:
        """The run's config digest (:func:`config_digest` of ``config.json``)."""
        return config_digest(self.read_config())

    def check_holds(self, config: dict[str, Any]) -> None:
        """Refuse the folder for the run ``config`` if any of its files belongs to another
        run, whichever file is missing: ``config.json`` naming other fields, or, without
        it, finished weights or metrics carrying another config's digest, or a checkpoint
        of another config.  Reads only."""
        fix = "remove the folder or choose another --out"
        if self.config_path.exists():
            try:
                diffs = self.config_differences(config)
            except BadRunFile as err:
                raise BadRunFile(err.path, err.problem, fix) from None
            if diffs:
                raise ValueError(
                    f"{self.path} holds a run with a different config ({'; '.join(diffs[:5])}); choose another --out or remove that folder"
                )
            return
        from interp_init.model import weights_metadata

        digest, fix = config_digest(config), "choose another --out, or delete the folder to train this run there"
        missing = f"and {CONFIG_FILE}, which would name that run, is missing"
        if self.weights_path.exists() and weights_metadata(self.weights_path).get("run_digest") != digest:
            raise BadRunFile(
                self.weights_path, f"holds the finished weights of another run than the one asked for ({missing})", fix
            )
        metrics = self.read_metrics()
        if metrics is not None and metrics["status"] in FINISHED_STATUSES and metrics.get("config_digest") != digest:
            raise BadRunFile(
                self.metrics_path, f"holds the finished metrics of another run than the one asked for ({missing})", fix
            )
        if self.checkpoint_path.exists():
            self.load_checkpoint(config)  # a checkpoint of another config is refused, naming it

    def claim(self, config: dict[str, Any]) -> bool:
        """Make the folder the run ``config``'s before training it: :meth:`check_holds`, then
        :meth:`check_bound` where ``config.json`` exists, or write it.  True if the folder
        already had it.  Finished work of another run is never overwritten."""
        self.check_holds(config)
        if self.config_path.exists():
            self.check_bound()
            self.refuse_retraining()
            return True
        self.refuse_retraining()
        self.write_config(config)
        return False

    def refuse_retraining(self) -> None:
        """Refuse to train over a finished run: a folder holding its final weights or its
        finished ``metrics.json`` without the other resumes only from a checkpoint."""
        metrics = self.read_metrics()
        finished_metrics, has_weights = (
            metrics is not None and metrics["status"] in FINISHED_STATUSES,
            self.weights_path.exists(),
        )
        if finished_metrics == has_weights or self.checkpoint_path.exists():
            return  # finished (both: read, not trained), fresh (neither), or resumable
        again = "or delete the folder (or choose another --out) to train the run again"
        if has_weights:
            said = "is missing" if metrics is None else f"says {metrics['status']!r}"
            raise BadRunFile(
                self.weights_path,
                f"holds a finished run's weights, but {METRICS_FILE} {said} and there is no {CHECKPOINT_FILE} to resume from: training again would replace the finished weights",
                f"restore {METRICS_FILE}, {again}",
            )
        raise BadRunFile(
            self.metrics_path,
            f"says the run {metrics['status']}, but {WEIGHTS_FILE} is missing and there is no {CHECKPOINT_FILE} to resume from: training again would replace the finished metrics",
            f"restore {WEIGHTS_FILE}, {again}",
        )

    # ----------------------------------------------------------------- metrics.json

    def read_metrics(self) -> dict[str, Any] | None:
        """``metrics.json`` validated, or ``None`` if the folder has none yet."""
        if not self.metrics_path.exists():
            return None
        fix = "restore the file, or delete the run folder (or choose another --out) to train the run again"
        data = read_json(self.metrics_path, fix)
        if not isinstance(data, dict):
            raise BadRunFile(self.metrics_path, f"holds {json_kind(data)}, not a JSON object", fix)
        if data.get("status") not in RECORDED_STATUSES:
            raise BadRunFile(
                self.metrics_path,
                f"has status {data.get('status')!r}, not one of {[s.value for s in RECORDED_STATUSES]}",
                fix,
            )
        for key, kind in (("final", dict), ("history", list)):
            if not isinstance(data.get(key), kind):
                raise BadRunFile(
                    self.metrics_path, f"has a {key!r} that is not a JSON {'object' if kind is dict else 'array'}", fix
                )
        if not all(isinstance(record, dict) for record in data["history"]):
            raise BadRunFile(self.metrics_path, "has a 'history' entry that is not a JSON object", fix)
        check_metrics_values(self.metrics_path, data, fix)
        return data

    def write_metrics(self, metrics: dict[str, Any]) -> Path:
        return write_json(self.metrics_path, metrics)

    def mark_interrupted(self) -> None:
        """Record that the run stopped before its end: a ``running`` ``metrics.json`` says ``interrupted``."""
        with contextlib.suppress(ValueError):  # a damaged file is left to its readers
            if (metrics := self.read_metrics()) is not None and metrics["status"] == RunStatus.RUNNING:
                self.write_metrics({**metrics, "status": str(RunStatus.INTERRUPTED)})

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
        """Where the run stands, from its files (a damaged ``metrics.json`` reads as unfinished;
        a finished run without its weights reads as finished only where it is a stored record)."""
        try:
            metrics = self.read_metrics()
        except BadRunFile:
            metrics = None
        status = metrics.get("status") if metrics else None
        if status in FINISHED_STATUSES and (self.weights_path.exists() or is_stored(self.path, metrics)):
            return RunStatus(status)
        if self.error_path.exists():
            return RunStatus.FAILED
        if self.is_busy():  # a live process is training it now
            return RunStatus.RUNNING
        if status in (RunStatus.RUNNING, RunStatus.INTERRUPTED):
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
        metrics = self.read_metrics() if metrics is None else metrics
        finished = metrics is not None and metrics.get("status") in FINISHED_STATUSES
        if self.weights_path.exists():
            recorded = weights_metadata(self.weights_path).get("run_digest")
            if recorded is not None and recorded != digest:
                if finished and metrics.get("config_digest") == recorded:  # the two agree: config.json changed
                    raise BadRunFile(
                        self.config_path,
                        _EDITED,
                        "restore the config.json the run was trained with, or train the edited config into another --out",
                    )
                if not finished:  # no metrics to tell which of the two files changed
                    raise BadRunFile(
                        self.weights_path,
                        _UNSURE,
                        "restore the run's own file, or choose another --out (or delete the folder) for this config",
                    )
                raise BadRunFile(
                    self.weights_path,
                    "holds the weights of another run (its run digest differs from config.json's)",
                    fix,
                )
        if not finished:
            return
        if metrics.get("config_digest") not in (None, digest):
            raise BadRunFile(
                self.metrics_path,
                "holds the metrics of another run (its config_digest differs from config.json's)",
                fix,
            )
        recorded_sha = metrics.get("weights_sha256")
        if recorded_sha is not None and self.weights_path.exists() and file_sha256(self.weights_path) != recorded_sha:
            raise BadRunFile(
                self.weights_path,
                "is not the file this run finished with (its SHA-256 differs from metrics.json's weights_sha256)",
                fix,
            )

    # --------------------------------------------------------------- weights, model

    def load_model(self, device: str | torch.device | None = "cpu") -> HookedTransformer:
        """The run's trained ``HookedTransformer`` in eval mode, after :meth:`check_bound`."""
        from interp_init.model import empty_model, load_weights

        model_cfg = self.model_config()
        if not self.weights_path.exists():
            refuse_stored_weights(self.path)
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
            path.open("rb").close()  # the file may be fine and only closed to this user
            state = torch.load(path, map_location="cpu", weights_only=True)
        except OSError as err:
            raise BadRunFile(
                path,
                f"cannot be opened ({err.strerror})",
                "give this user read access to it (chmod), or run as its owner",
            ) from None
        except Exception as err:  # noqa: BLE001 - any unreadable file gets the same clear message
            raise BadRunFile(
                path,
                f"is not a readable checkpoint ({type(err).__name__}: {err}); it may be truncated or foreign",
                "remove it to restart the run",
            ) from None
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise BadRunFile(path, "is not an interp-init checkpoint", "remove it to restart the run")
        if state.get("config") != config:
            raise BadRunFile(path, "is a checkpoint from another config", "remove it or choose another --out")
        return state

    def sweep_temporary(self) -> list[Path]:
        """Remove temporary files left by killed processes (those whose process is gone)."""
        return remove_stale_temporaries(self.path)


def load_model(run_dir: str | Path, device: str | torch.device | None = "cpu") -> HookedTransformer:
    """The trained ``HookedTransformer`` of a run folder, in eval mode: its logits are those of the
    model that was saved; weights or metrics copied from another run are refused (:meth:`RunFolder.check_bound`)."""
    return RunFolder(run_dir).load_model(device)
