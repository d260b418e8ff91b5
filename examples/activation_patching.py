"""Activation patching on a trained run, with TransformerLens' own tools.

Every model here is a TransformerLens ``HookedTransformer`` (the papers' architectures
included), so TransformerLens' interventions run on it unchanged, beside the probes.  The
script trains one run (``--preset tiny``: seconds; ``cpu``: minutes) on ``--task``
(``symmetric``: the NeurIPS paper's post-LN model; ``id-ood``: the journal's model) and
asks where the key travels to the answer at the last position.  Clean inputs are a grid
of keys and seen anchor pairs (key at position 2); the corrupted inputs shift every key by
``--delta``, so every target shifts with it.  The metric is the logit of the clean target
minus that of the corrupted target at the last position (mean over the inputs):

* ``transformer_lens.patching.get_act_patch_resid_pre``: the residual stream before each
  layer, at each position, patched from the clean run into the corrupted one.  At layer 0
  the key's position restores the clean metric exactly and every other position changes
  nothing, in any model: a check that the patching reaches the model;
* ``get_act_patch_attn_head_out_by_pos``: each head's output at each position;
* ``ActivationCache.decompose_resid`` and ``stack_head_results``: each component's (and
  each head's) direct contribution to the logit difference at the last position.  The
  components add up to the residual stream only where the blocks add to it (``journal``,
  ``standard``); the post-LN ``neurips`` block normalizes each block's output, so there
  they do not (the table says which);
* ``run_with_hooks``: each head's attention to the key zeroed after the softmax, which is
  exactly :func:`probes.masked_run` with that layer and head (checked);
* ``model.generate``: the model has no tokenizer and no end-of-sequence token, so pass
  ``stop_at_eos=False``; the papers' blocks take no key-value cache, so
  ``use_past_kv_cache=False``; ``do_sample=False`` gives the argmax (TransformerLens samples
  by default).  Its next token is the model's answer.

It prints one table and writes ``activation_patching.csv`` (every number, long format) and
the run folder into ``--out``::

    python examples/activation_patching.py --preset tiny --out patching_out --seed 0 --device cpu
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import torch
from transformer_lens import patching

import probes
from interp_init.architectures.neurips import PostLNBlock
from training import PRESETS, make_run_config, train

#: Seen pairs of both tasks (neither holds them out), each with its composite target.
PAIRS = [(1, 2), (2, 1), (1, 4), (2, 3)]
KEYS = range(30, 45)
KEY_POSITION = 2


def inputs(delta: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(clean tokens, corrupted tokens, clean targets, corrupted targets)``: the same noise and pairs, every key shifted by ``delta``."""
    clean = probes.input_grid(KEYS, PAIRS, key_position=KEY_POSITION, seed=seed)
    corrupted = probes.input_grid([k + delta for k in KEYS], PAIRS, key_position=KEY_POSITION, seed=seed)
    return clean.tokens, corrupted.tokens, clean.targets, corrupted.targets


def rows(analysis: str, values: torch.Tensor, axes: tuple[str, ...], labels: list[str] | None = None) -> list[dict]:
    """One row per entry of ``values`` (its indices named by ``axes``; a first axis of ``labels`` named ``component``)."""
    out = []
    for index in torch.cartesian_prod(*[torch.arange(n) for n in values.shape]).reshape(-1, values.ndim).tolist():
        named = dict(zip(axes, index, strict=True))
        if labels is not None:
            named["component"] = labels[named.pop("component")]
        out.append({"analysis": analysis, **named, "value": float(values[tuple(index)])})
    return out


