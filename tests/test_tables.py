"""The results tables of README.md and docs/ against the stored records (experiments/tables.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ROOT, load_script

from interp_init.stored import STORED_FILE, STORED_FORMAT, STORED_STUDY_FILE, STUDY_FORMAT
from training.studies.population import REPRODUCTION_FILE, exact_interval, reproduction_record
from training.studies.study import StudySpec

tables = load_script("experiments/tables.py")
results_tables = load_script("experiments/results_tables.py")


def _content(arg: str) -> str:
    """A benchmark argument as its output depends on it: a folder by its files' names and bytes."""
    folder = Path(arg)
    if not folder.is_dir():
        return arg
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(autouse=True, scope="module")
def _benchmarks_run_once() -> Iterator[None]:
    """What each benchmark script prints (a generator's input: ``results_tables._benchmark``),
    run once for this module's several tables runs: keyed by its arguments, a folder argument by
    its contents, so a repository copy's campaign records read as the repository's."""
    real, printed = results_tables._benchmark, {}

    def once(*args: str) -> str:
        key = tuple(map(_content, args))
        if key not in printed:
            printed[key] = real(*args)
        return printed[key]

    patch = pytest.MonkeyPatch()
    patch.setattr(results_tables, "_benchmark", once)
    yield
    patch.undo()


def _check(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        tables.main(["--root", str(root), *args])
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


def test_the_repository_agrees_with_its_records(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _check(ROOT, capsys, "--check")
    assert code == 0, err
    assert "0 problems" in out and "not checkable (history, typed by hand)" in out


def _repository_copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "experiments").mkdir(parents=True)
    shutil.copy(ROOT / "README.md", root)
    shutil.copytree(ROOT / "docs", root / "docs", ignore=shutil.ignore_patterns("*.png", "reference"))
    shutil.copytree(ROOT / "experiments" / "results", root / "experiments" / "results")
    return root


def test_an_edited_number_fails_the_check_naming_its_table_and_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repository_copy(tmp_path)
    page = root / "docs" / "faithful-models.md"
    text = page.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| small init (0.8), seed 1 |"))
    page.write_text(text.replace(row, row.replace("| 0.00 / 0.97 |", "| 0.00 / 0.98 |")))
    results = root / "docs" / "results.md"
    results.write_text(results.read_text().replace("for 94 of its 210 epochs", "for 95 of its 210 epochs", 1))
    code, _, err = _check(root, capsys, "--check")
    assert code == 1
    assert (
        'docs/faithful-models.md: table gpu-race: row "small init (0.8), seed 1", column "inf / sym at epoch 94": typed "0.00 / 0.98", the records give "0.00 / 0.97"'
        in err
    )
    said = next(line for line in err.splitlines() if "docs/results.md: text readme-gpu: line 1: typed" in line)
    assert (
        "0-2 for 95 of its 210 epochs" in said.split("the records give")[0]
        and "0-2 for 94 of its 210 epochs" in said.split("the records give")[1]
    )
    assert _check(root, capsys)[0] == 0  # the generator writes them back
    assert _check(root, capsys, "--check")[0] == 0 and page.read_text() == text


def _metrics(task: str, numbers: dict[str, float], epochs: int = 2) -> dict:
    """A completed run's metrics.json whose every epoch has ``numbers``."""
    final = {
        "train_acc": 1.0,
        "id_acc": numbers.get("id", 1.0),
        "per_pair": {"1,1": 1.0, "3,4": numbers.get("exception", 1.0)},
    }
    if task == "symmetric":
        final["heldout"] = {"4,3": {"inferential": numbers["inf"], "symmetric": numbers["sym"]}}
    else:
        final.update(ood_acc=numbers["ood"], commutativity=1.0)
    history = [{"epoch": e, "step": 10 * e, "loss": 0.01, "lr": 1e-3, **final} for e in range(1, epochs + 1)]
    return {"status": "completed", "final": final, "history": history}


def _mark(run: Path, config: dict, metrics: dict) -> None:
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(config))
    (run / "metrics.json").write_text(json.dumps(metrics))
    (run / STORED_FILE).write_text(json.dumps({"format": STORED_FORMAT, "weights_sha256": None}))


