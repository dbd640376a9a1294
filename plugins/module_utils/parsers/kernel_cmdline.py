"""The kernel command line as the boot loaders keep it, and the edit that makes it hold some parameters.

Two places hold it on a Proxmox VE node (and on Debian):

- ``/etc/default/grub``, a shell file: ``GRUB_CMDLINE_LINUX_DEFAULT="quiet"``; ``update-grub`` copies
  it into every ``linux`` line of grub.cfg;
- ``/etc/kernel/cmdline``, one line (systemd-boot, kept by ``proxmox-boot-tool``).

The kernel splits its command line at blanks outside double quotes (``param="a b"`` is one word) and
stops at ``--``: what follows belongs to init. ``ensure`` changes only the words of the parameters it
is asked about and leaves every other byte as it was, so a line that already holds them comes back
unchanged (the edit is idempotent):

- a wanted ``key=value`` that is missing is appended (before ``--``);
- a key present with a conflicting option (``intel_iommu=off``) has that option replaced by the
  wanted one; options that do not conflict are kept (``intel_iommu=off,sm_on`` -> ``on,sm_on``);
- a key given several times becomes one word, at the first one's place, with their options merged;
- a rule without a value (``Rule("amd_iommu", None, {"off"})``) only takes the conflicting options
  out, and the word with them when nothing is left.

Text that cannot be edited safely (a value quoted over several lines, an unclosed quote) raises
``CmdlineError`` saying what was found and what to do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

GRUB_VARIABLE = "GRUB_CMDLINE_LINUX_DEFAULT"
END_OF_KERNEL_ARGS = "--"


class CmdlineError(ValueError):
    """Text that cannot be edited safely, with what was expected."""


@dataclass(frozen=True)
class Rule:
    """``key`` must carry ``value`` (None: need not) and none of ``conflicts`` among its comma-separated options."""

    key: str
    value: str | None
    conflicts: frozenset[str] = field(default_factory=frozenset)

    def satisfied_by(self, options: Sequence[str]) -> bool:
        if any(option in self.conflicts for option in options):
            return False
        return self.value is None or self.value in options


@dataclass(frozen=True)
class Word:
    start: int
    end: int
    text: str

    @property
    def key(self) -> str:
        return self.text.partition("=")[0]

    @property
    def quote(self) -> str:
        """How the value is quoted: for the kernel ('"'), for the kernel inside a shell's double quotes
        ('\\"'), or not at all."""
        value = self.text.partition("=")[2]
        for quote in ('\\"', '"'):
            if len(value) >= 2 * len(quote) and value.startswith(quote) and value.endswith(quote):
                return quote
        return ""

    @property
    def options(self) -> list[str]:
        """The value's comma-separated options, quotes taken off; [] for a bare flag."""
        _unused, sep, value = self.text.partition("=")
        if not sep:
            return []
        if self.quote:
            value = value[len(self.quote):-len(self.quote)]
        return [part for part in value.split(",") if part]


def words(line: str) -> list[Word]:
    """The kernel's words of one line with their places; blanks inside double quotes do not split."""
    found: list[Word] = []
    start: int | None = None
    quoted = False
    for index, char in enumerate(line):
        if char == '"':
            quoted = not quoted
        if char.isspace() and not quoted:
            if start is not None:
                found.append(Word(start, index, line[start:index]))
                start = None
        elif start is None:
            start = index
    if quoted:
        raise CmdlineError(f"expected double quotes to come in pairs in the kernel command line, found an unclosed "
                           f"quote in {line.strip()[:120]!r}; close it by hand first")
    if start is not None:
        found.append(Word(start, len(line), line[start:]))
    return found


def params(line: str) -> dict[str, list[str]]:
    """Each kernel parameter's options (a key given twice: all of them, in order), up to ``--``."""
    found: dict[str, list[str]] = {}
    for word in words(line):
        if word.text == END_OF_KERNEL_ARGS:
            break
        found.setdefault(word.key, []).extend(word.options)
    return found


def satisfies(line: str, rules: Iterable[Rule]) -> bool:
    """Whether the kernel, booted with ``line``, gets every rule (the running kernel's /proc/cmdline)."""
    present = params(line)
    return all(rule.satisfied_by(present.get(rule.key, [])) if rule.key in present else rule.value is None
               for rule in rules)


def _merged_options(rule: Rule, occurrences: list[Word]) -> list[str]:
    options = list(dict.fromkeys(o for word in occurrences for o in word.options if o not in rule.conflicts))
    if rule.value is not None and rule.value not in options:
        options.insert(0, rule.value)
    return options


