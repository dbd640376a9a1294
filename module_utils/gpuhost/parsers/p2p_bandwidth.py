"""Parsers for the P2P tools' outputs: cuda-samples p2pBandwidthLatencyTest and nvbandwidth.

Pure functions from text to plain data; the only exception they raise is ``P2PToolParseError``,
which says what was expected and where. The formats follow the programs' own writers
(cuda-samples ``p2pBandwidthLatencyTest.cu``: ``printf`` of each matrix; nvbandwidth
``output.cpp`` for its text and ``json_output.cpp`` for ``-j``) and real outputs
(tests/fixtures/p2p/SOURCES.md).

Every matrix comes back in one shape, whatever the tool::

    {"name": <the tool's title>, "kind": "latency" | "bandwidth", "unit": "us" | "GB/s",
     "path": "p2p_enabled" | "p2p_disabled" | "peer" | "host" | None, "bidirectional": bool,
     "measured_by": "gpu" | "cpu", "size_bytes": None, "values": [[float | None, ...], ...]}

Rows are the source GPU and columns the destination, as both tools print them; ``None`` is a
cell the tool left out (``N/A``). nvbandwidth's latencies (ns) are converted to us.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ansible.module_utils.gpuhost.parsers._common import ParseError


class P2PToolParseError(ParseError):
    """Output of a P2P tool that cannot be read, with what was expected."""


_DEVICE_RE = re.compile(r"^Device:\s*(\d+),\s*(.*?),\s*pciBusID:\s*([0-9a-fA-F]+),\s*pciDeviceID:\s*([0-9a-fA-F]+),"
                        r"\s*pciDomainID:\s*([0-9a-fA-F]+)")
_ACCESS_RE = re.compile(r"^Device=(\d+) (CAN|CANNOT) Access Peer Device=(\d+)")
_TITLE_RE = re.compile(r"^(.*Matrix)(?: \((GB/s|us)\))?\s*$")
_HEADER_RE = re.compile(r"^\s*(D\\D|GPU|CPU)((?:\s+\d+)+)\s*$")
_ROW_RE = re.compile(r"^\s*(\d+)((?:\s+\S+)+)\s*$")
_NUMBER_RE = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")


def _number(token: str, where: str) -> float | None:
    if token in ("N/A", "n/a", "-"):
        return None
    if not _NUMBER_RE.match(token):
        raise P2PToolParseError(f"{where}: expected a number or N/A; found {token!r}. The output is garbled or cut: "
                                "pass the tool's output as it printed it")
    return float(token)


def _describe(name: str, measured_by: str = "gpu") -> dict[str, Any]:
    lower = name.lower()
    kind = "latency" if "latency" in lower else "bandwidth"
    if "p2p=enabled" in lower:
        path = "p2p_enabled"
    elif "p2p=disabled" in lower:
        path = "p2p_disabled"
    else:
        path = None
    return {"name": name, "kind": kind, "unit": "us" if kind == "latency" else "GB/s", "path": path,
            "bidirectional": lower.startswith("bidirectional"), "measured_by": measured_by, "size_bytes": None}


def parse_p2p_bandwidth_latency_test(text: str) -> dict[str, Any]:
    """cuda-samples p2pBandwidthLatencyTest output: devices, peer access, connectivity and every matrix."""
    if not isinstance(text, str):
        raise P2PToolParseError("p2pBandwidthLatencyTest: expected the text the sample printed")
    devices: list[dict[str, Any]] = []
    access: dict[tuple[int, int], bool] = {}
    matrices: list[dict[str, Any]] = []
    connectivity: list[list[float | None]] | None = None
    current: dict[str, Any] | None = None
    title: str | None = None
    expected_columns: list[int] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        where = f"p2pBandwidthLatencyTest line {number}"
        match = _DEVICE_RE.match(line)
        if match:
            devices.append({"index": int(match.group(1)), "name": match.group(2).strip(),
                            "pci_bus_id": f"{int(match.group(5), 16):04x}:{int(match.group(3), 16):02x}:"
                                          f"{int(match.group(4), 16):02x}"})
            continue
        match = _ACCESS_RE.match(line)
        if match:
            access[(int(match.group(1)), int(match.group(3)))] = match.group(2) == "CAN"
            continue
        match = _TITLE_RE.match(line.strip())
        if match and not line.startswith(" "):
            title = match.group(1) + (f" ({match.group(2)})" if match.group(2) else "")
            current = None
            continue
        match = _HEADER_RE.match(line)
        if match and title is not None:
            expected_columns = [int(c) for c in match.group(2).split()]
            measured_by = "cpu" if match.group(1) == "CPU" else "gpu"
            if title == "P2P Connectivity Matrix":
                current = {"name": title, "values": []}
                connectivity = current["values"]
            else:
                current = {**_describe(title, measured_by), "values": []}
                matrices.append(current)
            continue
        match = _ROW_RE.match(line)
        if match and current is not None:
            tokens = match.group(2).split()
            if len(tokens) != len(expected_columns):
                raise P2PToolParseError(f"{where}: expected {len(expected_columns)} values in the row of "
                                        f"{current['name']!r}; found {len(tokens)}. The output is cut or garbled")
            if int(match.group(1)) != len(current["values"]):
                raise P2PToolParseError(f"{where}: expected row {len(current['values'])} of {current['name']!r}; "
                                        f"found row {match.group(1)}")
            current["values"].append([_number(t, where) for t in tokens])
            continue
        if line.strip() == "":
            continue
        current = current if line.startswith(" ") else None
    if not matrices and connectivity is None:
        raise P2PToolParseError("p2pBandwidthLatencyTest: expected its matrices ('Unidirectional P2P=Disabled "
                                "Bandwidth Matrix (GB/s)' and the others); found none. Pass the complete output")
    count = len(devices) or (len(connectivity) if connectivity else len(matrices[0]["values"]))
    for matrix in matrices:
        if len(matrix["values"]) != count:
            raise P2PToolParseError(f"p2pBandwidthLatencyTest: {matrix['name']!r} has {len(matrix['values'])} rows "
                                    f"for {count} GPUs. The output is cut: pass all of it")
    access_matrix: list[list[bool | None]] = [
        [None if i == j else access.get((i, j)) for j in range(count)] for i in range(count)]
    return {"tool": "p2pBandwidthLatencyTest", "devices": devices, "access": access_matrix,
            "connectivity": [[bool(v) if v is not None else None for v in row] for row in connectivity]
            if connectivity else None, "matrices": matrices}


# ---------------------------------------------------------------------------
# nvbandwidth


def _nvbandwidth_matrix(name: str, description: str, rows: list[list[float | None]]) -> dict[str, Any]:
    lower = f"{name} {description}".lower()
    latency = "latency" in lower
    nanoseconds = "(ns)" in description or "ns)" in description
    if latency and nanoseconds:
        rows = [[v / 1000.0 if v is not None else None for v in row] for row in rows]
    if "device_to_device" in name or ("gpu(row)" in description.lower() and "gpu(column)" in description.lower()):
        path = "peer"
    elif "host" in name or "cpu" in description.lower():
        path = "host"
    else:
        path = None
    return {"name": name, "description": description, "kind": "latency" if latency else "bandwidth",
            "unit": "us" if latency else "GB/s", "path": path, "bidirectional": "bidirectional" in name,
            "measured_by": "gpu", "size_bytes": None, "values": rows}


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
        rows = [[_number(str(v), f"nvbandwidth JSON {name}") for v in row] for row in raw]
        if any(len(row) != len(rows[0]) for row in rows):
            raise P2PToolParseError(f"nvbandwidth JSON: {name}.bandwidth_matrix has rows of different lengths")
        matrices.append(_nvbandwidth_matrix(name, str(case.get("bandwidth_description") or ""), rows))
    if not matrices and root.get("error"):
        raise P2PToolParseError(f"nvbandwidth JSON: no results; nvbandwidth said: {root['error']}")
    return {"tool": "nvbandwidth", "version": root.get("version"), "driver_version": root.get("Driver Version"),
            "cuda_runtime_version": root.get("CUDA Runtime Version"), "testcases": statuses,
            "matrices": matrices, "error": root.get("error"), "warning": root.get("warning")}


_NVB_RUNNING_RE = re.compile(r"^Running (\S+)\.\s*$")
_NVB_DESCRIPTION_RE = re.compile(r"^(?:memcpy|memory latency|memory).*\((?:GB/s|ns)\)\s*$")
_NVB_COLUMNS_RE = re.compile(r"^\s*(\d+(?:\s+\d+)*)\s*$")
_NVB_SUM_RE = re.compile(r"^SUM (\S+) (\S+)")
_NVB_VERSION_RE = re.compile(r"^nvbandwidth Version: (\S+)")
_NVB_DRIVER_RE = re.compile(r"^Driver Version: (\S+)")


def parse_nvbandwidth_text(text: str) -> dict[str, Any]:
    """nvbandwidth's plain output: per test case a description line, a column header and rows.

    The test's name comes from its ``Running NAME.`` line or, when that was cut from a pasted
    log, from the ``SUM NAME value`` line after the matrix.
    """
    if not isinstance(text, str):
        raise P2PToolParseError("nvbandwidth: expected the text nvbandwidth printed")
    version = driver = None
    running: str | None = None
    pending: dict[str, Any] | None = None  # {"name", "description", "columns", "rows"}
    matrices: list[dict[str, Any]] = []

    def close(name: str | None = None) -> None:
        nonlocal pending
        if pending and pending["rows"]:
            matrices.append(_nvbandwidth_matrix(name or pending["name"] or "unnamed", pending["description"],
                                                pending["rows"]))
        pending = None

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        where = f"nvbandwidth line {number}"
        match = _NVB_VERSION_RE.match(line)
        if match:
            version = match.group(1)
            continue
        match = _NVB_DRIVER_RE.match(line)
        if match:
            driver = match.group(1)
            continue
        match = _NVB_RUNNING_RE.match(line)
        if match:
            close()
            running = match.group(1)
            continue
        match = _NVB_SUM_RE.match(line)
        if match:
            close(match.group(1))
            running = None
            continue
        if _NVB_DESCRIPTION_RE.match(line.strip()):
            close()
            pending = {"name": running, "description": line.strip(), "columns": None, "rows": []}
            continue
        if pending is None:
            continue
        if pending["columns"] is None:
            if _NVB_COLUMNS_RE.match(line):
                pending["columns"] = len(line.split())
            continue
        tokens = line.split()
        if not tokens:
            continue
        if not tokens[0].isdigit() or len(tokens) != pending["columns"] + 1:
            raise P2PToolParseError(f"{where}: expected a row index and {pending['columns']} values; found "
                                    f"{line.strip()!r}. The output is cut or garbled")
        pending["rows"].append([_number(t, where) for t in tokens[1:]])
    close()
    if not matrices:
        raise P2PToolParseError("nvbandwidth: expected at least one test case's matrix (its description, such as "
                                "'memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)', and rows); found none. Pass "
                                "the complete output")
    return {"tool": "nvbandwidth", "version": version, "driver_version": driver, "cuda_runtime_version": None,
            "testcases": [{"name": m["name"], "status": "Passed", "error": None} for m in matrices],
            "matrices": matrices, "error": None, "warning": None}


def parse_p2p_log(text: str) -> dict[str, Any]:
    """Any of the three formats, told apart by content."""
    if not isinstance(text, str):
        raise P2PToolParseError("expected text")
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return parse_nvbandwidth_json(text)
    if "P2P (Peer-to-Peer) GPU Bandwidth Latency Test" in text or "P2P Connectivity Matrix" in text:
        return parse_p2p_bandwidth_latency_test(text)
    if "nvbandwidth" in text or re.search(r"(?m)^Running \S+\.\s*$", text):
        return parse_nvbandwidth_text(text)
    raise P2PToolParseError("expected the output of p2pBandwidthLatencyTest, nvbandwidth, or nvbandwidth -j; "
                            "found none of their markers ('[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]', "
                            "'nvbandwidth Version', a JSON document)")


def off_diagonal(values: list[list[float | None]]) -> list[tuple[int, int, float]]:
    """(row, column, value) for every measured cell between two different GPUs."""
    cells = []
    for i, row in enumerate(values):
        for j, value in enumerate(row):
            if i != j and value is not None and math.isfinite(value):
                cells.append((i, j, value))
    return cells