#: Three seeds' small-init symmetric numbers: one infers with (3,4) fitted, one at 0.85 with
#: (3,4) unfitted (the reading without the condition counts it, the criterion does not), one copies.
SMALL = {
    1: {"inf": 0.9, "sym": 0.0, "exception": 0.95},
    2: {"inf": 0.85, "sym": 0.0, "exception": 0.5},
    3: {"inf": 0.0, "sym": 1.0},
}


def _stored_verification(records: Path) -> None:
    spec = StudySpec.reproduction("tiny", (1, 2, 3))
    study = records / results_tables.STUDY_NAMES["verification"]
    for job in spec.jobs(study):
        numbers = (
            SMALL[job.seed]
            if (job.task, job.point) == ("symmetric", "small-init")
            else {"inf": 0.0, "sym": 1.0, "ood": 0.1 if job.point == "large-init" else 0.9}
        )
        _mark(job.run_dir, job.config.to_dict(), _metrics(job.task, numbers, job.config.train.epochs))
    (study / REPRODUCTION_FILE).write_text(json.dumps(reproduction_record(spec)))
    (study / STORED_STUDY_FILE).write_text(json.dumps({"format": STUDY_FORMAT, "kind": "reproduction"}))


def _stored_as_sweep(study: Path, spec: StudySpec) -> None:
    """Mark ``study`` (its run folders written) as a stored sweep of ``spec``."""
    (study / "sweep.json").write_text(json.dumps(spec.to_dict()))
    (study / STORED_STUDY_FILE).write_text(json.dumps({"format": STUDY_FORMAT, "kind": "sweep"}))


def _stored_paper_statistic(records: Path) -> None:
    """A seed x lr sweep: seed 1's best inferential 0.9 with (3,4) fitted, seed 2's 0.7."""
    spec = StudySpec({"preset": "tiny", "task": "symmetric", "gamma": 0.8}, {"seed": [1, 2], "lr": [1e-3, 2e-3]})
    study = records / results_tables.STUDY_NAMES["paper-statistic"]
    for job in spec.jobs(study):
        best = {1: 0.9, 2: 0.7}[job.config.seed] if job.config.train.lr == 1e-3 else 0.1
        _mark(
            job.run_dir,
            job.config.to_dict(),
            _metrics("symmetric", {"inf": best, "sym": 0.0, "exception": 0.95}, job.config.train.epochs),
        )
    _stored_as_sweep(study, spec)


def _rows(page: Path) -> list[list[str]]:
    """The table rows of ``page`` (header rows included, separators not), cells stripped."""
    return [
        [c.strip() for c in line.strip("|").split(" | ")]
        for line in page.read_text().splitlines()
        if line.startswith("| ") and "---" not in line
    ]


def _rate(k: int, n: int) -> str:
    return "{} of {} [{:.2f}, {:.2f}]".format(k, n, *exact_interval(k, n))


def test_the_main_table_from_stored_records_has_both_readings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, records = tmp_path / "repo", tmp_path / "records"
    (root / "docs").mkdir(parents=True)
    _stored_verification(records)
    (root / "README.md").write_text("# r\n\n<!-- table:readme-verification -->\n<!-- /table:readme-verification -->\n")
    code, out, _ = _check(root, capsys, "--records", str(records))
    assert (
        code == 0 and "readme-verification in part (awaits" in out and "paper-statistic-401-403" in out
    )  # one of its two studies is missing ...
    assert "not stored yet" in (root / "README.md").read_text()  # ... and its row says so
    assert _check(root, capsys, "--records", str(records), "--check")[0] == 0  # checkable in part, which passes ...
    assert (
        _check(root, capsys, "--records", str(records), "--check", "--require-records")[0] == 1
    )  # ... unless records are required
    _stored_paper_statistic(records)
    assert _check(root, capsys, "--records", str(records))[0] == 0
    lines = (root / "README.md").read_text().splitlines()
    rows = {
        line.split(" | ")[0].lstrip("| "): line.strip("|").split(" | ")
        for line in lines
        if line.startswith("| ") and "---" not in line
    }
    strict = rows["symmetric: small-init inferential >= 0.8 with (3,4) fitted"]
    loose = next(
        v for k, v in rows.items() if k.startswith("symmetric: small-init inferential >= 0.8 whatever (3,4) does")
    )
    assert strict[1].strip("* ") == _rate(1, 3) and loose[1].strip("* ") == _rate(2, 3)  # seed 1; seeds 1 and 2
    assert (
        strict[2].strip() == "early copy: 3; under-trained: 2"
    )  # seed 2: (3,4) not fitted, so the race's under-trained
    assert loose[2].strip() == "early copy: 3"
    paper = next(v for k, v in rows.items() if k.startswith("the papers' statistic"))
    assert "over 2 lrs and epochs, mean of 2 seeds (1, 2)" in paper[0]
    assert (
        paper[1].strip()
        == f"0.80 (per seed 0.90, 0.70; 0.80 on the epochs the released scripts log, -pae 3); >= 0.8 at the pick: {_rate(1, 2)}; with (3,4) fitted at the pick: **{_rate(1, 2)}**"
    )
    assert _check(root, capsys, "--records", str(records), "--check")[0] == 0


