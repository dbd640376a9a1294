"""docs/development.md against the tree: it names every package, names nothing that does not exist, and its recipes
name the files they touch, each of which exists, within the file counts the project aims for.

The page is what a newcomer reads before changing anything; a package added without a row, a file moved without
its recipe step, or a recipe that grows past its aim fails here rather than misleading the next reader.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.paths import ROOT

PAGE = ROOT / "docs" / "development.md"
SHARED = ROOT / "plugins" / "module_utils"
# A code span that names a path of the repository: it has a slash, or is one of the top-level files.
PATH_SPAN = re.compile(r"`([A-Za-z0-9_.<>*\-]+(?:/[A-Za-z0-9_.<>*\-]*)+|[A-Za-z0-9_\-]+\.(?:yml|py|md|json|txt|cfg))`")
# A recipe step: "1. `path`: what to do there".
STEP = re.compile(r"^\d+\. `([^`]+)`", re.MULTILINE)
# The most files a recipe may touch, by the recipe's heading (the aim of the one-way-in work: a new material kind in
# four files, a new finding over gathered facts in three).
AIMS = {"a material kind": 4, "a finding over gathered facts": 3}
REQUIRED_RECIPES = ("a finding over gathered facts", "a rule", "a material kind", "a gatherer", "a role option",
                    "a parser", "a module", "a role")
# Files the recipes and the layout name that exist only in a user's or a build's tree.
NOT_IN_TREE = {".venv/", "reports/", "captures/", ".cache/"}


def _text() -> str:
    return PAGE.read_text(encoding="utf-8")


def _section(text: str, heading: str) -> str:
    level = heading.count("#")
    match = re.search(rf"^{re.escape(heading)}\n(.*?)(?=^#{{1,{level}}} |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"docs/development.md has no section {heading!r}"
    return match.group(1)


def _exists(path: str) -> bool:
    """A path of the page exists in the tree; <placeholder> segments and * match any name."""
    pattern = re.sub(r"<[^>]+>", "*", path.rstrip("/"))
    if "*" in pattern:
        return any(ROOT.glob(pattern))
    # Written from the repository, from module_utils (as the packages table does), from docs/ or tests/ (as their
    # rows do); a bare file name anywhere in the tree (as a role's or a recipe's prose names it).
    if any((base / pattern).exists() for base in (ROOT, SHARED, ROOT / "docs", ROOT / "tests")):
        return True
    return "/" not in pattern.rstrip("/") and any(ROOT.glob(f"**/{pattern}"))


def _packages() -> list[str]:
    """Every package of module_utils as `name/` and every root module as `name.py`."""
    packages = [f"{path.parent.name}/" for path in sorted(SHARED.glob("*/__init__.py"))]
    modules = [path.name for path in sorted(SHARED.glob("*.py")) if path.name != "__init__.py"]
    return packages + modules


def _recipes() -> dict[str, list[str]]:
    """Each recipe's heading (lower case, "### " cut) -> the paths its steps name."""
    body = _section(_text(), "## How to add")
    recipes = {}
    for heading, steps in re.findall(r"^### ([^\n]+)\n(.*?)(?=^### |\Z)", body, re.MULTILINE | re.DOTALL):
        recipes[heading.strip().lower()] = STEP.findall(steps)
    return recipes


@pytest.mark.parametrize("package", _packages())
def test_every_package_of_module_utils_has_a_row(package: str) -> None:
    table = _section(_text(), "## Packages")
    assert re.search(rf"^\| `{re.escape(package)}` \|", table, re.MULTILINE), (
        f"plugins/module_utils/{package} has no row in the Packages table of docs/development.md: add one that "
        "says what it holds and which layer it is")


def test_the_files_a_package_row_names_are_in_that_package() -> None:
    table = _section(_text(), "## Packages")
    misplaced = []
    for package, what in re.findall(r"^\| `([^`]+/)` \|[^|]*\|(.*)\|$", table, re.MULTILINE):
        misplaced += [f"{package}{name}" for name in re.findall(r"`([\w.]+\.py)`", what)
                      if not (SHARED / package / name).is_file()]
    assert misplaced == [], f"the Packages table names files that are not in their package: {misplaced}"


def test_the_packages_table_names_only_packages_that_exist() -> None:
    table = _section(_text(), "## Packages")
    named = re.findall(r"^\| `([^`]+)` \|", table, re.MULTILINE)
    assert named, "the Packages table of docs/development.md has no rows"
    assert sorted(set(named) - set(_packages())) == []


def test_every_path_the_page_names_exists() -> None:
    missing = sorted({path for path in PATH_SPAN.findall(_text())
                      if path not in NOT_IN_TREE and not path.startswith(("http", "~")) and not _exists(path)})
    assert missing == [], f"docs/development.md names paths that do not exist: {missing}"


@pytest.mark.parametrize("recipe", REQUIRED_RECIPES)
def test_each_recipe_is_there_and_names_its_files(recipe: str) -> None:
    recipes = _recipes()
    assert recipe in recipes, f"docs/development.md has no recipe '### {recipe.capitalize()}' under '## How to add'"
    steps = recipes[recipe]
    assert steps, f"the recipe {recipe!r} names no file: each step is '1. `path`: what to do there'"
    missing = [path for path in steps if not _exists(path)]
    assert missing == [], f"the recipe {recipe!r} names files that do not exist: {missing}"


@pytest.mark.parametrize(("recipe", "most"), sorted(AIMS.items()))
def test_a_recipe_stays_within_its_file_count(recipe: str, most: int) -> None:
    files = set(_recipes().get(recipe, []))
    assert files, f"no recipe {recipe!r}"
    assert len(files) <= most, f"the recipe {recipe!r} touches {len(files)} files, more than its aim of {most}"


def test_the_checks_fail_on_a_page_that_lies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The negative control: a page naming a missing package file and a missing recipe step fails both checks."""
    page = tmp_path / "development.md"
    page.write_text(_text().replace("## How to add\n", "## How to add\n\n### A ghost\n1. `plugins/nowhere.py`: x\n", 1)
                    + "\nSee `plugins/module_utils/no_such_package/`.\n", encoding="utf-8")
    monkeypatch.setattr(__import__(__name__, fromlist=["PAGE"]), "PAGE", page)
    assert "a ghost" in _recipes()
    assert not _exists("plugins/nowhere.py")
    with pytest.raises(AssertionError, match="no_such_package"):
        test_every_path_the_page_names_exists()
