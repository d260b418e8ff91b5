"""The Slurm launcher (training.launch.slurm) through submitit's local executor: the same
submission, chunking, requeue and study-folder reading as on Slurm, on this machine
(submitit is in the dev extra: these run by default).  The real single-node Slurm runs in
tests/training/test_cluster.py (slow)."""

from __future__ import annotations

import json

import pytest
import torch

from training import train
from training.cli import main
from training.config import make_run_config
from training.launch import Job, JobReturn, SlurmLauncher, SlurmOptions, launcher_class, launcher_names, make_launcher
from training.launch.slurm import JOBS_FILE, SLURM_FOLDER


def _job(tmp_path, name="run", epochs=2, **options):
    return Job(name, make_run_config("tiny", task="symmetric", epochs=epochs, **options), tmp_path / "study" / name)


def test_local_executor_requeues_a_chunked_run_and_a_second_launch_submits_nothing_finished(tmp_path):
    job, done = _job(tmp_path), _job(tmp_path, "done", epochs=1, gamma=0.5)
    train(done.config, done.run_dir, device="cpu", progress=False)
    before = done.run_dir.joinpath("model.safetensors").stat().st_mtime_ns
    options = SlurmOptions(cluster="local", time_min=1, signal_delay_s=10, chunk_seconds=0.01, poll_s=0.5, device="cpu")
    # built by name as sweep and reproduce build it (their other options left out); the study folder read from the jobs
    launcher = make_launcher("slurm", slurm=options, device="cpu", workers=None, threads=1)
    seen: list[JobReturn] = []
    assert launcher.notify(seen.append).launch([job, done]) == [
        JobReturn("run", "completed"),
        JobReturn("done", "completed"),
    ]
    assert seen == [JobReturn("run", "completed"), JobReturn("done", "completed")]
    assert done.run_dir.joinpath("model.safetensors").stat().st_mtime_ns == before  # read, not retrained
    # the deadline passed in the first chunk: one epoch, a checkpoint, a requeue, then the last epoch
    logs = "".join(p.read_text() for p in (tmp_path / "study" / SLURM_FOLDER / "logs").glob("*_log.out"))
    assert logs.count("Requeued job") == 1
    torch.set_num_threads(1)
    train(job.config, tmp_path / "local", device="cpu", progress=False)
    assert (job.run_dir / "model.safetensors").read_bytes() == (tmp_path / "local" / "model.safetensors").read_bytes()
    assert (
        json.loads((job.run_dir / "metrics.json").read_text())["history"]
        == json.loads((tmp_path / "local" / "metrics.json").read_text())["history"]
    )
    record = json.loads((tmp_path / "study" / SLURM_FOLDER / JOBS_FILE).read_text())
    assert list(record) == ["run"]
    assert launcher.launch([job, done]) == [JobReturn("run", "completed"), JobReturn("done", "completed")]
    assert json.loads((tmp_path / "study" / SLURM_FOLDER / JOBS_FILE).read_text()) == record  # nothing submitted


def test_a_retried_run_stopped_at_its_chunks_deadline_is_requeued_not_failed(tmp_path):
    """A run that failed once (its error.txt left behind), retried on Slurm and stopped at its
    chunk's deadline is interrupted, not failed: the retry cleared error.txt when it started,
    so the chunk requeues it and it completes."""
    job = _job(tmp_path)
    job.run_dir.mkdir(parents=True)
    (job.run_dir / "checkpoint.pt").write_bytes(b"not a checkpoint")  # the first try fails on it
    (first,) = make_launcher("serial", device="cpu").launch([job])
    assert first.status == "failed" and "checkpoint.pt" in (job.run_dir / "error.txt").read_text()
    (job.run_dir / "checkpoint.pt").unlink()  # the fix its error names; then the retry, in chunks
    options = SlurmOptions(cluster="local", time_min=1, signal_delay_s=10, chunk_seconds=0.01, poll_s=0.5, device="cpu")
    assert SlurmLauncher(options).launch([job]) == [JobReturn("run", "completed")]
    logs = "".join(p.read_text() for p in (tmp_path / "study" / SLURM_FOLDER / "logs").glob("*_log.out"))
    assert logs.count("Requeued job") == 1
    assert not (job.run_dir / "error.txt").exists()


