"""The layout of the code, checked from the source: packages that stand on each other in one
direction, no string look-ups of the project's own modules, one concept a module (a warning
past :data:`LONG_MODULE` lines, never a forced split), one command line."""

from __future__ import annotations

import ast
import importlib
import re
import warnings
from pathlib import Path

import pytest
from helpers import ROOT

PACKAGES = ("interp_init", "probes", "training")
#: What each package may import of the project: the base stands alone, the analyses on the
#: base, training on both.
ALLOWED = {
    "interp_init": {"interp_init"},
    "probes": {"interp_init", "probes"},
    "training": {"interp_init", "probes", "training"},
}
#: A module holds one concept however long that takes; past this many lines the layout check
#: warns (read it: is it still one concept?), it never fails.
LONG_MODULE = 900


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def _imported_packages(path: Path) -> set[str]:
    """The project packages a module imports, anywhere in it (top level, functions, TYPE_CHECKING)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found |= {name.split(".")[0] for name in names} & set(PACKAGES)
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_packages_stand_on_each_other_in_one_direction(path: Path) -> None:
    package = path.relative_to(ROOT).parts[0]
    assert _imported_packages(path) <= ALLOWED[package], (
        f"{path.relative_to(ROOT)} imports {_imported_packages(path) - ALLOWED[package]}"
    )


def test_the_layout_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from training.trainer.loop import fit\n    import probes.rank\n")
    assert _imported_packages(module) == {"training", "probes"}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_string_look_up_of_the_projects_modules(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
            "import_module",
            "__import__",
        ):
            pytest.fail(f"{path.relative_to(ROOT)}:{node.lineno} imports a module by its name as a string")


def long_modules(paths: list[Path], limit: int = LONG_MODULE) -> dict[str, int]:
    """The modules of ``paths`` longer than ``limit`` lines, with their lengths."""
    lengths = {p.as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in paths}
    return {name: n for name, n in lengths.items() if n > limit}


def test_long_modules_are_named_in_a_warning_never_split(tmp_path: Path) -> None:
    """Past :data:`LONG_MODULE` lines a module is named in a warning (is it still one concept?);
    the check sees a planted long module and passes over a short one."""
    (tmp_path / "long.py").write_text("x = 1\n" * (LONG_MODULE + 1))
    (tmp_path / "short.py").write_text("x = 1\n")
    assert long_modules(sorted(tmp_path.glob("*.py"))) == {(tmp_path / "long.py").as_posix(): LONG_MODULE + 1}
    for name, lines in long_modules(_modules()).items():
        warnings.warn(
            f"{Path(name).relative_to(ROOT)} has {lines} lines: does it still hold one concept?", stacklevel=1
        )


def test_only_the_command_line_imports_click() -> None:
    importers = [
        p.relative_to(ROOT).as_posix() for p in _modules() if "click" in {n.split(".")[0] for n in _all_imports(p)}
    ]
    assert sorted(importers) == [
        "training/cli/__init__.py",
        "training/cli/errors.py",
        "training/cli/flags.py",
        "training/cli/summaries.py",
    ]


def _all_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize(
    "package",
    [
        "interp_init",
        "probes",
        "training",
        "training.studies.sweep",
        "training.studies.phase",
        "training.studies.report",
    ],
)
def test_no_module_shares_its_name_with_a_public_name_of_its_package(package: str) -> None:
    module = importlib.import_module(package)
    folder = Path(module.__file__).parent
    submodules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"} | {
        p.name for p in folder.iterdir() if (p / "__init__.py").is_file()
    }
    assert submodules & set(module.__all__) == set()


def test_the_docs_describe_the_layout_the_code_has() -> None:
    section = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    for package in PACKAGES:
        assert f"`{package}`" in section, package
    for module in ("interp_init/runfolder.py", "training/cli/flags.py"):
        assert f"`{Path(module).name}`" in section and (ROOT / module).is_file(), module
    assert "`cli/`" in section


@pytest.mark.parametrize("task", ["symmetric", "id-ood", "complexity"])
@pytest.mark.parametrize("preset", ["paper", "cpu", "tiny"])
def test_presets_name_only_what_differs_from_the_papers_defaults(preset: str, task: str) -> None:
    from training.config import RunConfig, preset_options

    defaults = RunConfig().flat()
    same = {k: v for k, v in preset_options(preset, task).items() if defaults[k] == v}
    assert same == {}, f"preset {preset!r} repeats the defaults {same}"


def _project_module_imports(path: Path) -> set[str]:
    """The project modules ``path`` imports, anywhere in it, as dotted names (``from pkg
    import mod`` counts as ``pkg.mod`` when ``pkg/mod.py`` exists)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            base = ROOT.joinpath(*node.module.split("."))
            found |= {
                f"{node.module}.{a.name}"
                for a in node.names
                if (base / f"{a.name}.py").is_file() or (base / a.name / "__init__.py").is_file()
            }
    return {name for name in found if name.split(".")[0] in PACKAGES}


