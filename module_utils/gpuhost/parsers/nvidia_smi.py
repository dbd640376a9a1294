"""Parsers for what ``nvidia-smi`` prints: topology matrices, P2P matrices, CSV queries, GPU lists, failures.

Pure functions from text to typed data: no Ansible, no subprocess. Each parser raises only
``NvidiaSmiParseError`` (a ``ValueError``) and says what it expected, what it found and what to do.

The formats follow real outputs of several driver generations (see tests/fixtures/nvidia-smi/SOURCES.md):

* ``nvidia-smi topo -m``: a tab-separated matrix. The header starts with an empty cell, then GPU0..GPUn,
  then NIC columns (``NIC0``.. on drivers of the last years, the RDMA device name such as ``mlx5_0`` on
  older ones), then the attribute columns ``CPU Affinity`` [``NUMA Affinity`` [``GPU NUMA ID``]]. When
  ``GPU NUMA ID`` follows ``NUMA Affinity`` the rows carry one extra empty cell between the two values
  (``0-63\\t0\\t\\tN/A``). NIC rows end in empty cells. A terminal gets the header underlined with ANSI
  escapes. Drivers before about 2018 printed ``SOC`` where later ones print ``SYS``.
* ``nvidia-smi topo -p2p r|w|n|a|p``: header `` \\tGPU0\\tGPU1\\t``, rows `` GPU0\\tX\\tOK\\t``, then a legend.
* ``--query-gpu=... --format=csv,noheader,nounits``: one line per GPU, ``", "`` separated.
* ``nvidia-smi -L``: ``GPU 0: NAME (UUID: GPU-...)`` with indented ``MIG ...`` lines under a GPU.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


class NvidiaSmiParseError(ValueError):
    """nvidia-smi output that cannot be read as the expected format."""


# --------------------------------------------------------------------------------------------------
# Text clean-up shared by all parsers

# CSI sequences (colours, underline), OSC sequences (titles, links), and the short escapes that are
# ESC, optional intermediate bytes and one final byte (``ESC ( B`` selects a character set).
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]*[0-~]")
# What is left of a broken escape, and other control characters that no format here uses.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

_EXCERPT_CHARS = 80


def strip_ansi(text: str) -> str:
    """Text without terminal escapes or stray control characters; tabs and newlines stay."""
    text = _ANSI_RE.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL_RE.sub("", text)


def _excerpt(text: str) -> str:
    text = text.strip()
    if len(text) > _EXCERPT_CHARS:
        text = text[:_EXCERPT_CHARS] + "..."
    return repr(text)


def _error(what: str, expected: str, found: str, todo: str) -> NvidiaSmiParseError:
    return NvidiaSmiParseError(f"{what}: expected {expected}; found {_excerpt(found)}. {todo}")


def _lines(text: Any, what: str) -> list[str]:
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise NvidiaSmiParseError(f"{what}: expected the command's output as text; found {type(text).__name__}. "
                                  "Pass stdout as a string.")
    return strip_ansi(text).split("\n")


def _is_unavailable(value: str) -> bool:
    # nvidia-smi writes "[N/A]", "[Not Supported]", "[Unknown Error]", "[GPU is lost]" in CSV,
    # and a bare "N/A" in the topology matrix.
    value = value.strip()
    return value == "N/A" or (value.startswith("[") and value.endswith("]"))


# Longer digit strings are not counts nvidia-smi prints; int() would also refuse very long ones.
_MAX_DIGITS = 18


def _small_int(value: str | None) -> int | None:
    """The integer a cell holds, or None when it holds something else (N/A, a range, garbage)."""
    if value is None:
        return None
    value = value.strip()
    if not re.fullmatch(rf"\d{{1,{_MAX_DIGITS}}}", value):
        return None
    return int(value)


# --------------------------------------------------------------------------------------------------
# Legends

_LEGEND_LINE_RE = re.compile(r"^\s*(\S+)\s*=\s*(\S.*?)\s*$")
_NIC_LEGEND_LINE_RE = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


def _parse_legends(lines: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """The ``Legend:`` (label -> meaning) and ``NIC Legend:`` (NICn -> device) blocks, where present."""
    legend: dict[str, str] = {}
    nic_legend: dict[str, str] = {}
    section = ""
    for line in lines:
        stripped = line.strip()
        if stripped == "Legend:":
            section = "legend"
            continue
        if stripped == "NIC Legend:":
            section = "nic"
            continue
        if section == "legend":
            match = _LEGEND_LINE_RE.match(line)
            if match:
                legend[match.group(1)] = match.group(2)
        elif section == "nic":
            match = _NIC_LEGEND_LINE_RE.match(line)
            if match:
                nic_legend[match.group(1)] = match.group(2)
    return legend, nic_legend


def _is_matrix_end(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("Legend") or stripped.startswith("NIC Legend")


def _find_header(lines: Sequence[str], what: str, command: str) -> int:
    for number, line in enumerate(lines):
        tokens = line.split()
        if tokens and tokens[0] == "GPU0":
            return number
    raise _error(what, "a header row whose first column is GPU0", "\n".join(lines[:3]),
                 f"Check that `{command}` ran and saw GPUs; see nvidia_smi_failure() for its error message.")


# --------------------------------------------------------------------------------------------------
# nvidia-smi topo -m

KNOWN_LINK_LABELS = ("X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC")
"""Link labels printed by ``topo -m``, besides ``NV<n>``. Others are kept as printed."""

# Attribute columns printed after the device columns, in the order drivers print them.
TOPO_ATTRIBUTE_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")

_NVLINK_RE = re.compile(r"^NV(\d{1,4})$")
_GPU_NAME_RE = re.compile(r"^GPU(\d+)$")
_DEVICE_NAME_RE = re.compile(r"^[A-Za-z][\w.:-]*$")

# NVML topology levels (nvmlDeviceGetTopologyCommonAncestor) that each PCIe label stands for.
_NVML_LEVEL = {
    "X": "INTERNAL",
    "PIX": "SINGLE",
    "PXB": "MULTIPLE",
    "PHB": "HOSTBRIDGE",
    "NODE": "NODE",
    "SYS": "SYSTEM",
}


def nvlink_count(label: str) -> int | None:
    """``NV18`` -> 18; None for labels that are not NVLink bonds."""
    match = _NVLINK_RE.match(label.strip())
    return int(match.group(1)) if match else None


def nvml_topology_level(label: str) -> str | None:
    """The NVML topology level a PCIe link label stands for (``PHB`` -> ``HOSTBRIDGE``); None for NVLink
    and unknown labels. ``SOC`` is the pre-2018 name of ``SYS``."""
    return _NVML_LEVEL.get("SYS" if label.strip() == "SOC" else label.strip())


@dataclass(frozen=True)
class TopoMatrix:
    """``nvidia-smi topo -m``: links between GPUs and NICs, and where each GPU sits.

    ``links[i][j]`` is the label between ``gpus[i]`` and ``gpus[j]`` as printed (``X`` on the diagonal);
    ``nic_links[i][k]`` the label between ``gpus[i]`` and ``nics[k]``. Per GPU, ``cpu_affinity`` is the
    CPU list as printed (``"0-31,64-95"``, ``"N/A"``) and ``numa_affinity`` / ``gpu_numa_id`` are integers,
    None where the driver printed N/A, left the cell empty or has no such column. ``attributes`` keeps
    every attribute cell as printed, by column name.
    """

    gpus: list[str]
    links: list[list[str]]
    nics: list[str] = field(default_factory=list)
    nic_links: list[list[str]] = field(default_factory=list)
    nic_to_nic: list[list[str]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    cpu_affinity: list[str | None] = field(default_factory=list)
    numa_affinity: list[int | None] = field(default_factory=list)
    gpu_numa_id: list[int | None] = field(default_factory=list)
    attributes: list[dict[str, str]] = field(default_factory=list)
    legend: dict[str, str] = field(default_factory=dict)
    nic_legend: dict[str, str] = field(default_factory=dict)

    @property
    def matrix(self) -> list[list[str]]:
        """The GPU x GPU labels; the same as ``links``."""
        return self.links

    def link(self, first: int | str, second: int | str) -> str:
        """The label between two GPUs, by index (0) or name (``GPU0``)."""
        return self.links[self._gpu_index(first)][self._gpu_index(second)]

    def nic_device(self, nic: str) -> str:
        """The RDMA device of a NIC column: ``NIC0`` -> ``mlx5_0`` by the NIC legend; older drivers name
        the column after the device itself."""
        return self.nic_legend.get(nic, nic)

    def normalized_label(self, label: str) -> str:
        """``SOC`` -> ``SYS`` when this output's legend (or its absence) says SOC means crossing CPU
        sockets, as it did before drivers renamed it; any other label unchanged."""
        if label != "SOC":
            return label
        meaning = self.legend.get("SOC")
        if meaning is None or "socket" in meaning.lower() or "smp" in meaning.lower():
            return "SYS"
        return label

    def unknown_labels(self) -> set[str]:
        """Labels this parser does not know: a newer driver's, to report rather than guess about."""
        cells = [cell for row in self.links for cell in row] + [cell for row in self.nic_links for cell in row]
        return {cell for cell in cells if cell not in KNOWN_LINK_LABELS and nvlink_count(cell) is None}

    def _gpu_index(self, gpu: int | str) -> int:
        if isinstance(gpu, int):
            return gpu
        return self.gpus.index(gpu)