def _stored_sweep(records: Path, role: str, numbers: dict[tuple[int, float], dict[str, float]]) -> None:
    """A stored seed x gamma sweep under the name of ``role`` whose runs end with ``numbers``."""
    seeds, gammas = sorted({s for s, _ in numbers}), sorted({g for _, g in numbers}, reverse=True)
    spec = StudySpec({"preset": "tiny", "task": "symmetric"}, {"seed": seeds, "gamma": gammas})
    study = records / results_tables.STUDY_NAMES[role]
    for job in spec.jobs(study):
        _mark(
            job.run_dir,
            job.config.to_dict(),
            _metrics("symmetric", numbers[job.config.seed, job.config.init.gamma], job.config.train.epochs),
        )
    _stored_as_sweep(study, spec)


def test_the_positive_control_tables_count_strictly_and_test_causes_that_are_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, records = tmp_path / "repo", tmp_path / "records"
    (root / "docs").mkdir(parents=True)
    infers, unfitted, copies = (
        {"inf": 0.9, "sym": 0.0, "exception": 0.95},
        {"inf": 0.85, "sym": 0.0, "exception": 0.5},
        {"inf": 0.0, "sym": 1.0},
    )
    _stored_sweep(
        records,
        "pc",
        {(1, 0.8): infers, (2, 0.8): infers, (3, 0.8): unfitted, (1, 0.5): copies, (2, 0.5): copies, (3, 0.5): infers},
    )
    page = root / "docs" / "positive-control.md"
    page.write_text(
        "<!-- table:pc-main -->\n<!-- /table:pc-main -->\n\n<!-- table:pc-causes -->\n<!-- /table:pc-causes -->\n"
    )
    code, out, _ = _check(root, capsys, "--records", str(records))
    assert code == 0 and "pc-causes in part" in out
    rows = _rows(page)
    small, large = (
        next(r for r in rows if r[0].startswith("small init (gamma 0.8)") and len(r) == 6),
        next(r for r in rows if r[0].startswith("large init")),
    )
    assert (small[1], small[2], small[3], small[4]) == (
        "3",
        _rate(2, 3),
        _rate(3, 3),
        _rate(0, 3),
    )  # seed 3: (3,4) unfitted counts only without the condition
    assert large[4] == _rate(2, 3)
    causes = {r[0]: r for r in rows if len(r) == 5}
    assert causes["depth 2, the lr held (20 epochs)"][4].strip() == "not trained yet"
    _stored_sweep(records, "pc-depth2-const", {(s, 0.8): copies if s < 3 else infers for s in (1, 2, 3)})
    depth2 = root / "docs" / "depth2.md"
    depth2.write_text("<!-- table:pc-depth2 -->\n<!-- /table:pc-depth2 -->\n")
    assert _check(root, capsys, "--records", str(records))[0] == 0
    causes = {r[0]: r for r in _rows(page) if len(r) == 5}
    assert (
        causes["depth 2, the lr held (20 epochs)"][4].strip() == "p = 1.000: not separated at 3 seeds"
    )  # Fisher: 2 of 3 against 1 of 3
    assert causes["depth 4, the lr held (20 epochs)"][4].strip() == "not trained yet"
    rows = {r[0]: r for r in _rows(depth2)}
    assert rows["small init (gamma 0.8)"][1:5] == ["3", _rate(1, 3), _rate(1, 3), _rate(2, 3)]
    assert rows["large init (gamma 0.5)"][1:] == [
        "0",
        "-",
        "-",
        "-",
        "not trained yet",
    ]  # rule 5's large init, until stored
    _stored_sweep(records, "pc-depth2-const-large", {(s, 0.5): copies for s in (1, 2)})
    assert _check(root, capsys, "--records", str(records))[0] == 0
    large = next(r for r in _rows(depth2) if r[0] == "large init (gamma 0.5)")
    assert (
        large[1:5] == ["2", _rate(0, 2), _rate(0, 2), _rate(2, 2)]
        and large[5] == "1: 0.00 / 1.00 (1.00), 2: 0.00 / 1.00 (1.00)"
    )


