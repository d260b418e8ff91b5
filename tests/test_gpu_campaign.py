"""The GPU campaign on a CPU: the cells in order, the split of a cell, the budget stop, the
records, the fallback of a failing fast step, the plan's arithmetic, and the rules as code.

No timing is asserted: the plan's estimates come from a stated peak and efficiency
(``--peak-tflops``, ``--efficiency``), and where a test needs training to be slower than
planned it makes each step sleep.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from helpers import ROOT, load_script


import campaign_cells as cells  # noqa: E402
import campaign_plan as plan  # noqa: E402
import campaign_records as records  # noqa: E402
import campaign_profile as timing  # noqa: E402
import gpu_cost as cost  # noqa: E402

#: Tiny cells, one thread, the plan stated: each tiny run estimates a few hundredths of a second.
TINY = [
    "--scale",
    "tiny",
    "--device",
    "cpu",
    "--threads",
    "1",
    "--peak-tflops",
    "0.05",
    "--setup-seconds",
    "0",
    "--margin-seconds",
    "0",
]
PEAKS = dict.fromkeys(("bf16", "fp32", "tf32"), 0.05e12)


def _main():
    return load_script("benchmarks/gpu_campaign.py").main


def _next(tmp_path: Path, *args: str, budget: float = 300, efficiency: float = 0.5):
    argv = [
        "next",
        *TINY,
        "--results",
        str(tmp_path / "results"),
        "--out",
        str(tmp_path / "runs"),
        "--budget-seconds",
        str(budget),
        "--efficiency",
        str(efficiency),
        *args,
    ]
    return CliRunner().invoke(_main(), argv)


def _part(tmp_path: Path, cell: str, number: int) -> dict:
    return json.loads((tmp_path / "results" / cell / f"part-{number}" / "part.json").read_text())


def _efficiency_for(seconds: float) -> float:
    """The efficiency at which a tiny cell-01 run is planned at ``seconds`` (of the stated 0.05 TFLOP/s)."""
    run = cells.grid_runs(cells.CELLS[0], "tiny")[0]
    return plan.Costs().work(run) / (PEAKS["bf16"] * seconds)


def test_next_trains_the_first_cell_then_the_next_and_never_one_already_finished(tmp_path: Path) -> None:
    first = _next(tmp_path, "--max-parts", "1")
    assert first.exit_code == 0, first.output
    assert "[01-fig2-small-init] part 1: 01-fig2-small-init: 27 runs" in first.output
    second = _next(tmp_path, "--max-parts", "1")
    assert second.exit_code == 0 and "[02-fp32-control] part 1: 02-fp32-control: 3 runs" in second.output, second.output
    third = _next(tmp_path, "--max-parts", "1")
    assert (
        third.exit_code == 0
        and "[03-large-init] part 1" in third.output
        and "01-fig2" not in third.output
        and "02-fp32" not in third.output
    )

    results = tmp_path / "results"
    files = sorted(p.relative_to(results).as_posix() for p in results.rglob("*") if p.is_file())
    assert {Path(f).name for f in files} == {
        "cell.json",
        "part.json",
        "config.json",
        "metrics.json",
    }  # no weights, no checkpoints
    assert len([f for f in files if f.startswith("01-") and f.endswith("metrics.json")]) == 27
    for cell in ("01-fig2-small-init", "02-fp32-control", "03-large-init"):
        assert sum(p.stat().st_size for p in (results / cell).rglob("*") if p.is_file()) < 64 * 2**20
    part = _part(tmp_path, "01-fig2-small-init", 1)
    assert part["part"] == 1 and part["status"] == "complete" and part["step"] == {"path": "batched", "fallbacks": []}
    assert part["evaluated_epochs"] == [1, 2, 3]
    assert set(part["runs"]) == {
        f"seed={s}__lr={lr:g}"
        for s in (9001, 9002, 9003)
        for lr in (1e-4, 1.25e-4, 1.5e-4, 1.75e-4, 2e-4, 2.25e-4, 2.5e-4, 2.75e-4, 3e-4)
    }
    assert part["versions"]["torch"] == torch.__version__ and part["device"]["type"] == "cpu"
    speed = part["speed"]
    assert speed["samples_per_s"] > 0 and speed["fraction_of_bf16_peak"] == pytest.approx(
        speed["samples_per_s"] * speed["train_mflop_per_sample"] * 1e6 / 0.05e12
    )
    assert speed["probe_samples_per_s"] > 0 and part["timing"]["train_s"] > 0 and len(part["timing"]["steps_s"]) == 3
    metrics = json.loads(
        (results / "01-fig2-small-init" / "part-1" / "seed=9001__lr=0.0001" / "metrics.json").read_text()
    )
    assert metrics["status"] == "completed" and [h["epoch"] for h in metrics["history"]] == [1, 2, 3]
    cell = json.loads((results / "02-fp32-control" / "cell.json").read_text())
    assert (
        cell["scale"] == "tiny"
        and cell["tf32"] is False
        and cell["grid"] == {"seed": [9001, 9002, 9003], "lr": [2.5e-4]}
    )

    status = CliRunner().invoke(_main(), ["status", "--scale", "tiny", "--results", str(results)])
    assert (
        "## 01-fig2-small-init: 27 of 27 runs finished" in status.output
        and "## 04-depth-3-4: 0 of 54 runs finished" in status.output
    )
    assert "outcome: fails" in status.output and "outcome: bf16 holds" in status.output


def test_a_cell_too_long_for_the_budget_trains_in_parts_of_whole_seeds_then_fewer_lrs(tmp_path: Path) -> None:
    """Each run is planned at 10 s (it trains in far less): 105 s fit one seed's 9 runs, not
    two; 45 s fit four lrs of the next seed; 5 s fit no run, and the call says what would."""
    efficiency = _efficiency_for(10.0)
    split = _next(tmp_path, "--max-parts", "1", budget=105, efficiency=efficiency)
    assert split.exit_code == 0, split.output
    assert "01-fig2-small-init: 9 runs (seeds 9001)" in split.output
    first = _part(tmp_path, "01-fig2-small-init", 1)
    assert first["status"] == "complete" and sorted(first["runs"]) == sorted(
        r.name for r in cells.grid_runs(cells.CELLS[0], "tiny")[:9]
    )
    fewer = _next(tmp_path, "--max-parts", "1", budget=45, efficiency=efficiency)
    assert fewer.exit_code == 0 and "01-fig2-small-init: 4 runs (seeds 9002)" in fewer.output, fewer.output
    assert sorted(_part(tmp_path, "01-fig2-small-init", 2)["runs"]) == [
        f"seed=9002__lr={lr:g}" for lr in (0.0001, 0.000125, 0.00015, 0.000175)
    ]
    refused = _next(tmp_path, budget=5, efficiency=efficiency)
    assert (
        refused.exit_code == 1
        and "cannot fit the next run (estimated 10 s" in refused.output
        and "give at least 10 seconds" in refused.output
    )
    assert not (tmp_path / "results" / "01-fig2-small-init" / "part-3").exists()


def test_a_part_stopped_by_its_deadline_is_recorded_and_trained_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step sleeps 2 s, so a tiny epoch (2 steps) takes at least 4 s: a part planned to
    fit 10 s stops before the epoch that would pass its deadline, keeps its histories, and a
    later call trains the same runs again, from the start."""
    real = timing.TimedStep.__call__

    def slow(self, members, idx):
        time.sleep(2.0)
        return real(self, members, idx)

    monkeypatch.setattr(timing.TimedStep, "__call__", slow)
    efficiency = _efficiency_for(4.0)  # each run planned at 4 s: 2 fit in 10 s
    stopped = _next(tmp_path, "--max-parts", "1", budget=10.0, efficiency=efficiency)
    assert stopped.exit_code == 0, stopped.output
    part = _part(tmp_path, "01-fig2-small-init", 1)
    assert part["status"] == "stopped" and len(part["runs"]) == 2
    assert all(0 < r["epochs"] < 3 and r["status"] == "interrupted" for r in part["runs"].values())
    assert [p.name for p in (tmp_path / "results" / "01-fig2-small-init" / "part-1").rglob("checkpoint.pt")] == []
    assert list((tmp_path / "runs").rglob("checkpoint.pt"))  # the chunk's end: its checkpoints stay in --out
    monkeypatch.setattr(timing.TimedStep, "__call__", real)
    again = _next(tmp_path, "--max-parts", "1", budget=10.0, efficiency=efficiency)
    assert again.exit_code == 0, again.output
    assert _part(tmp_path, "01-fig2-small-init", 2)["status"] == "complete" and set(
        _part(tmp_path, "01-fig2-small-init", 2)["runs"]
    ) == set(part["runs"])


