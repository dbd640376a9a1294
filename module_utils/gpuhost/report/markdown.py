"""Markdown building blocks the reports share: table cells, tables, GPU matrices and heading anchors."""

from __future__ import annotations

import re
from typing import Any

# What GitHub and GitLab drop from a heading to make its anchor: anything but letters, digits, "_", "-" and
# spaces; the spaces then become "-".
_NOT_IN_ANCHOR = re.compile(r"[^\w\- ]")


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def at(values: list[Any] | None, index: int) -> Any:
    return values[index] if values and index < len(values) else None


def matrix_table(names: list[str], matrix: list[list[Any]]) -> list[str]:
    return table(["", *names], [[at(names, i) or f"GPU{i}", *row] for i, row in enumerate(matrix)])


def anchor(heading: str, taken: dict[str, int]) -> str:
    """The anchor a Markdown renderer gives a heading, "-1", "-2" added as it does for a repeated one;
    `taken` counts the anchors given so far in the document and is updated."""
    slug = _NOT_IN_ANCHOR.sub("", heading.strip().lower()).replace(" ", "-")
    seen = taken.get(slug, 0)
    taken[slug] = seen + 1
    return f"{slug}-{seen}" if seen else slug


def first_sentence(text: Any) -> str:
    """The first sentence of a summary, on one line: the rest stays in the finding's own block."""
    flat = " ".join(str(text or "").split())
    match = re.search(r"(?<=[.!?])\s+(?=[A-Z])", flat)
    return flat[:match.start()] if match else flat


def fenced(text: str, language: str = "") -> list[str]:
    """A fenced code block that holds any text: its fence is longer than any run of backticks in it."""
    runs = re.findall(r"`+", text)
    fence = "`" * max(3, 1 + max((len(run) for run in runs), default=0))
    return [fence + language, text, fence]
