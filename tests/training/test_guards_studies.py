"""Issue 46, classes 2, 3 and 5 and its doubtful cases: every study folder is closed to
strangers (each study kind enumerated), the learning-rate schedule is checked as a whole
(its fields enumerated), every count a user gives has a bound checked before any work
(every count option of every command enumerated from the click commands)."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import click
import numpy as np
import pytest
from helpers import ROOT, load_script

from interp_init.fileio import hold_folder
from interp_init.outputs import STUDY_FILE, STUDY_KINDS
from interp_init.runfolder import RunFolder
from training.cli import main
from training.config import SCHEDULE_FIELDS, TrainConfig, make_run_config
from training.launch import JobReturn, Launcher
from training.launch.base import Job
from training.studies.records import RunRecord
from training.studies.sweep.results import RANKS_FILE, run_stable_ranks
from training.studies.population import reproduce_study
from training.studies.study import StudySpec
from training.studies.study import refuse_strangers
from training.studies.sweep.results import collect_results

_SPEC = {"base": {"preset": "tiny", "epochs": 1, "n_train": 300}, "grid": {"seed": [0, 1]}}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("studies")
    (root / "spec.json").write_text(json.dumps(_SPEC))
    assert main(["sweep", str(root / "spec.json"), "--out", str(root / "S"), "--device", "cpu", "--quiet"]) == 0
    return {"S": root / "S", "spec": root / "spec.json"}


class _Submitted(Launcher):
    """A launcher that trains nothing: every job stays submitted (what Slurm's --slurm-no-wait returns)."""

    name = "submitted-only"

    @property
    def waits(self) -> bool:
        return False

    def launch(self, jobs: Sequence[Job]) -> list[JobReturn]:
        return [JobReturn(job.name, "running") for job in jobs]


def _study(kind: str, out: Path) -> list[Job]:
    """A study folder of ``kind`` made by its own command's code (training nothing); its runs."""
    if kind in ("reproduction", "population"):
        spec = StudySpec.reproduction("tiny", (0,) if kind == "reproduction" else (0, 1), single=kind == "reproduction")
        reproduce_study(spec, out, _Submitted())
        return spec.jobs(out)
    if kind == "search":
        search = load_script("experiments/search_cpu.py")
        search.SerialLauncher = lambda **_: _Submitted()
        search.cli.main(
            ["run", "--root", str(out), "task=symmetric,d_model=16,n_train=300,epochs=1"], standalone_mode=False
        )
        study = StudySpec(
            {"preset": "paper"},
            named={
                "tasksymmetric_d_model16_n_train300_epochs1": search.options_for(
                    "task=symmetric,d_model=16,n_train=300,epochs=1"
                )
            },
        )
        return study.jobs(out)
    if kind == "concept-graphs":
        from training.studies.concept_graphs import ConceptStudySpec, run_concept_study

        spec = ConceptStudySpec(gammas=(0.5,), seeds=(0, 1), size="tiny")
        run_concept_study(spec, out, _Submitted())
        return spec.jobs(out)
    assert kind == "GPU suite"
    suite = load_script("benchmarks/gpu_suite.py")
    args = [
        "--out",
        str(out),
        "--scale",
        "tiny",
        "--device",
        "cpu",
        "--seeds",
        "0",
        "--task",
        "symmetric",
        "--peak-tflops",
        "1",
        "--efficiency",
        "1e-9",
        "--probe-steps",
        "0",
        "--budget-seconds",
        "1",
    ]
    with pytest.raises(
        click.ClickException, match="cannot fit one epoch"
    ):  # nothing trains: the record is written first
        suite.main.main(args, standalone_mode=False)
    return [
        Job(r.name, r.cfg, r.folder)
        for g in suite.suite_configs(suite.suite_spec("tiny", (0,), "fp32", tasks=("symmetric",)), out, None).values()
        for r in g
    ]


#: Every kind of study folder (:data:`interp_init.outputs.STUDY_KINDS`, a population and the GPU suite's).
KINDS = ["sweep", "reproduction", "population", "search", "GPU suite", "concept-graphs"]


def test_every_study_kind_is_enumerated() -> None:
    assert set(STUDY_KINDS) <= set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_a_study_folder_refuses_a_stranger_and_takes_its_own_runs(
    kind: str, made: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``train --out STUDY/x`` (the issue's ``SWEEP/seed=7``) and any study written inside a
    study are refused unless the study names each of their runs with the same config;
    ``reproduce --seed 3 --out POP/seed-3`` style writes of a study's own runs are not."""
    out = tmp_path / "study"
    if kind == "sweep":
        shutil.copytree(made["S"], out)
        jobs = StudySpec.from_file(out / "sweep.json").jobs(out)
    else:
        jobs = _study(kind, out)
        assert json.loads((out / STUDY_FILE).read_text())["kind"] == (
            kind if kind in ("search", "concept-graphs") else "reproduction"
        )
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    assert (
        main(["train", "--preset", "tiny", "--epochs", "1", "--quiet", "--device", "cpu", "--out", str(out / "seed=7")])
        == 2
    )
    assert "which reads only the runs it names, and seed=7 is not one of them" in capsys.readouterr().err
    assert main(["sweep", str(made["spec"]), "--out", str(out / "inner"), "--device", "cpu", "--quiet"]) == 2
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == before
    own = jobs[0]
    refuse_strangers([own], own.run_dir, "a run")  # the study's own run, its own config: taken
    other = Job(own.name, dataclasses.replace(own.config, seed=own.config.seed + 100), own.run_dir)
    with pytest.raises(ValueError, match="with another config than this one"):
        refuse_strangers([other], other.run_dir, "a run")


def test_a_populations_own_seed_may_be_reproduced_into_it(tmp_path: Path) -> None:
    """A population names ``seed-S/<task>/<regime>``: the one-seed reproduction of seed S is its own."""
    pop = tmp_path / "pop"
    _study("population", pop)
    one = StudySpec.reproduction("tiny", (1,), single=True)
    refuse_strangers(one.jobs(pop / "seed-1"), pop / "seed-1", "a reproduction")
    with pytest.raises(ValueError, match="seed-9/symmetric/small-init is not one of them"):
        refuse_strangers(
            StudySpec.reproduction("tiny", (9,), single=True).jobs(pop / "seed-9"), pop / "seed-9", "a reproduction"
        )


def test_the_one_lister_finds_the_runs_a_reader_reads(tmp_path: Path) -> None:
    """``run_dirs``: a run folder is itself; a study folder is the runs it names that hold a
    run; any other folder is every run folder below it, to a depth, never into a run folder,
    a hidden folder or a link, without the runs a study in it does not name."""
    from training.studies.study import run_dirs

    for rel in ("a", "b", "b/inner", ".hidden/x", "deep/x/y", "study/r1", "study/r2"):
        (tmp_path / rel).mkdir(parents=True)
        (tmp_path / rel / "config.json").write_text("{}")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    (tmp_path / "study" / "study.json").write_text(json.dumps({"kind": "search", "runs": {"r1": "d", "gone": "d"}}))
    names = lambda paths: [p.relative_to(tmp_path).as_posix() for p in paths]  # noqa: E731
    assert names(run_dirs(tmp_path)) == ["a", "b", "deep/x/y", "study/r1"]
    assert names(run_dirs(tmp_path, depth=2)) == ["a", "b", "study/r1"]
    assert names(run_dirs(tmp_path / "study")) == ["study/r1"]
    assert run_dirs(tmp_path / "b") == [tmp_path / "b"]
    assert run_dirs(tmp_path / "nothing") == []


def test_a_sweeps_readers_read_only_the_runs_it_names(
    made: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run folder put into a sweep by other means (a copy) is left out of results.csv, the
    phase diagram (which says so), the report and the experiments' readers; a point folder
    holding another run than the point is unreadable, never read as the point."""
    sweep = Path(shutil.copytree(made["S"], tmp_path / "S"))
    shutil.copytree(sweep / "seed=1", sweep / "seed=7")  # a stranger (seed 1's run under another name)
    assert list(collect_results(sweep)["run"]) == ["seed=0", "seed=1"]
    assert main(["phase-diagram", str(sweep), "--out", str(tmp_path / "p.html")]) == 0
    assert (
        "holds 1 run folder(s) its sweep does not name (seed=7); the figures leave them out" in capsys.readouterr().err
    )
    from training.studies.report.cells import find_run_dirs
    from training.studies.study import run_dirs

    assert [p.name for p in find_run_dirs([sweep])] == ["seed=0", "seed=1"]
    assert [p.name for p in run_dirs(sweep)] == [p.name for p in run_dirs(sweep, depth=1)] == ["seed=0", "seed=1"]
    (sweep / "seed=0" / "config.json").write_text(
        (sweep / "seed=7" / "config.json").read_text()
    )  # seed 1's config at seed=0
    row = collect_results(sweep, write=False).set_index("run").loc["seed=0"]
    assert row["status"] == "unreadable" and "not the config its study" in row["error"]


# ------------------------------------------------------------------ class 3: the schedule as a whole


def _lrs(cfg: TrainConfig) -> np.ndarray:
    """The lrs a run of ``cfg`` produces, at every hundredth of an epoch."""
    return np.array([cfg.lr_at(e) for e in np.arange(0, cfg.epochs, 0.01)])


def test_the_schedule_fields_are_the_ones_lr_at_reads() -> None:
    """:data:`SCHEDULE_FIELDS` is every field whose change changes the lrs a run produces (a new one fails here)."""
    base = make_run_config("tiny").train
    reading = set()
    for f in dataclasses.fields(TrainConfig):
        value = getattr(base, f.name)
        if isinstance(value, (bool, str)):
            continue
        changed = value + 1 if isinstance(value, int) else value * 0.5
        try:
            other = dataclasses.replace(base, **{f.name: changed})
        except ValueError:
            other = dataclasses.replace(base, **{f.name: value * 2 if isinstance(value, float) else value + 2})
        if _lrs(base).shape != _lrs(other).shape or not np.array_equal(_lrs(base), _lrs(other)):
            reading.add(f.name)
    assert reading == set(SCHEDULE_FIELDS)


#: For each schedule field, values that would make the schedule leave [floor, peak] or put
#: its phases out of order, over the tiny preset (lr 1e-3, warmup from 1e-4 over 1 epoch,
#: cosine to 1e-4 over 2, 3 epochs), and the flag the message names.
HOSTILE_SCHEDULES = {
    "lr": ({"lr": 1e-5}, "--lr"),  # below its own warmup start and floor
    "warmup_start_lr": ({"warmup_start_lr": 0.5}, "--warmup-start-lr"),
    "min_lr": (
        {"epochs": 4, "warmup_epochs": 1, "cosine_epochs": 2, "min_lr": 5, "lr": 0.001},
        "--min-lr",
    ),  # the instance
    "warmup_epochs": ({"warmup_epochs": 4.0}, "--warmup-epochs"),
    "cosine_epochs": ({"cosine_epochs": 2.0, "min_lr": 0.01}, "--min-lr"),  # a cosine to above its peak
    "epochs": ({"epochs": 1, "warmup_epochs": 2.0}, "--warmup-epochs"),
}


def test_every_schedule_field_has_a_hostile_case() -> None:
    assert set(HOSTILE_SCHEDULES) == set(SCHEDULE_FIELDS)


@pytest.mark.parametrize("field", SCHEDULE_FIELDS)
def test_a_schedule_out_of_bounds_is_refused_naming_the_flag(
    field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options, flag = HOSTILE_SCHEDULES[field]
    argv = ["train", "--preset", "tiny", "--quiet", "--device", "cpu", "--out", str(tmp_path / "run")]
    for key, value in options.items():
        argv += ["--" + key.replace("_", "-"), str(value)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert flag in err and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()


def test_a_min_lr_above_the_peak_is_harmless_without_a_cosine() -> None:
    """Every lr a schedule *can produce* is checked: with no cosine the lr stays at its peak."""
    cfg = dataclasses.replace(make_run_config("tiny").train, cosine_epochs=0.0, min_lr=5.0)
    assert set(_lrs(cfg)[np.arange(0, cfg.epochs, 0.01) >= cfg.warmup_epochs]) == {cfg.lr}


def test_every_lr_a_valid_schedule_produces_lies_between_its_floor_and_its_peak() -> None:
    rng = np.random.default_rng(46)
    checked = 0
    for _ in range(400):
        epochs = int(rng.integers(1, 30))
        values = {
            "epochs": epochs,
            "lr": float(10 ** rng.uniform(-6, -1)),
            "warmup_start_lr": float(10 ** rng.uniform(-7, -1)),
            "min_lr": float(10 ** rng.uniform(-7, -1)),
            "warmup_epochs": float(rng.uniform(0, 1.2) * epochs),
            "cosine_epochs": float(rng.uniform(0, 2) * epochs),
        }
        try:
            cfg = dataclasses.replace(make_run_config("tiny").train, **values)
        except ValueError:
            continue
        floor = min(
            cfg.warmup_start_lr if cfg.warmup_epochs > 0 else cfg.lr, cfg.min_lr if cfg.cosine_epochs > 0 else cfg.lr
        )
        lrs = _lrs(cfg)
        assert lrs.max() <= cfg.lr * (1 + 1e-12) and lrs.min() >= floor * (1 - 1e-12), values
        checked += 1
    assert checked > 100


# ------------------------------------------------------------------ class 5: every count has a bound


#: Every integer option of the user's commands (``interp-init``, ``experiments/``, the GPU
#: suite; the micro-benchmarks under ``benchmarks/bench_*`` measure what they are asked to)
#: that counts something, with a hostile value: refused before any work, naming the flag.
COUNTS = {
    **{
        f"interp-init train {name}": ("10000000000", flag)
        for name, flag in [
            ("n_layers", "--n-layers"),
            ("d_model", "--d-model"),
            ("n_heads", "--n-heads"),
            ("d_head", "--d-head"),
            ("d_mlp", "--d-mlp"),
            ("d_vocab", "--d-vocab"),
            ("n_ctx", "--n-ctx"),
            ("n_train", "--n-train"),
            ("n_test", "--n-test"),
            ("epochs", "--epochs"),
            ("batch_size", "--batch-size"),
            ("k", "k (inferential complexity)"),
            ("n_heldout", "--n-heldout"),
            ("hops", "prontoqa task: hops must be an integer in 1..5"),
        ]
    },
    "interp-init reproduce workers": ("100000", "--workers"),
    "interp-init sweep threads": ("100000", "--threads"),
    "interp-init concept-graphs workers": ("100000", "--workers"),
    "interp-init concept-graphs threads": ("100000", "--threads"),
    "interp-init sweep workers": ("100000", "--workers"),
    "interp-init sweep ensemble_size": ("100000000", "--ensemble-size"),
    "interp-init report per_pair": ("100000", "--per-pair"),
    "benchmarks/gpu_suite.py threads": ("100000", "--threads"),
    "benchmarks/gpu_suite.py probe_steps": ("100000000", "--probe-steps"),
    "benchmarks/gpu_suite.py epochs": ("10000000000", "--epochs"),
    "experiments/search_cpu.py run threads": ("100000", "--threads"),
    "experiments/search_cpu.py run workers": ("100000", "--workers"),
    "benchmarks/gpu_campaign.py threads": ("100000", "--threads"),
}
#: Integer options that are not counts of work, and why.
NOT_COUNTS = {
    **dict.fromkeys(
        [
            "interp-init train seed",
            "interp-init train init_seed",
            "interp-init train data_seed",
            "interp-init reproduce seed",
            "interp-init reproduce fixed_seed",
            "interp-init report seed",
            "benchmarks/gpu_suite.py seeds",
        ],
        "a seed, not a count",
    ),
    **dict.fromkeys(
        ["interp-init train eval_every", "interp-init train checkpoint_every"],
        "a cadence: past --epochs only the last epoch is evaluated or saved",
    ),
    "interp-init train eval_samples": "at most --n-train samples are evaluated (the data bounds it)",
    "interp-init train offset": "a shift, not a count: refused where it puts targets outside the vocabulary (with --k > 0)",
    "interp-init train eval_dense_epochs": "a cadence: past --epochs every epoch is evaluated, no more",
    "benchmarks/gpu_campaign.py max_parts": "a cap: the campaign's registered parts and --budget-seconds bound the work",
    **dict.fromkeys(
        [
            "interp-init reproduce logged_every",
            "interp-init phase-diagram logged_every",
            "experiments/paper_statistic.py logged_every",
        ],
        "a stride over the epochs already recorded: it reads, never trains, and past the last epoch reads the last alone",
    ),
}


def _int_options() -> set[str]:
    from test_guards_outputs import _commands

    return {
        f"{name} {p.name}"
        for name, command in _commands().items()
        if not name.startswith("benchmarks/bench") and not name.startswith("benchmarks/bf16")
        for p in command.params
        if (p.type.name in ("integer", "integer range") or p.name == "workers")
        and not (p.name or "").startswith("slurm_")
    }


def test_every_count_option_is_classified() -> None:
    """A new integer option fails here until it is given a bound (``COUNTS``) or a reason it
    is not a count; the ``--slurm-*`` counts are the scheduler's to bound (its own refusal)."""
    assert _int_options() == set(COUNTS) | set(NOT_COUNTS)


def _count_argv(option: str, value: str, out: Path) -> list[str]:
    command, name = option.rsplit(" ", 1)
    flag = "--" + name.replace("_", "-")
    return {
        "interp-init train": ["train", "--preset", "tiny", "--quiet", "--device", "cpu", "--out", str(out), flag, value]
        + {"k": ["--task", "complexity"], "hops": ["--task", "prontoqa"]}.get(name, []),
        "interp-init reproduce": [
            "reproduce",
            "--preset",
            "tiny",
            "--quiet",
            "--device",
            "cpu",
            "--out",
            str(out),
            flag,
            value,
        ],
        "interp-init sweep": ["sweep", "spec.json", "--out", str(out), "--quiet", "--device", "cpu", flag, value]
        + (["--backend", "ensemble"] if name == "ensemble_size" else []),
        "interp-init report": ["report", "S/seed=0", "--out", str(out) + ".html", flag, value],
        "interp-init concept-graphs": [
            "concept-graphs",
            str(Path(__file__).parents[2] / "experiments/population-specs/concept-graphs-fig6.json"),
            "--out",
            str(out),
            flag,
            value,
        ],
        "benchmarks/gpu_suite.py": [
            "--out",
            str(out),
            "--scale",
            "tiny",
            "--device",
            "cpu",
            "--seeds",
            "0",
            "--task",
            "symmetric",
            "--peak-tflops",
            "1",
            "--efficiency",
            "0.5",
            flag,
            value,
        ],
        "experiments/search_cpu.py run": [
            "run",
            "--root",
            str(out),
            flag,
            value,
            "task=symmetric,d_model=16,n_train=300,epochs=1",
        ],
        "benchmarks/gpu_campaign.py": [
            "next",
            "--out",
            str(out),
            "--results",
            str(out) + "-records",
            "--scale",
            "tiny",
            "--device",
            "cpu",
            "--budget-seconds",
            "1",
            flag,
            value,
        ],
    }[command]


@pytest.mark.parametrize("option", sorted(COUNTS))
def test_every_count_is_bounded_before_any_work(
    option: str,
    made: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    value, flag = COUNTS[option]
    monkeypatch.chdir(made["S"].parent)
    if option.endswith("ensemble_size"):  # a machine where one run fits and two do not
        from training.trainer import preflight

        one = preflight.estimate(make_run_config("tiny", epochs=1, n_train=300)).total
        monkeypatch.setattr(preflight, "device_memory", lambda device: int(1.5 * one))
    argv = _count_argv(option, value, tmp_path / "out")
    if option.startswith("interp-init"):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert flag in err and err.count("\n") == 1 and "Traceback" not in err, err
    else:
        script = load_script(option.split()[0])
        command = script.cli if hasattr(script, "cli") else script.main
        with pytest.raises(click.UsageError, match=flag):
            command.main(argv, standalone_mode=False)
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.html").exists()


# ------------------------------------------------------------------ the doubtful cases, each decided


def test_a_full_disk_stops_a_sweep_with_exit_2_as_train_and_the_same_command_resumes(
    made: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Decided: a full disk is the machine refusing every write alike, so a sweep stops at the
    first one, exit 2 and one line as ``train`` (not one ``failed`` point after another, each
    writing error.txt); freed, the same command finishes."""
    real = RunFolder.save_checkpoint
    monkeypatch.setattr(
        RunFolder,
        "save_checkpoint",
        lambda self, state: (_ for _ in ()).throw(
            OSError(
                errno.ENOSPC,
                "no space left on the device; free some space and run the same command again to resume",
                str(self.checkpoint_path),
            )
        ),
    )
    argv = ["sweep", str(made["spec"]), "--out", str(tmp_path / "S"), "--device", "cpu", "--quiet", "--threads", "1"]
    spec = json.loads(made["spec"].read_text())
    spec["base"]["epochs"] = 2  # a checkpoint after the first epoch
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    argv[1] = str(tmp_path / "spec.json")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no space left on the device" in err and err.count("\n") == 1, err
    assert not list((tmp_path / "S").rglob("error.txt")) and not list((tmp_path / "S").rglob(".lock"))
    monkeypatch.setattr(RunFolder, "save_checkpoint", real)
    assert main(argv) == 0


def test_a_damaged_summary_is_refused_by_the_report(
    made: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Decided: a damaged ``summary.json`` beside a reproduction's runs is refused by name
    (the page would show the runs without their population)."""
    shutil.copytree(made["S"] / "seed=0", tmp_path / "P" / "symmetric" / "small-init")
    (tmp_path / "P" / "summary.json").write_text('{"per_seed": 5}')
    assert (
        main(
            [
                "report",
                str(tmp_path / "P" / "symmetric" / "small-init"),
                "--out",
                str(tmp_path / "r.html"),
                "--per-pair",
                "2",
            ]
        )
        == 2
    )
    assert f"{tmp_path / 'P' / 'summary.json'} is not a reproduction's summary" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_a_damaged_sweep_spec_is_refused_by_the_phase_diagram(
    made: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Decided: as ``sweep`` refuses it, so does ``phase-diagram`` (which runs it names is unknown)."""
    sweep = Path(shutil.copytree(made["S"], tmp_path / "S"))
    (sweep / "sweep.json").write_text("{not json")
    before = {p: p.read_bytes() for p in sweep.rglob("*") if p.is_file()}
    assert main(["phase-diagram", str(sweep)]) == 2
    assert f"{sweep / 'sweep.json'} does not hold a readable sweep spec" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in sweep.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    "damage",
    [
        "not json",
        "[1, 2]",
        '{"stamp": STAMP, "ranks": {"stable_rank_wq0": NaN, "stable_rank_we": 1.0}}',
        '{"stamp": STAMP, "ranks": {"stable_rank_wq0": "7", "stable_rank_we": 1.0}}',
        '{"stamp": {}, "ranks": {"stable_rank_wq0": 9.0, "stable_rank_we": 9.0}}',
    ],
)
def test_a_damaged_or_stale_ranks_cache_is_computed_again(damage: str, made: dict[str, Path], tmp_path: Path) -> None:
    """Decided: ``ranks.json`` is a cache: damaged, invalid or stale, it is computed again from
    the weights (never read), and rewritten."""
    run = Path(shutil.copytree(made["S"] / "seed=0", tmp_path / "run"))
    fresh = run_stable_ranks(run)
    stamp = json.loads((run / RANKS_FILE).read_text())["stamp"]
    (run / RANKS_FILE).write_text(damage.replace("STAMP", json.dumps(stamp)))
    assert run_stable_ranks(run) == pytest.approx(fresh)
    assert json.loads((run / RANKS_FILE).read_text())["ranks"] == pytest.approx(fresh)


def test_metrics_claiming_epochs_the_config_does_not_have_are_not_read_as_completed(
    made: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Decided: a ``metrics.json`` claiming epoch 99 of a 1-epoch run is another run's or edited:
    refused by the readers that read it strictly, ``unreadable`` in a results table."""
    sweep = Path(shutil.copytree(made["S"], tmp_path / "S"))
    path = sweep / "seed=0" / "metrics.json"
    metrics = json.loads(path.read_text())
    metrics["final"]["epoch"] = metrics["history"][-1]["epoch"] = 99
    path.write_text(json.dumps(metrics))
    with pytest.raises(ValueError, match="records epoch 99, past the 1 epoch"):
        RunRecord.read(sweep / "seed=0")
    assert collect_results(sweep, write=False).set_index("run").loc["seed=0", "status"] == "unreadable"
    assert (
        main(["sweep", str(made["spec"]), "--out", str(sweep), "--quiet", "--device", "cpu"]) == 1
    )  # never counted completed
    assert "1 of 2 runs unreadable" in capsys.readouterr().err
    assert main(["report", str(sweep / "seed=0"), "--out", str(tmp_path / "r.html"), "--per-pair", "2"]) == 2
    assert "records epoch 99" in capsys.readouterr().err


def test_one_run_given_twice_to_the_report_is_refused(
    made: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Decided: ``report RUN RUN`` (or a run and a folder holding it) is refused: a page compares each run once."""
    run = made["S"] / "seed=0"
    for argv in ([str(run), str(run)], [str(made["S"]), str(run)]):
        assert main(["report", *argv, "--out", str(tmp_path / "r.html"), "--per-pair", "2"]) == 2
        assert "is given twice" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_a_phase_diagram_of_a_running_sweep_leaves_its_results_alone(
    made: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Decided: while a sweep process holds its folder, ``phase-diagram`` draws what is finished,
    calls the points not reached yet ``pending`` (not ``absent``) and does not rewrite the
    ``results.csv`` the sweep owns."""
    sweep = Path(shutil.copytree(made["S"], tmp_path / "S"))
    shutil.rmtree(sweep / "seed=1")  # not reached yet
    results = (sweep / "results.csv").read_bytes()
    with hold_folder(sweep, "is being swept"):
        assert main(["phase-diagram", str(sweep), "--out", str(tmp_path / "p.html")]) == 1
    err = capsys.readouterr().err
    assert "1 of 2 runs pending" in err and "still training it" in err, err
    assert (sweep / "results.csv").read_bytes() == results


@pytest.mark.slow
def test_a_command_leaves_nothing_of_its_own_in_tmpdir(made: dict[str, Path], tmp_path: Path) -> None:
    """Decided: the only thing a command leaves in ``$TMPDIR`` is PyTorch's own per-user cache
    folder ``torchinductor_<user>``, which importing torch's compiler makes (empty, one per
    user, shared by every later process and by ``torch.compile``); it is not ours to remove."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = "from training.cli import main; import sys; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "train",
            "--preset",
            "tiny",
            "--epochs",
            "1",
            "--quiet",
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "run"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    left = [p.name for p in tmp.iterdir()]
    assert all(name.startswith("torchinductor_") for name in left), left
    assert all(not list((tmp / name).iterdir()) for name in left)
