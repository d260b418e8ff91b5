"""Regenerate the tables in docs/bad-input.md from what the CLI prints: `python docs/make_bad_input_table.py`."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import lzma
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from training.cli import main

CASES = [
    "train --gamma -1",
    "train --gamma nan",
    "train --gamma inf",
    "train --gamma abc",
    "train --task nope",
    "train --preset nope",
    "train --n-train 0",
    "train --task complexity --k 7",
    "train --k 2",
    "train --convention xavier",
    "train --lr 0",
    "train --batch-size 0",
    "train --beta1 1.0",
    "train --weight-decay -0.1",
    "train --d-model 0",
    "train --act-fn tanh",
    "train --out /sys/interp-init-demo",
    "train --task nosuchpackage.tasks:MyTask",
    "train --task interp_init.tasks.base:TaskMetrics",
    "train --task interp_init.tasks.base:Task",
    "train --gamma 1e308",
    "train --gamma-qk 40",
    "train --eps 2",
    "train --device meta",
    "train --d-model 200000 --d-mlp 200000 --device cpu",
    "train --n-train 200000000000 --device cpu",
    "train --d-vocab 10000000000 --device cpu",
    "phase-diagram runs --id-threshold nan",
    "phase-diagram runs --ood-threshold -5",
    "phase-diagram runs --loss-threshold 0",
    "train --warmup-epochs 1000 --epochs 3",
    "train --epochs 1000000000",
    "reproduce --preset tiny --seeds 0,,",
    "reproduce --preset tiny --seeds 0 --protocol paper --lrs 1e-3,,",
    "reproduce --preset tiny --seeds 0 --workers 0",
    "train --epochs 4 --warmup-epochs 1 --cosine-epochs 2 --min-lr 5 --lr 0.001",
    "train --lr 1e-5",
    "reproduce --preset tiny --seeds 0 --workers 100000",
    "sweep --preset-name neurips-fig2-cpu --backend slurm --slurm-partition gpu --slurm-sbatch partition=cpu",
    "sweep --preset-name neurips-fig2-cpu --backend slurm --slurm-sbatch output=job.log",
    "train --task scan --split nope",
    "train --task scan --n-ctx 32",
    "train --task scan --split jump --n-train 20000",
    "train --split jump",
    "train --task cogs --n-heldout 100",
    "train --task prontoqa --hops 9",
    "train --task cogs --split turn-left",
    "train --task cogs --n-ctx 100",
    "train --task prontoqa --n-ctx 64",
    "train --task code-lm --n-ctx 64",
]

#: The memory and the cores of the machine that printed a message (they vary from one machine to the next).
_MACHINE_MEMORY = re.compile(r"(device's )[\d,.]+ GB")
_MACHINE_CORES = re.compile(r"(machine's )\d+( CPU core\(s\); give \S+ at most )\d+")


def run_case(case: str, scratch: Path) -> tuple[int, str]:
    """Exit code and last stderr line of ``interp-init CASE`` (``train``: tiny preset, scratch
    --out); the machine's memory in a message is written ``M GB``."""
    args = shlex.split(case)
    if args[0] == "train" and "--preset" not in args:
        args += ["--preset", "tiny"]
    if args[0] in ("train", "reproduce", "sweep") and "--out" not in args:
        args += ["--out", str(scratch / "run")]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(args)
    return code, _MACHINE_CORES.sub(r"\1N\2N", _MACHINE_MEMORY.sub(r"\1M GB", err.getvalue().strip().splitlines()[-1]))


def table() -> str:
    rows = ["| command | exit code | message |", "|---|---|---|"]
    with tempfile.TemporaryDirectory() as scratch:
        for case in CASES:
            code, message = run_case(case, Path(scratch))
            rows.append(f"| `interp-init {case}` | {code} | `{message}` |")
    return "\n".join(rows)


#: A sequence task's damaged data (``interp-init train --task TASK --preset tiny``): (task, the
#: shipped file under ``interp_init/tasks/files/`` without ``.xz`` or ``stdlib`` for code-lm's
#: corpus, the damage).  prontoqa generates its data and reads no file.
DATA_CASES: list[tuple[str, str, str]] = [
    ("scan", "scan/tasks_train_addprim_turn_left.txt", "missing"),
    ("scan", "scan/tasks_test_addprim_turn_left.txt", "altered"),
    ("cogs", "cogs/train.tsv", "missing"),
    ("cogs", "cogs/test.tsv", "altered"),
    ("code-lm", "stdlib", "no .py sources"),
]


def run_data_case(index: int, scratch: Path) -> tuple[int, str]:
    """Exit code and last stderr line of ``interp-init train --task TASK --preset tiny`` with
    DATA_CASES[index]'s damage done to a copy of the data the task reads (the copy's folder
    written as the package's, ``interp_init/tasks/files``, or ``STDLIB``; a sha256 written ``...``)."""
    from unittest import mock

    from interp_init.tasks import code_lm, cogs, seq2seq, shipped

    task, name, damage = DATA_CASES[index]
    folder = scratch / f"data-{index}"
    shutil.rmtree(folder, ignore_errors=True)
    caches = (seq2seq._pools, cogs.cogs_words, code_lm._windows)
    if task == "code-lm":
        folder.mkdir(parents=True)
        patch = mock.patch.object(code_lm, "sysconfig", mock.Mock(get_paths=lambda: {"stdlib": str(folder)}))
        shown = "STDLIB"
    else:
        shutil.copytree(shipped.FILES, folder)
        path = folder / f"{name}.xz"
        if damage == "missing":
            path.unlink()
        else:
            text = lzma.decompress(path.read_bytes())
            path.write_bytes(lzma.compress(text.replace(b"I_LOOK", b"I_WALK", 1).replace(b" dog ", b" cat ", 1)))
        patch = mock.patch.object(shipped, "FILES", folder)
        shown = "interp_init/tasks/files"
    err = io.StringIO()
    for cache in caches:
        cache.cache_clear()
    try:
        with patch, contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["train", "--task", task, "--preset", "tiny", "--quiet", "--out", str(scratch / "run")])
    finally:
        for cache in caches:
            cache.cache_clear()
    line = err.getvalue().strip().splitlines()[-1].replace(str(folder), shown)
    return code, _SHA256.sub("...", line)


