"""Parsers for nvbandwidth's output: its text and its ``-j`` JSON.

Pure functions from text to plain data; the only exception they raise is ``P2PToolParseError``. The
formats follow nvbandwidth's own writers (``output.cpp`` and ``inline_common.h`` for the text,
``json_output.cpp`` for ``-j``, v0.5 to v0.8) and real outputs (tests/fixtures/p2p/SOURCES.md):

* Text, per test case: ``Running NAME.``, a description line ending in its unit (``memcpy CE GPU(row)
  -> GPU(column) bandwidth (GB/s)``, ``memory latency SM CPU(row) <-> GPU(column) (ns)``, ``Device to
  Device Latency SM GPU(row) <-> GPU(column) (ns)``, ``multicast SM ...``), a header of column numbers
  (``%10``), one row per source (``%2`` index then ``%10`` values, ``N/A`` where nothing was measured:
  the diagonal, pairs without peer access), a blank line and ``SUM NAME value`` (``&&&& PERF NAME value
  +GB/s`` or ``-ns`` with ``--perfFormatter``). Version and driver lines come first.
* JSON: ``{"nvbandwidth": {"version", "Driver Version", "CUDA Runtime Version", "testcases": [{"name",
  "status", "bandwidth_description", "bandwidth_matrix" (strings), "sum"}]}}``.

Pasted pieces are read too: a matrix cut out of a longer output, without the banner, the ``Running``
line or the SUM line, with ``[...]`` where rows were cut (those rows are None). What the paste does not
say is None: the test's name without ``Running`` or SUM, the unit without a description line.

Output schema: ``{"tool": "nvbandwidth", "version", "driver_version", "cuda_runtime_version",
"testcases": [{"name", "status", "error"}], "matrices": [...], "error", "warning"}`` (the text's also
``devices``: ``[{index, name, pci_bus_id}]`` from its ``Device N: NAME (0000000:bb:dd)`` lines), each matrix in
p2p_common's shape: latencies keep nvbandwidth's ns (``unit`` "ns") with ``values_us`` beside them,
and ``sum`` is the SUM line's figure (in the matrix's unit), where the output has one.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_common import (
    P2PToolParseError,
    is_elision,
    matrix,
    number,
    p2p_lines,
)

_RUNNING_RE = re.compile(r"^Running (\S+?)\.?\s*$")
_BISECT_RE = re.compile(r"^Bisect benchmarking\b")
_COLUMNS_RE = re.compile(r"^\s*\d+(?:\s+\d+)*\s*$")
_SUM_RE = re.compile(r"^(?:SUM|&&&& PERF) (\S+) (\S+?)(?: ?[+-]?(?:GB/s|ns))?\s*$")
_VERSION_RE = re.compile(r"^nvbandwidth Version: (\S+)")
_DRIVER_RE = re.compile(r"^Driver Version: (\S+)")
_UNIT_RE = re.compile(r"\((GB/s|ns|us)\)\s*$")
# "Device 0: NVIDIA H20-3e (00000000:18:00)": the domain in 8 digits, bus and device.
_DEVICE_RE = re.compile(r"^Device (\d{1,3}): (.+?) \(([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\)\s*$")
_NUMBER_TOKEN_RE = re.compile(r"^[-+]?\d+(?:[.,]\d*)*$")
# v0.2 printed the name alone (NVIDIA/nvbandwidth issue 15): the bus id is then not told.
_DEVICE_NAME_RE = re.compile(r"^Device (\d{1,3}): (\S(?:.*\S)?)\s*$")  # not \S.*?\s*$: quadratic in blanks
# What nvbandwidth prints when a test case stops (inline_common.h ASSERT, memcpy.cpp's pattern check).
_FAILURE_RE = re.compile(r"^(?:ASSERT in expression .+|.*\bInvalid value when checking the pattern\b.*|"
                         r"CUDA_ERROR\w*.*)$")


def _is_description(line: str) -> bool:
    """A test case's description (one line): it ends in its unit, or names rows and then columns (the multinode
    bisect test has no unit). By hand, not by the regex it replaces (``(?:\\(unit\\)|\\(row\\).*\\(column\\).*)``): from
    each "(row)" it searched the rest of the line for "(column)" again, quadratic in a line of many."""
    if not line[:1].strip() or line.startswith(("Running ", "SUM ", "&&&& ")):
        return False
    if line[1:].rstrip().endswith(("(GB/s)", "(ns)", "(us)")):
        return True
    row = line.find("(row)", 1)
    return row >= 0 and line.find("(column)", row + 5) >= 0


def describe(name: str | None, description: str | None, rows: list[list[float | None]],
             total: float | None = None) -> dict[str, Any]:
    """One test case's matrix, with what its name and description say (None where they are missing)."""
    text = f"{name or ''} {description or ''}".lower()
    found = _UNIT_RE.search(description or "")
    unit = found.group(1) if found else None  # None: "Bisect benchmarking ... BW" prints none
    latency = "latency" in text
    kind = "latency" if latency else ("bandwidth" if (unit == "GB/s" or "bandwidth" in text or " bw" in text)
                                      else None)
    lowered = (description or "").lower()
    if "device_to_device" in (name or "") or ("gpu(row)" in lowered and "gpu(column)" in lowered):
        path = "peer"
    elif "host" in (name or "") or "cpu" in lowered:
        path = "host"
    else:
        path = None
    extra: dict[str, Any] = {"description": description} if description is not None else {}
    if total is not None:
        extra["sum"] = total
    return matrix(name, kind, unit, path, rows, bidirectional="bidirectional" in (name or "").lower(), **extra)