def _split_cells(line: str) -> tuple[list[str], bool]:
    """Cells of a matrix line and whether they were tab-separated (empty cells kept) or only
    whitespace-separated (a copy from a terminal, where empty cells cannot be seen)."""
    stripped = line.strip()
    if "\t" in stripped:
        return [cell.strip() for cell in stripped.split("\t")], True
    return stripped.split(), False


def _split_topo_header(line: str) -> tuple[list[str], list[str]]:
    """Device columns and attribute columns of the ``topo -m`` header."""
    cells, tabbed = _split_cells(line)
    cells = [cell for cell in cells if cell]
    devices: list[str] = []
    attributes: list[str] = []
    if tabbed:
        for cell in cells:
            # Attribute names have spaces, device names never; after the first attribute all are attributes.
            if attributes or " " in cell or not _DEVICE_NAME_RE.match(cell):
                attributes.append(cell)
            else:
                devices.append(cell)
        return devices, attributes
    # Tabs expanded to spaces: re-join the known multi-word attribute names.
    position = 0
    while position < len(cells):
        for name in TOPO_ATTRIBUTE_COLUMNS:
            words = name.split()
            if cells[position:position + len(words)] == words:
                attributes.append(name)
                position += len(words)
                break
        else:
            if attributes:
                attributes.append(cells[position])
            else:
                devices.append(cells[position])
            position += 1
    return devices, attributes


