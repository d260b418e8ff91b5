"""experiments/contrast.py: Fig. 2's contrast and the gamma slice, against values worked out by hand."""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import pytest
from helpers import load_script

from interp_init.stored import STORED_FILE, STORED_FORMAT
from training.studies.population import exact_interval
from training.studies.study import StudySpec

contrast = load_script("experiments/contrast.py")


def _run(run: Path, config: dict, epochs: list[dict[str, float]]) -> None:
    """A completed symmetric run whose epoch e (1-based) has the shares ``epochs[e - 1]`` (the
    ``tiny`` preset's 3 epochs: a run with fewer reads as not completed)."""
    rows = []
    for e, n in enumerate(epochs, start=1):
        rows.append(
            {
                "epoch": e,
                "step": 10 * e,
                "loss": 0.01,
                "lr": 1e-3,
                "train_acc": 1.0,
                "id_acc": n.get("id", 1.0),
                "per_pair": {"1,1": 1.0, "3,4": n.get("fit", 1.0)},
                "heldout": {"4,3": {"inferential": n["inf"], "symmetric": n["sym"]}},
            }
        )
    final = {k: v for k, v in rows[-1].items() if k not in ("epoch", "step", "loss", "lr")}
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(config))
    (run / "metrics.json").write_text(json.dumps({"status": "completed", "final": final, "history": rows}))
    (run / STORED_FILE).write_text(json.dumps({"format": STORED_FORMAT, "weights_sha256": None}))


def _sweep(
    folder: Path, gamma: float, seeds: list[int], lrs: list[float], shares, skip: set[tuple[int, float]] = frozenset()
) -> Path:
    """A seed x lr sweep folder; ``shares(seed, lr)`` gives a run's epochs; ``skip``: points not run."""
    spec = StudySpec({"preset": "tiny", "task": "symmetric", "gamma": gamma}, {"seed": seeds, "lr": lrs})
    folder.mkdir(parents=True)
    (folder / "sweep.json").write_text(json.dumps(spec.to_dict()))
    for job in spec.jobs(folder):
        if (job.config.seed, job.config.train.lr) not in skip:
            _run(job.run_dir, job.config.to_dict(), shares(job.config.seed, job.config.train.lr))
    return folder


FLAT = {"inf": 0.1, "sym": 0.1}


def test_both_panels_per_seed_with_the_rank_test_spikes_and_partial_seeds(tmp_path: Path) -> None:
    # small init: seed s's best inferential is 0.8 + s/100 at lr 2e-3, epoch 2 of 3, its
    # neighbours 0.1 (a spike) for seed 1 and 0.7 for the rest; best symmetric 0.2.
    def small(seed: int, lr: float) -> list[dict[str, float]]:
        if lr == 1e-3:
            return [FLAT] * 3
        side = 0.1 if seed == 1 else 0.7
        return [{"inf": side, "sym": 0.2}, {"inf": 0.8 + seed / 100, "sym": 0.0, "fit": 0.5}, {"inf": side, "sym": 0.0}]

    def large(seed: int, lr: float) -> list[dict[str, float]]:
        return [{"inf": 0.3, "sym": 0.9}] * 3 if lr == 1e-3 else [FLAT] * 3

    seeds = [1, 2, 3, 4]
    s = contrast.InitSweep.read([_sweep(tmp_path / "s", 0.8, seeds, [1e-3, 2e-3], small)])
    l = contrast.InitSweep.read([_sweep(tmp_path / "l", 0.5, [*seeds, 5], [1e-3, 2e-3], large, skip={(5, 2e-3)})])
    assert (
        list(s.finished) == seeds and list(l.finished) == seeds and l.partial == {5: 1}
    )  # seed 5 has 1 of 2 lrs: left out
    (b, a) = contrast.panel_rows(s, l)
    assert [p.pick.value for p in b.small] == pytest.approx([0.81, 0.82, 0.83, 0.84]) and [
        p.pick.epoch for p in b.small
    ] == [2] * 4
    assert [p.spike for p in b.small] == [True, False, False, False]  # 0.1 and 0.1 < 0.81 - 0.2; 0.7 is not < 0.62
    assert b.small[0].exception == 0.5 and (b.small[0].before, b.small[0].after) == (0.1, 0.1)
    # 4 against 4, every small value above every large one: two-sided exact p = 2 / C(8, 4)
    assert b.p == pytest.approx(2 / comb(8, 4)) and b.word == "separated, the papers' direction"
    assert (
        a.means == pytest.approx((0.2, 0.9))
        and a.p == pytest.approx(2 / comb(8, 4))
        and a.word == "separated, the papers' direction"
    )
    assert contrast.contrast_word([b, a]).startswith("Fig. 2's contrast holds at CPU scale")
    # 3 seeds an init can never separate: the smallest two-sided p is 2 / C(6, 3) = 0.1
    s3 = contrast.InitSweep.read([_sweep(tmp_path / "s3", 0.8, [1, 2, 3], [1e-3, 2e-3], small)])
    l3 = contrast.InitSweep.read([_sweep(tmp_path / "l3", 0.5, [1, 2, 3], [1e-3, 2e-3], large)])
    b3, a3 = contrast.panel_rows(s3, l3)
    assert b3.p == pytest.approx(0.1) and b3.word == "not separated at 3 vs 3 seeds"
    # reversed: large init higher on panel (b)
    rb, _ = contrast.panel_rows(l, s)
    assert rb.word == "separated against the papers' direction (a reversal)"
    assert "reversed on panel (b)" in contrast.contrast_word(contrast.panel_rows(l, s))


