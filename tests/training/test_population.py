"""Populations over seeds: exact intervals, the strict and paper protocols, reproduce --seeds,
and the init/data seed overrides."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from scipy.stats import beta

from interp_init.runfolder import RunStatus
from interp_init.tasks.base import read_run_metrics
from training.cli import main
from training.config import RunConfig, make_run_config
from training.studies.phase.figures import protocol_table
from training.studies.population import (
    Population,
    RegimeResult,
    SeedRow,
    exact_interval,
    exact_rate,
    mann_whitney,
    read_population,
)
from training.studies.records import RunRecord
from training.studies.study import REGIME_NAMES, REPRODUCE_TASKS
from training.studies.population import reproduce
from training.studies.records import PROTOCOL_TEXT, Pick, logged_epochs, pick_paper, pick_strict, protocol_text
from training.studies.study import StudySpec

# ---------------------------------------------------------------- the interval


@pytest.mark.parametrize(("k", "n"), [(0, 8), (8, 8), (3, 8), (1, 3)])
def test_exact_interval_is_clopper_pearson(k: int, n: int) -> None:
    # Clopper-Pearson from the beta distribution's quantiles, computed here independently.
    low = 0.0 if k == 0 else beta.ppf(0.025, k, n - k + 1)
    high = 1.0 if k == n else beta.ppf(0.975, k + 1, n - k)
    got = exact_interval(k, n)
    assert got == pytest.approx((low, high), abs=1e-9)
    if (k, n) == (0, 8):
        assert got[1] == pytest.approx(1 - 0.025 ** (1 / 8))  # the closed form at k = 0


def test_exact_rate_prints_the_count_with_its_interval() -> None:
    # 3 of 3: the lower bound in closed form, 0.025 ** (1 / 3) = 0.292; 0 of 3: 1 - 0.025 ** (1 / 3) = 0.708
    assert exact_rate(3, 3) == "3 of 3 [0.29, 1.00]" and exact_rate(0, 3) == "0 of 3 [0.00, 0.71]"
    assert exact_rate(0, 0) == "-"


@pytest.mark.parametrize(("k", "n", "message"), [(3, 0, "n must be"), (9, 8, "k must be"), (-1, 8, "k must be")])
def test_exact_interval_refuses_impossible_counts(k: int, n: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        exact_interval(k, n)


@pytest.mark.parametrize(
    ("x", "y", "p"),
    [
        # counted by hand over the C(n+m, n) equally likely rankings: the two-sided p is twice the
        # smaller tail of U (the pairs x wins), capped at 1
        ([0.9, 0.8, 0.7], [0.1, 0.2, 0.3], 2 / 20),  # fully separated, 3 vs 3: U = 9, the one extreme of 20
        ([0.1, 0.2, 0.3], [0.9, 0.8, 0.7], 2 / 20),  # the other direction, the same p
        ([1.0, 2.0], [3.0, 4.0], 2 / 6),  # 2 vs 2 separated: U = 0, one ranking of 6
        ([1.0, 3.0], [2.0, 4.0], 4 / 6),  # U = 1: P(U <= 1) = 2/6
        ([1.0, 4.0], [2.0, 3.0], 1.0),  # U = 2, the middle
        ([0.5], [0.1, 0.2, 0.3, 0.4], 2 / 5),  # 1 vs 4 above all: one of 5 places
    ],
)
def test_mann_whitney_is_the_exact_two_sided_rank_test(x: list[float], y: list[float], p: float) -> None:
    assert mann_whitney(x, y) == pytest.approx(p)


def test_mann_whitney_has_no_p_without_a_value_on_each_side() -> None:
    assert mann_whitney([], [0.1, 0.2]) is None and mann_whitney([0.1], []) is None


# ---------------------------------------------------------------- the protocols on synthetic histories


def _record(epoch: int, id_acc: float, inf: float, sym: float) -> dict:
    heldout = {"4,3": {"inferential": inf, "symmetric": sym}}
    return {"epoch": epoch, "loss": 1.0, "train_acc": id_acc, "id_acc": id_acc, "per_pair": {}, "heldout": heldout}


def _run(lr: float, history: list[dict], status: str = "completed") -> RunRecord:
    cfg = make_run_config("tiny", task="symmetric", lr=lr)
    metrics = read_run_metrics(cfg.data.make_task(), {"status": status, "final": history[-1], "history": history})
    return RunRecord(Path(f"lr{lr}"), cfg, RunStatus(status), metrics, final_epoch=history[-1]["epoch"])


def _histories() -> list[RunRecord]:
    return [
        # lr 1e-4: inferential peaks at epoch 2 (0.7); epoch 3 has no evaluation
        _run(
            1e-4,
            [
                _record(1, 0.5, 0.2, 0.1),
                _record(2, 0.8, 0.7, 0.3),
                {"epoch": 3, "loss": 0.9},
                _record(4, 0.9, 0.6, 0.2),
            ],
        ),
        # lr 2e-4: ID peaks at epoch 1 (0.95), symmetric at epoch 3 (0.5); inferential ties 0.7 at epoch 2
        _run(2e-4, [_record(1, 0.95, 0.1, 0.4), _record(2, 0.9, 0.7, 0.45), _record(3, 0.85, 0.3, 0.5)]),
        # a diverged run counts for nothing, however high its numbers
        _run(3e-4, [_record(1, 1.0, 1.0, 1.0)], status="diverged"),
    ]


def test_paper_protocol_picks_each_targets_best_lr_and_epoch() -> None:
    picks = pick_paper(_histories(), ("id_acc", "heldout_inferential", "heldout_symmetric"))
    assert picks["id_acc"] == Pick(0.95, 2e-4, 1)
    assert picks["heldout_inferential"] == Pick(0.7, 1e-4, 2)  # the tie goes to the smaller lr
    assert picks["heldout_symmetric"] == Pick(0.5, 2e-4, 3)


def _logged_run(lr: float, infs: list[float], epochs: int = 8) -> RunRecord:
    cfg = make_run_config("tiny", task="symmetric", lr=lr, epochs=epochs)
    history = [_record(e, 0.9, inf, 0.0) for e, inf in enumerate(infs, start=1)]
    metrics = read_run_metrics(cfg.data.make_task(), {"status": "completed", "final": history[-1], "history": history})
    return RunRecord(Path(f"lr{lr}"), cfg, RunStatus.COMPLETED, metrics, final_epoch=history[-1]["epoch"])


def test_paper_protocol_reads_only_the_logged_epochs() -> None:
    """The released scripts log before each 0-based epoch i with i % K == 0 or i == n_epoch - 1:
    after epochs K, 2K, ... and n_epoch - 1 of 8, never after the last (nor the init)."""
    # lr 1e-4: its best (0.9) at epoch 4 and the run's end (0.95, epoch 8) are not logged with K = 3; epoch 7 = 8 - 1 is
    best_unlogged = _logged_run(1e-4, [0.1, 0.2, 0.3, 0.9, 0.4, 0.35, 0.5, 0.95])
    # lr 2e-4: best at epoch 6, a logged one; it stopped early (after epoch 6: epoch 6's end is its last, not logged)
    stopped = _logged_run(2e-4, [0.1, 0.2, 0.45, 0.3, 0.2, 0.6])
    assert logged_epochs(best_unlogged, 3) == {3, 6, 7} and logged_epochs(stopped, 3) == {3}
    assert logged_epochs(best_unlogged, 1) == {1, 2, 3, 4, 5, 6, 7}
    runs = [best_unlogged, stopped]
    assert pick_paper(runs, ("heldout_inferential",))["heldout_inferential"] == Pick(
        0.95, 1e-4, 8
    )  # every evaluated epoch
    assert pick_paper(runs, ("heldout_inferential",), logged_every=3)["heldout_inferential"] == Pick(0.5, 1e-4, 7)
    assert pick_paper([stopped], ("heldout_inferential",), logged_every=3)["heldout_inferential"] == Pick(0.45, 2e-4, 3)
    assert "every 3" in protocol_text("paper", 3) and protocol_text("paper") == PROTOCOL_TEXT["paper"]
    with pytest.raises(ValueError, match="--logged-every must be an integer >= 1"):
        pick_paper(runs, ("heldout_inferential",), logged_every=0)


def test_strict_protocol_reads_the_final_epoch() -> None:
    picks = pick_strict(_histories()[0], ("id_acc", "heldout_inferential"))
    assert picks == {"id_acc": Pick(0.9, 1e-4, 4), "heldout_inferential": Pick(0.6, 1e-4, 4)}


def _seed_row(
    seed: int, inf: float, sym: float, small_ood: float, large_ood: float, id_acc: float = 0.95, exception: float = 0.97
) -> SeedRow:
    values = {
        ("symmetric", "small-init"): {
            "id_acc": id_acc,
            "heldout_inferential": inf,
            "heldout_symmetric": 0.0,
            "exception_acc": exception,
        },
        ("symmetric", "large-init"): {"id_acc": id_acc, "heldout_inferential": 0.0, "heldout_symmetric": sym},
        ("id-ood", "small-init"): {"id_acc": id_acc, "ood_acc": small_ood, "commutativity": 1.0},
        ("id-ood", "large-init"): {"id_acc": id_acc, "ood_acc": large_ood, "commutativity": 0.5},
    }
    results = tuple(
        RegimeResult(
            task,
            regime,
            0.8 if regime == "small-init" else 0.5,
            {k: Pick(v, 1e-4, 1) for k, v in values[task, regime].items()},
            "completed",
            (),
        )
        for task in REPRODUCE_TASKS
        for regime in REGIME_NAMES
    )
    return SeedRow(seed, results)


def test_population_counts_and_means_match_a_hand_computation() -> None:
    rows = (_seed_row(1, 0.9, 0.9, 0.6, 0.1), _seed_row(2, 0.5, 0.85, 0.7, 0.4), _seed_row(3, 0.8, 0.2, 0.4, 0.3))
    population = Population("cpu", "paper", rows, lrs=(1e-4,))
    rates = {r.name: (r.met, r.of) for r in population.rates}
    assert rates["symmetric: small-init inferential >= 0.8 with (3,4) fitted"] == (2, 3)  # 0.9 and 0.8
    assert rates["symmetric: large-init symmetric >= 0.8"] == (2, 3)
    assert rates["id-ood: small-init OOD >= 0.5"] == (2, 3)
    assert rates["id-ood: large-init OOD <= 0.3"] == (2, 3)  # 0.1 and 0.3
    assert rates["symmetric: both ID >= 0.9"] == (3, 3)
    assert rates["all"] == (1, 3)  # seed 1 only
    means = population.means()
    assert means["symmetric"]["small-init"]["heldout_inferential"] == pytest.approx((0.9 + 0.5 + 0.8) / 3)
    assert means["id-ood"]["large-init"]["ood_acc"] == pytest.approx((0.1 + 0.4 + 0.3) / 3)
    summary = population.to_dict()
    assert summary["population"]["all"] == {"met": 1, "of": 3, "interval": list(exact_interval(1, 3))}
    assert summary["protocol_text"] == PROTOCOL_TEXT["paper"] and "logged_every" not in summary
    logged = Population("cpu", "paper", rows, lrs=(1e-4,), logged_every=3)
    assert (
        logged.to_dict()["logged_every"] == 3
        and "every 3" in logged.to_dict()["protocol_text"]
        and "every 3" in logged.format()
    )
    assert Population.from_dict(json.loads(json.dumps(logged.to_dict()))).logged_every == 3
    assert "paper protocol" in population.format() and str(population) == population.format()
    page = population._repr_html_()  # Jupyter shows the rates, then the seeds and their mean
    assert page.startswith("<p><b>Population</b>: 3 seeds [1, 2, 3]") and page.count("<table") == 2
    assert page.count("<tr") == (1 + 7 + 1) + (1 + 3 + 1)  # the criteria and all, and the reading without (3,4)


def test_the_reading_without_the_exception_stands_beside_the_strict_criterion() -> None:
    """Seeds whose small init infers >= 0.8 with (3,4) unfitted count in the reading without
    the (3,4) condition, not in the strict criterion; the reading never enters "all"."""
    from interp_init.tasks.anchor import SMALL_INFERENTIAL, SMALL_INFERENTIAL_ANY

    rows = (
        _seed_row(1, 0.9, 0.9, 0.6, 0.1),
        _seed_row(2, 0.85, 0.9, 0.6, 0.1, exception=0.5),
        _seed_row(3, 0.95, 0.9, 0.6, 0.1, exception=0.89),
        _seed_row(4, 0.3, 0.9, 0.6, 0.1),
    )
    population = Population("cpu", "strict", rows)
    rates = {r.name: (r.met, r.of) for r in population.rates}
    readings = {r.name: (r.met, r.of, r.beside) for r in population.readings}
    assert rates[SMALL_INFERENTIAL] == (1, 4)  # seed 1 only: 2 and 3 have (3,4) below 0.9
    assert readings == {SMALL_INFERENTIAL_ANY: (3, 4, SMALL_INFERENTIAL)}  # seeds 1, 2, 3: >= 0.8 whatever (3,4) does
    assert rates["all"] == (1, 4) and SMALL_INFERENTIAL_ANY not in rows[1].checks  # not a criterion
    order = [r.name for r in population.rates_and_readings()]
    assert order[order.index(SMALL_INFERENTIAL) + 1] == SMALL_INFERENTIAL_ANY  # side by side
    summary = population.to_dict()
    assert summary["readings"][SMALL_INFERENTIAL_ANY] == {
        "met": 3,
        "of": 4,
        "interval": list(exact_interval(3, 4)),
        "beside": SMALL_INFERENTIAL,
    }
    assert [r["readings"][SMALL_INFERENTIAL_ANY] for r in summary["per_seed"]] == [True, True, True, False]
    assert SMALL_INFERENTIAL_ANY not in summary["population"]
    table = population.rates_table().set_index("criterion")
    assert (table.loc[SMALL_INFERENTIAL, "met"], table.loc[SMALL_INFERENTIAL_ANY, "met"]) == (1, 3)
    lines = population.format().splitlines()
    strict_line = next(i for i, line in enumerate(lines) if SMALL_INFERENTIAL in line)
    assert SMALL_INFERENTIAL_ANY in lines[strict_line + 1] and lines[strict_line + 1].split()[-4:-2] == ["3", "4"]
    assert (
        Population.from_dict(summary).to_dict()["readings"] == summary["readings"]
    )  # recomputed from the rows read back


def test_plan_validation() -> None:
    with pytest.raises(ValueError, match="give --lrs"):
        StudySpec.reproduction("tiny", (1, 2), protocol="paper")
    with pytest.raises(ValueError, match="strict protocol reads each preset's own lr"):
        StudySpec.reproduction("tiny", (1, 2), lrs=(1e-3,))
    with pytest.raises(ValueError, match="duplicates"):
        StudySpec.reproduction("tiny", (1, 1))
    with pytest.raises(ValueError, match="fixed seed"):
        StudySpec.reproduction("tiny", (1, 2), vary="init")


def test_a_spec_is_a_grid_or_named_points(tmp_path: Path) -> None:
    """One spec class: named points (the preset search's shape) run as they are, over tasks
    when given (a key naming a task holds its options); a grid and named points together,
    a reproduction's fields on a grid, an unknown option or a name that is no folder name
    are refused, naming the problem."""
    from training.config import make_run_config

    search = StudySpec(
        {"preset": "tiny", "epochs": 2}, named={"wide": {"d_model": 64}, "small-g": {"gamma": 0.3, "task": "id-ood"}}
    )
    assert [(j.name, j.run_dir) for j in search.jobs(tmp_path)] == [
        ("wide", tmp_path / "wide"),
        ("small-g", tmp_path / "small-g"),
    ]
    assert search.jobs(tmp_path)[1].config == make_run_config("tiny", epochs=2, gamma=0.3, task="id-ood")
    tasks = StudySpec(
        {"preset": "tiny"}, named={"a": {"gamma": 0.5, "id-ood": {"gamma": 0.4}}}, tasks=("symmetric", "id-ood")
    )
    assert [(j.name, j.config.init.gamma) for j in tasks.jobs(tmp_path)] == [("symmetric/a", 0.5), ("id-ood/a", 0.4)]
    for kwargs, message in [
        (dict(grid={"gamma": [0.5]}, named={"a": {}}), "not both"),
        (dict(grid={"gamma": [0.5]}, seeds=(1,)), "describe named points"),
        (dict(named={"a": {"gama": 0.5}}), "unknown option 'gama'"),
        (dict(named={"a/b": {}}), "not a folder name"),
    ]:
        with pytest.raises(ValueError, match=message):
            StudySpec({"preset": "tiny"}, **kwargs)
    with pytest.raises(ValueError, match="named point 'a'"):
        StudySpec({"preset": "tiny"}, named={"a": {"gamma": -1.0}}).jobs(tmp_path)


def test_a_spec_is_one_of_two_forms_each_with_only_its_own_fields() -> None:
    """``StudySpec(base, grid)`` is a ``GridSpec``, ``StudySpec(base, named=...)`` a ``NamedSpec``;
    neither form has the other's fields (a grid cannot be given seeds), and each reads the
    other's as not given."""
    from dataclasses import fields

    from training.studies.study import NAMED_ONLY, GridSpec, NamedSpec

    grid = StudySpec({"preset": "tiny"}, {"gamma": [0.5, 0.8]})
    named = StudySpec.reproduction("tiny", (1,))
    assert type(grid) is GridSpec and type(named) is NamedSpec and isinstance(named, StudySpec)
    assert {f.name for f in fields(GridSpec)} == {"base", "grid", "description"}
    assert {f.name for f in fields(NamedSpec)} == {"base", "named", "description", *NAMED_ONLY}
    assert (grid.seeds, grid.protocol, dict(named.grid)) == ((), "strict", {})
    assert StudySpec.from_dict(grid.to_dict()) == grid and grid.smoke_test() == StudySpec(
        {"preset": "tiny"}, {"gamma": [0.5]}
    )
    with pytest.raises(TypeError, match="seeds"):
        GridSpec({"preset": "tiny"}, {"gamma": [0.5]}, seeds=(1,))


def test_plan_layout_puts_a_seed_where_reproduce_seed_puts_it(tmp_path: Path) -> None:
    plan = StudySpec.reproduction("tiny", (4, 5), protocol="paper", lrs=(1e-3, 2e-3))
    jobs = plan.jobs(tmp_path)
    assert len(jobs) == 2 * 2 * 2 * 2
    base = {j.run_dir for j in jobs if j.lr == 1e-3}  # the tiny preset's own lr: the plain folder
    assert tmp_path / "seed-4" / "symmetric" / "small-init" in base
    assert tmp_path / "seed-5" / "id-ood" / "large-init__lr=0.002" in {j.run_dir for j in jobs}
    job = next(j for j in jobs if j.run_dir == tmp_path / "seed-4" / "symmetric" / "small-init")
    from training.studies.study import regime_config

    assert job.config == regime_config("tiny", "small-init", "symmetric", 4)


# ---------------------------------------------------------------- reproduce --seeds


@pytest.fixture(scope="module")
def population_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("population")
    code = main(
        [
            "reproduce",
            "--preset",
            "tiny",
            "--seeds",
            "1,2,3",
            "--out",
            str(out),
            "--device",
            "cpu",
            "--quiet",
            "--workers",
            "1",
        ]
    )
    assert code == 0
    return out


def test_reproduce_seeds_writes_rows_and_a_population_that_counts_them(population_out: Path) -> None:
    summary = json.loads((population_out / "summary.json").read_text())
    assert summary["protocol"] == "strict" and summary["seeds"] == [1, 2, 3]
    rows = summary["per_seed"]
    assert [r["seed"] for r in rows] == [1, 2, 3]
    for name, rate in summary["population"].items():
        assert rate["of"] == 3
        assert rate["met"] == sum(r["criteria"][name] for r in rows), name
        assert rate["interval"] == pytest.approx(list(exact_interval(rate["met"], 3)))
    for row in rows:  # each row repeats its run folders' final metrics
        metrics = json.loads(
            (population_out / f"seed-{row['seed']}" / "id-ood" / "large-init" / "metrics.json").read_text()
        )
        assert row["runs"]["id-ood"]["large-init"]["ood_acc"] == metrics["final"]["ood_acc"]
        config = json.loads(
            (population_out / f"seed-{row['seed']}" / "symmetric" / "small-init" / "config.json").read_text()
        )
        assert config["seed"] == row["seed"]


def test_reproduce_seeds_rerun_resumes_and_one_seed_is_a_plain_reproduction(population_out: Path) -> None:
    weights = sorted(population_out.glob("seed-*/*/*/model.safetensors"))
    assert len(weights) == 12
    before = {p: p.stat().st_mtime_ns for p in weights}
    summary = json.loads((population_out / "summary.json").read_text())
    assert (
        main(
            [
                "reproduce",
                "--preset",
                "tiny",
                "--seeds",
                "1,2,3",
                "--out",
                str(population_out),
                "--device",
                "cpu",
                "--quiet",
            ]
        )
        == 0
    )
    assert json.loads((population_out / "summary.json").read_text())["population"] == summary["population"]
    # `reproduce --seed 2 --out DIR/seed-2` finds its four runs done, and agrees with DIR/seed-2/summary.json
    single = reproduce("tiny", 2, population_out / "seed-2", device="cpu", progress=False, workers=1)
    assert json.loads(json.dumps(single.to_dict())) == json.loads(
        (population_out / "seed-2" / "summary.json").read_text()
    )
    assert {p: p.stat().st_mtime_ns for p in weights} == before


def test_both_protocols_read_one_folder_and_keep_their_summaries(population_out: Path, tmp_path: Path) -> None:
    """The paper protocol over the preset's own lr reads the strict population's runs
    (nothing retrained) and its summary sits beside the strict one."""
    import shutil

    out = tmp_path / "both"
    shutil.copytree(population_out, out)
    weights = {p: p.stat().st_mtime_ns for p in out.glob("seed-*/*/*/model.safetensors")}
    strict = json.loads((out / "summary.json").read_text())
    assert json.loads((out / "summary-strict.json").read_text()) == strict
    lr = str(json.loads((out / "seed-1" / "symmetric" / "small-init" / "config.json").read_text())["train"]["lr"])
    args = [
        "reproduce",
        "--preset",
        "tiny",
        "--seeds",
        "1,2,3",
        "--protocol",
        "paper",
        "--lrs",
        lr,
        "--out",
        str(out),
        "--device",
        "cpu",
        "--quiet",
    ]
    assert main(args) == 0
    assert {p: p.stat().st_mtime_ns for p in out.glob("seed-*/*/*/model.safetensors")} == weights
    paper = json.loads((out / "summary-paper.json").read_text())
    assert paper["protocol"] == "paper" and json.loads((out / "summary.json").read_text()) == paper
    assert json.loads((out / "summary-strict.json").read_text()) == strict
    # the paper protocol's pick is the best evaluated epoch, never below the final one
    for s_row, p_row in zip(strict["per_seed"], paper["per_seed"], strict=True):
        assert p_row["runs"]["id-ood"]["small-init"]["ood_acc"] >= s_row["runs"]["id-ood"]["small-init"]["ood_acc"]


def test_population_report_shows_the_population(population_out: Path) -> None:
    page = (population_out / "report.html").read_text()
    assert "a population of 3 seeds" in page and PROTOCOL_TEXT["strict"] in page
    from training.studies.report.cells import unpack_scripts

    assert (
        "Population of 3 seeds" in unpack_scripts(page)["figures"]
    )  # the dot figure's title, in the page's packed figures
    assert (
        "small-init inferential &gt;= 0.8 whatever (3,4) does" in page
    )  # the reading beside the strict criterion (escaped by to_html)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seed", "1", "--seeds", "1,2"], "not both"),
        (["--seeds", "1,x"], "comma-separated list of ints"),
        (["--seeds", "1,2", "--protocol", "paper"], "give --lrs"),
        (["--lrs", "1e-4"], "give --seeds"),
        (["--seeds", "1,2", "--protocol", "paper", "--lrs", "1e-4,-2"], "finite positive"),
        (["--logged-every", "3"], "give --seeds"),
        (["--seeds", "1,2", "--logged-every", "3"], "give --protocol paper"),
        (
            ["--seeds", "1,2", "--protocol", "paper", "--lrs", "1e-4", "--logged-every", "0"],
            "--logged-every must be an integer >= 1",
        ),
    ],
)
def test_reproduce_population_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["reproduce", "--preset", "tiny", "--out", str(tmp_path / "x"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_single_seed_says_it_is_one_draw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import training.cli as rep
    import training.studies.report as report

    fake = Population("tiny", "strict", (_seed_row(5, 0.9, 0.9, 0.6, 0.1),))
    monkeypatch.setattr(rep, "train_study", lambda *a, **k: (fake, []))
    monkeypatch.setattr(report, "write_report", lambda dirs, path: path)
    assert main(["reproduce", "--preset", "tiny", "--seed", "5", "--out", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "this is one draw (seed 5)" in out and "--seeds" in out


# ---------------------------------------------------------------- the paper protocol on run folders


@pytest.mark.slow
def test_reproduce_paper_protocol_reads_the_best_lr_and_epoch(tmp_path: Path) -> None:
    out = tmp_path / "paper"
    args = [
        "reproduce",
        "--preset",
        "tiny",
        "--seeds",
        "7",
        "--protocol",
        "paper",
        "--lrs",
        "1e-3,3e-3",
        "--out",
        str(out),
        "--device",
        "cpu",
        "--quiet",
        "--workers",
        "1",
    ]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["protocol"] == "paper" and summary["lrs"] == [1e-3, 3e-3]
    row = summary["per_seed"][0]["runs"]["symmetric"]["small-init"]
    folders = [out / "seed-7" / "symmetric" / "small-init", out / "seed-7" / "symmetric" / "small-init__lr=0.003"]
    assert row["run_dirs"] == [str(f) for f in folders]
    # independently: the highest ID accuracy over both folders' evaluated epochs, and where
    best = max(
        (rec["id_acc"], json.loads((f / "config.json").read_text())["train"]["lr"], rec["epoch"])
        for f in folders
        for rec in json.loads((f / "metrics.json").read_text())["history"]
        if "id_acc" in rec
    )
    assert row["id_acc"] == best[0]
    assert row["picked"]["id_acc"]["epoch"] == best[2]
    assert not (out / "seed-7" / "summary.json").exists()  # no single-seed summary under paper


# ---------------------------------------------------------------- sweeps under a protocol


@pytest.fixture(scope="module")
def lr_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from training.studies.study import StudySpec
    from training.studies.sweep import SweepOptions, run_sweep

    out = tmp_path_factory.mktemp("lr_sweep")
    spec = StudySpec({"preset": "tiny", "task": "id-ood"}, {"gamma": [0.5, 0.8], "lr": [1e-3, 3e-3]})
    run_sweep(spec, out, SweepOptions(workers=1, threads=1, progress=False))
    return out


def test_strict_protocol_refuses_an_lr_grid_and_paper_takes_epoch_maxima(lr_sweep: Path) -> None:
    from training.studies.sweep import load_results

    df = load_results(lr_sweep)
    with pytest.raises(ValueError, match="strict protocol reads one learning rate"):
        protocol_table(df, lr_sweep, "strict")
    paper = protocol_table(df, lr_sweep, "paper").set_index("run")
    for run in df["run"]:
        history = json.loads((lr_sweep / run / "metrics.json").read_text())["history"]
        assert paper.loc[run, "ood_acc"] == max(r["ood_acc"] for r in history if "ood_acc" in r)
    assert protocol_table(df[df["lr"] == 1e-3], lr_sweep, "strict") is not None  # one lr: strict reads it


def test_phase_diagram_names_its_protocol(lr_sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["phase-diagram", str(lr_sweep), "--figure", "journal_fig3b"]) == 2
    assert "--protocol paper" in capsys.readouterr().err
    assert main(["phase-diagram", str(lr_sweep), "--figure", "journal_fig3b", "--protocol", "paper"]) == 0
    page = (lr_sweep / "phase_diagram.html").read_text()
    assert PROTOCOL_TEXT["paper"] in page and "Phase diagrams (paper protocol)" in page
    assert main(["phase-diagram", str(lr_sweep), "--figure", "journal_fig3b", "--logged-every", "2"]) == 2
    assert "give --protocol paper" in capsys.readouterr().err
    out = lr_sweep / "logged.html"
    assert (
        main(
            [
                "phase-diagram",
                str(lr_sweep),
                "--figure",
                "journal_fig3b",
                "--protocol",
                "paper",
                "--logged-every",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert protocol_text("paper", 2) in out.read_text()


def test_paper_protocol_on_a_sweep_reads_only_the_logged_epochs(lr_sweep: Path) -> None:
    from training.studies.sweep import load_results

    df = load_results(lr_sweep)
    logged = protocol_table(df, lr_sweep, "paper", logged_every=2).set_index("run")  # 3 epochs: only epoch 2 is logged
    for run in df["run"]:
        history = json.loads((lr_sweep / run / "metrics.json").read_text())["history"]
        assert logged.loc[run, "ood_acc"] == next(r["ood_acc"] for r in history if r["epoch"] == 2)


# ---------------------------------------------------------------- init and data seeded apart


def _derived(seed: int, name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little") >> 1


def test_default_seeds_and_config_are_unchanged() -> None:
    cfg = make_run_config("tiny", seed=9)
    assert cfg.seeds == {
        name: _derived(9, name) for name in ("init", "data.train", "data.id_test", "data.heldout", "shuffle")
    }
    assert "init_seed" not in cfg.to_dict() and "data_seed" not in cfg.to_dict()
    fixed = cfg.with_options(data_seed=4)
    assert RunConfig.from_dict(json.loads(json.dumps(fixed.to_dict()))) == fixed
    with pytest.raises(ValueError, match="init_seed must be a non-negative integer or None"):
        cfg.with_options(init_seed=-1)


def test_vary_init_keeps_the_data_and_vary_data_keeps_the_init() -> None:
    from interp_init.model import build_model
    from training.trainer.loop import make_run_data

    def draw(cfg: RunConfig) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        model = build_model(cfg.model, cfg.init, cfg.seeds["init"])
        perm = torch.randperm(cfg.data.n_train, generator=torch.Generator().manual_seed(cfg.seeds["shuffle"])).tolist()[
            :20
        ]
        return model.W_E.detach().clone(), make_run_data(cfg).train.tokens, perm

    plan_init = StudySpec.reproduction("tiny", (1, 2), vary="init", fixed_seed=7)
    a, b = (make_run_config("tiny", seed=s, **plan_init.seed_overrides()) for s in (1, 2))
    (wa, ta, pa), (wb, tb, pb) = draw(a), draw(b)
    assert not torch.equal(wa, wb) and torch.equal(ta, tb) and pa == pb
    plan_data = StudySpec.reproduction("tiny", (1, 2), vary="data", fixed_seed=7)
    c, d = (make_run_config("tiny", seed=s, **plan_data.seed_overrides()) for s in (1, 2))
    (wc, tc, pc), (wd, td, pd) = draw(c), draw(d)
    assert torch.equal(wc, wd) and not torch.equal(tc, td) and pc != pd
    assert plan_init.member_dir("DIR", 2) == Path("DIR/init-2_data-7")


def test_a_sweep_varies_the_init_seed_alone() -> None:
    from training.studies.study import StudySpec

    points = StudySpec({"preset": "tiny", "seed": 3}, {"init_seed": [1, 2]}).points()
    assert [p.name for p in points] == ["init_seed=1", "init_seed=2"]
    assert points[0].config.seeds["data.train"] == points[1].config.seeds["data.train"] == _derived(3, "data.train")
    assert points[0].config.seeds["init"] == _derived(1, "init")


@pytest.mark.slow
def test_the_gpu_path_trains_each_tasks_runs_as_one_ensemble(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU a population trains as ensembles of same-shape runs; the same path on the CPU
    here: one ensemble per task (its regimes and seeds), folders a rerun reads."""
    import training.launch.folders as folders
    from training.launch import EnsembleLauncher, run_study

    sizes = []
    real = folders.fit_ensemble
    monkeypatch.setattr(folders, "fit_ensemble", lambda cfgs, *a, **kw: sizes.append(len(cfgs)) or real(cfgs, *a, **kw))
    plan = StudySpec.reproduction("tiny", (1, 2))
    jobs = plan.jobs(tmp_path)
    assert {r.status for r in run_study(jobs, tmp_path, EnsembleLauncher(device="cpu"))} == {"completed"}
    assert sizes == [4, 4]  # symmetric (neurips model) and id-ood (journal model): 2 regimes x 2 seeds each
    population = read_population(plan, tmp_path)
    assert all(r.status == "completed" for row in population.rows for r in row.results)
    weights = {p: p.stat().st_mtime_ns for p in tmp_path.glob("seed-*/*/*/model.safetensors")}
    assert len(weights) == 8
    assert {r.status for r in run_study(jobs, tmp_path, EnsembleLauncher(device="cpu"))} == {"completed"}
    assert {p: p.stat().st_mtime_ns for p in weights} == weights


def test_report_parts_say_one_draw_outside_a_population(population_out: Path, tmp_path: Path) -> None:
    import shutil

    from training.studies.report.outcomes import population_parts

    class _Run:  # population_parts reads only where a run sits
        def __init__(self, path: Path) -> None:
            self.record = SimpleNamespace(path=path)

    inside = [_Run(population_out / "seed-1" / "symmetric" / "small-init")]
    text, figure = population_parts(inside)  # type: ignore[arg-type]
    assert "a population of 3 seeds" in text and figure is not None and "one draw (one seed)" not in text
    single = tmp_path / "single"
    shutil.copytree(population_out / "seed-1", single)  # a plain `reproduce --seed 1` folder
    text, figure = population_parts([_Run(single / "symmetric" / "small-init")])  # type: ignore[arg-type]
    assert "one draw (one seed)" in text and "--seeds" in text and figure is None


def test_a_population_takes_the_tasks_it_is_given(tmp_path: Path) -> None:
    from training.studies.population import reproduction_spec

    plan = reproduction_spec("tiny", None, "1,2", tasks=("symmetric",))
    assert {j.task for j in plan.jobs(tmp_path)} == {"symmetric"} and len(plan.jobs(tmp_path)) == 4
    with pytest.raises(ValueError, match="no small-init / large-init flip"):
        StudySpec.reproduction("tiny", (1,), tasks=("complexity",))
