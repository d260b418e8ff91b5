"""Write the API reference at build time (mkdocs-gen-files): one page per module of ``interp_init``,
``probes`` and ``training``, found on disk, so that a module added or renamed needs no edit here.

Each page is one mkdocstrings directive (``::: package.module``) that renders the module's
docstring and its public names from their docstrings; a package's page (``.../index.md``) shows
its own docstring and what its ``__init__`` defines, its modules being pages of their own.
``reference/SUMMARY.md`` is the section's navigation (mkdocs-literate-nav). The changelog is
published as a page too (``changelog.md``, from CHANGELOG.md).
"""

from __future__ import annotations

from pathlib import Path

import griffe
import mkdocs_gen_files

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("interp_init", "probes", "training")


#: The reference's first page.
INDEX = """# API reference

Generated from the docstrings when the site builds, one page per module: what each public name
measures or does, its signature with the tensor shapes, and an example where there is one.

- [`probes`](probes/index.md): the analyses of any TransformerLens model (masking, information
  flow, similarity, geometry, stable rank, views).
- [`interp_init`](interp_init/index.md): the base: gamma init, the architectures, the tasks,
  building and saving models, the run folder.
- [`training`](training/index.md): run configs and presets, the loop, ensembles, sweeps, phase
  diagrams, the reproduction, the report and the `interp-init` command line.
"""


def package_options(dotted: str) -> str:
    """A package page's options: its docstring and the names its ``__init__`` defines itself; what
    it re-exports is documented on the page of the module that defines it."""
    package = griffe.load(dotted, search_paths=[ROOT], resolve_aliases=False)
    own = [
        name
        for name, member in package.members.items()
        if not member.is_alias and not member.is_module and not name.startswith("_")
    ]
    return f"    options:\n      members: {own or 'false'}\n".replace("'", '"')


def modules(package: str) -> list[tuple[str, ...]]:
    """Every public module of ``package`` as its dotted parts, a package's ``__init__`` as the package."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if not all((ROOT.joinpath(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
            continue  # a script in a folder that is not a package
        if parts[-1] == "__init__":
            parts = parts[:-1]
        elif parts[-1].startswith("_"):
            continue  # private modules (``_common.py``) and ``__main__``
        if any(part.startswith("_") for part in parts):
            continue
        found.append(parts)
    return found


def write_reference() -> None:
    """Write one page per module and ``reference/SUMMARY.md``."""
    nav = mkdocs_gen_files.Nav()
    for package in PACKAGES:
        for parts in modules(package):
            is_package = (ROOT.joinpath(*parts) / "__init__.py").is_file()
            page = Path(*parts, "index.md") if is_package else Path(*parts[:-1], f"{parts[-1]}.md")
            nav[parts] = page.as_posix()
            with mkdocs_gen_files.open(Path("reference") / page, "w") as out:
                dotted = ".".join(parts)
                out.write(f"::: {dotted}\n" + (package_options(dotted) if is_package else ""))
    with mkdocs_gen_files.open("reference/index.md", "w") as out:
        out.write(INDEX)
    with mkdocs_gen_files.open("reference/SUMMARY.md", "w") as out:
        out.write("* [API reference](index.md)\n")  # the section's own page (mkdocs-section-index)
        out.writelines(nav.build_literate_nav())


def write_changelog() -> None:
    """Publish CHANGELOG.md as the site's ``changelog.md``."""
    with mkdocs_gen_files.open("changelog.md", "w") as out:
        out.write((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))


write_reference()
write_changelog()