def test_the_papers_statistic_is_read_on_every_epoch_and_on_the_logged_ones_with_the_runs_modes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, records = tmp_path / "repo", tmp_path / "records"
    (root / "docs").mkdir(parents=True)
    spec = StudySpec({"preset": "tiny", "task": "symmetric", "gamma": 0.8}, {"seed": [1, 2], "lr": [1e-3, 2e-3]})
    study = records / results_tables.STUDY_NAMES["paper-statistic"]
    for job in spec.jobs(study):  # 3 epochs; the released scripts' -pae 3 logs epoch 2 only
        seed, lr = job.config.seed, job.config.train.lr
        if (seed, lr) == (1, 1e-3):  # infers at its last epoch, 0.6 at the logged epoch 2
            epochs = {1: {"inf": 0.2, "sym": 0.0}, 2: {"inf": 0.6, "sym": 0.0}, 3: {"inf": 0.9, "sym": 0.0}}
        elif (seed, lr) == (2, 2e-3):  # copies
            epochs = {e: {"inf": 0.0, "sym": 1.0} for e in (1, 2, 3)}
        else:  # answers neither, settled from epoch 2 on: 0.3 at epoch 1
            epochs = {e: {"inf": 0.3 if e == 1 else 0.1, "sym": 0.0} for e in (1, 2, 3)}
        metrics = _metrics("symmetric", epochs[3], 3)
        for row in metrics["history"]:
            row["heldout"] = {
                "4,3": {"inferential": epochs[row["epoch"]]["inf"], "symmetric": epochs[row["epoch"]]["sym"]}
            }
        _mark(job.run_dir, job.config.to_dict(), metrics)
    _stored_as_sweep(study, spec)
    page = root / "docs" / "page.md"
    page.write_text(
        "<!-- table:paper-statistic -->\n<!-- /table:paper-statistic -->\n\nRace: <!-- text:paper-statistic-modes --><!-- /text:paper-statistic-modes -->.\n"
    )
    assert _check(root, capsys, "--records", str(records))[0] == 0
    text = page.read_text()
    every, logged = text.split("--logged-every 3`")
    assert "`python experiments/paper_statistic.py experiments/results/paper-statistic-401-403`" in every
    assert (
        "| 1 | 2 | 1.00 (lr 0.001, epoch 1) | 0.90 (lr 0.001, epoch 3) |" in every
        and "| 2 | 2 | 1.00 (lr 0.001, epoch 1) | 0.30 (lr 0.001, epoch 1) |" in every
    )
    assert (
        "| 1 | 2 | 1.00 (lr 0.001, epoch 2) | 0.60 (lr 0.001, epoch 2) |" in logged
        and "| mean over seeds | | 1.00 | 0.35 |" in logged
    )
    assert (
        f"inferential >= 0.8 at some lr and epoch: 1 of 2 seeds [{exact_interval(1, 2)[0]:.2f}, {exact_interval(1, 2)[1]:.2f}]"
        in every
    )
    assert (
        "at some lr and epoch: 0 of 2 seeds" in logged
        and "epochs read: those the released scripts log with -pae 3 (epochs 3, 6, 9, ... and the next-to-last)"
        in logged
    )
    assert (
        "-->at the last epoch, over all 4 runs: 1 infer (seed 1, lr=0.001), 1 copy (seed 2, lr=0.002), 2 answer neither, 0 are under-trained<!--"
        in text
    )  # by hand
    assert _check(root, capsys, "--records", str(records), "--check")[0] == 0


