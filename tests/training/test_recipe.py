"""The recipe's quantities against hand computations, and the carry rule (training/studies/recipe.py)."""

from __future__ import annotations

import math

import pytest

from training.config import make_run_config
from training.studies.recipe import (
    DEFAULT_HOLD,
    HOLDABLE,
    carry_recipe,
    check_hold,
    paper_config,
    paper_recipe,
    recipe_of,
    recipe_table,
    summed_lr,
)


def _cosine_sum(n: int, peak: float, low: float) -> float:
    # sum_{k<n} low + (peak - low)(1 + cos(pi k / n)) / 2, with sum_{k<n} cos(pi k / n) = 1
    return n * low + 0.5 * (peak - low) * (n + 1)


def _warmup_sum(n: int, start: float, peak: float) -> float:
    # sum_{k<n} start + (peak - start) k / n
    return n * start + (peak - start) * (n - 1) / 2


def test_paper_quantities_by_hand():
    r = paper_recipe()
    assert r == recipe_of(paper_config())  # read from the preset's options = read from its config
    steps = 759_375 // 2048  # drop_last: 370
    assert (r.steps_per_epoch, r.steps, r.samples_per_step, r.samples_per_pair) == (370, 370 * 210, 2048, 759_375 / 15)
    assert r.forward_scale == pytest.approx(400**-0.8 * math.sqrt(400))
    assert r.adam_step == pytest.approx(2.5e-4 * 20 / 400**-0.8)
    total = _warmup_sum(10 * steps, 1e-5, 2.5e-4) + _cosine_sum(200 * steps, 2.5e-4, 1e-5)
    assert r.summed_lr == pytest.approx(total, rel=1e-9)
    assert r.summed_lr_wd == pytest.approx(total * 0.01, rel=1e-9)
    # the table: 0.17, 0.60, 10.1, 0.10
    assert (round(r.forward_scale, 2), round(r.adam_step, 2), round(r.summed_lr, 1), round(r.summed_lr_wd, 2)) == (
        0.17,
        0.60,
        10.1,
        0.10,
    )


def test_cpu_quantities_by_hand():
    cfg = make_run_config("cpu", task="symmetric", gamma=0.8)
    r = recipe_of(cfg)
    steps = math.ceil(200_000 / 512)  # the loop keeps the partial batch: 391
    assert (r.steps_per_epoch, r.steps) == (391, 391 * 12)
    assert r.forward_scale == pytest.approx(128**-0.8 * math.sqrt(128))
    assert r.adam_step == pytest.approx(5e-4 * math.sqrt(128) / 128**-0.8)
    total = _warmup_sum(steps, 2.5e-5, 5e-4) + _cosine_sum(11 * steps, 5e-4, 2.5e-5)
    assert r.summed_lr == pytest.approx(total, rel=1e-9) and round(total, 2) == 1.23
    assert recipe_of(cfg.with_options(drop_last=True)).steps_per_epoch == 390


def test_summed_lr_tiny_schedule_by_hand():
    # 4 samples, batch 2: 2 steps an epoch at epochs 0, .5, 1, 1.5, 2, 2.5; warm-up 1 epoch, cosine 1 epoch, then min
    cfg = make_run_config(
        "tiny",
        n_train=4,
        batch_size=2,
        epochs=3,
        lr=1e-3,
        warmup_start_lr=2e-4,
        min_lr=1e-4,
        warmup_epochs=1.0,
        cosine_epochs=1.0,
    )
    s, peak, low = 2e-4, 1e-3, 1e-4
    assert summed_lr(cfg.train, cfg.data.n_train) == pytest.approx(
        s + (s + peak) / 2 + peak + (peak + low) / 2 + low + low
    )


def test_carry_holds_forward_scale_and_weight_shrinkage():
    cfg = make_run_config("cpu", task="symmetric", gamma=0.8)
    out = carry_recipe(cfg)
    assert out.init.gamma == pytest.approx(0.87, abs=0.001)  # the "gamma about 0.87"
    assert 128 ** (0.5 - out.init.gamma) == pytest.approx(400**-0.3, rel=1e-3)
    cpu_total = _warmup_sum(391, 2.5e-5, 5e-4) + _cosine_sum(11 * 391, 5e-4, 2.5e-5)
    paper_total = _warmup_sum(3700, 1e-5, 2.5e-4) + _cosine_sum(74_000, 2.5e-4, 1e-5)
    assert out.train.weight_decay * cpu_total == pytest.approx(paper_total * 0.01, rel=1e-3)
    assert (out.train.lr, out.train.epochs, out.model.d_model) == (
        cfg.train.lr,
        cfg.train.epochs,
        128,
    )  # not held: kept
    wide = carry_recipe(cfg.with_options(d_model=256, d_head=128, d_mlp=768))
    assert wide.init.gamma == pytest.approx(0.82, abs=0.005)  # the "gamma about 0.82 there"
    large = carry_recipe(cfg.with_options(gamma=0.5))
    assert large.init.gamma == 0.5  # gamma 0.5 has forward scale 1 at every width


