"""Regenerate docs/layout.md's table of what stands on what from the imports:
``python docs/make_layout_table.py`` rewrites the table in place (``--check``: exit 1 where it
differs).  ``tests/test_docs.py`` checks that the page holds what this prints, and
``tests/test_layout.py`` checks the table against the imports by a computation of its own.

A folder stands on the folders its modules import (anywhere in them: inside functions and
under ``if TYPE_CHECKING`` too); a top package's ``__init__.py`` is its front and stands in
no folder.  Rows keep the page's order (a new folder goes after the ones it stands on); each
row names what it stands on nearest first (the rows above it, bottom up).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("interp_init", "probes", "training")
PAGE = ROOT / "docs" / "layout.md"
HEAD = "| folder | stands on |\n|---|---|\n"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def folders() -> dict[str, set[str]]:
    """Each folder of the packages -> the folders its modules import."""
    paths = {_module(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}
    found: dict[str, set[str]] = {}
    for path in paths.values():
        rel = path.relative_to(ROOT)
        if rel.name == "__init__.py" and len(rel.parts) == 2:
            continue  # a top package's front
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name for a in node.names if a.name in paths}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    imported.add(full if full in paths else node.module)
        here = rel.parent.as_posix()
        found.setdefault(here, set())
        found[here] |= {paths[m].relative_to(ROOT).parent.as_posix() for m in imported if m in paths} - {here}
    return found


def _page_order(text: str) -> list[str]:
    section = text.split(HEAD, 1)[1].split("\n\n", 1)[0]
    return [line.split("`")[1] for line in section.splitlines() if line.startswith("| `")]


def table(text: str) -> str:
    """The table for the page ``text`` (its rows' order kept)."""
    graph = folders()
    order = [f for f in _page_order(text) if f in graph]
    for folder in sorted(set(graph) - set(order)):  # a new folder: after everything it stands on
        order.insert(max((order.index(d) + 1 for d in graph[folder] if d in order), default=0), folder)
    rows = []
    for folder in order:
        deps = sorted(graph[folder], key=lambda d: -order.index(d) if d in order else 0)
        rows.append(f"| `{folder}` | {', '.join(f'`{d}`' for d in deps) or 'nothing of the project'} |")
    return HEAD + "\n".join(rows) + "\n"


def rewritten(text: str) -> str:
    """``text`` with its table replaced by :func:`table`."""
    before, rest = text.split(HEAD, 1)
    old, after = rest.split("\n\n", 1)
    return before + table(text) + "\n" + after


if __name__ == "__main__":
    text = PAGE.read_text(encoding="utf-8")
    new = rewritten(text)
    if "--check" in sys.argv[1:]:
        sys.exit(0 if new == text else 1)
    PAGE.write_text(new, encoding="utf-8")
