"""Sweeps: spec validation, resumable runs (SIGKILL), failures, results table, Ray backend, presets."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import read_metrics

from interp_init.runfolder import ERROR_FILE
from training.cli import main
from training.config import PRESETS
from training.studies.records import RunRecord
from training.studies.study import StudySpec
from training.studies.sweep import (
    RESULTS_FILE,
    SweepOptions,
    collect_results,
    load_preset,
    load_results,
    preset_names,
    run_sweep,
)
from training.studies.sweep.results import PAIR_COLUMNS, TIMING_COLUMNS, epochs_to_loss, epochs_to_pair_accuracy

# A few seconds per run on one CPU thread.
TINY_BASE = {"preset": "tiny", "task": "symmetric", "epochs": 2, "n_train": 1000, "n_test": 200, "eval_samples": 200}


def _spec(grid: dict, **base) -> StudySpec:
    return StudySpec({**TINY_BASE, **base}, grid)


def _content(df: pd.DataFrame) -> pd.DataFrame:
    """The table without its machine-dependent columns."""
    return df.drop(columns=list(TIMING_COLUMNS))


def _mtimes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir() if p.is_file()}


# ------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        ({"base": TINY_BASE, "grid": {"gama": [0.5]}}, "gama"),
        ({"base": {**TINY_BASE, "learning_rate": 1e-3}, "grid": {"gamma": [0.5]}}, "learning_rate"),
        ({"base": TINY_BASE, "grid": {"gamma": []}}, "gamma"),
        ({"base": TINY_BASE, "grid": {"gamma": [0.5], "n_layers": [2, 2.5]}}, "n_layers"),
        ({"base": TINY_BASE, "grid": {"gamma": [0.5, "big"]}}, "gamma"),
        ({"base": TINY_BASE, "grid": {"seed": [0], "weight_decay": [0.0, "0.1"]}}, "weight_decay"),
        ({"base": TINY_BASE, "grid": {"lr": 0.001}}, "lr"),
        ({"base": TINY_BASE, "grid": {"gamma": [0.5], "epochs": [2]}}, "epochs"),  # in base and grid
        ({"base": {**TINY_BASE, "lr": "fast"}, "grid": {"gamma": [0.5]}}, "lr"),
        ({"base": TINY_BASE, "grid": {"k": [0, 2]}}, "k"),  # k needs the complexity task
        ({"base": TINY_BASE, "grid": {"gamma": [0.5, 0.5]}}, "gamma"),
    ],
)
def test_bad_spec_fails_before_training_naming_the_key(tmp_path, capsys, spec, key):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    out = tmp_path / "sweep"
    assert main(["sweep", str(path), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "interp-init: error:" in err and repr(key) in err, err
    assert not out.exists()  # nothing was trained, not even a folder made


def test_grid_points_names_and_configs():
    spec = _spec({"seed": [0, 1], "gamma": [0.8, 0.3]})
    points = spec.points()
    assert [p.name for p in points] == [
        "gamma=0.8__seed=0",
        "gamma=0.3__seed=0",
        "gamma=0.8__seed=1",
        "gamma=0.3__seed=1",
    ]
    assert spec.size == 4
    for p in points:
        assert p.config.init.gamma == p.params["gamma"] and p.config.seed == p.params["seed"]
        assert p.config.data.n_train == 1000 and p.config.preset == "tiny"


def test_toml_spec_equals_json(tmp_path):
    (tmp_path / "s.toml").write_text(
        '[base]\npreset = "tiny"\ntask = "id-ood"\n\n[grid]\ngamma = [0.3, 0.8]\nweight_decay = [0.0, 0.1]\n'
    )
    (tmp_path / "s.json").write_text(
        json.dumps(
            {"base": {"preset": "tiny", "task": "id-ood"}, "grid": {"gamma": [0.3, 0.8], "weight_decay": [0.0, 0.1]}}
        )
    )
    a, b = StudySpec.from_file(tmp_path / "s.toml"), StudySpec.from_file(tmp_path / "s.json")
    assert [p.config for p in a.points()] == [p.config for p in b.points()]


def test_a_folder_holding_another_sweep_is_refused_before_training(tmp_path):
    """sweep.json records the first sweep (a run folder of another run, without it: tests/training/test_launch.py)."""
    spec = _spec({"gamma": [0.5]})
    run_sweep(spec, tmp_path, SweepOptions(progress=False))
    other = _spec({"gamma": [0.5]}, epochs=3)
    with pytest.raises(ValueError, match="holds another sweep"):
        run_sweep(other, tmp_path, SweepOptions(progress=False))


# --------------------------------------------------------------- runs, resume, table


def test_tiny_grid_twice_gives_the_same_table(tmp_path):
    spec = _spec({"gamma": [0.3, 0.8], "seed": [0, 1]})
    first = run_sweep(spec, tmp_path / "a", SweepOptions(progress=False))
    assert first.count("completed") == 4 and not first.skipped
    table = first.results
    assert list(table["run"]) == sorted(p.name for p in spec.points())
    assert table["status"].eq("completed").all()
    assert (
        table[["train_acc", "id_acc", "heldout_inferential", "heldout_symmetric", "stable_rank_wq0", "stable_rank_we"]]
        .notna()
        .all()
        .all()
    )
    assert table["ood_acc"].isna().all()  # not the id-ood task
    # An independent second sweep: the same content.
    second = run_sweep(spec, tmp_path / "b", SweepOptions(progress=False))
    pd.testing.assert_frame_equal(_content(table), _content(second.results))
    # The same sweep again: everything skipped, nothing rewritten, identical table.
    before = {d.name: _mtimes(d) for d in (tmp_path / "a").iterdir() if d.is_dir()}
    again = run_sweep(spec, tmp_path / "a", SweepOptions(progress=False))
    assert len(again.skipped) == 4
    assert {d.name: _mtimes(d) for d in (tmp_path / "a").iterdir() if d.is_dir()} == before
    pd.testing.assert_frame_equal(table, again.results)
    pd.testing.assert_frame_equal(table, load_results(tmp_path / "a"))


def test_table_values_come_from_the_run_folders(tmp_path):
    from interp_init import load_model
    from probes import merged_weight, stable_rank

    run_sweep(_spec({"gamma": [0.5]}), tmp_path, SweepOptions(progress=False))
    row = load_results(tmp_path).iloc[0]
    run = tmp_path / row["run"]
    final = read_metrics(run)["final"]
    assert row["train_acc"] == pytest.approx(final["train_acc"])
    assert row["heldout_inferential"] == pytest.approx(final["heldout"]["4,3"]["inferential"])
    model = load_model(run)
    assert row["stable_rank_wq0"] == pytest.approx(stable_rank(merged_weight(model, "W_Q", 0)))
    assert row["stable_rank_we"] == pytest.approx(stable_rank(model.W_E))


def test_sigkill_then_resume_trains_each_point_once(tmp_path):
    grid = {"gamma": [0.3, 0.5, 0.8], "seed": [0]}
    spec = {"base": {**TINY_BASE, "epochs": 6, "n_train": 2000}, "grid": grid}
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    out = tmp_path / "sweep"
    # Killed (SIGKILL, by the run folder's fault-injection switch) right after the second
    # run wrote its config.json: the first run has finished, the second has just started.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "INTERP_INIT_KILL_AT": "after:config.json:2"}
    killed = subprocess.run(
        [sys.executable, "-m", "training.cli", "sweep", str(spec_path), "--out", str(out), "--threads", "1", "--quiet"],
        capture_output=True,
        env=env,
        timeout=600,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    finished = [d for d in out.glob("*") if d.is_dir() and (read_metrics(d) or {}).get("status") == "completed"]
    assert finished, "no run finished before the kill"
    done = {d.name for d in out.iterdir() if d.is_dir() and (read_metrics(d) or {}).get("status") == "completed"}
    assert len(done) < 3, "the sweep finished before it could be killed; make the runs longer"
    before = {name: _mtimes(out / name) for name in done}

    assert main(["sweep", str(spec_path), "--out", str(out), "--threads", "1", "--quiet"]) == 0
    table = load_results(out)
    assert len(table) == 3 and sorted(table["run"]) == sorted(p.name for p in StudySpec.from_file(spec_path).points())
    assert table["status"].eq("completed").all()
    for name, mtimes in before.items():
        now = _mtimes(out / name)
        assert {k: now[k] for k in mtimes} == mtimes, f"{name} was rewritten"
    for run in table["run"]:
        history = read_metrics(out / run)["history"]
        assert [r["epoch"] for r in history] == list(range(1, 7))  # every epoch exactly once


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of a process from /proc, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    return fields[0], int(fields[1]), int(fields[19])


def _descendants(root: int) -> dict[int, int]:
    """pid -> start time of every living descendant of ``root``."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _proc_stat(int(entry.name))) is not None:
            stats[int(entry.name)] = stat
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (state, ppid, start) in stats.items():
            if ppid == parent and pid not in found and state not in "ZX":
                found[pid] = start
                frontier.append(pid)
    return found