def test_failing_fast_steps_fall_back_to_the_plain_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trainer's batched step made to fail in its update: the part trains again, in a fresh
    folder, on the plain step, and says so."""
    from training.trainer.ensemble import BatchedStep

    def broken(self, lr, running):
        raise RuntimeError("no kernel image is available")

    monkeypatch.setattr(BatchedStep, "update", broken)
    result = _next(tmp_path, "--max-parts", "1", budget=25, efficiency=_efficiency_for(10.0))
    assert result.exit_code == 0, result.output
    part = _part(tmp_path, "01-fig2-small-init", 1)
    assert part["status"] == "complete" and part["step"]["path"] == "plain"
    assert [(e["path"], e["error"].split(":")[0]) for e in part["step"]["fallbacks"]] == [("batched", "RuntimeError")]
    assert "no kernel image is available" in part["step"]["fallbacks"][0]["error"]
    assert all(r["status"] == "completed" for r in part["runs"].values())
    assert sorted(p.name for p in (tmp_path / "runs" / "01-fig2-small-init" / "part-1").iterdir()) == [
        "attempt-1",
        "attempt-2",
    ]


@pytest.mark.slow
def test_profile_writes_a_summary_into_the_part(tmp_path: Path) -> None:
    result = _next(tmp_path, "--max-parts", "1", "--profile", budget=25, efficiency=_efficiency_for(10.0))
    assert result.exit_code == 0, result.output
    profile = _part(tmp_path, "01-fig2-small-init", 1)["profile"]
    assert (
        profile["wall_s"] > 0
        and profile["cpu_self_s"] > 0
        and "aten::" in profile["table"]
        and profile["schedule"]["active"] >= 1
    )


def test_the_plan_counts_every_epoch_and_evaluation_and_splits_by_whole_seeds() -> None:
    """A run's planned seconds: its FLOPs (each epoch's training samples, each evaluated
    epoch's evaluation samples: the extension's cadence evaluates epochs 1-3, 4 and 6 of 6)
    over the peak times the efficiency; a part takes whole seeds while they fit."""
    run = cells.extended(cells.grid_runs(cells.CELLS[0], "tiny")[0], "01-fig2-small-init", "tiny")
    cfg = run.config
    flops = cost.run_flops(cfg, torch.device("cpu"))
    per_eval = cfg.train.eval_samples + 2 * cfg.data.n_test  # train_eval, id_test, the held-out (4,3)
    work = cfg.train.epochs * cfg.data.n_train * flops.train + len([1, 2, 3, 4, 6]) * per_eval * flops.forward
    rate = plan.Rate(dict.fromkeys(("bf16", "fp32", "tf32"), 2e12), {"bf16": 0.25}, setup_s=7.0)
    assert plan.Costs().seconds(run, rate) == pytest.approx(work / (2e12 * 0.25))

    runs = cells.grid_runs(cells.CELLS[0], "tiny")
    costs = plan.Costs()
    one = costs.seconds(runs[0], rate)
    assert plan.plan_part(cells.CELLS[0], runs, costs, rate, 7.0 + 18.5 * one).runs == tuple(
        runs[:18]
    )  # two whole seeds
    assert plan.plan_part(cells.CELLS[0], runs[9:], costs, rate, 7.0 + 3.5 * one).runs == tuple(
        runs[9:12]
    )  # three lrs of seed 9002
    assert plan.plan_part(cells.CELLS[0], runs, costs, rate, 7.0 + 0.5 * one) is None
    depth = cells.grid_runs(cells.CELLS[3], "tiny")
    part = plan.plan_part(cells.CELLS[3], depth, costs, rate, 1e9)
    assert {r.config.model.n_layers for r in part.runs} == {3} and len(part.runs) == 27  # one ensemble: one depth


def test_the_dry_run_prints_each_cells_device_seconds(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        _main(),
        ["--dry-run", "--scale", "tiny", "--results", str(tmp_path), "--peak-tflops", "1", "--setup-seconds", "5"],
    )
    assert result.exit_code == 0, result.output
    rate = plan.Rate(dict.fromkeys(("bf16", "fp32", "tf32"), 1e12), {}, 5.0)
    runs = cells.grid_runs(cells.CELLS[0], "tiny")
    expected = sum(plan.Costs().seconds(r, rate) for r in runs) + 5.0
    row = re.search(r"\| 01-fig2-small-init \| 27 \| 81 \| [\d.]+ \| ([\d,.]+) \|", result.output)
    assert row and float(row.group(1).replace(",", "")) == pytest.approx(expected, abs=0.5)
    assert (
        "| 06-full-schedule | at most 117 |" in result.output
        and "The next lease, at 11.4% of the bf16 peak: 01-fig2-small-init" in result.output
    )
    assert not any(tmp_path.iterdir())


def _write_run(folder: Path, cfg, history: list[tuple[float, float, float, float]]) -> None:
    """A stored record: ``history`` holds per epoch (ID, (4,3) inferential, (4,3) symmetric, (3,4))."""
    folder.mkdir(parents=True)
    entries = [
        {
            "epoch": e,
            "step": e,
            "loss": 0.1,
            "lr": 1e-4,
            "train_acc": 1.0,
            "id_acc": i,
            "per_pair": {"3,4": x},
            "heldout": {"4,3": {"inferential": inf, "symmetric": sym}},
        }
        for e, (i, inf, sym, x) in enumerate(history, start=1)
    ]
    (folder / "config.json").write_text(json.dumps(cfg.to_dict()))
    (folder / "metrics.json").write_text(json.dumps({"status": "completed", "final": entries[-1], "history": entries}))


@pytest.mark.parametrize(
    "late,outcome",
    [
        (
            {9001: (1.0, 0.95, 0.0, 1.0)},
            "infers",
        ),  # one seed ends inferential at one lr (small init's side only: the flip is the contrast's)
        ({9001: (1.0, 0.0, 1.0, 1.0), 9002: (1.0, 0.0, 1.0, 1.0), 9003: (1.0, 0.0, 1.0, 1.0)}, "transient"),
        ({}, "fails"),
    ],
)
def test_the_first_cells_rule_reads_the_papers_statistic(tmp_path: Path, late: dict, outcome: str) -> None:
    """Every run: ID fitted, (4,3) symmetric throughout; in ``transient`` each seed's lr-1e-4 run
    infers (0.9) at epoch 1 and copies after; ``infers``: seed 9001's ends inferential."""
    cell = cells.CELLS[0]
    for run in cells.grid_runs(cell, "tiny"):
        history = [(1.0, 0.0, 1.0, 1.0)] * 3
        if run.seed in late and run.config.train.lr == 1e-4:
            history = (
                [(1.0, 0.9, 0.0, 1.0), (1.0, 0.9, 0.0, 1.0), late[run.seed]]
                if outcome == "transient"
                else [(1.0, 0.0, 1.0, 1.0)] * 2 + [late[run.seed]]
            )
        _write_run(tmp_path / cell.name / "part-1" / run.name, run.config, history)
    store = records.CampaignResults(tmp_path, "tiny")
    assert store.finished(cell) and records.decide(store, cell).outcome == outcome
    moving = cells.grid_runs(cell, "tiny")[0]
    assert records.still_moving(store.records(cell)[moving.name]) == (
        outcome != "fails"
    )  # the lr-1e-4 run of seed 9001 changes in its last epochs


