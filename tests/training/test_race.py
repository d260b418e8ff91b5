"""The race of (3,4) against (4,3) on synthetic histories (training/studies/records.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interp_init.tasks.base import EpochRecord, read_run_metrics
from interp_init.tasks.registry import make_task
from training.studies.records import Race, epoch_shares, race_of, race_of_record
from training.studies.records import RunRecord


def _rec(epoch: int, lr: float, exception: float, inf: float, sym: float, id_acc: float = 0.99) -> dict:
    return {
        "epoch": epoch,
        "step": 10 * epoch,
        "loss": 1.0 / epoch,
        "lr": lr,
        "train_acc": id_acc,
        "id_acc": id_acc,
        "per_pair": {"3,4": exception, "1,1": 1.0},
        "heldout": {"4,3": {"inferential": inf, "symmetric": sym}},
    }


def _history(records: list[dict]) -> tuple[EpochRecord, ...]:
    """The typed history a run record reads from these ``metrics.json`` entries."""
    return read_run_metrics(make_task("symmetric"), {"history": records}).history


#: Seed A of issue 31: (3,4) fitted at epoch 5, inferential rises to 0.69 and freezes once the lr is low.
UNDER_TRAINED = [
    _rec(1, 5e-4, 0.1, 0.05, 0.0, 0.3),
    _rec(2, 4.9e-4, 0.5, 0.1, 0.0, 0.6),
    _rec(3, 4.6e-4, 0.7, 0.2, 0.0, 0.8),
    _rec(4, 4e-4, 0.85, 0.3, 0.0, 0.9),
    _rec(5, 3.4e-4, 0.93, 0.34, 0.0),
    _rec(6, 2.6e-4, 0.97, 0.46, 0.0),
    _rec(7, 1.8e-4, 0.99, 0.60, 0.0),
    _rec(8, 1.1e-4, 1.0, 0.69, 0.0),
    _rec(9, 6e-5, 1.0, 0.70, 0.0),
    _rec(10, 3.5e-5, 1.0, 0.69, 0.0),
    _rec(11, 2.6e-5, 1.0, 0.69, 0.0),
    _rec(12, 2.5e-5, 1.0, 0.69, 0.0),
]


def test_under_trained_run_by_hand() -> None:
    race = race_of(_history(UNDER_TRAINED))
    assert race.fit_epoch == 5  # the first epoch with (3,4) >= 0.9
    assert (race.inferential_at_fit, race.symmetric_at_fit) == (0.34, 0.0)
    assert (race.inferential_end, race.symmetric_end) == (0.69, 0.0)
    # 0.60 at epoch 7 is more than 0.05 from the final 0.69; 0.69 at epoch 8 and everything after is within it
    assert race.settled_epoch == 8 and race.lr_at_settled == 1.1e-4 and race.peak_lr == 5e-4
    assert race.lr_high is True and not race.still_moving  # 1.1e-4 > 5e-5
    assert race.mode == "neither"
    late = race_of(_history(UNDER_TRAINED), peak_lr=2e-3)  # a tenth of this peak is 2e-4: the decay froze it
    assert late.lr_high is False and late.mode == "under-trained"


def test_early_copy_infers_never_fits_and_still_moving() -> None:
    copy = race_of(
        _history([_rec(1, 5e-4, 0.4, 0.0, 0.3, 0.7), _rec(2, 4e-4, 0.99, 0.0, 0.99), _rec(3, 1e-4, 1.0, 0.0, 1.0)])
    )
    assert (copy.fit_epoch, copy.symmetric_at_fit, copy.mode, copy.settled_epoch) == (2, 0.99, "early copy", 2)
    assert copy.copy_epoch == 2 and race_of(_history(UNDER_TRAINED)).copy_epoch is None  # symmetric first >= 0.8; never
    infers = race_of(
        _history([_rec(1, 5e-4, 0.95, 0.5, 0.1), _rec(2, 4e-4, 0.99, 0.85, 0.0), _rec(3, 4e-5, 1.0, 0.86, 0.0)])
    )
    assert (infers.fit_epoch, infers.inferential_at_fit, infers.mode) == (1, 0.5, "infers")
    never = race_of(
        _history([_rec(1, 5e-4, 0.2, 0.7, 0.0), _rec(2, 4e-4, 0.5, 0.9, 0.0), _rec(3, 1e-4, 0.6, 0.9, 0.0)])
    )
    assert never.fit_epoch is None and never.inferential_at_fit is None and not never.fitted
    assert never.mode == "under-trained"  # inferential 0.9 but (3,4) never fitted: not inferring
    moving = race_of(
        _history([_rec(1, 5e-4, 0.95, 0.1, 0.0), _rec(2, 4e-4, 0.99, 0.3, 0.0), _rec(3, 3e-4, 1.0, 0.5, 0.0)])
    )
    assert moving.still_moving and moving.settled_epoch == 3 and moving.mode == "under-trained"


def test_epochs_without_evaluation_and_empty_history() -> None:
    history = [
        _rec(1, 5e-4, 0.95, 0.1, 0.0),
        {"epoch": 2, "step": 20, "loss": 0.5, "lr": 4e-4},
        _rec(3, 1e-4, 1.0, 0.1, 0.0),
    ]
    race = race_of(_history(history))
    assert race.settled_epoch == 1 and race.last_epoch == 3 and race.peak_lr == 5e-4
    assert epoch_shares(_history(history)) == ([1, 3], [0.1, 0.1], [0.0, 0.0])
    empty = race_of(())
    assert (
        empty == Race(None, None, None, None, None, None, None, None, False, None, None)
        and empty.mode == "under-trained"
    )
    with pytest.raises(ValueError, match="copy_epoch 4 must lie in 1..3"):
        Race(1, 0.0, 0.0, 0.0, 0.9, 3, 1e-4, 5e-4, False, 0.99, 3, copy_epoch=4)
    with pytest.raises(ValueError, match="tolerance"):
        race_of(_history(history), tolerance=1.5)


def test_race_of_record_reads_the_history_and_the_config_peak(tmp_path: Path) -> None:
    from training import make_run_config

    for name, task, history in (("sym", "symmetric", UNDER_TRAINED), ("fresh", "symmetric", []), ("ood", "id-ood", [])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(
            json.dumps(make_run_config("tiny", task=task, lr=2e-3, epochs=12).to_dict())
        )
        (tmp_path / name / "metrics.json").write_text(
            json.dumps({"status": "running", "final": {}, "history": history})
        )
    race = race_of_record(RunRecord.read(tmp_path / "sym"))
    assert race is not None and race.peak_lr == 2e-3 and race.mode == "under-trained"
    assert race.to_dict()["mode"] == "under-trained" and race.to_dict()["lr_high"] is False
    assert Race.from_dict(race.to_dict()) == race
    assert race_of_record(RunRecord.read(tmp_path / "fresh")) is None  # no evaluated epoch yet
    assert race_of_record(RunRecord.read(tmp_path / "ood")) is None  # a task without the race


def _script(name: str):
    """The module of ``experiments/<name>.py`` (the experiments folder is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).resolve().parents[2] / "experiments" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_run(folder: Path, config: dict, status: str, history: list[dict]) -> None:
    """A synthetic run folder: its config, its metrics (a completed run's final metrics are its
    last epoch's) and, for a completed run, a weights file as a finished run's folder holds."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    final = (
        {k: v for k, v in history[-1].items() if k not in ("epoch", "step", "loss", "lr")}
        if status == "completed"
        else {}
    )
    (folder / "metrics.json").write_text(json.dumps({"status": status, "final": final, "history": history}))
    if status == "completed":
        (folder / "model.safetensors").write_bytes(b"")


def _table_rows(output: str, n: int) -> list[dict[str, str]]:
    """The first ``n`` rows of the markdown table that opens ``output``, keyed by its header."""
    lines = output.splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(head, (c.strip() for c in line.strip("|").split("|")), strict=True)) for line in lines[2 : 2 + n]]


def test_experiments_race_prints_one_row_per_run(tmp_path: Path) -> None:
    """experiments/race.py over a tiny synthetic sweep folder: one row per symmetric run, the
    grid's knobs, the race's numbers and the mode ("so far" while a run trains)."""
    from click.testing import CliRunner

    from training import make_run_config

    module = _script("race")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(
        json.dumps({"base": {"preset": "tiny"}, "grid": {"weight_decay": [0.1, 1.0], "seed": [1, 2]}})
    )
    runs = {
        "seed=1__weight_decay=0.1": (1, 0.1, "completed", UNDER_TRAINED),
        "seed=2__weight_decay=1.0": (
            2,
            1.0,
            "running",
            [_rec(1, 5e-4, 0.4, 0.0, 0.3, 0.7), _rec(2, 4e-4, 0.99, 0.0, 0.99)],
        ),
    }
    for name, (seed, wd, status, history) in runs.items():
        _write_run(
            sweep / name,
            make_run_config("tiny", task="symmetric", seed=seed, weight_decay=wd, lr=5e-4, epochs=12).to_dict(),
            status,
            history,
        )
    result = CliRunner().invoke(module.main, [str(sweep)])
    assert result.exit_code == 0, result.output
    rows = _table_rows(result.output, 2)
    assert rows[0]["seed"] == "1" and rows[0]["knobs"] == "weight_decay=0.1" and rows[0]["(3,4) fit epoch"] == "5"
    assert rows[0]["inf / sym at fit"] == "0.34 / 0.00" and rows[0]["inf / sym at end"] == "0.69 / 0.00"
    assert rows[0]["stopped moving"] == "8" and rows[0]["lr > peak/10"] == "yes" and rows[0]["mode"] == "neither"
    assert (
        rows[1]["knobs"] == "weight_decay=1.0"
        and rows[1]["(3,4) fit epoch"] == "2"
        and rows[1]["mode"] == "early copy so far"
    )
    assert "neither: 1 (of 1 completed runs)" in result.output


def test_experiments_race_cells_across_two_sweeps(tmp_path: Path) -> None:
    """``--cells`` with ``--knob``: a grid split in two sweep folders by lr is grouped into
    cells by the named options; per cell the copy count with its exact interval, the modes
    and each seed's fit -> copy; the phase diagram has one marker per completed run."""
    from click.testing import CliRunner

    from training import make_run_config

    module = _script("race")
    copy = [_rec(1, 5e-4, 0.4, 0.0, 0.3, 0.7), _rec(2, 4e-4, 0.95, 0.0, 0.85), _rec(3, 1e-4, 1.0, 0.0, 1.0)]
    late_copy = [_rec(1, 5e-4, 0.95, 0.1, 0.2), _rec(2, 4e-4, 0.99, 0.1, 0.5), _rec(3, 1e-4, 1.0, 0.0, 0.9)]
    neither = [_rec(1, 5e-4, 0.95, 0.3, 0.0), _rec(2, 4e-4, 1.0, 0.4, 0.1), _rec(3, 1e-4, 1.0, 0.4, 0.1)]
    runs = {  # folder: {run: (seed, gamma, status, history)}
        "lr-low": {
            "gamma=0.8__seed=1": (1, 0.8, "completed", copy),
            "gamma=0.8__seed=2": (2, 0.8, "completed", neither),
            "gamma=0.8__seed=3": (3, 0.8, "running", copy[:2]),
        },
        "lr-high": {
            "gamma=0.8__seed=1": (1, 0.8, "completed", late_copy),
            "gamma=0.8__seed=2": (2, 0.8, "completed", copy),
        },
    }
    for folder, lr in (("lr-low", 2.5e-4), ("lr-high", 5e-4)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "sweep.json").write_text(
            json.dumps({"base": {"preset": "tiny", "lr": lr}, "grid": {"gamma": [0.8], "seed": [1, 2, 3]}})
        )
        for name, (seed, gamma, status, history) in runs[folder].items():
            config = make_run_config("tiny", task="symmetric", seed=seed, gamma=gamma, lr=lr, epochs=3).to_dict()
            _write_run(tmp_path / folder / name, config, status, history)
    folders = [str(tmp_path / "lr-low"), str(tmp_path / "lr-high")]
    result = CliRunner().invoke(module.main, [*folders, "--knob", "lr", "--knob", "gamma", "--cells"])
    assert result.exit_code == 0, result.output
    runs_table = _table_rows(result.output, 5)
    assert [r["copy epoch"] for r in runs_table] == ["2", "-", "2", "3", "2"]
    cells_table = _table_rows(result.output.split("\n\n")[-1], 2)
    assert (
        cells_table[0]["cell"] == "lr=0.00025, gamma=0.8" and cells_table[0]["runs"] == "2"
    )  # the running seed 3 is left out
    assert cells_table[0]["copy"] == "1/2 [0.01, 0.99]" and cells_table[0]["modes"] == "early copy 1, neither 1"
    assert cells_table[0]["fit -> copy (seed)"] == "2 -> 2 (1), 1 -> - (2)"
    assert (
        cells_table[1]["copy"] == "2/2 [0.16, 1.00]"
        and cells_table[1]["fit -> copy (seed)"] == "1 -> 3 (1), 2 -> 2 (2)"
    )
    fig = module.race_diagram(module.race_rows([tmp_path / "lr-low", tmp_path / "lr-high"], ("lr", "gamma")))
    markers = [(t.name, x, y) for t in fig.data if t.mode == "markers+text" for x, y in zip(t.x, t.y, strict=True)]
    assert sorted(markers) == sorted(
        [("early copy", 2, 2), ("neither", 1, 4), ("early copy", 1, 3), ("early copy", 2, 2)]
    )  # never = epoch 4
    unknown = CliRunner().invoke(module.main, [*folders, "--knob", "lrr"])
    assert unknown.exit_code == 2 and "--knob 'lrr' is not an option" in unknown.output
    (tmp_path / "taken.png").write_bytes(b"")
    taken = CliRunner().invoke(module.main, [*folders, "--figure", str(tmp_path / "taken.png")])
    assert taken.exit_code == 2 and "is never overwritten" in taken.output
    gif = CliRunner().invoke(module.main, [*folders, "--figure", str(tmp_path / "race.gif")])
    assert gif.exit_code == 2 and "name a .png, .svg or .pdf file" in gif.output


