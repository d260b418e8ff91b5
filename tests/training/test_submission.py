"""Every backend's submission error (issue 46, class 4): a scheduler that refuses the jobs or
does not answer is one line quoting its own words, exit 2, and the study folder is left as
it was: a new one is gone, an existing one keeps every file and byte it had (no submission
script, no pickles, no ``sweep.json`` from the failed launch; nothing more at each rerun)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from training.cli import main
from training.launch import launcher_class, launcher_names
from training.launch.slurm import JOBS_FILE, SLURM_FOLDER
from training.studies.study import StudySpec
from training.studies.sweep.spec import SPEC_FILE

#: What sbatch prints when no controller answers (slurm-wlm 22.05, this project's single-node Slurm stopped).
NO_CONTROLLER = "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"
#: The built-in backends that train here (this process or its children): nothing to submit, no scheduler to refuse.
TRAIN_HERE = {"serial", "pool", "ensemble"}


def _fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], str]:
    """Slurm's commands on PATH with no controller behind them: sbatch says so and fails."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {"sbatch": f"echo '{NO_CONTROLLER}' >&2; exit 1", "srun": "exit 1", "squeue": "exit 0"}
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return ["--backend", "slurm"], NO_CONTROLLER


def _dead_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], str]:
    """A Ray address where nothing listens."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'interp-init[ray]')")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return ["--backend", "ray", "--address", f"127.0.0.1:{port}"], "Connection refused"


#: Each backend that submits to a scheduler, and how to make its scheduler refuse or not answer.
SCHEDULERS = {"slurm": _fake_slurm, "ray": _dead_ray}


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _one_line(err: str, words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interp-init: error: ") and words in lines[0], err
    assert "Traceback" not in err and "FailedJobError" not in err


def test_every_backend_is_classified():
    """A new built-in backend must say how its scheduler refuses (SCHEDULERS) or that it trains here."""
    builtin = {n for n in launcher_names() if launcher_class(n).__module__.startswith("training.launch")}
    assert builtin == TRAIN_HERE | set(SCHEDULERS)


@pytest.mark.parametrize("backend", sorted(SCHEDULERS))
def test_a_scheduler_that_refuses_is_one_line_exit_2_and_leaves_the_folder_as_it_was(
    backend, tmp_path, monkeypatch, capsys
):
    flags, words = SCHEDULERS[backend](tmp_path, monkeypatch)
    spec = {"base": {"preset": "tiny", "task": "symmetric"}, "grid": {"seed": [0]}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    common = ["--device", "cpu", "--quiet", *flags]
    # a new folder: refused, and gone again
    for command in (
        ["sweep", str(tmp_path / "spec.json"), "--out", str(tmp_path / "new")],
        ["reproduce", "--preset", "tiny", "--seed", "0", "--out", str(tmp_path / "new")],
    ):
        assert main([*command, *common]) == 2
        _one_line(capsys.readouterr().err, words)
        assert not (tmp_path / "new").exists()
    # a sweep launched before (its spec, a job record, an old job's log): refused twice, not a byte changed
    old = tmp_path / "old"
    (old / SLURM_FOLDER / "logs").mkdir(parents=True)
    (old / SPEC_FILE).write_text(json.dumps(StudySpec.from_dict(spec).to_dict()))
    (old / SLURM_FOLDER / JOBS_FILE).write_text(json.dumps({"seed=0": "41"}))
    (old / SLURM_FOLDER / "logs" / "41_0_log.out").write_text("an old job's log\n")
    before = _files(old)
    for _ in range(2):
        assert main(["sweep", str(tmp_path / "spec.json"), "--out", str(old), *common]) == 2
        _one_line(capsys.readouterr().err, words)
        assert _files(old) == before


def test_conflicting_sbatch_options_are_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "s"
    for flags, said in (
        (
            ["--slurm-partition", "a", "--slurm-sbatch", "partition=b"],
            "--slurm-sbatch partition=b sets what --slurm-partition sets",
        ),
        (["--slurm-sbatch", "p=b"], "--slurm-sbatch p=b sets what --slurm-partition sets"),
        (["--slurm-sbatch", "cpus_per_task=4"], "sets what --slurm-cpus sets"),
        (["--slurm-sbatch", "output=log.txt"], "sets what the launcher sets itself"),
        (["--slurm-sbatch", "reservation=a", "--slurm-sbatch", "reservation=b"], "sets reservation twice"),
    ):
        assert (
            main(["sweep", "--preset-name", "neurips-fig2-cpu", "--out", str(out), "--backend", "slurm", *flags]) == 2
        )
        _one_line(capsys.readouterr().err, said)
        assert not out.exists()
