"""The one launcher and the one reader, through every study's entry point: a run another
process trains is ``running`` (never failed), a run folder holding another run is refused
before anything trains (exit 2) by every command that writes run folders, and the paper
protocol reads every target of a task at its best epoch."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from interp_init.runfolder import RunFolder
from training.cli import main
from training.launch import Job, JobReturn, Launcher, launcher_class, make_launcher, register_launcher
from training.studies.study import regime_config

_TINY = ["--preset", "tiny", "--device", "cpu", "--quiet", "--workers", "1"]


def test_reproduce_seeds_reports_a_run_another_process_trains_as_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "P"
    busy = out / "seed-0" / "symmetric" / "small-init"
    busy.mkdir(parents=True)
    RunFolder(busy).write_config(regime_config("tiny", "small-init", "symmetric", 0).to_dict())
    with RunFolder(busy).lock():
        code = main(["reproduce", "--seeds", "0", "--out", str(out), *_TINY])
        err = capsys.readouterr().err
    assert code == 1 and "1 of 4 runs running" in err and "failed" not in err
    assert not (busy / "error.txt").exists()
    assert RunFolder(out / "seed-0" / "id-ood" / "large-init").status() == "completed"


#: Every command that writes run folders: its arguments (OUT: the output) and where in OUT
#: the run folder it would train first lies.
_WRITERS = {
    "train": (["train", "--preset", "tiny", "--task", "symmetric", "--seed", "0", "--quiet", "--out", "OUT"], "."),
    "reproduce --seed": (["reproduce", "--seed", "0", *_TINY, "--out", "OUT"], "symmetric/small-init"),
    "reproduce --seeds": (["reproduce", "--seeds", "0", *_TINY, "--out", "OUT"], "seed-0/symmetric/small-init"),
    "sweep": (["sweep", "SPEC", "--quiet", "--out", "OUT"], "seed=0"),
}


@pytest.mark.parametrize("command", list(_WRITERS))
def test_another_runs_folder_is_refused_before_anything_trains(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run folder holding another run (its config.json: gamma 0.42, asked for by none of
    these) is refused by every command that writes run folders: exit 2, one line naming the
    folder, the field that differs and the fix, nothing written."""
    args, where = _WRITERS[command]
    out = tmp_path / "OUT"
    foreign = out / where
    foreign.mkdir(parents=True)
    RunFolder(foreign).write_config(
        regime_config("tiny", "small-init", "symmetric", 0).with_options(gamma=0.42).to_dict()
    )
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"base": {"preset": "tiny", "task": "symmetric"}, "grid": {"seed": [0]}}))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    argv = [{"OUT": str(out), "SPEC": str(spec)}.get(a, a) for a in args]
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and str(out if where == "." else foreign) in err, err
    assert "init.gamma: 0.42 (folder)" in err and "another --out" in err, err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_the_paper_protocol_reads_every_target_of_addition_at_its_best_epoch(tmp_path: Path) -> None:
    """``phase-diagram --protocol paper`` on an addition sweep: id_acc AND square_acc each at
    its best evaluated epoch (computed here from metrics.json by hand)."""
    from training.studies.phase.figures import protocol_table
    from training.studies.study import StudySpec
    from training.studies.sweep import SweepOptions, collect_results, run_sweep

    spec = StudySpec({"preset": "tiny", "task": "addition", "epochs": 4, "lr": 3e-3}, {"seed": [0]})
    run_sweep(spec, tmp_path, SweepOptions(progress=False, device="cpu"))
    table = protocol_table(collect_results(tmp_path, write=False), tmp_path, "paper")
    history = json.loads((tmp_path / "seed=0" / "metrics.json").read_text())["history"]
    for target in ("id_acc", "square_acc"):
        assert table[target][0] == max(r[target] for r in history if target in r), target


def test_launchers_are_registered_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from training.launch import base

    monkeypatch.setattr(base, "_LAUNCHERS", dict(base._LAUNCHERS))  # the registration ends with the test
    with pytest.raises(ValueError, match="unknown launcher 'nope'; choose one of"):
        launcher_class("nope")

    @register_launcher
    class Recording(Launcher):
        name = "recording-test"

        def __init__(self, note: str = "") -> None:
            self.note = note

        def launch(self, jobs):  # noqa: ANN001, ANN201
            return [self.returned(JobReturn(j.name, "completed")) for j in jobs]

    launcher = make_launcher("recording-test", note="x", workers=3)  # options another backend takes are left out
    assert isinstance(launcher, Recording) and launcher.note == "x"
    cfg = regime_config("tiny", "small-init", "symmetric", 0)
    seen: list[JobReturn] = []
    assert launcher.notify(seen.append).launch([Job("a", cfg, Path("a"))]) == [JobReturn("a", "completed")] == seen

    @dataclasses.dataclass(frozen=True)
    class Frozen(Recording):  # a frozen backend still takes a progress callback
        name = "frozen-test"
        note: str = ""

    assert Frozen().notify(seen.append).on_return is not None