def test_population_table_shows_the_race(tmp_path: Path) -> None:
    """A strict population's per-seed table carries each symmetric regime's (3,4)-fit epoch and mode."""
    from training import make_run_config
    from training.studies.population import Population, SeedRow, regime_result

    def folder(name: str, task: str, history: list[dict]) -> Path:
        path = tmp_path / name
        path.mkdir()
        (path / "config.json").write_text(
            json.dumps(make_run_config("tiny", task=task, lr=5e-4, epochs=len(history)).to_dict())
        )
        (path / "metrics.json").write_text(
            json.dumps({"status": "completed", "final": history[-1], "history": history})
        )
        return path

    never = [_rec(1, 5e-4, 0.2, 0.7, 0.0), _rec(2, 1e-4, 0.5, 0.9, 0.0)]
    copy = [_rec(1, 5e-4, 0.95, 0.0, 0.9), _rec(2, 1e-4, 1.0, 0.0, 1.0)]
    ood = {
        "epoch": 1,
        "loss": 1.0,
        "lr": 5e-4,
        "train_acc": 1.0,
        "id_acc": 1.0,
        "per_pair": {},
        "ood_acc": 0.6,
        "commutativity": 1.0,
    }
    results = (
        regime_result("symmetric", "small-init", 0.8, [folder("s", "symmetric", never)], "strict"),
        regime_result("symmetric", "large-init", 0.5, [folder("l", "symmetric", copy)], "strict"),
        regime_result("id-ood", "small-init", 0.8, [folder("os", "id-ood", [ood])], "strict"),
        regime_result("id-ood", "large-init", 0.4, [folder("ol", "id-ood", [{**ood, "ood_acc": 0.1}])], "strict"),
    )
    population = Population("tiny", "strict", (SeedRow(7, results),))
    table = population.seeds_table().set_index("seed")
    assert (
        table.loc[7, "symmetric small (3,4) fit epoch"] == "never"
        and table.loc[7, "symmetric small mode"] == "under-trained"
    )
    assert (
        table.loc[7, "symmetric large (3,4) fit epoch"] == "1" and table.loc[7, "symmetric large mode"] == "early copy"
    )
    assert (
        table.loc[7, "symmetric small inf"] == 0.9
        and not population.rows[0].checks["symmetric: small-init inferential >= 0.8 with (3,4) fitted"]
    )  # inferential 0.9, but (3,4) never fitted: the criterion fails
    assert "under-trained" in population.format()
    assert population.to_dict()["per_seed"][0]["runs"]["symmetric"]["small-init"]["race"]["mode"] == "under-trained"
    again = Population.from_dict(json.loads(json.dumps(population.to_dict())))  # summary.json read back keeps the race
    assert (
        again.rows[0].result("symmetric", "small-init").race
        == population.rows[0].result("symmetric", "small-init").race
    )