def _write_cell(
    root: Path, name: str, inferential: float, symmetric: float, seeds: tuple[int, ...] | None = None
) -> None:
    """Every run of the cell ``name`` (or of its ``seeds``) ends at these (4,3) shares, ID fitted."""
    cell = cells.cell_named(name)
    for run in cells.grid_runs(cell, "tiny"):
        if seeds is None or run.seed in seeds:
            share = inferential + (run.seed - 9000) / 1e4  # distinct per seed, as real shares are
            _write_run(root / cell.name / "part-1" / run.name, run.config, [(1.0, share, symmetric, 1.0)] * 3)


def test_the_contrast_needs_both_inits_whole_seeds_and_more_than_three_seeds(tmp_path: Path) -> None:
    _write_cell(tmp_path, "01-fig2-small-init", 0.9, 0.1)
    store = records.CampaignResults(tmp_path, "tiny")
    assert records.decide_contrast(store).outcome == "pending"  # no large init: the flip cannot be called from one init
    _write_cell(tmp_path, "03-large-init", 0.1, 0.9)
    three = records.decide_contrast(store)
    assert three.outcome == "not separated" and "Mann-Whitney p = 0.100" in three.table[0]  # 3 against 3: 2 / C(6, 3)
    _write_cell(tmp_path, "07-fig2-small-more-seeds", 0.9, 0.1)
    _write_cell(
        tmp_path, "08-fig2-large-more-seeds", 0.1, 0.9, seeds=(9004, 9005, 9006, 9007)
    )  # seed 9008 not run: left out
    eight = records.decide_contrast(store)
    assert (
        eight.outcome == "flip"
        and "small init 0.90 (8 seeds), large init 0.10 (7 seeds), Mann-Whitney p = 0.000" in eight.table[0]
    )
    _write_cell(tmp_path / "rev", "01-fig2-small-init", 0.1, 0.9)
    _write_cell(tmp_path / "rev", "03-large-init", 0.9, 0.1)
    _write_cell(tmp_path / "rev", "07-fig2-small-more-seeds", 0.1, 0.9)
    _write_cell(tmp_path / "rev", "08-fig2-large-more-seeds", 0.9, 0.1)
    assert records.decide_contrast(records.CampaignResults(tmp_path / "rev", "tiny")).outcome == "reversed"


