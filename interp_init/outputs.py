"""Where a command may write: the names of a run folder's files, what kind of toolkit
folder a path is, and the guards every command calls before it writes.

* A run folder is a leaf (:func:`refuse_inside_run`, :func:`refuse_non_run_folder`), and no
  folder of runs (run, sweep, reproduction) is written where it would nest in another
  (:func:`refuse_nested`; :func:`output_folder` makes, holds and, on refused input, removes
  a command's folder), nor in stored records (:func:`interp_init.stored.refuse_stored`).
* No file any command writes, whatever flag named it, replaces a file the command did not
  make for that purpose: an HTML page is written by :func:`write_page`, tagged with its
  purpose, any other file (an image, a table) by :func:`write_output`, recorded with its
  digest in its folder's :data:`OUTPUTS_RECORD`; each replaces only a previous, unchanged
  output of that purpose (:func:`check_output_file`, :func:`check_output_pages`,
  :func:`check_output_folder`, called before the work), never inside a run folder, never a
  folder of runs, and never two outputs of one command at one path
  (:func:`check_distinct_outputs`).  A folder that cannot be written is refused up front,
  naming the flag (:func:`interp_init.fileio.check_folder_path`).
* A study folder (a sweep, a reproduction, a search) is marked by its record
  (:data:`STUDY_FILE`, or a sweep's ``sweep.json``); what may be written inside one is
  decided by :mod:`training.studies.study`.

:mod:`interp_init.runfolder` builds on this module (and re-exports its names).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from interp_init.fileio import (
    LOCK_FILE,
    BadRunFile,
    atomic_write,
    file_sha256,
    hold_folder,
    new_folder,
    read_json,
    write_json,
)
from interp_init.paths import check_folder_path, check_name_length, check_path_names
from interp_init.stored import STORED_FILE, STORED_STUDY_FILE, STUDY_PAGE, refuse_stored

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.json"
WEIGHTS_FILE = "model.safetensors"
CHECKPOINT_FILE = "checkpoint.pt"
ERROR_FILE = "error.txt"
#: The format tag of checkpoints written by :meth:`RunFolder.save_checkpoint`.
CHECKPOINT_FORMAT = "interp-init-checkpoint/1"
#: A sweep folder's record of its spec (:mod:`training.studies.sweep.spec` writes it).
SWEEP_SPEC_FILE = "sweep.json"
#: A ``reproduce`` folder's summary (one seed's, or a population's).
SUMMARY_FILE = "summary.json"
#: A study folder's record: its kind and the runs it names, each with its config's digest
#: (:mod:`training.studies.study` writes and reads it).
STUDY_FILE = "study.json"
#: A folder's record of the files written into it by :func:`write_output` (purpose, digest).
OUTPUTS_RECORD = ".interp-init-outputs.json"

#: The files the toolkit writes, by name, and what each is: an output page never replaces one.
TOOLKIT_FILES: dict[str, str] = {
    CONFIG_FILE: "a run's config",
    METRICS_FILE: "a run's metrics",
    WEIGHTS_FILE: "a run's finished weights",
    CHECKPOINT_FILE: "a run's checkpoint",
    ERROR_FILE: "a sweep's record of a failed run",
    SWEEP_SPEC_FILE: "a sweep's spec",
    SUMMARY_FILE: "a reproduction's summary",
    "results.csv": "a sweep's results table",
    "ranks.json": "a run's stable ranks",
    LOCK_FILE: "a folder's lock",
    STUDY_FILE: "a study's record of its runs",
    OUTPUTS_RECORD: "a folder's record of its outputs",
    STORED_FILE: "a stored run's marker",
    STORED_STUDY_FILE: "a stored study's manifest",
    STUDY_PAGE: "a stored study's page",
}


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
    check_path_names(path, option)
    for parent in Path(path).absolute().parents:
        if looks_like_run(parent):
            raise ValueError(
                f"{path} is inside the run folder {as_given(path, parent)}; a run folder holds one run and nothing else, so {what} cannot be "
                f"written there: choose an {option} outside it"
            )


def as_given(path: str | Path, ancestor: Path) -> Path:
    """The folder ``ancestor`` (an absolute ancestor of ``path``) written as the user wrote
    ``path``: relative where ``path`` was, so that messages name the user's own path."""
    path = Path(path)
    up = len(path.absolute().parts) - len(ancestor.parts)
    if path.is_absolute() or not 0 < up <= len(path.parents) or path.parents[up - 1] == Path("."):
        return ancestor
    return path.parents[up - 1]