def test_experiments_paper_statistic_takes_each_seeds_best_lr_and_epoch(tmp_path: Path) -> None:
    """experiments/paper_statistic.py over a synthetic seed x lr sweep: per seed the best of each
    target over lrs and epochs, with the lr and epoch it was read at, the (3,4) accuracy at the inferential
    pick, the mean over seeds, the seeds that reach 0.8; a running run is left out."""
    from click.testing import CliRunner

    from training import make_run_config

    module = _script("paper_statistic")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    runs = {  # seed 1: its best inferential (0.9) at lr 2e-4 epoch 1 with (3,4) at 0.5; seed 2: 0.85 at lr 4e-4 epoch 2, (3,4) 0.95
        (1, 2e-4, "completed"): [_rec(1, 2e-4, 0.5, 0.9, 0.0, 0.8), _rec(2, 1e-4, 0.99, 0.2, 0.7, 0.97)],
        (1, 4e-4, "completed"): [_rec(1, 4e-4, 0.3, 0.1, 0.1, 0.5), _rec(2, 2e-4, 0.99, 0.6, 0.3, 0.99)],
        (2, 2e-4, "completed"): [_rec(1, 2e-4, 0.2, 0.1, 0.2, 0.5), _rec(2, 1e-4, 0.6, 0.3, 0.5, 0.9)],
        (2, 4e-4, "completed"): [_rec(1, 4e-4, 0.4, 0.4, 0.0, 0.7), _rec(2, 2e-4, 0.95, 0.85, 0.1, 0.9)],
        (2, 6e-4, "running"): [_rec(1, 6e-4, 1.0, 1.0, 1.0, 1.0)],
    }
    for (seed, lr, status), history in runs.items():
        _write_run(
            sweep / f"lr={lr}__seed={seed}",
            make_run_config("tiny", task="symmetric", seed=seed, lr=lr, epochs=2).to_dict(),
            status,
            history,
        )
    result = CliRunner().invoke(module.main, [str(sweep)])
    assert result.exit_code == 0, result.output
    rows = _table_rows(result.output, 3)
    assert rows[0]["seed"] == "1" and rows[0]["runs"] == "2" and rows[1]["runs"] == "2"
    assert (
        rows[0]["best heldout_inferential"] == "0.90 (lr 0.0002, epoch 1)"
        and rows[0]["(3,4) at the inferential pick"] == "0.50"
    )
    assert (
        rows[0]["best id_acc"] == "0.99 (lr 0.0004, epoch 2)"
        and rows[0]["best heldout_symmetric"] == "0.70 (lr 0.0002, epoch 2)"
    )
    assert (
        rows[1]["best heldout_inferential"] == "0.85 (lr 0.0004, epoch 2)"
        and rows[1]["(3,4) at the inferential pick"] == "0.95"
    )
    assert rows[2]["seed"] == "mean over seeds" and rows[2]["best heldout_inferential"] == "0.88"  # (0.90 + 0.85) / 2
    assert "inferential >= 0.8 at some lr and epoch: 2 of 2 seeds" in result.output
    assert "with (3,4) fitted at that epoch: 1 of 2" in result.output and "1 runs not completed yet" in result.output
    (sweep / "lr=0.0004__seed=1" / "config.json").write_text(
        json.dumps(make_run_config("tiny", task="symmetric", seed=1, lr=4e-4, weight_decay=0.5, epochs=2).to_dict())
    )
    refused = CliRunner().invoke(module.main, [str(sweep)])
    assert refused.exit_code == 1 and "differ in ['weight_decay']" in refused.output


