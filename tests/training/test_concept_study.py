"""The concept-graph study (Fig. 6 at CPU scale): one command trains a tiny row through the
executor and writes its table, summary and figure; the reading and the pre-registered rule
against hand computations; the PNG against an independent decoder; bad specs refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from training.cli import main
from training.studies.concept_graphs import (
    MIN_SEEDS,
    VALID_ID_ACC,
    ConceptStudySpec,
    drawn_sentence,
    gamma_row,
    png_bytes,
)
from training.studies.population import exact_interval


def _final(share_010: float, share_011: float, id_acc: float = 0.9, n: int = 10) -> dict:
    unseen = {
        c: {"shape_acc": s, "size_acc": 1.0, "colour_acc": 1.0, "all_acc": s, "empty": 0.0, "n": n}
        for c, s in (("010", share_010), ("011", share_011))
    }
    return {"id_acc": id_acc, "unseen": unseen}


def test_one_command_trains_a_tiny_row_and_writes_its_table_and_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps({"size": "tiny", "gammas": [0.5, 1.0], "seeds": [1, 2], "figure_samples": 6, "judge_per_code": 5})
    )  # more figure samples than the 4 a tiny run draws: the figure shows those 4
    out = tmp_path / "study"
    assert main(["concept-graphs", str(spec), "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "| 0.5 |" in printed and "| 1 |" in printed and "The judge (read_concepts) on 40 held renders" in printed
    summary = json.loads((out / "fig6-summary.json").read_text())
    assert [r["gamma"] for r in summary["rows"]] == [0.5, 1.0] and all(r["completed"] == 2 for r in summary["rows"])
    for name in ("gamma-0.5-seed-1", "gamma-0.5-seed-2", "gamma-1-seed-1", "gamma-1-seed-2"):
        assert json.loads((out / name / "metrics.json").read_text())["status"] == "completed"
    assert json.loads((out / "study.json").read_text())["kind"] == "concept-graphs"
    assert (out / "fig6b.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    # two rows of 16-pixel images 2 apart; per row 2 tuples x 4 samples, 8 pixels between the tuples
    assert Image.open(out / "fig6b.png").size == (2 * 4 * (16 + 2) + 8 + 2, 2 * (16 + 2) + 2)
    stamp = (out / "gamma-1-seed-2" / "model.safetensors").stat().st_mtime_ns
    assert main(["concept-graphs", str(spec), "--out", str(out), "--quiet", "--no-figure"]) == 0  # a rerun reads
    assert (out / "gamma-1-seed-2" / "model.safetensors").stat().st_mtime_ns == stamp
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"size": "tiny", "gammas": [0.5], "seeds": [3], "judge_per_code": 5}))
    capsys.readouterr()
    assert main(["concept-graphs", str(other), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "another spec" in err or "not one of them" in err
    assert main(["phase-diagram", str(out)]) == 2  # a transformer command names what the folder is
    assert f"{out} is a concept-graphs study, not a sweep" in capsys.readouterr().err
    assert not (out / "phase_diagram.html").exists()


def test_the_reading_and_the_rule_by_hand() -> None:
    # three counted seeds, all mostly triangles; one seed below the id_acc gate is left out
    row = gamma_row(
        0.5,
        {
            1: _final(0.1, 0.3),
            2: _final(0.0, 0.2),
            3: _final(0.2, 0.2),
            4: _final(1.0, 1.0, id_acc=VALID_ID_ACC - 0.01),
            5: None,
        },
    )
    assert row.runs == 5 and row.completed == 4 and row.counted == (1, 2, 3)
    assert row.shares[1]["mean"] == pytest.approx(0.2) and row.mean == pytest.approx((0.2 + 0.1 + 0.2) / 3)
    assert (
        row.bootstrap[0] >= 0.1 - 1e-12 and row.bootstrap[1] <= 0.2 + 1e-12
    )  # the mean of resampled seeds stays between them
    assert row.pooled == (1 + 3 + 0 + 2 + 2 + 2, 60) and row.pooled_interval == pytest.approx(exact_interval(10, 60))
    assert row.circle_seeds == 0 and row.circle_seeds_interval == pytest.approx(exact_interval(0, 3))
    assert row.state == "failure mode (triangles)"
    circles = gamma_row(1.0, {s: _final(0.9, 0.8) for s in range(MIN_SEEDS)})
    assert circles.state == "no failure mode (circles)" and circles.bootstrap == pytest.approx((0.85, 0.85))
    assert gamma_row(1.0, {s: _final(0.9, 0.8) for s in range(MIN_SEEDS - 1)}).state == "inconclusive"
    assert gamma_row(1.0, {1: _final(0.0, 0.0), 2: _final(1.0, 1.0), 3: _final(0.5, 0.5)}).state == "undecided"


def test_what_every_completed_run_drew_is_counted_post_hoc_by_hand() -> None:
    def cell(n: int, empty: float, shape: float, size: float) -> dict:
        return {"shape_acc": shape, "size_acc": size, "colour_acc": shape, "all_acc": 0.0, "empty": empty, "n": n}

    counted = {"id_acc": 0.9, "unseen": {"010": cell(10, 0.5, 0.3, 0.1), "011": cell(10, 0.2, 0.8, 0.0)}}
    below = {"id_acc": 0.1, "unseen": {"010": cell(10, 1.0, 0.0, 0.0), "011": cell(10, 0.9, 0.1, 0.1)}}
    row = gamma_row(0.5, {1: counted, 2: below, 3: None})
    # samples 40; objects 5 + 8 + 0 + 1; circles 3 + 8 + 0 + 1; small 1 + 0 + 0 + 1 (the gate does not apply)
    assert row.counted == (1,) and row.drawn == (40, 14, 12, 2)
    blank = gamma_row(1.0, {1: below | {"unseen": {c: cell(4, 1.0, 0.0, 0.0) for c in ("010", "011")}}})
    assert blank.drawn == (8, 0, 0, 0)
    assert drawn_sentence([row, blank, gamma_row(1.5, {1: None})]) == (
        "Post hoc, read by no rule (every completed run, counted or not; 010 and 011 are small circles): "
        "gamma 0.5 (2 runs): 35% of 40 samples show an object, of those 86% circles and 14% small; "
        "gamma 1 (1 run): 0% of 8 samples show an object, none; gamma 1.5: no completed run."
    )


def test_the_figure_png_decodes_to_its_pixels() -> None:
    image_module = pytest.importorskip("PIL.Image")
    import io

    rng = np.random.default_rng(0)
    image = rng.random((5, 7, 3))
    decoded = np.asarray(image_module.open(io.BytesIO(png_bytes(image))).convert("RGB"))
    assert decoded.shape == (5, 7, 3)
    assert np.array_equal(decoded, np.round(image * 255).astype(np.uint8))
    with pytest.raises(ValueError, match="RGB image"):
        png_bytes(np.zeros((4, 4)))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"gammas": [0.5], "seeds": [1], "colour": 1}', "unknown key(s) ['colour']"),
        ('{"gammas": [], "seeds": [1]}', "gammas must be distinct and at least one"),
        ('{"gammas": [0.5], "seeds": [1, 1]}', "seeds must be distinct"),
        ('{"gammas": [-1], "seeds": [1]}', "gamma must be a finite positive number"),
        ('{"gammas": [0.5], "seeds": [1], "size": "huge"}', "unknown diffusion size"),
        ('{"gammas": [0.5], "seeds": [1], "train": {"epoch": 2}}', "unknown training option"),
        ("[1, 2]", "a concept-graph study spec is a JSON object"),
    ],
)
def test_a_bad_spec_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(content)
    with pytest.raises(ValueError, match="spec.json") as err:
        ConceptStudySpec.from_file(spec)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert main(["concept-graphs", str(spec), "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_a_bad_size_option_is_refused_naming_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"size": "tiny", "gammas": [0.5], "seeds": [1]}))
    assert main(["concept-graphs", str(spec), "--size", "huge", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "Invalid value for '--size': unknown diffusion size 'huge'" in err and not (tmp_path / "out").exists()


def test_the_ensemble_backend_is_refused_in_one_line_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"size": "tiny", "gammas": [0.5], "seeds": [1], "judge_per_code": 5}))
    out = tmp_path / "out"
    assert main(["concept-graphs", str(spec), "--out", str(out), "--backend", "ensemble", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "the ensemble backend trains 'transformer' runs only" in err and "'concept-diffusion' run" in err
    assert "use the local backend (--backend local)" in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_the_shipped_study_is_the_preregistered_row() -> None:
    spec = ConceptStudySpec.from_file(
        Path(__file__).parents[2] / "experiments/population-specs/concept-graphs-fig6.json"
    )
    assert 0.5 in spec.gammas and spec.distribution == "uniform" and len(spec.seeds) >= 4 and spec.size == "cpu"
    configs = spec.configs()
    assert len(configs) == len(spec.gammas) * len(spec.seeds)
    assert {c.init.gamma for c in configs.values()} == set(spec.gammas)


def _exit(script: object, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        script.main(argv)  # type: ignore[attr-defined]
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


def test_a_stored_study_writes_the_docs_table_and_readme_line_from_its_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from helpers import load_script

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"size": "tiny", "gammas": [0.5, 1.0], "seeds": [1, 2, 3], "judge_per_code": 5}))
    src = tmp_path / "study"
    assert main(["concept-graphs", str(spec), "--out", str(src), "--quiet", "--no-figure"]) == 0
    # tiny runs draw noise: give their records hand readings (the digests bind weights and config, not these numbers)
    hand = {0.5: (0.125, 0.25, 0.0), 1.0: (1.0, 0.75, 0.875)}  # right-shape shares, both unseen tuples alike
    for gamma, shares in hand.items():
        for seed, share in zip((1, 2, 3), shares, strict=True):
            path = src / f"gamma-{gamma:g}-seed-{seed}" / "metrics.json"
            metrics = json.loads(path.read_text())
            metrics["final"] = _final(share, share, n=8) | {"seen": metrics["final"]["seen"]}
            metrics["elapsed_s"] = 60.0 * seed
            path.write_text(json.dumps(metrics))
    capsys.readouterr()
    records = tmp_path / "records"
    dest = records / "concept-graphs-fig6"
    info = [
        "--command",
        "interp-init concept-graphs spec.json",
        "--commit",
        "0a771b5",
        "--machine",
        "m",
        "--beside",
        "the tests",
    ]
    code, out, err = _exit(load_script("experiments/store.py"), [str(src), str(dest), *info], capsys)
    assert code == 0, err
    assert "stored 6 runs (6 completed) of the concept-graphs study" in out
    kept = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert "concept-graphs.json" in kept and "fig6-summary.json" in kept and "study.json" in kept
    assert not [f for f in kept if f.endswith((".safetensors", ".pt"))]
    assert {p.name for p in (dest / "gamma-1-seed-2").iterdir()} == {"config.json", "metrics.json", "stored.json"}
    assert "Left behind**: model.safetensors (6 files" in (dest / "STUDY.md").read_text()
    # the pages: a README line and the docs table, written from the stored records
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "README.md").write_text("# r\n\n<!-- table:readme-fig6 -->\n<!-- /table:readme-fig6 -->\n")
    (root / "docs" / "concept-graphs.md").write_text(
        "# c\n\n<!-- table:fig6-concept-graphs -->\n<!-- /table:fig6-concept-graphs -->\n"
    )
    tables = load_script("experiments/tables.py")
    code, out, err = _exit(tables, ["--root", str(root), "--records", str(records)], capsys)
    assert code == 0, err
    page = (root / "docs" / "concept-graphs.md").read_text()
    low = np.mean([0.125, 0.25, 0.0])
    assert f"| 0.5 | 3 / 3 / 3 | {low:.2f} [" in page and "| 1 | 3 / 3 / 3 | 0.88 [" in page  # (1 + .75 + .875) / 3
    assert "0/3 [0.00, 0.71] | 0.00 | 0.90 | failure mode (triangles) |" in page
    assert "3/3 [0.29, 1.00] | 0.00 | 0.90 | no failure mode (circles) |" in page
    assert "Minutes a run (its `elapsed_s`: training and the judged samples): median 2, range 1-3, over 6" in page
    assert "on 40 held renders" in page  # the judge, as the stored summary records it
    assert "as in the journal's Fig. 6B" in page
    assert "gamma 0.5 (3 runs): 100% of 48 samples show an object, of those " in page and "and 100% small" in page
    readme = (root / "README.md").read_text()
    assert "seeds 1, 2, 3): At gamma 0.5: failure mode (triangles); at gamma 1: no failure mode (circles)." in readme
    assert (
        "gamma 0.5: 0.12 (3 of 3 seeds counted, id_acc 0.90); gamma 1: 0.88 (3 of 3 seeds counted, id_acc 0.90)."
        in readme
    )
    assert _exit(tables, ["--root", str(root), "--records", str(records), "--check"], capsys)[0] == 0
    # the gate pilots' block: each run's schedule and id_acc against the gate, once both pilots are stored
    (root / "docs" / "concept-graphs.md").write_text("# c\n\n<!-- table:fig6-gate -->\n<!-- /table:fig6-gate -->\n")
    pilots = load_script("experiments/results_tables.py").FIG6_GATES
    for gate in pilots:
        assert _exit(load_script("experiments/store.py"), [str(src), str(records / gate), *info], capsys)[0] == 0
    assert _exit(tables, ["--root", str(root), "--records", str(records)], capsys)[0] == 0
    gates = [line for line in (root / "docs" / "concept-graphs.md").read_text().splitlines() if line.startswith("- ")]
    assert len(gates) == 6 * len(pilots)  # each pilot stored here is the six-run study
    seen = json.loads((src / "gamma-1-seed-3" / "metrics.json").read_text())["final"]["seen"]
    empty = np.mean([v["empty"] for v in seen.values()])
    assert gates[5] == (
        "- `concept-graphs-gate-1`: gamma 1, seed 3, lr 0.001, 2 epochs (4 steps): id_acc 0.90, passes the gate "
        f"(>= 0.75); no-object samples of the training tuples {empty:.2f}; 3 minutes"
    )