def parse_nvbandwidth_json(text: str) -> dict[str, Any]:
    """nvbandwidth ``-j`` output: versions and one matrix per test case that ran."""
    try:
        document = json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise P2PToolParseError(f"nvbandwidth JSON: expected the document nvbandwidth -j prints; found invalid JSON "
                                f"({exc})") from None
    root = document.get("nvbandwidth") if isinstance(document, dict) else None
    if not isinstance(root, dict):
        raise P2PToolParseError("nvbandwidth JSON: expected an object with the key 'nvbandwidth'; found "
                                f"{type(document).__name__}. Pass the output of nvbandwidth -j unchanged")
    cases = root.get("testcases") or []
    if not isinstance(cases, list):
        raise P2PToolParseError("nvbandwidth JSON: 'testcases' must be a list")
    matrices = []
    statuses = []
    for index, case in enumerate(cases):
        if not isinstance(case, dict):
            raise P2PToolParseError(f"nvbandwidth JSON: testcases[{index}] must be an object")
        name = str(case.get("name") or f"testcase {index}")
        statuses.append({"name": name, "status": case.get("status"), "error": case.get("error")})
        raw = case.get("bandwidth_matrix")
        if raw is None:
            continue
        if not isinstance(raw, list) or not all(isinstance(row, list) for row in raw):
            raise P2PToolParseError(f"nvbandwidth JSON: {name}.bandwidth_matrix must be a list of rows")
        rows = [[number(str(v), f"nvbandwidth JSON {name}") for v in row] for row in raw]
        if any(len(row) != len(rows[0]) for row in rows):
            raise P2PToolParseError(f"nvbandwidth JSON: {name}.bandwidth_matrix has rows of different lengths")
        total = case.get("sum")
        total = float(total) if isinstance(total, (int, float)) and not isinstance(total, bool) else None
        matrices.append(describe(name, str(case.get("bandwidth_description") or ""), rows, total))
    if not matrices and root.get("error"):
        raise P2PToolParseError(f"nvbandwidth JSON: no results; nvbandwidth said: {root['error']}")
    return {"tool": "nvbandwidth", "version": root.get("version"), "driver_version": root.get("Driver Version"),
            "cuda_runtime_version": root.get("CUDA Runtime Version"), "testcases": statuses,
            "matrices": matrices, "error": root.get("error"), "warning": root.get("warning")}