def test_a_single_seed_summary_written_before_one_schema_reads_as_a_population_of_one(tmp_path: Path) -> None:
    from training.studies.population import check_flip
    from training.studies.population import read_summary

    def row(gamma: float, **numbers: float) -> dict:
        return {"gamma": gamma, **numbers, "status": "completed", "seconds": 1.0, "run_dir": str(tmp_path / "run")}

    legacy = {
        "symmetric": {
            "small-init": row(0.8, id_acc=0.95, heldout_inferential=0.9, heldout_symmetric=0.1),
            "large-init": row(0.5, id_acc=0.97, heldout_inferential=0.0, heldout_symmetric=0.6),
        },
        "id-ood": {
            "small-init": row(0.8, id_acc=0.99, ood_acc=0.7, commutativity=0.9),
            "large-init": row(0.4, id_acc=0.99, ood_acc=0.2, commutativity=0.5),
        },
    }
    (tmp_path / "summary.json").write_text(json.dumps(legacy))
    population = read_summary(tmp_path / "summary.json")
    assert population is not None and len(population.rows) == 1
    assert population.rows[0].checks == check_flip(legacy)
    assert population.rows[0].result("id-ood", "large-init").value("ood_acc") == 0.2
    assert read_summary(tmp_path / "missing.json") is None


def test_the_ensemble_launcher_under_a_deadline_starts_no_group_it_cannot_fit_and_the_study_resumes(
    tmp_path: Path,
) -> None:
    """A deadline that one group's predicted epoch does not fit: that group is not started (left
    pending, named in ``refused``); the one that starts stops before an epoch that would pass
    the deadline, checkpointed; the same study, launched again with time, ends every run
    where one uninterrupted launch ends them."""
    import time

    from training import make_run_config
    from training.launch import EnsembleLauncher, run_study

    small = dict(epochs=3, n_train=256, n_test=64, eval_samples=64, batch_size=128)
    cfgs = {f"d{d}-s{s}": make_run_config("tiny", n_layers=d, seed=s, **small) for d in (1, 2) for s in (0, 1)}

    def jobs(root: Path) -> list[Job]:
        return [Job(name, cfg, root / name) for name, cfg in cfgs.items()]

    whole = run_study(jobs(tmp_path / "whole"), tmp_path / "whole", EnsembleLauncher(device="cpu"), kind="sweep")
    assert {r.status for r in whole} == {"completed"}
    predicted = {1: 30.0, 2: 1e6}  # depth 1 fits the 60 s, depth 2 does not; depth 1's runs get 60 - 2 x 30 s: none
    launcher = EnsembleLauncher(
        device="cpu",
        deadline=time.monotonic() + 60,
        margin_epochs=2,
        epoch_seconds=lambda group: predicted[group[0].config.model.n_layers],
    )
    chunk = {r.name: r.status for r in run_study(jobs(tmp_path / "chunk"), tmp_path / "chunk", launcher, kind="sweep")}
    assert launcher.refused == [(["d2-s0", "d2-s1"], 1e6)]
    assert chunk["d1-s0"] == chunk["d1-s1"] == "interrupted"
    assert (
        chunk["d2-s0"] == chunk["d2-s1"] == "pending" and not (tmp_path / "chunk" / "d2-s0" / "metrics.json").exists()
    )
    again = run_study(
        jobs(tmp_path / "chunk"),
        tmp_path / "chunk",
        EnsembleLauncher(device="cpu", deadline=time.monotonic() + 1e6),
        kind="sweep",
    )
    assert {r.status for r in again} == {"completed"}
    for name in cfgs:
        a, b = (json.loads((tmp_path / root / name / "metrics.json").read_text()) for root in ("whole", "chunk"))
        assert [h["loss"] for h in a["history"]] == pytest.approx([h["loss"] for h in b["history"]], rel=1e-5)


def test_a_launcher_refuses_a_kind_of_run_it_does_not_train_before_anything_is_written(tmp_path: Path) -> None:
    # the ensemble backend stacks same-shape transformer runs: a concept-diffusion job is
    # refused in one line naming the fix, by run_study before the study folder is made, and
    # by the launcher itself when called directly; a backend that hands each job to the
    # executor (kinds None) takes any kind
    from training.launch import run_study
    from training.launch.backends import EnsembleLauncher, SerialLauncher
    from training.trainer.diffusion import diffusion_config

    job = Job("gamma-0.5-seed-1", diffusion_config("tiny", seed=1), tmp_path / "out" / "gamma-0.5-seed-1")
    ensemble = EnsembleLauncher(device="cpu")
    assert ensemble.kinds == ("transformer",) and SerialLauncher.kinds is None
    for call in (lambda: run_study([job], tmp_path / "out", ensemble), lambda: ensemble.launch([job])):
        with pytest.raises(ValueError, match="the ensemble backend trains 'transformer' runs only") as err:
            call()
        message = str(err.value)
        assert "gamma-0.5-seed-1 is a 'concept-diffusion' run" in message and "--backend local" in message
        assert "\n" not in message and not (tmp_path / "out").exists()
    transformer = Job("t", regime_config("tiny", "small-init", "symmetric", 0), tmp_path / "t")
    ensemble.refuse_kinds([transformer])  # its own kind passes
