"""Ansible's documentation markup (C(), O(), M(), L() ...) and plain text, as Markdown.

Descriptions in DOCUMENTATION and meta/argument_specs.yml use the markup that ansible-doc renders:
C/V/O/RV/E are code, I italic, B bold, M a module, U a URL, L(text,url) a link. A backslash escapes
a closing parenthesis or a comma inside an argument (C(lookup('x', path\\))), as the docs build reads it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

COLLECTION = "gpuhost.gpu."
ANSIBLE_DOCS = "https://docs.ansible.com/ansible/latest/collections"
COMMAND = re.compile(r"\b(RV|[CVOEIBMUL])\(")
CODE_COMMANDS = frozenset("CVOE") | {"RV"}
# Outside code, these would start HTML, emphasis or a table cell in Markdown.
# A table cell escapes | itself (markdown.cell), in code spans too, where only a table reads it so.
PLAIN_ESCAPES = {"<": "&lt;", ">": "&gt;", "*": "\\*"}
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)


def escape_plain(text: str) -> str:
    """Text with no markup, safe in Markdown and in a table cell."""
    return "".join(PLAIN_ESCAPES.get(char, char) for char in text)


def code_span(text: str) -> str:
    """`text` as inline code; a longer fence when it holds backticks."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def escape_markdown(text: str) -> str:
    """Text already written as Markdown (backtick code spans): plain parts escaped, code spans kept."""
    parts: list[str] = []
    position = 0
    for match in CODE_SPAN.finditer(text):
        parts.append(escape_plain(text[position:match.start()]))
        parts.append(code_span(match.group(2)))
        position = match.end()
    parts.append(escape_plain(text[position:]))
    return "".join(parts)


def _argument(text: str, start: int) -> tuple[str, int] | None:
    """The argument from ``start`` to its unescaped closing parenthesis, and the index after it."""
    chars: list[str] = []
    index = start
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] in "\\),":
            chars.append("\\" + text[index + 1] if text[index + 1] == "," else text[index + 1])
            index += 2
            continue
        if char == ")":
            return "".join(chars), index + 1
        chars.append(char)
        index += 1
    return None


def _split_link(raw: str) -> tuple[str, str]:
    """L(text,url): the last comma not escaped separates them; a lone argument is both."""
    for index in range(len(raw) - 1, -1, -1):
        if raw[index] == "," and (index == 0 or raw[index - 1] != "\\"):
            return raw[:index].replace("\\,", ","), raw[index + 1:].strip()
    return raw, raw


def render(text: str, module_link: Callable[[str], str | None]) -> str:
    """Markup in ``text`` as Markdown. ``module_link`` gives the link of a module's page by FQCN, or None
    for a name that has none: that one is shown as code."""
    parts: list[str] = []
    position = 0
    while True:
        match = COMMAND.search(text, position)
        if match is None:
            break
        found = _argument(text, match.end())
        if found is None:  # An unclosed C( is text, as ansible-doc leaves it.
            break
        argument, end = found
        parts.append(escape_plain(text[position:match.start()]))
        parts.append(_command(match.group(1), argument.replace("\\,", ","), argument, module_link))
        position = end
    parts.append(escape_plain(text[position:]))
    return "".join(parts)


def _command(name: str, argument: str, raw: str, module_link: Callable[[str], str | None]) -> str:
    if name in CODE_COMMANDS:
        return code_span(argument)
    if name == "I":
        return f"*{escape_plain(argument)}*"
    if name == "B":
        return f"**{escape_plain(argument)}**"
    if name == "M":
        link = module_link(argument)
        return f"[{code_span(argument)}]({link})" if link else code_span(argument)
    if name == "U":
        return f"<{argument}>"
    label, url = _split_link(raw)
    return f"[{escape_plain(label)}]({url})"


def module_page_link(prefix: str) -> Callable[[str], str | None]:
    """A module_link for pages that reach this collection's module pages through ``prefix`` ("" from
    docs/reference/modules/); other collections' modules link to the Ansible documentation."""

    def link(fqcn: str) -> str | None:
        if fqcn.startswith(COLLECTION):
            return f"{prefix}{fqcn.removeprefix(COLLECTION)}.md"
        parts = fqcn.split(".")
        if len(parts) != 3 or not all(part.isidentifier() for part in parts):
            return None
        # Another collection's module: its page in the published Ansible documentation.
        namespace, collection, name = parts
        return f"{ANSIBLE_DOCS}/{namespace}/{collection}/{name}_module.html"

    return link