def test_carry_adam_step_and_length():
    cfg = make_run_config("cpu", task="symmetric", gamma=0.8)
    out = carry_recipe(cfg, ("forward_scale", "adam_step", "summed_lr_wd"))
    assert out.train.lr == pytest.approx(7.8e-4, rel=0.01)  # the "lr about 7.8e-4 with gamma 0.87"
    assert out.train.lr * 128 ** (0.5 + out.init.gamma) == pytest.approx(2.5e-4 * 400**1.3, rel=1e-3)
    assert out.train.warmup_start_lr / out.train.lr == pytest.approx(1 / 20, rel=1e-3)  # the schedule's shape kept
    assert out.train.weight_decay == pytest.approx(0.05, rel=0.1)  # "wd about 0.05 at the present length"
    longer = carry_recipe(cfg, ("summed_lr",))
    e = longer.train.epochs
    assert longer.train.cosine_epochs == pytest.approx(11 * e / 12) and longer.train.warmup_epochs == pytest.approx(
        e / 12
    )
    shorter = cfg.with_options(epochs=e - 1, warmup_epochs=(e - 1) / 12, cosine_epochs=11 * (e - 1) / 12)
    assert summed_lr(longer.train, 200_000) >= paper_recipe().summed_lr > summed_lr(shorter.train, 200_000)


def test_paper_preset_is_the_rule_at_its_own_width():
    cfg = make_run_config("paper", task="symmetric", gamma=0.8)
    assert cfg == paper_config() and recipe_of(cfg) == paper_recipe()  # the preset is the released run
    for hold in (DEFAULT_HOLD, HOLDABLE):
        assert carry_recipe(cfg, hold) == cfg  # its fixed point, whatever is held
    # the text's 900,000 samples at random, with the last partial batch kept, are not: 440 steps an epoch
    text = cfg.with_options(n_train=900_000, balanced_pairs=False, drop_last=False)
    assert recipe_of(text).steps_per_epoch == 440 and carry_recipe(text).train.weight_decay == pytest.approx(
        0.01 * 370 / 440, rel=0.01
    )


def test_bad_hold_and_table():
    with pytest.raises(ValueError, match="unknown quantity 'speed'"):
        check_hold(["forward-scale", "speed"])
    assert check_hold(["summed-lr-wd", "forward-scale"]) == ("forward_scale", "summed_lr_wd")
    text = recipe_table(make_run_config("cpu", task="symmetric", gamma=0.8))
    assert "0.1657" in text and "0.2333" in text and "77,700" in text


