"""Aggregation (best over lr, mean/std over seeds), phases, figures and the phase-diagram command."""

from __future__ import annotations

import math
import runpy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from interp_init.tasks.anchor_pairs import ALL_PAIRS, task_spec
from training.cli import main
from training.studies.phase import (
    FIGURE_NAMES,
    FIGURES,
    add_phase,
    aggregate,
    best_over,
    classify_phase,
    fig_complexity_epochs,
    fig_journal_fig3a,
    fig_journal_fig3b,
    fig_journal_fig5c,
    fig_neurips_fig2,
    fig_pair_epochs,
    make_figures,
    supported_figures,
    write_html,
)
from training.studies.study import StudySpec
from training.studies.sweep import SweepOptions, load_preset, run_sweep
from training.studies.sweep.results import pair_column

NAN = math.nan


def _table(rows: list[dict], params: list[str]) -> pd.DataFrame:
    """A results-like table: ``run``, the parameter columns, then ``status`` and the metrics."""
    df = pd.DataFrame(rows)
    df.insert(0, "run", [f"r{i}" for i in range(len(df))])
    rest = [c for c in df.columns if c not in ("run", *params, "status")]
    return df[["run", *params, "status", *rest]]


# ------------------------------------------------------------------------ aggregation


def _lr_seed_table() -> pd.DataFrame:
    rows = [
        # gamma 0.3: seed 0 best 0.6 (lr 2e-4), seed 1 best 0.5 (lr 1e-4)
        dict(gamma=0.3, lr=1e-4, seed=0, status="completed", acc=0.2, other=0.9, epochs_to_loss=30.0),
        dict(gamma=0.3, lr=2e-4, seed=0, status="completed", acc=0.6, other=0.1, epochs_to_loss=20.0),
        dict(gamma=0.3, lr=1e-4, seed=1, status="completed", acc=0.5, other=0.3, epochs_to_loss=NAN),
        dict(gamma=0.3, lr=2e-4, seed=1, status="completed", acc=0.1, other=0.7, epochs_to_loss=40.0),
        # gamma 0.8: seed 0 best 0.9, seed 1 best 0.8 (its other lr has no value)
        dict(gamma=0.8, lr=1e-4, seed=0, status="completed", acc=0.9, other=0.2, epochs_to_loss=10.0),
        dict(gamma=0.8, lr=2e-4, seed=0, status="completed", acc=0.7, other=0.4, epochs_to_loss=12.0),
        dict(gamma=0.8, lr=1e-4, seed=1, status="completed", acc=NAN, other=NAN, epochs_to_loss=NAN),
        dict(gamma=0.8, lr=2e-4, seed=1, status="completed", acc=0.8, other=0.6, epochs_to_loss=14.0),
        # a failed run never counts, however good its numbers
        dict(gamma=0.8, lr=3e-4, seed=1, status="failed", acc=1.0, other=1.0, epochs_to_loss=1.0),
    ]
    return _table(rows, ["gamma", "lr", "seed"])


def test_figure_names_list_the_figures_in_order():
    """The command line's --figure choices (torch- and plotly-free) are the figures, in their order."""
    assert tuple(FIGURES) == FIGURE_NAMES


def test_aggregate_equals_a_hand_computation():
    agg = aggregate(_lr_seed_table(), ["acc", "other", "epochs_to_loss"]).set_index("gamma")
    assert list(agg.index) == [0.3, 0.8]  # the cell columns default to what varies besides lr and seed
    # acc: best over lr per seed, then mean and sample std over seeds
    assert agg.loc[0.3, "acc_mean"] == pytest.approx((0.6 + 0.5) / 2)
    assert agg.loc[0.3, "acc_std"] == pytest.approx(math.sqrt(((0.6 - 0.55) ** 2 + (0.5 - 0.55) ** 2) / 1))
    assert agg.loc[0.8, "acc_mean"] == pytest.approx((0.9 + 0.8) / 2)
    # other: its own best over lr (NeurIPS Fig. 2 selects each target separately)
    assert agg.loc[0.3, "other_mean"] == pytest.approx((0.9 + 0.7) / 2)
    assert agg.loc[0.8, "other_mean"] == pytest.approx((0.4 + 0.6) / 2)
    # epochs_to_*: fewer is better (minimum over lr); NaN = never reached, skipped
    assert agg.loc[0.3, "epochs_to_loss_mean"] == pytest.approx((20.0 + 40.0) / 2)
    assert agg.loc[0.8, "epochs_to_loss_mean"] == pytest.approx((10.0 + 14.0) / 2)
    assert list(agg["n_seeds"]) == [2, 2]


