"""The failure classes of issue 33's hostile cases, each tested over a list of its
instances, not only the ones first reported:

1. no ``--out`` of any command replaces a file the toolkit wrote for another purpose, a
   file of one's own, or any file inside a run folder (a previous page of the same kind
   is replaced);
2. a folder holding a finished artefact is never trained again from the start;
3. what a user task's ``make_split`` and ``evaluate`` return is checked where it enters;
4. ``metrics.json``'s values are checked where a run is read;
5. no leftovers: stale temporaries of an output are removed by the next write, and
   refused input leaves no folder;
6. folders of runs are never nested in one another (``--out`` itself, below it, above it);
7. a dry run and a check promise only what the real run accepts (file-name lengths);
8. nonsense numbers, lists and sizes are refused;
9. messages name the file and the fix.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

import training
from interp_init import load_model
from interp_init.fileio import NAME_MAX, atomic_write
from interp_init.runfolder import BadRunFile, RunFolder
from interp_init.tasks.base import Samples, Task, TaskMetrics
from training.cli import main
from training.config import make_run_config

_TRAIN = ["train", "--preset", "tiny", "--quiet", "--device", "cpu"]
_SPEC = {"base": {"preset": "tiny", "epochs": 2, "n_train": 500}, "grid": {"seed": [0, 1]}}


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("interp-init: "), err
    return err


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("finished") / "run"
    training.train(make_run_config("tiny", seed=0), run, device="cpu", progress=False)
    return run


@pytest.fixture(scope="module")
def sweep_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    spec = root / "spec.json"
    spec.write_text(json.dumps(_SPEC))
    assert main(["sweep", str(spec), "--out", str(root / "S"), "--device", "cpu", "--quiet"]) == 0
    return root / "S"


@pytest.fixture()
def places(finished: Path, sweep_folder: Path, tmp_path: Path) -> dict[str, Path]:
    """Copies of a run R, a sweep S and a reproduction folder P (its summary), and a plain folder."""
    run = Path(shutil.copytree(finished, tmp_path / "R"))
    sweep = Path(shutil.copytree(sweep_folder, tmp_path / "S"))
    repro = tmp_path / "P"
    repro.mkdir()
    (repro / "summary.json").write_text('{"symmetric": {}}\n')
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.html").write_text("<html><head></head><body>my notes</body></html>")
    (tmp_path / "mine" / "data.csv").write_text("a,b\n1,2\n")
    return {"R": run, "S": sweep, "P": repro, "mine": tmp_path / "mine"}


# ----------------------------------------- 1. no --out replaces what it did not make

#: Files an output page must never replace: (folder, name).
_NOT_MINE = [
    ("R", "model.safetensors"),
    ("R", "metrics.json"),
    ("R", "config.json"),
    ("R", "report.html"),
    ("S", "sweep.json"),
    ("S", "results.csv"),
    ("S", "seed=0/model.safetensors"),
    ("P", "summary.json"),
    ("mine", "notes.html"),
    ("mine", "data.csv"),
]


@pytest.mark.parametrize("command", ["report", "phase-diagram"])
@pytest.mark.parametrize(("where", "name"), _NOT_MINE, ids=["/".join(x) for x in _NOT_MINE])
def test_no_out_replaces_a_file_it_did_not_make(
    command: str, where: str, name: str, places: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    target = places[where] / name
    if not target.exists():  # R/report.html: a name inside a run folder, not there yet
        assert where == "R"
    before = {key: _files(folder) for key, folder in places.items()}
    source = places["R"] if command == "report" else places["S"]
    assert main([command, str(source), "--out", str(target)]) == 2
    err = _one_error_line(capsys)
    assert str(target) in err or str(places["R"]) in err, err
    assert "another --out" in err or "choose an --out" in err, err
    assert {key: _files(folder) for key, folder in places.items()} == before


def test_a_phase_diagram_never_replaces_a_report_and_the_other_way_round(
    places: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "page.html"
    assert main(["report", str(places["R"]), "--out", str(page), "--per-pair", "2"]) == 0
    report = page.read_bytes()
    assert main(["phase-diagram", str(places["S"]), "--out", str(page)]) == 2
    assert "is a report page, not a phase-diagram page" in _one_error_line(capsys)
    assert page.read_bytes() == report
    assert main(["report", str(places["R"]), "--out", str(page), "--per-pair", "2"]) == 0  # the same kind: replaced
    figures = tmp_path / "figures.html"
    assert main(["phase-diagram", str(places["S"]), "--out", str(figures)]) == 0
    assert main(["phase-diagram", str(places["S"]), "--out", str(figures)]) == 0
    assert main(["report", str(places["R"]), "--out", str(figures)]) == 2
    assert "is a phase-diagram page, not a report page" in _one_error_line(capsys)


# ------------------------------------------------- 2. a finished run is never retrained


def _set_status(status: str):  # noqa: ANN202
    def edit(run: Path) -> None:
        metrics = json.loads((run / "metrics.json").read_text())
        (run / "metrics.json").write_text(json.dumps({**metrics, "status": status, "final": {}}))

    return edit


#: What is done to a finished run, and the file the refusal names.
_RETRAIN = {
    "metrics removed": (lambda r: (r / "metrics.json").unlink(), "model.safetensors"),
    "weights removed": (lambda r: (r / "model.safetensors").unlink(), "metrics.json"),
    "status edited to running": (_set_status("running"), "model.safetensors"),
    "metrics removed, config removed": (
        lambda r: [(r / n).unlink() for n in ("metrics.json", "config.json")],
        "model.safetensors",
    ),
}


@pytest.mark.parametrize("case", list(_RETRAIN))
def test_a_finished_run_is_never_retrained(
    case: str, finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Path(shutil.copytree(finished, tmp_path / "R"))
    damage, named = _RETRAIN[case]
    damage(run)
    before = _files(run)
    assert main([*_TRAIN, "--out", str(run)]) == 2
    err = _one_error_line(capsys)
    assert str(run / named) in err and "no checkpoint.pt to resume from" in err and "delete the folder" in err, err
    assert _files(run) == before
    with pytest.raises(ValueError, match="training again would replace"):
        training.train(make_run_config("tiny", seed=0), run, device="cpu", progress=False)


def test_finished_weights_beside_a_checkpoint_resume_from_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kill between the final weights' write and the metrics' (the checkpoint is still
    there) is resumed from the checkpoint, not refused."""
    run = tmp_path / "R"
    args = [*_TRAIN, "--epochs", "2", "--out", str(run)]
    cfg = make_run_config("tiny", seed=0, epochs=2)
    training.train(cfg, run, device="cpu", progress=False, deadline=0.0)  # one epoch, then its checkpoint
    checkpoint, running = (run / "checkpoint.pt").read_bytes(), (run / "metrics.json").read_bytes()
    assert main(args) == 0
    (run / "checkpoint.pt").write_bytes(checkpoint)
    (run / "metrics.json").write_bytes(running)
    assert main(args) == 0
    assert json.loads((run / "metrics.json").read_text())["status"] == "completed"


