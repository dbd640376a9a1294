"""What the parsers share: the base of their errors and the helpers that word them.

Every parser that can refuse its input raises its own subclass of ``ParseError``
(``PciParseError``, ``NvidiaSmiParseError``, ``NcclTestsParseError``,
``P2PToolParseError``, ``ProxmoxParseError``), so a caller may catch one tool's
errors or all of them. ``ParseError`` is a ``ValueError``: code that caught
``ValueError`` before still catches every one of them.

The messages follow one shape, ``<what>: expected <what it reads>; found <an
excerpt of the input>. <what to do>``; ``expected_found`` writes it and
``excerpt`` quotes the input.

Pastes: ``normalize_paste`` gives a tool's output back from what e-mail and
terminals made of it (CRLF, a byte-order mark, no-break spaces, quoted-printable
with its ``=`` soft line breaks and ``=3D``); ``strip_launcher_prefix`` removes
what mpirun, torchrun and srun put before each line; ``strip_line_numbers``
removes ``cat -n`` numbering. Each parser decides which of them its format needs.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


class ParseError(ValueError):
    """Input a parser cannot read; the message says what was expected, what was found and what to do."""


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (U+D800..U+DFFF) made U+FFFD. Python's text may hold them (bytes
    decoded with ``surrogateescape``, a JSON ``\\ud800``) though no encoder takes them: expat, ``str.encode``
    and ``urllib`` raise ``UnicodeEncodeError`` on them, which a parser must never let out."""
    if not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub("\ufffd", text)


def excerpt(text: str, limit: int) -> str:
    """The stripped text as a Python literal, cut to ``limit`` characters (then ``...``)."""
    text = text.strip()
    if len(text) > limit:
        text = text[:limit] + "..."
    return repr(text)


def expected_found(what: str, expected: str, found: str, todo: str, where: str = "") -> str:
    """``<what>: expected <expected>; found <found><where>. <todo>``; ``found`` is already quoted."""
    return f"{what}: expected {expected}; found {found}{where}. {todo}"


def decode_paste(data: bytes) -> str:
    """Bytes of a saved output as text, whatever saved it: UTF-8 (a BOM dropped); UTF-16 with a BOM, or without one
    where the text is ASCII in UTF-16 (PowerShell's ``>`` and Notepad write it: every other byte of the start NUL);
    else Latin-1 where the bytes are not UTF-8 (an older Windows or mail client). Never raises."""
    head = data[:4]
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", errors="replace")
    sample = data[:512]
    if len(sample) >= 4 and len(sample) % 2 == 0:
        odd, even = sample[1::2], sample[0::2]
        if odd.count(0) == len(odd) and even.count(0) == 0:
            return data.decode("utf-16-le", errors="replace")
        if even.count(0) == len(even) and odd.count(0) == 0:
            return data.decode("utf-16-be", errors="replace")
    if head[:3] == b"\xef\xbb\xbf":
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A few stray bytes in UTF-8 text (a cut multibyte character) stay UTF-8; text with none is Latin-1.
        valid = data[:exc.start].decode("utf-8")
        if any(ord(c) > 127 for c in valid):
            return data.decode("utf-8", errors="replace")
        return data.decode("latin-1")


