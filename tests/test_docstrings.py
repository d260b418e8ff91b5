"""Docstrings are the API reference (the site renders them with mkdocstrings): every public
name of ``interp_init``, ``probes`` and ``training`` has one, found the way the reference finds
it (griffe, with ``#:`` comments read as attribute docstrings by griffe-sphinx), and every
example in a probe module's docstrings runs as a doctest."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
from functools import cache
from types import ModuleType

import pytest

griffe = pytest.importorskip("griffe", reason="griffe is not installed (pip install -e '.[dev]')")
pytest.importorskip("griffe_sphinx", reason="griffe-sphinx is not installed (pip install -e '.[dev]')")

PACKAGES = ("interp_init", "probes", "training")


@cache
def _griffe_package(package: str):  # noqa: ANN202 - a griffe Module
    loader = griffe.GriffeLoader(extensions=griffe.load_extensions("griffe_sphinx"))
    module = loader.load(package)
    loader.resolve_aliases(implicit=False, external=False)
    return module


def _modules(package: str) -> list[ModuleType]:
    """``package`` and every module under it, imported."""
    root = importlib.import_module(package)
    names = [package] + [m.name for m in pkgutil.walk_packages(root.__path__, prefix=f"{package}.")]
    return [importlib.import_module(name) for name in names]


def _griffe_modules(module):  # noqa: ANN001, ANN202 - griffe Modules
    """``module`` and every module under it, as griffe read them (nothing imported)."""
    yield module
    for member in module.modules.values():
        yield from _griffe_modules(member)


def _griffe_object(package: str, name: str):  # noqa: ANN202 - a griffe Object
    """The griffe object that defines ``package.name`` (not an alias of it)."""
    obj = getattr(importlib.import_module(package), name)
    top = obj.__module__.split(".")[0] if hasattr(obj, "__module__") and hasattr(obj, "__qualname__") else None
    if top in PACKAGES:  # a class or a function: where it is defined
        return _griffe_package(top)[f"{obj.__module__.removeprefix(top + '.')}.{obj.__qualname__}".removeprefix(".")]
    # a value: the module that assigns it (where two assign the name, the one whose value it is)
    candidates = [
        m.members[name]
        for p in PACKAGES
        for m in _griffe_modules(_griffe_package(p))
        if name in m.members and not m.members[name].is_alias
    ]
    for member in candidates:
        if len(candidates) == 1 or vars(importlib.import_module(member.parent.path)).get(name) is obj:
            return member
    raise AssertionError(f"{package}.{name}: no module of the three packages defines it")


PUBLIC = [
    pytest.param(package, name, id=f"{package}.{name}")
    for package in PACKAGES
    for name in importlib.import_module(package).__all__
]


@pytest.mark.parametrize(("package", "name"), PUBLIC)
def test_every_public_name_has_a_docstring(package: str, name: str) -> None:
    found = _griffe_object(package, name)
    text = found.docstring.value.strip() if found.docstring else ""
    assert text, f"{package}.{name} ({found.path}) has no docstring: the API reference shows nothing for it"
    obj = getattr(importlib.import_module(package), name)
    if inspect.isclass(obj):  # a dataclass without a docstring gets its signature as __doc__
        assert not text.startswith(f"{obj.__name__}("), f"{found.path}: the docstring is the generated signature"


def _probe_examples() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder()
    tests = [t for module in _modules("probes") for t in finder.find(module) if t.examples]
    return sorted(tests, key=lambda t: t.name)


EXAMPLES = _probe_examples()


def test_the_probes_have_docstring_examples() -> None:
    assert EXAMPLES, "no docstring of a probe module has an example (>>>)"


@pytest.mark.parametrize("test", EXAMPLES, ids=[t.name for t in EXAMPLES])
def test_probe_docstring_example_runs(test: doctest.DocTest) -> None:
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    report: list[str] = []
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