def _check_topo_devices(devices: list[str], header: str) -> tuple[list[str], list[str]]:
    gpus: list[str] = []
    nics: list[str] = []
    for name in devices:
        if _GPU_NAME_RE.match(name) and not nics:
            gpus.append(name)
        elif _DEVICE_NAME_RE.match(name) and not _GPU_NAME_RE.match(name):
            nics.append(name)
        else:
            raise _error("nvidia-smi topo -m header", "GPU columns followed by NIC columns", header,
                         "The header is out of order; capture the output again without editing it.")
    if len(set(devices)) != len(devices):
        raise _error("nvidia-smi topo -m header", "each device named once", header,
                     "Capture the output again; a line seems to be duplicated.")
    return gpus, nics


def _attribute_slots(columns: list[str]) -> list[str | None]:
    """Where each attribute value sits among the cells after the links; None marks the empty cell that
    nvidia-smi prints between NUMA Affinity and GPU NUMA ID."""
    slots: list[str | None] = []
    for position, name in enumerate(columns):
        slots.append(name)
        if name == "NUMA Affinity" and columns[position + 1:position + 2] == ["GPU NUMA ID"]:
            slots.append(None)
    return slots


def _map_attributes(cells: list[str], tabbed: bool, columns: list[str], row: str) -> dict[str, str]:
    """Attribute cells of one row, by column name; cells left empty are absent from the result."""
    while cells and not cells[-1]:
        cells = cells[:-1]
    if not cells:
        return {}
    if tabbed:
        slots = _attribute_slots(columns)
        # Shorter rows lost trailing empty cells; zip stops at the last cell printed.
        pairs = list(zip(cells, slots[:len(cells)], strict=False))
        if len(cells) <= len(slots) and all(not cell for cell, slot in pairs if slot is None):
            return {slot: cell for cell, slot in pairs if slot is not None and cell}
    values = [cell for cell in cells if cell]
    if len(values) == len(columns):
        # Values in column order, whatever the spacing between them.
        return dict(zip(columns, values, strict=True))
    raise _error(f"nvidia-smi topo -m row {row}", f"{len(columns)} values for {', '.join(columns)}",
                 " | ".join(cells),
                 "The row does not line up with the header; capture the command's own output "
                 "(tabs intact) instead of a copy from a terminal.")


