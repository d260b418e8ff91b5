"""The code-lm task (a stand-in for journal Fig. 7D): the corpus is the standard library's files,
split by file, its windows are the files' bytes with the next byte as target everywhere, and it
trains from the command line at ``tiny`` with a test perplexity that the hooked forward confirms."""

from __future__ import annotations

import json
import math
import sysconfig
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from interp_init.tasks.code_lm import CodeLmTask, corpus_files, is_test_file
from interp_init.tasks.registry import make_task
from training.cli import main


def test_the_corpus_is_split_by_file_and_the_windows_are_its_bytes() -> None:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = corpus_files(root)
    relative = [p.relative_to(root).as_posix() for p in files]
    assert "os.py" in relative and not any("/test/" in f"/{r}" or r.startswith("site-packages") for r in relative)
    test = [p for p, r in zip(files, relative) if is_test_file(r)]
    assert 0 < len(test) < len(files) // 5
    task = make_task("code-lm")
    pools = task.pools()
    joined = b"\n".join(p.read_bytes() for p in test)  # the test side, by hand
    width = task.seq_len + 1
    assert pools["id_test"].shape == (len(joined) // width, width)
    assert pools["id_test"].tobytes() == joined[: len(joined) // width * width]
    data = task.make_split("train", 64, seed=2)
    assert torch.equal(data.targets[:, :-1], data.tokens[:, 1:]) and len(set(data.meta["index"].tolist())) == 64
    assert torch.equal(task.make_split("train", 64, 2).token_ids, data.token_ids)
    with pytest.raises(ValueError, match=r"code-lm: --n-test \d+ exceeds the [\d,]+ id_test windows of the corpus"):
        task.check_split_sizes({"id_test": len(pools["id_test"]) + 1})


def test_code_lm_trains_from_the_cli_and_its_perplexity_is_the_hooked_forwards(tmp_path: Path) -> None:
    from training import RunConfig
    from training.studies.report import ReportConfig, load_runs, write_report

    run = tmp_path / "run"
    assert (
        main(["train", "--task", "code-lm", "--preset", "tiny", "--out", str(run), "--device", "cpu", "--quiet"]) == 0
    )
    final = json.loads((run / "metrics.json").read_text())["final"]
    assert {"train_acc", "id_acc", "train_ppl", "test_ppl"} <= set(final)
    cfg = RunConfig.from_dict(json.loads((run / "config.json").read_text()))
    test = CodeLmTask().make_split("id_test", cfg.data.n_test, cfg.seeds["data.id_test"])
    model = load_runs([run])[0].model
    with torch.no_grad():
        logits = model(test.tokens)
    nll = F.cross_entropy(logits.flatten(0, 1), test.targets.flatten())
    assert final["test_ppl"] == pytest.approx(math.exp(float(nll)), rel=1e-4)
    assert final["id_acc"] == pytest.approx(float((logits.argmax(-1) == test.targets).float().mean()), abs=1e-6)
    page = write_report([run], tmp_path / "report.html", ReportConfig(per_pair=2)).read_text()
    assert "language model" in page and "test perplexity" in page
