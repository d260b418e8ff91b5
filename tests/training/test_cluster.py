"""Clusters for real (slow, marked ``cluster``): a single-node Slurm that ``.ci/slurm/start.sh``
starts (partition time limit 1 minute, so that a run longer than a chunk is requeued), and a
Ray cluster of a head and a second worker that the fixture below starts with ``ray start``
on a loopback address (127.0.0.2) and stops again.  ``.ci/run`` starts the Slurm before the slow step.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from interp_init.runfolder import RunFolder
from training.launch import make_launcher
from training.launch.slurm import JOBS_FILE, SLURM_FOLDER, SlurmOptions, job_end_state, live_jobs
from training.studies.population import reproduce_study
from training.studies.study import StudySpec
from training.studies.sweep import SweepOptions, run_sweep

pytestmark = [pytest.mark.slow, pytest.mark.cluster]
ROOT = Path(__file__).resolve().parents[2]
SPEC = StudySpec.reproduction("tiny", (0,))  # 4 runs: both tasks, both regimes


def _slurm_or_skip() -> None:
    pytest.importorskip("submitit", reason="submitit is not installed (pip install 'interp-init[slurm]')")
    if shutil.which("sbatch") is None:
        pytest.skip(
            "slurm-wlm is not installed: .ci/slurm/start.sh installs it (Debian, as root) and starts a single-node Slurm"
        )
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%a %t"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        pytest.skip(f"sinfo failed ({err}): start the single-node Slurm with .ci/slurm/start.sh")
    if out.returncode != 0 or "up" not in out.stdout:
        pytest.skip(
            f"no Slurm partition is up ({(out.stderr or out.stdout).strip()[:200]}): start it with .ci/slurm/start.sh"
        )


def _slurm_options(**kw) -> SlurmOptions:
    # time limit 1 minute, warned 10 s before: a chunk ends 20 s before the limit
    return SlurmOptions(time_min=1, signal_delay_s=10, cpus=1, device="cpu", poll_s=2.0, **kw)


def _weights(root: Path) -> dict[str, bytes]:
    return {str(p.parent.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("model.safetensors"))}


def _results(summary: dict | list) -> dict | list:
    """A population summary without what differs between two trainings of the same runs (time, folders)."""
    if isinstance(summary, dict):
        return {k: _results(v) for k, v in summary.items() if k not in ("seconds", "run_dir", "run_dirs")}
    return [_results(v) for v in summary] if isinstance(summary, list) else summary


def _requeues(study: Path) -> int:
    return sum(p.read_text().count("Requeued job") for p in (study / SLURM_FOLDER / "logs").glob("*_log.out"))


def _ended(job_ids) -> None:
    """Wait until Slurm holds none of ``job_ids`` (a launch returns once its runs are done, while their jobs may still exit)."""
    deadline = time.monotonic() + 300
    while live_jobs(list(job_ids)):
        assert time.monotonic() < deadline, "the jobs never ended"
        time.sleep(1)


def _log(study: Path, job_id: str) -> list[str]:
    """The lines the chunks of Slurm job ``job_id`` wrote into its log (``interp-init: ...``)."""
    text = (study / SLURM_FOLDER / "logs" / f"{job_id}_0_log.out").read_text()
    return [line for line in text.splitlines() if line.startswith("interp-init: ")]


@pytest.fixture(scope="module")
def local_population(tmp_path_factory) -> Path:
    """The tiny population trained here, two runs at a time with one torch thread each."""
    out = tmp_path_factory.mktemp("local") / "population"
    reproduce_study(SPEC, out, make_launcher("pool", device="cpu", workers=2, threads=1))
    return out


def test_slurm_population_is_byte_equal_to_the_local_one(tmp_path, local_population):
    _slurm_or_skip()
    out = tmp_path / "population"
    # every chunk is one epoch long: each run is requeued after each of its first two epochs
    population, _ = reproduce_study(SPEC, out, make_launcher("slurm", slurm=_slurm_options(chunk_seconds=0.01)))
    assert _requeues(out) >= 4
    assert _weights(out) == _weights(local_population) and len(_weights(out)) == 4
    assert _results(population.to_dict()) == _results(json.loads((local_population / "summary.json").read_text()))
    record = json.loads((out / SLURM_FOLDER / JOBS_FILE).read_text())
    _ended(record.values())
    for name, job_id in record.items():
        assert job_end_state(job_id) == ("COMPLETED", "0:0"), name  # requeued twice, its run completed: COMPLETED
        log = _log(out, job_id)  # each chunk says where its run resumes, the last one that it ended
        assert f"interp-init: run {name} resumes from epoch 2 of 3" in log
        assert re.fullmatch(rf"interp-init: the runs ended after \d+ s: {re.escape(name)} completed", log[-1]), log


def _sweep(epochs: int) -> StudySpec:
    return StudySpec(base={"preset": "tiny", "task": "symmetric", "epochs": epochs}, grid={"gamma": [0.5, 0.8]})


def test_slurm_time_limit_requeues_and_a_cancelled_job_resumes_on_a_second_launch(tmp_path):
    """Two runs longer than a 1-minute job, launched and waited for.  The 1-minute limit
    requeues them; Slurm's warning sent early (``scancel -s USR2``, as Slurm's event
    resolution may) does not cut the chunk short; one job is ``scancel``led mid-run: its run
    is ``interrupted`` (``metrics.json``, the launch's return, results.csv), the job
    ``CANCELLED``; the other completes and its job ends ``COMPLETED``.  A second launch submits
    only the cancelled run and ends with both completed, the finished one not retrained."""
    import threading

    _slurm_or_skip()
    out, spec = (
        tmp_path / "sweep",
        _sweep(epochs=600),
    )  # longer than one chunk of a 1-minute job, on a quiet machine too (150 epochs took under 40 s)
    victim, other = "gamma=0.5", "gamma=0.8"
    options = SweepOptions(backend="slurm", workers=None, progress=False, extra={"slurm": _slurm_options()})
    launched: dict = {}
    launch = threading.Thread(target=lambda: launched.update(first=run_sweep(spec, out, options)))
    launch.start()
    deadline = time.monotonic() + 600
    while not (out / SLURM_FOLDER / JOBS_FILE).exists() or not all(
        RunFolder(out / n).is_busy() for n in (victim, other)
    ):
        assert time.monotonic() < deadline and launch.is_alive(), "the jobs never started training"
        time.sleep(0.5)
    record = json.loads((out / SLURM_FOLDER / JOBS_FILE).read_text())
    subprocess.run(
        ["scancel", "-s", "USR2", record[other]], check=True
    )  # an early warning: the chunk trains on to its end
    while not RunFolder(out / victim).checkpoint_path.exists():
        assert time.monotonic() < deadline, "the cancelled run never checkpointed"
        time.sleep(0.5)
    subprocess.run(["scancel", record[victim]], check=True)
    launch.join(1200)
    first = launched["first"]
    _ended(record.values())
    assert dict(first.statuses) == {victim: "interrupted", other: "completed"}
    assert dict(zip(first.results["run"], first.results["status"])) == {
        victim: "interrupted",
        other: "completed",
    }  # results.csv
    assert json.loads((out / victim / "metrics.json").read_text())["status"] == "interrupted"
    assert RunFolder(out / victim).checkpoint_path.exists() and not (out / victim / "error.txt").exists()
    assert job_end_state(record[victim])[0] == "CANCELLED" and job_end_state(record[other]) == ("COMPLETED", "0:0")
    assert _requeues(out) >= 1  # the 1-minute limit requeued a run
    assert any(line.startswith("interp-init: a SIGTERM stopped the job after") for line in _log(out, record[victim]))
    log = _log(out, record[other])
    warned = next(i for i, line in enumerate(log) if line.startswith("interp-init: Slurm's warning (SIGUSR2) came"))
    if "could not read its time limit" in log[warned]:
        # a chunk that squeue did not tell its time left requeues at once, and says so (docs/clusters.md)
        assert log[warned + 1].startswith("interp-init: requeueing now"), log
    else:
        chunk_end = next(line for line in log[warned:] if not line.startswith("interp-init: Slurm's warning"))
        # the chunk trained on after the warning: to its time (or, on a quiet machine where the warning
        # came in a later chunk, to the run's end), never "requeueing now"
        assert chunk_end.startswith(
            ("interp-init: the chunk's time is up after", "interp-init: the runs ended after")
        ), log
        assert not any("requeueing now" in line for line in log[warned:]), log
    assert any(line.startswith(f"interp-init: run {other} resumes from epoch ") for line in log)
    finished = (out / other / "model.safetensors").stat().st_mtime_ns

    second = run_sweep(spec, out, options)
    assert dict(second.statuses) == {victim: "completed", other: "completed"}
    assert second.skipped == (other,)
    assert (out / other / "model.safetensors").stat().st_mtime_ns == finished  # not retrained
    again = json.loads((out / SLURM_FOLDER / JOBS_FILE).read_text())
    assert again[other] == record[other] and again[victim] != record[victim]  # only the cancelled run was submitted
    assert any(line.startswith(f"interp-init: run {victim} resumes from epoch ") for line in _log(out, again[victim]))


def test_sbatch_without_a_controller_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    """sbatch installed, no controller answering (a slurm.conf naming one that is not there):
    exit 2, one line quoting sbatch, no folder left."""
    from training.cli import main

    _slurm_or_skip()
    conf = tmp_path / "slurm.conf"
    text = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).read_text()
    conf.write_text(
        "".join(line for line in text.splitlines(keepends=True) if not line.startswith("SlurmctldHost="))
        + "SlurmctldHost=127.0.0.9\nSlurmctldPort=6999\n"
    )
    monkeypatch.setenv("SLURM_CONF", str(conf))
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
                "--quiet",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and 'Slurm did not take the jobs: "sbatch: error: Batch job submission failed: Unable to contact slurm controller'
        in err[0]
    ), err
    assert not (tmp_path / "s").exists()


# ---------------------------------------------------------------- Ray


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((RAY_IP, 0))
        return s.getsockname()[1]


#: The nodes' address: loopback, and not one Ray rewrites to the machine's outward address (127.0.0.1 is).
RAY_IP = "127.0.0.2"
#: No token authentication on this throwaway cluster (Ray 2.5x turns it on for new clusters).
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def _ray_start(*args: str, joins: bool = False) -> subprocess.Popen:
    ray_cli = Path(sys.executable).with_name("ray")
    env = {
        **os.environ,
        **RAY_ENV,
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1" if joins else "0",
    }
    cmd = [
        str(ray_cli),
        "start",
        "--block",
        "--num-cpus=1",
        "--object-store-memory=80000000",
        "--disable-usage-stats",
        *args,
    ]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to a `ray start --block` (it stops the processes it started), then to its group."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.fixture()
def ray_cluster(monkeypatch):
    """A head and a second worker node, one CPU each, on a loopback address; yields (address, worker process)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'interp-init[cluster]')")
    for key, value in RAY_ENV.items():
        monkeypatch.setenv(key, value)
    port = _free_port()
    address = f"{RAY_IP}:{port}"
    # its own temp folder (short: Ray's socket paths are limited): no /tmp/ray/ray_current_cluster
    # left behind for a later ray.init() to find
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    head = _ray_start(
        "--head", f"--node-ip-address={RAY_IP}", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}"
    )
    worker = None
    try:
        time.sleep(5)
        worker = _ray_start(f"--address={address}", f"--node-ip-address={RAY_IP}", joins=True)
        ray.init(address=address, log_to_driver=False)
        try:
            deadline = time.monotonic() + 180
            while sum(n["Alive"] for n in ray.nodes()) < 2:
                assert time.monotonic() < deadline, "the Ray worker never joined"
                time.sleep(1)
        finally:
            ray.shutdown()
        yield address, worker
    finally:
        if worker is not None:
            _stop(worker)
        _stop(head)
        shutil.rmtree(temp, ignore_errors=True)