def parse_topo_matrix(text: str) -> TopoMatrix:
    """Parse ``nvidia-smi topo -m``. Unknown link labels are kept as printed; a missing header, a
    missing row or a row that does not line up with the header raises ``NvidiaSmiParseError``."""
    lines = _lines(text, "nvidia-smi topo -m")
    header_at = _find_header(lines, "nvidia-smi topo -m", "nvidia-smi topo -m")
    devices, columns = _split_topo_header(lines[header_at])
    gpus, nics = _check_topo_devices(devices, lines[header_at])
    rows: dict[str, tuple[list[str], dict[str, str]]] = {}
    end = header_at + 1
    while end < len(lines) and not _is_matrix_end(lines[end]):
        label, links, attributes = _parse_topo_row(lines[end], devices, columns)
        if label in rows:
            raise _error("nvidia-smi topo -m", f"one row for {label}", lines[end],
                         "Capture the output again; a line seems to be duplicated.")
        rows[label] = (links, attributes)
        end += 1
    missing = [name for name in devices if name not in rows]
    if missing:
        raise _error("nvidia-smi topo -m", f"a row for each of {', '.join(devices)}",
                     "\n".join(lines[header_at:end]),
                     f"Rows for {', '.join(missing)} are missing: the output looks cut short; run the command again.")
    legend, nic_legend = _parse_legends(lines[end:])
    if "OK" in legend or "CNS" in legend:
        raise _error("nvidia-smi topo -m", "the link legend (PIX, PXB, PHB, NODE, SYS, NV#)",
                     "\n".join(lines[end:end + 4]),
                     "This is `nvidia-smi topo -p2p` output; parse it with parse_topo_p2p().")
    gpu_count = len(gpus)
    gpu_rows = [rows[name] for name in gpus]
    return TopoMatrix(
        gpus=gpus,
        links=[links[:gpu_count] for links, _ in gpu_rows],
        nics=nics,
        nic_links=[links[gpu_count:] for links, _ in gpu_rows],
        nic_to_nic=[rows[name][0][gpu_count:] for name in nics],
        columns=columns,
        cpu_affinity=[attributes.get("CPU Affinity") for _, attributes in gpu_rows],
        numa_affinity=[_small_int(attributes.get("NUMA Affinity")) for _, attributes in gpu_rows],
        gpu_numa_id=[_small_int(attributes.get("GPU NUMA ID")) for _, attributes in gpu_rows],
        attributes=[attributes for _, attributes in gpu_rows],
        legend=legend,
        nic_legend=nic_legend,
    )


def _parse_topo_row(line: str, devices: list[str], columns: list[str]) -> tuple[str, list[str], dict[str, str]]:
    cells, tabbed = _split_cells(line)
    label = cells[0]
    if label not in devices:
        raise _error("nvidia-smi topo -m", f"a row for one of {', '.join(devices)}", line,
                     "The matrix holds a row the header does not name; capture the output again.")
    links = cells[1:1 + len(devices)]
    if len(links) < len(devices) or not all(cell and " " not in cell for cell in links):
        raise _error(f"nvidia-smi topo -m row {label}", f"{len(devices)} link labels", line,
                     "The row is shorter than the header: the output looks cut or edited; run the command again.")
    own = devices.index(label)
    if links[own] != "X":
        raise _error(f"nvidia-smi topo -m row {label}", f"X in its own column {label}", line,
                     "Columns are shifted; capture the command's own output (tabs intact).")
    extra = cells[1 + len(devices):]
    if _GPU_NAME_RE.match(label):
        return label, links, _map_attributes(extra, tabbed, columns, label)
    if any(extra):
        raise _error(f"nvidia-smi topo -m row {label}", "no values after the link labels of a NIC row", line,
                     "Columns are shifted; capture the command's own output (tabs intact).")
    return label, links, {}


# --------------------------------------------------------------------------------------------------
# nvidia-smi topo -p2p r|w|n|a|p

P2P_STATUS_MEANING = {
    "X": "self",
    "OK": "status OK",
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "DR": "disabled by regkey",
    "U": "unknown",
}
"""The codes of ``topo -p2p`` as its legend explains them."""

P2P_NVML_STATUS = {
    "OK": "NVML_P2P_STATUS_OK",
    "CNS": "NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED",
    "GNS": "NVML_P2P_STATUS_GPU_NOT_SUPPORTED",
    "TNS": "NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED",
    "NS": "NVML_P2P_STATUS_NOT_SUPPORTED",
    "DR": "NVML_P2P_STATUS_DISABLED_BY_REGKEY",
    "U": "NVML_P2P_STATUS_UNKNOWN",
}
"""The NVML status (nvmlDeviceGetP2PStatus) each code prints."""