def test_two_folders_of_one_init_read_together_and_two_inits_refused(tmp_path: Path) -> None:
    one = _sweep(tmp_path / "a", 0.8, [1], [1e-3], lambda s, lr: [FLAT] * 3)
    two = _sweep(tmp_path / "b", 0.8, [2], [1e-3], lambda s, lr: [FLAT] * 3)
    assert list(contrast.InitSweep.read([one, two]).finished) == [1, 2]
    other = _sweep(tmp_path / "c", 0.5, [3], [1e-3], lambda s, lr: [FLAT] * 3)
    with pytest.raises(Exception, match=r"runs of gammas \[0.5, 0.8\]; give one init's sweeps together"):
        contrast.InitSweep.read([one, other])


def test_the_strict_reading_counts_with_the_id_column_and_fisher(tmp_path: Path) -> None:
    # at lr 2e-3 small init infers on seeds 1-3 (seed 3 with ID 0.85), large init copies on all three
    def small(seed: int, lr: float) -> list[dict[str, float]]:
        return [{"inf": 0.9, "sym": 0.0, "id": 0.85 if seed == 3 else 1.0}] * 3 if lr == 2e-3 else [FLAT] * 3

    def large(seed: int, lr: float) -> list[dict[str, float]]:
        return [{"inf": 0.0, "sym": 0.95}] * 3

    s = contrast.InitSweep.read([_sweep(tmp_path / "s", 0.8, [1, 2, 3], [1e-3, 2e-3], small)])
    l = contrast.InitSweep.read([_sweep(tmp_path / "l", 0.5, [1, 2, 3], [1e-3, 2e-3], large)])
    table = contrast.strict_table(s, l, lr=2e-3)
    low, high = exact_interval(3, 3)
    assert (
        f"| infers, per seed at lr 0.002 | 3 of 3 [{low:.2f}, {high:.2f}] (1 with ID < 0.9) | 0 of 3 [0.00, {exact_interval(0, 3)[1]:.2f}] | p = 0.100: not separated at 3 vs 3 seeds |"
        in table
    )
    assert (
        "| copies, runs over 2 lrs (not independent; not tested) | 0 of 6" in table
        and f"| 6 of 6 [{exact_interval(6, 6)[0]:.2f}, 1.00] | - |" in table
    )