def refuse_non_run_folder(path: str | Path) -> None:
    """Refuse a folder where a run is expected that holds a sweep, a reproduction or other
    runs (at any depth up to :data:`NESTED_DEPTH`), naming which."""
    path = Path(path)
    check_path_names(path)
    if (path / SWEEP_SPEC_FILE).is_file():
        raise ValueError(
            f"{path} is a sweep folder (it has {SWEEP_SPEC_FILE}), not a run folder; give one of its runs or another --out"
        )
    if path.is_dir():
        for child in sorted(path.iterdir()):
            if child.is_dir() and looks_like_run(child):
                raise ValueError(
                    f"{path} holds run folders ({child.name}, ...), so it is not a run folder itself; choose another --out"
                )
    refuse_nested(path, "a run", "run")


#: What a folder the toolkit wrote is, by the file that marks it (:func:`folder_kind`;
#: a study's own record, :data:`STUDY_FILE`, names its kind first).
FOLDER_KINDS: tuple[tuple[str, str], ...] = (("sweep", SWEEP_SPEC_FILE), ("reproduction", SUMMARY_FILE))
#: The kinds of study folder (folders of runs that one command made and reads as a whole;
#: the GPU suite's folder is a reproduction's).
STUDY_KINDS: tuple[str, ...] = ("sweep", "reproduction", "search", "concept-graphs")
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
    recorded = study_kind(path)
    return recorded or next((kind for kind, marker in FOLDER_KINDS if (path / marker).is_file()), None)


def study_kind(path: str | Path) -> str | None:
    """The kind its :data:`STUDY_FILE` gives a study folder (None: no readable record)."""
    try:
        kind = read_json(Path(path) / STUDY_FILE, "").get("kind")
    except (BadRunFile, OSError, AttributeError):
        return None
    return kind if kind in STUDY_KINDS else None


def enclosing_study(path: str | Path) -> tuple[Path, str] | None:
    """The nearest folder above ``path`` (not ``path`` itself) that is a study folder, with
    its kind; None if there is none."""
    for parent in Path(path).absolute().parents:
        kind = folder_kind(parent)
        if kind in STUDY_KINDS:
            return parent, kind
    return None