# ------------------------------------------------------- 3. a user task's output is checked


@dataclass(frozen=True)
class _Metrics(TaskMetrics):
    other_acc: float


@dataclass(frozen=True)
class GoodTask(Task):
    """Repeat the first of three tokens 0..9 (a correct task the faulty ones change)."""

    metrics_class: ClassVar[type[TaskMetrics]] = _Metrics
    vocab_size: ClassVar[int] = 10
    seq_len: ClassVar[int] = 3
    has_heldout: ClassVar[bool] = False

    def make_split(self, split: str, n: int, seed: int) -> Any:
        tokens = torch.from_numpy(np.random.default_rng([seed, len(split)]).integers(0, 10, size=(n, 3)))
        return Samples(self.name, split, tokens, tokens[:, 0].clone(), {})

    def evaluate(self, predict, train: Samples, id_test: Samples, heldout: Samples | None) -> Any:  # noqa: ANN001
        acc = float((predict(id_test.tokens) == id_test.targets).float().mean())
        return _Metrics(acc, acc, acc)


def _split_fault(change):  # noqa: ANN001, ANN202
    """A task class whose make_split returns ``change(samples, n)``."""

    def make_split(self, split: str, n: int, seed: int) -> Any:  # noqa: ANN001
        return change(GoodTask.make_split(self, split, n, seed), n)

    return make_split