class _Reader:
    """The text, one line at a time: the matrix being read and the ones done."""

    def __init__(self) -> None:
        self.version: str | None = None
        self.driver: str | None = None
        self.devices: list[dict[str, Any]] = []
        self.running: str | None = None
        self.pending: dict[str, Any] | None = None  # {name, description, columns, rows, elided}
        self.done: list[dict[str, Any]] = []
        self.last: dict[str, Any] | None = None  # the last matrix closed, which a SUM line may follow
        self.cut: str | None = None  # where a paste cut mid-row ends, said in the result's warning
        self.notes: list[str] = []  # figures not read (a localized "1,234"), said in the warning too
        self.failure: tuple[str | None, list[str]] | None = None  # (the test case, its lines) where a run stopped

    def close(self, name: str | None = None, total: float | None = None) -> None:
        pending, self.pending = self.pending, None
        if pending and pending["rows"]:
            if pending["elided"]:
                pending["rows"] += [[None] * pending["columns"]] * (pending["expected"] - len(pending["rows"]))
            self.last = describe(name or pending["name"], pending["description"], pending["rows"], total)
            self.done.append(self.last)
        elif self.last is not None and total is not None and (name is None or self.last["name"] in (None, name)):
            # The SUM line after a matrix already closed by its blank line.
            self.last["sum"] = total
            self.last["name"] = self.last["name"] or name

    def start(self, description: str | None, columns: int | None) -> None:
        self.close()
        self.pending = {"name": self.running, "description": description, "columns": columns, "rows": [],
                        "elided": False, "expected": 0,
                        # A CPU(row) matrix has one row; the others one per GPU, as many as columns.
                        "one_row": "cpu(row)" in (description or "").lower()}
        self.running = None
        self.last = None

    def read(self, line: str, where: str, final: bool = False) -> None:
        """One line of a matrix; ``final``: the paste's last line, where a cut may have shortened the row or
        its last figure."""
        pending = self.pending
        if pending is not None and is_elision(line):
            pending["elided"] = True
            return
        if pending is None or pending["columns"] is None:
            if _COLUMNS_RE.match(line):
                if pending is None:
                    self.start(None, None)
                    pending = self.pending
                if pending is None:  # narrows the type; an assert would vanish under python -O
                    raise AssertionError("unreachable: pending is not None")
                pending["columns"] = len(line.split())
                pending["expected"] = 1 if pending["one_row"] else len(line.split())
            return
        tokens = line.split()
        if not tokens:
            return
        if final and tokens[0].isdigit() and int(tokens[0]) == len(pending["rows"]) \
                and 1 <= len(tokens) <= pending["columns"] + 1:
            self._read_cut_row(tokens, pending, where)
            return
        if not tokens[0].isdigit() or len(tokens) != pending["columns"] + 1:
            raise P2PToolParseError(f"{where}: expected a row index and {pending['columns']} values; found "
                                    f"{line.strip()!r}. The output is cut or garbled")
        index = int(tokens[0])
        if index != len(pending["rows"]):
            if not (pending["elided"] and index > len(pending["rows"])):
                raise P2PToolParseError(f"{where}: expected row {len(pending['rows'])} of the matrix; found row "
                                        f"{index}. Mark rows cut out of a paste with [...]")
            pending["rows"] += [[None] * pending["columns"]] * (index - len(pending["rows"]))
        pending["rows"].append([number(t, where, self.notes) for t in tokens[1:]])
        # A matrix has as many rows as columns, except the CPU(row) ones; a cut paste may end early.
        pending["expected"] = max(pending["expected"], len(pending["rows"]))

    def _read_cut_row(self, tokens: list[str], pending: dict[str, Any], where: str) -> None:
        """The paste's last row, maybe cut: its figures up to the last, which is kept only where it has the
        decimals of the row's others (``%.2f``: ``16.`` or ``26.3`` is a cut figure, never read as 16 or 26.3);
        cells never printed are None."""
        cells = [number(t, where, self.notes) if _NUMBER_TOKEN_RE.match(t) or t == "N/A" else None
                 for t in tokens[1:]]
        decimals = {_decimals(t) for t in tokens[1:-1] if t != "N/A"} or {2}  # alone: the tool's %.2f
        printed = len(cells)
        if len(tokens) > 1 and tokens[-1] != "N/A" and decimals != {_decimals(tokens[-1])}:
            cells[-1] = None
            printed -= 1
        pending["rows"].append(cells + [None] * (pending["columns"] - len(cells)))
        pending["expected"] = max(pending["expected"], len(pending["rows"]))
        if printed < pending["columns"]:
            self.cut = (f"the paste is cut in {pending['name'] or pending['description'] or 'its last matrix'}: "
                        f"row {tokens[0]} holds {printed} of {pending['columns']} values, the rest are not read")


