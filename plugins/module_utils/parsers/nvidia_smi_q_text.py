"""Reader of ``nvidia-smi -q`` as text: every GPU block, into nvidia_smi_q_result's types.

Pure functions from text to typed data: no Ansible, no subprocess. ``parse_nvidia_smi_q_text`` raises
only ``NvidiaSmiParseError`` (a ``ValueError``), saying what it expected, what it found and what to do.
Output schema: ``NvidiaSmiQ`` with ``format`` "text", as described in nvidia_smi_q_result.

The format (see tests/fixtures/nvidia-smi/SOURCES.md for the drivers it was checked against):
``==============NVSMI LOG==============``, then ``Timestamp``, ``Driver Version``, ``CUDA Version``
(R410+), ``Attached GPUs`` as ``Key : Value`` lines, then one block per GPU opened by a line
``GPU 00000000:41:00.0`` (``GPU 0000:01:00.0`` on older drivers: 340, 369). Inside a block,
indentation nests: a line without a value opens a section (``ECC Errors``), a line with one may have
children too (``HW Slowdown : Not Active`` holds ``HW Thermal Slowdown``), and a section printed
``Remapped Rows : N/A`` has none. Keys are aligned with spaces, 36 or 42 columns wide depending on
the driver, and their case varied (``Ecc Mode``, ``Virtualization mode``): keys are compared
without case or spacing. Outputs appended one after the other (``nvidia-smi -q -i 0; nvidia-smi -q
-i 1``) are read as one; the first header's values stand, and no GPU gets an index.

What pastes add is taken off first: terminal escapes, CRLF, mpirun's ``[1,0]<stdout>:``, torchrun's
``[rank0]:`` and Slurm's ``0: `` prefixes (one rank's output only), prompt lines (``$ nvidia-smi
-q``, ``!nvidia-smi -q``), ``[...]`` elisions, blank lines. Indentation is read relative to the lines
around (tabs as four spaces), so re-indented pastes and varying widths still nest; a line indented
less than its block belongs to the GPU itself. A block cut short gives what it holds; the rest is None.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import (
    NvidiaSmiParseError,
    output_lines,
    smi_error,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_failure import failure_in
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q_build import (
    build_gpu,
    is_unavailable,
    snake,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q_result import NvidiaSmiQ

_WHAT = "nvidia-smi -q"
_GPU_LINE_RE = re.compile(r"GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")
# "[1,0]<stdout>:" (Open MPI --tag-output), "[rank3]:" (torchrun), "3: " (srun --label).
_RANK_PREFIX_RE = re.compile(
    r"^\s{0,8}(\[\d{1,9},\d{1,9}\]<std(?:out|err)>:|\[rank\s?\d{1,6}\]:\s?|\d{1,6}: (?=\s*\S))")
_PROMPT_RE = re.compile(r"^\s*(?:\S*[$#%>]\s*|!\s*)?(?:sudo\s+)?nvidia-smi(?:\s|$)|^\s*\S+@\S+:\S*[$#]\s*$")
_ELISION_RE = re.compile(r"^\s*(?:\[\s*(?:\.\.\.|…)\s*\]|\.\.\.|…|<\s*(?:snip|snipped)\s*>)\s*$", re.IGNORECASE)
_BANNER_RE = re.compile(r"^\s*=+\s*NVSMI LOG\s*=+\s*$", re.IGNORECASE)
_KEY_VALUE_RE = re.compile(r"^(?P<key>[^:]*[^:\s])\s*:(?P<value>.*)$")
_HEADER_KEYS = {"timestamp": "timestamp", "driver version": "driver_version", "cuda version": "cuda_version",
                "attached gpus": "attached_gpus"}


@dataclass
class _Node:
    """One line of a GPU block: its value (None for a section line) and the lines nested under it."""

    value: str | None = None
    children: dict[str, _Node] = field(default_factory=dict)


@dataclass
class _Block:
    bus_id: str
    indent: int
    root: _Node = field(default_factory=_Node)
    stack: list[tuple[int, _Node]] = field(default_factory=list)


def parse_nvidia_smi_q_text(text: Any) -> NvidiaSmiQ:
    """Every GPU of ``nvidia-smi -q`` text (or of a paste of it); see the module docstring."""
    lines = _clean_lines(output_lines(text, _WHAT))
    header: dict[str, str] = {}
    blocks: list[_Block] = []
    appended = False
    for indent, body in lines:
        gpu = _GPU_LINE_RE.fullmatch(body)
        if gpu is not None:
            blocks.append(_Block(gpu.group(1), indent))
            continue
        key, value = _split(body)
        if value is not None and key in _HEADER_KEYS and (not blocks or indent <= blocks[-1].indent):
            # A header after a block: another output appended, whose GPUs need not come in index order.
            appended = appended or bool(blocks)
            header.setdefault(_HEADER_KEYS[key], value)
            continue
        if blocks:
            _add_line(blocks[-1], indent, key, value)
    if not blocks and not _no_gpus(header):
        raise _nothing_read(lines)
    attached = _attached(header.get("attached_gpus"))
    listed_all = attached == len(blocks) and not appended
    gpus = [build_gpu(_fields(block), position, position if listed_all else None)
            for position, block in enumerate(blocks)]
    return NvidiaSmiQ(
        format="text",
        gpus=gpus,
        driver_version=_header_text(header.get("driver_version")),
        cuda_version=_header_text(header.get("cuda_version")),
        attached_gpus=attached,
        timestamp=_header_text(header.get("timestamp")),
        complete=None,
    )


# --------------------------------------------------------------------------------------------------
# Lines


def clean_paste_lines(raw_lines: Iterable[str]) -> list[str]:
    """The lines nvidia-smi printed, from a paste: rank prefixes, prompts and elisions taken off.

    Raises ``NvidiaSmiParseError`` when lines of several mpirun or Slurm ranks are mixed.
    """
    prefixes: list[str] = []
    kept: list[str] = []
    for line in raw_lines:
        match = _RANK_PREFIX_RE.match(line)
        if match is not None:
            prefix = match.group(1).strip()
            if prefix not in prefixes:
                prefixes.append(prefix)
            line = line[match.end():]
        if _PROMPT_RE.search(line) or _ELISION_RE.match(line) or _BANNER_RE.match(line) or not line.strip():
            continue
        kept.append(line)
    if len(prefixes) > 1:
        raise NvidiaSmiParseError(
            f"{_WHAT}: expected the output of one nvidia-smi; found lines of several ranks "
            f"({', '.join(prefixes[:4])}). Run nvidia-smi -q on one rank, or split the output by its prefix.")
    return kept


def _clean_lines(raw_lines: Sequence[str]) -> list[tuple[int, str]]:
    result = []
    for line in clean_paste_lines(raw_lines):
        expanded = line.expandtabs(4).rstrip()
        body = expanded.lstrip()
        result.append((len(expanded) - len(body), body))
    return result


def _split(body: str) -> tuple[str, str | None]:
    """``Key : Value`` as (normalized key, value); a section line as (normalized key, None).

    The first colon splits: keys never hold one, values may (``Bus Id : 00000000:41:00.0``). A line
    ending in a colon (``Clocks Event Reasons:``) is a section, as some re-typed pastes write it.
    """
    match = _KEY_VALUE_RE.match(body)
    if match is None:
        return _key(body), None
    value = match.group("value").strip()
    return _key(match.group("key")), (value if value else None)


def _key(label: str) -> str:
    return re.sub(r"\s+", " ", label.strip().rstrip(":").strip()).lower()


def _add_line(block: _Block, indent: int, key: str, value: str | None) -> None:
    stack = block.stack
    while stack and stack[-1][0] >= indent:
        stack.pop()
    parent = stack[-1][1] if stack else block.root
    node = _Node(value)
    # The first of two equal keys stands; the second's children nest under it, out of the way.
    parent.children.setdefault(key, node)
    stack.append((indent, node))


def _no_gpus(header: dict[str, str]) -> bool:
    """A header that says there is no GPU: ``Attached GPUs : 0``."""
    return _attached(header.get("attached_gpus")) == 0


def _attached(raw: str | None) -> int | None:
    if raw is None or not re.fullmatch(r"\d{1,6}", raw.strip()):
        return None
    return int(raw.strip())


def _header_text(raw: str | None) -> str | None:
    return None if raw is None or is_unavailable(raw) else raw.strip()


def _nothing_read(lines: list[tuple[int, str]]) -> NvidiaSmiParseError:
    found = "\n".join(body for _unused, body in lines[:3])
    failure = failure_in(found + "\n" + "\n".join(body for _unused, body in lines[3:40]))
    if failure is not None:
        return smi_error(_WHAT, "a GPU block", failure[1],
                         f"nvidia-smi reported a failure ({failure[0]}) instead: {failure[2]}")
    return smi_error(_WHAT, "the output of nvidia-smi -q, each GPU opened by a line like 'GPU 00000000:41:00.0'",
                     found, "Pass the whole output of nvidia-smi -q (or -q -d SECTION, or -q -x); a grep of "
                            "it loses the GPU lines that say which GPU each value belongs to.")


# --------------------------------------------------------------------------------------------------
# A GPU block's fields


def _find(node: _Node | None, *path: str | tuple[str, ...]) -> _Node | None:
    """The node at a path of keys (each a key or alternatives); the last key may sit deeper, where a
    paste's indentation pushed it under a sibling."""
    for depth, step in enumerate(path):
        if node is None:
            return None
        names = (step,) if isinstance(step, str) else step
        found = next((node.children[name] for name in names if name in node.children), None)
        if found is None and depth == len(path) - 1:
            found = _find_below(node, names)
        node = found
    return node