def ensure(line: str, rules: Iterable[Rule]) -> str:
    """``line`` with every rule holding, all other words and blanks as they were."""
    all_words = words(line)
    end = next((i for i, w in enumerate(all_words) if w.text == END_OF_KERNEL_ARGS), len(all_words))
    kernel_words = all_words[:end]
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement), on the original line
    appended: list[str] = []
    for rule in rules:
        occurrences = [w for w in kernel_words if w.key == rule.key]
        if len(occurrences) == 1 and rule.satisfied_by(occurrences[0].options):
            continue
        if not occurrences:
            if rule.value is not None:
                appended.append(f"{rule.key}={rule.value}")
            continue
        options = _merged_options(rule, occurrences)
        first, *later = occurrences
        value = ",".join(options)
        if re.search(r"\s", value):
            # An option kept from a quoted value: quoted again as it was.
            quote = next((w.quote for w in occurrences if w.quote), '"')
            value = f"{quote}{value}{quote}"
        edits.append((first.start, first.end, f"{rule.key}={value}" if options else ""))
        edits += [(w.start, w.end, "") for w in later]
    text = line
    for start, stop, replacement in sorted(edits, reverse=True):
        if replacement:
            text = text[:start] + replacement + text[stop:]
        else:
            # A word taken out takes the blanks before it along (or after it, at the start of the line).
            before = start
            while before > 0 and text[before - 1] in " \t":
                before -= 1
            after = stop
            if before == 0:
                while after < len(text) and text[after] in " \t":
                    after += 1
            text = text[:before] + text[after:]
    if appended:
        text = _append(text, appended)
    return text


def _append(line: str, new: list[str]) -> str:
    """``new`` words after the kernel's last word (before ``--``), keeping a trailing newline or blanks."""
    kernel = words(line)
    end_marker = next((w for w in kernel if w.text == END_OF_KERNEL_ARGS), None)
    addition = " ".join(new)
    if end_marker is not None:
        return line[:end_marker.start] + addition + " " + line[end_marker.start:]
    body = line.rstrip()
    tail = line[len(body):]
    return (body + " " + addition if body else addition) + tail


# ---------------------------------------------------------------------------
# The files


@dataclass(frozen=True)
class Edit:
    """A file's text before and after, and the kernel command line it holds before and after."""

    text_before: str
    text_after: str
    cmdline_before: str
    cmdline_after: str

    @property
    def changed(self) -> bool:
        return self.text_before != self.text_after


def edit_kernel_cmdline_file(text: str, rules: Iterable[Rule]) -> Edit:
    """/etc/kernel/cmdline: the kernel command line on its first line; other lines are ignored by
    proxmox-boot-tool and kept."""
    first, newline, rest = text.partition("\n")
    edited = ensure(first, rules)
    return Edit(text, edited + (newline or "\n") + rest, first.strip(), edited.strip())


GRUB_LINE = re.compile(rf"^(?P<lead>[ \t]*(?:export[ \t]+)?{GRUB_VARIABLE}=)(?P<rest>.*)$")


def _split_shell_value(rest: str, line_number: int) -> tuple[str, str, str]:
    """(quote, value as written between the quotes, what follows) of the right-hand side of a shell assignment.

    The value stays as written (``\\"``, ``$VAR`` and all): the edit changes only the words it manages, whose
    text needs no escaping, so writing it back between the same quotes keeps the rest's meaning."""
    if rest.startswith('"'):
        index = 1
        while index < len(rest):
            if rest[index] == "\\":
                index += 2
                continue
            if rest[index] == '"':
                return '"', rest[1:index], rest[index + 1:]
            index += 1
    elif rest.startswith("'"):
        close = rest.find("'", 1)
        if close > 0:
            return "'", rest[1:close], rest[close + 1:]
    else:
        match = re.match(r"[^\s'\"#;]*", rest)
        value = match.group(0) if match else ""
        if not rest[len(value):].lstrip().startswith(("'", '"')):
            return "", value, rest[len(value):]
    raise CmdlineError(
        f"expected {GRUB_VARIABLE}= with one quoted value on line {line_number} of /etc/default/grub, found "
        f"{rest[:120]!r} (a quote closed on another line, or values glued together); write it as "
        f'{GRUB_VARIABLE}="..." on one line and run again')


def _quote(value: str, quote: str) -> str:
    """The value between its original quotes; an unquoted one that now holds blanks gets double quotes."""
    if quote or re.search(r"\s", value) or not value:
        return f"{quote or chr(34)}{value}{quote or chr(34)}"
    return value


def edit_grub_default(text: str, rules: Iterable[Rule]) -> Edit:
    """/etc/default/grub: the last assignment of GRUB_CMDLINE_LINUX_DEFAULT (the shell keeps the last),
    edited in place with its quoting; appended when there is none."""
    rules = list(rules)
    lines = text.split("\n")
    found = [(i, m) for i, m in ((i, GRUB_LINE.match(line)) for i, line in enumerate(lines)) if m]
    if not found:
        after = ensure("", rules)
        addition = f"{GRUB_VARIABLE}={_quote(after, chr(34))}"
        body = text if text.endswith("\n") or not text else text + "\n"
        return Edit(text, body + addition + "\n", "", after)
    index, match = found[-1]
    quote, value, tail = _split_shell_value(match.group("rest"), index + 1)
    edited = ensure(value, rules)
    if edited == value:
        return Edit(text, text, value, value)
    lines[index] = match.group("lead") + _quote(edited, quote) + tail
    return Edit(text, "\n".join(lines), value, edited)
