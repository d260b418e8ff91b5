"""The documentation is what the code does: the bad-input tables are what the code prints, and the
API reference reads the docstrings' reST as Markdown (docs/griffe_rest.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import ROOT, load_script


def test_bad_input_table_matches_the_cli(tmp_path: Path) -> None:
    module = load_script("docs/make_bad_input_table.py")
    rows = re.findall(r"^\| `interp-init (.+?)` \| (\d+) \| `(.+)` \|$", (ROOT / "docs" / "bad-input.md").read_text(), re.M)
    assert len(rows) == len(module.CASES)
    for case, code, message in rows:
        assert module.run_case(case, tmp_path) == (int(code), message), case


def test_the_layout_table_is_what_its_generator_writes(tmp_path: Path) -> None:
    """docs/layout.md's table of what stands on what is docs/make_layout_table.py's output; a
    planted row is rewritten."""
    module = load_script("docs/make_layout_table.py")
    text = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    assert module.rewritten(text) == text, "run python docs/make_layout_table.py"
    planted = text.replace("| `probes` | `interp_init/tasks` |", "| `probes` | `training` |")
    assert planted != text and module.rewritten(planted) == text


def test_damaged_file_table_matches_the_cli(tmp_path: Path) -> None:
    module = load_script("docs/make_bad_input_table.py")
    rows = re.findall(r"^\| `([\w.]+)` \| (.+?) \| (\d+) \| `(.+)` \|$", (ROOT / "docs" / "bad-input.md").read_text(), re.M)
    assert [(name, what) for name, what, _, _ in rows] == [(name, what) for name, what, _ in module.FILE_CASES]
    for index, (_, _, code, message) in enumerate(rows):
        assert module.run_file_case(index, tmp_path) == (int(code), message), rows[index]


def test_leaf_table_matches_the_cli(tmp_path: Path) -> None:
    module = load_script("docs/make_bad_input_table.py")
    rows = re.findall(r"^\| ([\w. ,]+?) \| `interp-init (.+?)` \| (\d+) \| `(.+)` \|$", (ROOT / "docs" / "bad-input.md").read_text(), re.M)
    assert [(what, command) for what, command, _, _ in rows] == [(what, command) for what, _, command in module.LEAF_CASES]
    for index, (_, _, code, message) in enumerate(rows):
        assert module.run_leaf_case(index, tmp_path) == (int(code), message), rows[index]


def test_the_reference_reads_rest_docstrings_as_markdown() -> None:
    """docs/griffe_rest.py: a literal block becomes a fenced block highlighted by what it holds,
    a reST hyperlink and a pointer to a docs page become links (the page's path in docs/), and
    what is already code or a link stays as it is."""
    pytest.importorskip("griffe", reason="griffe is not installed (pip install -e '.[dev]')")
    rest = load_script("docs/griffe_rest.py")
    text = "\n".join([
        "Runs it (`docs/science.md <../docs/science.md#training>`_; docs/tasks.md, ``docs/sweeps.md``).",
        "See [docs/cli.md](/cli.md) and `the paper <https://arxiv.org/abs/2405.05409>`_.",
        "",
        "Example::",
        "",
        "    >>> 1 + 1",
        "    2",
        "",
        "Command line::",
        "",
        "    interp-init report RUNS --out report.html  # docs/tasks.md is not linked here",
        "",
        "A spec ::",
        "",
        '    {"base": {"preset": "cpu"}}',
        "",
        "::",
        "",
        "    DIR/config.json   the run config",
        "",
        "Done.",
    ])  # fmt: skip
    assert rest.markdown(text).split("\n") == [
        "Runs it ([docs/science.md](/science.md#training); [docs/tasks.md](/tasks.md), [`docs/sweeps.md`](/sweeps.md)).",
        "See [docs/cli.md](/cli.md) and [the paper](https://arxiv.org/abs/2405.05409).",
        "",
        "Example:",
        "",
        "```pycon",
        ">>> 1 + 1",
        "2",
        "```",
        "",
        "Command line:",
        "",
        "```bash",
        "interp-init report RUNS --out report.html  # docs/tasks.md is not linked here",
        "```",
        "",
        "A spec",
        "",
        "```json",
        '{"base": {"preset": "cpu"}}',
        "```",
        "",
        "```text",
        "DIR/config.json   the run config",
        "```",
        "",
        "Done.",
    ]  # fmt: skip
