"""The plug-in contracts (docs/layout.md, where a new piece goes): a task, an architecture, a
probe, a backend and an analysis, each written here into a package of one's own in a
temporary folder and used through what a user calls; and the docs' lists of tasks,
architectures and backends are the registries'."""

from __future__ import annotations

import importlib
import json
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
import torch
from helpers import ROOT

from training.cli import main

TINY = [
    "--preset",
    "tiny",
    "--device",
    "cpu",
    "--quiet",
    "--n-train",
    "256",
    "--n-test",
    "64",
    "--eval-samples",
    "64",
    "--epochs",
    "1",
]


def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, package: str, source: str) -> ModuleType:
    """``package/plugin.py`` holding ``source``, written under ``tmp_path`` and imported from there."""
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "plugin.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(f"{package}.plugin")


def test_the_docs_name_every_registered_task_architecture_and_backend() -> None:
    from interp_init.architectures import architecture_names
    from interp_init.tasks.registry import registered_tasks
    from training.launch.backends import backend_names

    for page, names in (
        ("tasks.md", registered_tasks()),
        ("architectures.md", architecture_names()),
        ("sweeps.md", backend_names()),
    ):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        assert [n for n in names if f"`{n}`" not in text] == [], f"docs/{page} does not name them"


def test_a_task_of_ones_own_package_trains_by_its_registered_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from interp_init.tasks import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # the registration ends with the test
    plugin(
        tmp_path,
        monkeypatch,
        "mytasks",
        '''
        from dataclasses import dataclass
        from typing import ClassVar

        import numpy as np
        import torch

        from interp_init.tasks.base import Samples, Task, TaskMetrics
        from interp_init.tasks.registry import register_task


        @dataclass(frozen=True)
        class FirstTokenTask(Task):
            """Repeat the first of three tokens."""

            metrics_class: ClassVar[type[TaskMetrics]] = TaskMetrics
            vocab_size: ClassVar[int] = 12
            seq_len: ClassVar[int] = 3

            def make_split(self, split, n, seed):
                tokens = torch.from_numpy(np.random.default_rng([seed, len(split)]).integers(0, 12, size=(n, 3)))
                return Samples(self.name, split, tokens, tokens[:, 0].clone(), {})

            def evaluate(self, predict, train, id_test, heldout):
                return TaskMetrics(*(float((predict(d.tokens) == d.targets).float().mean()) for d in (train, id_test)))


        register_task("first-token", FirstTokenTask)
    ''',
    )
    assert main(["train", "--task", "first-token", *TINY, "--out", str(tmp_path / "run")]) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["status"] == "completed" and set(metrics["final"]) >= {"train_acc", "id_acc"}
    assert main(["train", "--task", "nope", *TINY, "--out", str(tmp_path / "x")]) == 2
    assert "'first-token'" in capsys.readouterr().err  # the choices are the registry's


def test_an_architecture_of_ones_own_package_trains_and_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from interp_init.architectures import registered
    from interp_init.runfolder import load_model

    module = plugin(
        tmp_path,
        monkeypatch,
        "myarchs",
        '''
        from dataclasses import replace

        from transformer_lens.components import TransformerBlock

        from interp_init.architectures import get_architecture


        class TwinBlock(TransformerBlock):
            """The standard block under a name of its own."""


        TWIN = replace(get_architecture("standard"), name="twin", description="the standard block, registered again", block=TwinBlock)
    ''',
    )
    with registered(module.TWIN):
        assert (
            main(["train", "--task", "symmetric", "--architecture", "twin", *TINY, "--out", str(tmp_path / "run")]) == 0
        )
        model = load_model(tmp_path / "run")
        assert type(model.blocks[0]) is module.TwinBlock
    assert json.loads((tmp_path / "run" / "config.json").read_text())["model"]["architecture"] == "twin"


