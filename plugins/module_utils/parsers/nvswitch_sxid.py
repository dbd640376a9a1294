"""NVSwitch SXid lines in a kernel log: the errors the nvidia-nvswitch driver reports for a switch.

The driver prints one event over several lines, each ``nvidia-nvswitch<N>: SXid (PCI:<bus>): <code>, ...``
(https://github.com/NVIDIA/nvtrust/issues/124, driver 570.195.03; tests/fixtures/kernel-log/SOURCES.md)::

    nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Data {0x0000002b, 0x0000002b, ...}
    nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link DLREQ interrupt
    nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Severity 0 Engine instance 44 Sub-engine instance 00

The line that says ``Fatal`` or ``Non-fatal`` is the event, and the driver's own word on its severity; the
``Data`` and ``Severity`` lines around it only detail it. A log that holds only those (a paste cut short) still
shows that the code fired, with its severity unknown (``fatal`` None), never guessed.

Output: ``parse_sxid_log(text)`` -> ``SxidLine`` per SXid line (``switch``: the N of nvidia-nvswitchN,
``pci_bus_id`` as kernel_log.normalize_bus writes it, ``sxid``, ``fatal`` True/False from the line's word or
None, ``detail`` True for Data/Severity lines, ``message``, ``uptime_s``, ``time``); ``summarize_sxids`` one
entry per (switch bus, SXid) with the count of events, whether any was fatal, the first event's message and
stamps. Nothing here raises on any text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.kernel_log import normalize_bus, stamps

SXID_RE = re.compile(r"nvidia-nvswitch(?P<switch>\d{1,3}): SXid \((?:PCI:)?(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:"
                     r"[0-9A-Fa-f]{2}(?:\.[0-7])?)\): (?P<sxid>\d{1,6}),\s*(?P<rest>.*)$")
_FATAL_RE = re.compile(r"^(?P<word>Fatal|Non-fatal)\b,?\s*", re.IGNORECASE)
_DETAIL_RE = re.compile(r"^(?:Data\s*\{|Severity\s+\d)", re.IGNORECASE)


@dataclass(frozen=True)
class SxidLine:
    switch: int
    pci_bus_id: str | None
    sxid: int
    fatal: bool | None
    detail: bool
    message: str
    uptime_s: float | None
    time: str | None


def parse_sxid_line(line: str) -> SxidLine | None:
    if "SXid" not in line:
        return None
    stripped = line.strip()
    found = SXID_RE.search(stripped)
    if found is None:
        return None
    rest = found.group("rest").strip()
    word = _FATAL_RE.match(rest)
    fatal = None if word is None else word.group("word").lower() == "fatal"
    uptime, wall = stamps(stripped[:found.start()])
    return SxidLine(int(found.group("switch")), normalize_bus(found.group("bus")), int(found.group("sxid")), fatal,
                    word is None and bool(_DETAIL_RE.match(rest)), rest[word.end():] if word else rest, uptime, wall)


def parse_sxid_log(text: str) -> list[SxidLine]:
    if not isinstance(text, str):
        return []
    lines = (parse_sxid_line(line) for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    return [line for line in lines if line is not None]


def summarize_sxids(lines: list[SxidLine]) -> list[dict[str, Any]]:
    """One entry per (switch bus, SXid), in order of first appearance. ``count``: the events (lines that say
    Fatal or Non-fatal; a code seen only in detail lines counts one); ``fatal``: True when any event was
    fatal, False when all said Non-fatal, None when no line said."""
    groups: dict[tuple[str | None, int], dict[str, Any]] = {}
    for line in lines:
        key = (line.pci_bus_id, line.sxid)
        entry = groups.get(key)
        if entry is None:
            entry = groups[key] = {"sxid": line.sxid, "switch": line.switch, "pci_bus_id": line.pci_bus_id,
                                   "count": 0, "fatal": None, "message": None, "first_uptime_s": line.uptime_s,
                                   "first_time": line.time}
        if line.fatal is None:
            continue
        entry["count"] += 1
        entry["fatal"] = bool(entry["fatal"]) or line.fatal
        if entry["message"] is None:
            entry["message"] = line.message
    for entry in groups.values():
        entry["count"] = entry["count"] or 1
    return list(groups.values())
