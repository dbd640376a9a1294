"""Secrets in a Proxmox VM's config: which keys hold one, and the secrets written inside other values.

Neither facts, reports nor captures carry a secret's value, only that it is set: the value of a secret-named key
(``SECRET_KEY``) and each secret ``redact_secret_values`` finds inside another value become ``REDACTED``. The
parser reads the config as written; what it hands on goes through here.
"""

from __future__ import annotations

import bisect
import re

# Keys whose values are secrets (cloud-init's cipassword and sshkeys, and anything named like a password,
# token or key): neither facts nor captures carry their values, only that they are set.
SECRET_KEY = re.compile(r"pass|secret|token|credential|sshkey|private|api[_-]?key", re.IGNORECASE)
REDACTED = "<redacted>"


# A secret written inside a value rather than as a key of its own: ``name=value`` or ``name: value`` (a QEMU
# property such as ``-spice password=...``, a systemd credential in ``-smbios type=11,value=...``, "root password:
# ..." in a VM's description, whose ":" qemu-server writes as %3A in the file; a config line qemu-server cannot
# parse), the name matching SECRET_KEY. The value ends at a space, a comma (QEMU's ",," is a comma inside a value),
# a quote, or it is quoted.
#
# Read by a hand loop (``_redact_named``), not by one regex: the regex this replaces,
# ``[\w.:\-]*(?:pass|...)[\w.\-]*`` before the separator, tried every split of a name run at every start, and a
# description of "pass" * 500 took a minute. The loop takes each run of name characters once: a name ends where a
# separator can follow it (at the run's end or at a ":" inside it), and of those ends the last whose ":"-free
# segment holds a secret word wins, as the regex's greedy name did; each pattern below is matched at one place.
_NAME_RUN = re.compile(r"[\w.:\-]+")
_SECRET_WORD = re.compile(r"pass|secret|token|credential|sshkey|private|api[_-]?key", re.IGNORECASE)
_SEPARATOR = re.compile(r"[\"']?[ \t]*(?:[:=]|%3[AaDd])[ \t]*")
_UNQUOTED_VALUE = re.compile(r"(?:[^\s,\"']|,,)+")
# QEMU's secret object carries its secret in ``data`` (``-object secret,id=sec0,data=...``, or its JSON form):
# an object starts at a word start with ``secret,``, or at a ``{`` before whose next ``}`` a
# ``"qom-type": "secret"`` stands, and runs to the next white space after that.
_OBJECT_START = re.compile(r"(?:^|[\s'\"])(?:secret,|\{)", re.IGNORECASE)
_QOM_SECRET = re.compile(r"\"qom-type\"\s*:\s*\"secret\"", re.IGNORECASE)
_QOM_SECRET_AT = re.compile(r"(?=\"qom-type\"\s*:\s*\"secret\")", re.IGNORECASE)
_NOT_SPACE = re.compile(r"\S*")
_DATA_NAME = re.compile(r"\bdata[\"']?\s*[:=]\s*")
_DATA_UNQUOTED_VALUE = re.compile(r"(?:[^\s,}\"']|,,)+")


def without_secrets(options: dict[str, str]) -> dict[str, str]:
    """``options`` with the value of every secret-named key replaced by ``REDACTED``, and the secrets written
    inside the other values (``args``) too."""
    return {key: REDACTED if SECRET_KEY.search(key) else redact_secret_values(value) for key, value in options.items()}


def redact_secret_values(text: str | None) -> str | None:
    """``text`` with the value of every secret written inside it replaced by ``REDACTED``: a secret-named
    ``name=value`` or ``name: value``, and the ``data`` of a QEMU secret object. A VM's ``args``, its description,
    and any line or warning that quotes them go through this before they reach facts, reports or captures."""
    if not text:
        return text
    return _redact_named(_redact_objects(text))


