"""A griffe extension for the API reference: the docstrings' Sphinx roles (``:func:`masked_run```,
``:class:`~probes.protocol.HookedModel```) become mkdocstrings cross-references where the name
resolves to an object the reference documents, and code spans where it does not (a name of
another library, a private helper), so a role never shows as raw text nor breaks the strict build.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|obj|exc|const):`(~?)([\w.]+)(\(\))?`")


def _documented(obj: griffe.Object | griffe.Alias) -> bool:
    """Whether the reference renders ``obj``: public, with a docstring (what has none is not
    shown), and so every parent."""
    current: Any = obj
    while current is not None:
        if not current.is_public or (
            not current.is_module and not (current.docstring and current.docstring.value.strip())
        ):
            return False
        current = current.parent
    return True


def _target(scope: griffe.Object, name: str, loader: griffe.GriffeLoader) -> str | None:
    """The canonical path of ``name`` seen from ``scope``, where the reference documents it."""
    first, _, rest = name.partition(".")
    candidates = [name]
    try:
        resolved = scope.resolve(first)
        candidates.insert(0, f"{resolved}.{rest}" if rest else resolved)
    except Exception:  # noqa: BLE001 - griffe raises NameResolutionError or ValueError: not in scope
        pass
    for path in candidates:
        try:
            found = loader.modules_collection[path]
            if found.is_alias:
                found = found.final_target
        except Exception:  # noqa: BLE001 - KeyError, or an alias that does not resolve
            continue
        if _documented(found):
            return found.path
    return None


class SphinxRoles(griffe.Extension):
    """Rewrite the roles of every docstring in a loaded package (see the module's docstring)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:  # noqa: ARG002
        for obj in self._objects(pkg):
            if obj.docstring is not None:
                obj.docstring.value = ROLE.sub(lambda m, o=obj: self._link(m, o, loader), obj.docstring.value)

    def _objects(self, obj: griffe.Object) -> list[griffe.Object]:
        found = [obj]
        for member in obj.members.values():
            if not member.is_alias:
                found.extend(self._objects(member))
        return found

    def _link(self, match: re.Match[str], scope: griffe.Object, loader: griffe.GriffeLoader) -> str:
        short, name, call = match.groups()
        shown = (name.rsplit(".", 1)[-1] if short else name) + (call or "")
        # a function's or a class's own names are resolved in its module, as Sphinx does
        path = _target(scope if scope.is_module else scope.module, name, loader)
        return f"[`{shown}`][{path}]" if path else f"`{shown}`"