def _alive(pid: int, start: int) -> bool:
    stat = _proc_stat(pid)
    return stat is not None and stat[2] == start and stat[0] not in "ZX"  # a zombie has exited


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc (Linux)")
@pytest.mark.parametrize(
    "sig",
    [  # about 20 s each on 2 loaded cores (three interpreters import torch): SIGKILL, the case
        # only the workers themselves can handle, in the default suite, the others in CI's slow pass
        pytest.param(signal.SIGKILL, id="SIGKILL"),
        pytest.param(signal.SIGTERM, id="SIGTERM", marks=pytest.mark.slow),
        pytest.param(signal.SIGINT, id="SIGINT", marks=pytest.mark.slow),
    ],
)
def test_a_killed_process_pool_sweep_leaves_no_worker(tmp_path, sig):
    # Runs far longer than the test waits: the sweep is killed while its workers train.
    spec = {"base": {**TINY_BASE, "epochs": 200, "n_train": 2000}, "grid": {"gamma": [0.3, 0.5, 0.8, 1.0]}}
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    out = tmp_path / "sweep"
    # SIGINT raises KeyboardInterrupt even where the test runner's shell ignores it.
    code = "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); from training.cli import main; sys.exit(main())"
    argv = [
        sys.executable,
        "-c",
        code,
        "sweep",
        str(spec_path),
        "--out",
        str(out),
        "--workers",
        "2",
        "--threads",
        "1",
        "--quiet",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(tmp_path / "stderr.txt", "wb") as stderr:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    children: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None and not list(out.glob("*/config.json")):
            time.sleep(0.05)
        assert proc.poll() is None, f"the sweep ended before a worker started: {(tmp_path / 'stderr.txt').read_text()}"
        assert list(out.glob("*/config.json")), "no worker started a run within 240 s"
        children = _descendants(proc.pid)
        assert children, "the sweep has no child process"
        os.kill(proc.pid, sig)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            proc.poll() is None or any(_alive(pid, start) for pid, start in children.items())
        ):
            time.sleep(0.1)
        survivors = [pid for pid, start in children.items() if _alive(pid, start)]
        assert not survivors, f"worker processes {survivors} outlived the sweep killed by {sig.name}"
        assert proc.poll() == {signal.SIGKILL: -signal.SIGKILL, signal.SIGTERM: 143, signal.SIGINT: 130}[sig]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid, start in children.items():
            if _alive(pid, start):
                os.kill(pid, signal.SIGKILL)
    if sig != signal.SIGKILL:
        assert "Traceback" not in (tmp_path / "stderr.txt").read_text()


