"""Regenerate the table in docs/bad-input.md from what the CLI prints: `python docs/make_bad_input_table.py`."""

from __future__ import annotations

import contextlib
import io
import shlex
import sys
import tempfile
from pathlib import Path

from training.cli import main

CASES = [
    "train --gamma -1", "train --gamma nan", "train --gamma inf", "train --gamma abc", "train --task nope",
    "train --preset nope", "train --n-train 0", "train --task complexity --k 7", "train --k 2",
    "train --convention xavier", "train --lr 0", "train --batch-size 0", "train --beta1 1.0",
    "train --weight-decay -0.1", "train --d-model 0", "train --act-fn tanh", "train --out /sys/interp-init-demo",
]  # fmt: skip


def run_case(case: str, scratch: Path) -> tuple[int, str]:
    """Exit code and last stderr line of ``interp-init CASE`` (tiny preset, scratch --out)."""
    args = shlex.split(case)
    if "--preset" not in args:
        args += ["--preset", "tiny"]
    if "--out" not in args:
        args += ["--out", str(scratch / "run")]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(args)
    return code, err.getvalue().strip().splitlines()[-1]


def table() -> str:
    rows = ["| command | exit code | message |", "|---|---|---|"]
    with tempfile.TemporaryDirectory() as scratch:
        for case in CASES:
            code, message = run_case(case, Path(scratch))
            rows.append(f"| `interp-init {case}` | {code} | `{message}` |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.stdout.write(table() + "\n")
