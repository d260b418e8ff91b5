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
one (:func:`refuse_inside_run`), and no folder of runs (run, sweep, reproduction) is
written where it would nest in another (:func:`refuse_nested`, :func:`output_folder`).
**Outputs.**  No ``--out`` replaces a file a command did not make for that purpose: an
HTML page is written by :func:`write_page`, tagged with its purpose, and replaces only a
previous page of that purpose (:func:`check_output_file`, :func:`check_output_pages`).

Example::

    >>> from interp_init.runfolder import RunFolder, RunStatus
    >>> folder = RunFolder("runs/demo")
    >>> folder.status() in RunStatus
    True
"""

from __future__ import annotations

import contextlib
import io
import math
import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Iterable, Iterator

from interp_init.config import ModelConfig
from interp_init.fileio import (  # fmt: skip
    LOCK_FILE, BadRunFile, MissingRunFile, RunFolderBusy, atomic_write, check_folder_path, check_name_length, config_digest, file_sha256,
    folder_is_held, hold_folder, json_kind, new_folder, read_json, remove_made_folders, remove_stale_temporaries, write_json,
)

__all__ = ["BadRunFile", "MissingRunFile", "RunFolder", "RunFolderBusy", "RunStatus", "atomic_write", "check_output_file", "check_output_pages", "config_digest",
           "file_sha256", "folder_kind", "hold_folder", "load_model", "output_folder", "refuse_inside_run", "refuse_nested", "refuse_non_run_folder",
           "write_json", "write_page"]  # fmt: skip

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
#: A sweep folder's record of its spec (:mod:`training.sweep.spec` writes it).
SWEEP_SPEC_FILE = "sweep.json"
#: A ``reproduce`` folder's summary (one seed's, or a population's).
SUMMARY_FILE = "summary.json"
#: The newest ``metrics.json`` layout this version reads (its ``format_version``; today's
#: files carry none, which reads as 1: a later layout writes a higher one, refused here by name).
METRICS_FORMAT_VERSION = 1

#: The files the toolkit writes, by name, and what each is: an output page never replaces one.
TOOLKIT_FILES: dict[str, str] = {
    CONFIG_FILE: "a run's config", METRICS_FILE: "a run's metrics", WEIGHTS_FILE: "a run's finished weights",
    CHECKPOINT_FILE: "a run's checkpoint", ERROR_FILE: "a sweep's record of a failed run", SWEEP_SPEC_FILE: "a sweep's spec",
    SUMMARY_FILE: "a reproduction's summary", "results.csv": "a sweep's results table", "ranks.json": "a run's stable ranks",
    LOCK_FILE: "a folder's lock",
}  # fmt: skip


class RunStatus(StrEnum):
    """Where a run stands.  ``metrics.json`` records the first three; the others are read
    from the folder (:meth:`RunFolder.status`).  A ``StrEnum``: equal to its string."""

    RUNNING = "running"  # metrics.json while training; the status of a run a live process trains
    COMPLETED = "completed"
    DIVERGED = "diverged"  # the loss went non-finite; the last good weights are kept
    FAILED = "failed"  # a sweep recorded the run's exception in error.txt
    INTERRUPTED = "interrupted"  # metrics.json says running, but nothing is training it now
    PENDING = "pending"  # nothing finished yet
    ABSENT = "absent"  # a sweep's grid point without a folder
    UNREADABLE = "unreadable"  # a folder whose files are damaged or belong to another run


#: The statuses ``metrics.json`` may hold, and those of a run that has ended (final weights).
RECORDED_STATUSES: tuple[RunStatus, ...] = (RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.DIVERGED)
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


def looks_like_run(path: Path) -> bool:
    """True if ``path`` holds a run: a run's file (metrics, weights, checkpoint) or a
    ``config.json`` with a run config's sections."""
    if any((path / name).is_file() for name in (METRICS_FILE, WEIGHTS_FILE, CHECKPOINT_FILE)):
        return True
    try:
        data = read_json(path / CONFIG_FILE, "")
    except (BadRunFile, OSError):
        return False
    return isinstance(data, dict) and {"model", "init", "data", "train"} <= set(data)


