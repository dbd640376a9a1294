"""The sources the pages are made from: module files read by their AST (never imported), YAML files, and the
collection's own data (the catalog, the material kinds), imported where a page renders it."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DOC_STRINGS = ("DOCUMENTATION", "EXAMPLES", "RETURN")


class SourceError(ValueError):
    """A source that cannot be read as documentation; the message names the file and the fix."""


@dataclass(frozen=True)
class ModuleDoc:
    name: str
    path: Path
    documentation: dict[str, Any]
    examples: str
    returns: dict[str, Any]
    fragment_files: tuple[Path, ...] = ()


def use_collection(root: Path) -> None:
    """Make the checkout's collection importable as Ansible ships it (the link under collections/, as
    tests/conftest.py does), for the pages rendered from the collection's own data (the catalog, KINDS)."""
    path = str(root / "collections")
    if path not in sys.path:
        sys.path.insert(0, path)


def string_constants(path: Path, names: tuple[str, ...]) -> dict[str, str]:
    """The top-level ``NAME = "..."`` string assignments of a Python file, by name."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise SourceError(f"{path}: not valid Python ({exc.msg}, line {exc.lineno})") from None
    found: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
            continue
        if not isinstance(node.value.value, str):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id in names:
                found[target.id] = node.value.value
    return found


def load_yaml(text: str, where: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SourceError(f"{where}: not valid YAML ({exc}); fix it, ansible-doc reads it too") from None


def read_module(path: Path) -> ModuleDoc:
    strings = string_constants(path, DOC_STRINGS)
    if "DOCUMENTATION" not in strings:
        raise SourceError(f"{path}: no DOCUMENTATION string; every module documents itself for ansible-doc")
    documentation = load_yaml(strings["DOCUMENTATION"], f"{path} DOCUMENTATION")
    if not isinstance(documentation, dict):
        raise SourceError(f"{path}: DOCUMENTATION is not a YAML mapping")
    returns = load_yaml(strings.get("RETURN", ""), f"{path} RETURN") or {}
    if not isinstance(returns, dict):
        raise SourceError(f"{path}: RETURN is not a YAML mapping of return keys")
    return ModuleDoc(path.stem, path, documentation, strings.get("EXAMPLES", "").strip("\n"), returns)


def read_yaml_file(path: Path) -> Any:
    return load_yaml(path.read_text(encoding="utf-8"), str(path))