def test_cli_show_and_carry_recipe(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    from training.cli import main

    assert (
        main(["train", "--task", "symmetric", "--preset", "cpu", "--gamma", "0.8", "--show-recipe", "--carry-recipe"])
        == 0
    )
    out, settings = capsys.readouterr().out.split("\n\nsettings: ")
    lines = {line[:32].strip(): line[32:].split() for line in out.splitlines()}
    assert lines["forward scale std*sqrt(d)"] == ["0.1657", "0.1657"]  # carried: the paper's forward scale at width 128
    # below the recipe, each setting with the layer it came from
    layers = {line.split()[0]: (line.split()[1], line.split()[-1]) for line in settings.splitlines()[1:]}
    assert layers["gamma"] == ("0.8705", "recipe") and layers["weight_decay"] == ("0.08201", "recipe")
    assert (
        layers["d_model"] == ("128", "preset")
        and layers["lr"] == ("0.0005", "preset")
        and layers["seed"] == ("0", "given")
    )
    assert layers["d_vocab"][1] == "task" and layers["beta1"] == ("0.9", "default")
    assert lines["summed lr x weight decay"] == ["0.101", "0.101"]
    assert lines["gamma"] == ["0.8705", "0.8"] and lines["weight decay"] == ["0.08201", "0.01"]
    assert main(["train", "--preset", "cpu", "--show-recipe", "--carry-recipe", "forward-scale,speed"]) == 2
    assert "unknown quantity 'speed'" in capsys.readouterr().err

    # the paper preset is the released run: each of its quantities equals the paper's
    assert main(["train", "--preset", "paper", "--gamma", "0.8", "--show-recipe"]) == 0
    out = capsys.readouterr().out.split("\n\nsettings: ")[0]
    lines = {
        line[:32].strip(): line[32:].split()
        for line in out.splitlines()
        if not line.startswith(("quantity", "paper:", "this run:"))
    }
    assert all(mine == paper for mine, paper in lines.values()) and len(lines) == 11
    assert lines["steps per epoch"] == ["370", "370"] and lines["training samples per seen pair"] == [
        "50,625",
        "50,625",
    ]
    assert "this run: 759,375 samples, balanced per pair, drop_last" in out
    assert main(["train", "--preset", "cpu", "--gamma", "0.8"]) == 2  # neither --out nor --show-recipe
    assert "Missing option '--out'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_train_help_shows_the_papers_quantities(capsys: pytest.CaptureFixture[str]) -> None:
    from training.cli import main

    assert main(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "forward scale std*sqrt(d) 0.166" in text
        and "summed lr over all steps 10.1" in text
        and "--carry-recipe" in text
    )


def test_reproduce_carries_every_regime_and_refuses_two_lrs() -> None:
    from training.studies.study import regime_config
    from training.studies.study import StudySpec

    small = regime_config("cpu", "small-init", "symmetric", seed=1, carry=DEFAULT_HOLD)
    large = regime_config("cpu", "large-init", "symmetric", seed=1, carry=DEFAULT_HOLD)
    assert (small.init.gamma, large.init.gamma) == (0.8705, 0.5)
    assert small.train.weight_decay == large.train.weight_decay == 0.08201
    spec = StudySpec.reproduction(
        "cpu", (1,), "paper", (1e-4, 3e-4), tasks=("symmetric",), carry=("forward_scale", "summed_lr_wd")
    )
    wds = sorted({job.config.train.weight_decay for job in spec.jobs("out")})
    assert (
        len(wds) == 2 and wds[0] < wds[1]
    )  # the summed lr x wd held per lr of the grid: the larger lr gets the smaller wd
    with pytest.raises(ValueError, match="adam-step sets the lr, and so does --lrs"):
        StudySpec.reproduction("cpu", (1,), "paper", (1e-4, 3e-4), carry=("adam_step",))
    single = StudySpec.reproduction(
        "cpu", (1,), tasks=("symmetric",), single=True, carry=DEFAULT_HOLD
    )  # reproduce --seed: a population of one
    assert [job.config for job in single.jobs("out")] == [small, large]


def test_reproduce_cli_threads_the_carry(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """reproduce --carry-recipe [QUANTITIES] reaches the study's spec, for one seed and for --seeds."""
    import training.cli as rep
    from training.cli import main

    specs = []
    monkeypatch.setattr(rep, "run_reproduction_cli", lambda spec, *a, **k: (specs.append(spec), ("", None))[1])
    assert main(["reproduce", "--preset", "tiny", "--seed", "1", "--out", str(tmp_path), "--carry-recipe"]) == 0
    assert (
        main(
            [
                "reproduce",
                "--preset",
                "tiny",
                "--seeds",
                "1,2",
                "--out",
                str(tmp_path),
                "--carry-recipe",
                "summed-lr-wd",
            ]
        )
        == 0
    )
    assert main(["reproduce", "--preset", "tiny", "--seed", "1", "--out", str(tmp_path)]) == 0
    assert [s.carry for s in specs] == [DEFAULT_HOLD, ("summed_lr_wd",), None]
    assert specs[0].single and not specs[1].single


def test_one_function_resolves_a_runs_settings_layer_by_layer() -> None:
    """``resolve_run``: each option from the last layer that set it, in the documented order
    (a task's regime over the regime, an option given over both, the recipe last)."""
    from training.studies.study import SETTING_LAYERS, resolve_run

    assert SETTING_LAYERS == (
        "default",
        "task",
        "preset",
        "task's preset",
        "regime",
        "task's regime",
        "given",
        "recipe",
    )
    large = resolve_run("cpu", "symmetric", {"seed": 3}, regime="large-init")
    assert large.config == make_run_config("cpu", task="symmetric", seed=3, gamma=0.5)
    assert (large.sources["gamma"], large.sources["seed"], large.sources["d_model"], large.sources["beta1"]) == (
        "regime",
        "given",
        "preset",
        "default",
    )
    id_ood = resolve_run("cpu", "id-ood", {}, regime="large-init")  # cpu takes gamma 0.4 for id-ood's large init
    assert id_ood.config.init.gamma == 0.4 and id_ood.sources["gamma"] == "task's regime"
    given = resolve_run("cpu", "id-ood", {"gamma": 0.45}, regime="large-init")
    assert given.config.init.gamma == 0.45 and given.sources["gamma"] == "given"
    carried = resolve_run("cpu", "symmetric", {"gamma": 0.8}, carry=DEFAULT_HOLD)
    assert carried.config == carry_recipe(make_run_config("cpu", task="symmetric", gamma=0.8), DEFAULT_HOLD)
    assert (
        carried.uncarried.init.gamma == 0.8
        and carried.sources["gamma"] == "recipe"
        and carried.sources["lr"] == "preset"
    )
    with pytest.raises(ValueError, match="unknown regime"):
        resolve_run("cpu", "symmetric", {}, regime="medium-init")
