"""The options a command-line program accepts, read from its argparse ``--help`` output.

Written for ``python -m sglang.launch_server --help`` (SGLang's server builds its parser with
argparse), and reads any argparse help. Pure functions from text to data: no Ansible, no subprocess.

The layouts read:

* option lines of every Python version: ``  --tp-size TP_SIZE, --tensor-parallel-size TP_SIZE``
  (3.12 and older repeat the metavar), ``  --tp-size, --tensor-parallel-size TP_SIZE`` (3.13 and
  newer), ``  -h, --help``, flags without a value, ``[X ...]`` and ``X [X ...]`` for nargs;
* choices where argparse shows them, ``{flashmla_kv,trtllm}``, also when a terminal wrapped the line
  inside the braces;
* help text on the option's line (after two or more spaces) or below it, wrapped over several lines;
* every section: ``options:``, ``optional arguments:`` (before 3.10), argument groups;
* the usage block: an option named only there (a paste cut after the usage) is read from it;
* deprecation said in the help text: ``(deprecated)``, ``[DEPRECATED]``, a help that starts with
  ``Deprecated``, ``... is deprecated``; ``use --new-name instead`` or ``alias of/for --new-name`` names
  its replacement;
* pastes: CRLF, ANSI colours (Python 3.14 colours its help), ``cat -n`` numbering, e-mail's
  quoted-printable.

Output schema: ``parse_help(text)`` -> ``ArgparseHelp``: ``prog`` (the program as the usage line names
it, or None) and ``options``, a tuple of ``HelpOption`` in the order printed: ``names`` (every option
string of the action, as printed), ``metavar`` (as printed, or None), ``choices`` (a tuple of strings, or
None when the help shows none), ``takes_value`` (True when a metavar or choices follow the names, False
when none do), ``deprecated`` (bool), ``replaced_by`` (the option its help names as replacement, or
None) and ``help`` (the help text, wrapped lines joined). ``ArgparseHelp.resolve(option)`` finds the
action argparse would give an option string to: the exact name, else (as argparse's ``allow_abbrev``)
the one action whose names it starts. Raises ``ArgparseHelpError`` only when the text holds no option
at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import (
    ParseError,
    excerpt,
    expected_found,
    normalize_paste,
    strip_line_numbers,
)

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_OPTION_LINE_RE = re.compile(r"^( {0,8})(-{1,2}[A-Za-z0-9?][^\s,]*)(.*)$")
_OPTION_NAME_RE = re.compile(r"^-{1,2}[A-Za-z0-9?][A-Za-z0-9_.?+:-]*$")
_USAGE_RE = re.compile(r"^\s*usage:\s*(?P<prog>\S+)?(?P<rest>.*)$", re.IGNORECASE)
_USAGE_OPTION_RE = re.compile(r"(?<![\w-])(-{1,2}[A-Za-z0-9][A-Za-z0-9_.-]*)(?:\s+(\{[^{}\[\]]*\}))?")
# Two spaces or more end the invocation and start the help on the same line.
_HELP_GAP_RE = re.compile(r"\s{2,}")
_DEPRECATED_RE = re.compile(
    r"[(\[]\s*deprecated\b[^)\]]*[)\]]|^\s*deprecated\b|\bis\s+deprecated\b|\bdeprecated\s+alias\b",
    re.IGNORECASE)
_REPLACEMENT_RE = re.compile(r"\b(?:use|please use|replaced by|renamed to)\s+[`'\"]?(--[A-Za-z0-9][\w-]*)"
                             r"|\balias\s+(?:of|for)\s+[`'\"]?(--[A-Za-z0-9][\w-]*)", re.IGNORECASE)


class ArgparseHelpError(ParseError):
    """Text that is no argparse --help output (not a single option in it)."""


@dataclass(frozen=True)
class HelpOption:
    names: tuple[str, ...]
    metavar: str | None
    choices: tuple[str, ...] | None
    takes_value: bool
    deprecated: bool
    replaced_by: str | None
    help: str


@dataclass(frozen=True)
class ArgparseHelp:
    prog: str | None
    options: tuple[HelpOption, ...]

    def names(self) -> set[str]:
        return {name for option in self.options for name in option.names}

    def exact(self, option: str) -> HelpOption | None:
        return next((o for o in self.options if option in o.names), None)

    def resolve(self, option: str) -> tuple[HelpOption | None, tuple[str, ...]]:
        """The action argparse gives ``option`` to, and the names that matched (several: ambiguous).

        An exact name wins; otherwise a long option may be abbreviated (argparse's default
        ``allow_abbrev``) when the names it starts belong to one action."""
        found = self.exact(option)
        if found is not None:
            return found, (option,)
        if not option.startswith("--") or len(option) < 3:
            return None, ()
        matches = tuple(sorted(n for n in self.names() if n.startswith(option)))
        actions = {o for o in self.options if set(o.names) & set(matches)}
        if len(actions) == 1:
            return next(iter(actions)), matches
        return None, matches


def _split_alternatives(invocation: str) -> list[str]:
    """``--a A, --b {x,y}`` -> ``["--a A", "--b {x,y}"]``: commas inside braces or brackets stay."""
    parts, depth, current = [], 0, []
    for index, char in enumerate(invocation):
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth = max(0, depth - 1)
        if char == "," and depth == 0 and invocation[index + 1:index + 2] in (" ", ""):
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def _choices(text: str) -> tuple[str, ...] | None:
    match = re.search(r"\{([^{}]*)\}", text)
    if not match:
        return None
    values = tuple(v.strip() for v in match.group(1).split(",") if v.strip())
    return values or None


def _option(invocation: str, help_text: str) -> HelpOption | None:
    names: list[str] = []
    argument_texts: list[str] = []
    for alternative in _split_alternatives(invocation):
        name, _unused, rest = alternative.partition(" ")
        if not _OPTION_NAME_RE.match(name):
            return None
        names.append(name)
        if rest.strip():
            argument_texts.append(rest.strip())
    if not names:
        return None
    argument = argument_texts[-1] if argument_texts else None
    choices = _choices(argument) if argument else None
    metavar = argument if argument and choices is None else None
    replacement = _REPLACEMENT_RE.search(help_text)
    return HelpOption(
        names=tuple(dict.fromkeys(names)), metavar=metavar, choices=choices, takes_value=argument is not None,
        deprecated=bool(_DEPRECATED_RE.search(help_text)),
        replaced_by=(replacement.group(1) or replacement.group(2)) if replacement else None,
        help=help_text)


def _clean_lines(text: str) -> list[str]:
    text = normalize_paste(_ANSI_RE.sub("", text))
    return [line.rstrip() for line in strip_line_numbers(text.split("\n"))]


def _usage(lines: list[str]) -> tuple[str | None, str, int]:
    """The program, the usage text joined, and the index of the first line after the usage block."""
    for index, line in enumerate(lines):
        match = _USAGE_RE.match(line)
        if not match:
            continue
        parts = [match.group("rest")]
        end = index + 1
        while end < len(lines) and lines[end].startswith(" ") and lines[end].strip():
            parts.append(lines[end].strip())
            end += 1
        return match.group("prog"), " ".join(parts), end
    return None, "", 0


def _entries(lines: list[str]) -> list[tuple[str, str]]:
    """(invocation, help text) of every option line after the usage block.

    Option lines share one indentation (2 in argparse's layout, 0 in a paste that lost it); help lines
    are indented deeper. An option line holds its help after two spaces or more when it fits."""
    entries: list[tuple[str, list[str]]] = []
    indent: int | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        match = _OPTION_LINE_RE.match(line)
        if match and (indent is None or len(match.group(1)) <= indent):
            parts = [match.group(2) + match.group(3)]
            # A terminal wrapped the line inside the choices: the rest of the braces is on the next lines. The
            # braces still open are counted line by line (counting the whole text again each line was quadratic).
            still_open = parts[0].count("{") - parts[0].count("}")
            while still_open > 0 and index < len(lines) and lines[index].strip():
                parts.append(lines[index].strip())
                still_open += parts[-1].count("{") - parts[-1].count("}")
                index += 1
            invocation = "".join(parts)
            head, *help_start = _HELP_GAP_RE.split(invocation.strip(), maxsplit=1)
            indent = len(match.group(1))
            entries.append((head, help_start))
            continue
        if entries and indent is not None and line.strip() and len(line) - len(line.lstrip()) > indent:
            entries[-1][1].append(line.strip())
    return [(head, _join_wrapped(body)) for head, body in entries]


def _join_wrapped(lines: list[str]) -> str:
    """Help lines joined as one text; argparse wraps after a word's hyphen (``--dsa-`` / ``decode-backend``),
    so a line that ends in one continues the word."""
    text = ""
    for line in lines:
        if re.fullmatch(r"[A-Za-z0-9]-", text[-2:]) and line[:1].isalnum():  # its end only, not all of it
            text += line
        else:
            text = f"{text} {line}" if text else line
    return text


def parse_help(text: str | bytes) -> ArgparseHelp:
    """Every option an argparse ``--help`` output shows; ``ArgparseHelpError`` when it shows none."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise ArgparseHelpError(expected_found(
            "--help output", "text", type(text).__name__, "Pass the command's standard output as a string."))
    lines = _clean_lines(text)
    prog, usage, after_usage = _usage(lines)
    options: list[HelpOption] = []
    seen: set[str] = set()
    for head, help_text in _entries(lines[after_usage:]):
        option = _option(head, help_text)
        if option is None or set(option.names) & seen:
            continue
        seen.update(option.names)
        options.append(option)
    for name, braces in _USAGE_OPTION_RE.findall(usage):
        if name in seen or not _OPTION_NAME_RE.match(name):
            continue
        seen.add(name)
        options.append(HelpOption(names=(name,), metavar=None, choices=_choices(braces) if braces else None,
                                  takes_value=bool(braces), deprecated=False, replaced_by=None, help=""))
    if not options:
        raise ArgparseHelpError(expected_found(
            "--help output", "argparse's layout: a 'usage:' line and option lines such as '  --model-path "
            "MODEL_PATH'", excerpt(text, 120),
            "Pass the standard output of `python -m sglang.launch_server --help` as it was printed."))
    return ArgparseHelp(prog=prog, options=tuple(options))