def test_failed_and_diverged_runs_are_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    import training.launch.folders

    real_fit = training.launch.folders.fit

    def flaky_fit(cfg, **kw):
        if cfg.init.gamma == 0.3:
            raise RuntimeError("simulated crash")
        return real_fit(cfg, **kw)

    monkeypatch.setattr(training.launch.folders, "fit", flaky_fit)
    # lr 1e8 without clipping makes the loss non-finite in the first epoch.
    spec = _spec({"gamma": [0.3, 0.8], "lr": [1e-3, 1e8]}, grad_clip=0.0)
    summary = run_sweep(spec, tmp_path, SweepOptions(progress=False))
    table = summary.results.set_index("run")
    assert table.loc["gamma=0.3__lr=0.001", "status"] == "failed"
    assert table.loc["gamma=0.3__lr=0.001", "error"] == "RuntimeError: simulated crash"
    assert "simulated crash" in (tmp_path / "gamma=0.3__lr=0.001" / ERROR_FILE).read_text()
    assert table.loc["gamma=0.8__lr=0.001", "status"] == "completed"
    assert table.loc["gamma=0.8__lr=100000000.0", "status"] == "diverged"
    assert summary.count("failed") == 2 and summary.count("diverged") == 1
    # Next time the failed runs are retried; the diverged one is not.
    monkeypatch.setattr(training.launch.folders, "fit", real_fit)
    again = run_sweep(spec, tmp_path, SweepOptions(progress=False))
    assert set(again.skipped) == {"gamma=0.8__lr=0.001", "gamma=0.8__lr=100000000.0"}
    table = again.results.set_index("run")
    assert table.loc["gamma=0.3__lr=0.001", "status"] == "completed"
    assert not (tmp_path / "gamma=0.3__lr=0.001" / ERROR_FILE).exists()


