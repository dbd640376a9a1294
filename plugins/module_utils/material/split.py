"""One paste that holds several outputs, cut into one piece per output.

Users paste what they ran one after the other into one file or one issue: a shell line before each output
(``$ nvidia-smi topo -m`` ... ``$ nvidia-smi topo -p2p r`` ...), or a Markdown heading or an HTML
``<summary>`` naming each (``<summary>GPU peer-access matrix (topo -p2p rw)</summary>``, as the bench reports
of noonghunna/club-3090 issues 1124 and 1229 are laid out; fixture tests/fixtures/pastes/). A piece starts at
such a line; its command is the shell line's, or the one the heading names (``topo -p2p rw`` ->
``nvidia-smi topo -p2p rw``), else None.

Pure: text in, pieces out; nothing here raises. Text whose only such line is its first (the usual ``$ nvidia-smi
topo -p2p r`` above its output) is one piece: the caller tells it as it tells any paste.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A shell line that runs one of the tools whose output the audit reads (the commands kinds.pasted_command
# looks for), after a prompt that ends in $ or # (user@host:~$, root@pve:~#, a bare $) or PowerShell's (PS C:\>),
# with environment assignments before it (NCCL_DEBUG=INFO ./all_reduce_perf ...). `cat <path>` names the file
# that follows (a VM config, /proc/cmdline). The benchmark programs too: their logs are read by the benchmark's
# readers, and a log after another output would otherwise take that output in.
_BENCH = r"(?:\S*/)?(?:[a-z_]+_perf|nvbandwidth|p2pBandwidthLatencyTest|simpleP2P)"
_PROMPT = r"(?:[^\s$#>]{0,80}[$#]|PS [^\s>]{0,80}>)"
_ENV = r"(?:[A-Z_][A-Z0-9_]{0,63}=\S{0,200}\s+){0,8}"
_SHELL_RE = re.compile(r"^\s{0,4}(?:>\s?)?(?:" + _PROMPT + r"\s*)(?:sudo\s+)?" + _ENV
                       + r"(?P<command>(?:nvidia-smi|qm|lspci|dmesg|journalctl|cat|pveversion|" + _BENCH
                       + r")(?:\s+\S.*?)?)\s*$")
# A prompt that names its user and host (root@pve01:~#, user@llm-vm:~$) or PowerShell's starts a piece whatever
# it runs: what follows is that command's output, never more of the output above.
_HOST_PROMPT_RE = re.compile(r"^\s{0,4}(?:>\s?)?(?:[\w.-]{1,64}@[\w.-]{1,64}:[^\s$#]{0,80}[$#]|PS [^\s>]{0,80}>)"
                             r"\s*(?P<command>\S.{0,2000})$")
# A heading that names an output: Markdown (#, ##, **bold**) or an HTML summary, holding a command's words.
_HEADING_RE = re.compile(r"^\s{0,3}(?P<mark>#{1,6}\s+|\*\*|<summary>|<details>\s*<summary>)(?P<title>.{1,200}?)"
                         r"(?:\*\*|</summary>)?\s*$")
# What a heading may name, and the command each stands for.
_NAMED_RE = (
    (re.compile(r"\btopo\s+-p2p\s+(?P<letters>[rwnapRWNAP]{1,5})\b"), "nvidia-smi topo -p2p {letters}"),
    (re.compile(r"\btopo\s+-m\b"), "nvidia-smi topo -m"),
    (re.compile(r"\bnvidia-smi\s+-q\s+-x\b"), "nvidia-smi -q -x"),
    (re.compile(r"\bnvidia-smi\s+(?:-q|--query)\b(?!\s+-)"), "nvidia-smi -q"),
    (re.compile(r"\bnvidia-smi\s+-L\b"), "nvidia-smi -L"),
)
# A benchmark program named by a heading; not after a lone "#", which starts every comment line nccl-tests prints
# ("# Collective test concluded: broadcast_perf").
_BENCH_NAMED_RE = re.compile(r"(?<![\w/])(?P<program>" + _BENCH + r")\b")


@dataclass(frozen=True)
class Output:
    command: str | None  # the command the shell line or heading names, single-spaced
    start: int  # the line the piece starts at (0-based), for the input's name
    text: str
    named_by: str | None = None  # "command line" (a shell line) or "heading"; None with no command


def split_outputs(text: str) -> list[Output]:
    """The pieces of a paste: what comes before the first shell line or naming heading (when anything does),
    then one piece from each such line to the next; the whole text as one piece (command None) when no such
    line starts anything but the text's own first output."""
    if not isinstance(text, str):
        return []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    starts = _merged([(index, started) for index, line in enumerate(lines) for started in [_starts_output(line)]
                      if started is not None], lines)
    before = "\n".join(lines[:starts[0][0]]) + "\n" if starts else text
    if not starts or (len(starts) == 1 and not before.strip()):
        return [Output(None, 0, text)]
    pieces = [Output(None, 0, before)] if before.strip() else []
    for number, (index, (command, named_by)) in enumerate(starts):
        end = starts[number + 1][0] if number + 1 < len(starts) else len(lines)
        pieces.append(Output(command, index, "\n".join(lines[index:end]) + "\n", named_by))
    return pieces


def _merged(starts: list[tuple[int, tuple[str, str]]], lines: list[str]) -> list[tuple[int, tuple[str, str]]]:
    """Prompt lines with no output between them (``$ export CUDA_VISIBLE_DEVICES=0,1`` then ``$ ./p2pBandwidth...``)
    start one piece, at the first of them, with the last one's command: the output that follows is that one's."""
    merged: list[tuple[int, tuple[str, str]]] = []
    for index, started in starts:
        if merged and not any(line.strip() for line in lines[merged[-1][0] + 1:index]) \
                and merged[-1][1][1] == started[1] == "command line":
            merged[-1] = (merged[-1][0], started)
        else:
            merged.append((index, started))
    return merged


def _starts_output(line: str) -> tuple[str, str] | None:
    """(the command a line starts an output of, "command line" or "heading"), or None when it starts nothing."""
    shell = _SHELL_RE.match(line) or _HOST_PROMPT_RE.match(line)
    if shell:
        return " ".join(shell.group("command").split()), "command line"
    heading = _HEADING_RE.match(line)
    if heading:
        program = _BENCH_NAMED_RE.search(heading.group("title"))
        if program and heading.group("mark").strip() != "#":
            return program.group("program"), "heading"
        for pattern, command in _NAMED_RE:
            found = pattern.search(heading.group("title"))
            if found:
                return command.format(**{key: value.lower() for key, value in found.groupdict().items()}), "heading"
    return None
