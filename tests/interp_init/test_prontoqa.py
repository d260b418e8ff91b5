"""The prontoqa task (journal Fig. 7E): every generated answer is the one a solver written here
reaches by walking the entity's chain, the chain has the split's depth, no shortcut that skips
the chain beats chance, and it trains from the command line at ``tiny`` with ``--hops``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from interp_init.tasks.prontoqa import TRUE, VOCABULARY, PrOntoQATask
from training.cli import main


def solve(words: list[str]) -> tuple[bool, int, bool]:
    """(the answer, the hops walked, what a shortcut says: the first property rule's sign matches the question's)."""
    text = " ".join(w for w in words if w != "<pad>")
    world, question = text.split(" question : ")
    sentences = [s.split() for s in world.split(" . ") if s]
    sentences[-1] = [w for w in sentences[-1] if w != "."]
    isa, props, member = {}, {}, None
    for s in sentences:
        if s[0] == "every" and s[2:4] == ["is", "a"]:
            isa[s[1]] = s[4]
        elif s[0] == "every":
            props[s[1]] = (s[-1], "not" in s)
        else:
            member = s[3]
    name, *rest = question.rstrip(" ?").split()
    asked_not, prop = "not" in rest, rest[-1]
    concept, hops = member, 0
    while concept not in props:
        concept, hops = isa[concept], hops + 1
    assert props[concept][0] == prop
    first_rule = next(props[s[1]][1] for s in sentences if s[0] == "every" and s[1] in props)
    return asked_not == props[concept][1], hops, asked_not == first_rule


@pytest.mark.parametrize("hops", [1, 3, 5])
def test_every_answer_is_the_chains_and_no_shortcut_beats_chance(hops: int) -> None:
    task = PrOntoQATask(hops=hops)
    for split, depths in (("train", set(range(1, hops + 1))), ("heldout", {hops + 1})):
        data = task.make_split(split, 400, seed=hops)
        solved = [solve(task.token_labels(row)) for row in data.token_ids.tolist()]
        answers = np.array([a for a, _, _ in solved])
        assert (answers == (data.targets.numpy() == TRUE)).all()
        assert [h for _, h, _ in solved] == data.meta["hops"].tolist() and set(data.meta["hops"].tolist()) == depths
        assert 0.4 < answers.mean() < 0.6  # balanced
        shortcut = np.array([s for _, _, s in solved])
        assert 0.35 < (shortcut == answers).mean() < 0.65  # the sentence order gives nothing away
    assert torch.equal(task.make_split("train", 32, 7).token_ids, task.make_split("train", 32, 7).token_ids)
    assert bool(
        (task.make_split("train", 32, 7).token_ids[:, -1] == VOCABULARY.index("?")).all()
    )  # the question ends at the last position


def test_prontoqa_trains_from_the_cli_with_hops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--task",
                "prontoqa",
                "--hops",
                "2",
                "--preset",
                "tiny",
                "--out",
                str(run),
                "--device",
                "cpu",
                "--quiet",
            ]
        )
        == 0
    )
    final = json.loads((run / "metrics.json").read_text())["final"]
    assert {"train_acc", "id_acc", "ood_acc"} <= set(final)
    assert json.loads((run / "config.json").read_text())["data"]["hops"] == 2
    for args, message in (
        (["--task", "prontoqa", "--hops", "9"], "prontoqa task: hops must be an integer in 1..5, got 9 (--hops)"),
        # 0 is a value, not "unset": refused, not read as the default 3
        (["--task", "prontoqa", "--hops", "0"], "prontoqa task: hops must be an integer in 1..5, got 0 (--hops)"),
        (["--hops", "2"], "hops applies to the 'prontoqa' task only, not 'symmetric': leave it unset"),
    ):
        out = tmp_path / "bad"
        assert main(["train", "--preset", "tiny", "--out", str(out), "--quiet", *args]) == 2
        assert capsys.readouterr().err.strip() == f"interp-init: error: {message}" and not out.exists()