#: For each kind of folder a command writes: the kinds it may hold below it, by depth
#: (a sweep's runs are its children; a reproduction's runs and seed folders are its own).
_MAY_HOLD: dict[str, dict[int, tuple[str, ...]]] = {
    "run": {},
    "sweep": {1: ("run",)},
    "reproduction": {1: ("reproduction",), 2: ("run",), 3: ("run",)},
    "search": {1: ("run",)},
    "concept-graphs": {1: ("run",)},
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
    refuse_stored(path, what, option)
    refuse_inside_run(path, what, option)
    own = folder_kind(path)
    if own is not None and own != kind:
        raise ValueError(
            f"{path} is a {own} folder, so {what} cannot be written there (folders of runs are never nested in one another): choose another {option}"
        )
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


#: Suffixes of files (not folders): an output folder's name never ends in one of them.
FILE_SUFFIXES: frozenset[str] = frozenset(
    {
        ".png",
        ".svg",
        ".pdf",
        ".jpg",
        ".jpeg",
        ".webp",
        ".csv",
        ".json",
        ".md",
        ".txt",
        ".htm",
        ".toml",
        ".pt",
        ".safetensors",
    }
)


#: The purposes whose outputs are HTML pages (:func:`write_page`).
PAGE_PURPOSES: tuple[str, ...] = ("report", "phase-diagram")
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
    """Refuse an output file ``path`` of ``purpose`` (``report``, ``phase-diagram``, ``report
    image``, ...) that would replace anything but a previous output of the same purpose
    (a page tagged by :func:`write_page`, or a file :func:`write_output` recorded and nobody
    changed since): a file the toolkit wrote for another purpose, a file of one's own, or
    any file inside a run folder; nor a path whose folder cannot be written.  Call it
    before the work; the writers ask again when they write."""
    path = Path(path)
    check_path_names(path, option)
    check_name_length(path)
    refuse_stored(path.parent, f"a {purpose} page", option)
    noun = "page" if purpose in PAGE_PURPOSES else "file"
    refuse_inside_run(path, f"a {purpose} {noun}", option)
    if path.is_dir():
        example = path / (purpose.replace(" ", "-") + ".html")
        raise ValueError(f"{option} {path} is a folder; give a file name such as {example}")
    if path.is_symlink() and not path.exists():
        raise ValueError(
            f"{option} {path} is a symbolic link to {os.readlink(path)}, which does not exist; remove the link or choose another {option}"
        )
    check_folder_path(path.parent, option, what=path)
    if not path.exists():
        return path
    page = _page_purpose(path)
    found = page or recorded_purpose(path)
    if found == purpose:
        return path
    if found is not None:
        what = f"a {found} page" if page else f"a {found}"
    else:
        what = TOOLKIT_FILES.get(path.name, "a file interp-init did not write (or one changed since it wrote it)")
    wanted = f"a {purpose} page" if noun == "page" else f"a {purpose}"
    raise ValueError(
        f"{path} exists and is {what}, not {wanted} this toolkit wrote; it is never overwritten: choose another {option}, or move that file away first"
    )


def check_output_folder(path: str | Path, purpose: str, names: Iterable[str], option: str) -> Path:
    """Refuse a folder ``path`` for the files ``names`` of ``purpose`` (report images,
    phase-diagram pages): a run folder or one inside a run folder, a sweep's, a
    reproduction's or a search's folder (files among its runs would be taken for its
    own), a folder that cannot be written, or one holding a file by one of ``names`` that
    is not a previous output of ``purpose`` (:func:`check_output_file`).  Nothing is
    written."""
    path = Path(path)
    check_folder_path(path, option)
    refuse_inside_run(path, f"{purpose} files", option)
    kind = folder_kind(path)
    if kind is not None:
        raise ValueError(
            f"{path} is a {kind} folder, so {purpose} files cannot be written there (it holds its runs and its own files): choose another {option}"
        )
    for name in names:
        check_output_file(path / name, purpose, option)
    return path


def check_distinct_outputs(outputs: Iterable[tuple[str | Path, str]]) -> None:
    """Refuse two outputs of one command at one path: ``outputs`` are ``(path, option)``
    pairs (a file, or a folder its option fills), compared as absolute paths; a file
    inside another output's folder is named as such."""
    seen: dict[Path, str] = {}
    for raw, option in outputs:
        path = Path(raw).absolute()
        for other, other_option in seen.items():
            if path == other:
                raise ValueError(
                    f"{other_option} and {option} both name {raw}: one command never writes two outputs at one path; give each its own"
                )
        seen[path] = option


#: The purpose of a file in a folder's :data:`OUTPUTS_RECORD`, by name.
def _outputs_record(folder: Path) -> dict[str, Any]:
    try:
        data = read_json(folder / OUTPUTS_RECORD, "")
    except (BadRunFile, OSError):
        return {}
    return data if isinstance(data, dict) else {}


def recorded_purpose(path: str | Path) -> str | None:
    """The purpose :func:`write_output` (or :func:`record_output`) recorded for ``path``, if
    the file is unchanged since."""
    path = Path(path)
    entry = _outputs_record(path.parent).get(path.name)
    if not isinstance(entry, dict) or not isinstance(entry.get("purpose"), str):
        return None
    try:
        same = file_sha256(path) == entry.get("sha256")
    except OSError:
        return None
    return entry["purpose"] if same else None


def write_output(path: str | Path, data: bytes | str, purpose: str, option: str = "--out") -> Path:
    """Write the file ``path`` of ``purpose`` atomically (asking :func:`check_output_file`
    again) and record it, with its digest, in its folder's :data:`OUTPUTS_RECORD`, so that
    the next output of that purpose may replace it while nobody changed it."""
    path = check_output_file(path, purpose, option)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)
    return record_output(path, purpose)


def record_output(path: str | Path, purpose: str) -> Path:
    """Record the file ``path`` (as it is now) as an output of ``purpose`` in its folder's
    :data:`OUTPUTS_RECORD` (what :func:`write_output` does after writing)."""
    path = Path(path)
    record = _outputs_record(path.parent)
    record[path.name] = {"purpose": purpose, "sha256": file_sha256(path)}
    write_json(path.parent / OUTPUTS_RECORD, record)
    return path


def check_output_pages(out: str | Path, purpose: str, names: Iterable[str], option: str = "--out") -> None:
    """Refuse an ``out`` for pages of ``purpose``: an ``.html`` file (one page,
    :func:`check_output_file`) or a folder of ``<name>.html`` pages, which must not be or
    hold a run, sweep or reproduction folder, nor hold another file by those names."""
    out = Path(out)
    check_path_names(out, option)
    if out.suffix.lower() == ".html" or (out.exists() and not out.is_dir()):
        check_output_file(out, purpose, option)  # an existing file: refused unless a page of this purpose
    if out.suffix.lower() == ".html":
        return
    if out.suffix.lower() in FILE_SUFFIXES:
        raise ValueError(
            f"{option} {out} names a {out.suffix} file, but {purpose} pages are HTML: give a name ending in .html "
            f"(one page) or a folder (one page per figure)"
        )
    check_output_folder(out, purpose, [f"{name}.html" for name in names], option)


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