def test_ray_cluster_trains_a_sweep_and_a_population(tmp_path, ray_cluster, local_population):
    address, _ = ray_cluster
    summary = run_sweep(
        _sweep(epochs=3),
        tmp_path / "sweep",
        SweepOptions(backend="ray", address=address, threads=1, workers=None, progress=False),
    )
    assert dict(summary.statuses) == {"gamma=0.5": "completed", "gamma=0.8": "completed"}
    population, _ = reproduce_study(
        SPEC, tmp_path / "population", make_launcher("ray", device="cpu", address=address, threads=1)
    )
    assert _weights(tmp_path / "population") == _weights(local_population)
    assert _results(population.to_dict()) == _results(json.loads((local_population / "summary.json").read_text()))


def test_a_ray_worker_killed_mid_run_leaves_the_study_truthful_and_resumable(tmp_path, ray_cluster):
    import threading

    address, worker = ray_cluster
    out, spec = (
        tmp_path / "sweep",
        _sweep(epochs=600),
    )  # outlasts the worker's graceful stop (150 epochs ended within it on a quiet machine)
    options = SweepOptions(backend="ray", address=address, threads=1, workers=None, progress=False)

    def kill_worker_when_both_train() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            folders = [RunFolder(out / name) for name in ("gamma=0.5", "gamma=0.8")]
            if all(f.checkpoint_path.exists() and f.is_busy() for f in folders):  # one run on each node
                _stop(worker)
                return
            time.sleep(0.5)

    killer = threading.Thread(target=kill_worker_when_both_train)
    killer.start()
    first = run_sweep(spec, out, options)
    killer.join()
    assert sorted(first.statuses.values()) == ["completed", "failed"]
    lost = next(name for name, status in first.statuses.items() if status == "failed")
    kept = next(name for name, status in first.statuses.items() if status == "completed")
    folder = RunFolder(out / lost)
    assert folder.status() == "failed" and folder.error_path.exists() and not folder.is_busy()
    assert folder.checkpoint_path.exists()  # resumable
    finished = (out / kept / "model.safetensors").stat().st_mtime_ns

    second = run_sweep(spec, out, options)  # the head alone now
    assert dict(second.statuses) == {lost: "completed", kept: "completed"} and second.skipped == (kept,)
    assert (out / kept / "model.safetensors").stat().st_mtime_ns == finished
    assert not folder.error_path.exists()
