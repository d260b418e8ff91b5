"""The command line: options, run folders and one-line errors without a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from training.cli import main


def test_train_writes_run_folder_with_overrides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "g08"
    code = main(
        [
            "train",
            "--task",
            "symmetric",
            "--gamma",
            "0.8",
            "--weight-decay",
            "0.1",
            "--preset",
            "tiny",
            "--seed",
            "1",
            "--d-model",
            "24",
            "--d-head",
            "12",
            "--epochs",
            "2",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    config = json.loads((out / "config.json").read_text())
    assert config["init"]["gamma"] == 0.8 and config["train"]["weight_decay"] == 0.1 and config["seed"] == 1
    assert config["model"]["d_model"] == 24 and config["train"]["epochs"] == 2 and config["preset"] == "tiny"
    assert json.loads((out / "metrics.json").read_text())["status"] == "completed"
    assert "completed" in capsys.readouterr().out


def test_every_config_field_is_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from training.config import OPTIONS

    assert main(["train", "--help"]) == 0
    text = capsys.readouterr().out
    for name in OPTIONS:
        assert "--" + name.replace("_", "-") in text, name


@pytest.mark.parametrize(
    "args,message",
    [
        (["--gamma", "-1"], "gamma must be a finite positive number, got -1.0"),
        (["--gamma", "nan"], "gamma must be a finite positive number, got nan"),
        (["--gamma", "inf"], "gamma must be a finite positive number, got inf"),
        (["--task", "nope"], "unknown task 'nope'"),
        (["--preset", "nope"], "unknown preset 'nope'"),
        (["--n-train", "0"], "n_train must be an integer >= 1"),
        (["--task", "complexity", "--k", "9"], "must be an integer in 0..6"),
        (["--convention", "xavier"], "convention must be one of"),
    ],
)
def test_bad_input_one_line_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code = main(["train", "--preset", "tiny", *args, "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code != 0
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()  # nothing written before validation


def test_unwritable_out_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if os.geteuid() == 0:
        target = Path("/sys/interp-init-test/run")  # read-only even for root
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        target = ro / "run"
    code = main(["train", "--preset", "tiny", "--out", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and "cannot create the run folder" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_bad_flag_value_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--gamma", "abc", "--out", str(tmp_path)]) == 2
    assert "Invalid value for '--gamma'" in capsys.readouterr().err