def _decimals(token: str) -> int | None:
    separator = token.replace(",", ".").rsplit(".", 1)
    return len(separator[1]) if len(separator) == 2 else 0 if token.isdigit() else None


def parse_nvbandwidth_text(text: str) -> dict[str, Any]:
    """nvbandwidth's plain output, whole or a piece of it: per test case a description line, a column
    header and rows. The test's name comes from its ``Running NAME.`` line or, when that was cut from a
    pasted log, from the ``SUM NAME value`` line after the matrix."""
    if not isinstance(text, str):
        raise P2PToolParseError("nvbandwidth: expected the text nvbandwidth printed")
    reader = _Reader()
    lines = p2p_lines(text)
    final = max((index for index, line in enumerate(lines, start=1) if line.strip()), default=0)
    for number_, line in enumerate(lines, start=1):
        where = f"nvbandwidth line {number_}"
        stripped = line.strip()
        match = _VERSION_RE.match(stripped)
        if match:
            reader.version = match.group(1)
            continue
        match = _DRIVER_RE.match(stripped)
        if match:
            reader.driver = match.group(1)
            continue
        match = _DEVICE_RE.match(stripped)
        if match:
            reader.devices.append({"index": int(match.group(1)), "name": match.group(2).strip(),
                                   "pci_bus_id": f"{int(match.group(3), 16):04x}:{match.group(4).lower()}:"
                                                 f"{match.group(5).lower()}"})
            continue
        match = _DEVICE_NAME_RE.match(stripped)
        if match and reader.pending is None:
            reader.devices.append({"index": int(match.group(1)), "name": match.group(2), "pci_bus_id": None})
            continue
        if _FAILURE_RE.match(stripped):
            reader.failure = reader.failure or (reader.running, [])
            reader.failure[1].append(stripped)
            continue
        match = _RUNNING_RE.match(stripped)
        if match:
            reader.close()
            reader.running = match.group(1)
            continue
        match = _SUM_RE.match(stripped)
        if match:
            try:
                total = number(match.group(2), where, reader.notes)  # "715,53" from a localized system too
            except P2PToolParseError:
                total = None
            reader.close(match.group(1), total)
            reader.running = None
            continue
        if _is_description(stripped) or _BISECT_RE.match(stripped):
            reader.start(stripped, None)
            continue
        if not stripped and reader.pending is not None and reader.pending["rows"]:
            reader.close()
            continue
        reader.read(line, where, final=number_ == final)
    reader.close()
    if not reader.done and reader.failure is not None:
        case, said = reader.failure
        raise P2PToolParseError(f"nvbandwidth stopped{' in ' + case if case else ''} before printing any matrix: "
                                f"{'; '.join(said)[:400]}. The run failed; fix what it reports (or try a smaller "
                                "--bufferSize) and pass the output of a run that completes")
    if not reader.done:
        raise P2PToolParseError("nvbandwidth: expected at least one test case's matrix (its description, such as "
                                "'memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)', and rows); found none. Pass "
                                "the complete output")
    return {"tool": "nvbandwidth", "version": reader.version, "driver_version": reader.driver,
            "cuda_runtime_version": None, "devices": reader.devices,
            "testcases": [{"name": m["name"] or "unnamed", "status": "Passed", "error": None} for m in reader.done],
            "matrices": reader.done, "error": None,
            "warning": "; ".join(([reader.cut] if reader.cut else []) + reader.notes) or None}