def test_best_over_with_a_target_reads_every_metric_from_the_chosen_lr():
    best = best_over(_lr_seed_table().query("status == 'completed'"), ["acc", "other"], cell=["gamma"], target="acc")
    got = {(r.gamma, r.seed): (r.lr, r.acc, r.other) for r in best.itertuples()}
    assert got == {
        (0.3, 0): (2e-4, 0.6, 0.1),
        (0.3, 1): (1e-4, 0.5, 0.3),
        (0.8, 0): (1e-4, 0.9, 0.2),
        (0.8, 1): (2e-4, 0.8, 0.6),
    }
    agg = aggregate(_lr_seed_table(), ["acc", "other"], cell=["gamma"], target="acc").set_index("gamma")
    assert agg.loc[0.3, "other_mean"] == pytest.approx((0.1 + 0.3) / 2)


def test_single_seed_has_nan_spread_and_constant_cell():
    df = _table([dict(gamma=0.5, seed=0, status="completed", acc=0.4)], ["gamma", "seed"])
    agg = aggregate(df, ["acc"])
    assert agg["acc_mean"].tolist() == [0.4] and math.isnan(agg["acc_std"][0]) and agg["n_seeds"].tolist() == [1]


# ----------------------------------------------------------------------------- phases


def test_phase_follows_the_spec_thresholds():
    ida = [0.0, 0.89, 0.899999, 0.9, 0.9, 0.95, 1.0, 0.5, NAN, 0.95]
    ood = [0.0, 0.9, 1.0, 0.5, 0.50001, 0.2, 1.0, NAN, 0.9, NAN]
    expected = [1, 1, 1, 2, 3, 2, 3, 1, pd.NA, pd.NA]
    got = classify_phase(ida, ood)
    assert got.dtype == "Int64"
    assert [None if pd.isna(v) else int(v) for v in got] == [None if v is pd.NA else v for v in expected]
    # thresholds are parameters
    assert classify_phase([0.85], [0.4], id_threshold=0.8, ood_threshold=0.3).tolist() == [3]
    with pytest.raises(ValueError, match="id_threshold"):
        classify_phase([0.5], [0.5], id_threshold=90)


def test_add_phase_uses_ood_or_inferential_columns():
    agg = pd.DataFrame({"id_acc_mean": [0.5, 0.95, 0.95], "ood_acc_mean": [0.9, 0.1, 0.8]})
    assert add_phase(agg)["phase"].tolist() == [1, 2, 3]
    sym = pd.DataFrame({"id_acc_mean": [0.95], "heldout_inferential_mean": [0.7]})
    assert add_phase(sym)["phase"].tolist() == [3]


# ---------------------------------------------------------------------------- figures


