"""What the P2P tools' parsers share: their error, the clean-up of a pasted log, a matrix's one shape.

Used by p2p_bandwidth (cuda-samples p2pBandwidthLatencyTest, and the choice between the formats) and
nvbandwidth; nothing here parses a format of its own.

``p2p_lines`` gives a log's lines as the tool printed them: paste damage undone (CRLF, quoted-printable,
launcher prefixes, Markdown ``> `` quotes, ``cat -n`` numbers). ``is_elision`` tells the marks people
put where they cut lines out (``[...]``, ``...``, ``<snip>``). ``matrix`` builds the one matrix shape
both tools' results come in::

    {"name": str | None, "kind": "latency" | "bandwidth" | None, "unit": "us" | "ns" | "GB/s" | None,
     "path": "p2p_enabled" | "p2p_disabled" | "peer" | "host" | None, "bidirectional": bool,
     "measured_by": "gpu" | "cpu", "size_bytes": None, "values": [[float | None, ...], ...],
     "values_us": (latencies printed in ns only) the same in us, "sum": (nvbandwidth only) its SUM line}

``None`` is what the output does not say: a cell the tool left out (``N/A``) or a row cut out of the
paste, the name or unit of a matrix pasted without its title.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import (
    ParseError,
    normalize_paste,
    strip_launcher_prefix,
    strip_line_numbers,
)


class P2PToolParseError(ParseError):
    """Output of a P2P tool that cannot be read, with what was expected."""


_NUMBER_RE = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")
_QUOTE_RE = re.compile(r"^\s{0,3}>(?: |$)")
_ELISION_RE = re.compile(r"^\s*(?:\[\s*(?:\.{2,}|…|snip\w*|cut|omitted|truncated)[^\]]{0,40}\]|<\s*snip\w*\s*>|"
                         r"\.{3,}|…)\s*$", re.I)


def number(token: str, where: str, notes: list[str] | None = None) -> float | None:
    """A cell's value; None for the tool's ``N/A``. A figure pasted from a localized system is read where its
    form tells (see ``_localized``); one it cannot tell is None, said in ``notes`` when given."""
    if token in ("N/A", "n/a", "-"):
        return None
    if "," in token:
        value = _localized(token)
        if value is None and _AMBIGUOUS_COMMA_RE.match(token):
            note = (f"{where}: {token!r} is not read: a thousands separator or a decimal comma cannot be told "
                    "apart; paste the output of a system with the C locale (LC_ALL=C)")
            if notes is None:  # a reader with no place to say so refuses the table rather than guess
                raise P2PToolParseError(note)
            if note not in notes:
                notes.append(note)
            return None
        if value is not None:
            return value
    if not _NUMBER_RE.match(token):
        raise P2PToolParseError(f"{where}: expected a number or N/A; found {token!r}. The output is garbled or cut: "
                                "pass the tool's output as it printed it")
    return float(token)


# Both tools print figures with two decimals (nvbandwidth's %.2f, p2pBandwidthLatencyTest's %6.02f), so a
# comma followed by one or two digits is a decimal comma ("12,34", "1.234,56": '.' then groups thousands), and a
# comma followed by three digits before a decimal point groups thousands ("1,234.56"). A comma followed by
# three digits and nothing else ("1,234") is either: not read.
_DECIMAL_COMMA_RE = re.compile(r"^[-+]?(?:\d{1,3}(?:\.\d{3})+|\d+),\d{1,2}$")
_THOUSANDS_COMMA_RE = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+\.\d+$")
_AMBIGUOUS_COMMA_RE = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+$")


def _localized(token: str) -> float | None:
    if _DECIMAL_COMMA_RE.match(token):
        return float(token.replace(".", "").replace(",", "."))
    if _THOUSANDS_COMMA_RE.match(token):
        return float(token.replace(",", ""))
    return None


def p2p_lines(text: str) -> list[str]:
    """The lines of a pasted log, as the tool printed them."""
    # No line of either tool starts with ">": it is a Markdown quote, on every line or on the first of each
    # paragraph only (GitHub continues a quote lazily).
    lines = [_QUOTE_RE.sub("", strip_launcher_prefix(line), count=1).rstrip()
             for line in normalize_paste(text).split("\n")]
    return strip_line_numbers(lines)


def is_elision(line: str) -> bool:
    """A mark where lines were cut out of the paste: ``[...]``, ``...``, ``[snip]``, ``<snip>``."""
    return bool(_ELISION_RE.match(line))


def matrix(name: str | None, kind: str | None, unit: str | None, path: str | None, rows: list[list[float | None]],
           *, bidirectional: bool = False, measured_by: str = "gpu", **extra: Any) -> dict[str, Any]:
    """The one matrix shape; latencies printed in ns keep their unit and get ``values_us`` beside them."""
    out: dict[str, Any] = {"name": name, "kind": kind, "unit": unit, "path": path, "bidirectional": bidirectional,
                           "measured_by": measured_by, "size_bytes": None, "values": rows, **extra}
    if unit == "ns":
        out["values_us"] = [[v / 1000.0 if v is not None else None for v in row] for row in rows]
    return out


def latency_us(found: dict[str, Any]) -> list[list[float | None]] | None:
    """A latency matrix's values in us, whatever unit the tool printed; None when the unit is unknown."""
    if found.get("unit") == "us":
        return found.get("values")
    if found.get("unit") == "ns":
        return found.get("values_us") or [[v / 1000.0 if v is not None else None for v in row]
                                          for row in found.get("values") or []]
    return None