def _find_below(node: _Node, names: tuple[str, ...]) -> _Node | None:
    # Not into the sections of MIG devices and processes: their fields share the GPU's names.
    queue = deque(child for key, child in node.children.items() if key not in _OTHER_DEVICES)
    while queue:
        current = queue.popleft()
        for name in names:
            if name in current.children:
                return current.children[name]
        queue.extend(child for key, child in current.children.items() if key not in _OTHER_DEVICES)
    return None


def _value(node: _Node | None, *path: str | tuple[str, ...]) -> str | None:
    found = _find(node, *path)
    return found.value if found is not None else None


def _section(node: _Node | None, *path: str | tuple[str, ...]) -> _Node | str | None:
    """A section's node; the string printed in its place (``Remapped Rows : N/A``); or None."""
    found = _find(node, *path)
    if found is None:
        return None
    if not found.children and found.value is not None:
        return found.value
    return found


_LINK = ("pci", "gpu link info")
_OTHER_DEVICES = {"mig devices", "mig device", "processes", "process info", "accounted processes"}
# Labels whose snake case is not the NVML name; "User Defined Clocks" is the name before R319.
_REASON_NAMES = {"idle": "gpu_idle", "user defined clocks": "applications_clocks_setting",
                 "display clocks setting": "display_clock_setting"}