def _synthetic_results() -> pd.DataFrame:
    """A results table with runs of all three tasks, values chosen so each cell is known."""
    rows = []
    for gamma in (0.3, 0.5, 0.8):
        for depth in (2, 3):
            for seed in (0, 1):
                poor = gamma == 0.3 and depth == 3
                rows.append(
                    dict(
                        task="symmetric",
                        gamma=gamma,
                        n_layers=depth,
                        weight_decay=0.01,
                        k=0,
                        seed=seed,
                        status="completed",
                        id_acc=0.5 if poor else 0.99,
                        heldout_symmetric=1 - gamma,
                        heldout_inferential=gamma + 0.01 * seed,
                    )
                )
    for gamma in (0.4, 0.6, 0.8):
        for wd in (0.0, 0.1):
            for seed in (0, 1):
                rows.append(
                    dict(
                        task="id-ood",
                        gamma=gamma,
                        n_layers=2,
                        weight_decay=wd,
                        k=0,
                        seed=seed,
                        status="completed",
                        id_acc=0.5 if gamma == 0.4 else 0.95,
                        ood_acc=0.9 if (gamma == 0.8 and wd == 0.1) else 0.2,
                        commutativity=0.5 if gamma == 0.6 else 0.9,
                        stable_rank_wq0=10 * (1 - gamma) + wd,
                    )
                )
    for gamma in (0.3, 0.8):
        for depth in (2, 3):
            for k in (0, 1):
                for seed in (0, 1):
                    row = dict(
                        task="complexity",
                        gamma=gamma,
                        n_layers=depth,
                        weight_decay=0.01,
                        k=k,
                        seed=seed,
                        status="completed",
                        final_loss=0.01,
                        epochs_to_loss=10.0 * depth + 5 * k * (gamma == 0.8) + seed,
                    )
                    for a, b in ALL_PAIRS:
                        row[pair_column((a, b))] = (
                            3.0 + (5.0 if (a, b) in task_spec("complexity", k=k).offsets else 0.0) + seed
                        )
                    rows.append(row)
    return _table(rows, ["gamma", "k", "n_layers", "seed", "task", "weight_decay"])


def test_neurips_fig2_values_and_hatching():
    fig = fig_neurips_fig2(_synthetic_results())
    sym, inf = fig.data[0], fig.data[1]
    # z[depth index][gamma index]; gammas 0.3, 0.5, 0.8, depths 2, 3
    assert np.allclose(np.asarray(sym.z), [[0.7, 0.5, 0.2], [0.7, 0.5, 0.2]])
    assert np.allclose(np.asarray(inf.z), [[0.305, 0.505, 0.805]] * 2)
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(rects) == 2  # the one poor-ID cell, in both panels
    assert {(r.x0, r.y0) for r in rects} == {(-0.5, 0.5)}  # gamma index 0, depth index 1


def test_journal_figures_values_markers_and_phases():
    df = _synthetic_results()
    fig3a = fig_journal_fig3a(df, weight_decay=0.1)
    id_line, ood_line = fig3a.data
    assert list(id_line.x) == [0.4, 0.6, 0.8] and np.allclose(ood_line.y, [0.2, 0.2, 0.9])
    assert [a.text for a in fig3a.layout.annotations] == ["P1", "P2", "P3"]
    fig3b = fig_journal_fig3b(df)
    heat, triangles = fig3b.data
    assert np.allclose(np.asarray(heat.z), [[0.2, 0.2], [0.2, 0.2], [0.2, 0.9]])  # rows: gamma, cols: wd
    assert sorted(zip(triangles.x, triangles.y)) == [(0, 1), (1, 1)]  # commutativity < 0.7 at gamma 0.6
    assert len([s for s in fig3b.layout.shapes if s.type == "rect"]) == 2  # gamma 0.4: poor ID
    fig5c = fig_journal_fig5c(df)
    bubbles = fig5c.data[0]
    phases = {(x, y): size / 14 for x, y, size in zip(bubbles.x, bubbles.y, bubbles.marker.size, strict=True)}
    assert phases == {(0, 0): 1, (1, 0): 1, (0, 1): 2, (1, 1): 2, (0, 2): 2, (1, 2): 3}
    assert np.allclose(
        sorted(bubbles.marker.color), sorted(10 * (1 - g) + wd for g in (0.4, 0.6, 0.8) for wd in (0.0, 0.1))
    )


def test_complexity_figures():
    df = _synthetic_results()
    fig = fig_complexity_epochs(df)
    assert [a.text for a in fig.layout.annotations] == ["γ = 0.8 (small init)", "γ = 0.3 (large init)"]
    small_k1 = next(t for t in fig.data if t.name == "k = 1" and t.xaxis == "x")
    assert list(small_k1.x) == [2, 3] and np.allclose(small_k1.y, [20 + 5 + 0.5, 30 + 5 + 0.5])
    bars = fig_pair_epochs(df).data[0]
    broken = {f"({a},{b})" for a, b in task_spec("complexity", k=1).offsets}
    for label, colour, y in zip(bars.x, bars.marker.color, bars.y, strict=True):
        assert (colour == "crimson") == (label in broken)
        assert y == pytest.approx(8.5 if label in broken else 3.5)


