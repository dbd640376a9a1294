#!/usr/bin/env python3
"""Write the sysfs part of a host capture (tests/captures/*.json), with its /proc/cmdline and
/proc/cpuinfo, as a directory tree for gpu_passthrough_host's sysfs_root: files as files, symlinks as
symlinks, listed directory entries as entries (IOMMU group members as links to their device, as the
kernel shows them).

--host-drivers binds every NVIDIA function to the driver a host without passthrough gives it
(nouveau for the GPU, snd_hda_intel for its audio...), the state before the role runs.
--group BDF=GROUP moves a device into another IOMMU group (a GPU sharing its group with a NIC).
--cmdline TEXT replaces the kernel command line (proc/cmdline; proc/cpuinfo comes from the capture).

Runs on the test container too: the standard library of Debian 12's Python only.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path

PCI_DIR = "/sys/bus/pci/devices"
GROUPS_DIR = "/sys/kernel/iommu_groups"
HOST_DRIVERS = {"0x0300": "nouveau", "0x0302": "nouveau", "0x0403": "snd_hda_intel", "0x0c03": "xhci_hcd",
                "0x0c80": "nvidia-gpu"}


def _bytes(value: object) -> bytes | None:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and "base64" in value:
        return base64.b64decode(value["base64"])
    return None  # absent, or an error the capture recorded


def regroup(capture: dict, moves: dict[str, str]) -> None:
    dirs, links = capture["dirs"], capture["links"]
    for bdf, group in moves.items():
        for path, members in dirs.items():
            if path.startswith(GROUPS_DIR + "/") and isinstance(members, list) and bdf in members:
                members.remove(bdf)
        dirs.setdefault(f"{GROUPS_DIR}/{group}/devices", []).append(bdf)
        dirs.setdefault(GROUPS_DIR, [])
        if group not in dirs[GROUPS_DIR]:
            dirs[GROUPS_DIR].append(group)
        links[f"{PCI_DIR}/{bdf}/iommu_group"] = f"../../../../kernel/iommu_groups/{group}"


def host_drivers(capture: dict) -> None:
    files, links = capture["files"], capture["links"]
    for bdf in capture["dirs"].get(PCI_DIR) or []:
        vendor = (files.get(f"{PCI_DIR}/{bdf}/vendor") or "").strip()
        class_code = (files.get(f"{PCI_DIR}/{bdf}/class") or "").strip()[:6]
        if vendor == "0x10de" and class_code in HOST_DRIVERS:
            links[f"{PCI_DIR}/{bdf}/driver"] = f"../../../../bus/pci/drivers/{HOST_DRIVERS[class_code]}"


def write_tree(capture: dict, root: Path) -> None:
    for path, value in capture.get("files", {}).items():
        data = _bytes(value)
        if data is not None and path.startswith(("/sys/", "/proc/cmdline", "/proc/cpuinfo")):
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    for path, target in capture.get("links", {}).items():
        if isinstance(target, str) and path.startswith("/sys/"):
            link = root / path.lstrip("/")
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink():
                link.unlink()
            os.symlink(target, link)
    for path, entries in capture.get("dirs", {}).items():
        if not isinstance(entries, list) or not path.startswith("/sys/"):
            continue
        directory = root / path.lstrip("/")
        directory.mkdir(parents=True, exist_ok=True)
        for name in entries:
            entry = directory / name
            if entry.exists() or entry.is_symlink():
                continue
            if path.startswith(GROUPS_DIR + "/"):
                os.symlink(f"../../../../bus/pci/devices/{name}", entry)
            else:
                entry.mkdir(parents=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path)
    parser.add_argument("root", type=Path)
    parser.add_argument("--host-drivers", action="store_true")
    parser.add_argument("--group", action="append", default=[], metavar="BDF=GROUP")
    parser.add_argument("--cmdline")
    args = parser.parse_args(argv)
    capture = json.loads(args.capture.read_text(encoding="utf-8"))
    if args.cmdline is not None:
        capture["files"]["/proc/cmdline"] = args.cmdline + "\n"
    regroup(capture, dict(move.split("=", 1) for move in args.group))
    if args.host_drivers:
        host_drivers(capture)
    write_tree(capture, args.root)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
