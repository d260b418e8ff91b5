"""The documentation's bad-input table is what the code prints."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bad_input_table_matches_the_cli(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_table", ROOT / "docs" / "make_bad_input_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = re.findall(r"^\| `interp-init (.+?)` \| (\d+) \| `(.+)` \|$", (ROOT / "docs" / "bad-input.md").read_text(), re.M)
    assert len(rows) == len(module.CASES)
    for case, code, message in rows:
        assert module.run_case(case, tmp_path) == (int(code), message), case