def test_options_map_to_sbatch_and_bad_ones_name_the_field():
    params = SlurmOptions(
        partition="gpu",
        time_min=30,
        gpus=1,
        cpus=4,
        mem_gb=16,
        account="lab",
        qos="high",
        constraint="h100",
        signal_delay_s=60,
        sbatch_args=(("reservation", "day"),),
        setup=("module load cuda",),
    ).executor_parameters()
    assert params == {
        "time": 30,
        "cpus_per_task": 4,
        "signal_delay_s": 60,
        "array_parallelism": 256,
        "job_name": "interp-init",
        "gpus_per_node": 1,
        "partition": "gpu",
        "account": "lab",
        "qos": "high",
        "constraint": "h100",
        "mem": "16384M",
        "setup": ["module load cuda"],
        "additional_parameters": {"reservation": "day"},
    }
    with pytest.raises(ValueError, match="time_min 1 leaves no chunk"):
        SlurmOptions(time_min=1, signal_delay_s=90)
    with pytest.raises(ValueError, match="slurm cpus must be an integer >= 1"):
        SlurmOptions(cpus=0)
    assert launcher_class("slurm") is SlurmLauncher and "slurm" in launcher_names()


def test_cli_refuses_slurm_options_without_the_slurm_backend(tmp_path, capsys):
    assert (
        main(
            ["reproduce", "--preset", "tiny", "--seeds", "0", "--out", str(tmp_path / "p"), "--slurm-partition", "gpu"]
        )
        == 2
    )
    assert "--slurm-partition applies to --backend slurm only" in capsys.readouterr().err
    assert (
        main(
            [
                "sweep",
                "--preset-name",
                "neurips-fig2-cpu",
                "--out",
                str(tmp_path / "s"),
                "--backend",
                "slurm",
                "--slurm-sbatch",
                "reservation",
            ]
        )
        == 2
    )
    assert "--slurm-sbatch takes OPTION=VALUE" in capsys.readouterr().err
    assert not (tmp_path / "p").exists() and not (tmp_path / "s").exists()


@pytest.mark.slow
def test_gpu_suite_through_slurm_trains_each_task_as_one_ensemble_job(tmp_path):
    from click.testing import CliRunner
    from helpers import load_script

    suite = load_script("benchmarks/gpu_suite.py")
    args = [
        "--out",
        str(tmp_path / "suite"),
        "--scale",
        "tiny",
        "--seeds",
        "0",
        "--epochs",
        "1",
        "--ensemble",
        "--peak-tflops",
        "1",
        "--backend",
        "slurm",
        "--slurm-cluster",
        "local",
        "--slurm-time",
        "1",
        "--slurm-signal-delay",
        "10",
    ]
    result = CliRunner().invoke(suite.main, args)
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "suite" / SLURM_FOLDER / JOBS_FILE).read_text())
    assert len(record) == 4 and len(set(record.values())) == 2  # two runs per task, one job per task
    assert result.output.count("| completed |") == 4 and (tmp_path / "suite" / "gpu_suite.md").exists()


@pytest.mark.slow  # four local-executor jobs, each a Python importing torch: about 2 minutes on 2 loaded cores
def test_reproduce_no_wait_exits_0_saying_what_was_submitted_and_how_to_collect_it(tmp_path, capsys):
    """``reproduce --slurm-no-wait`` (one seed and --seeds): the runs only submitted are not
    failed runs: exit 0, a line with their count and the command to run again; that command,
    once the jobs ended, reads the runs (submits nothing) and prints the flip."""
    import shlex
    import time

    from interp_init.runfolder import FINISHED_STATUSES, RunFolder

    forms = {"one": ("--seed", "0", ""), "many": ("--seeds", "0", "seed-0")}
    argv = {
        name: [
            "reproduce",
            "--preset",
            "tiny",
            flag,
            seed,
            "--task",
            "symmetric",
            "--out",
            str(tmp_path / name),
            "--device",
            "cpu",
            "--quiet",
            "--backend",
            "slurm",
            "--slurm-cluster",
            "local",
            "--slurm-no-wait",
        ]
        for name, (flag, seed, _) in forms.items()
    }
    for name, args in argv.items():
        assert main(args) == 0
        out = capsys.readouterr().out
        assert (
            "submitted: 2 of 2 runs are in Slurm jobs, not finished" in out
            and f"run again: {shlex.join(['interp-init', *args])}" in out
        )
    runs = [
        RunFolder(tmp_path / name / member / "symmetric" / regime)
        for name, (_, _, member) in forms.items()
        for regime in ("small-init", "large-init")
    ]
    deadline = time.monotonic() + 300
    while not all(run.status() in FINISHED_STATUSES for run in runs) or any(run.is_busy() for run in runs):
        assert time.monotonic() < deadline, [str(run.status()) for run in runs]
        time.sleep(0.5)
    for name, args in argv.items():
        record = (tmp_path / name / SLURM_FOLDER / JOBS_FILE).read_text()
        assert main(args) == 0
        out = capsys.readouterr().out
        assert "Slurm jobs, not finished" not in out, out
        assert any(word in out for word in ("flip reproduced", "flip NOT reproduced", "criterion  met")), (
            out
        )  # read from the finished runs
        assert (tmp_path / name / SLURM_FOLDER / JOBS_FILE).read_text() == record  # nothing submitted again


