"""Bad input to the four sequence tasks (issue 54: scan, cogs, prontoqa, code-lm), at each entry
point: the command line (``train`` and ``sweep``: one line, exit 2, no folder made) and the
library (a ``ValueError`` of the same one line, nothing written).  The cases: a missing or altered
data file (the shipped SCAN and COGS files, checked by sha256; code-lm's corpus, the standard
library's sources; prontoqa generates its data and reads no file), an unknown split, and
sequences longer than the model's context."""

from __future__ import annotations

import json
import lzma
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest

from interp_init.tasks import code_lm, cogs, seq2seq, shipped
from interp_init.tasks.registry import make_task, task_class
from training.cli import main
from training.config import make_run_config

TASKS = ("scan", "cogs", "prontoqa", "code-lm")
#: Each task's token count per sample (its seq_len), as its class states it.
SEQ_LEN = {"scan": 59, "cogs": 177, "prontoqa": 96, "code-lm": 128}
#: Each task's splits (make_split's first argument).
SPLITS = {
    "scan": ("train", "id_test", "heldout"),
    "cogs": ("train", "id_test"),
    "prontoqa": ("train", "id_test", "heldout"),
    "code-lm": ("train", "id_test"),
}
NAMES = {"scan": "SCAN (turn-left)", "cogs": "COGS", "prontoqa": "prontoqa", "code-lm": "code-lm"}


def _train(task: str, out: Path, *args: str) -> list[str]:
    return ["train", "--task", task, "--preset", "tiny", "--device", "cpu", "--out", str(out), "--quiet", *args]


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("interp-init: error: "), err
    return err[len("interp-init: error: ") :]


# ------------------------------------------------------------------ a missing or altered data file

#: (task, shipped file or the corpus, damage).
DATA_CASES = [
    ("scan", "scan/tasks_train_addprim_turn_left.txt", "missing"),
    ("scan", "scan/tasks_test_addprim_turn_left.txt", "altered"),
    ("cogs", "cogs/train.tsv", "missing"),
    ("cogs", "cogs/test.tsv", "altered"),
    ("code-lm", "the standard library", "missing"),
]