def test_bad_use_is_refused_with_a_line(tmp_path: Path) -> None:
    main = _main()
    tiny_default = CliRunner().invoke(
        main, ["next", "--scale", "tiny", "--out", str(tmp_path / "r"), "--budget-seconds", "9"]
    )
    assert tiny_default.exit_code == 2 and "--scale tiny writes toy records: give --results" in tiny_default.output
    nested = CliRunner().invoke(
        main, ["next", *TINY, "--results", str(tmp_path), "--out", str(tmp_path / "runs"), "--budget-seconds", "9"]
    )
    assert nested.exit_code == 2 and "never go into the records" in nested.output
    (tmp_path / "c" / "01-fig2-small-init").mkdir(parents=True)
    (tmp_path / "c" / "01-fig2-small-init" / "cell.json").write_text(
        json.dumps({"name": "01-fig2-small-init", "epochs": 30})
    )
    changed = CliRunner().invoke(
        main, ["next", *TINY, "--results", str(tmp_path / "c"), "--out", str(tmp_path / "r"), "--budget-seconds", "60"]
    )
    assert changed.exit_code == 1 and "a registered cell is never changed" in changed.output
    assert not (tmp_path / "r").exists()


# ------------------------------------------------------------------ issue 56: the lock, the record copy, damaged records