_ECC_NAMES = {"texture_shared": "texture_shm", "sram_uncorrectable_sec_ded": "sram_uncorrectable_secded"}


def _fields(block: _Block) -> dict[str, Any]:
    gpu = block.root
    return {
        "bus_id": block.bus_id,
        "product_name": _value(gpu, "product name"),
        "product_brand": _value(gpu, "product brand"),
        "product_architecture": _value(gpu, "product architecture"),
        "vbios_version": _value(gpu, "vbios version"),
        "uuid": _value(gpu, "gpu uuid"),
        "minor_number": _value(gpu, "minor number"),
        "compute_capability": _value(gpu, ("compute capability", "cuda compute capability")),
        "persistence_mode": _value(gpu, "persistence mode"),
        "mig_mode": _value(gpu, "mig mode", "current"),
        "pcie_gen_current": _value(gpu, *_LINK, "pcie generation", "current"),
        "pcie_gen_max": _value(gpu, *_LINK, "pcie generation", "max"),
        "pcie_gen_device_max": _value(gpu, *_LINK, "pcie generation", "device max"),
        "pcie_gen_host_max": _value(gpu, *_LINK, "pcie generation", "host max"),
        "pcie_width_current": _value(gpu, *_LINK, "link width", "current"),
        "pcie_width_max": _value(gpu, *_LINK, "link width", "max"),
        "bar1_total": _value(gpu, "bar1 memory usage", "total"),
        "fb_total": _value(gpu, "fb memory usage", "total"),
        "ecc_mode_current": _value(gpu, "ecc mode", "current"),
        "ecc_mode_pending": _value(gpu, "ecc mode", "pending"),
        "virtualization_mode": _value(gpu, "gpu virtualization mode", "virtualization mode"),
        "host_vgpu_mode": _value(gpu, "gpu virtualization mode", "host vgpu mode"),
        "ecc_errors": _ecc_errors(_section(gpu, "ecc errors")),
        "retired_pages": _mapped(_section(gpu, "retired pages"), {
            "single bit ecc": "single_bit", "double bit ecc": "double_bit", "pending page blacklist":
            "pending_blacklist", "pending": "pending_retirement", "pending page retirement": "pending_retirement"}),
        "remapped_rows": _remapped_rows(_section(gpu, "remapped rows")),
        "clocks_event_reasons": _reasons(_section(gpu, ("clocks event reasons", "clocks throttle reasons"))),
        "fabric": _fabric(_section(gpu, ("fabric", "gpu fabric"))),
    }


