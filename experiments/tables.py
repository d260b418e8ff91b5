"""The results tables of README.md, docs/ and benchmarks/README.md, written from the stored records.

Every results table (and every number a sentence of README.md states) lies between marker
comments in its page, and is written here from the stored studies under
``experiments/results/`` (``experiments/store.py``) through the project's one reader
(:class:`training.studies.records.RunRecord`, :func:`training.studies.population.read_population`, the
selection protocols, :mod:`training.studies.records`)::

    python experiments/tables.py            # write every table whose records are stored
    python experiments/tables.py --check    # exit 1 naming the table and the cell where a typed number differs
    python experiments/tables.py --list     # every marked block: its page, what it reads, whether it is checked

In a page, a table is a block and a number in a sentence a span (on one line)::

    <!-- table:NAME -->                       ... <!-- text:NAME -->4 of 8<!-- /text:NAME --> ...
    | ... |
    <!-- /table:NAME -->

``NAME`` is a table of ``experiments/results_tables.py`` (``--list`` names them): a function
of the stored records registered with ``@generator(NAME, STUDY, ...)``, so adding a table is a
function there and a marker in a page.  A generator whose studies are not stored yet leaves its block as it
is and is listed as awaiting them; one that reads an optional study where it is stored
(``records.stored(NAME)``) is written without it and listed as made in part
(``--require-records`` makes either a failure).  Tables typed
by hand from run folders that were not kept are marked as history::

    <!-- history:NAME typed at COMMIT -->
    ...
    <!-- /history:NAME -->

The generator writes the note that opens such a block and nothing else in it; ``--check``
lists them as not checkable instead of passing them silently.

Blocks do not nest: a marker inside another block is reported (as an unpaired one is) and its
page is left as it is.  Exit codes: 0 every block agrees (or was written); 1 a block differs,
or a marker is unpaired or nested; 2 bad input: damaged records (a cut ``metrics.json`` or
``stored-study.json``, a stored run folder gone), a page that is not UTF-8 or a folder named
like a page, a ``--records`` that is not a folder, a ``--root`` with no pages; each is one
line, and every other block is still checked.  Pages are rewritten through the atomic writer,
under the lock on ``--root`` (a second writer is refused by name).
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import click

from interp_init.fileio import BadRunFile, MissingRunFile, atomic_write, file_sha256, hold_folder
from interp_init.stored import STORED_STUDY_FILE, STUDY_PAGE
from training.cli.errors import Script
from training.config import one_line
from training.studies.population import StoredStudy

#: The repository this script lies in, and where its stored studies are.
ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path("experiments") / "results"
#: The pages whose blocks are written and checked, as globs under the repository.
PAGES: tuple[str, ...] = ("README.md", "docs/*.md", "benchmarks/README.md")

_BLOCK = re.compile(
    r"<!-- (?P<kind>table|text|history):(?P<name>[a-z0-9-]+)(?: (?P<attrs>[^>]*?))? -->(?P<body>.*?)<!-- /(?P=kind):(?P=name) -->",
    re.DOTALL,
)
_MARKER = re.compile(r"<!-- /?(?:table|text|history):[a-z0-9-]+[^>]*-->")
_TYPED_AT = re.compile(r"typed at ([0-9a-f]{7,40})")
#: The note that opens a history block.
HISTORY_NOTE = "*History: typed by hand at {commit} from run folders that were not kept; not checked against records.*"


def _sibling(name: str) -> ModuleType:
    """The script ``experiments/<name>.py`` beside this one, as a module (experiments/ is not a package)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _tables() -> dict[str, Any]:
    """Every table's generator by name (``experiments/results_tables.py``'s ``TABLES``)."""
    return _sibling("results_tables").TABLES


class MissingRecords(Exception):
    """A generator's study is not stored (yet)."""


@dataclass(frozen=True)
class Records:
    """The stored studies under ``root`` (``experiments/results``)."""

    root: Path
    #: The studies a table asked for with :meth:`stored` and found missing (a table made in part).
    missed: set[str] = field(default_factory=set, compare=False)
    #: The studies whose files were found whole (:func:`check_whole`), read once per run.
    whole: set[str] = field(default_factory=set, compare=False)

    def study(self, name: str) -> StoredStudy:
        """The stored study ``name``, its files checked against its manifest
        (:func:`check_whole`); :class:`MissingRecords` where it is not stored."""
        if not (self.root / name / STORED_STUDY_FILE).is_file():
            raise MissingRecords(name)
        study = StoredStudy.read(self.root / name)
        if name not in self.whole:
            check_whole(study)
            self.whole.add(name)
        return study

    def stored(self, name: str) -> bool:
        """Whether the study ``name`` is stored (a table that reads it where it is); a study
        found missing is remembered, so the table is listed as made in part."""
        found = (self.root / name / STORED_STUDY_FILE).is_file()
        if not found:
            self.missed.add(name)
        return found

    def script(self, name: str) -> ModuleType:
        """The script ``experiments/<name>.py`` (``race``, ``paper_statistic``) as a module."""
        return _sibling(name)