@dataclass(frozen=True)
class P2PMatrix:
    """``nvidia-smi topo -p2p <cap>``: ``status[i][j]`` is the code for ``gpus[i]`` -> ``gpus[j]``
    as printed (``X`` on the diagonal; codes this parser does not know are kept)."""

    gpus: list[str]
    status: list[list[str]]
    legend: dict[str, str] = field(default_factory=dict)

    @property
    def matrix(self) -> list[list[str]]:
        """The GPU x GPU codes; the same as ``status``."""
        return self.status

    def pair(self, first: int | str, second: int | str) -> str:
        return self.status[self._index(first)][self._index(second)]

    def pairs(self) -> list[tuple[str, str, str]]:
        """Every ordered pair of different GPUs with its code."""
        return [(self.gpus[i], self.gpus[j], self.status[i][j])
                for i in range(len(self.gpus)) for j in range(len(self.gpus)) if i != j]

    def not_ok(self) -> list[tuple[str, str, str]]:
        return [pair for pair in self.pairs() if pair[2] != "OK"]

    def all_ok(self) -> bool:
        """True when every pair says OK (vacuously for one GPU). OK is the driver's grant, not proof
        that data arrives."""
        return not self.not_ok()

    def codes(self) -> set[str]:
        return {code for _, _, code in self.pairs()}

    def unknown_codes(self) -> set[str]:
        return {code for code in self.codes() if code not in P2P_STATUS_MEANING}

    def _index(self, gpu: int | str) -> int:
        return gpu if isinstance(gpu, int) else self.gpus.index(gpu)


def parse_topo_p2p(text: str) -> P2PMatrix:
    """Parse ``nvidia-smi topo -p2p r|w|n|a|p``. Raises ``NvidiaSmiParseError`` for output without a
    GPU header, with missing rows or rows of the wrong width."""
    what = "nvidia-smi topo -p2p"
    lines = _lines(text, what)
    header_at = _find_header(lines, what, "nvidia-smi topo -p2p r")
    header_cells = [cell for cell in _split_cells(lines[header_at])[0] if cell]
    if not all(_GPU_NAME_RE.match(cell) for cell in header_cells) or len(set(header_cells)) != len(header_cells):
        raise _error(what, "only GPU columns (GPU0 GPU1 ...)", lines[header_at],
                     "This looks like another nvidia-smi report (topo -m has NIC and affinity columns); "
                     "parse it with its own parser.")
    gpus = header_cells
    rows: dict[str, list[str]] = {}
    end = header_at + 1
    while end < len(lines) and not _is_matrix_end(lines[end]):
        cells = [cell for cell in _split_cells(lines[end])[0] if cell]
        label, codes = cells[0], cells[1:]
        if label not in gpus or label in rows:
            raise _error(what, f"one row for each of {', '.join(gpus)}", lines[end],
                         "The matrix holds a row the header does not name; capture the output again.")
        if len(codes) != len(gpus) or codes[gpus.index(label)] != "X":
            raise _error(f"{what} row {label}", f"{len(gpus)} codes with X in column {label}", lines[end],
                         "The row does not line up with the header; capture the command's own output.")
        rows[label] = codes
        end += 1
    missing = [name for name in gpus if name not in rows]
    if missing:
        raise _error(what, f"a row for each of {', '.join(gpus)}", "\n".join(lines[header_at:end]),
                     f"Rows for {', '.join(missing)} are missing: the output looks cut short; run the command again.")
    legend, _ = _parse_legends(lines[end:])
    return P2PMatrix(gpus=gpus, status=[rows[name] for name in gpus], legend=legend)


# --------------------------------------------------------------------------------------------------
# nvidia-smi --query-gpu=... --format=csv,noheader,nounits

QUERY_GPU_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "compute_cap",
    "memory.total",
    "driver_version",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "persistence_mode",
    "ecc.mode.current",
    "mig.mode.current",
)
"""The fields the audit asks for, in this order: ``--query-gpu=`` + ``",".join(QUERY_GPU_FIELDS)``."""

_INVALID_FIELD_RE = re.compile(r'Field "([^"]+)" is not a valid field to query')
_HEADER_UNIT_RE = re.compile(r"\s*\[[^\]]*\]$")


def is_invalid_field_error(output: str) -> str | None:
    """The field an older nvidia-smi refused (``Field "compute_cap" is not a valid field to query.``),
    or None. Drivers before R510 do not know ``compute_cap``: ask again without the field."""
    if not isinstance(output, str):
        return None
    match = _INVALID_FIELD_RE.search(strip_ansi(output))
    return match.group(1) if match else None