def test_a_probe_of_ones_own_package_runs_on_any_model_the_protocol_admits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from interp_init import InitConfig, ModelConfig, build_model

    module = plugin(
        tmp_path,
        monkeypatch,
        "myprobes",
        '''
        import torch

        from probes.protocol import check_model


        def last_attention(model, tokens, layer=0):
            """The attention pattern of the last position at ``layer``: [head, key_pos]."""
            check_model(model)
            name = f"blocks.{layer}.attn.hook_pattern"
            seen = {}
            with model.hooks(fwd_hooks=[(name, lambda pattern, hook: seen.update(p=pattern.detach()))]):
                model(tokens, return_type="logits")
            return seen["p"][:, :, -1].mean(0)
    ''',
    )
    model = build_model(
        ModelConfig(n_layers=2, d_model=32, n_heads=2, d_head=16, d_mlp=64), InitConfig(gamma=0.5), seed=0
    )
    tokens = torch.randint(0, 100, (5, 9), generator=torch.Generator().manual_seed(0))
    pattern = module.last_attention(model, tokens)
    _, cache = model.run_with_cache(tokens)  # the independent reading: TransformerLens' own cache
    torch.testing.assert_close(pattern, cache["blocks.0.attn.hook_pattern"][:, :, -1].mean(0))
    with pytest.raises(ValueError):
        module.last_attention(torch.nn.Linear(2, 2), tokens)  # not a model the probes read


def test_a_backend_of_ones_own_package_is_a_choice_and_trains_through_the_executor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from training.launch import base

    monkeypatch.setattr(base, "_LAUNCHERS", dict(base._LAUNCHERS))  # the registration ends with the test
    module = plugin(
        tmp_path,
        monkeypatch,
        "mybackends",
        '''
        from dataclasses import dataclass
        from typing import ClassVar

        from training.launch import Launcher, execute, register_launcher

        SEEN = []


        @register_launcher
        @dataclass
        class Reversed(Launcher):
            """The last job first, each here through the one executor."""

            name: ClassVar[str] = "reversed"
            device: str = "auto"

            def launch(self, jobs):
                SEEN.extend(j.name for j in reversed(jobs))
                returns = {r.name: self.returned(r) for j in reversed(jobs) for r in execute([j], self.device)}
                return [returns[j.name] for j in jobs]
    ''',
    )
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "base": {
                    "preset": "tiny",
                    "task": "symmetric",
                    "n_train": 256,
                    "n_test": 64,
                    "eval_samples": 64,
                    "epochs": 1,
                },
                "grid": {"gamma": [0.5, 0.8]},
            }
        )
    )
    assert (
        main(
            [
                "sweep",
                str(spec),
                "--backend",
                "reversed",
                "--device",
                "cpu",
                "--quiet",
                "--out",
                str(tmp_path / "sweep"),
            ]
        )
        == 0
    )
    assert module.SEEN == ["gamma=0.8", "gamma=0.5"]
    assert all(
        json.loads((tmp_path / "sweep" / n / "metrics.json").read_text())["status"] == "completed" for n in module.SEEN
    )


def test_an_analysis_of_ones_own_package_reads_a_study_from_its_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = plugin(
        tmp_path,
        monkeypatch,
        "myanalyses",
        '''
        from training import RunRecord


        def final_loss_by_gamma(spec, out):
            """Each run's last training loss, by its gamma: read after the study, from the records."""
            return {job.config.init.gamma: RunRecord.read(job.run_dir).history[-1].loss for job in spec.jobs(out)}
    ''',
    )
    from training import StudySpec, run_study
    from training.launch import SerialLauncher

    spec = StudySpec(
        {"preset": "tiny", "task": "symmetric", "n_train": 256, "n_test": 64, "eval_samples": 64, "epochs": 2},
        {"gamma": [0.5, 0.8]},
    )
    run_study(spec.jobs(tmp_path), tmp_path, SerialLauncher(device="cpu"), kind="sweep")
    losses = module.final_loss_by_gamma(spec, tmp_path)
    for gamma in (0.5, 0.8):
        history = json.loads((tmp_path / f"gamma={gamma}" / "metrics.json").read_text())["history"]
        assert losses[gamma] == history[-1]["loss"] and len(history) == 2