def test_cli_exit_code_and_summary(tmp_path, capsys):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"base": TINY_BASE, "grid": {"gamma": [0.5]}}))
    assert main(["sweep", str(path), "--dry-run"]) == 0
    assert "gamma=0.5" in capsys.readouterr().out
    assert main(["sweep", str(path), "--out", str(tmp_path / "s"), "--quiet"]) == 0
    assert "1 completed" in capsys.readouterr().out
    assert (tmp_path / "s" / RESULTS_FILE).is_file()


def test_epochs_to_thresholds_match_a_hand_count():
    from interp_init.tasks.anchor import AnchorMetrics
    from interp_init.tasks.base import EpochRecord

    def record(epoch: int, loss: float, per_pair: dict | None = None) -> EpochRecord:
        return EpochRecord(epoch, epoch, loss, 1e-3, None if per_pair is None else AnchorMetrics(1.0, 1.0, per_pair))

    history = [
        record(1, 2.0, {"1,2": 0.1, "3,4": 0.7}),
        record(2, 0.06),
        record(3, 0.049, {"1,2": 0.6, "3,4": 0.2}),
        record(4, 0.01, {"1,2": 0.9, "3,4": 0.9}),
    ]
    assert epochs_to_loss(history) == 3
    assert epochs_to_loss(history, threshold=0.1) == 2
    assert math.isnan(epochs_to_loss(history, threshold=0.001))
    assert epochs_to_pair_accuracy(history) == {"1,2": 3.0, "3,4": 1.0}
    assert epochs_to_pair_accuracy(history, threshold=0.95) == {
        "1,2": pytest.approx(math.nan, nan_ok=True),
        "3,4": pytest.approx(math.nan, nan_ok=True),
    }


