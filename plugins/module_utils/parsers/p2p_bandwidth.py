"""Parsers for the P2P tools' outputs: cuda-samples p2pBandwidthLatencyTest, and the choice between it,
nvbandwidth's text and nvbandwidth's ``-j`` JSON (parsed in nvbandwidth.py).

Pure functions from text to plain data; the only exception they raise is ``P2PToolParseError``,
which says what was expected and where. The format follows the sample's own writer (cuda-samples
``p2pBandwidthLatencyTest.cu``: one ``printf`` per matrix title, ``D\\D`` headers for bandwidth and
connectivity, ``GPU`` and ``CPU`` headers for latency, ``%6.02f`` cells) and real outputs
(tests/fixtures/p2p/SOURCES.md).

Pasted pieces are read too: one matrix cut out of a longer output without the banner, ``[...]`` where
rows were cut (those rows are None), Markdown quotes, ``cat -n`` numbers, CRLF, e-mail. What the piece
does not say is None: a matrix without its title line has no name, kind or unit.

A paste cut short is used for what it holds. Cut after the peer-access lines or the connectivity matrix, it
gives the devices and the access per pair with no matrix; cut inside its last matrix (its title and header
with fewer rows than GPUs, or a last row cut mid-line), that matrix keeps the rows printed, the others None,
and ``cut`` says which (``{"matrix": name, "rows": printed, "of": GPUs}``; None for a whole output). A row
missing before the last matrix is no cut but damage, and an error as before.

``access`` is what ``Device=0 CAN/CANNOT Access Peer Device=1`` said per pair; a pair those lines do not
cover takes the connectivity matrix's cell, which the sample prints from the same cudaDeviceCanAccessPeer
call (p2pBandwidthLatencyTest.cu, the loop under "P2P Connectivity Matrix"); None where neither tells.

Every matrix comes back in p2p_common's one shape, whatever the tool. Rows are the source GPU and
columns the destination, as both tools print them; ``None`` is a cell the tool left out (``N/A``).
Output schema of ``parse_p2p_bandwidth_latency_test``: ``{"tool": "p2pBandwidthLatencyTest", "devices":
[{index, name, pci_bus_id}], "access": [[bool | None]], "connectivity": [[bool | None]] | None,
"matrices": [...], "cut": {matrix, rows, of} | None}``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvbandwidth import (
    parse_nvbandwidth_json,
    parse_nvbandwidth_text,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_common import (
    P2PToolParseError,
    is_elision,
    latency_us,
    matrix,
    number,
    p2p_lines,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.simple_p2p import MARK_RE as _SIMPLE_P2P_MARK_RE
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.simple_p2p import parse_simple_p2p

__all__ = ["P2PToolParseError", "latency_us", "off_diagonal", "parse_nvbandwidth_json", "parse_nvbandwidth_text",
           "parse_p2p_bandwidth_latency_test", "parse_p2p_log"]

_DEVICE_RE = re.compile(r"^Device:\s*(\d+),\s*(.*?),\s*pciBusID:\s*([0-9a-fA-F]+),\s*pciDeviceID:\s*([0-9a-fA-F]+),"
                        r"\s*pciDomainID:\s*([0-9a-fA-F]+)")
_ACCESS_RE = re.compile(r"^Device=(\d+) (CAN|CANNOT) Access Peer Device=(\d+)")
_TITLE_RE = re.compile(r"^(.*Matrix)(?: \((GB/s|us)\))?\s*$")
_HEADER_RE = re.compile(r"^\s*(D\\D|GPU|CPU)((?:\s+\d+)+)\s*$")
_ROW_RE = re.compile(r"^\s*(\d+)((?:\s+\S+)+)\s*$")
_BANNER = "P2P (Peer-to-Peer) GPU Bandwidth Latency Test"
_CONNECTIVITY = "P2P Connectivity Matrix"


def _describe(title: str | None, measured_by: str = "gpu") -> dict[str, Any]:
    """What a matrix's title says; None for each thing a matrix pasted without its title cannot tell."""
    if title is None:
        return matrix(None, None, None, None, [], measured_by=measured_by)
    lower = title.lower()
    kind = "latency" if "latency" in lower else "bandwidth"
    unit = "us" if "(us)" in lower else "GB/s" if "(gb/s)" in lower else None
    path = "p2p_enabled" if "p2p=enabled" in lower else "p2p_disabled" if "p2p=disabled" in lower else None
    return matrix(title, kind, unit, path, [], bidirectional=lower.startswith("bidirectional"),
                  measured_by=measured_by)