def test_history_blocks_and_bad_markers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    page = root / "docs" / "page.md"
    page.write_text("<!-- history:old-runs typed at abc1234 -->\n\n| a |\n|---|\n| 1 |\n\n<!-- /history:old-runs -->\n")
    code, out, err = _check(root, capsys, "--check")
    assert code == 1 and "its note is missing or stale" in err
    assert _check(root, capsys)[0] == 0
    assert tables.HISTORY_NOTE.format(commit="abc1234") in page.read_text() and "| 1 |" in page.read_text()
    code, out, _ = _check(root, capsys, "--check")
    assert code == 0 and "not checkable (history, typed by hand): 1 blocks (docs/page.md 1; --list names them)" in out
    assert (
        "block docs/page.md: history old-runs (typed at abc1234): history, not checkable"
        in _check(root, capsys, "--list")[1]
    )
    for bad, said in (
        ("<!-- history:x -->\n<!-- /history:x -->", "says when it was typed"),
        ("<!-- table:no-such -->\n<!-- /table:no-such -->", "no generator of that name"),
        ("<!-- table:gpu-race -->\n", "has no matching opening or closing marker"),
        ("<!-- history:gpu-race typed at abc1234 -->\n<!-- /history:gpu-race -->", "cannot be history"),
    ):
        page.write_text(bad)
        code, _, err = _check(root, capsys, "--check")
        assert code == 1 and said in err, (bad, err)


def test_where_the_strict_answer_appears_lists_each_stored_study_with_its_closest_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, records = tmp_path / "repo", tmp_path / "records"
    (root / "docs").mkdir(parents=True)
    _stored_verification(records)
    (root / "README.md").write_text("<!-- table:strict-breadth -->\n<!-- /table:strict-breadth -->\n")
    code, out, _ = _check(root, capsys, "--records", str(records))
    assert code == 0 and "strict-breadth in part" in out  # the positive control is not stored here
    rows = _rows(root / "README.md")[1:]
    assert len(rows) == 1 and rows[0][0].startswith("verify-cpu-201-208: `tiny`, depth ")
    assert rows[0][1:] == [
        "1-3",
        _rate(1, 3),
        _rate(2, 3),
        "0.90 (seed 1, (3,4) 0.95)",
    ]  # small init only: the verification's SMALL
    _stored_sweep(records, "pc", {(1, 0.8): {"inf": 0.2, "sym": 0.0}, (1, 0.5): {"inf": 0.95, "sym": 0.0}})
    assert _check(root, capsys, "--records", str(records))[0] == 0
    rows = _rows(root / "README.md")[1:]
    assert rows[1][0].startswith("pc-depth3-const:") and rows[1][1:] == [
        "1",
        _rate(0, 1),
        _rate(0, 1),
        "0.20 (seed 1, (3,4) 1.00)",
    ]  # large init's 0.95 is not small init's
    _stored_paper_statistic(
        records
    )  # seeds 1-2 x lrs 1e-3, 2e-3: 0.9 (seed 1) and 0.7 at 1e-3, 0.1 at 2e-3, (3,4) 0.95
    assert _check(root, capsys, "--records", str(records))[0] == 0
    rows = _rows(root / "README.md")[1:]
    assert rows[1][0].startswith("paper-statistic-401-403: `tiny`, depth 2, peak lr 0.001-0.002 (2 lrs), ")
    assert rows[1][1:] == ["1, 2 x 2 lrs (4 runs)", _rate(1, 4), _rate(1, 4), "0.90 (seed 1, lr 0.001, (3,4) 0.95)"]


