"""Markdown pieces every reference page uses: the generated-file header, tables, values, option tables."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from docsref.markup import code_span, render

FIX_COMMAND = "make docs"


def header(source: str) -> str:
    """The first line of every generated page: where it comes from and how to remake it."""
    return (f"<!-- Generated from {source} by `{FIX_COMMAND}` (scripts/docs_reference.py --write). "
            "Do not edit by hand: change the source and run it again. -->")


def anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation other than - and _ dropped, spaces as -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def cell(text: str) -> str:
    """Markdown for one table cell: one line, | escaped (inside code spans too, as GFM tables read them)."""
    return text.replace("\n", " ").replace("|", "\\|")


def table(columns: list[str], rows: list[list[str]]) -> str:
    lines = [f"| {' | '.join(columns)} |", "|" + "---|" * len(columns)]
    lines += [f"| {' | '.join(cell(value) for value in row)} |" for row in rows]
    return "\n".join(lines)


def value(data: Any) -> str:
    """A default, a choice or a sample as code, written the way YAML would read it back."""
    if isinstance(data, bool):
        return code_span("true" if data else "false")
    if isinstance(data, str):
        return code_span(data) if data.strip() else code_span(json.dumps(data))
    return code_span(json.dumps(data, sort_keys=False, default=str))


def paragraphs(description: Any) -> list[str]:
    """A description as its list of paragraphs (a string is one)."""
    if description is None:
        return []
    items = description if isinstance(description, list) else [description]
    return [" ".join(str(item).split()) for item in items]


def described(description: Any, link: Callable[[str], str | None]) -> str:
    """A description for a table cell: its paragraphs rendered and joined by line breaks."""
    return "<br><br>".join(render(text, link) for text in paragraphs(description))


def type_of(spec: Mapping[str, Any]) -> str:
    kind = str(spec.get("type", "str"))
    return f"list of {spec['elements']}" if kind == "list" and spec.get("elements") else kind


def walk_options(options: Mapping[str, Any] | None, prefix: str = "",
                 children: tuple[str, ...] = ("suboptions", "options")) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, spec) of every option, nested ones after their parent with Ansible's O() path:
    ``parent.child`` under a dict, ``parent[].child`` under a list."""
    for name, spec in (options or {}).items():
        spec = spec or {}
        path = f"{prefix}{name}"
        yield path, spec
        nested = next((spec[key] for key in children if isinstance(spec.get(key), Mapping)), None)
        if nested:
            joint = "[]." if spec.get("type") == "list" else "."
            yield from walk_options(nested, path + joint, children)


def options_table(options: Mapping[str, Any] | None, link: Callable[[str], str | None]) -> str:
    rows = []
    for path, spec in walk_options(options):
        default = value(spec["default"]) if "default" in spec else ""
        choices = ", ".join(value(choice) for choice in spec.get("choices") or [])
        aliases = spec.get("aliases") or []
        description = described(spec.get("description"), link)
        if aliases:
            description += f"<br><br>Aliases: {', '.join(code_span(alias) for alias in aliases)}."
        rows.append([code_span(path), type_of(spec), "yes" if spec.get("required") else "no", default, choices,
                     description])
    if not rows:
        return "None."
    return table(["name", "type", "required", "default", "choices", "description"], rows)


def bullets(items: Any, link: Callable[[str], str | None]) -> str:
    return "\n".join(f"- {render(text, link)}" for text in paragraphs(items))