def _dotted(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_base_package_has_no_import_circle() -> None:
    """``interp_init``'s modules stand on each other one way (``runfolder`` on ``model``, never
    back): no module reaches itself through the modules it imports."""
    modules = {_dotted(p): p for p in (ROOT / "interp_init").rglob("*.py")}
    graph = {
        name: {m for m in _project_module_imports(path) if m in modules and m != name} for name, path in modules.items()
    }
    graph = {
        name: {m for m in deps if not name.startswith(m + ".") or modules[m].name != "__init__.py"}
        for name, deps in graph.items()
    }

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        for nxt in graph[start]:
            if nxt == target or (nxt not in seen and (seen.add(nxt) or reaches(nxt, target, seen))):
                return True
        return False

    circles = sorted(name for name in graph if reaches(name, name, set()))
    assert circles == [], f"modules in an import circle: {circles}"
    assert "interp_init.model" in _project_module_imports(modules["interp_init.runfolder"])
    assert "interp_init.runfolder" not in _project_module_imports(modules["interp_init.model"])


#: The modules that define tasks: the only ones that may name one.
TASK_MODULES = (
    "interp_init/tasks/base.py",
    "interp_init/tasks/registry.py",
    "interp_init/tasks/anchor_pairs.py",
    "interp_init/tasks/anchor.py",
    "interp_init/tasks/addition.py",
    "interp_init/tasks/data.py",
)


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    return {
        id(n.body[0].value)
        for n in nodes
        if n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
    }


def task_name_literals(path: Path) -> list[str]:
    """Where a module writes a registered task's name as a string of its own (not in a docstring)."""
    from interp_init.tasks.registry import registered_tasks

    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    names = set(registered_tasks())
    return [
        f"{path.relative_to(ROOT)}:{n.lineno} {n.value!r}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and n.value in names and id(n) not in skip
    ]


@pytest.mark.parametrize(
    "path",
    [p for p in _modules() if p.relative_to(ROOT).as_posix() not in TASK_MODULES],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_nothing_outside_the_task_modules_names_a_task(path: Path) -> None:
    assert task_name_literals(path) == [], (
        "a task's name outside its module: ask the task (interp_init.tasks.base) instead"
    )


def test_the_task_name_check_sees_a_branch(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Docstring naming symmetric."""\ndef f(task):\n    return 1 if task == "id-ood" else 0\n')
    module = module.rename(ROOT / "tests" / "_layout_probe_tmp.py")
    try:
        assert task_name_literals(module) == ["tests/_layout_probe_tmp.py:3 'id-ood'"]
    finally:
        module.unlink()


# ------------------------------------------------------------------ no import circle, at any level


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_edges(path: Path, known: set[str]) -> set[str]:
    """The project modules ``path`` imports anywhere (functions and ``if TYPE_CHECKING``
    blocks included: a type-only import is a dependency too), each ``from P import name``
    resolved to ``P.name`` where that is a module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in known else node.module)
    return found & known


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle of ``graph`` (node -> the nodes it stands on): Tarjan's strongly
    connected components of more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def module_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> tuple[dict[str, set[str]], dict[str, Path]]:
    """Every module of ``packages`` under ``root`` -> the project modules it imports, and each module's file."""
    paths = {_module_name(p, root): p for package in packages for p in (root / package).rglob("*.py")}
    return {name: _import_edges(path, set(paths)) - {name} for name, path in paths.items()}, paths


def import_cycles(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[list[str]]:
    """Every import circle among the modules of ``packages`` under ``root``."""
    return cycles(module_graph(root, packages)[0])


def folder_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Every folder of ``packages`` under ``root`` (``training/launch``) -> the folders its
    modules import.  A top package's ``__init__.py`` is its front, which exports names from
    the folders below it, and stands in no folder; every other module stands in its own."""
    graph, paths = module_graph(root, packages)
    folders: dict[str, set[str]] = {}
    for name, path in paths.items():
        rel = path.relative_to(root)
        if rel.name == "__init__.py" and len(rel.parts) == 2:
            continue
        deps = folders.setdefault(rel.parent.as_posix(), set())
        deps |= {paths[m].relative_to(root).parent.as_posix() for m in graph[name]} - {rel.parent.as_posix()}
    return folders


def test_no_import_circle_between_modules_type_only_imports_included() -> None:
    assert import_cycles(ROOT) == []


def test_no_import_circle_between_folders() -> None:
    assert cycles(folder_graph(ROOT)) == []


def test_the_circle_checks_see_a_type_only_import_and_a_circle_of_folders(tmp_path: Path) -> None:
    def write(files: dict[str, str]) -> None:
        for rel, text in files.items():
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)

    write(
        {
            "training/__init__.py": "",
            "training/a/__init__.py": "",
            "training/b/__init__.py": "",
            "training/a/x.py": "from training.b.y import g\n",
            "training/b/y.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from training.a.x import f  # planted: only for the types\n",
        }
    )
    assert import_cycles(tmp_path, ("training",)) == [["training.a.x", "training.b.y"]]
    assert cycles(folder_graph(tmp_path, ("training",))) == [["training/a", "training/b"]]
    write(
        {
            "training/b/y.py": "def g():\n    pass\n",
            "training/b/z.py": "def h():\n    from training.a.w import f  # planted: a, b and back\n",
            "training/a/w.py": "def f():\n    pass\n",
        }
    )
    assert import_cycles(tmp_path, ("training",)) == []  # no module reaches itself ...
    assert cycles(folder_graph(tmp_path, ("training",))) == [["training/a", "training/b"]]  # ... but the folders do


def documented_arrows(text: str) -> dict[str, set[str]]:
    """docs/layout.md's table of what stands on what: folder -> the folders it stands on."""
    section = text.split("## What stands on what", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| `")]
    return {folder.strip().strip("`"): set(re.findall(r"`([^`]+)`", stands)) for folder, stands in rows}


def test_the_layout_docs_arrows_are_the_imports() -> None:
    """docs/layout.md says, folder by folder, what each stands on: exactly the folders its modules import."""
    documented, actual = (
        documented_arrows((ROOT / "docs" / "layout.md").read_text(encoding="utf-8")),
        folder_graph(ROOT),
    )
    assert set(documented) == set(actual), (
        f"folders the table lacks: {sorted(set(actual) - set(documented))}; gone: {sorted(set(documented) - set(actual))}"
    )
    wrong = {
        f: {"undocumented": sorted(actual[f] - documented[f]), "not imported": sorted(documented[f] - actual[f])}
        for f in actual
        if actual[f] != documented[f]
    }
    assert wrong == {}


def test_the_pipeline_docs_arrows_name_what_the_code_defines() -> None:
    """Each step of docs/pipeline.md's path names a class or function (or a method of the
    step before's class) that the module it names defines."""
    text = (ROOT / "docs" / "pipeline.md").read_text(encoding="utf-8")
    block = text.split("```\n", 2)[1]
    owner = ""
    for line in block.splitlines():
        call, path = re.split(r"\s{2,}", line.strip())[:2]
        name, _, attr = re.match(r"\.?([\w.]+)", call).group(1).partition(".")
        owner, attr = (owner, name) if call.startswith(".") else (name, attr)
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        defined = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        assert owner in defined, f"{path} defines no {owner} ({line.strip()})"
        if attr:
            assert attr in {n.name for n in defined[owner].body if isinstance(n, ast.FunctionDef)}, (
                f"{owner} has no {attr} ({line.strip()})"
            )


def test_the_trainer_opens_no_folder_and_the_records_run_no_analysis() -> None:
    """The trainer imports no run-folder code (the launchers open the folder around it);
    the one reader of run folders imports no probe (analyses run after a study, from records)."""
    graph, paths = module_graph(ROOT)
    for name in (n for n in graph if n.startswith("training.trainer")):
        for node in ast.walk(ast.parse(paths[name].read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "interp_init.runfolder":
                assert {a.name for a in node.names} <= {"RunStatus"}, (
                    f"{name} imports {[a.name for a in node.names]} from interp_init.runfolder"
                )
        assert not {
            m
            for m in graph[name]
            if m.split(".")[1] in ("launch", "studies") or m in ("interp_init.fileio", "interp_init.outputs")
        }, name
    assert not any(m.startswith("probes") for m in graph["training.studies.records"])


def test_the_layout_table_names_every_module() -> None:
    section = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    missing = [
        p.relative_to(ROOT).as_posix() for p in _modules() if p.name != "__init__.py" and f"`{p.name}`" not in section
    ]
    assert missing == [], f"docs/layout.md's table does not name {missing}"


# ------------------------------------------------------------------ tests mirror the packages

#: The whole-project checks (docs, site, README, layout, packaging, release, examples,
#: benchmarks, the results tables), which lie in tests/ itself; every other test module tests one package and lies
#: in that package's folder, tests/<package>/.
PROJECT_CHECKS = frozenset(
    (
        "test_benchmarks.py",
        "test_contrast.py",
        "test_fig7.py",
        "test_docs.py",
        "test_docstrings.py",
        "test_examples.py",
        "test_gpu_campaign.py",
        "test_gpu_suite.py",
        "test_gpu_wheels.py",
    )
    + (
        "test_layout.py",
        "test_notebook.py",
        "test_packaging.py",
        "test_plugins.py",
        "test_readme.py",
        "test_release.py",
        "test_site.py",
        "test_tables.py",
    )
)


def misplaced_tests(tests: Path) -> list[str]:
    """The test modules under ``tests`` that do not lie where their package's tests do: in
    tests/ itself only :data:`PROJECT_CHECKS`; in tests/<package>/ only modules that import
    ``package`` (or a test module beside them, for its fixtures); nowhere else; and no two with one name (pytest imports them by their name)."""
    found = []
    seen: dict[str, str] = {}
    for path in sorted(p for p in tests.rglob("test_*.py") if "fixtures" not in p.relative_to(tests).parts):
        rel = path.relative_to(tests).as_posix()
        folder = path.parent.relative_to(tests).parts
        if not folder:
            if path.name not in PROJECT_CHECKS:
                found.append(
                    f"tests/{rel}: a test of one package; move it into tests/<package>/ ({', '.join(PACKAGES)})"
                )
        elif len(folder) == 1 and folder[0] in PACKAGES:
            siblings = {p.stem for p in path.parent.glob("test_*.py")}  # shared fixtures of the same package's tests
            if not {name.split(".")[0] for name in _all_imports(path)} & ({folder[0]} | siblings):
                found.append(
                    f"tests/{rel} does not import {folder[0]}: move it into the folder of the package it tests"
                )
        else:
            found.append(
                f"tests/{rel}: a test module lies in tests/ (whole-project checks) or tests/<package>/ ({', '.join(PACKAGES)})"
            )
        if path.name in seen:
            found.append(
                f"tests/{rel} has the name of tests/{seen[path.name]}: pytest imports test modules by name; rename one"
            )
        seen.setdefault(path.name, rel)
    return found


def test_the_tests_mirror_the_packages() -> None:
    assert misplaced_tests(ROOT / "tests") == []


def test_the_tests_layout_check_sees_a_misplaced_module(tmp_path: Path) -> None:
    for rel, text in {
        "test_docs.py": "import training\n",  # a whole-project check: in tests/ itself
        "test_flow.py": "import probes\n",  # a probes test left in tests/
        "probes/test_masking.py": "from probes.masking import masked_run\n",
        "probes/test_config.py": "from interp_init.config import ModelConfig\n",  # tests another package
        "training/test_flow.py": "def test_f():\n    from training.trainer.loop import fit\n",  # a second test_flow.py
        "helpers/test_x.py": "import probes\n",  # no package's folder
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert misplaced_tests(tmp_path) == [
        "tests/helpers/test_x.py: a test module lies in tests/ (whole-project checks) or tests/<package>/ (interp_init, probes, training)",
        "tests/probes/test_config.py does not import probes: move it into the folder of the package it tests",
        "tests/test_flow.py: a test of one package; move it into tests/<package>/ (interp_init, probes, training)",
        "tests/training/test_flow.py has the name of tests/test_flow.py: pytest imports test modules by name; rename one",
    ]
