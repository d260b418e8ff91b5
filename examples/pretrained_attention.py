"""Open a trained model shipped with the package and draw its attention, offline, in seconds.

No training: ``interp_init.from_pretrained`` opens one of the four models of
``interp-init reproduce --preset cpu --seed 201`` (``interp_init.list_pretrained()`` names
them), its files checked against their SHA-256.  The script asks it the NeurIPS paper's
held-out input (key 99 followed by the unseen anchor pair (4,3): inferential answer
99 - 10 = 89, symmetric answer 99 - 6 = 93), prints what it answers, and writes circuitsvis'
attention view of that input with the JavaScript inlined (``probes.attention_html``), so
the page opens with no network::

    python examples/pretrained_attention.py --out runs/pretrained
    python examples/pretrained_attention.py --model symmetric-large-init --out runs/pretrained
"""

from __future__ import annotations

import time
from pathlib import Path

import click
import torch

import interp_init
import probes

#: NeurIPS 2024 Fig. 3's input: key 99 at position 2, then the held-out pair (4, 3).
FIG3_INPUT = [35, 63, 99, 4, 3, 38, 42, 36, 62]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--model",
    "name",
    default="symmetric-small-init",
    show_default=True,
    help="A shipped model (interp_init.list_pretrained()).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/pretrained"),
    show_default=True,
    help="Folder for the attention page.",
)
def main(name: str, out: Path) -> None:
    """Open a shipped model, print its answer on the held-out input, draw its attention."""
    start = time.perf_counter()
    model = interp_init.from_pretrained(name)
    opened = time.perf_counter() - start
    info = interp_init.pretrained_info(name)
    tokens = torch.tensor([FIG3_INPUT])
    answer = int(model(tokens)[0, -1].argmax())
    key = FIG3_INPUT[2]
    print(f"{name}: {info.task}, gamma {info.gamma:g}, seed {info.seed}; opened in {opened:.2f} s")
    print(f"on {' '.join(map(str, FIG3_INPUT))} it answers {answer} (inferential {key - 10}, symmetric {key - 6})")
    out.mkdir(parents=True, exist_ok=True)
    page = probes.attention_html(
        model, tokens[0], out / f"{name}-attention.html", title=f"{name}: attention on the held-out input"
    )
    print(f"attention ({', '.join(page.props['attentionHeadNames'])}): {out / f'{name}-attention.html'}")


if __name__ == "__main__":
    main()
