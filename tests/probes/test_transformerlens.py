"""What docs/probes.md says of TransformerLens' own tools on this project's models, row by
row of its table, and of the probes' own dependencies on TransformerLens 4.x."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import sys

import pytest
import torch
from helpers import ROOT
from transformer_lens import HookedTransformer, patching

import probes
from interp_init.config import InitConfig, ModelConfig
from interp_init.model import build_model

ARCHITECTURES = ("standard", "journal", "neurips")


@functools.cache
def model(architecture: str) -> HookedTransformer:
    config = ModelConfig(architecture=architecture, n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=32)
    return build_model(config, InitConfig(gamma=0.5), seed=0).eval()


def tokens(n: int = 4) -> torch.Tensor:
    return torch.randint(20, 100, (n, 9), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_patching_runs_and_the_decompositions_add_up_where_the_docs_say(architecture: str) -> None:
    m, clean = model(architecture), tokens()
    corrupted = clean.clone()
    corrupted[:, 2] = clean[:, 2] + 1  # the token at position 2 changed
    target = torch.arange(4)

    def metric(logits: torch.Tensor) -> torch.Tensor:
        return logits[target, -1, 50].mean()

    with torch.no_grad():
        clean_logits, cache = m.run_with_cache(clean)
        resid = patching.get_act_patch_resid_pre(m, corrupted, cache, metric)
        heads = patching.get_act_patch_attn_head_out_by_pos(m, corrupted, cache, metric)
        corrupted_value = float(metric(m(corrupted)))
    assert resid.shape == (2, 9) and heads.shape == (2, 9, 2)
    assert float(resid[0, 2]) == pytest.approx(
        float(metric(clean_logits)), abs=1e-5
    )  # patching the changed position restores the clean run
    assert float((resid[0, [0, 1, 3, 4, 5, 6, 7, 8]] - corrupted_value).abs().max()) < 1e-5
    components = cache.decompose_resid(pos_slice=-1)
    adds_up = bool(torch.allclose(components.sum(0), cache["resid_post", 1][:, -1], atol=1e-5))
    assert adds_up == (architecture != "neurips")  # the post-LN block normalizes its output: the stream is no sum
    head_sum = cache.stack_head_results(pos_slice=-1).sum(0) + sum(m.blocks[layer].attn.b_O for layer in range(2))
    torch.testing.assert_close(head_sum, (cache["attn_out", 0] + cache["attn_out", 1])[:, -1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_generate_with_the_options_the_docs_name_answers_the_argmax(architecture: str) -> None:
    m, clean = model(architecture), tokens()
    with pytest.raises(AssertionError, match="Must pass a eos_token_id if stop_at_eos is True"):
        m.generate(clean, max_new_tokens=1, verbose=False)
    with pytest.raises(
        (ValueError, RuntimeError)
    ):  # the papers' blocks refuse a key-value cache; the standard one fails inside TransformerLens
        m.generate(clean[:, :7], max_new_tokens=2, stop_at_eos=False, do_sample=False, verbose=False)
    answer = m.generate(
        clean, max_new_tokens=1, stop_at_eos=False, use_past_kv_cache=False, do_sample=False, verbose=False
    )
    with torch.no_grad():
        assert torch.equal(answer[:, -1], m(clean)[:, -1].argmax(-1))


def test_run_with_hooks_hiding_a_source_is_masked_run() -> None:
    m, clean = model("neurips"), tokens()

    def hide(pattern: torch.Tensor, hook) -> torch.Tensor:
        pattern = pattern.clone()
        pattern[:, 1, 2:, 2] = 0.0
        return pattern

    with torch.no_grad():
        logits = m.run_with_hooks(clean, fwd_hooks=[("blocks.0.attn.hook_pattern", hide)])
    torch.testing.assert_close(logits, probes.masked_run(m, clean, 2, layers=0, heads=1).logits)


def module_level_imports(package: str) -> set[str]:
    """The top-level modules that ``package`` imports at module level, following this project's own modules."""
    seen, todo, outside = set(), [package], set()
    while todo:
        name = todo.pop()
        path = next(
            (
                p
                for p in (ROOT / f"{name.replace('.', '/')}.py", ROOT / name.replace(".", "/") / "__init__.py")
                if p.is_file()
            ),
            None,
        )
        if name in seen or path is None:
            continue
        seen.add(name)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.module and not node.level
                else []
            )
            for module in modules:
                parts = module.split(".")
                if parts[0] in ("interp_init", "probes"):
                    todo += [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
                else:
                    outside.add(parts[0])
    return outside - set(sys.stdlib_module_names)


def test_the_docs_list_the_probes_own_dependencies_for_transformerlens_4() -> None:
    page = (ROOT / "docs" / "probes.md").read_text(encoding="utf-8")
    command = re.search(r'pip install "transformer-lens>=4\.3" (.*)\n', page)
    assert command, "docs/probes.md no longer shows the 4.x install command"
    listed = set(command.group(1).split())
    distributions = importlib.metadata.packages_distributions()
    needed = {name for module in module_level_imports("probes") for name in distributions.get(module, [module])}
    assert listed == needed, f"docs/probes.md lists {sorted(listed)}; import probes needs {sorted(needed)}"
    prose = re.search(r"the probes need (.*?) \(and none of", page, re.DOTALL).group(1)
    assert set(re.findall(r"`([\w-]+)`", prose)) == needed
