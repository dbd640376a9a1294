"""Markdown building blocks the reports share: table cells, tables, GPU matrices and heading anchors."""

from __future__ import annotations

import re
from typing import Any

# What GitHub and GitLab drop from a heading to make its anchor: anything but letters, digits, "_", "-" and
# spaces; the spaces then become "-".
_NOT_IN_ANCHOR = re.compile(r"[^\w\- ]")


# Every line break Markdown or a browser may act on (CR alone ends a line for CommonMark), and the other control
# characters: in a value they become a space, so that no value ends its line and starts a heading, a list or a
# table row of its own.
_BREAKS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]+")
# What a value must not be read as, each written so that it shows as itself: a backslash (it would escape what
# follows it), HTML (a tag needs "<", an entity "&": ``<img onerror=...>`` in a GPU name would reach a viewer that
# renders HTML), brackets (links and images: a tracking image from a file name) and backticks (a code span shows
# entities as typed). In a table cell, also the "|" that would end the cell.
_ESCAPES = {"\\": "\\\\", "&": "&amp;", "<": "&lt;", "[": "\\[", "]": "\\]", "`": "\\`"}
_ESCAPED = re.compile("|".join(re.escape(c) for c in _ESCAPES))
# A value that starts a line (a finding's summary is a paragraph of its own) must not open a heading or a quote;
# elsewhere "#" and ">" are text (a "->" stays as written).
_BLOCK_START = re.compile(r"^(\s*)([#>])")


def plain(value: Any) -> str:
    """A value as a report shows it, not yet escaped: "-" when not known, yes/no for a flag. For a cell built of
    several values (``f"{plain(a)}/{plain(b)}"``), which ``cell`` then escapes once."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def inline(value: Any) -> str:
    """A value within a line of Markdown (a heading, a sentence, a paragraph of its own) that shows as the value's
    text and is read as nothing else: no line break, no HTML, link, image, code span, heading or quote."""
    flat = _BREAKS.sub(" ", plain(value))
    escaped = _ESCAPED.sub(lambda match: _ESCAPES[match.group(0)], flat)
    return _BLOCK_START.sub(r"\1\\\2", escaped)


def cell(value: Any) -> str:
    """A value as a table cell: ``inline``, and a "|" that does not end the cell."""
    return inline(value).replace("|", "\\|")


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