def test_complexity_table_has_per_pair_epochs(tmp_path):
    spec = StudySpec({**TINY_BASE, "task": "complexity", "epochs": 3, "lr": 3e-3}, {"k": [1]})
    table = run_sweep(spec, tmp_path, SweepOptions(progress=False)).results
    history = RunRecord.read(tmp_path / table["run"][0]).history
    expected = epochs_to_pair_accuracy(history)
    assert len(expected) == 16
    for pair, value in expected.items():
        a, b = pair.split(",")
        got = table[f"epochs_to_acc_{a}_{b}"][0]
        assert (math.isnan(got) and math.isnan(value)) or got == value
    assert set(PAIR_COLUMNS) <= set(table.columns)


# --------------------------------------------------------------------------- backends


def test_ray_backend_gives_the_same_table_as_local(tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'interp-init[ray]')")
    spec = _spec({"gamma": [0.3, 0.8]})
    local = run_sweep(spec, tmp_path / "local", SweepOptions(progress=False)).results
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        remote = run_sweep(spec, tmp_path / "ray", SweepOptions(backend="ray", threads=1, progress=False)).results
    finally:
        ray.shutdown()
    pd.testing.assert_frame_equal(_content(local), _content(remote))


def test_ray_missing_gives_install_hint(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ValueError, match=r"pip install 'interp-init\[ray\]'"):
        run_sweep(_spec({"gamma": [0.5]}), tmp_path / "s", SweepOptions(backend="ray"))
    assert not (tmp_path / "s").exists()


def test_ensemble_backend_matches_one_by_one(tmp_path, monkeypatch):
    from training.launch.backends import ensemble_key
    from training.trainer.ensemble import ENSEMBLE_VARYING

    spec = _spec({"gamma": [0.3, 0.8], "weight_decay": [0.0, 0.1], "n_layers": [1, 2]})
    keys = {ensemble_key(p.config) for p in spec.points()}
    assert len(keys) == 2 and {"gamma", "weight_decay", "seed"} <= ENSEMBLE_VARYING  # one ensemble per depth
    import training.launch.backends

    calls = []
    real = training.launch.backends.execute
    monkeypatch.setattr(
        training.launch.backends, "execute", lambda jobs, *a, **kw: calls.append(len(jobs)) or real(jobs, *a, **kw)
    )
    ens = run_sweep(
        spec, tmp_path / "e", SweepOptions(backend="ensemble", device="cpu", progress=False, ensemble_size=3)
    ).results
    assert sorted(calls) == [1, 1, 3, 3]  # 2 shapes x 4 points, at most 3 at once
    one = run_sweep(spec, tmp_path / "one", SweepOptions(progress=False)).results
    assert ens["status"].eq("completed").all()
    metrics = [
        "train_acc",
        "id_acc",
        "heldout_inferential",
        "heldout_symmetric",
        "final_loss",
        "stable_rank_wq0",
        "stable_rank_we",
    ]
    pd.testing.assert_frame_equal(ens[metrics], one[metrics], atol=0.02, rtol=0.01)


def test_ensemble_backend_missing_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "training.trainer.ensemble", None)
    with pytest.raises(ValueError, match="training.trainer.ensemble"):
        run_sweep(_spec({"gamma": [0.5]}), tmp_path / "s", SweepOptions(backend="ensemble"))
    assert not (tmp_path / "s").exists()


def test_bad_options():
    with pytest.raises(ValueError, match="backend"):
        SweepOptions(backend="nope")
    with pytest.raises(ValueError, match="workers"):
        SweepOptions(workers=0)
    with pytest.raises(ValueError, match="address"):
        SweepOptions(address="auto")


@pytest.mark.slow
def test_process_pool_gives_the_same_table_as_sequential(tmp_path):
    spec = _spec({"gamma": [0.3, 0.8]})
    seq = run_sweep(spec, tmp_path / "seq", SweepOptions(progress=False, threads=1)).results
    pool = run_sweep(spec, tmp_path / "pool", SweepOptions(workers=2, progress=False)).results
    pd.testing.assert_frame_equal(_content(seq), _content(pool))


# ---------------------------------------------------------------------------- presets