def split_query_gpu_csv(text: str, fields: Sequence[str]) -> list[dict[str, str]]:
    """Rows of ``--query-gpu=<fields> --format=csv[,noheader][,nounits]`` as dicts of the strings printed.

    A header line (``--format=csv`` without ``noheader``) is recognised and skipped. A line with another
    number of values than ``fields``, or a failure message in place of values, raises
    ``NvidiaSmiParseError`` naming the line.
    """
    what = "nvidia-smi --query-gpu"
    fields = list(fields)
    if not fields or not all(isinstance(name, str) and name for name in fields):
        raise NvidiaSmiParseError(f"{what}: expected the queried field names; found {fields!r}. "
                                  "Pass the same list as --query-gpu=.")
    lines = _lines(text, what)
    refused = is_invalid_field_error("\n".join(lines))
    if refused is not None:
        raise _error(what, "CSV values", refused,
                     f"This nvidia-smi does not know the field {refused!r}: query again without it.")
    rows: list[dict[str, str]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        failure = _failure_in(line)
        if failure is not None:
            raise _error(f"{what} line {number}", "CSV values", line,
                         f"nvidia-smi reported a failure ({failure[0]}) instead; see nvidia_smi_failure().")
        values = _csv_values(line)
        if len(values) != len(fields):
            raise _error(f"{what} line {number}", f"{len(fields)} comma-separated values ({', '.join(fields)})",
                         line, "Query again with the same field list, or check for commas inside values.")
        if not rows and [_HEADER_UNIT_RE.sub("", value) for value in values] == fields:
            continue
        rows.append(dict(zip(fields, values, strict=True)))
    return rows


def parse_query_gpu_csv(text: str, fields: Sequence[str]) -> list[dict[str, Any]]:
    """Rows of ``--query-gpu`` keyed by the queried field names, with typed values.

    ``index``, the ``pcie.link.*`` fields and ``memory.total`` (MiB) are ints; ``persistence_mode`` and the
    ``ecc.mode.*`` / ``mig.mode.*`` fields are booleans (Enabled/Disabled); what nvidia-smi could not give
    (``[N/A]``, ``[Not Supported]``, ``N/A``, ``[Unknown Error]``...) is None; everything else is the string
    printed (``compute_cap`` ``"12.0"``, ``driver_version``, ``pci.bus_id``). A value of the wrong form
    raises ``NvidiaSmiParseError`` naming the line and the field.
    """
    typed_rows = []
    for number, row in enumerate(split_query_gpu_csv(text, fields), start=1):
        typed_rows.append({name: _typed_value(name, value, f"GPU row {number}") for name, value in row.items()})
    return typed_rows


def _csv_values(line: str) -> list[str]:
    try:
        values = next(csv.reader([line], skipinitialspace=True))
    except (csv.Error, StopIteration):
        values = line.split(",")
    return [value.strip() for value in values]


def pci_bus_id_to_sysfs(bus_id: str) -> str | None:
    """``00000000:18:00.0`` (nvidia-smi) -> ``0000:18:00.0`` (the name under /sys/bus/pci/devices)."""
    if not isinstance(bus_id, str):
        return None
    match = re.fullmatch(r"\s*([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])\s*", bus_id)
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}.{function}"


_INT_FIELDS = ("index", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
               "pcie.link.width.max", "memory.total")
_BOOL_FIELDS = ("persistence_mode", "ecc.mode.current", "ecc.mode.pending", "mig.mode.current", "mig.mode.pending")
_VERSION_FIELDS = {"compute_cap": r"\d{1,4}\.\d{1,4}", "driver_version": r"\d{1,6}(?:\.\d{1,6}){0,3}"}
_BOOL_WORDS = {"enabled": True, "disabled": False, "on": True, "off": False}
_MIB = 1024 * 1024


def _typed_value(name: str, raw: Any, where: str) -> Any:
    """One --query-gpu value in its type; values already typed pass through."""
    if raw is None or isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and name in _INT_FIELDS:
        return raw
    if not isinstance(raw, str):
        raise _error(f"nvidia-smi --query-gpu {where} field {name}", "the string printed", repr(raw),
                     "Pass rows from split_query_gpu_csv() or parse_query_gpu_csv().")
    value = raw.strip()
    if _is_unavailable(value):
        return None
    if name in _INT_FIELDS:
        # Without ``nounits`` memory comes as "81559 MiB".
        number = _small_int(re.sub(r"\s*MiB$", "", value) if name == "memory.total" else value)
        if number is None:
            raise _error(f"nvidia-smi --query-gpu {where} field {name}", "a whole number", raw,
                         "Query with --format=csv,noheader,nounits so numbers come without units.")
        return number
    if name in _BOOL_FIELDS:
        if value.lower() not in _BOOL_WORDS:
            raise _error(f"nvidia-smi --query-gpu {where} field {name}", "Enabled or Disabled", raw,
                         "This nvidia-smi prints the mode differently; report the value so the parser learns it.")
        return _BOOL_WORDS[value.lower()]
    if name in _VERSION_FIELDS and not re.fullmatch(_VERSION_FIELDS[name], value):
        raise _error(f"nvidia-smi --query-gpu {where} field {name}", "a dotted version number", raw,
                     "Check that the field list matches the order of the values.")
    return value


