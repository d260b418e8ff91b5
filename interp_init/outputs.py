"""Where a command may write: the names of a run folder's files, what kind of toolkit
folder a path is, and the guards every command calls before it writes.

* A run folder is a leaf (:func:`refuse_inside_run`, :func:`refuse_non_run_folder`), and no
  folder of runs (run, sweep, reproduction) is written where it would nest in another
  (:func:`refuse_nested`; :func:`output_folder` makes, holds and, on refused input, removes
  a command's folder), nor in stored records (:func:`interp_init.stored.refuse_stored`).
* No ``--out`` replaces a file a command did not make for that purpose: an HTML page is
  written by :func:`write_page`, tagged with its purpose, and replaces only a previous page
  of that purpose (:func:`check_output_file`, :func:`check_output_pages`, called before the
  work).

:mod:`interp_init.runfolder` builds on this module (and re-exports its names).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from interp_init.fileio import LOCK_FILE, BadRunFile, atomic_write, check_folder_path, check_name_length, hold_folder, new_folder, read_json
from interp_init.stored import STORED_FILE, STUDY_FILE, STUDY_PAGE, refuse_stored

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

#: The files the toolkit writes, by name, and what each is: an output page never replaces one.
TOOLKIT_FILES: dict[str, str] = {
    CONFIG_FILE: "a run's config", METRICS_FILE: "a run's metrics", WEIGHTS_FILE: "a run's finished weights",
    CHECKPOINT_FILE: "a run's checkpoint", ERROR_FILE: "a sweep's record of a failed run", SWEEP_SPEC_FILE: "a sweep's spec",
    SUMMARY_FILE: "a reproduction's summary", "results.csv": "a sweep's results table", "ranks.json": "a run's stable ranks",
    LOCK_FILE: "a folder's lock", STORED_FILE: "a stored run's marker", STUDY_FILE: "a stored study's manifest", STUDY_PAGE: "a stored study's page",
}  # fmt: skip



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
    refuse_stored(path, what, option)
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
    refuse_stored(path.parent, f"a {purpose} page", option)
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