def check_whole(study: StoredStudy) -> None:
    """Refuse a stored study whose files are not the ones its manifest (``stored-study.json``)
    lists with their SHA-256: a file cut, edited, gone (a seed folder moved away) or added
    (hidden files aside) is a :class:`~interp_init.fileio.BadRunFile` naming it, never a table
    of fewer or other runs."""
    files = study.get("files")
    if not isinstance(files, dict):
        return  # a manifest without its file list (records marked by hand): nothing to check against
    for rel, entry in files.items():
        path = study.path / rel
        if not path.is_file():
            raise MissingRunFile(
                path,
                "is missing, though stored-study.json lists it",
                "restore it (git checkout), or store the study again",
            )
        if isinstance(entry, dict) and entry.get("sha256") not in (None, file_sha256(path)):
            raise BadRunFile(
                path,
                "is not the file that was stored (its SHA-256 differs from stored-study.json's: cut or edited)",
                "restore it (git checkout), or store the study again",
            )
    listed = set(files) | {STORED_STUDY_FILE, STUDY_PAGE}
    for path in sorted(study.path.rglob("*")):
        rel = path.relative_to(study.path)
        if path.is_file() and rel.as_posix() not in listed and not any(part.startswith(".") for part in rel.parts):
            raise BadRunFile(
                path,
                "is not one of the stored files (stored-study.json does not list it: a run or file added by hand would change the tables)",
                "move it out of the stored records, or store the study again",
            )


# ----------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class Block:
    """One marked block of a page: its kind (``table``, ``text``, ``history``), name, the
    marker's attributes, its body as typed and where it lies in the page's text."""

    page: str
    kind: str
    name: str
    attrs: str
    body: str
    start: int
    end: int

    @property
    def commit(self) -> str | None:
        """A history block's commit (``typed at COMMIT``)."""
        found = _TYPED_AT.search(self.attrs)
        return None if found is None else found.group(1)

    def render(self, content: str) -> str:
        """The whole block with ``content`` as its body."""
        head, tail = (
            f"<!-- {self.kind}:{self.name}{' ' + self.attrs if self.attrs else ''} -->",
            f"<!-- /{self.kind}:{self.name} -->",
        )
        return f"{head}{content}{tail}" if self.kind == "text" else f"{head}\n\n{content.strip()}\n\n{tail}"


def page_blocks(text: str, page: str) -> list[Block]:
    """The blocks of one page; a ``ValueError`` naming a marker without its pair."""
    blocks = [
        Block(page, m["kind"], m["name"], m["attrs"] or "", m["body"], m.start(), m.end())
        for m in _BLOCK.finditer(text)
    ]
    for block in blocks:
        nested = _MARKER.search(block.body)
        if nested is not None:  # written, the outer block's body would erase the inner block
            line = text.count("\n", 0, text.index("-->", block.start) + 3 + nested.start()) + 1
            raise ValueError(
                f"{page}:{line}: the marker {nested.group()} lies inside the block {block.kind}:{block.name}; blocks do not nest: move it out of that block"
            )
    inside = [(b.start, b.end) for b in blocks]
    for stray in _MARKER.finditer(text):
        if not any(start <= stray.start() < end for start, end in inside):
            line = text.count("\n", 0, stray.start()) + 1
            raise ValueError(
                f"{page}:{line}: the marker {stray.group()} has no matching opening or closing marker; pair it"
            )
    return blocks


def history_body(block: Block) -> str:
    """A history block's body with its note first (written, or rewritten, by the generator)."""
    note = HISTORY_NOTE.format(commit=block.commit)
    rest = block.body.strip()
    if rest.startswith("*History:"):
        rest = rest.split("\n\n", 1)[1] if "\n\n" in rest else ""
    return f"{note}\n\n{rest}"


