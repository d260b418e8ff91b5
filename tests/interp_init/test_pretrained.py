"""The trained models shipped with the package: named, opened offline in one line, each file
checked against its SHA-256, the weights those of the file (read by safetensors itself), the
model as accurate as its record says on a fresh draw; docs/pretrained.md's example and
examples/pretrained_attention.py run."""

from __future__ import annotations

import contextlib
import io
import json
import re
import runpy
import shutil
import socket
import sys
from pathlib import Path

import pytest
import torch
from helpers import ROOT
from safetensors.torch import load_file
from transformer_lens import HookedTransformer

import interp_init
from interp_init.pretrained import INDEX_FILE, PRETRAINED_DIR, Pretrained, PretrainedError, pretrained_info
from interp_init.tasks.data import make_dataset

NAMES = ["id-ood-large-init", "id-ood-small-init", "symmetric-large-init", "symmetric-small-init"]


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No socket can be opened: whatever reaches for a network fails."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("the network was reached for")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_the_shipped_models_are_named_and_filtered() -> None:
    assert interp_init.list_pretrained() == NAMES
    assert interp_init.list_pretrained("symmetric-*") == NAMES[2:]
    index = json.loads((PRETRAINED_DIR / INDEX_FILE).read_text())
    assert (
        index["command"].startswith("interp-init reproduce --preset cpu --seed 201")
        and index["machine"]
        and index["beside"]
    )
    for name in NAMES:
        info = pretrained_info(name)
        assert (info.preset, info.seed, name) == ("cpu", 201, f"{info.task}-{info.regime}")
        assert info.config()["seed"] == 201 and info.metrics()["status"] == "completed"


@pytest.mark.parametrize("name", ["symmetric-small-init", "id-ood-large-init"])
def test_from_pretrained_opens_the_shipped_weights_offline(name: str, offline: None) -> None:
    model = interp_init.from_pretrained(name)
    assert isinstance(model, HookedTransformer) and not model.training
    stored = load_file(str(PRETRAINED_DIR / name / "model.safetensors"))  # the file, read by safetensors alone
    state = model.state_dict()
    assert stored and all(torch.equal(state[key], value) for key, value in stored.items() if key in state)
    # as accurate on a fresh draw of its ID test split as its record says (500 samples: within 0.06)
    info = pretrained_info(name)
    data = make_dataset(info.task, "id_test", n=500, seed=12345)
    with torch.no_grad():
        accuracy = float((model(data.tokens)[:, -1].argmax(-1) == data.targets).float().mean())
    assert accuracy == pytest.approx(info.metrics()["final"]["id_acc"], abs=0.06)


def test_unknown_names_and_changed_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(
        PretrainedError, match=r"no shipped model is called 'symmetric-small': did you mean 'symmetric-small-init'\?"
    ):
        interp_init.from_pretrained("symmetric-small")
    info = pretrained_info("symmetric-large-init")
    copy = tmp_path / info.name
    shutil.copytree(info.path, copy)
    moved = Pretrained(**{**info.__dict__, "path": copy})
    moved.check()  # an untouched copy passes
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(PretrainedError, match=re.escape(f"{weights}: not the file shipped")):
        moved.load()
    (copy / "metrics.json").unlink()
    with pytest.raises(PretrainedError, match="lacks this file"):
        moved.check()


def _python_block(page: Path) -> str:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)[0]


def test_the_docs_example_opens_a_model_and_draws_its_attention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline: None
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "pretrained").mkdir(parents=True)
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exec(compile(_python_block(ROOT / "docs" / "pretrained.md"), "docs/pretrained.md", "exec"), {})
    assert str(NAMES) in stdout.getvalue()
    page = (tmp_path / "runs" / "pretrained" / "attention.html").read_text()
    assert "L1H0" in page and "unpkg.com" not in page  # every head drawn; no script from a CDN


def test_the_example_script_prints_the_answer_and_writes_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = ROOT / "examples" / "pretrained_attention.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--model", "symmetric-small-init", "--out", str(tmp_path)])
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), pytest.raises(SystemExit) as done:
        runpy.run_path(str(script), run_name="__main__")
    assert done.value.code in (0, None)
    answer = int(re.search(r"it answers (\d+) \(inferential 89, symmetric 93\)", stdout.getvalue()).group(1))
    model = interp_init.from_pretrained("symmetric-small-init")
    assert answer == int(model(torch.tensor([[35, 63, 99, 4, 3, 38, 42, 36, 62]]))[0, -1].argmax())
    assert (tmp_path / "symmetric-small-init-attention.html").is_file()


def test_the_times_the_help_and_the_report_say_are_the_shipped_records() -> None:
    from interp_init.pretrained import training_time
    from training.cli.flags import _PRESET_HELP
    from training.studies.report.outcomes import preset_meaning

    time = training_time("cpu")
    assert sorted(time.minutes) == sorted(pretrained_info(name).metrics()["elapsed_s"] / 60 for name in NAMES)
    assert time.span in _PRESET_HELP and time.where in _PRESET_HELP and time.span in preset_meaning("cpu")
    assert "load average" in time.where and training_time("tiny") is None  # no tiny model is shipped: no time said