@pytest.fixture
def damaged(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """The case's data file damaged (in a copy the task reads instead), and the message
    expected (computed here from the case); the tasks' caches cleared before and after."""
    task, name, damage = request.param

    def clear() -> None:
        seq2seq._pools.cache_clear()
        cogs.cogs_words.cache_clear()
        code_lm._windows.cache_clear()

    clear()
    if task == "code-lm":  # an interpreter whose standard library has no .py sources
        empty = tmp_path / "stdlib"
        empty.mkdir()
        monkeypatch.setattr(code_lm, "sysconfig", SimpleNamespace(get_paths=lambda: {"stdlib": str(empty)}))
        expected = f"code-lm task: no .py files under {empty}, the standard library this corpus is read from; run with a Python"
    else:
        files = tmp_path / "files"
        shutil.copytree(shipped.FILES, files)
        path = files / f"{name}.xz"
        if damage == "missing":
            path.unlink()
            expected = f"data file {path} is missing; reinstall interp-init"
        else:
            text = lzma.decompress(path.read_bytes())
            changed = text.replace(b"I_LOOK", b"I_WALK", 1) if task == "scan" else text.replace(b" dog ", b" cat ", 1)
            assert changed != text
            path.write_bytes(lzma.compress(changed))
            expected = f"data file {path} is altered: its sha256 is"
        monkeypatch.setattr(shipped, "FILES", files)
    yield task, expected
    clear()


@pytest.mark.parametrize("damaged", DATA_CASES, indirect=True, ids=[f"{t}-{d}" for t, _, d in DATA_CASES])
def test_a_damaged_data_file_stops_train_in_one_line_leaving_nothing(
    damaged: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task, expected = damaged
    out = tmp_path / "run"
    assert main(_train(task, out)) == 2
    err = _one_line_error(capsys)
    assert err.startswith(expected) and not out.exists()
    if task != "code-lm":
        assert err.endswith("restore it from the repository (git checkout -- interp_init/tasks/files)")


@pytest.mark.parametrize("damaged", DATA_CASES, indirect=True, ids=[f"{t}-{d}" for t, _, d in DATA_CASES])
def test_a_damaged_data_file_is_one_value_error_in_the_library(damaged: tuple[str, str], tmp_path: Path) -> None:
    task, expected = damaged
    for call in (lambda: make_task(task).make_split("train", 1, 0), lambda: make_run_config("tiny", task=task)):
        with pytest.raises(ValueError) as err:
            call()
        assert str(err.value).startswith(expected) and "\n" not in str(err.value)
    assert list(tmp_path.glob("run*")) == []


def test_prontoqa_reads_no_data_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # generated from its seed: no shipped file, so none can be missing or altered
    monkeypatch.setattr(shipped, "FILES", tmp_path / "nowhere")
    assert make_task("prontoqa").make_split("train", 2, 0).token_ids.shape == (2, SEQ_LEN["prontoqa"])


# ------------------------------------------------------------------ an unknown split


@pytest.mark.parametrize("task", TASKS)
def test_an_unknown_split_is_refused_by_train_in_one_line_leaving_nothing(
    task: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(_train(task, out, "--split", "nope")) == 2
    err = _one_line_error(capsys)
    if task == "scan":  # SCAN's benchmark splits
        assert err == "scan task: unknown split 'nope'; choose one of ('turn-left', 'jump') (--split)"
        # an empty split is a value, not "unset": refused, not read as turn-left
        assert main(_train(task, out, "--split", "")) == 2
        assert _one_line_error(capsys) == "scan task: unknown split ''; choose one of ('turn-left', 'jump') (--split)"
    else:  # the other tasks have no --split
        assert err == f"split applies to the 'scan' task only, not {task!r}: leave it unset"
    assert not out.exists()


@pytest.mark.parametrize("task", TASKS)
def test_an_unknown_split_is_refused_by_sweep_in_one_line_leaving_nothing(
    task: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, out = tmp_path / "spec.json", tmp_path / "sweep"
    spec.write_text(json.dumps({"base": {"preset": "tiny", "task": task}, "grid": {"split": ["nope"]}}))
    assert main(["sweep", str(spec), "--out", str(out), "--device", "cpu", "--quiet"]) == 2
    err = _one_line_error(capsys)
    assert err.startswith(f"sweep spec {spec}: spec grid['split'] value 'nope' is invalid: ") and not out.exists()
    assert ("unknown split 'nope'" if task == "scan" else "leave it unset") in err


@pytest.mark.parametrize("task", TASKS)
def test_an_unknown_split_is_one_value_error_in_the_library(task: str) -> None:
    with pytest.raises(ValueError) as err:
        make_task(task).make_split("nope", 1, 0)
    assert str(err.value) == f"unknown split 'nope' of {NAMES[task]}; choose one of {SPLITS[task]}"
    for split in SPLITS[task]:  # every split it names is one
        assert make_task(task).make_split(split, 1, 0).token_ids.shape[0] == 1
    if task == "scan":  # SCAN's benchmark split, an option of the task
        with pytest.raises(
            ValueError, match=r"^scan task: unknown split 'nope'; choose one of \('turn-left', 'jump'\)"
        ):
            make_task("scan", split="nope")


# ------------------------------------------------------------------ sequences longer than the context


@pytest.mark.parametrize("task", TASKS)
def test_a_context_shorter_than_the_sequences_is_refused_by_train_in_one_line_leaving_nothing(
    task: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert task_class(task).seq_len == SEQ_LEN[task]
    out = tmp_path / "run"
    short = SEQ_LEN[task] - 1
    assert main(_train(task, out, "--n-ctx", str(short))) == 2
    err = _one_line_error(capsys)
    assert (
        err == f"n_ctx {short} is shorter than the task's {SEQ_LEN[task]}-token sequences: use n_ctx >= {SEQ_LEN[task]}"
    )
    assert not out.exists()


@pytest.mark.parametrize("task", TASKS)
def test_a_context_shorter_than_the_sequences_is_refused_by_sweep_in_one_line_leaving_nothing(
    task: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, out = tmp_path / "spec.json", tmp_path / "sweep"
    spec.write_text(json.dumps({"base": {"preset": "tiny", "task": task}, "grid": {"n_ctx": [SEQ_LEN[task], 20]}}))
    assert main(["sweep", str(spec), "--out", str(out), "--device", "cpu", "--quiet"]) == 2
    err = _one_line_error(capsys)
    assert err.endswith(
        f"n_ctx 20 is shorter than the task's {SEQ_LEN[task]}-token sequences: use n_ctx >= {SEQ_LEN[task]}"
    )
    assert "grid['n_ctx'] value 20" in err and not out.exists()


@pytest.mark.parametrize("task", TASKS)
def test_a_context_shorter_than_the_sequences_is_one_value_error_in_the_library(task: str) -> None:
    with pytest.raises(ValueError) as err:
        make_run_config("tiny", task=task, n_ctx=SEQ_LEN[task] - 1)
    assert str(err.value) == (
        f"n_ctx {SEQ_LEN[task] - 1} is shorter than the task's {SEQ_LEN[task]}-token sequences: use n_ctx >= {SEQ_LEN[task]}"
    )
    assert make_run_config("tiny", task=task).model.n_ctx == SEQ_LEN[task]  # the task's own context by default


def test_a_sample_longer_than_a_user_tasks_sequences_is_one_value_error() -> None:
    # a task of one's own whose seq_len is shorter than its data: refused when its data is
    # read, naming the sample's length and the fix
    @dataclass(frozen=True)
    class Short(seq2seq.Seq2SeqTask):
        vocab_size: ClassVar[int] = 5
        seq_len: ClassVar[int] = 4

        def words(self) -> tuple[str, ...]:
            return ("a", "b")

        def read_pools(self) -> dict[str, list[seq2seq.Pair]]:
            return {"train": [(("a",), ("b",)), (("a", "a"), ("b", "b"))], "id_test": [(("a",), ("b",))]}

    with pytest.raises(ValueError) as err:
        Short().make_split("train", 1, 0)
    assert str(err.value).endswith(
        "Short: a train sample has 6 tokens, more than the task's seq_len 4; "
        "set the task class's seq_len to at least the longest sample's tokens"
    )