# ------------------------------------------------------------------------------ diffs


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _changed(typed: str, made: str, context: int = 30) -> str:
    """Where two lines of prose differ: the differing words, with some words around them."""
    a, b = typed.split(" "), made.split(" ")
    head = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    tail = next(
        (i for i, (x, y) in enumerate(zip(reversed(a[head:]), reversed(b[head:])), start=0) if x != y),
        min(len(a), len(b)) - head,
    )
    before = " ".join(a[:head])[-context:]
    after_a, after_b = " ".join(a[len(a) - tail :])[:context], " ".join(b[len(b) - tail :])[:context]
    shown_a, shown_b = " ".join(a[head : len(a) - tail]), " ".join(b[head : len(b) - tail])
    return f'typed "...{before} {shown_a} {after_a}...", the records give "...{before} {shown_b} {after_b}..."'


def differences(typed: str, made: str) -> list[str]:
    """Where ``typed`` differs from ``made``: per table cell (its row's first cell and its
    column's header), or per line outside tables."""
    a, b = typed.strip().splitlines(), made.strip().splitlines()
    out: list[str] = []
    header: list[str] = []
    for number, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        is_row = y.lstrip().startswith("|")
        if is_row and (number == 1 or not b[number - 2].lstrip().startswith("|")):
            header = _cells(y)
        if x == y:
            continue
        if is_row and x.lstrip().startswith("|") and len(_cells(x)) == len(_cells(y)):
            for column, (cx, cy) in enumerate(zip(_cells(x), _cells(y), strict=True)):
                if cx != cy:
                    name = header[column] if column < len(header) else f"column {column + 1}"
                    out.append(f'row "{_cells(y)[0]}", column "{name}": typed "{cx}", the records give "{cy}"')
        else:
            out.append(f"line {number}: " + _changed(x.strip(), y.strip()))
    if len(a) != len(b):
        out.append(f"typed {len(a)} lines, the records give {len(b)}")
    return out


# ---------------------------------------------------------------------- the run


@dataclass
class Outcome:
    """What a check or a write found: problems (exit 1), blocks awaiting records, history blocks, blocks written."""

    problems: list[str]
    awaiting: list[str]
    history: list[str]
    written: list[str]
    agreed: list[str]
    unplaced: list[str]
    #: Bad input, one line each (exit 2): damaged records, a page that cannot be read.
    damaged: list[str] = field(default_factory=list)


def _pages(root: Path) -> list[Path]:
    return sorted(p for pattern in PAGES for p in root.glob(pattern))


def run(root: Path, records: Records, write: bool) -> Outcome:
    """Check (``write=False``) or write every block of the pages under ``root``."""
    outcome = Outcome([], [], [], [], [], [])
    made: dict[str, str | None] = {}
    placed: set[str] = set()
    for page in _pages(root):
        rel = page.relative_to(root).as_posix()
        if page.is_dir():
            outcome.damaged.append(
                f"{rel} is a folder, not a page (the pages are {', '.join(PAGES[:-1])} and {PAGES[-1]}); rename it"
            )
            continue
        try:
            text = page.read_bytes().decode("utf-8")
        except UnicodeDecodeError as err:
            outcome.damaged.append(
                f"{rel} is not UTF-8 text (byte {err.start}); save it as UTF-8 (its blocks are not checked)"
            )
            continue
        try:
            blocks = page_blocks(text, rel)
        except ValueError as err:
            outcome.problems.append(str(err))
            continue
        new = text
        for block in reversed(blocks):
            where = f"{rel}: {block.kind} {block.name}"
            if block.kind == "history":
                if block.name in _tables():
                    outcome.problems.append(f"{where}: a generated table cannot be history; mark it table:{block.name}")
                elif block.commit is None:
                    outcome.problems.append(
                        f"{where}: a history marker says when it was typed: <!-- history:{block.name} typed at COMMIT -->"
                    )
                else:
                    outcome.history.append(f"{where} (typed at {block.commit})")
                    body = history_body(block)
                    if write:
                        new = new[: block.start] + block.render(body) + new[block.end :]
                    elif block.body.strip() != body.strip():
                        outcome.problems.append(
                            f"{where}: its note is missing or stale; run python experiments/tables.py"
                        )
                continue
            table = _tables().get(block.name)
            if table is None:
                outcome.problems.append(
                    f"{where}: no generator of that name (python experiments/tables.py --list names them)"
                )
                continue
            placed.add(block.name)
            if block.name not in made:
                try:
                    before = set(records.missed)
                    made[block.name] = table.make(records)
                    outcome.awaiting += [
                        f"{block.name} in part (awaits {RESULTS / name})" for name in sorted(records.missed - before)
                    ]
                except MissingRecords as missing:
                    made[block.name] = None
                    outcome.awaiting.append(f"{block.name} (awaits {RESULTS / str(missing)})")
                except (
                    ValueError,
                    OSError,
                    LookupError,
                ) as err:  # damaged records: BadRunFile, MissingRunFile, a shape the table cannot read
                    made[block.name] = None
                    what = one_line(err) if isinstance(err, (ValueError, OSError)) else f"{type(err).__name__}: {err}"
                    outcome.damaged.append(f"{where}: its records cannot be read: {what}")
            content = made[block.name]
            if content is None:
                continue
            if block.kind == "text" and "\n" in content.strip():
                outcome.problems.append(f"{where}: the generator gives several lines; mark it table:{block.name}")
                continue
            if write:
                new = new[: block.start] + block.render(content) + new[block.end :]
                if block.body.strip() != content.strip():
                    outcome.written.append(where)
            elif block.body.strip() != content.strip():
                outcome.problems += [
                    f"differs: {where}: {d}"
                    for d in differences(block.body, content) or ["its text differs from what the records give"]
                ]
            else:
                outcome.agreed.append(where)
        if write and new != text:
            atomic_write(page, new)
    outcome.awaiting = sorted(set(outcome.awaiting))
    outcome.unplaced = sorted(set(_tables()) - placed)
    return outcome


