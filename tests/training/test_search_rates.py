"""experiments/search_cpu.py rates: candidates judged by rates over seeds, with exact intervals."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from click.testing import CliRunner
from scipy.stats import beta

from training import make_run_config

ROOT = Path(__file__).resolve().parents[2]


def _search_cli():
    spec = importlib.util.spec_from_file_location("search_cpu", ROOT / "experiments" / "search_cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.cli


def _run(folder: Path, task: str, seed: int, final: dict, status: str = "completed", **seeds: int) -> None:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(
        json.dumps(make_run_config("tiny", task=task, seed=seed, epochs=1, **seeds).to_dict())
    )  # the metrics' one epoch
    final = {"epoch": 1, "step": 1, "loss": 0.1, "lr": 1e-3, "train_acc": 1.0, "per_pair": {}, **final}
    (folder / "metrics.json").write_text(json.dumps({"status": status, "final": final, "history": [final]}))


def _symmetric(id_acc: float, inferential: float, exception: float = 1.0) -> dict:
    return {
        "id_acc": id_acc,
        "per_pair": {"3,4": exception},
        "heldout": {"4,3": {"inferential": inferential, "symmetric": 1 - inferential}},
    }


def _ood(id_acc: float, ood_acc: float) -> dict:
    return {"id_acc": id_acc, "ood_acc": ood_acc, "commutativity": 0.5}


def test_rates_count_seeds_per_criterion_with_exact_intervals(tmp_path: Path) -> None:
    sym = tmp_path / "sym"
    _run(sym / "seed=0", "symmetric", 0, _symmetric(0.98, 0.94))  # fits and infers
    _run(sym / "seed=1", "symmetric", 1, _symmetric(0.66, 0.90))  # infers, not fitted
    _run(sym / "seed=2", "symmetric", 2, _symmetric(1.00, 0.00))  # fits, copies
    _run(sym / "seed=3", "symmetric", 3, _symmetric(1.00, 1.00), status="running")  # not counted
    _run(
        sym / "seed=4", "symmetric", 4, _symmetric(0.93, 0.85, exception=0.2)
    )  # infers without the exception (3,4) fitted: fails
    ood = tmp_path / "ood"
    _run(ood / "seed=0", "id-ood", 0, _ood(0.99, 0.12))
    _run(ood / "seed=1", "id-ood", 1, _ood(0.99, 0.84))
    result = CliRunner().invoke(_search_cli(), ["rates", f"{sym}:small-init", f"{ood}:large-init"])
    assert result.exit_code == 0, result.output
    rows = [line.split(" | ") for line in result.output.splitlines()[2:]]

    def interval(k: int, n: int) -> str:
        low = 0.0 if k == 0 else beta.ppf(0.025, k, n - k + 1)
        high = 1.0 if k == n else beta.ppf(0.975, k + 1, n - k)
        return f"{k} of {n} [{low:.2f}, {high:.2f}]"

    assert rows[0][1:5] == ["symmetric", "small-init", "4", interval(3, 4)]
    assert rows[0][6:8] == [interval(2, 4), interval(1, 4)]
    # beside it, the same without the (3,4) condition: seed 4 (0.85 with (3,4) at 0.2) counts there
    assert rows[1][5].startswith("small-init inferential >= 0.8 whatever (3,4) does") and rows[1][6:8] == [
        interval(3, 4),
        interval(2, 4),
    ]
    assert rows[2][1:5] == ["id-ood", "large-init", "2", interval(2, 2)]
    assert rows[2][6:8] == [interval(1, 2), interval(1, 2)]


def test_rates_refuses_a_folder_without_its_regime(tmp_path: Path) -> None:
    result = CliRunner().invoke(_search_cli(), ["rates", str(tmp_path)])
    assert result.exit_code == 2 and "SWEEP_DIR:small-init" in result.output


def test_rates_name_the_source_a_population_varies(tmp_path: Path) -> None:
    """A sweep over ``init_seed`` (the data fixed by ``seed``) names each row by both seeds."""
    vary = tmp_path / "vary"
    _run(vary / "init_seed=1", "symmetric", 0, _symmetric(1.00, 0.00), init_seed=1)
    _run(vary / "init_seed=2", "symmetric", 0, _symmetric(0.98, 0.87), init_seed=2)
    result = CliRunner().invoke(_search_cli(), ["rates", f"{vary}:small-init"])
    assert result.exit_code == 0, result.output
    per_seed = result.output.splitlines()[2].split(" | ")[-1]
    assert per_seed == "init 1 data 0: no (ID 1.00), init 2 data 0: yes (ID 0.98) |"


def test_rates_read_one_cell_of_a_sweep_by_a_glob(tmp_path: Path) -> None:
    """``SWEEP_DIR:REGIME:GLOB`` counts only the run folders whose names match (a gamma x seed sweep)."""
    sweep = tmp_path / "sweep"
    _run(sweep / "gamma=0.4__seed=1", "id-ood", 1, _ood(0.99, 0.12))
    _run(sweep / "gamma=0.4__seed=2", "id-ood", 2, _ood(0.98, 0.84))
    _run(sweep / "gamma=0.8__seed=1", "id-ood", 1, _ood(0.99, 0.70))
    result = CliRunner().invoke(
        _search_cli(), ["rates", f"{sweep}:large-init:gamma=0.4__*", f"{sweep}:small-init:gamma=0.8__*"]
    )
    assert result.exit_code == 0, result.output
    rows = [line.split(" | ") for line in result.output.splitlines()[2:]]
    assert (
        rows[0][0] == "| sweep (gamma=0.4__*)" and rows[0][3] == "2" and rows[0][6].startswith("1 of 2")
    )  # OOD <= 0.3 on seed 1 only
    assert (
        rows[1][0] == "| sweep (gamma=0.8__*)" and rows[1][3] == "1" and rows[1][6].startswith("1 of 1")
    )  # OOD >= 0.5
    bad = CliRunner().invoke(_search_cli(), ["rates", f"{sweep}:medium-init:gamma=0.4__*"])
    assert bad.exit_code == 2 and ":GLOB" in bad.output
