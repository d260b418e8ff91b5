"""The probes on a model and a task of your own: a GPT-2-shaped TransformerLens model, your tokens, your labels.

Nothing here comes from this project's tasks or models.  The model is a plain
``HookedTransformer`` built from a GPT-2-shaped config (pre-LayerNorm, GELU, learned
positions, ``d_mlp = 4 d_model``); ``--preset`` sets its size (``tiny``: 2 layers,
d_model 64; ``cpu``: 4 layers, d_model 256; ``paper``: GPT-2 small's 12 layers, d_model
768, vocabulary 50257, random weights, no download).  The task is a researcher's own
labelled one: each sequence of filler tokens holds one "topic" token (one of 8) at a
random position, and the model must name the topic at the last position.  After a short
training (``--steps``) the script asks, with the probes on plain token tensors:

* masking (``masked_run``): hide each sample's topic position from attention: does the
  model still name the topic?
* flow (``information_flow``, ``top_paths``): how much of the last position's attention
  lands on the topic, and the best path into the last position;
* similarity (``residual_similarity`` with the topics as labels): do inputs with the same
  topic get similar last-position vectors (block score)?
* ranks (``weight_stable_ranks``, ``circuit_stable_ranks``): the stable rank of each
  weight and of each head's OV and QK circuit.

It prints one table and writes ``own_model.csv`` and ``own_model_flow.html`` into ``--out``.
The ``tiny`` preset runs in well under a minute on a CPU::

    python examples/own_model.py --preset tiny --out own_out --seed 0 --device cpu
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import torch
from transformer_lens import HookedTransformer, HookedTransformerConfig

import probes
from interp_init import quiet_deprecation, resolve_device

#: GPT-2-shaped sizes: (n_layers, d_model, n_heads, d_vocab, seq); d_head = d_model / n_heads, d_mlp = 4 d_model.
SIZES = {"tiny": (2, 64, 4, 500, 16), "cpu": (4, 256, 4, 2000, 32), "paper": (12, 768, 12, 50257, 128)}
N_TOPICS = 8  # topic tokens are 1..8; filler tokens are 9..d_vocab-1


def gpt2_shaped(preset: str, seed: int, device: torch.device) -> HookedTransformer:
    """A researcher's own model: a HookedTransformer from a GPT-2-shaped config."""
    n_layers, d_model, n_heads, d_vocab, seq = SIZES[preset]
    cfg = HookedTransformerConfig(
        n_layers=n_layers,
        d_model=d_model,
        n_heads=n_heads,
        d_head=d_model // n_heads,
        d_mlp=4 * d_model,
        d_vocab=d_vocab,
        n_ctx=seq,
        act_fn="gelu_new",
        normalization_type="LN",
        positional_embedding_type="standard",
        seed=seed,
        device=str(device),
    )
    with quiet_deprecation():
        return HookedTransformer(cfg)


def topic_task(
    n: int, model: HookedTransformer, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(tokens [n, seq], topics [n], positions [n])``: one topic token per sequence, at a random position before the last."""
    seq, vocab = model.cfg.n_ctx, model.cfg.d_vocab
    tokens = torch.randint(N_TOPICS + 1, vocab, (n, seq), generator=generator)
    topics = torch.randint(1, N_TOPICS + 1, (n,), generator=generator)
    positions = torch.randint(0, seq - 1, (n,), generator=generator)
    tokens[torch.arange(n), positions] = topics
    return tokens, topics, positions


def train(model: HookedTransformer, steps: int, generator: torch.Generator) -> None:
    """A short training on the topic task (cross-entropy at the last position)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    model.train()
    for _ in range(steps):
        tokens, topics, _ = topic_task(64, model, generator)
        logits = model(tokens.to(model.cfg.device))[:, -1]
        loss = torch.nn.functional.cross_entropy(logits, topics.to(model.cfg.device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


def accuracy(logits: torch.Tensor, topics: torch.Tensor) -> float:
    return float((logits[:, -1].argmax(-1).cpu() == topics).float().mean())


def probe(
    model: HookedTransformer, tokens: torch.Tensor, topics: torch.Tensor, positions: torch.Tensor, out: Path
) -> dict[str, float | str]:
    """Masking, flow, similarity and ranks on plain token tensors with the researcher's labels and positions."""
    plain = probes.masked_run(model, tokens, [])  # nothing masked: the plain run
    hidden = probes.masked_run(model, tokens, positions)  # a [batch] tensor: each sample's own topic position
    patterns = probes.attention_patterns(model, tokens)  # [layer, batch, head, query, source]
    on_topic = patterns[:, torch.arange(len(tokens)), :, -1, positions]  # [layer, batch, head]: last position -> topic
    edges = probes.information_flow(model, tokens[:16])
    paths = probes.top_paths(edges, threshold=0.0, k=3)
    probes.plot_flow(edges, probes.token_labels(tokens[0]), paths).write_html(
        out / "own_model_flow.html", include_plotlyjs="cdn"
    )
    similarity = probes.residual_similarity(model, tokens, labels=topics.tolist())  # the last layer, the last position
    ranks = probes.weight_stable_ranks(model)
    circuits = probes.circuit_stable_ranks(model)
    return {
        "accuracy": accuracy(plain.logits, topics),
        "accuracy, topic masked": accuracy(hidden.logits, topics),
        "last -> topic attention (best head, last layer)": float(on_topic[-1].mean(0).max()),
        "top path into the last position": " -> ".join(map(str, paths["path"].iloc[0])),
        "same-topic block score": similarity.score,
        "W_Q stable rank, layer 0": float(
            ranks[(ranks["name"] == "W_Q") & (ranks["layer"] == 0)]["stable_rank"].iloc[0]
        ),
        "OV stable rank, mean over heads": float(circuits[circuits["circuit"] == "OV"]["stable_rank"].mean()),
        "QK stable rank, mean over heads": float(circuits[circuits["circuit"] == "QK"]["stable_rank"].mean()),
    }


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--preset", choices=sorted(SIZES), default="tiny", help="model size (tiny: seconds on a CPU)")
    parser.add_argument("--out", default="own_model_out", help="folder for own_model.csv and own_model_flow.html")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="auto|cpu|cuda")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: 200 tiny, 600 cpu, 0 paper)")
    parser.add_argument("--inputs", type=int, default=64, help="how many inputs the probes read")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    device = resolve_device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(args.seed)
    model = gpt2_shaped(args.preset, args.seed, device)
    steps = args.steps if args.steps is not None else {"tiny": 200, "cpu": 600, "paper": 0}[args.preset]
    train(model, steps, generator)
    tokens, topics, positions = topic_task(args.inputs, model, generator)
    row = probe(model, tokens, topics, positions, out)
    table = pd.DataFrame([{"preset": args.preset, "steps": steps, **row}])
    table.to_csv(out / "own_model.csv", index=False)
    print(table.T.to_string(header=False))
    print(f"written: {out / 'own_model.csv'}, {out / 'own_model_flow.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
