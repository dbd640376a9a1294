"""What every nvidia-smi parser shares: its error, the clean-up of the text, the reading of a number.

Used by nvidia_smi_topo, nvidia_smi_query, nvidia_smi_list and nvidia_smi_failure; nothing here
parses a format of its own. Output: ``strip_ansi`` gives the text without terminal escapes or stray
control characters (tabs and newlines kept, every line end ``\\n``); ``output_lines`` gives the
cleaned lines of a command's stdout (``str`` or ``bytes``); ``small_int`` gives the integer a cell
holds or None; ``smi_error`` builds the ``NvidiaSmiParseError`` (a ``ValueError``) every parser
raises, worded ``<what>: expected ...; found ... . <what to do>``.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import (
    ParseError,
    excerpt,
    expected_found,
    unify_newlines,
)


class NvidiaSmiParseError(ParseError):
    """nvidia-smi output that cannot be read as the expected format."""


# CSI sequences (colours, underline), OSC sequences (titles, links), and the short escapes that are
# ESC, optional intermediate bytes and one final byte (``ESC ( B`` selects a character set).
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]*[0-~]")
# What is left of a broken escape, and other control characters that no format here uses.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

_EXCERPT_CHARS = 80


def strip_ansi(text: str) -> str:
    """Text without terminal escapes or stray control characters; tabs and newlines stay."""
    text = _ANSI_RE.sub("", text)
    text = unify_newlines(text)
    return _CONTROL_RE.sub("", text)


def smi_error(what: str, expected: str, found: str, todo: str) -> NvidiaSmiParseError:
    return NvidiaSmiParseError(expected_found(what, expected, excerpt(found, _EXCERPT_CHARS), todo))


def output_lines(text: Any, what: str) -> list[str]:
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise NvidiaSmiParseError(f"{what}: expected the command's output as text; found {type(text).__name__}. "
                                  "Pass stdout as a string.")
    return strip_ansi(text).split("\n")


# Longer digit strings are not counts nvidia-smi prints; int() would also refuse very long ones.
_MAX_DIGITS = 18


def small_int(value: str | None) -> int | None:
    """The integer a cell holds, or None when it holds something else (N/A, a range, garbage)."""
    if value is None:
        return None
    value = value.strip()
    if not re.fullmatch(rf"\d{{1,{_MAX_DIGITS}}}", value):
        return None
    return int(value)