def refuse_inside_run(path: str | Path, what: str, option: str = "--out") -> None:
    """Refuse to write ``what`` (``"a run"``, ``"a sweep"``, ``"phase diagrams"``) at
    ``path`` inside a run folder: a run folder is a leaf, holding one run and nothing else
    (a report of it would hide what is nested)."""
    path = Path(path).absolute()
    for parent in path.parents:
        if looks_like_run(parent):
            raise ValueError(f"{path} is inside the run folder {parent}; a run folder holds one run and nothing else, so {what} cannot be written there: choose an {option} outside it")


def refuse_non_run_folder(path: str | Path) -> None:
    """Refuse a folder where a run is expected that holds a sweep, a reproduction or other
    runs (at any depth up to :data:`NESTED_DEPTH`), naming which."""
    path = Path(path)
    if (path / SWEEP_SPEC_FILE).is_file():
        raise ValueError(f"{path} is a sweep folder (it has {SWEEP_SPEC_FILE}), not a run folder; give one of its runs or another --out")
    if path.is_dir():
        for child in sorted(path.iterdir()):
            if child.is_dir() and looks_like_run(child):
                raise ValueError(f"{path} holds run folders ({child.name}, ...), so it is not a run folder itself; choose another --out")
    refuse_nested(path, "a run", "run")


#: What a folder the toolkit wrote is, by the file that marks it (:func:`folder_kind`).
FOLDER_KINDS: tuple[tuple[str, str], ...] = (("sweep", SWEEP_SPEC_FILE), ("reproduction", SUMMARY_FILE))
#: How deep :func:`refuse_nested` looks below a folder (a population's runs are at depth 3),
#: and at most how many folders it reads there.
NESTED_DEPTH = 3
_NESTED_MAX_FOLDERS = 5000


def folder_kind(path: str | Path) -> str | None:
    """What the toolkit keeps in ``path``: ``"run"``, ``"sweep"``, ``"reproduction"`` (a
    ``reproduce`` folder, one seed's or a population's), or None (none of these)."""
    path = Path(path)
    if not path.is_dir():
        return None
    if looks_like_run(path):
        return "run"
    return next((kind for kind, marker in FOLDER_KINDS if (path / marker).is_file()), None)


#: For each kind of folder a command writes: the kinds it may hold below it, by depth
#: (a sweep's runs are its children; a reproduction's runs and seed folders are its own).
_MAY_HOLD: dict[str, dict[int, tuple[str, ...]]] = {
    "run": {},
    "sweep": {1: ("run",)},
    "reproduction": {1: ("reproduction",), 2: ("run",), 3: ("run",)},
    "figures": {},
}


def _folders_below(path: Path) -> Iterator[tuple[int, Path]]:
    level, seen = [path], 0
    for depth in range(1, NESTED_DEPTH + 1):
        below = []
        for folder in level:
            try:
                children = sorted(entry for entry in folder.iterdir() if entry.is_dir() and not entry.is_symlink())
            except OSError:
                continue
            for child in children:
                seen += 1
                if seen > _NESTED_MAX_FOLDERS:
                    return
                yield depth, child
                below.append(child)
        level = below


def refuse_nested(path: str | Path, what: str, kind: str, option: str = "--out") -> None:
    """Refuse to write ``what`` (a folder of ``kind``: ``run``, ``sweep``, ``reproduction``,
    ``figures``) at ``path`` where it would nest toolkit folders in one another: ``path``
    inside a run folder, ``path`` itself a folder of another kind, or ``path`` holding
    (up to :data:`NESTED_DEPTH` levels down) runs, sweeps or reproductions it did not make.
    Nothing is written; the message names the folder and the fix."""
    path = Path(path)
    check_folder_path(path, option)
    refuse_inside_run(path, what, option)
    own = folder_kind(path)
    if own is not None and own != kind:
        raise ValueError(f"{path} is a {own} folder, so {what} cannot be written there (folders of runs are never nested in one another): choose another {option}")
    for depth, child in _folders_below(path):
        held = folder_kind(child)
        if held is not None and held not in _MAY_HOLD[kind].get(depth, ()):
            raise ValueError(
                f"{path} holds a {held} folder ({child}), so {what} cannot be written there "
                f"(folders of runs are never nested in one another; that {held} could no longer be read or resumed): choose another {option}"
            )


