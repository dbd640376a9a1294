"""Parser for the text nccl-tests binaries print: the results table, its header and its footer.

Pure functions from text to typed data: no Ansible, no subprocess. ``parse_nccl_tests`` raises only
``NcclTestsParseError`` (a ``ValueError``) and says what it expected, what it found (with the line
number) and what to do. The format follows nccl-tests' own writer (``src/common.cu``) and real outputs
of several versions (tests/fixtures/nccl/SOURCES.md):

* Header lines, all starting with ``#``: ``# nccl-tests version 2.18.0 nccl-headers=22907
  nccl-library=22907`` and ``# Collective test starting: all_gather_perf`` (recent versions only),
  ``# nThread 1 nGpus 2 minBytes 8 ... validation: 1 graph: 0``, ``# Using devices`` and one
  ``#  Rank  0 Group  0 Pid 31706 on host device  0 [0000:b4:00] NAME`` line per rank (before
  nccl-tests 2.13: ``#   Rank  0 Pid 201685 on host device  0 [0x3d] NAME``).
* The column header. Since nccl-tests 2.13 every binary prints
  ``size count type redop root`` then ``time algbw busbw #wrong`` for out-of-place and again for
  in-place (all-gather prints redop ``none`` and root ``-1``). Before, each binary printed only the
  columns it had (all-gather: no redop, no root; broadcast: root, no redop), and the check column was
  ``error``: the largest numerical deviation (``2e-07``), not a count. ``-c 0`` prints ``N/A`` in
  that column; ``-C`` names the time column ``cputime``; ``-I`` adds per-iteration columns.
* Footers: ``# Out of bounds values : 0 OK`` (or ``FAILED``) and ``# Avg bus bandwidth : 2.05774``
  (followed by ``OK``/``FAILED`` when ``NCCL_TESTS_MIN_BW`` is set). The average mixes every size,
  out-of-place and in-place: judge per size.
* ``NCCL version 2.21.5+cuda12.4``, printed by rank 0 with ``NCCL_DEBUG=VERSION`` or ``INFO`` (in
  recent NCCL behind the usual ``host:pid:tid [0] NCCL INFO`` prefix).

Logs are read as users bring them: NCCL INFO/WARN lines interleaved with the table (even in the
middle of a row), launcher prefixes (``[1,0]<stdout>:``, ``[rank3]:``, srun's ``3: ``), indentation,
the ``#`` lost when a log went through a tool that strips it, CRLF and quoted-printable e-mail.

The collective is what the output shows, never a default: the ``Collective test starting`` line, else
the one binary a command line of the log names (``$ ./build/all_gather_perf -b 8 ...``) when the
columns allow it, else the columns when they allow only one (redop, root, busbw/algbw for the rank
count: nccl_tests.collective_candidates). Otherwise ``collective`` is None.

Output schema: ``parse_nccl_tests`` -> ``NcclTestsRun`` (nccl_tests.py): one ``SizeResult`` per row,
``Measurement.max_error`` set instead of ``wrong`` for the ``error`` column of versions before 2.13;
inf and nan are read (``0.00 us / inf GB/s``) and given as no measurement, the row marked
(nccl_tests.measurement); ``nranks`` counted from the rank lines; ``nccl_version`` from the NCCL
version line, else from the library code in the nccl-tests version line; ``avg_busbw_gbps``, ``out_of_bounds`` and
``out_of_bounds_ok`` from the footers, ``complete`` when the average line was seen.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import (
    excerpt,
    expected_found,
    normalize_paste,
    strip_launcher_prefix,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests import (
    EXCERPT_CHARS,
    NAME_RE,
    SIGNED_INT_RE,
    NcclTestsParseError,
    NcclTestsRun,
    SizeResult,
    collective_candidates,
    collective_name,
    collectives_named,
    finite_or_none,
    identify_collective,
    measurement,
    nccl_version_from_code,
)

# --------------------------------------------------------------------------------------------------
# Line shapes

# A NCCL log record: "host:pid:tid [dev] NCCL INFO ..." (WARN records carry "file.cc:line" first). It starts where
# a word starts ((?<!\S)): tried at every character of a long word, \S+ ran to the word's end from each, and one
# 60 KB line took a minute.
_NCCL_LOG_RE = re.compile(r"(?<!\S)\S+:\d{1,12}:\d{1,12} \[\d{1,6}\] (?:\S+:\d{1,9} )?"
                          r"NCCL (?:INFO|WARN|ERROR|TRACE|ABORT)\b")
_GLUED_NUMBER_RE = re.compile(r"-?\d{1,19}(?:\.\d{1,19})?(?=[A-Za-z])")
_TESTS_VERSION_RE = re.compile(r"^nccl-tests version \S+ nccl-headers=\d{1,9} nccl-library=(\d{1,9})\b")
_STARTING_RE = re.compile(r"^Collective test starting:\s*(\S+)")
_NTHREAD_RE = re.compile(r"^nThread:? \d")
_RANK_RE = re.compile(r"^Rank\s+(\d{1,9})\s+(?:Group\s+\d{1,9}\s+)?Pid\s+\d")
# The GPU a rank ran on, ending its line: "device  0 [0000:b4:00] NVIDIA H100 80GB HBM3" (older: "[0x3d] A100-...").
_RANK_DEVICE_RE = re.compile(r"\bdevice\s+\d{1,9}\s+\[[^\]]{0,64}\]\s+(\S.{0,199}?)\s*$")
_OOB_RE = re.compile(r"^Out of bounds values\s*:\s*(\d{1,12})\s*(OK|FAILED)?\b")
_AVG_RE = re.compile(r"^Avg bus bandwidth\s*:\s*(\S+)")
_FAILURE_RE = re.compile(r"\bTest (?:NCCL |CUDA )?failure\b")
_VERSION_LINE_RE = re.compile(r"(?:^|\s|:)NCCL version (\d{1,3}\.\d{1,3}\.\d{1,3})\S*\s*$")

_INT_RE = re.compile(r"^\d{1,19}$")
_FLOAT_RE = re.compile(r"^[-+]?(?:\d{1,20}(?:\.\d*)?|\.\d{1,20})(?:[eE][-+]?\d{1,3})?$|^[-+]?(?:nan|inf)$", re.I)

_LEAD_COLUMNS = ("size", "count", "type", "redop", "root")
_TIME_COLUMNS = ("time", "cputime")
_CHECK_COLUMNS = ("#wrong", "error")
_PER_ITER_COLUMNS = ("i_min", "i_max", "i_p99", "i_cv%")


def _error(what: str, expected: str, found: str, line_number: int | None, todo: str) -> NcclTestsParseError:
    where = f" at line {line_number}" if line_number is not None else ""
    return NcclTestsParseError(expected_found(what, expected, excerpt(found, EXCERPT_CHARS), todo, where),
                               line_number, found.strip()[:EXCERPT_CHARS])


def _last_lines(lines: list[str], count: int = 6) -> str:
    shown = [line.rstrip() for line in lines if line.strip()][-count:]
    return " | ".join(text[:EXCERPT_CHARS] for text in shown) if shown else "(nothing)"


@dataclass(frozen=True)
class _Columns:
    """Where each value sits in a row, as the column header says."""

    count: int
    lead: tuple[str, ...]
    groups: tuple[dict[str, int], ...]  # out-of-place, then in-place: name -> position
    check: str | None  # "#wrong" (a count), "error" (a deviation) or None
    trailing: bool  # a timestamp column after the last group: rows carry extra words


def _parse_column_header(body: str, line_number: int) -> _Columns:
    names = body.split()
    if names[:1] == ["bytes"]:
        raise _error("nccl-tests column header", "the columns of nccl-tests 2.0 or later (size count type ...)",
                     body, line_number,
                     "This is nccl-tests 1.x output (times in ms, a 'res' column): rerun with a current nccl-tests")
    lead = []
    position = 0
    for name in names:
        if name not in _LEAD_COLUMNS:
            break
        lead.append(name)
        position += 1
    if lead[:3] != ["size", "count", "type"] or len(set(lead)) != len(lead):
        raise _error("nccl-tests column header", "'size count type' then optional 'redop' and 'root'", body,
                     line_number, "Pass the output of one nccl-tests binary as it printed it")
    groups: list[dict[str, int]] = []
    check: str | None = None
    while position < len(names) and names[position] in _TIME_COLUMNS and len(groups) < 2:
        group = {"time": position}
        if names[position + 1:position + 3] != ["algbw", "busbw"]:
            raise _error("nccl-tests column header", "'time algbw busbw' for each placement", body, line_number,
                         "Pass the output of one nccl-tests binary as it printed it")
        group["algbw"], group["busbw"] = position + 1, position + 2
        position += 3
        if position < len(names) and names[position] in _CHECK_COLUMNS:
            if check not in (None, names[position]):
                raise _error("nccl-tests column header", "the same check column for both placements", body,
                             line_number, "Pass the output of one nccl-tests binary as it printed it")
            check = names[position]
            group["check"] = position
            position += 1
        while position < len(names) and names[position] in _PER_ITER_COLUMNS:
            position += 1
        groups.append(group)
    if not groups:
        raise _error("nccl-tests column header", "'time algbw busbw' after the leading columns", body, line_number,
                     "Pass the output of one nccl-tests binary as it printed it")
    rest = names[position:]
    if rest not in ([], ["timestamp"]):
        raise _error("nccl-tests column header", "no columns after the in-place ones (but 'timestamp')", body,
                     line_number, "Pass the output of one nccl-tests binary as it printed it")
    return _Columns(count=position, lead=tuple(lead), groups=tuple(groups), check=check, trailing=bool(rest))


def _is_column_header(body: str) -> bool:
    words = body.split()
    return len(words) >= 3 and words[0] in ("size", "bytes") and words[1] in ("count", "N")


def _to_float(token: str, what: str, raw: str, line_number: int) -> float:
    if not _FLOAT_RE.match(token):
        raise _error(f"nccl-tests row, {what}", "a number", raw, line_number,
                     "The row is garbled: check that the log was not cut or mixed with other output")
    return float(token)


def _check_value(token: str, check: str | None, raw: str, line_number: int) -> tuple[int | None, float | None]:
    if check is None or token == "N/A":
        return None, None
    value = _to_float(token, f"'{check}' column", raw, line_number)
    if check == "error":
        return None, value
    if not math.isfinite(value) or value < 0 or value != int(value):
        raise _error("nccl-tests row, '#wrong' column", "a count of wrong elements or N/A", raw, line_number,
                     "The row is garbled: check that the log was not cut or mixed with other output")
    return int(value), None


def _parse_row(tokens: list[str], columns: _Columns, raw: str, line_number: int) -> SizeResult:
    lead = dict(zip(columns.lead, tokens[:len(columns.lead)], strict=True))
    for name in ("size", "count"):
        if not _INT_RE.match(lead[name]):
            raise _error(f"nccl-tests row, '{name}' column", "a whole number", raw, line_number,
                         "The row is garbled: check that the log was not cut or mixed with other output")
    if not NAME_RE.match(lead["type"]):
        raise _error("nccl-tests row, 'type' column", "a data type such as float or bfloat16", raw, line_number,
                     "The row is garbled: check that the log was not cut or mixed with other output")
    redop = lead.get("redop")
    if redop is not None and not NAME_RE.match(redop):
        raise _error("nccl-tests row, 'redop' column", "an operation such as sum or none", raw, line_number,
                     "The row is garbled: check that the log was not cut or mixed with other output")
    root_token = lead.get("root")
    if root_token is not None and not SIGNED_INT_RE.match(root_token):
        raise _error("nccl-tests row, 'root' column", "a rank number or -1", raw, line_number,
                     "The row is garbled: check that the log was not cut or mixed with other output")
    root = int(root_token) if root_token is not None else None
    measurements = []
    for group in columns.groups:
        wrong, max_error = _check_value(tokens[group["check"]], columns.check, raw, line_number) \
            if "check" in group else (None, None)
        measurements.append(measurement(
            _to_float(tokens[group["time"]], "time column", raw, line_number),
            _to_float(tokens[group["algbw"]], "algbw column", raw, line_number),
            _to_float(tokens[group["busbw"]], "busbw column", raw, line_number),
            wrong,
            max_error,
        ))
    return SizeResult(
        size_bytes=int(lead["size"]),
        count=int(lead["count"]),
        type=lead["type"],
        # nccl-tests prints "none" and -1 where the collective takes no operation or root.
        redop=None if redop in (None, "none") else redop,
        root=None if root is None or root < 0 else root,
        out_of_place=measurements[0],
        in_place=measurements[1] if len(measurements) > 1 else None,
    )


def _clean(raw: str) -> str:
    return strip_launcher_prefix(raw.replace("\x00", "").rstrip("\r\n")).strip()


# --------------------------------------------------------------------------------------------------
# The parser


@dataclass
class _State:
    run: NcclTestsRun
    ranks: set[int] = field(default_factory=set)
    device_names: dict[int, str] = field(default_factory=dict)  # rank -> the GPU name its line ends with
    columns: _Columns | None = None
    header_line: int | None = None
    pending: list[str] = field(default_factory=list)
    pending_line: int | None = None
    pending_raw: str = ""
    failure: tuple[int, str] | None = None
    orphan_row: tuple[int, str] | None = None
    library_version: str | None = None
    mentioned: set[str] = field(default_factory=set)  # collectives whose binaries the log names


def parse_nccl_tests(text: str) -> NcclTestsRun:
    """The results of one nccl-tests run from its text output (stdout, as printed or as logged)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise NcclTestsParseError(
            f"nccl-tests output: expected text; found {type(text).__name__}. Pass what the binary printed.")
    lines = normalize_paste(text).splitlines()
    state = _State(NcclTestsRun(None, None, None, None, None, None))
    for number, raw in enumerate(lines, start=1):
        line = _clean(raw)
        state.mentioned |= collectives_named(line)
        _read_line(state, line, number)
    return _finish(state, lines)


