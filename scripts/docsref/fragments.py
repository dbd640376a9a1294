"""Doc fragments of this collection (plugins/doc_fragments/) merged into a module's DOCUMENTATION, as
ansible-doc merges them: attributes and options per key with the module's own keys winning, notes and
seealso appended. Fragments of other collections (ansible.builtin.action_common_attributes) only describe
what the pages describe themselves, so they are left out."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from docsref.sources import SourceError, load_yaml

COLLECTION = "gpuhost.gpu."
MERGED_BY_KEY = ("options", "attributes")
APPENDED = ("notes", "seealso")


def fragment_strings(path: Path) -> dict[str, str]:
    """The string attributes of the ModuleDocFragment class of a fragment file, by name."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError) as exc:
        raise SourceError(f"{path}: cannot be read as a doc fragment ({exc})") from None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModuleDocFragment":
            return {target.id: item.value.value for item in node.body if isinstance(item, ast.Assign)
                    and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str)
                    for target in item.targets if isinstance(target, ast.Name)}
    raise SourceError(f"{path}: no class ModuleDocFragment, which every doc fragment defines")


def resolve(name: str, fragments_dir: Path) -> tuple[Path, dict[str, Any]]:
    """gpuhost.gpu.<file> (its DOCUMENTATION) or gpuhost.gpu.<file>.<variant> (its <VARIANT>)."""
    file_name, _, variant = name.removeprefix(COLLECTION).partition(".")
    path = fragments_dir / f"{file_name}.py"
    if not path.is_file():
        raise SourceError(f"doc fragment {name}: expected {path}; add it or fix extends_documentation_fragment")
    strings = fragment_strings(path)
    key = variant.upper() or "DOCUMENTATION"
    if key not in strings:
        raise SourceError(f"doc fragment {name}: {path} has no {key}; it has {', '.join(sorted(strings))}")
    data = load_yaml(strings[key], f"{path} {key}")
    if not isinstance(data, dict):
        raise SourceError(f"doc fragment {name}: {path} {key} is not a YAML mapping")
    return path, data


def _merge_entries(fragment: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """An attribute or option of both: the fragment's keys, then the module's over them."""
    entries = {name: {**spec, **own[name]} if isinstance(spec, dict) and isinstance(own.get(name), dict)
               else own.get(name, spec) for name, spec in fragment.items()}
    return {**entries, **{name: spec for name, spec in own.items() if name not in fragment}}


def merge(documentation: dict[str, Any], fragments_dir: Path) -> tuple[dict[str, Any], list[Path]]:
    """DOCUMENTATION with this collection's fragments merged in, and the fragment files read."""
    names = documentation.get("extends_documentation_fragment") or []
    names = names.split(",") if isinstance(names, str) else names
    merged = dict(documentation)
    used: list[Path] = []
    for name in (str(item).strip() for item in names):
        if not name.startswith(COLLECTION):
            continue
        path, fragment = resolve(name, fragments_dir)
        used.append(path)
        for key in MERGED_BY_KEY:
            if key in fragment:
                merged[key] = _merge_entries(fragment[key] or {}, merged.get(key) or {})
        for key in APPENDED:
            if fragment.get(key):
                merged[key] = [*(merged.get(key) or []), *fragment[key]]
    return merged, list(dict.fromkeys(used))
