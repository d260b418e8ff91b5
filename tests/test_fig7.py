"""experiments/fig7.py: the journal's Fig. 7 at CPU scale (rules B1-B3 and P), against values
worked out by hand."""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import click
import pytest
from helpers import load_script

from interp_init.stored import STORED_FILE, STORED_FORMAT
from training.studies.study import StudySpec

fig7 = load_script("experiments/fig7.py")


def _sweep(
    folder: Path, task: dict, gamma: float, wd: float, sizes: list[int], seeds: list[int], final, skip=()
) -> Path:
    """A sweep folder over ``n_train`` x seeds whose run (n, seed) ends with ``final(n, seed)``
    (a dict of final columns); a point in ``skip`` is left running (no final metrics)."""
    spec = StudySpec({"preset": "tiny", **task, "gamma": gamma, "weight_decay": wd}, {"n_train": sizes, "seed": seeds})
    folder.mkdir(parents=True)
    (folder / "sweep.json").write_text(json.dumps(spec.to_dict()))
    for job in spec.jobs(folder):
        key = (job.config.data.n_train, job.config.seed)
        run = job.run_dir
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps(job.config.to_dict()))
        if key in skip:
            (run / "metrics.json").write_text(json.dumps({"status": "running", "final": None, "history": []}))
            continue
        epochs = range(1, job.config.train.epochs + 1)  # fewer epochs than the config's read as not completed
        rows = [{"epoch": e, "step": 10 * e, "loss": 0.1, "lr": 1e-3, **final(*key)} for e in epochs]
        metrics = {"status": "completed", "final": dict(final(*key)), "history": rows, "elapsed_s": 60.0 * key[1]}
        (run / "metrics.json").write_text(json.dumps(metrics))
        (run / STORED_FILE).write_text(json.dumps({"format": STORED_FORMAT, "weights_sha256": None}))
    return folder


SCAN = {"task": "scan", "split": "turn-left"}


def test_each_size_compares_the_seeds_finished_in_both_settings_by_the_rank_test(tmp_path: Path) -> None:
    # small init: OOD 0.5 + seed/100 at 200 samples (every seed above large's 0.2 + seed/100);
    # at 100 samples small and large alternate, and large's seed 4 at 200 has not finished.
    def small(n: int, seed: int) -> dict[str, float]:
        ood = 0.5 + seed / 100 if n == 200 else (0.6 if seed % 2 else 0.1)
        return {"train_acc": 1.0, "id_acc": 0.95, "ood_acc": ood}

    def large(n: int, seed: int) -> dict[str, float]:
        ood = 0.2 + seed / 100 if n == 200 else (0.1 if seed % 2 else 0.6)
        return {"train_acc": 0.5 + seed / 10, "id_acc": 0.8 if seed == 1 else 0.99, "ood_acc": ood}

    seeds = [1, 2, 3, 4]
    s = fig7.Side.read([_sweep(tmp_path / "s", SCAN, 0.8, 0.1, [100, 200], seeds, small)])
    l = fig7.Side.read([_sweep(tmp_path / "l", SCAN, 0.3, 0.0, [100, 200], seeds, large, skip={(200, 4)})])
    assert (s.task, s.gamma, s.weight_decay, s.unfinished, l.unfinished) == ("scan", 0.8, 0.1, 0, 1)
    at100, at200 = fig7.compare(s, l)
    # 100 samples: 4 seeds, small better on seeds 1 and 3; ranks {0.1, 0.1, 0.6, 0.6} twice: not separated
    assert at100.seeds == (1, 2, 3, 4) and at100.beats == 2 and at100.difference == pytest.approx(0.0)
    assert at100.word == "not separated at 4 vs 4 seeds" and at100.p == pytest.approx(1.0)
    # 200 samples: seed 4 left out (large's not finished); 3 vs 3 all separated: p = 2 / C(6, 3) = 0.1
    assert at200.seeds == (1, 2, 3) and at200.beats == 3 and at200.difference == pytest.approx(0.3)
    assert at200.p == pytest.approx(2 / comb(6, 3)) and at200.word == "not separated at 3 vs 3 seeds"
    assert (at200.small_fits, at200.large_fits) == (3, 2)  # large's seed 1 has ID 0.8 < 0.9
    assert fig7.figure_word([at100, at200], "scan") == "not shown"
    text = fig7.table(s, l)
    assert (
        "| 200 | 1, 2, 3 | 0.52 (0.51, 0.52, 0.53) | 3 of 3 | 0.22 (0.21, 0.22, 0.23) | 2 of 3 | 3 of 3 [0.29, 1.00] | +0.30 | p = 0.100 |"
        in text
    )
    assert "runs not completed (left out): small 0, large 1" in text
    assert "post hoc, read by no rule): small init 100: 1.00, 200: 1.00; large init 100: 0.75, 200: 0.70." in text
    # minutes a run from the records' elapsed_s (seed s took s minutes; large's seed 4 at 200 is unfinished)
    assert (
        "small init 100: 2.5 (1.0-4.0), 200: 2.5 (1.0-4.0); large init 100: 2.5 (1.0-4.0), 200: 2.0 (1.0-3.0)." in text
    )