def _read_line(state: _State, line: str, number: int) -> None:
    if not line:
        return
    log = _NCCL_LOG_RE.search(line)
    if log:
        _read_version(state, line[log.start():])
        # A log record can land in the middle of a row: keep what came before it. The record's host name
        # then sticks to the row's last value ("-1host:12:34 [0] NCCL INFO"): give the number back.
        before = line[:log.start()]
        glued = _GLUED_NUMBER_RE.match(line, log.start()) if before.strip() else None
        line = (before + (glued.group(0) if glued else "")).strip()
        if not line:
            return
    if line.lstrip("# ").startswith("NCCL version"):
        _read_version(state, line)
        return
    body = line.lstrip("#").strip()
    if not body:
        return
    if line.startswith("#"):
        _read_header_or_footer(state, body, line, number)
        return
    if not state.pending and not _starts_with_int(body):
        if state.columns is not None and _FLOAT_RE.match(body.split(maxsplit=1)[0]):
            raise _error("nccl-tests row", "a row starting with the size in bytes", line, number,
                         "The row is garbled: check that the log was not cut or mixed with other output")
        # Header and footer lines whose "#" a log tool stripped, or other programs' chatter.
        if not _read_header_or_footer(state, body, line, number) and _FAILURE_RE.search(line) \
                and state.failure is None:
            state.failure = (number, line)
        return
    if state.columns is None:
        if state.orphan_row is None:
            state.orphan_row = (number, line)
        return
    _read_row(state, body.split(), line, number)


