"""What a run learned, in words and numbers: the verdict the report opens with.

:func:`run_verdict` reads a run's final metrics and names its solution the way the papers
do (docs/science.md):

* ``symmetric`` task: ``inferential`` when the held-out (4,3) follows x - 10 on most inputs,
  ``symmetric`` when it follows x - 6, ``neither`` otherwise; ``did not fit`` when the seen
  pairs' ID accuracy is below 0.9 (the NeurIPS paper's shaded zone);
* ``id-ood`` task: the journal's phases: ``Phase 1`` (ID below 0.9), ``Phase 2`` (ID good, OOD
  at most 0.5: memorized the seen pairs), ``Phase 3`` (OOD above 0.5: composes unseen pairs);
* ``complexity`` task: ``fit`` or ``did not fit`` the training pairs.

Example::

    >>> v = run_verdict("id-ood", {"id_acc": 0.99, "ood_acc": 0.79, "commutativity": 0.68}, "completed")
    >>> v.solution, v.evidence
    ('Phase 3', 'ID accuracy 0.99, OOD accuracy 0.79, commutativity 0.68')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: "Good ID": the NeurIPS paper's shaded zones are below it; the journal's Phase 1 too.
FIT = 0.9
#: The journal's line between Phase 2 and Phase 3 (OOD accuracy).
OOD_LINE = 0.5

#: What the papers report, per task, in one sentence.
EXPECTED: dict[str, str] = {
    "symmetric": "The NeurIPS paper: small init (large gamma, e.g. 0.8) learns the inferential solution, "
    "large init (gamma 0.5 and below) the symmetric one.",
    "id-ood": "The journal: larger gamma (smaller init) and larger weight decay move models from Phase 1 "
    "to Phase 2 to Phase 3 (composing the unseen pairs).",
    "complexity": "The papers: small init needs more epochs to fit as the inferential complexity k grows; "
    "large init does not.",
}


@dataclass(frozen=True)
class Verdict:
    """A run's solution (``solution``), the numbers it rests on (``evidence``) and what the
    papers expect for its task (``expected``)."""

    solution: str
    evidence: str
    expected: str


def _num(value: Any) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def run_verdict(task: str, final: dict[str, Any], status: str, stable_rank: float | None = None) -> Verdict:
    """The :class:`Verdict` of a run from its ``metrics.json`` ``final`` section and status;
    ``stable_rank`` (the first layer's merged W_Q) is added to the evidence when given."""
    expected = EXPECTED.get(task, "")
    id_acc = final.get("id_acc")
    parts = [f"ID accuracy {_num(id_acc)}"]
    if task == "symmetric":
        heldout = final.get("heldout", {}).get("4,3", {})
        inf, sym = heldout.get("inferential"), heldout.get("symmetric")
        parts.append(f"held-out (4,3) inferential {_num(inf)}, symmetric {_num(sym)}")
        if id_acc is None or id_acc < FIT:
            solution = "did not fit"
        elif inf is not None and inf >= 0.5 and inf > (sym or 0):
            solution = "inferential"
        elif sym is not None and sym >= 0.5 and sym > (inf or 0):
            solution = "symmetric"
        else:
            solution = "neither"
    elif task == "id-ood":
        ood = final.get("ood_acc")
        parts.append(f"OOD accuracy {_num(ood)}, commutativity {_num(final.get('commutativity'))}")
        if id_acc is None or id_acc < FIT:
            solution = "Phase 1"
        elif ood is not None and ood > OOD_LINE:
            solution = "Phase 3"
        else:
            solution = "Phase 2"
    else:
        solution = "fit" if id_acc is not None and id_acc >= FIT else "did not fit"
    if status != "completed":
        solution = f"{status} ({solution} so far)"
    if stable_rank is not None:
        parts.append(f"layer-0 W_Q stable rank {stable_rank:.1f}")
    return Verdict(solution, ", ".join(parts), expected)