def _eval_fault(value):  # noqa: ANN001, ANN202
    def evaluate(self, predict, train, id_test, heldout) -> Any:  # noqa: ANN001
        if isinstance(value, Exception):
            raise value
        return value

    return evaluate


def _raise(err: Exception):  # noqa: ANN202
    def fail(samples: Samples, n: int) -> Any:
        raise err

    return fail


def _with(samples: Samples, **changes: Any) -> Samples:
    return Samples(
        samples.task,
        samples.split,
        changes.get("token_ids", samples.token_ids),
        changes.get("targets", samples.targets),
        {},
    )


#: Faulty tasks: name -> (method, its replacement, what the message says).
_FAULTS: dict[str, tuple[str, Any, str]] = {
    "TokensAboveVocab": (
        "make_split",
        _split_fault(lambda s, n: _with(s, token_ids=s.token_ids + 50)),
        "outside the vocabulary",
    ),
    "NegativeTokens": (
        "make_split",
        _split_fault(lambda s, n: _with(s, token_ids=s.token_ids - 20)),
        "outside the vocabulary",
    ),
    "FloatTokens": (
        "make_split",
        _split_fault(lambda s, n: _with(s, token_ids=s.token_ids.float())),
        "not an integer dtype",
    ),
    "WrongLength": (
        "make_split",
        _split_fault(lambda s, n: _with(s, token_ids=s.token_ids[:, :2])),
        "not the task's seq_len 3",
    ),
    "TargetsOutside": ("make_split", _split_fault(lambda s, n: _with(s, targets=s.targets + 100)), "targets in"),
    "TargetsTwoD": ("make_split", _split_fault(lambda s, n: _with(s, targets=s.targets[:, None])), "not 1-D"),
    "TenthOfSamples": (
        "make_split",
        _split_fault(lambda s, n: s.subset(slice(0, max(1, n // 10)))),
        "not the 512 samples asked for",
    ),
    "EmptySplit": ("make_split", _split_fault(lambda s, n: s.subset(slice(0, 0))), "not the 512 samples asked for"),
    "SplitRaises": ("make_split", _split_fault(_raise(KeyError("boom"))), "raised KeyError"),
    "SplitNone": ("make_split", _split_fault(lambda s, n: None), "returned NoneType None"),
    "SplitTuple": ("make_split", _split_fault(lambda s, n: (s.token_ids, s.targets)), "returned tuple"),
    "EvaluateRaises": ("evaluate", _eval_fault(RuntimeError("bad shape")), "raised RuntimeError: bad shape"),
    "EvaluateDict": ("evaluate", _eval_fault({"train_acc": 1.0, "id_acc": 1.0, "other_acc": 1.0}), "returned dict"),
    "EvaluateTensors": (
        "evaluate",
        _eval_fault(_Metrics(torch.tensor(0.5), torch.tensor(0.5), torch.tensor(0.5))),
        "not a plain number",
    ),
    "EvaluateNaN": ("evaluate", _eval_fault(_Metrics(float("nan"), 0.5, 0.5)), "not a finite number"),
    "EvaluateInf": ("evaluate", _eval_fault(_Metrics(0.5, 0.5, float("inf"))), "not a finite number"),
    "EvaluateAbove1": ("evaluate", _eval_fault(_Metrics(0.5, 7.5, 0.5)), "an accuracy is in [0, 1]"),
}
for _name, (_method, _impl, _) in _FAULTS.items():
    globals()[_name] = dataclass(frozen=True)(type(_name, (GoodTask,), {_method: _impl, "__module__": __name__}))


@pytest.mark.parametrize("fault", list(_FAULTS))
def test_a_faulty_user_task_is_one_line_naming_class_and_method_and_leaves_nothing(
    fault: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    method, _, says = _FAULTS[fault]
    out = tmp_path / "new" / "run"
    args = [
        *_TRAIN,
        "--task",
        f"{__name__}:{fault}",
        "--n-train",
        "512",
        "--n-test",
        "64",
        "--epochs",
        "1",
        "--out",
        str(out),
    ]
    assert main(args) == 2
    err = _one_error_line(capsys)
    assert f"{fault}.{method}(" in err and says in err and "fix the task" in err, err
    assert not (tmp_path / "new").exists()  # no folder left behind


def test_the_good_task_trains(tmp_path: Path) -> None:
    """The faulty tasks differ from a task that trains by their fault alone."""
    args = [
        *_TRAIN,
        "--task",
        f"{__name__}:GoodTask",
        "--n-train",
        "512",
        "--n-test",
        "64",
        "--epochs",
        "1",
        "--out",
        str(tmp_path / "run"),
    ]
    assert main(args) == 0


# ---------------------------------------------------- 4. metrics.json's values are checked


def _edit_metrics(change):  # noqa: ANN001, ANN202
    def edit(run: Path) -> None:
        metrics = json.loads((run / "metrics.json").read_text())
        change(metrics)
        (run / "metrics.json").write_text(json.dumps(metrics))

    return edit


_METRICS = {
    "final.heldout a list": (_edit_metrics(lambda m: m["final"].update(heldout=[1, 2])), "final.heldout"),
    "final.id_acc a string": (_edit_metrics(lambda m: m["final"].update(id_acc="abc")), "final.id_acc"),
    "final.id_acc 7.5": (_edit_metrics(lambda m: m["final"].update(id_acc=7.5)), "an accuracy is in [0, 1]"),
    "final.id_acc null": (_edit_metrics(lambda m: m["final"].update(id_acc=None)), "final.id_acc is None"),
    "final empty": (_edit_metrics(lambda m: m.update(final={})), "final.id_acc is None"),
    "format_version 99": (_edit_metrics(lambda m: m.update(format_version=99)), "format_version 99, newer than"),
    "history empty": (_edit_metrics(lambda m: m.update(history=[])), "its history is empty"),
    "history loss a string": (_edit_metrics(lambda m: m["history"][0].update(loss="x")), "history[0].loss"),
    "history epoch negative": (_edit_metrics(lambda m: m["history"][0].update(epoch=-1)), "history[0].epoch"),
    "history acc NaN": (
        lambda r: (r / "metrics.json").write_text(
            (r / "metrics.json").read_text().replace('"id_acc": ', '"id_acc": NaN, "x": ', 1)
        ),
        "NaN",
    ),
}


@pytest.mark.parametrize("case", list(_METRICS))
def test_damaged_metrics_values_are_refused_where_read(
    case: str, finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Path(shutil.copytree(finished, tmp_path / "R"))
    damage, says = _METRICS[case]
    damage(run)
    with pytest.raises(BadRunFile, match="metrics.json") as info:
        RunFolder(run).read_metrics()
    assert says in str(info.value), info.value
    before = _files(run)
    assert main([*_TRAIN, "--out", str(run)]) == 2
    assert str(run / "metrics.json") in _one_error_line(capsys)
    assert _files(run) == before


@pytest.mark.parametrize("case", ["final.id_acc a string", "format_version 99"])
def test_report_refuses_damaged_metrics_in_one_line(
    case: str, finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Path(shutil.copytree(finished, tmp_path / "R"))
    _METRICS[case][0](run)
    assert main(["report", str(run), "--out", str(tmp_path / "r.html")]) == 2
    assert str(run / "metrics.json") in _one_error_line(capsys)
    assert not (tmp_path / "r.html").exists()


def test_metrics_json_never_holds_nan(tmp_path: Path) -> None:
    from interp_init.fileio import write_json

    with pytest.raises(ValueError, match="NaN or infinite"):
        write_json(tmp_path / "metrics.json", {"final": {"id_acc": float("nan")}})
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------- 5. no leftovers


def _stale(folder: Path, name: str) -> Path:
    """A temporary file a killed writer of ``name`` left (nobody holds it; old)."""
    tmp = folder / f".{name}.tmp-0a1b2c3d4e5f6a7b"
    tmp.write_text("half a page")
    os.utime(tmp, (1, 1))
    return tmp


@pytest.mark.parametrize("command", ["report", "phase-diagram", "sweep"])
def test_a_killed_writes_temporary_is_gone_after_a_later_successful_run(
    command: str, places: dict[str, Path], tmp_path: Path
) -> None:
    sweep = places["S"]
    if command == "report":
        stale = _stale(tmp_path, "r.html")
        args = ["report", str(places["R"]), "--out", str(tmp_path / "r.html"), "--per-pair", "2"]
    elif command == "phase-diagram":
        stale = _stale(tmp_path, "fig.html")
        args = ["phase-diagram", str(sweep), "--out", str(tmp_path / "fig.html")]
    else:
        stale = _stale(sweep, "results.csv")
        spec = tmp_path / "spec.json"
        spec.write_text(json.dumps(_SPEC))
        args = ["sweep", str(spec), "--out", str(sweep), "--quiet", "--device", "cpu"]
    assert main(args) == 0
    assert not stale.exists()


def _refused_input(tmp_path: Path, finished: Path) -> dict[str, list[str]]:
    spec = tmp_path / "long.json"
    spec.write_text(json.dumps({"base": {"preset": "tiny"}, "grid": _long_grid()}))
    return {
        "reproduce --workers 0": [
            "reproduce",
            "--preset",
            "tiny",
            "--seeds",
            "0",
            "--workers",
            "0",
            "--out",
            str(tmp_path / "new" / "P"),
        ],
        "reproduce --seed, --workers 0": [
            "reproduce",
            "--preset",
            "tiny",
            "--seed",
            "0",
            "--workers",
            "0",
            "--out",
            str(tmp_path / "new" / "P"),
        ],
        "reproduce inside a run": ["reproduce", "--preset", "tiny", "--seed", "0", "--out", str(finished / "one")],
        "population inside a run": ["reproduce", "--preset", "tiny", "--seeds", "0,1", "--out", str(finished / "one")],
        "sweep point name too long": ["sweep", str(spec), "--out", str(tmp_path / "new" / "S"), "--quiet"],
        "train warmup too long": [
            *_TRAIN,
            "--warmup-epochs",
            "5",
            "--epochs",
            "3",
            "--out",
            str(tmp_path / "new" / "R"),
        ],
    }


@pytest.mark.parametrize(
    "case",
    [
        "reproduce --workers 0",
        "reproduce --seed, --workers 0",
        "reproduce inside a run",
        "population inside a run",
        "sweep point name too long",
        "train warmup too long",
    ],
)
def test_refused_input_leaves_no_folder(
    case: str, finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _files(finished)
    assert main(_refused_input(tmp_path, finished)[case]) == 2
    _one_error_line(capsys)
    assert not (tmp_path / "new").exists() and not (finished / "one").exists()
    assert _files(finished) == before


# ------------------------------------------------------- 6. no folders of runs nested


def _nesting(places: dict[str, Path], tmp_path: Path) -> dict[str, list[str]]:
    holder = tmp_path / "D"
    shutil.copytree(places["S"], holder / "sw")
    deep = tmp_path / "deep"
    shutil.copytree(places["R"], deep / "a" / "b" / "run")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(_SPEC))
    R, S, P = (str(places[k]) for k in "RSP")  # noqa: N806
    return {
        "train into a reproduction": [*_TRAIN, "--out", P],
        "train into a folder holding a sweep": [*_TRAIN, "--out", str(holder)],
        "train into a folder holding a run two levels down": [*_TRAIN, "--out", str(deep)],
        "reproduce into a sweep": ["reproduce", "--preset", "tiny", "--seeds", "0", "--out", S],
        "reproduce into a run": ["reproduce", "--preset", "tiny", "--seed", "0", "--out", R],
        "reproduce into a folder holding a sweep": [
            "reproduce",
            "--preset",
            "tiny",
            "--seed",
            "0",
            "--out",
            str(holder),
        ],
        "sweep into a reproduction": ["sweep", str(spec), "--out", P, "--quiet"],
        "sweep into a folder holding a sweep": ["sweep", str(spec), "--out", str(holder), "--quiet"],
        "sweep dry run into a reproduction": ["sweep", str(spec), "--out", P, "--dry-run"],
        "phase-diagram into a run folder": ["phase-diagram", S, "--out", R],
        "phase-diagram into a reproduction": ["phase-diagram", S, "--out", P],
        "report into a run folder": ["report", R, "--out", f"{R}/notes.html"],
    }


_NESTING_CASES = [
    "train into a reproduction",
    "train into a folder holding a sweep",
    "train into a folder holding a run two levels down",
    "reproduce into a sweep",
    "reproduce into a run",
    "reproduce into a folder holding a sweep",
    "sweep into a reproduction",
    "sweep into a folder holding a sweep",
    "sweep dry run into a reproduction",
    "phase-diagram into a run folder",
    "phase-diagram into a reproduction",
    "report into a run folder",
]


@pytest.mark.parametrize("case", _NESTING_CASES)
def test_folders_of_runs_are_never_nested(
    case: str, places: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _nesting(places, tmp_path)[case]
    before = _files(tmp_path)
    assert main(args) == 2
    err = _one_error_line(capsys)
    assert "folder" in err and ("--out" in err), err
    assert _files(tmp_path) == before


# ----------------------------------------- 7. a dry run promises what the run accepts


def _long_grid() -> dict[str, list[float]]:
    """A grid whose one point's folder name is longer than NAME_MAX bytes."""
    keys = ["gamma", "lr", "weight_decay", "warmup_start_lr", "min_lr", "beta1", "beta2", "grad_clip", "eps"]
    grid = {
        key: [0.1234567890123456 if key not in ("lr", "warmup_start_lr", "min_lr", "eps") else 1.234567890123456e-4]
        for key in keys
    }
    grid["gamma"] = [0.8123456789012345]
    return grid


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "sweep"])
def test_a_sweep_point_name_too_long_is_refused_by_the_dry_run_as_by_the_sweep(
    dry_run: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"base": {"preset": "tiny"}, "grid": _long_grid()}))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "S"), *(["--dry-run"] if dry_run else ["--quiet"])]) == 2
    err = _one_error_line(capsys)
    assert "sweep point folder name" in err and f"more than the {NAME_MAX}" in err and str(spec) in err, err
    assert not (tmp_path / "S").exists()


@pytest.mark.parametrize("length", [200, 240, NAME_MAX - 5, NAME_MAX])
def test_a_name_the_file_system_takes_is_written_whatever_its_temporary(length: int, tmp_path: Path) -> None:
    target = tmp_path / ("a" * (length - 5) + ".html")
    atomic_write(target, "page")
    assert target.read_text() == "page" and [p.name for p in tmp_path.iterdir()] == [target.name]


@pytest.mark.parametrize("length", [NAME_MAX + 1, 400])
def test_a_name_too_long_is_refused_naming_it_before_anything_is_written(length: int, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=f"more than the {NAME_MAX} a file name may have"):
        atomic_write(tmp_path / ("a" * length), "page")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------- 8. nonsense and sizes refused


def _spec_file(tmp_path: Path, text: str, suffix: str = ".json") -> str:
    path = tmp_path / f"spec{suffix}"
    path.write_text(text)
    return str(path)


_NONSENSE = {
    "warmup longer than the run": ([*_TRAIN, "--warmup-epochs", "1000", "--epochs", "3"], "warmup_epochs"),
    "warmup just longer": ([*_TRAIN, "--warmup-epochs", "3.5", "--epochs", "3"], "at most 3"),
    "absurd epochs": ([*_TRAIN, "--epochs", "1000000000"], "optimizer steps"),
    "empty seed entry": (["reproduce", "--preset", "tiny", "--seeds", "0,,"], "--seeds has an empty entry"),
    "empty leading seed": (["reproduce", "--preset", "tiny", "--seeds", ",0"], "--seeds has an empty entry"),
    "empty lr entry": (
        ["reproduce", "--preset", "tiny", "--seeds", "0", "--protocol", "paper", "--lrs", "1e-3,,"],
        "--lrs has an empty entry",
    ),
    "a key twice in a spec": (
        ["sweep", 'SPEC:{"base": {"preset": "tiny"}, "grid": {"gamma": [0.5]}, "grid": {"gamma": [0.8]}}', "--dry-run"],
        "appears twice",
    ),
    "a base key twice": (
        ["sweep", 'SPEC:{"base": {"preset": "tiny", "lr": 1e-3, "lr": 2e-3}, "grid": {"gamma": [0.5]}}', "--dry-run"],
        "'lr' appears twice",
    ),
    "grid values equal as numbers": (
        ["sweep", 'SPEC:{"base": {"preset": "tiny"}, "grid": {"weight_decay": [0, 0.0]}}', "--dry-run"],
        "equal as numbers",
    ),
    "grid values equal in TOML": (
        ["sweep", 'SPEC.toml:[base]\npreset = "tiny"\n[grid]\ngrad_clip = [1, 1.0]\n', "--dry-run"],
        "equal as numbers",
    ),
}


@pytest.mark.parametrize("case", list(_NONSENSE))
def test_nonsense_is_refused_in_one_line(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args, says = _NONSENSE[case]
    args = [
        _spec_file(tmp_path, a.split(":", 1)[1], ".toml" if a.startswith("SPEC.toml") else ".json")
        if a.startswith("SPEC")
        else a
        for a in args
    ]
    if args[0] in ("train", "reproduce"):
        args += ["--out", str(tmp_path / "out")]
    assert main(args) == 2
    assert says in _one_error_line(capsys)
    assert not (tmp_path / "out").exists()


def test_a_report_of_too_many_runs_is_refused_before_reading_them(finished: Path, tmp_path: Path) -> None:
    from training.studies.report.cells import MAX_REPORT_RUNS, find_run_dirs

    for i in range(MAX_REPORT_RUNS + 1):
        (tmp_path / f"r{i}").mkdir()
        shutil.copy(finished / "config.json", tmp_path / f"r{i}" / "config.json")
    with pytest.raises(ValueError, match=f"more than the {MAX_REPORT_RUNS} one report page compares"):
        find_run_dirs([tmp_path])
    assert len(find_run_dirs([tmp_path / f"r{i}" for i in range(MAX_REPORT_RUNS)])) == MAX_REPORT_RUNS


# ------------------------------------------------------ 9. messages that point somewhere


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG], ids=["ENOSPC", "EDQUOT", "EFBIG"])
def test_a_full_disk_quota_or_size_limit_names_the_path_and_says_run_again(code: int, tmp_path: Path) -> None:
    def full(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError(code, os.strerror(code))

    with pytest.raises(OSError) as info:
        atomic_write(tmp_path / "metrics.json", full)
    from training.config import one_line

    line = one_line(info.value)
    assert str(tmp_path / "metrics.json") in line and "run the same command again to resume" in line, line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_target_is_named_not_its_temporary(tmp_path: Path) -> None:
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(OSError) as info:
            atomic_write(tmp_path / "r.html", "page")
        assert info.value.filename == str(tmp_path / "r.html")
    finally:
        tmp_path.chmod(0o700)


def _links(tmp_path: Path) -> dict[str, Path]:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    return {"loop": loop, "dangling": dangling}


@pytest.mark.parametrize("link", ["loop", "dangling"])
@pytest.mark.parametrize("command", ["train", "sweep", "reproduce"])
def test_a_symlink_loop_or_dangling_link_as_out_is_named(
    link: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _links(tmp_path)[link]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(_SPEC))
    args = {
        "train": _TRAIN,
        "sweep": ["sweep", str(spec), "--quiet"],
        "reproduce": ["reproduce", "--preset", "tiny", "--seed", "0"],
    }[command]
    assert main([*args, "--out", str(out)]) == 2
    err = _one_error_line(capsys)
    assert str(out) in err and "symbolic link" in err and "File exists" not in err, err
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    ("suffix", "text", "says"),
    [
        (".yaml", "base: {preset: tiny}\ngrid: {gamma: [0.5]}\n", "is a YAML file, which is not read"),
        (".yml", "base: {preset: tiny}\n", "is a YAML file, which is not read"),
        (".json", '{"base": {"preset": "tiny", "gamma": "abc"}, "grid": {"seed": [0]}}', "gamma must be"),
        (".json", '{"base": {"preset": "tiny"}, "grid": {"gamma": ["abc"]}}', "'abc'"),
        (".toml", '[base]\npreset = "tiny"\nlr = "x"\n[grid]\nseed = [0]\n', "lr"),
    ],
)
def test_a_spec_error_names_its_file(
    suffix: str, text: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / f"spec{suffix}"
    spec.write_text(text)
    assert main(["sweep", str(spec), "--dry-run"]) == 2
    err = _one_error_line(capsys)
    assert str(spec) in err and says in err and "not valid YAML" not in err, err


@pytest.mark.parametrize("value", [123, None, 1.5, ["runs/a"], b"runs/a"], ids=repr)
def test_load_model_refuses_what_is_not_a_path_with_a_value_error(value: object) -> None:
    with pytest.raises(ValueError, match="a run folder is a path"):
        load_model(value)  # type: ignore[arg-type]


def test_a_sigint_after_the_work_is_done_exits_with_the_commands_code() -> None:
    script = (
        "import os, signal, sys\n"
        "sys.argv = ['interp-init', '--version']\n"
        "from training.cli import main\n"
        "code = main()\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr


_PROBE_INPUTS = {
    "an anchor that is not one": (lambda d: {"anchor_pairs": d.anchor_pairs + 7}, "not anchors"),
    "a negative key position": (lambda d: {"key_positions": d.key_positions - 20}, "key_positions lie in"),
    "a key position past the sequence": (lambda d: {"key_positions": d.key_positions + 7}, "key_positions lie in"),
}


@pytest.mark.parametrize("probe", ["candidate_labelings", "mask_key", "mask_second_anchor"])
@pytest.mark.parametrize("case", list(_PROBE_INPUTS))
def test_probe_inputs_outside_what_the_probe_means_are_refused(case: str, probe: str, finished: Path) -> None:
    import dataclasses

    import probes
    from interp_init.tasks.data import make_dataset

    data = make_dataset("symmetric", "train", 16, seed=0)
    change, says = _PROBE_INPUTS[case]
    bad = dataclasses.replace(data, **change(data))
    call = {"candidate_labelings": lambda d: probes.candidate_labelings(d)}.get(probe) or (
        lambda d: getattr(probes, probe)(load_model(finished), d)
    )
    call(data)  # the dataset as made is taken
    with pytest.raises(ValueError, match=says):
        call(bad)