def _read_row(state: _State, words: list[str], line: str, number: int) -> None:
    columns = state.columns
    if columns is None:  # narrows the type; an assert would vanish under python -O
        raise AssertionError("unreachable: columns is not None")
    tokens = state.pending + words
    if not state.pending and len(tokens) == columns.count - 1 and columns.lead[3:5] == ("redop", "root") \
            and len(tokens) > 3 and SIGNED_INT_RE.match(tokens[3]):
        # nccl-tests 2.13.0 to 2.13.5 printed an empty redop for collectives without one (all-gather,
        # alltoall, broadcast, gather, scatter): the root stands where the operation should.
        tokens = [*tokens[:3], "none", *tokens[3:]]
    if len(tokens) < columns.count:
        # A row cut by a log record continues on a later line.
        if not state.pending:
            state.pending_line, state.pending_raw = number, line
        else:
            state.pending_raw += " " + line
        state.pending = tokens
        return
    row_line = state.pending_line if state.pending else number
    row_raw = f"{state.pending_raw} {line}" if state.pending else line
    state.pending, state.pending_line, state.pending_raw = [], None, ""
    if len(tokens) > columns.count and not columns.trailing:
        raise _error("nccl-tests row", f"{columns.count} values as the column header at line {state.header_line} "
                     "says", row_raw, row_line,
                     "The row is garbled or two outputs were mixed: pass the output of one run as it was printed")
    state.run.results.append(_parse_row(tokens, columns, row_raw, row_line))