@contextlib.contextmanager
def output_folder(path: str | Path, what: str, kind: str, busy: str, option: str = "--out") -> Iterator[Path]:
    """The folder a command writes ``what`` (a ``sweep`` or ``reproduction``, its ``kind``)
    into, held for this process (:func:`hold_folder`, ``busy`` the message of a second
    one): nested folders of runs are refused first (:func:`refuse_nested`), and refused
    input (a ``ValueError``) leaves no folder this call made behind."""
    refuse_nested(path, what, kind, option)
    with new_folder(path, option) as folder, hold_folder(folder, busy):
        yield folder


#: The tag that marks an HTML page the toolkit wrote, and for what (:func:`write_page`).
_PAGE_TAG = '<meta name="generator" content="interp-init {purpose}">'


def _page_purpose(path: Path) -> str | None:
    """The purpose an existing HTML page was written for by :func:`write_page`, or None."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8192).decode("utf-8", "replace")
    except OSError:
        return None
    start = head.find('<meta name="generator" content="interp-init ')
    if start < 0:
        return None
    rest = head[start + len('<meta name="generator" content="interp-init ') :]
    return rest.split('"', 1)[0]


def check_output_file(path: str | Path, purpose: str, option: str = "--out") -> Path:
    """Refuse an output file ``path`` for a page of ``purpose`` (``report``,
    ``phase-diagram``) that would replace anything but a previous page of the same purpose:
    a file the toolkit wrote for another purpose, a file of one's own, or any file inside a
    run folder.  Call it before the work; :func:`write_page` asks again when it writes."""
    path = Path(path)
    check_name_length(path)
    refuse_inside_run(path, f"a {purpose} page", option)
    if path.is_dir():
        raise ValueError(f"{option} {path} is a folder; give a file name such as {path / (purpose + '.html')}")
    if path.is_symlink() and not path.exists():
        raise ValueError(f"{option} {path} is a symbolic link to {os.readlink(path)}, which does not exist; remove the link or choose another {option}")
    if not path.exists():
        return path
    found = _page_purpose(path)
    if found == purpose:
        return path
    if found is not None:
        what = f"a {found} page"
    else:
        what = TOOLKIT_FILES.get(path.name, "a file interp-init did not write")
    raise ValueError(
        f"{path} exists and is {what}, not a {purpose} page this toolkit wrote; it is never overwritten: "
        f"choose another {option}, or move that file away first"
    )


def check_output_pages(out: str | Path, purpose: str, names: Iterable[str], option: str = "--out") -> None:
    """Refuse an ``out`` for pages of ``purpose``: an ``.html`` file (one page,
    :func:`check_output_file`) or a folder of ``<name>.html`` pages, which must not be or
    hold a run, sweep or reproduction folder, nor hold another file by those names."""
    out = Path(out)
    if out.suffix.lower() == ".html":
        check_output_file(out, purpose, option)
        return
    refuse_nested(out, f"{purpose} pages", "figures", option)
    for name in names:
        check_output_file(out / f"{name}.html", purpose, option)


def write_page(path: str | Path, html: str, purpose: str) -> Path:
    """Write the HTML page ``html`` to ``path`` atomically, tagged with its ``purpose`` so
    that the next page of that purpose may replace it (:func:`check_output_file`, asked
    again here); returns ``path``."""
    path = check_output_file(path, purpose)
    tag = _PAGE_TAG.format(purpose=purpose)
    at = html.lower().find("<head>")
    html = f"{html[: at + 6]}\n{tag}{html[at + 6 :]}" if at >= 0 else f"{tag}\n{html}"
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, html)


# ------------------------------------------------------------- metrics.json's values


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_metric(path: Path, where: str, key: str, value: Any, fix: str) -> None:
    """One metric of ``final`` or a history record: a finite number (an accuracy, a key
    ending in ``acc``, in [0, 1]), null, or an object of such numbers."""
    if isinstance(value, dict):
        for sub, inner in value.items():
            _check_metric(path, where, f"{key}.{sub}", inner, fix)
        return
    if value is None:
        return
    if not _is_number(value) or not math.isfinite(value):
        raise BadRunFile(path, f"has {where}.{key} = {value!r:.60}, not a finite number (or an object of them)", fix)
    if key.split(".")[-1].endswith("acc") and not 0.0 <= value <= 1.0:
        raise BadRunFile(path, f"has {where}.{key} = {value!r}, but an accuracy is in [0, 1]", fix)


def check_metrics_values(path: Path, data: dict[str, Any], fix: str) -> None:
    """The values of a ``metrics.json`` object of the right shape: its ``format_version``
    one this version reads, a finished run's ``final`` with its accuracies and a non-empty
    history (a completed run's), each record's epoch, step, loss and lr, and every metric
    a finite number (accuracies in [0, 1])."""
    version = data.get("format_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadRunFile(path, f"has format_version {version!r}, not a positive integer", fix)
    if version > METRICS_FORMAT_VERSION:
        raise BadRunFile(path, f"has format_version {version}, newer than the {METRICS_FORMAT_VERSION} this version of interp-init reads",
                         "upgrade interp-init (pip install -U interp-init) to read it")  # fmt: skip
    final, status = data["final"], data["status"]
    if status == RunStatus.COMPLETED:
        if not data["history"]:
            raise BadRunFile(path, "says the run completed but its history is empty", fix)
        for key in ("train_acc", "id_acc"):
            if not _is_number(final.get(key)):
                raise BadRunFile(path, f"says the run completed but final.{key} is {final.get(key)!r:.60}, not a number", fix)
    for where, record in [("final", final)] + [(f"history[{i}]", r) for i, r in enumerate(data["history"])]:
        if not record:
            continue
        for key in ("epoch", "step"):
            value = record.get(key)
            if key in record or where != "final":
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise BadRunFile(path, f"has {where}.{key} = {value!r:.60}, not an integer >= 0", fix)
        for key in ("loss", "lr"):
            if key in record or (where != "final" and key == "loss"):
                value = record.get(key)
                if not _is_number(value) or not math.isfinite(value):
                    raise BadRunFile(path, f"has {where}.{key} = {value!r:.60}, not a finite number", fix)
        for key, value in record.items():
            if key not in ("epoch", "step", "loss", "lr"):
                _check_metric(path, where, key, value, fix)


# -------------------------------------------------------------------------- the folder


@dataclass(frozen=True)
class RunFolder:
    """The folder of one run (see the module docstring for its files)."""

    path: Path

    def __post_init__(self) -> None:
        if isinstance(self.path, RunFolder):
            object.__setattr__(self, "path", self.path.path)
        if not isinstance(self.path, str | os.PathLike):
            raise ValueError(f"a run folder is a path (str or pathlib.Path), got {type(self.path).__name__} {self.path!r:.80}; give the folder a run was trained into")
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
        folder, or one holding a sweep or other runs, is refused first (nothing written).
        Refused input (a ``ValueError``: a user task's bad output, say) in a folder this
        call made leaves nothing behind: its ``config.json`` and the folder are removed."""
        refuse_inside_run(self.path, "a run")
        refuse_non_run_folder(self.path)
        check_folder_path(self.path)
        made = [p for p in (self.path, *self.path.parents) if not p.exists()]
        fresh = not made and not any(self.path.iterdir()) if self.path.is_dir() else True
        self.create()
        try:
            with hold_folder(self.path, "is being trained by another process ({owner}); wait for it to finish or choose another --out"):
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
            raise BadRunFile(self.config_path, f"has a malformed 'model' section ({err})", "restore the file or retrain the run") from None

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
                raise ValueError(f"{self.path} holds a run with a different config ({'; '.join(diffs[:5])}); choose another --out or remove that folder")
            return
        from interp_init.model import weights_metadata

        digest, fix = config_digest(config), "choose another --out, or delete the folder to train this run there"
        missing = f"and {CONFIG_FILE}, which would name that run, is missing"
        if self.weights_path.exists() and weights_metadata(self.weights_path).get("run_digest") != digest:
            raise BadRunFile(self.weights_path, f"holds the finished weights of another run than the one asked for ({missing})", fix)
        metrics = self.read_metrics()
        if metrics is not None and metrics["status"] in FINISHED_STATUSES and metrics.get("config_digest") != digest:
            raise BadRunFile(self.metrics_path, f"holds the finished metrics of another run than the one asked for ({missing})", fix)
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
        """Refuse to train over a finished run: a folder holding a finished artefact (the
        final weights, or a finished ``metrics.json``) without the other is resumed only
        from a checkpoint, never trained again from the start (which would replace the
        finished file, and not always with the same bytes)."""
        metrics = self.read_metrics()
        finished_metrics = metrics is not None and metrics["status"] in FINISHED_STATUSES
        has_weights = self.weights_path.exists()
        if finished_metrics == has_weights or self.checkpoint_path.exists():
            return  # finished (both: read, not trained), fresh (neither), or resumable
        if has_weights:
            problem = (f"holds a finished run's weights, but {METRICS_FILE} is missing" if metrics is None
                       else f"holds a finished run's weights, but {METRICS_FILE} says {metrics['status']!r}")
            raise BadRunFile(self.weights_path, f"{problem} and there is no {CHECKPOINT_FILE} to resume from: training again would replace the finished weights",
                             f"restore {METRICS_FILE}, or delete the folder (or choose another --out) to train the run again")  # fmt: skip
        raise BadRunFile(self.metrics_path, f"says the run {metrics['status']}, but {WEIGHTS_FILE} is missing and there is no {CHECKPOINT_FILE} to resume from: training again would replace the finished metrics",
                         f"restore {WEIGHTS_FILE}, or delete the folder (or choose another --out) to train the run again")  # fmt: skip

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
            raise BadRunFile(self.metrics_path, f"has status {data.get('status')!r}, not one of {[s.value for s in RECORDED_STATUSES]}", fix)
        for key, kind in (("final", dict), ("history", list)):
            if not isinstance(data.get(key), kind):
                raise BadRunFile(self.metrics_path, f"has a {key!r} that is not a JSON {'object' if kind is dict else 'array'}", fix)
        if not all(isinstance(record, dict) for record in data["history"]):
            raise BadRunFile(self.metrics_path, "has a 'history' entry that is not a JSON object", fix)
        check_metrics_values(self.metrics_path, data, fix)
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
        if self.is_busy():  # a live process is training it now
            return RunStatus.RUNNING
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
        metrics = self.read_metrics() if metrics is None else metrics
        finished = metrics is not None and metrics.get("status") in FINISHED_STATUSES
        if self.weights_path.exists():
            recorded = weights_metadata(self.weights_path).get("run_digest")
            if recorded is not None and recorded != digest:
                if finished and metrics.get("config_digest") == recorded:  # the two agree: config.json changed
                    raise BadRunFile(self.config_path, _EDITED, "restore the config.json the run was trained with, or train the edited config into another --out")
                if not finished:  # no metrics to tell which of the two files changed
                    raise BadRunFile(self.weights_path, _UNSURE, "restore the run's own file, or choose another --out (or delete the folder) for this config")
                raise BadRunFile(self.weights_path, "holds the weights of another run (its run digest differs from config.json's)", fix)
        if not finished:
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
            path.open("rb").close()  # the file may be fine and only closed to this user
            state = torch.load(path, map_location="cpu", weights_only=True)
        except OSError as err:
            raise BadRunFile(path, f"cannot be opened ({err.strerror})", "give this user read access to it (chmod), or run as its owner") from None
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
        return remove_stale_temporaries(self.path)


def load_model(run_dir: str | Path, device: str | torch.device | None = "cpu") -> HookedTransformer:
    """The trained ``HookedTransformer`` of a run folder, in eval mode.

    Its logits are identical to those of the model that was saved.  Weights or metrics
    copied from another run are refused (:meth:`RunFolder.check_bound`).
    """
    return RunFolder(run_dir).load_model(device)