class _Reader:
    """p2pBandwidthLatencyTest's lines, one at a time."""

    def __init__(self) -> None:
        self.devices: list[dict[str, Any]] = []
        self.access: dict[tuple[int, int], bool] = {}
        self.matrices: list[dict[str, Any]] = []
        self.connectivity: list[list[float | None]] | None = None
        self.current: dict[str, Any] | None = None
        self.title: str | None = None
        self.columns: list[int] = []
        self.elided = False
        self.short_row: str | None = None  # a row with too few cells: the cut, unless more lines follow

    def header(self, kind: str, columns: str) -> None:
        self.finish()
        self.columns = [int(c) for c in columns.split()]
        if self.title == _CONNECTIVITY:
            self.current = {"name": self.title, "values": []}
            self.connectivity = self.current["values"]
        else:
            self.current = _describe(self.title, "cpu" if kind == "CPU" else "gpu")
            self.matrices.append(self.current)

    def row(self, index: int, tokens: list[str], where: str) -> None:
        current = self.current
        if current is None:  # narrows the type; an assert would vanish under python -O
            raise AssertionError("unreachable: current is not None")
        if len(tokens) < len(self.columns) and self.short_row is None:
            self.short_row = (f"{where}: expected {len(self.columns)} values in the row of {current['name']!r}; found "
                              f"{len(tokens)}. The output is cut or garbled")
            return
        if len(tokens) != len(self.columns):
            raise P2PToolParseError(f"{where}: expected {len(self.columns)} values in the row of "
                                    f"{current['name']!r}; found {len(tokens)}. The output is cut or garbled")
        rows = current["values"]
        if index != len(rows):
            if not (self.elided and index > len(rows)):
                raise P2PToolParseError(f"{where}: expected row {len(rows)} of {current['name']!r}; found row {index}. "
                                        "Mark rows cut out of a paste with [...]")
            rows += [[None] * len(self.columns) for _unused in range(index - len(rows))]
        rows.append([number(t, where) for t in tokens])

    def finish(self) -> None:
        """Rows cut after the last one printed, where the paste says so with [...], are None."""
        if self.current is not None and self.elided:
            rows = self.current["values"]
            rows += [[None] * len(self.columns) for _unused in range(len(self.columns) - len(rows))]
        self.elided = False


def parse_p2p_bandwidth_latency_test(text: str) -> dict[str, Any]:
    """cuda-samples p2pBandwidthLatencyTest output, whole or a piece of it: devices, peer access,
    connectivity and every matrix."""
    if not isinstance(text, str):
        raise P2PToolParseError("p2pBandwidthLatencyTest: expected the text the sample printed")
    reader = _Reader()
    for number_, line in enumerate(p2p_lines(text), start=1):
        where = f"p2pBandwidthLatencyTest line {number_}"
        if reader.short_row and line.strip():  # the short row was not the paste's last: damage, not a cut
            raise P2PToolParseError(reader.short_row)
        match = _DEVICE_RE.match(line.strip())
        if match:
            reader.devices.append({"index": int(match.group(1)), "name": match.group(2).strip(),
                                   "pci_bus_id": f"{int(match.group(5), 16):04x}:{int(match.group(3), 16):02x}:"
                                                 f"{int(match.group(4), 16):02x}"})
            continue
        match = _ACCESS_RE.match(line.strip())
        if match:
            reader.access[(int(match.group(1)), int(match.group(3)))] = match.group(2) == "CAN"
            continue
        match = _TITLE_RE.match(line.strip())
        if match and not line.startswith(" "):
            reader.finish()
            reader.title = match.group(1) + (f" ({match.group(2)})" if match.group(2) else "")
            reader.current = None
            continue
        match = _HEADER_RE.match(line)
        if match:
            reader.header(match.group(1), match.group(2))
            continue
        if reader.current is not None and is_elision(line):
            reader.elided = True
            continue
        match = _ROW_RE.match(line)
        if match and reader.current is not None:
            reader.row(int(match.group(1)), match.group(2).split(), where)
            continue
        if line.strip() == "":
            continue
        if not line.startswith(" "):
            reader.finish()
            reader.current = None
    reader.finish()
    return _result(reader)


