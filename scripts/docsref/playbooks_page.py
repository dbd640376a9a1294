"""docs/reference/playbooks.md: what each playbook does (its header comment), its plays, roles and tags."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from docsref.markdown import anchor, header, table
from docsref.markup import COLLECTION, code_span, escape_markdown
from docsref.sources import SourceError, load_yaml

IMPORT_PLAYBOOK = ("ansible.builtin.import_playbook", "import_playbook")
ROLE_TASKS = ("ansible.builtin.import_role", "ansible.builtin.include_role", "import_role", "include_role")
TASK_LISTS = ("pre_tasks", "roles", "tasks", "post_tasks", "handlers")
BLOCK_LISTS = ("block", "rescue", "always")
# A comment line indented past "# " is a list the author laid out by hand (site.yml's phases).
INDENTED = re.compile(r"^\s{2,}\S")


def header_comment(text: str) -> list[str]:
    """The leading comment as Markdown blocks: paragraphs, and indented lines as list items."""
    lines = text.splitlines()
    while lines and lines[0].strip() in ("", "---"):
        lines.pop(0)
    blocks: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []

    def close(kind: list[str], joined: str) -> None:
        if kind:
            blocks.append(joined)
            kind.clear()

    for line in lines:
        if not line.startswith("#"):
            break
        body = line[1:].removeprefix(" ")
        if INDENTED.match(body):
            close(paragraph, escape_markdown(" ".join(paragraph)))
            items.append(f"- {escape_markdown(' '.join(body.split()))}")
            continue
        close(items, "\n".join(items))
        if body.strip():
            paragraph.append(body.strip())
        else:
            close(paragraph, escape_markdown(" ".join(paragraph)))
    close(paragraph, escape_markdown(" ".join(paragraph)))
    close(items, "\n".join(items))
    return blocks


def tags_of(node: Any) -> Iterator[str]:
    """Every tag set anywhere under a play or task (tags:, and include_* apply: tags:)."""
    if isinstance(node, dict):
        tags = node.get("tags")
        if isinstance(tags, str):
            yield from (tag.strip() for tag in tags.split(","))
        elif isinstance(tags, list):
            yield from (str(tag) for tag in tags)
        for key, child in node.items():
            if key != "tags":
                yield from tags_of(child)
    elif isinstance(node, list):
        for child in node:
            yield from tags_of(child)


def roles_of(play: dict[str, Any]) -> Iterator[str]:
    """Roles a play runs: its roles: list, then import_role/include_role tasks at any block depth."""
    for item in play.get("roles") or []:
        yield str(item.get("role") or item.get("name")) if isinstance(item, dict) else str(item)
    for key in TASK_LISTS:
        if key != "roles":
            yield from _task_roles(play.get(key) or [])


def _task_roles(tasks: list[Any]) -> Iterator[str]:
    for task in tasks:
        if not isinstance(task, dict):
            continue
        for key in ROLE_TASKS:
            if isinstance(task.get(key), dict) and task[key].get("name"):
                yield str(task[key]["name"])
        for key in BLOCK_LISTS:
            yield from _task_roles(task.get(key) or [])


def role_link(name: str) -> str:
    short = name.removeprefix(COLLECTION)
    if "." in short:
        return code_span(name)
    return f"[{code_span(name)}](../../roles/{short}/README.md)"


def unique(values: Iterator[str]) -> list[str]:
    return list(dict.fromkeys(values))


def import_link(root: Path, playbook: Path, imported: str) -> str:
    """An imported playbook (relative to the importing one) as a link to its section on this page."""
    # normpath, not resolve(): a checkout reached through a link keeps its own paths.
    target = Path(os.path.normpath(playbook.parent / imported))
    if "{{" in imported or not target.is_relative_to(root):
        return f"imports {code_span(imported)}"
    return f"imports [{code_span(imported)}](#{anchor(target.relative_to(root).as_posix())})"


def section(root: Path, path: Path, relative: str) -> str:
    text = path.read_text(encoding="utf-8")
    plays = load_yaml(text, relative)
    if not isinstance(plays, list):
        raise SourceError(f"{relative}: expected a list of plays")
    parts = [f"## {relative}", *header_comment(text)]
    rows = []
    for play in plays:
        if not isinstance(play, dict):
            continue
        imported = next((play[key] for key in IMPORT_PLAYBOOK if key in play), None)
        what = import_link(root, path, str(imported)) if imported else \
            ", ".join(role_link(role) for role in unique(roles_of(play))) or "tasks only"
        hosts = code_span(str(play["hosts"])) if "hosts" in play else ""
        tags = ", ".join(code_span(tag) for tag in unique(tags_of(play)))
        rows.append([escape_markdown(str(play.get("name", ""))), hosts, what, tags])
    parts.append(table(["play", "hosts", "roles or imported playbook", "tags"], rows))
    return "\n\n".join(parts)


def page(root: Path, playbooks: list[Path]) -> str:
    lines = [
        header("site.yml and playbooks/*.yml (their plays and leading comments)"),
        "# Playbooks",
        "What each playbook does (its leading comment), and for each play: the hosts, the roles it runs (or the "
        "playbook it imports) and every tag set in it, so that `--tags` and `--skip-tags` can be chosen here.",
    ]
    lines += [section(root, path, path.relative_to(root).as_posix()) for path in playbooks]
    return "\n\n".join(lines) + "\n"
