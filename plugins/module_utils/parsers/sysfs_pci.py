"""sysfs PCI attributes: ``resource`` and the link speed and width files.

Pure parsers from the text of ``/sys/bus/pci/devices/<bdf>/<attribute>``:

* ``parse_resource(text)``: a list of ``Bar``, one per non-empty line of
  ``resource``: index (the line), kind (``bar``, ``rom``, ``sriov_bar`` or
  ``bridge_window``), start, end, size (bytes), flags (the kernel's
  ``IORESOURCE_*`` bits) and what they say: io, mem, prefetchable, mem64,
  disabled, unset.
* ``parse_link_speed(text)``: ``current_link_speed`` / ``max_link_speed`` in
  GT/s, None when the kernel says Unknown; ``link_gen`` turns a rate into the
  PCIe generation (1 to 6).
* ``parse_link_width(text)``: ``current_link_width`` / ``max_link_width`` in
  lanes, None for a link that is down.

Each raises ``PciParseError`` for text that is not the attribute it reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import PciParseError, valid_link_width

# The PCIe generation of each per-lane rate in GT/s.
_GENERATIONS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}

# include/linux/ioport.h
IORESOURCE_IO = 0x00000100
IORESOURCE_MEM = 0x00000200
IORESOURCE_PREFETCH = 0x00002000
IORESOURCE_READONLY = 0x00004000
IORESOURCE_MEM_64 = 0x00100000
IORESOURCE_DISABLED = 0x10000000
IORESOURCE_UNSET = 0x20000000


@dataclass
class Bar:
    """One non-empty line of sysfs ``resource``."""

    index: int
    kind: str
    start: int
    end: int
    size: int
    flags: int
    io: bool
    mem: bool
    prefetchable: bool
    mem64: bool
    disabled: bool
    unset: bool


_RESOURCE_LINE_RE = re.compile(r"^0x(?P<start>[0-9a-fA-F]+)\s+0x(?P<end>[0-9a-fA-F]+)\s+0x(?P<flags>[0-9a-fA-F]+)$")


def parse_resource(text: str) -> list[Bar]:
    """Decode sysfs ``resource``: one ``start end flags`` line per resource.

    Lines 0-5 are the BARs, 6 the expansion ROM. After that the layout depends
    on the device and kernel: with SR-IOV support compiled in (13 lines for
    endpoints, 17 for bridges) lines 7-12 are the VF BARs and 13-16 a bridge's
    windows; without it (7 or 11 lines) lines 7-10 are the bridge windows.
    Empty lines (all zero) are left out.
    """
    if not isinstance(text, str):
        raise PciParseError(f"expected the resource file as text, found {type(text).__name__}")
    lines = [line.strip() for line in text.strip().splitlines()]
    if not lines or lines == [""]:
        raise PciParseError(
            "expected lines of 'start end flags' in hex (sysfs resource), found nothing; "
            "read /sys/bus/pci/devices/<bdf>/resource"
        )
    with_sriov = len(lines) >= 13
    bars = []
    for index, line in enumerate(lines):
        match = _RESOURCE_LINE_RE.match(line)
        if match is None:
            raise PciParseError(
                f"expected 'start end flags' as three 0x-prefixed hex numbers on resource line {index}, "
                f"found {line[:80]!r}; pass the file as the kernel wrote it"
            )
        start, end, flags = (int(match[name], 16) for name in ("start", "end", "flags"))
        if start == 0 and end == 0 and flags == 0:
            continue
        if end < start:
            raise PciParseError(
                f"expected end >= start on resource line {index}, found start {start:#x} end {end:#x}"
            )
        bars.append(
            Bar(
                index=index,
                kind=_resource_kind(index, with_sriov),
                start=start,
                end=end,
                size=end - start + 1,
                flags=flags,
                io=bool(flags & IORESOURCE_IO),
                mem=bool(flags & IORESOURCE_MEM),
                prefetchable=bool(flags & IORESOURCE_PREFETCH),
                mem64=bool(flags & IORESOURCE_MEM_64),
                disabled=bool(flags & IORESOURCE_DISABLED),
                unset=bool(flags & IORESOURCE_UNSET),
            )
        )
    return bars


def _resource_kind(index: int, with_sriov: bool) -> str:
    if index < 6:
        return "bar"
    if index == 6:
        return "rom"
    if with_sriov and index < 13:
        return "sriov_bar"
    return "bridge_window"


_SYSFS_SPEED_RE = re.compile(r"^(?P<speed>[0-9]+(?:\.[0-9]+)?)\s*GT/s(?:\s+PCIe)?$", re.IGNORECASE)


def parse_link_speed(text: str) -> float | None:
    """``current_link_speed`` / ``max_link_speed`` in GT/s; None for "Unknown" and friends."""
    if not isinstance(text, str):
        raise PciParseError(f"expected a link speed as text like '16.0 GT/s PCIe', found {type(text).__name__}")
    value = text.strip()
    if value.lower().startswith("unknown"):
        return None
    match = _SYSFS_SPEED_RE.match(value)
    if match is None:
        raise PciParseError(
            f"expected a link speed like '16.0 GT/s PCIe', '8 GT/s' or 'Unknown', found {text[:80]!r}"
        )
    speed = float(match["speed"])
    return speed if speed > 0 else None


def link_gen(speed_gts: float | None) -> int | None:
    """PCIe generation of a per-lane rate: 2.5 -> 1 ... 64 -> 6; None when not one of those."""
    if speed_gts is None or isinstance(speed_gts, bool) or not isinstance(speed_gts, (int, float)):
        return None
    for rate, generation in _GENERATIONS.items():
        if abs(rate - speed_gts) < 0.01:
            return generation
    return None


def parse_link_width(text: str) -> int | None:
    """``current_link_width`` / ``max_link_width`` in lanes; None for 0 (link down) and 255."""
    if not isinstance(text, str):
        raise PciParseError(f"expected a link width as text like '16', found {type(text).__name__}")
    value = text.strip().lower()
    value = value[1:] if value.startswith("x") else value
    if not value.isdigit() or not value.isascii():
        raise PciParseError(f"expected a link width like '16' or 'x16', found {text[:80]!r}")
    return valid_link_width(int(value))
