"""Regenerate the tables in docs/bad-input.md from what the CLI prints: `python docs/make_bad_input_table.py`."""

from __future__ import annotations

import contextlib
import functools
import io
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from training.cli import main

CASES = [
    "train --gamma -1", "train --gamma nan", "train --gamma inf", "train --gamma abc", "train --task nope",
    "train --preset nope", "train --n-train 0", "train --task complexity --k 7", "train --k 2",
    "train --convention xavier", "train --lr 0", "train --batch-size 0", "train --beta1 1.0",
    "train --weight-decay -0.1", "train --d-model 0", "train --act-fn tanh", "train --out /sys/interp-init-demo",
    "train --task nosuchpackage.tasks:MyTask", "train --task interp_init.task:TaskMetrics", "train --task interp_init.task:Task",
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


#: Damaged files of a finished run (``interp-init train --preset tiny --quiet --out RUN``,
#: gamma 0.5), and what the same command then prints: (file, damage, new content or the
#: gamma of the run whose file is copied in).
FILE_CASES: list[tuple[str, str, bytes | float]] = [
    ("config.json", "a JSON array", b"[1, 2]"),
    ("config.json", "null", b"null"),
    ("config.json", "no model section", b'{"init": {}}'),
    ("config.json", "not UTF-8", b'{"model": "\xff\xfe"}'),
    ("config.json", "cut short", b'{"model": '),
    ("metrics.json", "a JSON array", b"[1, 2]"),
    ("metrics.json", "an unknown status", b'{"status": "done", "final": {}, "history": []}'),
    ("metrics.json", "no final", b'{"status": "completed", "history": []}'),
    ("metrics.json", "not UTF-8", b"\xff\xfe"),
    ("metrics.json", "copied from another run", 0.8),
    ("model.safetensors", "copied from another run", 0.8),
]
_FILE_ARGS = ["train", "--preset", "tiny", "--quiet"]


@functools.cache
def _finished_runs(scratch: Path) -> dict[float, Path]:
    """Tiny runs at gamma 0.5 and 0.8 under ``scratch`` (trained once per scratch folder)."""
    runs = {gamma: scratch / f"finished-{gamma}" for gamma in (0.5, 0.8)}
    for gamma, path in runs.items():
        with contextlib.redirect_stdout(io.StringIO()):
            assert main([*_FILE_ARGS, "--gamma", str(gamma), "--out", str(path)]) == 0
    return runs


def run_file_case(index: int, scratch: Path) -> tuple[int, str]:
    """Exit code and last stderr line (the run folder's path written RUN) of the command on
    a copy of the finished gamma-0.5 run with FILE_CASES[index]'s damage."""
    name, _, damage = FILE_CASES[index]
    runs = _finished_runs(scratch)
    run = scratch / f"case-{index}"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(runs[0.5], run)
    if isinstance(damage, bytes):
        (run / name).write_bytes(damage)
    else:
        shutil.copy(runs[damage] / name, run / name)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([*_FILE_ARGS, "--gamma", "0.5", "--out", str(run)])
    return code, err.getvalue().strip().splitlines()[-1].replace(str(run), "RUN")


def file_table() -> str:
    rows = ["| file | damage | exit code | message |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as scratch:
        for index, (name, what, _) in enumerate(FILE_CASES):
            code, message = run_file_case(index, Path(scratch))
            rows.append(f"| `{name}` | {what} | {code} | `{message}` |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.stdout.write(table() + "\n\n" + file_table() + "\n")
