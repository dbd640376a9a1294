"""Parsers for ``nvidia-smi topo -m`` (links between GPUs and NICs) and ``nvidia-smi topo -p2p``.

Pure functions from text to typed data: no Ansible, no subprocess. Each parser raises only
``NvidiaSmiParseError`` (a ``ValueError``) and says what it expected, what it found and what to do.
The formats follow real outputs of several driver generations (see tests/fixtures/nvidia-smi/SOURCES.md):

* ``nvidia-smi topo -m``: a tab-separated matrix. The header starts with an empty cell, then GPU0..GPUn,
  then NIC columns (``NIC0``.. on drivers of the last years, the RDMA device name such as ``mlx5_0`` on
  older ones), then the attribute columns ``CPU Affinity`` [``NUMA Affinity`` [``GPU NUMA ID``]]. When
  ``GPU NUMA ID`` follows ``NUMA Affinity`` the rows carry one extra empty cell between the two values
  (``0-63\\t0\\t\\tN/A``). NIC rows end in empty cells. A terminal gets the header underlined with ANSI
  escapes. Drivers before about 2018 printed ``SOC`` where later ones print ``SYS``. On hosts with ten
  or more NICs nvidia-smi drops the tab between some cells (``PXBNODE``, ``SYSSYS``, ``NODE NODE``):
  such rows are split by the known labels (nvidia_smi_topo_cells); NIC cells that cannot be placed are
  None, and only a GPU x GPU block that cannot be read is refused.
* ``nvidia-smi topo -p2p r|w|n|a|p``: header `` \\tGPU0\\tGPU1\\t``, rows `` GPU0\\tX\\tOK\\t``, then a legend.
* Either, hard-wrapped by a mail client: rejoined where the header's columns tell (parsers/topo_wrap.py).

Output schema:

* ``parse_topo_matrix`` -> ``TopoMatrix``: ``gpus`` (``["GPU0", ...]``), ``links[i][j]`` the label
  between two GPUs as printed (``X``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``/``SOC``, ``NV<n>``),
  ``nics`` and ``nic_links[i][k]`` / ``nic_to_nic``, ``columns`` (the attribute column names), per GPU
  ``cpu_affinity`` (str as printed or None), ``numa_affinity`` and ``gpu_numa_id`` (int or None) and
  ``attributes`` (column -> cell), ``legend`` (label -> meaning) and ``nic_legend`` (``NIC0`` -> device);
  ``notes``: what was repaired or left unknown (merged cells split, NIC cells that could not be placed).
* ``parse_topo_p2p`` -> ``P2PMatrix``: ``gpus``, ``status[i][j]`` the code printed (``X``, ``OK``,
  ``CNS``, ``GNS``, ``TNS``, ``NS``, ``DR``, ``U``; unknown codes kept) and ``legend``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import normalize_paste, strip_launcher_prefix
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import (
    NvidiaSmiParseError,
    output_lines,
    small_int,
    smi_error,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_topo_cells import (
    BASE_LABELS,
    LABEL_LIKE_RE,
    P2P_STATUS_MEANING,
    check_mirror,
    cut_inside_row,
    repair_links,
    split_header_cell,
    split_row_label,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.topo_wrap import is_matrix_end, rejoin_wrapped

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


def _find_header(lines: Sequence[str], what: str, command: str) -> int:
    for number, line in enumerate(lines):
        tokens = line.split()
        if tokens and tokens[0] == "GPU0":
            return number
    raise smi_error(what, "a header row whose first column is GPU0", "\n".join(lines[:3]),
                    f"Check that `{command}` ran and saw GPUs; see nvidia_smi_failure() for its error message.")


def _lines(text: object, what: str) -> list[str]:
    """The output's lines, after undoing what pastes do (CRLF, quoted-printable e-mail, launcher prefixes)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if isinstance(text, str):
        text = "\n".join(strip_launcher_prefix(line) for line in normalize_paste(text).split("\n"))
    return output_lines(text, what)


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
    ``nic_links[i][k]`` the label between ``gpus[i]`` and ``nics[k]``, None where merged cells could not
    be placed (``notes`` says which). Per GPU, ``cpu_affinity`` is the
    CPU list as printed (``"0-31,64-95"``, ``"N/A"``) and ``numa_affinity`` / ``gpu_numa_id`` are integers,
    None where the driver printed N/A, left the cell empty or has no such column. ``attributes`` keeps
    every attribute cell as printed, by column name.
    """

    gpus: list[str]
    links: list[list[str | None]]  # None: a row a cut paste lost (cut_ok)
    nics: list[str] = field(default_factory=list)
    nic_links: list[list[str | None]] = field(default_factory=list)
    nic_to_nic: list[list[str | None]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    cpu_affinity: list[str | None] = field(default_factory=list)
    numa_affinity: list[int | None] = field(default_factory=list)
    gpu_numa_id: list[int | None] = field(default_factory=list)
    attributes: list[dict[str, str]] = field(default_factory=list)
    legend: dict[str, str] = field(default_factory=dict)
    nic_legend: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    missing_rows: list[str] = field(default_factory=list)  # lost by a cut paste (cut_ok): their cells are None

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
        return {cell for cell in cells
                if cell is not None and cell not in KNOWN_LINK_LABELS and nvlink_count(cell) is None}

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
    """Device columns and attribute columns of the ``topo -m`` header. Device names a lost tab glued
    together (``NIC9NIC10``, ``NIC11 NIC12``, ``NIC13CPU Affinity``) are told apart."""
    cells, tabbed = _split_cells(line)
    pieces: list[str] = []
    for cell in (cell for cell in cells if cell):
        names, rest = split_header_cell(cell)
        pieces += names
        if rest:
            pieces.append(rest)
    devices: list[str] = []
    attributes: list[str] = []
    if tabbed:
        for cell in pieces:
            # Attribute names have spaces, device names never; after the first attribute all are attributes.
            if attributes or " " in cell or not _DEVICE_NAME_RE.match(cell):
                attributes.append(cell)
            else:
                devices.append(cell)
        return devices, attributes
    # Tabs expanded to spaces: re-join the known multi-word attribute names.
    position = 0
    while position < len(pieces):
        for name in TOPO_ATTRIBUTE_COLUMNS:
            words = name.split()
            if pieces[position:position + len(words)] == words:
                attributes.append(name)
                position += len(words)
                break
        else:
            if attributes:
                attributes.append(pieces[position])
            else:
                devices.append(pieces[position])
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
            raise smi_error("nvidia-smi topo -m header", "GPU columns followed by NIC columns", header,
                            "The header is out of order; capture the output again without editing it.")
    if len(set(devices)) != len(devices):
        raise smi_error("nvidia-smi topo -m header", "each device named once", header,
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
    raise smi_error(f"nvidia-smi topo -m row {row}", f"{len(columns)} values for {', '.join(columns)}",
                    " | ".join(cells), "These values cannot be placed under the attribute columns.")


@dataclass
class _Row:
    links: list[str | None]
    attributes: dict[str, str]
    repaired: bool = False  # its GPU columns were read from merged or short cells


def parse_topo_matrix(text: str, cut_ok: bool = False) -> TopoMatrix:
    """Parse ``nvidia-smi topo -m``. Unknown link labels are kept as printed; merged cells are split
    (see the module's docstring). A missing header, a missing row or a GPU x GPU block that cannot be
    read raises ``NvidiaSmiParseError``; NIC cells and attribute values that cannot be placed are left
    unknown and said in ``notes``. With ``cut_ok`` (material), a paste ending after some rows or inside its last
    gives the rows it holds; the others' cells are None, their names in ``missing_rows``."""
    lines = _lines(text, "nvidia-smi topo -m")
    header_at = _find_header(lines, "nvidia-smi topo -m", "nvidia-smi topo -m")
    lines, notes = rejoin_wrapped(lines, header_at)
    devices, columns = _split_topo_header(lines[header_at])
    gpus, nics = _check_topo_devices(devices, lines[header_at])
    # Labels a legend explains (a newer driver's) split merged cells too.
    explained, _unused = _parse_legends(lines[header_at + 1:])
    labels = BASE_LABELS + tuple(key for key in explained if LABEL_LIKE_RE.match(key) and "#" not in key
                                 and key not in BASE_LABELS)
    rows: dict[str, _Row] = {}
    end = header_at + 1
    while end < len(lines) and not is_matrix_end(lines[end]):
        try:
            label, row = _parse_topo_row(lines[end], devices, columns, len(gpus), labels, notes)
        except NvidiaSmiParseError:
            if not (cut_ok and rows and end == len(lines) - 1):
                raise
            lines = lines[:end]  # the paste stops inside its last row, which is not read
            break
        if label in rows:
            raise smi_error("nvidia-smi topo -m", f"one row for {label}", lines[end],
                            "Capture the output again; a line seems to be duplicated.")
        rows[label] = row
        end += 1
    missing = [name for name in devices if name not in rows]
    if missing and cut_ok and rows and not any(line.strip() for line in lines[end:]):
        rows.update({name: _Row([None] * len(devices), {}) for name in missing})
    elif missing:
        raise smi_error("nvidia-smi topo -m", f"a row for each of {', '.join(devices)}",
                        "\n".join(lines[header_at:end]),
                        f"Rows for {', '.join(missing)} are missing: the output looks cut short; "
                        "run the command again.")
    legend, nic_legend = _parse_legends(lines[end:])
    if "OK" in legend or "CNS" in legend:
        raise smi_error("nvidia-smi topo -m", "the link legend (PIX, PXB, PHB, NODE, SYS, NV#)",
                        "\n".join(lines[end:end + 4]),
                        "This is `nvidia-smi topo -p2p` output; parse it with parse_topo_p2p().")
    gpu_count = len(gpus)
    gpu_rows = [rows[name] for name in gpus]
    links = [[None if cell is None else str(cell) for cell in row.links[:gpu_count]] for row in gpu_rows]
    check_mirror(gpus, links, [row.repaired for row in gpu_rows])
    return TopoMatrix(
        gpus=gpus,
        links=links,
        nics=nics,
        nic_links=[row.links[gpu_count:] for row in gpu_rows],
        nic_to_nic=[rows[name].links[gpu_count:] for name in nics],
        columns=columns,
        cpu_affinity=[row.attributes.get("CPU Affinity") for row in gpu_rows],
        numa_affinity=[small_int(row.attributes.get("NUMA Affinity")) for row in gpu_rows],
        gpu_numa_id=[small_int(row.attributes.get("GPU NUMA ID")) for row in gpu_rows],
        attributes=[row.attributes for row in gpu_rows],
        legend=legend,
        nic_legend=nic_legend,
        notes=notes,
        missing_rows=missing,
    )


def _is_link_cell(cell: str) -> bool:
    return bool(cell) and " " not in cell and bool(LABEL_LIKE_RE.match(cell))


def _parse_topo_row(line: str, devices: list[str], columns: list[str], gpu_count: int,
                    labels: tuple[str, ...], notes: list[str]) -> tuple[str, _Row]:
    cells, tabbed = _split_cells(line)
    label, rest = cells[0], cells[1:]
    if label not in devices:
        label, rest = split_row_label(cells, devices)
    if label not in devices:
        raise smi_error("nvidia-smi topo -m", f"a row for one of {', '.join(devices)}", line,
                        "The matrix holds a row the header does not name; capture the output again.")
    count = len(devices)
    own = devices.index(label)
    is_gpu = own < gpu_count
    links: list[str | None]
    if len(rest) >= count and all(_is_link_cell(cell) for cell in rest[:count]) and rest[own] == "X":
        links, extra, repaired = list(rest[:count]), rest[count:], False
    else:
        links, extra, repaired = repair_links(line, label, rest, tabbed, devices, gpu_count, labels, notes)
    if not is_gpu:
        if any(extra):
            notes.append(f"{label}: values after the link labels ({' | '.join(c for c in extra if c)}) mean its "
                         "cells are shifted; its links are unknown")
            return label, _Row([None] * count, {}, True)
        return label, _Row(links, {}, repaired)
    try:
        attributes = _map_attributes(extra, tabbed, columns, label)
    except NvidiaSmiParseError as exc:
        notes.append(f"{label}: attribute values unknown ({exc})")
        attributes = {}
    return label, _Row(links, attributes, repaired)


# --------------------------------------------------------------------------------------------------
# nvidia-smi topo -p2p r|w|n|a|p


@dataclass(frozen=True)
class P2PMatrix:
    """``nvidia-smi topo -p2p <cap>``: ``status[i][j]`` is the code for ``gpus[i]`` -> ``gpus[j]``
    as printed (``X`` on the diagonal; codes this parser does not know are kept)."""

    gpus: list[str]
    status: list[list[str]]
    legend: dict[str, str] = field(default_factory=dict)
    missing_rows: list[str] = field(default_factory=list)  # lost by a cut paste (cut_ok): their cells are None

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
        return {code for _unused, _unused, code in self.pairs()}

    def unknown_codes(self) -> set[str]:
        return {code for code in self.codes() if code not in P2P_STATUS_MEANING}

    def _index(self, gpu: int | str) -> int:
        return gpu if isinstance(gpu, int) else self.gpus.index(gpu)


def parse_topo_p2p(text: str, cut_ok: bool = False) -> P2PMatrix:
    """Parse ``nvidia-smi topo -p2p r|w|n|a|p``; ``NvidiaSmiParseError`` for output without a GPU header, with
    missing rows or rows of the wrong width, except with ``cut_ok`` (material) for a paste that ends after
    some rows, with no legend: the rows it holds, the others all None (``missing_rows``), never a cut row."""
    what = "nvidia-smi topo -p2p"
    lines = _lines(text, what)
    header_at = _find_header(lines, what, "nvidia-smi topo -p2p r")
    lines, _notes = rejoin_wrapped(lines, header_at, width_from_header=True)
    header_cells = [cell for cell in _split_cells(lines[header_at])[0] if cell]
    if not all(_GPU_NAME_RE.match(cell) for cell in header_cells) or len(set(header_cells)) != len(header_cells):
        raise smi_error(what, "only GPU columns (GPU0 GPU1 ...)", lines[header_at],
                        "This looks like another nvidia-smi report (topo -m has NIC and affinity columns); "
                        "parse it with its own parser.")
    gpus = header_cells
    rows: dict[str, list[str]] = {}
    end = header_at + 1
    while end < len(lines) and not is_matrix_end(lines[end]):
        cells = [cell for cell in _split_cells(lines[end])[0] if cell]
        label, codes = cells[0], cells[1:]
        if cut_ok and end == len(lines) - 1 and cut_inside_row(text, codes, len(gpus), P2P_STATUS_MEANING):
            end += 1  # the paste stops inside its last row, which is not read
            break
        if label not in gpus or label in rows:
            raise smi_error(what, f"one row for each of {', '.join(gpus)}", lines[end],
                            "The matrix holds a row the header does not name; capture the output again.")
        if len(codes) != len(gpus) or codes[gpus.index(label)] != "X":
            raise smi_error(f"{what} row {label}", f"{len(gpus)} codes with X in column {label}", lines[end],
                            "The row does not line up with the header; capture the command's own output.")
        rows[label] = codes
        end += 1
    missing = [name for name in gpus if name not in rows]
    if missing and not (cut_ok and rows and not any(line.strip() for line in lines[end:])):
        raise smi_error(what, f"a row for each of {', '.join(gpus)}", "\n".join(lines[header_at:end]),
                        f"Rows for {', '.join(missing)} are missing: the output looks cut short; "
                        "run the command again.")
    legend, _unused = _parse_legends(lines[end:])
    return P2PMatrix(gpus, [rows.get(name, [None] * len(gpus)) for name in gpus], legend, missing)  # type: ignore