@pytest.mark.slow  # one local-executor job: a Python importing torch
def test_sweep_no_wait_exits_0_saying_what_was_submitted(tmp_path, capsys):
    """``sweep --slurm-no-wait``: a run only submitted is not a failed one (exit 0, the count and
    the command to run again); that command, once the job ended, finds the run done."""
    import json
    import shlex
    import time

    from interp_init.runfolder import FINISHED_STATUSES, RunFolder

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"base": {"preset": "tiny", "task": "symmetric"}, "grid": {"seed": [0]}}))
    args = [
        "sweep",
        str(spec),
        "--out",
        str(tmp_path / "sweep"),
        "--device",
        "cpu",
        "--quiet",
        "--backend",
        "slurm",
        "--slurm-cluster",
        "local",
        "--slurm-no-wait",
    ]
    assert main(args) == 0
    assert (
        f"submitted: 1 of 1 runs are in Slurm jobs, not finished (logs in {tmp_path / 'sweep' / SLURM_FOLDER}); "
        in capsys.readouterr().out
    )
    run, deadline = RunFolder(tmp_path / "sweep" / "seed=0"), time.monotonic() + 300
    while run.status() not in FINISHED_STATUSES or run.is_busy():
        assert time.monotonic() < deadline, run.status()
        time.sleep(0.5)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert (
        "1 runs (1 already done)" in out and "not finished" not in out and shlex.join(["interp-init", *args]) not in out
    )


def test_a_cancelled_job_leaves_its_run_interrupted_and_says_so(tmp_path):
    """A job stopped by SIGTERM (what ``scancel`` sends; submitit's local executor forwards it
    to the job) stops its run at once: ``metrics.json`` says ``interrupted``, the job's log says
    so, and the waiting launch returns ``interrupted`` (not ``failed``), naming the epoch its
    checkpoint holds; launching again resumes it."""
    import os
    import signal
    import threading
    import time

    from interp_init.runfolder import RunFolder

    job = _job(tmp_path, epochs=400)  # still training when the cancel comes
    options = SlurmOptions(cluster="local", time_min=5, signal_delay_s=10, poll_s=0.5, device="cpu")
    returned: list[JobReturn] = []
    launch = threading.Thread(target=lambda: returned.extend(SlurmLauncher(options).launch([job])))
    launch.start()
    folder, deadline = RunFolder(job.run_dir), time.monotonic() + 300
    while not (folder.checkpoint_path.exists() and folder.is_busy()):
        assert time.monotonic() < deadline and launch.is_alive(), "the job never started training"
        time.sleep(0.2)
    (job_id,) = json.loads((tmp_path / "study" / SLURM_FOLDER / JOBS_FILE).read_text()).values()
    os.kill(int(job_id), signal.SIGTERM)  # the local executor's job: the process that runs the chunk
    launch.join(300)
    (ret,) = returned
    assert (
        ret.status == "interrupted"
        and f"Slurm job {job_id} ended before the run finished: interrupted at epoch " in ret.error
    )
    assert json.loads(folder.metrics_path.read_text())["status"] == "interrupted" and folder.status() == "interrupted"
    assert not folder.error_path.exists() and not folder.is_busy()
    log = (tmp_path / "study" / SLURM_FOLDER / "logs" / f"{job_id}_0_log.out").read_text()
    assert "interp-init: run run starts at epoch 0 of 400" in log
    assert (
        "interp-init: a SIGTERM stopped the job after" in log
        and "each run is interrupted at its last checkpoint (run run resumes from epoch" in log
    )


def test_a_chunk_whose_runs_ended_ignores_a_late_warning(tmp_path):
    """Slurm's warning can come after a job's runs ended, as its process exits: the job must
    neither requeue (submitit's handler) nor die on it (SIGUSR2's default action: the job
    then ends FAILED, exit code 140).  The chunk ignores it once its runs are done."""
    import subprocess
    import sys

    script = f"""
import os, signal, sys
from pathlib import Path
from training import train
from training.config import make_run_config
from training.launch import Job
from training.launch.slurm import RunChunk

job = Job("done", make_run_config("tiny", task="symmetric", epochs=1), Path({str(tmp_path / "done")!r}))
train(job.config, job.run_dir, device="cpu", progress=False)
signal.signal(signal.SIGUSR2, lambda *a: sys.exit("requeued on a late warning"))  # submitit's handler, in a job
RunChunk((job,), "cpu", 1, 60, 10, None)()
os.kill(os.getpid(), signal.SIGUSR2)
print("the job exits cleanly")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and "the job exits cleanly" in done.stdout, done.stderr[-2000:]
    assert "interp-init: run done has ended (completed)" in done.stdout