def test_a_nested_block_is_reported_and_never_erased(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 56, class 6: a text block inside a table block would vanish when the outer one is
    written; it is reported as an unpaired marker is (exit 1), and the page is left as it is."""
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    page = root / "docs" / "page.md"
    text = "# p\n\n<!-- table:gpu-race -->\n| a |\n<!-- text:readme-gpu -->x<!-- /text:readme-gpu -->\n<!-- /table:gpu-race -->\n"
    page.write_text(text)
    for args in ((), ("--check",)):
        code, _, err = _check(root, capsys, *args)
        assert (
            code == 1
            and "docs/page.md:5: the marker <!-- text:readme-gpu --> lies inside the block table:gpu-race; blocks do not nest"
            in err
        ), err
        assert page.read_text() == text


def _verification_root(tmp_path: Path) -> tuple[Path, Path]:
    root, records = tmp_path / "repo", tmp_path / "records"
    (root / "docs").mkdir(parents=True)
    _stored_verification(records)
    _stored_paper_statistic(records)
    study = records / results_tables.STUDY_NAMES["verification"]  # its manifest lists every file, as store.py writes it
    files = {
        p.relative_to(study).as_posix(): {"sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
        for p in sorted(study.rglob("*"))
        if p.is_file() and p.name != STORED_STUDY_FILE
    }
    (study / STORED_STUDY_FILE).write_text(json.dumps({"format": STUDY_FORMAT, "kind": "reproduction", "files": files}))
    (root / "README.md").write_text("# r\n\n<!-- table:readme-verification -->\n<!-- /table:readme-verification -->\n")
    (root / "docs" / "other.md").write_text("# o\n\n<!-- table:gpu-race -->\nkept\n<!-- /table:gpu-race -->\n")
    return root, records


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


DAMAGES = {
    "metrics.json cut": (
        lambda root, study: _cut(next(study.rglob("metrics.json"))),
        "metrics.json is not the file that was stored",
    ),
    "stored-study.json cut": (
        lambda root, study: _cut(study / STORED_STUDY_FILE),
        "stored-study.json is not valid JSON",
    ),
    "a seed folder moved away": (
        lambda root, study: shutil.move(str(study / "seed-2"), str(root.parent / "seed-2")),
        "seed-2/id-ood/large-init/config.json is missing, though stored-study.json lists it",
    ),
    "README not UTF-8": (
        lambda root, study: (root / "README.md").write_bytes(b"# r \xff\xfe\n"),
        "README.md is not UTF-8 text (byte 4)",
    ),
    "a run added by hand": (
        lambda root, study: shutil.copytree(study / "seed-1", study / "seed-9"),
        "seed-9/id-ood/large-init/config.json is not one of the stored files",
    ),
    "a folder named like a page": (
        lambda root, study: (root / "docs" / "dir.md").mkdir(),
        "docs/dir.md is a folder, not a page",
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_records_and_pages_are_one_line_each_and_exit_2(
    damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 56, class 4: a damaged record or page is one line naming it (exit 2), the other
    blocks are still checked, and no page is rewritten from damaged records."""
    root, records = _verification_root(tmp_path)
    assert _check(root, capsys, "--records", str(records))[0] == 0
    pages = {p: p.read_bytes() for p in (root / "README.md", root / "docs" / "other.md")}
    make, said = DAMAGES[damage]
    make(root, records / results_tables.STUDY_NAMES["verification"])
    pages = {p: p.read_bytes() for p in pages}
    for args in (("--check",), ()):
        code, out, err = _check(root, capsys, "--records", str(records), *args)
        errors = [line for line in err.splitlines() if line.startswith("tables.py: error:")]
        assert code == 2 and len(errors) == 1 and said in errors[0] and "Traceback" not in err, err
        assert "damaged inputs (exit 2)" in out
        assert {p: p.read_bytes() for p in pages} == pages


def test_a_mistyped_records_folder_or_a_root_without_pages_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Decided (issue 56): a ``--records`` that is not a folder, or a ``--root`` holding no page,
    is bad input (exit 2), not a check of 0 blocks that passes."""
    root, records = _verification_root(tmp_path)
    code, _, err = _check(root, capsys, "--records", str(records) + "-typo", "--check")
    assert code == 2 and "--records" in err and "does not exist" in err
    (tmp_path / "empty").mkdir()
    code, _, err = _check(tmp_path / "empty", capsys, "--check")
    assert (
        code == 2
        and err.count("\n") == 1
        and "holds no page (README.md, docs/*.md or benchmarks/README.md); give the repository's root" in err
    ), err