def _starts_with_int(body: str) -> bool:
    first = body.split(maxsplit=1)[0] if body else ""
    return bool(_INT_RE.match(first))


def _read_version(state: _State, text: str) -> None:
    match = _VERSION_LINE_RE.search(text)
    if match and state.run.nccl_version is None:
        state.run.nccl_version = match.group(1)


def _read_header_or_footer(state: _State, body: str, line: str, number: int) -> bool:
    """Handle the lines nccl-tests prints around the table; False for anything else."""
    run = state.run
    match = _TESTS_VERSION_RE.match(body)
    if match:
        state.library_version = nccl_version_from_code(int(match.group(1)))
        return True
    match = _STARTING_RE.match(body)
    if match:
        run.collective = collective_name(match.group(1))
        return True
    if _NTHREAD_RE.match(body):
        if state.columns is not None:
            raise _second_run(state, line, number)
        return True
    match = _RANK_RE.match(body)
    if match:
        state.ranks.add(int(match.group(1)))
        device = _RANK_DEVICE_RE.search(body)
        if device:
            state.device_names[int(match.group(1))] = device.group(1)
        return True
    if _is_column_header(body):
        if state.columns is not None:
            raise _second_run(state, line, number)
        state.columns = _parse_column_header(body, number)
        state.header_line = number
        return True
    match = _OOB_RE.match(body)
    if match:
        run.out_of_bounds = int(match.group(1))
        run.out_of_bounds_ok = run.out_of_bounds == 0 if match.group(2) is None else match.group(2) == "OK"
        return True
    match = _AVG_RE.match(body)
    if match:
        run.avg_busbw_gbps = finite_or_none(_to_float(match.group(1), "average bus bandwidth", line, number))
        run.complete = True
        return True
    return False