def convert_query_gpu(row: dict[str, Any]) -> dict[str, Any]:
    """One row (from ``split_query_gpu_csv`` or ``parse_query_gpu_csv``) as a dict for facts.

    Keys, for the fields queried: ``index``, ``name``, ``uuid``, ``pci_bus_id`` (as printed) and
    ``pci_address`` (sysfs form), ``compute_cap`` (``"12.0"``) with ``compute_cap_major`` /
    ``compute_cap_minor``, ``memory_total_mib`` and ``memory_total_bytes``, ``driver_version`` with
    ``driver_branch`` (``570``), ``pcie_link_gen_current`` / ``_max`` and ``pcie_link_width_current`` /
    ``_max``, ``persistence_mode`` / ``ecc_mode`` / ``mig_mode`` booleans (``ecc_mode_pending`` /
    ``mig_mode_pending`` when asked). Other fields keep their value under their name with dots as
    underscores. ``unavailable`` maps each field nvidia-smi could not give to what it printed
    (``"[N/A]"``, ``"[Not Supported]"``; None when the row came already typed).
    """
    result: dict[str, Any] = {"unavailable": {}}
    for name, raw in row.items():
        value = _typed_value(name, raw, "row")
        if value is None:
            result["unavailable"][name] = raw.strip() if isinstance(raw, str) else None
        _derive(result, name, value)
    return result


_RENAMED = {
    "pci.bus_id": "pci_bus_id",
    "memory.total": "memory_total_mib",
    "ecc.mode.current": "ecc_mode",
    "ecc.mode.pending": "ecc_mode_pending",
    "mig.mode.current": "mig_mode",
    "mig.mode.pending": "mig_mode_pending",
}


def _derive(result: dict[str, Any], name: str, value: Any) -> None:
    result[_RENAMED.get(name, name.replace(".", "_"))] = value
    if name == "pci.bus_id":
        result["pci_address"] = pci_bus_id_to_sysfs(value)
    elif name == "memory.total":
        result["memory_total_bytes"] = value * _MIB if value is not None else None
    elif name == "compute_cap":
        major, _, minor = value.partition(".") if value else (None, "", None)
        result["compute_cap_major"] = int(major) if major else None
        result["compute_cap_minor"] = int(minor) if minor else None
    elif name == "driver_version":
        result["driver_branch"] = int(value.split(".")[0]) if value else None


def parse_query_gpu(text: str, fields: Sequence[str] = QUERY_GPU_FIELDS) -> list[dict[str, Any]]:
    """``split_query_gpu_csv`` then ``convert_query_gpu`` on each row: the facts form."""
    return [convert_query_gpu(row) for row in split_query_gpu_csv(text, fields)]


# --------------------------------------------------------------------------------------------------
# nvidia-smi -L

_LIST_GPU_RE = re.compile(r"^GPU (\d{1,6}): (.+?)(?: \(UUID: ([^)\s]+)\))?$")
_LIST_MIG_RE = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d{1,6}): \(UUID: ([^)\s]+)\)$")


@dataclass(frozen=True)
class MigDevice:
    profile: str
    device: int
    uuid: str


@dataclass(frozen=True)
class ListedGpu:
    """One ``GPU n: NAME (UUID: ...)`` line of ``nvidia-smi -L`` and the MIG devices listed under it."""

    index: int
    name: str
    uuid: str | None
    mig_devices: list[MigDevice] = field(default_factory=list)


def parse_list_gpus(text: str) -> list[ListedGpu]:
    """Parse ``nvidia-smi -L``. Empty output gives an empty list; any line that is neither a GPU nor a
    MIG line raises ``NvidiaSmiParseError`` (check ``nvidia_smi_failure`` first for error messages)."""
    what = "nvidia-smi -L"
    gpus: list[ListedGpu] = []
    for line in _lines(text, what):
        if not line.strip():
            continue
        gpu = _LIST_GPU_RE.match(line.rstrip())
        mig = _LIST_MIG_RE.match(line.rstrip())
        if gpu:
            index = int(gpu.group(1))
            if any(known.index == index for known in gpus):
                raise _error(what, f"GPU {index} listed once", line, "Capture the output again.")
            gpus.append(ListedGpu(index=index, name=gpu.group(2).strip(), uuid=gpu.group(3), mig_devices=[]))
        elif mig and gpus:
            gpus[-1].mig_devices.append(MigDevice(profile=mig.group(1), device=int(mig.group(2)),
                                                  uuid=mig.group(3)))
        else:
            failure = _failure_in(line)
            todo = (f"nvidia-smi reported a failure ({failure[0]}); see nvidia_smi_failure()." if failure
                    else "Pass the output of `nvidia-smi -L` only.")
            raise _error(what, "lines 'GPU <n>: <name> (UUID: ...)' and indented MIG lines", line, todo)
    return gpus