def test_presets_validate_and_paper_grids_match_the_spec():
    names = preset_names()
    assert {"neurips-fig2-paper", "journal-fig3-paper", "complexity-paper"} <= set(names)
    for name in names:
        spec = load_preset(name)
        assert spec.description
        if spec.preset not in PRESETS:  # a run preset still to come: validate at tiny scale
            spec = spec.with_overrides(base={"preset": "tiny"})
        assert len(spec.points()) == spec.size
    fig2 = load_preset("neurips-fig2-paper")
    assert fig2.grid["n_layers"] == [2, 3, 4, 5, 6] and len(fig2.grid["seed"]) == 3
    lrs = fig2.grid["lr"]
    assert len(lrs) == 9 and min(lrs) == pytest.approx(1e-4) and max(lrs) == pytest.approx(3e-4)
    journal = load_preset("journal-fig3-paper")
    assert journal.grid["gamma"] == pytest.approx([0.4 + 0.05 * i for i in range(9)])
    assert journal.grid["weight_decay"] == [0.0, 0.01, 0.1, 1.0] and len(journal.grid["seed"]) == 3
    assert journal.base["task"] == "id-ood" and journal.base["n_layers"] == 10 and journal.base["n_heads"] == 10
    complexity = load_preset("complexity-paper")
    assert complexity.grid["k"] == list(range(7)) and complexity.base["task"] == "complexity"


def test_collect_results_on_an_empty_folder(tmp_path):
    table = collect_results(tmp_path)
    assert table.empty and "status" in table.columns
    with pytest.raises(ValueError, match="does not exist"):
        collect_results(tmp_path / "nope")


def test_docs_preset_table_matches_the_presets():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "sweeps.md").read_text()
    import re

    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| .+ \| (\d+) \|$", doc, re.M))
    assert set(rows) == set(preset_names())
    for name, runs in rows.items():
        assert load_preset(name).size == int(runs), name


def test_a_damaged_folder_gets_an_unreadable_row(tmp_path):
    run_sweep(_spec({"gamma": [0.5, 0.9]}), tmp_path, SweepOptions(progress=False))
    bad = tmp_path / "gamma=0.9"  # a point of the sweep, its config damaged
    (bad / "config.json").write_text("{not json")
    table = collect_results(tmp_path).set_index("run")
    assert table.loc["gamma=0.5", "status"] == "completed"
    assert table.loc["gamma=0.9", "status"] == "unreadable" and "not valid JSON" in table.loc["gamma=0.9", "error"]


def test_thresholds_are_validated(tmp_path):
    with pytest.raises(ValueError, match="loss_threshold"):
        collect_results(tmp_path, loss_threshold=0)
    with pytest.raises(ValueError, match="pair_threshold"):
        collect_results(tmp_path, pair_threshold=60)


def test_cli_presets_and_run_preset_override(capsys):
    assert main(["sweep", "--list-presets"]) == 0
    listed = capsys.readouterr().out
    assert all(f"{name}:" in listed for name in preset_names())
    assert main(["sweep", "--preset-name", "neurips-fig2-cpu", "--run-preset", "tiny", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "24 runs; spec valid" in out and "gamma=0.3__n_layers=2__seed=0" in out
    assert main(["sweep", "--preset-name", "no-such-preset", "--dry-run"]) == 2
    assert "unknown sweep preset 'no-such-preset'" in capsys.readouterr().err


def test_seeded_from_shifts_a_seed_grid_or_sets_the_base_seed():
    from training.studies.study import StudySpec

    grid = StudySpec(base={"preset": "tiny"}, grid={"gamma": [0.5, 0.8], "seed": [0, 1, 2]})
    shifted = grid.seeded_from(31)
    assert shifted.grid["seed"] == [31, 32, 33] and shifted.grid["gamma"] == [0.5, 0.8]
    single = StudySpec(base={"preset": "tiny", "seed": 0}, grid={"gamma": [0.5]}).seeded_from(7)
    assert single.base["seed"] == 7 and "seed" not in single.grid
