"""Package attributes imported on first use (PEP 562), without looking modules up by name.

A package lists its public names and says, in a function of its own that imports the
module with an ordinary ``from ... import ... as module`` statement, which module holds
each; :func:`lazy_attributes` makes the module-level ``__getattr__`` and ``__dir__`` from
that.  So ``import training.cli`` (the command line and its ``--help``) and ``import
interp_init.config`` load neither torch nor TransformerLens, while ``from training import
train`` works as usual.

Example (a package's ``__init__.py``)::

    def _module_of(name):
        if name in ("train",):
            from training.trainer import loop as module
        else:
            raise AttributeError(f"module 'training' has no attribute {name!r}")
        return module

    __getattr__, __dir__ = lazy_attributes(globals(), _module_of, __all__)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any


def lazy_attributes(
    namespace: dict[str, Any], module_of: Callable[[str], ModuleType], names: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose ``names`` live in the modules
    ``module_of`` returns; a name is imported once, then kept in ``namespace``."""
    public = tuple(names)

    def __getattr__(name: str) -> Any:
        value = getattr(module_of(name), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *public})

    return __getattr__, __dir__