def _visible(results: Path) -> dict[str, bytes]:
    """The records as a reader sees them (no hidden temporary folder, no lock)."""
    return {
        p.relative_to(results).as_posix(): p.read_bytes()
        for p in sorted(results.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(results).parts)
    }


def test_a_kill_mid_copy_leaves_the_records_as_they_were_and_the_next_call_cleans_up(tmp_path: Path) -> None:
    """Issue 56, class 3: a part's records are written into ``.part-K.storing-<pid>`` through
    the atomic writer and renamed into place; SIGKILL before the rename leaves the records as
    they were (no part, nothing finished), and the next call removes the copy and trains the part."""
    import subprocess

    results = tmp_path / "results"
    argv = [
        sys.executable,
        str(ROOT / "benchmarks" / "gpu_campaign.py"),
        "next",
        *TINY,
        "--results",
        str(results),
        "--out",
        str(tmp_path / "runs"),
        "--budget-seconds",
        "300",
        "--efficiency",
        "0.5",
        "--max-parts",
        "1",
    ]
    env = {**os.environ, "INTERP_INIT_KILL_AT": "before:part.json:1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    killed = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert killed.returncode == -9, killed.stderr
    cell = results / "01-fig2-small-init"
    assert [p.name for p in cell.iterdir() if p.name.startswith(".part-1.storing-")] and not (cell / "part-1").exists()
    assert set(_visible(results)) == {"01-fig2-small-init/cell.json"}
    status = CliRunner().invoke(_main(), ["status", "--scale", "tiny", "--results", str(results)])
    assert status.exit_code == 0 and "## 01-fig2-small-init: 0 of 27 runs finished" in status.output
    again = _next(tmp_path, "--max-parts", "1")
    assert again.exit_code == 0 and "the copy of a part a killed call left" in again.output, again.output
    assert (
        not list(results.rglob(".part-*"))
        and not list(results.rglob(".lock"))
        and _part(tmp_path, "01-fig2-small-init", 1)["status"] == "complete"
    )


def test_a_second_next_on_the_same_folders_is_refused_by_name(tmp_path: Path) -> None:
    """Issue 56, class 2: ``next`` holds the project's lock on --results and --out; a second
    one meanwhile is one line, exit 2, before it trains anything."""
    from interp_init.fileio import hold_folder

    for held in ("results", "runs"):
        (tmp_path / held).mkdir(exist_ok=True)
        with hold_folder(tmp_path / held, "is held by the test ({owner})"):
            second = _next(tmp_path, "--max-parts", "1")
        option = "--results" if held == "results" else "--out"
        assert (
            second.exit_code == 2
            and f"is in use by another gpu_campaign.py next (pid {os.getpid()}); wait for it to finish, or give another {option}"
            in second.output
        ), second.output
        assert not list((tmp_path / "results").rglob("part.json")) and not list((tmp_path / "runs").rglob("*.json"))


def test_a_damaged_part_or_cell_record_is_one_line_naming_it(tmp_path: Path) -> None:
    """Issue 56, class 4: ``status`` and ``next`` on a cut ``part.json`` or run record, ``next``
    on a cut ``cell.json``: one line naming the file, exit 2, nothing written; a run folder that
    is a symlink is refused by name (class 5)."""
    assert _next(tmp_path, "--max-parts", "1").exit_code == 0
    part = tmp_path / "results" / "01-fig2-small-init" / "part-1"
    for damaged in (part / "part.json", part / "seed=9001__lr=0.0001" / "metrics.json", part.parent / "cell.json"):
        whole = damaged.read_bytes()
        damaged.write_bytes(whole[: len(whole) // 2])
        before = _visible(tmp_path / "results")
        status = ["status", "--scale", "tiny", "--results", str(tmp_path / "results")]
        for argv in ([status] if damaged.name != "cell.json" else []) + [None]:  # status reads no cell.json
            done = CliRunner().invoke(_main(), argv) if argv else _next(tmp_path, "--max-parts", "1")
            lines = [line for line in done.output.splitlines() if "error" in line.lower()]
            assert (
                done.exit_code == 2 and len(lines) == 1 and str(damaged) in lines[0] and "Traceback" not in done.output
            ), (damaged, done.output)
        assert _visible(tmp_path / "results") == before
        damaged.write_bytes(whole)
    run = (
        part / "seed=9001__lr=0.0001"
    )  # symlinks, one rule (as experiments/store.py's): a linked run is refused, never skipped
    shutil.move(str(run), str(tmp_path / "moved"))
    run.symlink_to(tmp_path / "moved")
    done = CliRunner().invoke(_main(), ["status", "--scale", "tiny", "--results", str(tmp_path / "results")])
    assert done.exit_code == 2 and f"{run} is a symlink" in done.output, done.output


def test_parts_marked_as_stored_studies_read_as_before(tmp_path: Path) -> None:
    """The records a lease brings back, marked in the repository by the one stored-study writer
    (``experiments/store.py --mark runs``, docs/campaign.md): each part a stored study (its
    runs with ``stored.json``), read by the campaign as before, and refused as an output."""
    first = _next(tmp_path, "--max-parts", "1")
    assert first.exit_code == 0, first.output
    results = tmp_path / "results"
    before = CliRunner().invoke(_main(), ["status", "--scale", "tiny", "--results", str(results)]).output
    store = load_script("experiments/store.py")
    part = results / "01-fig2-small-init" / "part-1"
    info = [
        "--command",
        "python benchmarks/gpu_campaign.py next --scale tiny",
        "--commit",
        "f84dd73",
        "--machine",
        "this CPU",
        "--beside",
        "nothing",
    ]
    marked = CliRunner().invoke(store.main, ["--mark", "runs", str(part), *info])
    assert marked.exit_code == 0 and "stored 27 runs (27 completed) of the runs study" in marked.output, marked.output
    assert (part / "stored-study.json").is_file() and (part / "seed=9001__lr=0.0001" / "stored.json").is_file()
    assert (
        json.loads((part / "stored-study.json").read_text())["files"]["part.json"]["bytes"]
        == (part / "part.json").stat().st_size
    )
    store_results = records.CampaignResults(results, "tiny")
    assert len(store_results.records(cells.CELLS[0])) == 27
    assert CliRunner().invoke(_main(), ["status", "--scale", "tiny", "--results", str(results)]).output == before
    second = _next(tmp_path, "--max-parts", "1")
    assert second.exit_code == 0 and "[02-fp32-control] part 1" in second.output, second.output