def unify_newlines(text: str) -> str:
    """Windows (``\\r\\n``) and old Mac (``\\r``) line ends as ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


# --------------------------------------------------------------------------------------------------
# Pastes: what e-mail, terminals and launchers do to a tool's output before it reaches a parser

# Every "=" of a quoted-printable body is an escape: two hex digits, or a soft line break.
_QP_ESCAPE_RUN_RE = re.compile(r"(?:=[0-9A-F]{2})+")
_QP_SOFT_BREAK_RE = re.compile(r"=[ \t]*(?:\n|$)")
_QP_ANY_EQUALS_RE = re.compile(r"=(?:[0-9A-F]{2}|[ \t]*\n|[ \t]*$)")
# Escapes only an encoder writes: "=" itself, a space or tab before a line end. ("=20" alone is no sign:
# NCCL prints bus ids as "(=20000)".)
_QP_TELLTALE_RE = re.compile(r"=3D|=(?:20|09)(?=\n|$)")


def _qp_escapes_only(text: str) -> bool:
    return "=" in text and "=" not in _QP_ANY_EQUALS_RE.sub("", text)


# The header block of a saved mail (RFC 5322: "Name: value" lines, folded lines indented), up to its blank line.
_MAIL_HEADERS_RE = re.compile(r"(?:[A-Za-z][\w-]{0,76}:[^\n]{0,998}\n(?:[ \t][^\n]{0,998}\n){0,20}){1,200}\n")
_QP_DECLARED_RE = re.compile(r"(?im)^content-transfer-encoding:[ \t]*quoted-printable[ \t]*$")


def _decode_qp(text: str) -> str:
    text = _QP_SOFT_BREAK_RE.sub("", text)
    # Runs of escapes are the bytes of one UTF-8 character (=C2=A0): decode them together.
    return _QP_ESCAPE_RUN_RE.sub(
        lambda match: bytes.fromhex(match.group(0).replace("=", "")).decode("utf-8", errors="replace"), text)


def decoded_mail(text: str) -> str | None:
    """A saved mail (``\\n`` line ends) whose headers declare its body quoted-printable, with the body decoded
    whatever "=" the headers hold (``charset=utf-8``) and the headers saying 8bit; None for any other text."""
    headers = _MAIL_HEADERS_RE.match(text)
    if headers is None or not _QP_DECLARED_RE.search(headers.group(0)):
        return None
    # The headers then say what the body now is, so that normalising the text again decodes nothing twice.
    said = _QP_DECLARED_RE.sub("Content-Transfer-Encoding: 8bit", headers.group(0))
    return said + _decode_qp(text[headers.end():])


def undo_quoted_printable(text: str) -> str:
    """The text a quoted-printable body (RFC 2045, line ends already ``\\n``) encodes; other text unchanged.

    A body is recognised when every ``=`` in it is an escape (raw tool output fails that as soon as it
    holds one ``key=value`` or ``X    = Self``). With an escape only an encoder writes (``=3D``, or ``=20``
    or ``=09`` before a line end) the soft line breaks are joined and every ``=XX`` decoded as UTF-8. With
    soft line breaks but no escape at all, only the breaks are joined. Anything else is left alone: NCCL's
    ``(=81000)`` and nccl-tests' ``nccl-headers=22907`` look like escapes but are raw text."""
    mail = decoded_mail(text)
    if mail is not None:
        return mail
    if not _qp_escapes_only(text):
        return text
    if _QP_TELLTALE_RE.search(text):
        return _decode_qp(text)
    if _QP_ESCAPE_RUN_RE.search(text):
        return text
    return _QP_SOFT_BREAK_RE.sub("", text)


def normalize_paste(text: str) -> str:
    """A tool's output as it printed it, from what a paste made of it: line ends as ``\\n`` (CRLF, CR),
    no byte-order mark, no-break spaces (web pages) as spaces, quoted-printable (e-mail) undone. Tabs,
    blank lines and indentation are kept: the parsers read them."""
    text = unify_newlines(text.replace("\ufeff", ""))
    return undo_quoted_printable(text).replace("\u00a0", " ")


# "[1,0]<stdout>:" (Open MPI --tag-output), "[rank3]:" (torchrun, PyTorch), "3: " (srun --label).
_LAUNCHER_PREFIX_RE = re.compile(
    r"^\s{0,8}(?:\[\d{1,9},\d{1,9}\]<std(?:out|err)>:|\[rank\s?\d{1,6}\]:\s?|\d{1,6}: (?=\s*\S))")


def strip_launcher_prefix(line: str) -> str:
    """A line without the prefix a launcher put before it (``[1,0]<stdout>:``, ``[rank3]:``, srun's
    ``3: ``); other lines unchanged."""
    match = _LAUNCHER_PREFIX_RE.match(line)
    return line[match.end():] if match else line


_NUMBERED_LINE_RE = re.compile(r"^\s{0,8}(\d{1,6})(?:\s|$)")


def strip_line_numbers(lines: list[str]) -> list[str]:
    """Lines without the numbers ``cat -n`` or an editor put before them: only when every line but empty
    ones (a paste's last) is numbered, the numbers count up by one from 1, and some line holds more than its
    number."""
    numbered = [(index, _NUMBERED_LINE_RE.match(line)) for index, line in enumerate(lines) if line]
    if len(numbered) < 3 or not all(match for _unused, match in numbered):
        return lines
    if [int(match.group(1)) for _unused, match in numbered if match] != list(range(1, len(numbered) + 1)):
        return lines
    out = list(lines)
    for index, match in numbered:
        if match:
            out[index] = lines[index][match.end():]
    if not any(line.strip() and not line.strip().split()[0].isdigit() for line in out):
        return lines
    return out