def _mapped(section: _Node | str | None, names: dict[str, str]) -> dict[str, str | None] | str | None:
    if not isinstance(section, _Node):
        return section
    return {name: _value(section, key) for key, name in names.items() if _find(section, key) is not None}


def _ecc_errors(section: _Node | str | None) -> dict[str, Any] | str | None:
    if not isinstance(section, _Node):
        return section
    return {timescale: _ecc_counters(_section(section, timescale)) for timescale in ("volatile", "aggregate")}


def _ecc_counters(section: _Node | str | None) -> dict[str, str | None] | str | None:
    if not isinstance(section, _Node):
        return section
    counters: dict[str, str | None] = {}
    for key, node in section.children.items():
        name = _ECC_NAMES.get(snake(key), snake(key))
        if name in ("single_bit", "double_bit"):
            for part, leaf in node.children.items():
                counters[f"{name}_{_ECC_NAMES.get(snake(part), snake(part))}"] = leaf.value
        elif node.value is not None:
            counters[name] = node.value
    return counters


def _remapped_rows(section: _Node | str | None) -> dict[str, Any] | str | None:
    rows = _mapped(section, {"correctable error": "correctable", "uncorrectable error": "uncorrectable",
                             "pending": "pending", "remapping failure occurred": "failure"})
    if isinstance(rows, dict) and isinstance(section, _Node):
        histogram = _section(section, "bank remap availability histogram")
        if histogram is not None:
            rows["histogram"] = _mapped(histogram, {bucket: bucket for bucket in ("max", "high", "partial", "low",
                                                                                  "none")})
    return rows


def _reasons(section: _Node | str | None) -> dict[str, str | None] | str | None:
    if not isinstance(section, _Node):
        return section
    reasons: dict[str, str | None] = {}
    # Every line under the section, at any depth: HW Thermal and HW Power Brake Slowdown are nested
    # under HW Slowdown.
    queue = deque(section.children.items())
    while queue:
        key, node = queue.popleft()
        reasons.setdefault(_REASON_NAMES.get(key, snake(key)), node.value)
        queue.extendleft(reversed(node.children.items()))
    return reasons


def _fabric(section: _Node | str | None) -> dict[str, str | None] | str | None:
    fabric = _mapped(section, {"state": "state", "status": "status", "cliqueid": "clique_id", "clique id":
                               "clique_id", "clusteruuid": "cluster_uuid", "cluster uuid": "cluster_uuid"})
    if isinstance(fabric, dict) and isinstance(section, _Node):
        fabric["health_summary"] = _value(section, "health", "summary")
    return fabric
