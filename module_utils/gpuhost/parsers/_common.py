"""What the parsers share: the base of their errors and the helpers that word them.

Every parser that can refuse its input raises its own subclass of ``ParseError``
(``PciParseError``, ``NvidiaSmiParseError``, ``NcclTestsParseError``,
``P2PToolParseError``, ``ProxmoxParseError``), so a caller may catch one tool's
errors or all of them. ``ParseError`` is a ``ValueError``: code that caught
``ValueError`` before still catches every one of them.

The messages follow one shape, ``<what>: expected <what it reads>; found <an
excerpt of the input>. <what to do>``; ``expected_found`` writes it and
``excerpt`` quotes the input.
"""

from __future__ import annotations


class ParseError(ValueError):
    """Input a parser cannot read; the message says what was expected, what was found and what to do."""


def excerpt(text: str, limit: int) -> str:
    """The stripped text as a Python literal, cut to ``limit`` characters (then ``...``)."""
    text = text.strip()
    if len(text) > limit:
        text = text[:limit] + "..."
    return repr(text)


def expected_found(what: str, expected: str, found: str, todo: str, where: str = "") -> str:
    """``<what>: expected <expected>; found <found><where>. <todo>``; ``found`` is already quoted."""
    return f"{what}: expected {expected}; found {found}{where}. {todo}"


def unify_newlines(text: str) -> str:
    """Windows (``\\r\\n``) and old Mac (``\\r``) line ends as ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n")
