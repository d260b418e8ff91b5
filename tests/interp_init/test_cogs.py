"""The COGS task (journal Fig. 7B, in distribution only): its splits are the shipped files', its
vocabulary and context fit them exactly, it trains from the command line at ``tiny`` with ID
metrics only (no held-out split to ask for), and the report runs on its model."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest

from interp_init.tasks import shipped
from interp_init.tasks.cogs import COGS_FILES, CogsMetrics, CogsTask, parse_line
from interp_init.tasks.registry import make_task
from interp_init.tasks.seq2seq import SPECIALS
from training.cli import main


def _file_pairs(name: str) -> list:
    text = lzma.decompress((shipped.FILES / f"{name}.xz").read_bytes()).decode()
    return [(tuple(s.split()), tuple(lf.split())) for s, lf, _ in (line.split("\t") for line in text.splitlines())]


def test_the_splits_vocabulary_and_context_are_the_shipped_files() -> None:
    task = make_task("cogs")
    pools = task.pools()
    assert set(pools) == {"train", "id_test"} and not task.has_heldout
    assert pools["train"] == _file_pairs(COGS_FILES["train"]) and pools["id_test"] == _file_pairs(COGS_FILES["id_test"])
    assert task.pool_sizes() == {"train": 24_155, "id_test": 3_000}
    words = {w for pairs in pools.values() for s, t in pairs for w in (*s, *t)}
    assert task.vocabulary() == SPECIALS + tuple(sorted(words)) and CogsTask.vocab_size == len(SPECIALS) + len(words)
    assert CogsTask.seq_len == max(len(s) + len(t) + 2 for pairs in pools.values() for s, t in pairs)
    data = task.make_split("id_test", 20, seed=0)
    for row, index in enumerate(data.meta["index"].tolist()):
        source, target = pools["id_test"][index]
        assert task.text(data.token_ids[row].tolist()) == " ".join([*source, "<sep>", *target, "<eos>"])
    with pytest.raises(ValueError, match="not a COGS line"):
        parse_line("a sentence without tabs")


def test_cogs_trains_from_the_cli_with_id_metrics_and_the_report_runs(tmp_path: Path) -> None:
    from training.studies.report import ReportConfig, write_report

    run = tmp_path / "run"
    assert main(["train", "--task", "cogs", "--preset", "tiny", "--out", str(run), "--device", "cpu", "--quiet"]) == 0
    final = json.loads((run / "metrics.json").read_text())["final"]
    assert {"train_acc", "id_acc"} <= set(final) and "ood_acc" not in final
    assert isinstance(make_task("cogs").read_metrics(final), CogsMetrics)
    page = write_report([run], tmp_path / "report.html", ReportConfig(per_pair=2)).read_text()
    assert all(f'<section id="{key.replace("_", "-")}">' in page for key in CogsTask.report_sections)
    assert "fit" in page and "gen is not available here" in page


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--n-heldout", "100"], "n_heldout sizes a held-out split, and task 'cogs' has none: leave --n-heldout unset"),
        (
            ["--n-train", "30000"],
            "COGS: --n-train 30000 exceeds the 24,155 train samples the benchmark has; use --n-train <= 24155",
        ),
    ],
)
def test_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    out = tmp_path / "run"
    assert main(["train", "--task", "cogs", "--preset", "tiny", "--out", str(out), "--quiet", *args]) == 2
    assert capsys.readouterr().err.strip() == f"interp-init: error: {message}" and not out.exists()