def _result(reader: _Reader) -> dict[str, Any]:
    matrices, connectivity, devices = reader.matrices, reader.connectivity, reader.devices
    if not matrices and not connectivity and not reader.access:
        # A connectivity header cut off before its rows holds nothing either.
        raise P2PToolParseError("p2pBandwidthLatencyTest: expected its peer-access lines ('Device=0 CAN Access Peer "
                                "Device=1') or its matrices ('Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)' and "
                                "the others); found none. Pass the complete output")
    count = (len(devices) or (len(connectivity) if connectivity else 0)
             or max((len(m["values"]) for m in matrices), default=0)
             or max((max(pair) + 1 for pair in reader.access), default=0))
    cut = None
    for position, found in enumerate(matrices):
        rows = len(found["values"])
        # Every matrix of the sample is square; a piece without devices says the GPU count by its columns.
        expected = count if devices or connectivity is not None else len(found["values"][0]) if rows else 0
        last = position == len(matrices) - 1
        if rows < expected and last and (rows or devices or connectivity is not None):
            cut = {"matrix": found["name"], "rows": rows, "of": expected}
            found["values"] += [[None] * expected for _unused in range(expected - rows)]
        elif rows != expected:
            raise P2PToolParseError(f"p2pBandwidthLatencyTest: {found['name']!r} has {rows} rows for {expected} GPUs. "
                                    "The output is cut: pass all of it, or mark the rows cut out with [...]")
    if cut and cut["rows"] == 0:  # only its title and header: nothing measured to keep
        matrices = matrices[:-1]
    access: list[list[bool | None]] = [
        [None if i == j else reader.access.get((i, j), _connected(connectivity, i, j)) for j in range(count)]
        for i in range(count)]
    return {"tool": "p2pBandwidthLatencyTest", "devices": devices, "access": access,
            "connectivity": [[bool(v) if v is not None else None for v in row] for row in connectivity]
            if connectivity else None, "matrices": matrices, "cut": cut}


def _connected(connectivity: list[list[float | None]] | None, i: int, j: int) -> bool | None:
    if not connectivity or i >= len(connectivity) or j >= len(connectivity[i]) or connectivity[i][j] is None:
        return None
    return bool(connectivity[i][j])


# A line's leading blanks are [^\S\n]*, never \s*: under (?m) a \s* from each line start runs over every blank line
# below it, and 25,000 blank lines took half a minute (docs/development.md, "Regexes over input").
# Lines only p2pBandwidthLatencyTest prints: its banner, its matrix titles, its D\D / GPU / CPU headers.
_P2P_MARK_RE = re.compile(r"(?m)^[^\S\n]*(?:\[?P2P \(Peer-to-Peer\)|P2P Connectivity Matrix|"
                          r"(?:Uni|Bi)directional P2P=|"
                          r"P2P=(?:Enabled|Disabled) Latency|(?:D\\D|GPU|CPU)(?:\s+\d+)+\s*$|"
                          r"Device=\d{1,4} (?:CAN|CANNOT) Access Peer Device=\d{1,4}\s*$)")
# Lines only nvbandwidth prints.
_NVB_MARK_RE = re.compile(r"(?m)nvbandwidth|^[^\S\n]*Running \S+\.\s*$|^[^\S\n]*(?:SUM|&&&& PERF) \S+ [\d.]+|"
                          r"(?:GPU|CPU)\(row\)|\(column\)")
_BARE_COLUMNS_RE = re.compile(r"(?m)^[^\S\n]*\d+(?:\s+\d+)+\s*$")


def parse_p2p_log(text: str) -> dict[str, Any]:
    """Any of the formats (and simpleP2P's peer-access lines), told apart by content; a piece of one (a matrix
    without the banner) too."""
    if not isinstance(text, str):
        raise P2PToolParseError("expected text")
    if text.lstrip().startswith("{"):
        return parse_nvbandwidth_json(text)
    clean = "\n".join(p2p_lines(text))
    if any(_SIMPLE_P2P_MARK_RE.match(line) for line in clean.split("\n")):
        return parse_simple_p2p(text)
    if _BANNER in clean or _P2P_MARK_RE.search(clean):
        return parse_p2p_bandwidth_latency_test(text)
    if _NVB_MARK_RE.search(clean) or _BARE_COLUMNS_RE.search(clean):
        return parse_nvbandwidth_text(text)
    raise P2PToolParseError("expected the output of p2pBandwidthLatencyTest, nvbandwidth, or nvbandwidth -j (or a "
                            "matrix cut out of one); found none of their markers ('[P2P (Peer-to-Peer) GPU Bandwidth "
                            "Latency Test]', a matrix title or a 'D\\D' header, 'nvbandwidth Version', a description "
                            "such as 'memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)', a JSON document)")


def off_diagonal(values: list[list[float | None]]) -> list[tuple[int, int, float]]:
    """(row, column, value) for every measured cell between two different GPUs."""
    cells = []
    for i, row in enumerate(values):
        for j, value in enumerate(row):
            if i != j and value is not None and math.isfinite(value):
                cells.append((i, j, value))
    return cells