@torch.no_grad()
def analyse(
    model, clean: torch.Tensor, corrupted: torch.Tensor, clean_t: torch.Tensor, corrupt_t: torch.Tensor
) -> tuple[pd.DataFrame, dict]:
    """The interventions above; every number as a long table, and the summary."""
    batch = torch.arange(len(clean))

    def metric(logits: torch.Tensor) -> torch.Tensor:
        return (logits[batch, -1, clean_t] - logits[batch, -1, corrupt_t]).mean()

    clean_logits, cache = model.run_with_cache(clean)
    clean_value, corrupted_value = float(metric(clean_logits)), float(metric(model(corrupted)))
    resid = patching.get_act_patch_resid_pre(model, corrupted, cache, metric)  # [layer, pos]
    heads = patching.get_act_patch_attn_head_out_by_pos(model, corrupted, cache, metric)  # [layer, pos, head]
    direction = (
        model.W_U[:, clean_t] - model.W_U[:, corrupt_t]
    )  # [d_model, batch]: the logit difference's direction per input
    components, labels = cache.decompose_resid(pos_slice=-1, return_labels=True)  # [component, batch, d_model]
    head_outputs, head_labels = cache.stack_head_results(pos_slice=-1, return_labels=True)
    attribution = torch.einsum("cbd,db->c", components, direction) / len(clean)
    head_attribution = torch.einsum("cbd,db->c", head_outputs, direction) / len(clean)
    final = cache[f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"][:, -1]
    adds_up = bool(torch.allclose(components.sum(0), final, atol=1e-4))

    ablated = torch.zeros(model.cfg.n_layers, model.cfg.n_heads)
    same = True
    for layer in range(model.cfg.n_layers):
        for head in range(model.cfg.n_heads):

            def hide_key(pattern: torch.Tensor, hook, head: int = head) -> torch.Tensor:
                pattern = pattern.clone()
                pattern[:, head, KEY_POSITION:, KEY_POSITION] = 0.0  # every query that can read the key
                return pattern

            logits = model.run_with_hooks(clean, fwd_hooks=[(f"blocks.{layer}.attn.hook_pattern", hide_key)])
            ablated[layer, head] = metric(logits)
            same &= bool(
                torch.allclose(
                    logits, probes.masked_run(model, clean, KEY_POSITION, layers=layer, heads=head).logits, atol=1e-5
                )
            )

    generated = model.generate(
        clean, max_new_tokens=1, stop_at_eos=False, use_past_kv_cache=False, do_sample=False, verbose=False
    )
    table = pd.DataFrame(
        [
            {"analysis": "metric", "component": "clean", "value": clean_value},
            {"analysis": "metric", "component": "corrupted", "value": corrupted_value},
        ]
        + rows("resid_pre patched", resid, ("layer", "position"))
        + rows("head output patched", heads, ("layer", "position", "head"))
        + rows("direct logit attribution", attribution, ("component",), labels)
        + rows("direct logit attribution per head", head_attribution, ("component",), head_labels)
        + rows("key hidden from a head", ablated, ("layer", "head"))
    )
    last, gap = model.cfg.n_layers - 1, clean_value - corrupted_value

    def restored(value: torch.Tensor) -> float:  # the share of the clean-corrupted difference a patch restores
        return float((value - corrupted_value) / gap) if abs(gap) > 1e-12 else float("nan")

    others = [p for p in range(resid.shape[1]) if p != KEY_POSITION]
    layer, head = divmod(int((heads[:, -1] - corrupted_value).abs().argmax()), model.cfg.n_heads)
    top = int(attribution.abs().argmax())
    summary = {
        "logit difference, clean / corrupted": f"{clean_value:.4f} / {corrupted_value:.4f}",
        f"restored by resid_pre at layer 0, the key's position {KEY_POSITION}": f"{restored(resid[0, KEY_POSITION]):.2f}",
        "restored by resid_pre at layer 0, any other position (largest)": f"{max(abs(restored(resid[0, p])) for p in others):.2f}",
        f"restored by resid_pre at layer {last}, the last position": f"{restored(resid[last, -1]):.2f}",
        "restored by one head's output at the last position (the largest)": f"L{layer}H{head}: {restored(heads[layer, -1, head]):.2f}",
        "largest direct logit attribution": f"{labels[top]}: {float(attribution[top]):.4f}",
        "decompose_resid adds up to the last residual stream": adds_up,
        "run_with_hooks key ablation equals probes.masked_run": same,
        "generate's next token is the argmax": bool(torch.equal(generated[:, -1], clean_logits[:, -1].argmax(-1))),
    }
    return table, summary


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="tiny",
        help="run size (tiny: seconds on a CPU, learns little; cpu: minutes)",
    )
    parser.add_argument(
        "--out", default="activation_patching_out", help="folder for the run folder and activation_patching.csv"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="auto|cpu|cuda")
    parser.add_argument(
        "--task",
        choices=["symmetric", "id-ood"],
        default="symmetric",
        help="the NeurIPS paper's task (post-LN model) or the journal's",
    )
    parser.add_argument("--gamma", type=float, default=0.8, help="initialization rate (0.8: small init)")
    parser.add_argument("--delta", type=int, default=10, help="how far the corrupted inputs shift each key")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    out = Path(args.out)
    config = make_run_config(args.preset, task=args.task, gamma=args.gamma, seed=args.seed)
    model = train(config, out / f"{args.task}-gamma{args.gamma}", device=args.device, progress=False).model.eval()
    tokens = inputs(args.delta, args.seed)
    table, summary = analyse(model, *[t.to(model.cfg.device) for t in tokens])
    table.to_csv(out / "activation_patching.csv", index=False)
    print(
        f"{args.task}, {config.model.architecture} model, preset {args.preset}, {len(tokens[0])} clean and corrupted inputs (keys +{args.delta})"
    )
    print(pd.Series(summary).to_string())
    post_ln = any(isinstance(block, PostLNBlock) for block in model.blocks)
    adds_up = summary["decompose_resid adds up to the last residual stream"]
    if post_ln:  # the line above reads False there, and should
        print(
            f"decompose_resid {'adds up' if adds_up else 'does not add up'}: expected not to for this post-LN model, whose blocks "
            "normalize the stream after adding to it, so its parts are rescaled and no longer sum to the final stream"
        )
    else:
        print(
            f"decompose_resid {'adds up' if adds_up else 'does not add up'}: expected to, for a block that adds its output to the stream"
        )
    print(f"written: {out / 'activation_patching.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