def _second_run(state: _State, line: str, number: int) -> NcclTestsParseError:
    return _error(
        "nccl-tests output", "one run", line, number,
        f"A second run starts here (the first table begins at line {state.header_line}). Split the log per run. "
        "When every process of an mpirun prints its own header, the binary was built without MPI=1 and each "
        "process ran alone: rebuild with `make MPI=1`")


def _finish(state: _State, lines: list[str]) -> NcclTestsRun:
    run = state.run
    if state.pending:
        raise _error("nccl-tests output", "complete rows", state.pending_raw, state.pending_line,
                     "The output ends inside this row: the run was cut off (timeout, crash, or a truncated log). "
                     "Rerun, or cut the log before this row")
    if state.failure is not None:
        number, text = state.failure
        done = f"; results were printed for {len(run.results)} size(s) before it" if run.results else ""
        raise _error("nccl-tests run", "a run that completes", text, number,
                     f"nccl-tests reported a failure{done}. Last lines: {_last_lines(lines)}. "
                     "Rerun with NCCL_DEBUG=WARN (or INFO) to see NCCL's reason; NCCL_P2P_DISABLE=1 tells whether "
                     "the peer-to-peer path is the cause")
    if not run.results:
        if state.columns is None and state.orphan_row is not None:
            number, text = state.orphan_row
            raise _error("nccl-tests output", "the column header ('# size count type ...') before the rows", text,
                         number, "Include the header lines nccl-tests prints before its table")
        where = (f"no result rows after the column header at line {state.header_line}" if state.columns is not None
                 else "no results table")
        raise NcclTestsParseError(
            f"nccl-tests output: expected a results table; found {where}. Last lines: {_last_lines(lines)}. "
            "The run probably failed before measuring (look for NCCL WARN or 'Test failure' above); rerun with "
            "NCCL_DEBUG=WARN to see why", None, _last_lines(lines))
    if run.nccl_version is None:
        run.nccl_version = state.library_version
    run.nranks = len(state.ranks) or None
    run.device_names = [state.device_names[rank] for rank in sorted(state.device_names)]
    lead = frozenset(state.columns.lead) if state.columns is not None else frozenset()
    run.collective_candidates = collective_candidates(run.results, lead, run.nranks)
    run.collective, run.collective_source = identify_collective(run.collective, state.mentioned,
                                                                run.collective_candidates)
    return run
