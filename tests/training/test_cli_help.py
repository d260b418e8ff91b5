"""A command line that helps : ``--help`` without torch, options that say
what they mean and list their choices, and no paper-scale run on a CPU by default."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import fields

import click
import pytest
from helpers import ROOT

from training.cli import cli, main
from training.cli.flags import PRESET_CHOICES, TASK_CHOICES
from training.config import FIELDS, default_preset

HEAVY = ("torch", "transformer_lens")

# ``import training`` runs training/__init__.py, which is not the command line's: this
# prelude stands in an empty package for it, so that what is checked is what the command
# line itself imports.
_BARE_PACKAGE = (
    "import sys, types; pkg = types.ModuleType('training'); "
    f"pkg.__path__ = [{str(ROOT / 'training')!r}]; sys.modules['training'] = pkg; "
)


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)


def _heavy_after(code: str) -> list[str]:
    """The heavy modules in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    done = _python(f"{code}; import sys; print([m for m in {HEAVY!r} if m in sys.modules])")
    assert done.returncode == 0, done.stderr
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def test_the_command_line_module_imports_neither_torch_nor_transformer_lens() -> None:
    assert _heavy_after(_BARE_PACKAGE + "import training.cli") == []


def test_help_imports_neither_torch_nor_transformer_lens() -> None:
    code = (
        _BARE_PACKAGE + "from training.cli import main; assert main(['--help']) == 0 and main(['train', '--help']) == 0"
    )
    assert _heavy_after(code) == []


def test_import_training_cli_imports_neither_torch_nor_transformer_lens() -> None:
    done = _python(
        "import training.cli, sys; assert 'torch' not in sys.modules and 'transformer_lens' not in sys.modules"
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"]])
def test_interp_init_help_commands_import_neither(argv: list[str]) -> None:
    done = _python(
        f"import sys; from training.cli import main; code = main({argv!r}); assert code == 0; "
        f"assert not [m for m in {HEAVY!r} if m in sys.modules], sorted(m for m in {HEAVY!r} if m in sys.modules)"
    )
    assert done.returncode == 0, done.stderr


def test_group_help_lists_every_command_with_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    lines = text.split("Commands:")[1].splitlines()
    for name in cli.commands:
        at = next(i for i, line in enumerate(lines) if line.strip().startswith(name + " "))
        # the summary and its wrapped lines, whole: not cut at the first ". " of a name like "Fig. 6"
        said = " ".join(
            [lines[at].split(None, 1)[1], *(ln.strip() for ln in lines[at + 1 :] if ln.startswith(" " * 6))]
        )
        assert len(said) > 20 and not said.endswith(("Fig.", "...")), said


def test_a_summary_is_the_first_sentence_whole() -> None:
    from training.cli.summaries import first_sentence

    assert first_sentence("Fig. 2 at CPU scale, e.g. lr 1e-3. Then more.\n\nDetails.") == (
        "Fig. 2 at CPU scale, e.g. lr 1e-3."
    )
    assert first_sentence("One line\n  wrapped here. And a second.") == "One line wrapped here."
    assert first_sentence("No full stop at all") == "No full stop at all" and first_sentence("") == ""


# ----------------------------------------------------------------- what options say


def test_every_train_option_says_what_it_means(capsys: pytest.CaptureFixture[str]) -> None:
    command = cli.commands["train"]
    for param in command.params:
        if not isinstance(param, click.Option):
            continue
        text = (param.help or "").strip()
        assert text and not re.fullmatch(r"\[\w+\]( \(default: .*\))?", text), (param.name, text)
        assert len(text) >= 15, (param.name, text)
        assert "preset's, else" not in text, (param.name, text)
    assert main(["train", "--help"]) == 0
    page = capsys.readouterr().out
    assert " TEXT" not in page and "('" not in page and "(default: preset's" not in page


def test_choices_are_listed_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--help"]) == 0
    page = " ".join(capsys.readouterr().out.split())
    for name, (_, _, _, choices) in FIELDS.items():
        if choices:
            assert f"--{name.replace('_', '-')} [{'|'.join(choices)}]" in page, name
    assert (
        f"--task [{'|'.join(TASK_CHOICES)}|package.module:ClassName]" in page
        and f"--preset [{'|'.join(PRESET_CHOICES)}]" in page
    )


def _allowed(error: ValueError) -> tuple[str, ...]:
    """The allowed values a config's ValueError lists (``... must be one of (...), got ...``)."""
    return ast.literal_eval(re.search(r"must be one of (\(.*?\)), got", str(error)).group(1))


def test_the_option_table_matches_the_config_dataclasses() -> None:
    from interp_init.config import CONVENTIONS, ModelConfig
    from interp_init.tasks.registry import registered_tasks
    from training.config import OPTION_SECTION, PRECISIONS, PRESETS, SECTIONS

    assert set(FIELDS) == set(OPTION_SECTION) - {"task"}
    assert TASK_CHOICES == registered_tasks() and PRESET_CHOICES == tuple(sorted(PRESETS))
    for section, cls in SECTIONS.items():
        for f in fields(cls):
            if f.name == "task":
                continue
            assert FIELDS[f.name][0] == section, f.name
            annotation = f.type if isinstance(f.type, str) else f.type.__name__
            kind = "str" if f.metadata.get("choices") else annotation.split("|")[0].strip()
            assert FIELDS[f.name][1] == kind, (f.name, annotation)
    with pytest.raises(ValueError) as act_fn:
        ModelConfig(act_fn="nope")
    with pytest.raises(ValueError) as norm:
        ModelConfig(architecture="standard", normalization_type="nope")
    expected = {
        "convention": CONVENTIONS,
        "precision": PRECISIONS,
        "act_fn": _allowed(act_fn.value),
        "normalization_type": _allowed(norm.value),
    }
    assert {name: set(c) for name, (*_, c) in FIELDS.items() if c} == {name: set(c) for name, c in expected.items()}


# ------------------------------------------------------------------- default preset


@pytest.mark.parametrize(
    ("device", "cuda", "preset"),
    [
        ("auto", False, "cpu"),
        ("auto", True, "paper"),
        ("cpu", True, "cpu"),
        ("cuda", True, "paper"),
        ("cuda:1", True, "paper"),
    ],
)
def test_default_preset_follows_the_device(
    monkeypatch: pytest.MonkeyPatch, device: str, cuda: bool, preset: str
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert default_preset(device)[0] == preset


@pytest.mark.parametrize(("cuda", "preset"), [(False, "cpu"), (True, "paper")])
def test_train_without_preset_says_which_it_uses(
    monkeypatch: pytest.MonkeyPatch, tmp_path, capsys: pytest.CaptureFixture[str], cuda: bool, preset: str
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    # A bad value stops the command right after it chose the preset: nothing trains.
    assert main(["train", "--gamma", "-1", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"interp-init: no --preset given: using --preset {preset} (")
    assert err[1] == "interp-init: error: gamma must be a finite positive number, got -1.0"
    assert not (tmp_path / "run").exists()
