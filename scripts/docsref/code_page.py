"""docs/reference/code.md: every Python file under plugins/, by package, with the first paragraph of its docstring.

The docstrings are the one place that says what a file holds; this page gathers them so that a newcomer can find
a file without opening each one, and docs/development.md names the packages and links here for their files. Files
are read by their AST, never imported, so that a file that cannot be imported on this machine still shows.
"""

from __future__ import annotations

import ast
from pathlib import Path

from docsref.markdown import header, table
from docsref.markup import code_span
from docsref.sources import SourceError

PLUGINS = Path("plugins")
SHARED = PLUGINS / "module_utils"


def summary(path: Path) -> str:
    """The first paragraph of the file's docstring, on one line; a file without one is an error, not a blank."""
    try:
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    except SyntaxError as exc:
        raise SourceError(f"{path}: not valid Python ({exc.msg}, line {exc.lineno}); fix it, then run again") from exc
    if not docstring:
        raise SourceError(f"{path}: no docstring; give the file one that says what it holds, then run again")
    return " ".join(docstring.split("\n\n", 1)[0].split())


def packages(root: Path) -> list[Path]:
    """The directories listed, relative to root: each plugin type, then each package of module_utils."""
    kinds = sorted(path.relative_to(root) for path in (root / PLUGINS).iterdir()
                   if path.is_dir() and path.name != "module_utils" and any(path.glob("*.py")))
    shared = sorted(path.parent.relative_to(root) for path in (root / SHARED).glob("*/__init__.py"))
    return [*kinds, SHARED, *shared]


def files_of(root: Path, package: Path) -> list[Path]:
    """The package's own Python files (not those of its sub-packages), __init__.py first when it says anything."""
    files = sorted(path for path in (root / package).glob("*.py") if path.name != "__init__.py")
    init = root / package / "__init__.py"
    return ([init] if init.is_file() and init.stat().st_size else []) + files


def section(root: Path, package: Path) -> list[str]:
    rows = [[code_span(path.name), summary(path)] for path in files_of(root, package)]
    title = f"`{package.as_posix()}/`" if package != SHARED else f"`{package.as_posix()}/` (root modules)"
    return [f"## {title}", "", table(["file", "what it holds"], rows), ""]


def page(root: Path) -> str:
    lines = [header("the docstring of every Python file under plugins/"), "",
             "# Code map", "",
             "Every Python file of the collection, by package, with the first paragraph of its docstring. "
             "What each package is for, the order of the import layers and how to add a finding, a rule, a "
             "material kind, a gatherer or a role option: [Development](../development.md).", ""]
    for package in packages(root):
        lines += section(root, package)
    return "\n".join(lines)