def test_the_gamma_slice_cells_and_the_flip_bar(tmp_path: Path) -> None:
    spec = StudySpec({"preset": "tiny", "task": "symmetric"}, {"seed": [1, 2, 3, 4], "gamma": [1.0, 0.5, 0.8]})
    folder = tmp_path / "slice"
    folder.mkdir()
    (folder / "sweep.json").write_text(json.dumps(spec.to_dict()))
    for job in spec.jobs(folder):
        gamma, seed = job.config.init.gamma, job.config.seed
        if gamma == 1.0:  # infers on seeds 1-3, peaking at 0.95 at epoch 1
            epochs = [{"inf": 0.95, "sym": 0.0}, *[{"inf": 0.9 if seed < 4 else 0.3, "sym": 0.0}] * 2]
        elif gamma == 0.5:  # copies on every seed
            epochs = [{"inf": 0.0, "sym": 1.0}] * 3
        else:
            epochs = [{"inf": 0.4, "sym": 0.2}] * 3
        _run(job.run_dir, job.config.to_dict(), epochs)
    cells = contrast.slice_cells([folder])
    depth = next(iter(cells))[0]
    assert set(cells) == {(depth, 1.0), (depth, 0.5), (depth, 0.8)}
    table, rules = contrast.slice_table(cells), contrast.slice_rules(cells)
    assert (
        f"| {depth} | 1 (0.0312) | 1, 2, 3, 4 | 3 of 4 [{exact_interval(3, 4)[0]:.2f}, {exact_interval(3, 4)[1]:.2f}] |"
        in table
    )
    assert (
        "0.95 (0.95, 0.95, 0.95, 0.95)" in table and "| 1.00 (1.00, 1.00, 1.00, 1.00) |" in table
    )  # best over epochs, not the last; the final ID (tiny: d_model 32, 32^-1)
    assert "gamma 1.0 infers on 3 of 4, gamma 0.5 copies on 4 of 4: met: a candidate preset" in rules
    # gamma 1.0 against 0.8: 3 of 4 against 0 of 4 is p = 0.143 (Fisher); the best shares 4 vs 4 all higher: 2 / C(8, 4)
    assert f"Fisher p = 0.143; best inferential 0.95 vs 0.40, Mann-Whitney p = {2 / comb(8, 4):.3f}: separated" in rules


def test_the_command_prints_both_and_refuses_a_mixed_slice_and_swapped_or_same_sides(tmp_path: Path) -> None:
    from click.testing import CliRunner

    s = _sweep(tmp_path / "s", 0.8, [1], [1e-3, 2e-3], lambda seed, lr: [FLAT] * 3)
    l = _sweep(tmp_path / "l", 0.5, [1], [1e-3], lambda seed, lr: [FLAT] * 3)
    out = CliRunner().invoke(contrast.main, ["fig2", "--small", str(s), "--large", str(l)])
    assert out.exit_code == 0 and "rule C1 (every epoch): not separated on either panel" in out.output
    bad = CliRunner().invoke(contrast.main, ["slice", str(s)])
    assert bad.exit_code == 1 and "runs at peak lrs [0.001, 0.002]; the slice reads one lr" in bad.output
    for command in (["fig2"], ["figure", "--out", str(tmp_path / "f.png")]):  # refused before any figure is drawn
        swapped = CliRunner().invoke(contrast.main, [*command, "--small", str(l), "--large", str(s)])
        assert swapped.exit_code == 1 and "--small is gamma 0.5, below --large's 0.8" in swapped.output
        same = CliRunner().invoke(contrast.main, [*command, "--small", str(s), "--large", str(s)])
        assert same.exit_code == 1 and "--small and --large are the same setting" in same.output
    assert not (tmp_path / "f.png").exists()


def test_the_figure_shows_each_seeds_pick_and_the_slice(tmp_path: Path) -> None:
    s = contrast.InitSweep.read(
        [_sweep(tmp_path / "s", 0.8, [1, 2], [1e-3], lambda seed, lr: [{"inf": 0.5 + seed / 10, "sym": 0.1}] * 3)]
    )
    l = contrast.InitSweep.read(
        [_sweep(tmp_path / "l", 0.5, [1, 2], [1e-3], lambda seed, lr: [{"inf": 0.1, "sym": 0.9}] * 3)]
    )
    fig = contrast.figure(s, l)
    seeds = {(t.name, t.xaxis): list(t.y) for t in fig.data if t.name.endswith("a seed")}
    assert seeds[("small init: a seed", "x2")] == pytest.approx([0.6, 0.7]) and seeds[
        ("large init: a seed", "x")
    ] == pytest.approx([0.9, 0.9])
    spec = StudySpec({"preset": "tiny", "task": "symmetric"}, {"seed": [1], "gamma": [1.0, 0.5]})
    folder = tmp_path / "slice"
    folder.mkdir()
    (folder / "sweep.json").write_text(json.dumps(spec.to_dict()))
    for job in spec.jobs(folder):
        _run(job.run_dir, job.config.to_dict(), [{"inf": job.config.init.gamma, "sym": 0.0}] * 3)
    heat = [t for t in contrast.figure(s, l, contrast.slice_cells([folder])).data if t.type == "heatmap"]
    assert [list(row) for row in heat[1].z] == [[0.5, 1.0]]  # (b): the best inferential share, gamma 0.5 and 1.0
