"""``nvidia-bug-report.log``, NVIDIA's bug report, split into its sections.

Pure: text in, data out. The caller gunzips ``nvidia-bug-report.log.gz`` (material/capture.py); bytes that
are still gzip are refused with that advice.

The layout, the same from the 300 series to the 5xx scripts: every section starts after a line of 44
underscores (``SEPARATOR``), usually followed by an empty line, then a title that says what follows:

* ``*** /proc/cmdline`` and ``*** ls: -r--r--r-- 1 root root 0 ... /proc/cmdline``, then the file as
  ``cat`` printed it and one empty line: a file (kind ``file``). ``*** /path does not exist`` and
  ``*** /path is not readable`` say the script found none (``missing``, ``unreadable``).
* ``/usr/bin/nvidia-smi --query``, an empty line, the output, an empty line: a command (``command``),
  named without its directory (``nvidia-smi --query``). One section may hold several commands in a row
  (``--query``, ``--query --unit``, ``nvlink --status`` ...): each becomes its own section. Old scripts
  print ``-q`` and ``-q -u``; ``systemctl status ...`` comes without the empty line.
* ``dmesg:``, ``xset -q:``, ``nvidia-settings -q all:``: a command named by its title (``dmesg``).
* ``base64 "/path"``: a binary file, base64-encoded (``binary``).
* ``Skipping ...`` / ``Skipping: ...`` and ``Error: ...`` (5xx scripts): what the script could not
  collect (``skipped``, ``error``).
* ``Start of NVIDIA bug report log file.`` (``prologue``, with the script version, date and
  ``uname``; the 5xx versions table follows in the same section) and ``End of NVIDIA bug report log
  file.`` (``epilogue``).
* anything else (``gcc -v``, the module parameters ``grep`` prints, a kernel log scan): ``text``,
  named by its first line, or by its title without the colon.

The script may hang and leave the log cut anywhere, and logs travel through e-mail and Windows: a log
without its epilogue is read up to where it stops (``complete`` False, the last section ``truncated``),
CRLF and the other paste damage ``_common.normalize_paste`` repairs are undone, a separator without the
empty line after it (300-series ``lspci`` sections) is read the same.

Output schema: ``parse_bug_report(text)`` -> ``BugReport``: ``sections`` (``Section``: ``name``, ``kind``,
``text`` (the content only, ``\\n``-terminated, ``""`` when empty), ``title`` (the line as printed),
``line`` (1-based), ``metadata`` (a file's ``*** ls:`` line, else None), ``truncated``), ``script_version``,
``date`` and ``uname`` from the prologue (None when absent), ``complete``. ``BugReport.get(name)`` gives the
first section of that name, ``as_dict()`` name -> text of each name's first section. Raises only
``BugReportParseError`` (a ``ParseError``), for input that is not text or holds none of the markers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import (
    ParseError,
    excerpt,
    expected_found,
    normalize_paste,
)

SEPARATOR = "_" * 44
# The real separator is 44 underscores; a paste may have lost or gained a few.
_SEPARATOR_RE = re.compile(r"^_{30,60}\s*$")
_PROLOGUE = "Start of NVIDIA bug report log file"
_EPILOGUE = "End of NVIDIA bug report log file"
# A value that ends before the line's trailing blanks is \S(?:.*\S)?, never \S.*?\s*$: the lazy form tried \s*$ from
# each blank of a run inside the value, quadratic in a line of blanks (docs/development.md, "Regexes over input").
_FILE_RE = re.compile(r"^\*\*\* (?P<path>/\S(?:.*\S)?)\s*$")
_ABSENT_RE = re.compile(r"^\*\*\* (?P<path>/\S.*?) (?P<state>does not exist|is not readable)\s*$")
_LS_RE = re.compile(r"^\*\*\* ls: ")
_BINARY_RE = re.compile(r'^base64 "(?P<path>[^"]+)"\s*$')
_SKIPPED_RE = re.compile(r"^Skipping(?::\s*|\s+)(?P<what>\S(?:.*\S)?)\s*$")
_ERROR_RE = re.compile(r"^Error: (?P<what>\S(?:.*\S)?)\s*$")
# A command as the script echoes it: the binary by its absolute path (from `which`), optionally under
# `timeout N`; the name keeps the arguments as printed.
_COMMAND_RE = re.compile(r"^(?P<timeout>timeout \d{1,5} )?/(?:[\w.+-]+/)*(?P<binary>[\w.+-]+)(?P<args>(?:\s.*)?)$")
# Commands the script echoes without a path.
_BARE_COMMANDS = ("journalctl", "ldd", "dmesg", "xset", "nvidia-settings", "xrandr", "lspci", "nvidia-smi")
_BARE_COMMAND_RE = re.compile(r"^(?P<binary>" + "|".join(re.escape(c) for c in _BARE_COMMANDS)
                              + r")(?P<args>(?:\s.*)?)$")
_COLON_TITLE_RE = re.compile(r"^(?P<name>\S.*?):\s*$")
_VERSION_RE = re.compile(r"^nvidia-bug-report\.sh Version:\s*(?P<value>\S(?:.*\S)?)\s*$")
_DATE_RE = re.compile(r"^Date:\s*(?P<value>\S(?:.*\S)?)\s*$")
_UNAME_RE = re.compile(r"^uname:\s*(?P<value>\S(?:.*\S)?)\s*$")
_NAME_CHARS = 120
# The prologue, the version line and the epilogue, each at the start of a line (a text that quotes them is none).
_MARKER_LINE_RE = re.compile(r"^(?:" + re.escape(_PROLOGUE) + "|" + re.escape(_EPILOGUE)
                             + r"|nvidia-bug-report\.sh Version:)", re.MULTILINE)


class BugReportParseError(ParseError):
    """Input that is not an nvidia-bug-report.log."""


@dataclass(frozen=True)
class Section:
    name: str
    kind: str
    text: str
    title: str
    line: int
    metadata: str | None = None
    truncated: bool = False


@dataclass(frozen=True)
class BugReport:
    sections: tuple[Section, ...]
    script_version: str | None
    date: str | None
    uname: str | None
    complete: bool

    def get(self, name: str) -> Section | None:
        return next((section for section in self.sections if section.name == name), None)

    def as_dict(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for section in self.sections:
            found.setdefault(section.name, section.text)
        return found


def looks_like_bug_report(text: str) -> bool:
    """Whether normalized text carries the markers of an nvidia-bug-report.log (its prologue or epilogue, or
    a separator line with a file section's ``*** `` title after it)."""
    if _MARKER_LINE_RE.search(text):
        return True
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if _SEPARATOR_RE.match(line):
            following = [candidate for candidate in lines[index + 1:index + 3] if candidate.strip()]
            if following and (_ABSENT_RE.match(following[0]) or _FILE_RE.match(following[0])):
                return True
    return False


def parse_bug_report(text: str | bytes) -> BugReport:
    if isinstance(text, bytes):
        if text[:2] == b"\x1f\x8b":
            raise BugReportParseError(expected_found(
                "nvidia-bug-report.log", "the log as text", "gzip-compressed bytes",
                "Gunzip nvidia-bug-report.log.gz first (gzip -dc), or give the file to gpu_analyze (make "
                "analyze INPUT=...), which does."))
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise BugReportParseError(expected_found(
            "nvidia-bug-report.log", "the log as text", type(text).__name__, "Pass the file's content."))
    text = normalize_paste(text)
    if not looks_like_bug_report(text):
        raise BugReportParseError(expected_found(
            "nvidia-bug-report.log", f"its sections: lines of {len(SEPARATOR)} underscores, '*** /proc/...' "
            f"titles, '{_PROLOGUE}.'", excerpt(text, 80),
            "Give the log nvidia-bug-report.sh wrote (gunzipped), or paste each tool's output by itself."))
    lines = text.split("\n")
    blocks: list[tuple[int, list[str]]] = []
    start, current = 1, []
    for number, line in enumerate(lines, start=1):
        if _SEPARATOR_RE.match(line):
            blocks.append((start, current))
            start, current = number + 1, []
        else:
            current.append(line)
    blocks.append((start, current))

    sections: list[Section] = []
    complete = False
    for first_line, block in blocks:
        for section in _read_block(first_line, block):
            complete = complete or section.kind == "epilogue"
            sections.append(section)
    if sections and not complete:
        last = sections[-1]
        sections[-1] = Section(last.name, last.kind, last.text, last.title, last.line, last.metadata, truncated=True)
    prologue = next((s for s in sections if s.kind == "prologue"), None)
    header = prologue.text.split("\n") if prologue else []
    return BugReport(
        sections=tuple(sections),
        script_version=_first_value(_VERSION_RE, header),
        date=_first_value(_DATE_RE, header),
        uname=_first_value(_UNAME_RE, header),
        complete=complete,
    )


def _first_value(pattern: re.Pattern[str], lines: list[str]) -> str | None:
    for line in lines:
        match = pattern.match(line)
        if match:
            return match.group("value")
    return None


def _content(lines: list[str]) -> str:
    """The lines a tool printed: the empty line the script echoes after them is not theirs."""
    if lines and not lines[-1].strip():
        lines = lines[:-1]
    return "\n".join(lines) + "\n" if any(line.strip() for line in lines) else ""


def _read_block(first_line: int, block: list[str]) -> list[Section]:
    # The script echoes an empty line after the separator; the 300-series lspci sections do not.
    offset = next((index for index, line in enumerate(block) if line.strip()), None)
    if offset is None:
        return []
    title = block[offset].rstrip()
    line = first_line + offset
    rest = block[offset + 1:]
    if title.startswith(_PROLOGUE):
        return [Section("prologue", "prologue", _content(block[offset:]), title, line)]
    if title.startswith(_EPILOGUE):
        return [Section("epilogue", "epilogue", "", title, line)]
    match = _ABSENT_RE.match(title)
    if match:
        kind = "missing" if match.group("state") == "does not exist" else "unreadable"
        return [Section(match.group("path"), kind, "", title, line)]
    if not _LS_RE.match(title):
        match = _FILE_RE.match(title)
        if match:
            metadata = rest[0].rstrip() if rest and _LS_RE.match(rest[0]) else None
            body = rest[1:] if metadata is not None else rest
            return [Section(match.group("path"), "file", _content(body), title, line, metadata)]
    match = _BINARY_RE.match(title)
    if match:
        return [Section(match.group("path"), "binary", _content(_skip_blank(rest)), title, line)]
    for pattern, kind in ((_SKIPPED_RE, "skipped"), (_ERROR_RE, "error")):
        match = pattern.match(title)
        if match:
            return [Section(match.group("what")[:_NAME_CHARS], kind, _content(rest), title, line)]
    name = command_name(title)
    if name is not None:
        return _commands(name, title, line, rest)
    match = _COLON_TITLE_RE.match(title)
    if match and (not rest or not rest[0].strip()):
        name = match.group("name")
        kind = "command" if name.split()[0] in _BARE_COMMANDS else "text"
        return [Section(name, kind, _content(_skip_blank(rest)), title, line)]
    return [Section(title.strip()[:_NAME_CHARS], "text", _content(block[offset:]), title, line)]


def _skip_blank(lines: list[str]) -> list[str]:
    return lines[1:] if lines and not lines[0].strip() else lines


def command_name(title: str) -> str | None:
    """``/usr/bin/nvidia-smi --query`` -> ``nvidia-smi --query``; ``timeout 60 /usr/bin/mst start`` ->
    ``timeout 60 mst start``; ``journalctl -b -0 _COMM=Xorg`` as it is; None for a line that is no command."""
    match = _COMMAND_RE.match(title.rstrip())
    if match:
        return f"{match.group('timeout') or ''}{match.group('binary')}{match.group('args').rstrip()}"
    match = _BARE_COMMAND_RE.match(title.rstrip())
    if match and not title.rstrip().endswith(":"):
        return f"{match.group('binary')}{match.group('args').rstrip()}"
    return None


def _commands(name: str, title: str, line: int, rest: list[str]) -> list[Section]:
    """One section per command of a block: a later line of the same program, alone between empty lines, is
    the next command's title (the nvidia-smi block runs --query, --query --unit, nvlink ...)."""
    program = _program(name)
    sections: list[Section] = []
    current_name, current_title, current_line, body = name, title, line, []
    for index, text in enumerate(rest):
        candidate = command_name(text) if text.startswith(("/", "timeout ")) else None
        is_title = (candidate is not None and _program(candidate) == program
                    and (index == 0 or not rest[index - 1].strip())
                    and (index + 1 == len(rest) or not rest[index + 1].strip()))
        if is_title and candidate is not None:
            sections.append(Section(current_name, "command", _content(_skip_blank(body)), current_title, current_line))
            current_name, current_title, current_line, body = candidate, text.rstrip(), line + 1 + index, []
        else:
            body.append(text)
    sections.append(Section(current_name, "command", _content(_skip_blank(body)), current_title, current_line))
    return sections


def _program(name: str) -> str:
    words = name.split()
    return words[2] if words[:1] == ["timeout"] and len(words) > 2 else words[0]