class _Quotes:
    """Where each quoted value ends: the closing quote after a place, remembering where none is left, so that a
    text of many unclosed quotes is searched once, not once per quote."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._none_after = {"\"": len(text) + 1, "'": len(text) + 1}

    def closing(self, quote: str, after: int) -> int:
        """The index just past the quote closing the one at ``after - 1``, or -1."""
        if after >= self._none_after[quote]:
            return -1
        found = self.text.find(quote, after)
        if found < 0:
            self._none_after[quote] = after
            return -1
        return found + 1


def _value_end(text: str, at: int, quotes: _Quotes, unquoted: re.Pattern[str]) -> int:
    """Where a value starting at ``at`` ends (``"..."``, ``'...'`` or unquoted), or -1 when none starts there."""
    if at < len(text) and text[at] in "\"'":
        return quotes.closing(text[at], at + 1)
    match = unquoted.match(text, at)
    return match.end() if match else -1


def _redact_named(text: str) -> str:
    quotes = _Quotes(text)
    out: list[str] = []
    done = 0
    run = _NAME_RUN.search(text)
    while run is not None:
        found = _named_in_run(text, run.start(), run.end(), quotes)
        if found is None:
            run = _NAME_RUN.search(text, run.end())
            continue
        separator_end, value_end = found
        out += [text[done:separator_end], REDACTED]
        done = value_end
        run = _NAME_RUN.search(text, value_end)
    return "".join(out) + text[done:] if out else text


def _named_in_run(text: str, start: int, end: int, quotes: _Quotes) -> tuple[int, int] | None:
    """(separator end, value end) of the secret a run of name characters names, or None."""
    # The ends a separator can follow: each ":" inside the run and the run's end, the last first.
    ends = [end]
    colon = text.rfind(":", start, end)
    while colon >= 0:
        ends.append(colon)
        colon = text.rfind(":", start, colon)
    for index, name_end in enumerate(ends):
        segment_start = ends[index + 1] + 1 if index + 1 < len(ends) else start
        if not _SECRET_WORD.search(text, segment_start, name_end):
            continue
        separator = _SEPARATOR.match(text, name_end)
        if separator is None:
            continue
        value_end = _value_end(text, separator.end(), quotes, _UNQUOTED_VALUE)
        if value_end >= 0:
            return separator.end(), value_end
    return None


def _redact_objects(text: str) -> str:
    """``text`` with the ``data`` of each QEMU secret object in it redacted."""
    out: list[str] = []
    done = 0
    qom = [match.start() for match in _QOM_SECRET_AT.finditer(text)]
    start = _OBJECT_START.search(text)
    close = -1  # the "}" after the last "{" looked at: a later "{" before it closes there too
    while start is not None:
        body = start.end()
        if text[body - 1] == "{":
            if close < body:
                close = text.find("}", body)
                close = len(text) if close < 0 else close
            last = bisect.bisect_left(qom, close) - 1
            if last < 0 or qom[last] < body:
                start = _OBJECT_START.search(text, start.start() + 1)
                continue
            body = _QOM_SECRET.match(text, qom[last]).end()
        object_end = _NOT_SPACE.match(text, body).end()
        out += [text[done:start.start()], _redact_data(text[start.start():object_end])]
        done = object_end
        start = _OBJECT_START.search(text, object_end)
    return "".join(out) + text[done:] if out else text


def _redact_data(text: str) -> str:
    quotes = _Quotes(text)
    out: list[str] = []
    done = 0
    name = _DATA_NAME.search(text)
    while name is not None:
        value_end = _value_end(text, name.end(), quotes, _DATA_UNQUOTED_VALUE) \
            if not text.startswith("'", name.end()) else -1
        if value_end < 0:
            name = _DATA_NAME.search(text, name.start() + 1)
            continue
        out += [text[done:name.end()], REDACTED]
        done = value_end
        name = _DATA_NAME.search(text, value_end)
    return "".join(out) + text[done:] if out else text
