"""The benchmark scripts run end to end at toy sizes and print their ratios.

No timing is asserted (speed belongs in the printed figures, not in tests); this only
keeps the scripts from rotting as the packages change.
"""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner
from helpers import load_script


def test_bench_data_prints_ratios_for_every_task_and_split() -> None:
    bench = load_script("benchmarks/bench_data.py")
    result = CliRunner().invoke(bench.main, ["-n", "3000"])
    assert result.exit_code == 0, result.output
    assert result.output.count("x ") >= 8  # one row per task and split
    assert "vs released: smallest ratio" in result.output and "vs lean: smallest ratio" in result.output


@pytest.mark.parametrize("split", ["train", "id_test", "heldout"])
def test_bench_data_baselines_follow_the_task(split: str) -> None:
    """Both per-sample baselines obey the task's rules, as make_dataset does."""
    bench = load_script("benchmarks/bench_data.py")
    for tokens, targets in (bench.released_dataset("symmetric", split, 500, 0), bench.loop_dataset("symmetric", split, 500, 0)):
        assert tokens.shape == (500, 9) and targets.shape == (500,)
        anchors = (tokens >= 1) & (tokens <= 4)
        assert torch.equal(anchors.sum(1), torch.full((500,), 2))
        p = anchors.float().argmax(1) - 1  # key sits right before the first anchor
        x = tokens.gather(1, p[:, None]).squeeze(1)
        assert bool(((x % 9 == p) == (split == "id_test")).all())
