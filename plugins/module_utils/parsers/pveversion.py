"""pveversion's output, which only a Proxmox VE node prints (pve-manager's ``bin/pveversion``).

Pure: text in, data out. ``pveversion`` prints one line, ``pve-manager/8.3.2/3e76eec21c4a14a7 (running kernel:
6.8.12-5-pve)``; ``pveversion -v`` a line per package, ``proxmox-ve: 8.3.0 (running kernel: 6.8.12-5-pve)`` and
``pve-manager: 8.3.2 (running version: 8.3.2/3e76eec2)`` first.

Output:

* ``parse_pveversion(text) -> {version, build, kernel}``: pve-manager's running version and build (-v without a
  running version: the installed version, build null) and the running kernel; each null where the text does not
  state it (``pveversion -v | grep kernel`` keeps no pve-manager line). Never raises.
* ``looks_like_pveversion(text) -> bool``: the text holds pveversion's own line, or -v's proxmox-ve or pve-manager
  line, at the start of a line.
"""

from __future__ import annotations

import re

PVEVERSION = re.compile(r"pve-manager/(?P<version>[0-9][^/\s]*)(?:/(?P<build>\S+))?"
                        r"(?:\s+\(running kernel:\s*(?P<kernel>[^)\s]+)\))?")
# -v: proxmox-ve's line with the running kernel; pve-manager's with the version its daemons run, the build cut to 8
# hex digits.
_PROXMOX_VE_LINE = re.compile(r"^[^\S\n]*proxmox-ve: [0-9]\S* \(running kernel: (?P<kernel>[^)\s]+)\)", re.MULTILINE)
_MANAGER_LINE = re.compile(r"^[^\S\n]*pve-manager: (?P<package>[0-9]\S*)"
                           r"(?: \(running version: (?P<version>[0-9][^/\s)]*)(?:/(?P<build>[^)\s]+))?\))?",
                           re.MULTILINE)
# What only pveversion prints, at the start of a line: its one line (with the build's hex id), or -v's two first.
_PVEVERSION_MARK = re.compile(r"^[^\S\n]*(?:pve-manager/[0-9][^/\s]*/[0-9a-f]{6,40} \(running kernel: |"
                              r"proxmox-ve: [0-9]\S* \(running kernel: |pve-manager: [0-9]\S* \(running version: )",
                              re.MULTILINE)


def parse_pveversion(text: str) -> dict[str, str | None]:
    """Version, build and kernel of ``pveversion`` or ``pveversion -v`` (the module text), null where not stated."""
    match = PVEVERSION.search(text)
    if match:
        return {"version": match.group("version"), "build": match.group("build"), "kernel": match.group("kernel")}
    manager = _MANAGER_LINE.search(text)
    kernel = _PROXMOX_VE_LINE.search(text)
    return {"version": (manager.group("version") or manager.group("package")) if manager else None,
            "build": manager.group("build") if manager else None,
            "kernel": kernel.group("kernel") if kernel else None}


def looks_like_pveversion(text: str) -> bool:
    """Whether the text holds pveversion's own output (its line, or -v's proxmox-ve or pve-manager line), which only
    a Proxmox VE node prints."""
    return _PVEVERSION_MARK.search(text) is not None
