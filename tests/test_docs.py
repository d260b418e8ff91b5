"""The documentation's bad-input tables are what the code prints."""

from __future__ import annotations

import re
from pathlib import Path

from helpers import ROOT, load_script


def test_bad_input_table_matches_the_cli(tmp_path: Path) -> None:
    module = load_script("docs/make_bad_input_table.py")
    rows = re.findall(r"^\| `interp-init (.+?)` \| (\d+) \| `(.+)` \|$", (ROOT / "docs" / "bad-input.md").read_text(), re.M)
    assert len(rows) == len(module.CASES)
    for case, code, message in rows:
        assert module.run_case(case, tmp_path) == (int(code), message), case


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
