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
    result = CliRunner().invoke(bench.main, ["-n", "3000", "--no-cold"])
    assert result.exit_code == 0, result.output
    assert result.output.count("x ") >= 8  # one row per task and split
    assert "vs released: smallest ratio" in result.output and "vs lean: smallest ratio" in result.output
    assert "vs released, cold" not in result.output  # --no-cold: no fresh processes


def test_bench_data_times_a_first_call_in_a_fresh_process() -> None:
    bench = load_script("benchmarks/bench_data.py")
    assert 0 < bench._cold_seconds("id-ood", "heldout", 2000, threads=1) < 60


@pytest.mark.parametrize("split", ["train", "id_test", "heldout"])
def test_bench_data_baselines_follow_the_task(split: str) -> None:
    """Both per-sample baselines obey the task's rules, as make_dataset does."""
    bench = load_script("benchmarks/bench_data.py")
    for tokens, targets in (
        bench.released_dataset("symmetric", split, 500, 0),
        bench.loop_dataset("symmetric", split, 500, 0),
    ):
        assert tokens.shape == (500, 9) and targets.shape == (500,)
        anchors = (tokens >= 1) & (tokens <= 4)
        assert torch.equal(anchors.sum(1), torch.full((500,), 2))
        p = anchors.float().argmax(1) - 1  # key sits right before the first anchor
        x = tokens.gather(1, p[:, None]).squeeze(1)
        assert bool(((x % 9 == p) == (split == "id_test")).all())


def test_bench_train_step_prints_ratios_and_fraction_of_peak() -> None:
    bench = load_script("benchmarks/bench_train_step.py")
    args = ["--d-model", "16", "--batch", "8", "--reps", "1", "--steps", "1", "--peak-size", "64"]
    result = CliRunner().invoke(bench.main, args)
    assert result.exit_code == 0, result.output
    assert "ours/hooked" in result.output and "matmul peak measured" in result.output
    assert sum(" of peak" in line or "%" in line for line in result.output.splitlines()) >= 4


def test_bench_train_step_counts_each_variants_matmul_work() -> None:
    """FLOPs of one step of each variant against a hand count: forward 2 * (matmul weights)
    per token plus attention's two products at every position, backward twice the forward;
    the fused attention kernel's backward recomputes ``q k^T`` (one product more)."""
    bench = load_script("benchmarks/bench_train_step.py")
    d, layers, batch, ctx, vocab = 16, 2, 4, 9, 201
    d_head, d_mlp = d // 2, 3 * d
    _, flops = bench.bench(d, batch, reps=1, steps=1, n_layers=layers, dev=torch.device("cpu"))
    per_token_layer = 2 * (3 * d * d_head + d_head * d + 2 * d * d_mlp) + 2 * 2 * ctx * d_head
    forward = batch * ctx * (layers * per_token_layer + 2 * d * vocab)
    recompute = batch * 2 * ctx * ctx * d_head  # per layer through the fused kernel
    assert flops["hooked"] == 3 * forward
    assert flops["plain"] == 3 * forward + layers * recompute
    # ours: every block but the last at all positions (fused kernel); the last at the last
    # position only, its one query folded into W_K and its pattern applied before W_V
    last = 2 * (d * d_head + d_head * d + d_head + 2 * ctx * d + d * d_head + d_head * d + 2 * d * d_mlp)
    ours_forward = batch * (ctx * (layers - 1) * per_token_layer + last + 2 * d * vocab)
    assert flops["ours"] == 3 * ours_forward + (layers - 1) * recompute
    assert flops["ours-bf16"] == flops["ours"]


def test_bench_sequence_step_prints_the_ratios_of_every_task() -> None:
    bench = load_script("benchmarks/bench_sequence_step.py")
    result = CliRunner().invoke(bench.main, ["--preset", "tiny", "--batch", "8", "--reps", "1", "--steps", "1"])
    assert result.exit_code == 0, result.output
    rows = [
        line
        for line in result.output.splitlines()
        if line.startswith("| ") and line.split("|")[1].strip() in bench.TASKS
    ]
    assert len(rows) == 3 and all(len(r.split("|")) == 11 for r in rows)


def test_bench_ensemble_prints_the_ratio() -> None:
    bench = load_script("benchmarks/bench_ensemble.py")
    args = ["--d-model", "16", "--models", "2", "--batch", "8", "--reps", "1", "--steps", "1"]
    result = CliRunner().invoke(bench.main, args)
    assert result.exit_code == 0, result.output
    row = result.output.splitlines()[-1].split()
    assert row[:2] == ["16", "2"] and float(row[-1]) > 0