def test_experiments_paper_statistic_reads_only_the_logged_epochs(tmp_path: Path) -> None:
    """--logged-every 3 on a synthetic sweep of 7-epoch runs whose best inferential epoch (4)
    is not one the released scripts log: the statistic is read on epochs 3 and 6 only (7 is
    the last: never logged; 6 = 7 - 1 is logged either way)."""
    from click.testing import CliRunner

    from training import make_run_config

    module = _script("paper_statistic")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    infs = {
        (1, 2e-4): [0.1, 0.2, 0.3, 0.9, 0.4, 0.5, 0.95],
        (1, 4e-4): [0.1, 0.2, 0.35, 0.6, 0.2, 0.1, 0.9],
        (2, 2e-4): [0.0, 0.1, 0.2, 0.85, 0.7, 0.75, 0.8],
    }
    for (seed, lr), values in infs.items():
        history = [_rec(e, lr, 0.99, inf, 0.0) for e, inf in enumerate(values, start=1)]
        _write_run(
            sweep / f"lr={lr}__seed={seed}",
            make_run_config("tiny", task="symmetric", seed=seed, lr=lr, epochs=7).to_dict(),
            "completed",
            history,
        )
    every = _table_rows(CliRunner().invoke(module.main, [str(sweep)]).output, 3)
    assert (
        every[0]["best heldout_inferential"] == "0.95 (lr 0.0002, epoch 7)"
        and every[1]["best heldout_inferential"] == "0.85 (lr 0.0002, epoch 4)"
    )
    result = CliRunner().invoke(module.main, [str(sweep), "--logged-every", "3"])
    assert result.exit_code == 0, result.output
    logged = _table_rows(result.output, 3)
    assert (
        logged[0]["best heldout_inferential"] == "0.50 (lr 0.0002, epoch 6)"
        and logged[1]["best heldout_inferential"] == "0.75 (lr 0.0002, epoch 6)"
    )
    assert logged[2]["best heldout_inferential"] == "0.62"  # (0.50 + 0.75) / 2
    assert "inferential >= 0.8 at some lr and epoch: 0 of 2 seeds" in result.output and "-pae 3" in result.output
    assert CliRunner().invoke(module.main, [str(sweep), "--logged-every", "0"]).exit_code == 2
