"""A griffe extension for the API reference: the reStructuredText the docstrings are written in
(what ``help()`` and Sphinx read well) becomes the Markdown that mkdocstrings renders, where it
would otherwise show as raw text.

* A literal block (a paragraph ending in ``::``, then an indented block, e.g. ``Example::``)
  becomes a fenced code block: a Python session (``pycon``) where it starts with ``>>>``,
  console commands (``bash``) where it starts with one of :data:`COMMANDS`, JSON or Python
  where it parses as such, else plain text. The ``::`` ends the paragraph with ``:``
  ("Example:"), or goes where it stands alone or after a space, as reST renders it.
* A hyperlink ```text <target>`_`` becomes a Markdown link ``[text](target)``.
* A pointer to a page of the documentation (``docs/science.md#training``, bare, as a code span,
  or as a hyperlink's target such as ``../docs/science.md``) becomes a link to that page of the
  site (``/science.md#training``: mkdocs.yml resolves links starting with ``/`` in ``docs/``,
  and the strict build fails on a page or an anchor that does not exist).

Code blocks, code spans that are not a pointer, and Markdown links are left as they are.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from typing import Any

import griffe

#: The first words of a literal block shown as console commands.
COMMANDS = ("interp-init", "python", "pip", "mkdocs", "pytest", "bash")

LITERAL_MARKER = re.compile(r"^(?P<indent>\s*)(?P<text>.*?)(?P<space>\s*)::\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
#: A path to a documentation page as docstrings write it (from the repository root, or relative
#: to a module: ``../docs/...``).
DOCS_PAGE = r"(?:\.\./)*docs/(?P<{p}>[\w/-]+\.md)(?P<{a}>#[\w-]+)?"
TOKEN = re.compile(
    r"(?P<link>\[[^\]\n]*\](?:\([^)\n]*\)|\[[^\]\n]*\]))"  # a Markdown link or reference: kept
    r"|`(?P<text>[^`<]+?)\s*<(?P<target>[^>\s]+)>`__?"  # a reST hyperlink
    r"|(?P<ticks>``?)(?P<code>[^`\n]+?)(?P=ticks)(?!`)"  # a code span
    r"|(?<![\w/.-])(?P<bare>" + DOCS_PAGE.format(p="page", a="anchor") + r")"  # a bare pointer
)
POINTER = re.compile(DOCS_PAGE.format(p="page", a="anchor") + r"$")


def _language(block: str) -> str:
    """The highlighting of a literal block's (dedented) text."""
    first = block.lstrip().split(None, 1)[0] if block.strip() else ""
    if first == ">>>":
        return "pycon"
    if first in COMMANDS:
        return "bash"
    for language, parse in (("json", json.loads), ("python", ast.parse)):
        try:
            parse(block)
        except (ValueError, SyntaxError):
            continue
        return language
    return "text"


def literal_blocks(text: str) -> str:
    """``text`` with every reST literal block as a fenced code block (see the module's docstring)."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        marker = LITERAL_MARKER.match(lines[i])
        following = next((j for j in range(i + 1, len(lines)) if lines[j].strip()), None)
        base = len(marker["indent"]) if marker else 0
        if marker is None or following is None or len(lines[following]) - len(lines[following].lstrip()) <= base:
            out.append(lines[i])
            i += 1
            continue
        end = following
        while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > base):
            end += 1
        while not lines[end - 1].strip():
            end -= 1
        block = textwrap.dedent("\n".join(lines[following:end]))
        intro = marker["text"] + ("" if marker["space"] or not marker["text"] else ":")
        indent = marker["indent"]
        if intro:
            out += [indent + intro, ""]
        out += [
            f"{indent}```{_language(block)}",
            *(indent + line if line else "" for line in block.split("\n")),
            f"{indent}```",
        ]
        i = end
    return "\n".join(out)


def _page_link(page: str, anchor: str | None) -> str:
    return f"/{page}{anchor or ''}"


def _rewrite(match: re.Match[str]) -> str:
    if match["link"]:
        return match["link"]
    if match["target"]:
        pointer = POINTER.match(match["target"])
        target = _page_link(pointer["page"], pointer["anchor"]) if pointer else match["target"]
        return f"[{match['text']}]({target})"
    if match["ticks"]:
        pointer = POINTER.match(match["code"])
        return f"[`{match['code']}`]({_page_link(pointer['page'], pointer['anchor'])})" if pointer else match[0]
    return f"[{match['bare']}]({_page_link(match['page'], match['anchor'])})"


def links(text: str) -> str:
    """``text`` with reST hyperlinks and pointers to documentation pages as Markdown links,
    fenced code blocks left as they are."""
    # a hyperlink may wrap onto the next line: rewrite each run of prose between fences at once
    chunks, prose, fenced = [], [], False
    for line in text.split("\n"):
        fence = FENCE.match(line) is not None
        if not (fence or fenced):
            prose.append(line)
            continue
        if prose:
            chunks.append(TOKEN.sub(_rewrite, "\n".join(prose)))
        chunks.append(line)
        prose, fenced = [], fenced != fence
    if prose:
        chunks.append(TOKEN.sub(_rewrite, "\n".join(prose)))
    return "\n".join(chunks)


def markdown(text: str) -> str:
    """A docstring's reST as Markdown: literal blocks first, so that their text is never linked."""
    return links(literal_blocks(text))


class RestToMarkdown(griffe.Extension):
    """Rewrite every docstring of a loaded package (see the module's docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:  # noqa: ARG002
        for obj in self._objects(pkg):
            if obj.docstring is not None:
                obj.docstring.value = markdown(obj.docstring.value)

    def _objects(self, obj: griffe.Object) -> list[griffe.Object]:
        found = [obj]
        for member in obj.members.values():
            if not member.is_alias:
                found.extend(self._objects(member))
        return found