_SHA256 = re.compile(r"\b[0-9a-f]{64}\b")


def data_table() -> str:
    rows = ["| task | data | damage | exit code | message |", "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as scratch:
        for index, (task, name, what) in enumerate(DATA_CASES):
            code, message = run_data_case(index, Path(scratch))
            rows.append(f"| {task} | `{name}` | {what} | {code} | `{message}` |")
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


def _remove(*names: str):  # noqa: ANN202
    return lambda run: [(run / name).unlink() for name in names]


def _edit_gamma(run: Path) -> None:
    config = json.loads((run / "config.json").read_text())
    config["init"]["gamma"] = 0.8
    (run / "config.json").write_text(json.dumps(config))


def _edit_metrics(**changes: object):  # noqa: ANN202
    """Set top-level keys of RUN/metrics.json (``final_KEY``: a key of its ``final``)."""

    def edit(run: Path) -> None:
        metrics = json.loads((run / "metrics.json").read_text())
        for key, value in changes.items():
            if key.startswith("final_"):
                metrics["final"][key[len("final_") :]] = value
            else:
                metrics[key] = value
        (run / "metrics.json").write_text(json.dumps(metrics))

    return edit


#: Commands on a copy of the finished gamma-0.5 run RUN, after what is done to it: a
#: finished run is never overwritten by another config, whichever file is missing, and
#: nothing is written inside a run folder.  (what is done, how, the command).
LEAF_CASES: list[tuple[str, object, str]] = [
    ("config.json removed", _remove("config.json"), "train --gamma 0.8 --out RUN"),
    ("config.json and metrics.json removed", _remove("config.json", "metrics.json"), "train --gamma 0.8 --out RUN"),
    (
        "config.json and model.safetensors removed",
        _remove("config.json", "model.safetensors"),
        "train --gamma 0.8 --out RUN",
    ),
    ("config.json edited to gamma 0.8", _edit_gamma, "train --gamma 0.8 --out RUN"),
    (
        "config.json edited to gamma 0.8, metrics.json removed",
        lambda r: (_edit_gamma(r), (r / "metrics.json").unlink()),
        "train --gamma 0.8 --out RUN",
    ),
    ("nothing", None, "train --out RUN/nested"),
    ("nothing", None, "sweep SPEC --out RUN"),
    ("nothing", None, "sweep SPEC --out RUN/sweep"),
    ("nothing", None, "phase-diagram RUN"),
    ("metrics.json removed", _remove("metrics.json"), "train --gamma 0.5 --out RUN"),
    ("model.safetensors removed", _remove("model.safetensors"), "train --gamma 0.5 --out RUN"),
    ("status edited to running", _edit_metrics(status="running", final={}), "train --gamma 0.5 --out RUN"),
    ("final.id_acc set to 7.5", _edit_metrics(final_id_acc=7.5), "train --gamma 0.5 --out RUN"),
    ("final.heldout set to a list", _edit_metrics(final_heldout=[1, 2]), "train --gamma 0.5 --out RUN"),
    ("format_version set to 99", _edit_metrics(format_version=99), "train --gamma 0.5 --out RUN"),
    ("history emptied", _edit_metrics(history=[]), "train --gamma 0.5 --out RUN"),
    ("nothing", None, "report RUN --out RUN/model.safetensors"),
    ("nothing", None, "report RUN --out RUN/notes.html"),
    ("nothing", None, "reproduce --preset tiny --seed 0 --out RUN/one"),
    ("nothing", None, "reproduce --preset tiny --seeds 0 --out RUN"),
]


def run_leaf_case(index: int, scratch: Path) -> tuple[int, str]:
    """Exit code and last stderr line (paths written RUN and SPEC) of LEAF_CASES[index]."""
    _, damage, command = LEAF_CASES[index]
    run, spec = scratch / f"leaf-{index}", scratch / "spec.json"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(_finished_runs(scratch)[0.5], run)
    spec.write_text(json.dumps({"base": {"preset": "tiny"}, "grid": {"seed": [0, 1]}}))
    if damage is not None:
        damage(run)
    args = [a.replace("RUN", str(run)).replace("SPEC", str(spec)) for a in shlex.split(command)]
    if args[0] == "train":
        args[1:1] = ["--preset", "tiny", "--quiet"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(args)
    return code, err.getvalue().strip().splitlines()[-1].replace(str(run), "RUN").replace(str(spec), "SPEC")


def leaf_table() -> str:
    rows = ["| done to RUN | command | exit code | message |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as scratch:
        for index, (what, _, command) in enumerate(LEAF_CASES):
            code, message = run_leaf_case(index, Path(scratch))
            rows.append(f"| {what} | `interp-init {command}` | {code} | `{message}` |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.stdout.write(table() + "\n\n" + data_table() + "\n\n" + file_table() + "\n\n" + leaf_table() + "\n")
