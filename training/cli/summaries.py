"""How a command reads in its group's ``--help`` list, for ``interp-init`` and every click
script of ``experiments/`` and ``benchmarks/``: its ``short_help``, else its docstring's first
sentence, whole and wrapped.  Click's own summary stops at the first word that ends in a full
stop (``Fig. 6`` became ``Fig.``) and cuts the rest at the terminal's width with ``...``."""

from __future__ import annotations

import re

import click

__all__ = ["SummaryCommand", "SummaryGroup", "first_sentence"]

#: A sentence ends at a full stop followed by a capital letter, not after "e.g." or "i.e.";
#: "Fig. 6" or "lr 1e-3. then" do not end one.
_END = re.compile(r"(?<!e\.g)(?<!i\.e)\.\s+(?=[A-Z])")


def first_sentence(text: str) -> str:
    """The first sentence of ``text``'s first paragraph, on one line (with its full stop)."""
    paragraph = " ".join(text.split("\n\n")[0].split())
    end = _END.search(paragraph)
    return paragraph[: end.start() + 1] if end else paragraph


class SummaryCommand(click.Command):
    """A command whose summary in its group's list is whole (the module docstring)."""

    def get_short_help_str(self, limit: int = 45) -> str:
        return " ".join(self.short_help.split()) if self.short_help else first_sentence(self.help or "")


class SummaryGroup(click.Group):
    """A group whose commands are :class:`SummaryCommand`\\ s (``@group.command(...)``)."""

    command_class = SummaryCommand