def test_supported_figures_and_offline_html(tmp_path):
    df = _synthetic_results()
    anchor_figures = [name for name in FIGURES if name != "journal_fig7c"]  # the table has no addition runs
    assert supported_figures(df) == anchor_figures
    assert supported_figures(df[df["task"] == "symmetric"]) == ["neurips_fig2"]
    figures = make_figures(df)
    page = write_html(figures, tmp_path / "all.html")[0]
    html = page.read_text()
    assert "<script src" not in html  # nothing fetched from the network
    assert html.count("Plotly.newPlot") == len(anchor_figures) and len(html) > 1_000_000  # plotly.js inlined once
    files = write_html(figures, tmp_path / "figs")
    assert sorted(p.name for p in files) == sorted(f"{n}.html" for n in anchor_figures)
    assert all("<script src" not in p.read_text() for p in files)


def test_figure_refuses_an_extra_varying_parameter():
    df = _synthetic_results()
    df.loc[df.index[0], "weight_decay"] = 0.5  # a symmetric-task run with another weight decay
    with pytest.raises(ValueError, match="weight_decay"):
        fig_neurips_fig2(df)


# ---------------------------------------------------------------- CLI on real runs


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    # Four sweeps (one per task), each in its own folder (one sweep per folder), their run
    # folders then gathered into one folder (no sweep.json) that every figure can use.
    root = tmp_path_factory.mktemp("phase_sweep")
    out = root / "all"
    out.mkdir()
    base = {"preset": "tiny", "epochs": 2, "n_train": 1000, "n_test": 200, "eval_samples": 200}
    options = SweepOptions(progress=False)
    for task, grid in (
        ("symmetric", {"gamma": [0.3, 0.8], "n_layers": [1, 2]}),
        ("id-ood", {"gamma": [0.3, 0.8], "weight_decay": [0.0, 0.1]}),
        ("complexity", {"gamma": [0.3, 0.8], "k": [0, 1]}),
        ("addition", {"gamma": [0.3, 0.8], "weight_decay": [0.01, 1.0]}),
    ):
        run_sweep(StudySpec({**base, "task": task}, grid), root / task, options)
        for run in (root / task).iterdir():
            if run.is_dir():
                run.rename(out / run.name)
    return out


def test_phase_diagram_command_writes_every_supported_figure(sweep_dir, capsys):
    assert main(["phase-diagram", str(sweep_dir), "--out", str(sweep_dir / "figs")]) == 0
    assert "7 figure(s)" in capsys.readouterr().out
    assert sorted(p.name for p in (sweep_dir / "figs").iterdir()) == sorted(f"{n}.html" for n in FIGURES)
    assert main(["phase-diagram", str(sweep_dir), "--figure", "journal_fig5c"]) == 0
    assert "<script src" not in (sweep_dir / "phase_diagram.html").read_text()


def test_phase_diagram_command_with_no_runs(tmp_path, capsys):
    assert main(["phase-diagram", str(tmp_path)]) == 2
    assert "no completed runs" in capsys.readouterr().err


# ------------------------------------------------------------------- the walkthroughs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("script", ["phase_neurips_fig2.py", "phase_journal_fig3.py", "phase_complexity.py"])
def test_walkthrough_runs_at_tiny_scale(script, tmp_path, capsys):
    module = runpy.run_path(str(EXAMPLES / script), run_name="walkthrough")
    assert load_preset(module["PRESET"]).preset == "cpu"  # the real walkthrough uses the cpu run preset
    out = module["main"](["--out", str(tmp_path), "--preset", "tiny", "--quiet"])
    assert out.is_file() and "<script src" not in out.read_text()
    table = pd.read_csv(tmp_path / "results.csv")
    assert len(table) == 4 and (table["status"] == "completed").all() and (table["preset"] == "tiny").all()
    assert "phase" in capsys.readouterr().out or script == "phase_complexity.py"
