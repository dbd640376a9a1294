"""The NVIDIA driver's GPU error lines in a kernel log: Xid events and GPUs fallen off the bus.

Pure functions from text to data: no Ansible, no subprocess. The text is what ``dmesg`` prints
(``[12345.678901] NVRM: ...``, or ``[Fri Aug 30 11:43:09 2024] ...`` with ``-T``), what
``journalctl -k`` prints (``Mar 03 10:00:00 host kernel: NVRM: ...``, ISO and monotonic stamps
too) or a syslog file (``... kernel: [12345.678] NVRM: ...``). Lines that are no NVRM error are
skipped, so the whole log can be given.

The forms of the driver generations, all read:

* ``NVRM: Xid (0000:02:00): 13, 0003 00000000 ...``                      (300 series and older)
* ``NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.``        (3xx-4xx, no pid)
* ``NVRM: Xid (PCI:0000:3b:00): 31, pid=1234, Ch 00000010, ...``          (418-470: pid)
* ``NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.``
  and ``pid=2767, name=python3, ...``                                    (495 and newer: pid and name)
* ``NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.`` and ``NVRM: GPU at 0000:02:00.0 has
  fallen off the bus.``: the bus loss said without an Xid number (kind ``fallen_off_bus``).

Output schema: ``parse_kernel_log(text)`` -> a list of ``GpuKernelEvent`` in log order: ``kind``
(``xid`` or ``fallen_off_bus``), ``xid`` (int; None for ``fallen_off_bus``), ``pci_bus_id``
(``0000:41:00.0``, lower case, function 0 when the line names none; None when the line names no
GPU), ``pid`` (int or None, also for ``'<unknown>'``), ``process`` (the ``name=`` value, None when
absent or ``<unknown>``), ``message`` (the text after the number), ``uptime_s`` (seconds since
boot from a ``[12345.678]`` stamp, or None), ``time`` (a wall-clock stamp as printed, or None)
and ``line`` (the line, stripped). ``summarize_events`` groups them per (kind, xid, GPU) with
counts, first and last stamps and the first message. Nothing here raises on any text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# A PCI address as the driver prints it: 4 (or NVML's 8) hex digits of domain, bus, device,
# and an optional function.
_BUS = r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)"
XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?" + _BUS + r"\): (?P<xid>\d{1,5})(?:,\s*(?P<rest>.*))?$")
FALLEN_RE = re.compile(r"NVRM: (?:.*?\b(?:PCI:)?" + _BUS + r"\b)?.*?has fallen off the bus", re.IGNORECASE)
_PID_RE = re.compile(r"^pid=(?P<pid>'[^']*'|<[^>]*>|[^,\s]*)(?:,\s*|$)")
_NAME_RE = re.compile(r"^name=(?P<name>[^,]*)(?:,\s*|$)")
_UPTIME_RE = re.compile(r"\[\s*(?P<uptime>\d+\.\d+)\]")
_CTIME_RE = re.compile(r"\[(?P<time>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d \d{4})\]")
_JOURNAL_RE = re.compile(r"^(?P<time>[A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d(?:\.\d+)?"
                         r"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+\S+\s+kernel:")
_UNKNOWN = {"", "<unknown>", "'<unknown>'", "unknown"}


@dataclass(frozen=True)
class GpuKernelEvent:
    kind: str
    xid: int | None
    pci_bus_id: str | None
    pid: int | None
    process: str | None
    message: str
    uptime_s: float | None
    time: str | None
    line: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "xid": self.xid, "pci_bus_id": self.pci_bus_id, "pid": self.pid,
                "process": self.process, "message": self.message, "uptime_s": self.uptime_s, "time": self.time}


def normalize_bus(text: str | None) -> str | None:
    """``PCI:0000:41:00`` / ``00000000:41:00.0`` -> ``0000:41:00.0``; None for None."""
    if not text:
        return None
    text = text.lower()
    if text.startswith("pci:"):
        text = text[4:]
    domain, _unused, rest = text.partition(":")
    if "." not in rest:
        rest += ".0"
    return f"{domain[-4:].rjust(4, '0')}:{rest}"


def stamps(prefix: str) -> tuple[float | None, str | None]:
    """(seconds since boot, wall-clock stamp as printed) of what precedes a message on its line."""
    uptime = _UPTIME_RE.search(prefix)
    ctime = _CTIME_RE.search(prefix)
    journal = _JOURNAL_RE.match(prefix.strip())
    wall = ctime.group("time") if ctime else journal.group("time") if journal else None
    return (float(uptime.group("uptime")) if uptime else None), wall


def _pid(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip("'")
    return int(text) if text.isdigit() and len(text) < 10 else None


def parse_line(line: str) -> GpuKernelEvent | None:
    """One log line as an event, or None when it is no NVRM Xid or bus-loss line."""
    if "NVRM" not in line:
        return None
    stripped = line.strip()
    at = stripped.find("NVRM:")
    if at < 0:
        return None
    body = stripped[at:]
    uptime, wall = stamps(stripped[:at])
    xid = XID_RE.match(body)
    if xid is not None:
        rest = xid.group("rest") or ""
        pid = process = None
        found = _PID_RE.match(rest)
        if found:
            pid, rest = _pid(found.group("pid")), rest[found.end():]
            found = _NAME_RE.match(rest)
            if found:
                name = found.group("name").strip()
                process, rest = (None if name in _UNKNOWN else name), rest[found.end():]
        return GpuKernelEvent("xid", int(xid.group("xid")), normalize_bus(xid.group("bus")), pid, process,
                              rest.strip(), uptime, wall, stripped)
    fallen = FALLEN_RE.match(body)
    if fallen is not None:
        return GpuKernelEvent("fallen_off_bus", None, normalize_bus(fallen.group("bus")), None, None,
                              body[len("NVRM:"):].strip(), uptime, wall, stripped)
    return None


def parse_kernel_log(text: str) -> list[GpuKernelEvent]:
    """Every Xid and bus-loss line of a kernel log, in order; anything else is skipped. A message the driver
    wrote over several ``NVRM:`` lines is read as one (see ``join_continued``)."""
    if not isinstance(text, str):
        return []
    events = []
    for line in join_continued(text.replace("\r\n", "\n").replace("\r", "\n").split("\n")):
        event = parse_line(line)
        if event is not None:
            events.append(event)
    return events


# How a continued NVRM message goes on: lower case or a parenthesis, after a line that did not end a sentence.
_CONTINUES_RE = re.compile(r"^NVRM:\s+[a-z(]")
_ENDED_RE = re.compile(r"[.!:]\s*$")


def join_continued(lines: list[str]) -> list[str]:
    """Lines with the driver's multi-line messages joined: newer drivers print a bus loss as ``NVRM: The NVIDIA
    GPU 0000:b3:00.0`` / ``NVRM: (PCI ID: 10de:26b5) installed in this system has`` / ``NVRM: fallen off the
    bus and is not responding to commands.`` (tests/fixtures/kernel-log/dmesg_570_fallen-off-bus-three-lines.txt),
    the later lines indented in dmesg, stamped again in the journal. The first line keeps its stamp."""
    joined: list[str] = []
    for line in lines:
        at = line.find("NVRM:")
        previous = joined[-1] if joined else ""
        before = previous.find("NVRM:")
        if at >= 0 and before >= 0 and _CONTINUES_RE.match(line[at:]) and not _ENDED_RE.search(previous):
            joined[-1] = previous.rstrip() + " " + line[at + len("NVRM:"):].strip()
        else:
            joined.append(line)
    return joined


def summarize_events(events: list[GpuKernelEvent]) -> list[dict[str, Any]]:
    """One entry per (kind, xid, GPU), in order of first appearance: count, first and last stamps,
    the first message and the processes named."""
    groups: dict[tuple[str, int | None, str | None], dict[str, Any]] = {}
    for event in events:
        key = (event.kind, event.xid, event.pci_bus_id)
        entry = groups.get(key)
        if entry is None:
            entry = groups[key] = {
                "kind": event.kind, "xid": event.xid, "pci_bus_id": event.pci_bus_id, "count": 0,
                "first_uptime_s": event.uptime_s, "last_uptime_s": event.uptime_s,
                "first_time": event.time, "last_time": event.time, "message": event.message, "processes": [],
            }
        entry["count"] += 1
        if event.uptime_s is not None:
            entry["last_uptime_s"] = event.uptime_s
            if entry["first_uptime_s"] is None:
                entry["first_uptime_s"] = event.uptime_s
        if event.time is not None:
            entry["last_time"] = event.time
            if entry["first_time"] is None:
                entry["first_time"] = event.time
        if event.process and event.process not in entry["processes"]:
            entry["processes"].append(event.process)
    return list(groups.values())