def test_the_journals_direction_a_reversal_and_neither_fitting_are_named(tmp_path: Path) -> None:
    seeds = [1, 2, 3, 4]

    def small(n: int, seed: int) -> dict[str, float]:
        return {"train_acc": 1.0, "id_acc": 1.0 if n == 100 else 0.5, "ood_acc": 0.9 if n == 100 else 0.1 + seed / 100}

    def large(n: int, seed: int) -> dict[str, float]:
        return {"train_acc": 1.0, "id_acc": 1.0 if n == 100 else 0.5, "ood_acc": 0.2 if n == 100 else 0.5 + seed / 100}

    s = fig7.Side.read([_sweep(tmp_path / "s", SCAN, 0.8, 0.1, [100, 200], seeds, small)])
    l = fig7.Side.read([_sweep(tmp_path / "l", SCAN, 0.3, 0.0, [100, 200], seeds, large)])
    at100, at200 = fig7.compare(s, l)
    assert at100.p == pytest.approx(2 / comb(8, 4)) and at100.word == "the journal's direction holds"
    assert at200.word == "neither fits (rule B3): not read"  # every ID 0.5: large's better OOD is not read
    assert fig7.figure_word([at100, at200], "scan") == "holds at CPU scale (200 not read: neither fits)"
    assert fig7.figure_word([at100], "scan") == "holds at CPU scale"
    # the same large-better values where the runs fit: a reversal, said first
    reversal = fig7.SizeRow(200, (1, 2, 3, 4), at200.small, at200.large, 4, 4, 0, at200.p, "a reversal")
    assert fig7.figure_word([at100, reversal], "cogs") == (
        "reversed at 200; holds at some sizes (100) (ID accuracy only: COGS's OOD set is not available here)"
    )


def test_perplexity_is_better_lower_and_has_no_fit_test(tmp_path: Path) -> None:
    task = {"task": "code-lm"}

    def side(ppl: float):
        return lambda n, seed: {"train_acc": 0.5, "id_acc": 0.4, "train_ppl": ppl, "test_ppl": ppl + seed / 10}

    s = fig7.Side.read([_sweep(tmp_path / "s", task, 0.8, 0.1, [200], [1, 2, 3, 4], side(3.0))])
    l = fig7.Side.read([_sweep(tmp_path / "l", task, 0.3, 0.0, [200], [1, 2, 3, 4], side(4.0))])
    (row,) = fig7.compare(s, l)
    assert row.beats == 4 and row.small_fits is None and row.word == "the journal's direction holds"
    # test_ppl per seed: small 3.1..3.4 (mean 3.25), large 4.1..4.4 (mean 4.25)
    assert row.difference == pytest.approx(-1.0) and row.ratio == pytest.approx(3.25 / 4.25)
    text = fig7.table(s, l)
    assert "no fit test" in text and "| -1.00 (ratio 0.76) |" in text
    assert "Training perplexity at the final epoch" in text and "small init 200: 3.00; large init 200: 4.00" in text
    # the figure: one size is one labelled tick, each side's seeds a column of dots beside it
    fig = fig7.figure(s, l)
    assert list(fig.layout.xaxis.ticktext) == ["200"] and list(fig.layout.xaxis.tickvals) == [0]
    dots = [tr for tr in fig.data if tr.mode == "markers"]
    assert [sorted(tr.y) for tr in dots] == [pytest.approx([3.1, 3.2, 3.3, 3.4]), pytest.approx([4.1, 4.2, 4.3, 4.4])]
    assert dots[0].x[0] < 0 < dots[1].x[0]


def test_sweeps_of_two_settings_or_tasks_or_swapped_sides_are_refused_in_one_line(tmp_path: Path) -> None:
    def final(n: int, seed: int) -> dict[str, float]:
        return {"train_acc": 1.0, "id_acc": 1.0, "ood_acc": 0.5}

    a = _sweep(tmp_path / "a", SCAN, 0.8, 0.1, [200], [1], final)
    b = _sweep(tmp_path / "b", SCAN, 0.3, 0.0, [200], [1], final)
    with pytest.raises(click.ClickException, match="give one setting's sweeps together"):
        fig7.Side.read([a, b])
    c = _sweep(tmp_path / "c", {"task": "prontoqa"}, 0.3, 0.0, [200], [1], final)
    for read in (fig7.compare, fig7.figure):
        with pytest.raises(click.ClickException, match="different tasks"):
            read(fig7.Side.read([a]), fig7.Side.read([c]))
        with pytest.raises(
            click.ClickException,
            match=r"the same setting: give the small-init sweep to --small .*\(both are gamma 0.8, weight decay 0.1\)",
        ):
            read(fig7.Side.read([a]), fig7.Side.read([a]))
        with pytest.raises(click.ClickException, match="--small is gamma 0.3, below --large's 0.8.*look swapped"):
            read(fig7.Side.read([b]), fig7.Side.read([a]))
    # the same gamma at another weight decay is a comparison (weight decay alone)
    d = _sweep(tmp_path / "d", SCAN, 0.8, 0.0, [200], [1], final)
    assert [r.seeds for r in fig7.compare(fig7.Side.read([a]), fig7.Side.read([d]))] == [(1,)]