def test_gpu_suite_runs_at_tiny_scale_on_cpu(tmp_path) -> None:
    """The GPU suite's whole path on a CPU: both tasks on their papers' architectures, both
    inits, a markdown table with accuracies and speed; a second call reads, not retrains."""
    suite = load_script("benchmarks/gpu_suite.py")
    args = [
        "--out",
        str(tmp_path),
        "--scale",
        "tiny",
        "--device",
        "cpu",
        "--seeds",
        "0",
        "--epochs",
        "1",
        "--probe-steps",
        "1",
    ]
    result = CliRunner().invoke(suite.main, args)
    assert result.exit_code == 0, result.output
    assert "matmul peak measured: fp32" in result.output and "% of the peak over 1 steps" in result.output
    table = (tmp_path / "gpu_suite.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| symmetric |") or line.startswith("| id-ood |")]
    assert len(rows) == 4 + 2  # 2 tasks x 2 regimes x 1 seed, then one speed row per task
    assert "| symmetric | neurips | small-init | 0.8 | 0.001 | 0 |" in table
    assert (
        "| id-ood | journal | large-init | 0.3 | 0.001 | 0 |" in table
    )  # the tiny preset's regimes (training.studies.study.REGIMES)
    assert "population of 1 seeds [0], preset tiny, strict protocol" in table
    assert "shortened to 1 epochs" in table and "CPU" in table and "precision fp32" in table
    speed = [line.split("|") for line in rows if "neurips" not in line and "journal" not in line]
    assert all(
        cells[2].strip() == "2 one by one" and float(cells[5].replace(",", "")) > 0 and cells[6].strip().endswith("%")
        for cells in speed
    )
    weights = sorted(tmp_path.glob("seed-0/*/*/model.safetensors"))  # the layout of interp-init reproduce --seeds
    assert len(weights) == 4
    before = [p.stat().st_mtime_ns for p in weights]
    again = CliRunner().invoke(suite.main, args)
    assert again.exit_code == 0 and "0 to train" in again.output
    assert [p.stat().st_mtime_ns for p in weights] == before


def test_bf16_accuracy_prints_the_difference_to_fp32() -> None:
    bench = load_script("benchmarks/bf16_accuracy.py")
    result = CliRunner().invoke(bench.main, ["--only", "tiny"])
    assert result.exit_code == 0, result.output
    rows = {line.split()[1]: line.split() for line in result.output.splitlines() if line.strip().startswith("tiny")}
    fp32, bf16, diff = (rows[k] for k in ("fp32", "bf16", "bf16-fp32"))
    for i in range(2, 6):  # train, ID, inferential, symmetric accuracies
        assert float(diff[i]) == pytest.approx(float(bf16[i]) - float(fp32[i]), abs=1.5e-3)
    assert float(diff[-1]) == pytest.approx(max(abs(float(diff[i])) for i in range(2, 6)), abs=1.5e-3)


def test_the_scripts_edit_no_import_path_and_import_no_circle() -> None:
    """benchmarks/, experiments/ and examples/ import their siblings by name (a script run has
    its folder on the path; the tests put benchmarks/ there through pyproject's pytest
    ``pythonpath``), never by editing ``sys.path`` (nor does any module of the packages), and
    no two of them import each other, even inside a function."""
    import ast

    from helpers import ROOT
    from test_layout import cycles

    for package in ("interp_init", "probes", "training"):  # no module of the packages edits it either
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            edits = [
                n.lineno
                for n in ast.walk(tree)
                if isinstance(n, ast.Attribute) and n.attr == "path" and getattr(n.value, "id", None) == "sys"
            ]
            assert edits == [], f"{path.relative_to(ROOT)}:{edits[0]} reads or edits sys.path"
    for folder in ("benchmarks", "experiments", "examples"):
        scripts = {p.stem: p for p in (ROOT / folder).glob("*.py")}
        graph: dict[str, set[str]] = {}
        for name, path in scripts.items():
            tree = ast.parse(path.read_text(encoding="utf-8"))
            edits = [
                n.lineno
                for n in ast.walk(tree)
                if isinstance(n, ast.Attribute) and n.attr == "path" and getattr(n.value, "id", None) == "sys"
            ]
            assert edits == [], f"{folder}/{path.name}:{edits[0]} reads or edits sys.path"
            imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            imported |= {
                n.module.split(".")[0]
                for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module and n.level == 0
            }
            graph[name] = (imported & set(scripts)) - {name}
        assert cycles(graph) == [], f"{folder}: scripts in an import circle"


def test_the_scripts_have_no_launcher_step_or_record_writer_of_their_own() -> None:
    """benchmarks/ trains through the project's one path (a study: ``run_study``, a launcher of
    ``training.launch``, the trainer's steps of ``training.trainer``) and writes its records
    through the atomic writers: no class of theirs extends a launcher, an optimizer or a
    trainer's step, and no file is written with ``write_text``, ``write_bytes`` or ``json.dump``."""
    import ast

    from helpers import ROOT

    own = {
        "Launcher",
        "EnsembleLauncher",
        "SerialLauncher",
        "PoolLauncher",
        "Optimizer",
        "AdamW",
        "VmapStep",
        "BatchedStep",
    }
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {
                    b.id if isinstance(b, ast.Name) else b.attr
                    for b in node.bases
                    if isinstance(b, ast.Name | ast.Attribute)
                }
                assert not bases & own, (
                    f"benchmarks/{path.name}:{node.lineno} class {node.name} extends {sorted(bases & own)}: use training's"
                )
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("write_text", "write_bytes", "dump")
            ):
                raise AssertionError(
                    f"benchmarks/{path.name}:{node.lineno} writes a file past the atomic writer ({node.func.attr})"
                )