# --------------------------------------------------------------------------------------------------
# Failures

# (kind, pattern, what to do). Order matters: the first match wins, most specific first.
_FAILURES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("invalid_field", _INVALID_FIELD_RE,
     "This nvidia-smi is older than the query; ask again without that field."),
    ("version_mismatch", re.compile(r"Driver/library version mismatch", re.IGNORECASE),
     "The loaded kernel module and the user-space library differ (driver updated without reboot): "
     "reboot, or unload and reload the nvidia modules."),
    # Any character for the apostrophe: copies of this message often carry a typographic one.
    ("driver_not_loaded", re.compile(r"couldn.t communicate with the NVIDIA driver", re.IGNORECASE),
     "The kernel module is not loaded: check `lsmod | grep nvidia`, dmesg, Secure Boot signing, and that "
     "the driver was built for the running kernel."),
    ("nvml_not_found", re.compile(r"couldn't find libnvidia-ml\.so|NVML Shared Library Not Found", re.IGNORECASE),
     "The user-space driver (libnvidia-ml.so) is missing: install the driver's utils package."),
    ("gpu_lost", re.compile(r"GPU is lost", re.IGNORECASE),
     "A GPU fell off the bus: read dmesg for Xid 79, check power and seating, then reboot."),
    ("device_handle_error", re.compile(r"Unable to determine the device handle for GPU", re.IGNORECASE),
     "NVML cannot open one GPU: read dmesg for Xid errors; in a VM check the passthrough and the host."),
    ("no_devices", re.compile(r"No devices were found", re.IGNORECASE),
     "The driver sees no GPU: check `lspci -nn -d 10de:`, that the GPU is bound to nvidia (not vfio-pci) "
     "and, in a VM, that it is passed through."),
    ("nvml_init_failed", re.compile(r"Failed to initialize NVML", re.IGNORECASE),
     "NVML did not start: read the reason after the colon (permissions, container runtime, driver state)."),
)


@dataclass(frozen=True)
class NvidiaSmiFailure:
    kind: str
    message: str
    remedy: str


def _failure_in(text: str) -> tuple[str, str, str] | None:
    """The first known failure in ``text``: (kind, the line that says it, remedy)."""
    lines = [line.strip() for line in strip_ansi(text).split("\n") if line.strip()]
    for kind, pattern, remedy in _FAILURES:
        for position, line in enumerate(lines):
            if pattern.search(line):
                message = " ".join(line.split())
                # The mismatch report names the library version on the next line.
                if kind == "version_mismatch" and position + 1 < len(lines) and "version" in lines[position + 1]:
                    message = f"{line} {lines[position + 1]}"
                return kind, message, remedy
    return None


def classify_nvidia_smi_failure(rc: int | None, stdout: str, stderr: str) -> NvidiaSmiFailure | None:
    """What went wrong with an nvidia-smi run, or None when it succeeded and printed no known failure.

    ``rc`` None means the binary was not found; 124 means no answer in time (see source.py).
    """
    text = "\n".join(part for part in (stderr, stdout) if isinstance(part, str))
    if rc is None:
        return NvidiaSmiFailure("not_installed", _first_line(text) or "nvidia-smi not found",
                                "Install the NVIDIA driver's utilities (nvidia-smi comes with them).")
    if rc == 124:
        return NvidiaSmiFailure("timeout", _first_line(text) or "nvidia-smi gave no answer in time",
                                "A wedged GPU or driver makes nvidia-smi hang: read dmesg for Xid errors.")
    found = _failure_in(text)
    if found is not None:
        return NvidiaSmiFailure(*found)
    if rc != 0:
        return NvidiaSmiFailure("failed", f"exit status {rc}: {_first_line(text) or 'no message'}",
                                "Run the same nvidia-smi command by hand and read its message.")
    return None


def nvidia_smi_failure(rc: int | None, stdout: str, stderr: str) -> str | None:
    """``"<kind>: <message>"`` for a failed nvidia-smi run (kinds: not_installed, timeout, invalid_field,
    version_mismatch, driver_not_loaded, nvml_not_found, gpu_lost, device_handle_error, no_devices,
    nvml_init_failed, failed), or None when the run succeeded."""
    failure = classify_nvidia_smi_failure(rc, stdout, stderr)
    return None if failure is None else f"{failure.kind}: {failure.message}"


def _first_line(text: str) -> str:
    for line in strip_ansi(text).split("\n"):
        if line.strip():
            return " ".join(line.split())
    return ""