@click.command(cls=Script, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--check", is_flag=True, help="Write nothing; exit 1 naming each table and cell that differs from the records."
)
@click.option(
    "--list",
    "listing",
    is_flag=True,
    help="Write nothing; list the tables, then every marked block and whether it agrees with its records.",
)
@click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=ROOT,
    show_default=True,
    help="The repository whose pages are read.",
)
@click.option(
    "--records",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="The stored studies (default ROOT/experiments/results).",
)
@click.option("--require-records", is_flag=True, help="Fail (exit 1) where a table's records are not stored.")
def main(check: bool, listing: bool, root: Path, records: Path | None, require_records: bool) -> None:
    """Write (or --check) every results table of README.md, docs/ and benchmarks/README.md from the stored records."""
    stored = Records(root / RESULTS if records is None else records)
    if not _pages(root):
        raise ValueError(
            f"--root {root} holds no page ({', '.join(PAGES[:-1])} or {PAGES[-1]}); give the repository's root"
        )
    write = not (check or listing)
    with (
        hold_folder(
            root, "is having its tables written by another experiments/tables.py ({owner}); wait for it to finish"
        )
        if write
        else contextlib.nullcontext()
    ):
        outcome = run(root, stored, write=write)
    if listing:
        for table in _tables().values():
            click.echo(f"table {table.name}: {table.what} (reads {', '.join(str(RESULTS / s) for s in table.studies)})")
        for line in outcome.agreed:
            click.echo(f"block {line}: agrees with its records")
        for line in outcome.history:
            click.echo(f"block {line}: history, not checkable")
    for line in outcome.written:
        click.echo(f"wrote {line}")
    for line in outcome.awaiting:
        click.echo(f"not checkable yet: {line}")
    if outcome.history and not listing:
        pages = Counter(line.split(":", 1)[0] for line in outcome.history)
        click.echo(
            f"not checkable (history, typed by hand): {len(outcome.history)} blocks ("
            + ", ".join(f"{page} {n}" for page, n in sorted(pages.items()))
            + "; --list names them)"
        )
    for name in outcome.unplaced:
        click.echo(
            f"not placed in any page: {name} (put <!-- table:{name} --> <!-- /table:{name} --> where it belongs)"
        )
    problems = outcome.problems + ([f"records not stored: {a}" for a in outcome.awaiting] if require_records else [])
    for line in problems:
        click.echo(line, err=True)
    for line in outcome.damaged:
        click.echo(f"tables.py: error: {line}", err=True)
    done = len(outcome.agreed) if check or listing else len(outcome.written)
    click.echo(
        f"{done} blocks {'written from' if not (check or listing) else 'agree with'} the records; {len(problems)} problems"
        + (f"; {len(outcome.damaged)} damaged inputs (exit 2)" if outcome.damaged else "")
    )
    raise click.exceptions.Exit(2 if outcome.damaged else 1 if problems else 0)


if __name__ == "__main__":
    main()
