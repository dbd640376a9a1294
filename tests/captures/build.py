#!/usr/bin/env python3
"""Build the host captures in tests/captures/ from compact host descriptions.

A capture (format "gpuhost-capture/1", see plugins/module_utils/audit/source.py) holds
what the audit read from one host: files, directory listings, symlink targets,
real paths, command outputs and an NVML snapshot. The hosts below are described
the way one would draw them on a whiteboard: PCI devices with their ids, driver,
link, BARs and the bridges above them, GPUs with what NVML reports. This file
turns each description into the exact bytes a host would have shown: the binary
config space (header, capability list, PCI Express capability, ACS and
Resizable BAR extended capabilities), sysfs attribute text, and nvidia-smi's and
lspci's output formats. SOURCES.md says which public report each host follows.

Usage, from the repository root:

    python tests/captures/build.py           write every described capture
    python tests/captures/build.py --check   exit 1 when a committed capture differs
    python tests/captures/build.py --live NAME --note TEXT
                                             capture THIS machine the way the
                                             module's save_capture does

The committed JSON files are the test data; tests/unit/audit/test_captures.py fails
when they drift from what this file produces.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def _import_module_utils() -> None:
    """Make ansible_collections.gpuhost.gpu.plugins.module_utils importable, as tests/conftest.py does."""
    path = str(ROOT / "collections")
    if path not in sys.path:
        sys.path.insert(0, path)


_import_module_utils()

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_query import QUERY_GPU_FIELDS  # noqa: E402
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import CAPTURE_FORMAT, command_key, encode_bytes  # noqa: E402
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import FABRIC_MANAGER, JOURNAL  # noqa: E402
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_health import HEALTH_QUERY_FIELDS  # noqa: E402

PCI = "/sys/bus/pci/devices"
DMI = "/sys/class/dmi/id"
GROUPS = "/sys/kernel/iommu_groups"
MIB = 1 << 20
GIB = 1 << 30

# ---------------------------------------------------------------------------
# PCI building blocks

# Link speed in GT/s -> the encoding of Link Capabilities / Link Status.
SPEED_CODES = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
PORT_TYPES = {"endpoint": 0x0, "legacy_endpoint": 0x1, "root_port": 0x4, "upstream_port": 0x5,
              "downstream_port": 0x6}
ACS_BITS = {"SV": 0x01, "TB": 0x02, "RR": 0x04, "CR": 0x08, "UF": 0x10, "EC": 0x20, "DT": 0x40}
# What the kernel switches on at a port that supports it once an IOMMU is active
# (drivers/pci/pci.c, pci_std_enable_acs): source validation, request and
# completion redirect, upstream forwarding.
KERNEL_ACS = frozenset({"SV", "RR", "CR", "UF"})


@dataclass(frozen=True)
class Link:
    """A PCIe link as the device's Link Capabilities and Link Status registers say."""

    speed: float  # GT/s the link trained to
    width: int
    max_speed: float
    max_width: int


@dataclass(frozen=True)
class Bar:
    """One BAR (or the expansion ROM) of a function, with its size in bytes."""

    index: int
    size: int
    kind: str = "mem64"  # mem64 | mem32 | io | rom (index 6: the expansion ROM)
    prefetchable: bool = True


@dataclass(frozen=True)
class Rebar:
    """One BAR of the Resizable BAR capability: its size now and the largest it supports."""

    bar: int
    size: int
    max_size: int
    min_size: int = 64 * MIB


@dataclass(frozen=True)
class Acs:
    """Access Control Services: the bits a port supports and the bits switched on."""

    cap: frozenset[str]
    ctrl: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Dev:
    """One PCI function. ``parent`` is the bridge above it (None on a root bus)."""

    bdf: str
    vendor: int
    device: int
    cls: int
    name: str  # as lspci names it, vendor first
    parent: str | None = None
    driver: str | None = None
    subsystem: tuple[int, int] = (0, 0)
    revision: int = 0
    port: str | None = None  # PCI Express port type; None: a conventional PCI function
    link: Link | None = None
    acs: Acs | None = None
    bars: tuple[Bar, ...] = ()
    rebar: tuple[Rebar, ...] = ()
    secondary: int | None = None  # bridges: the bus behind them
    numa: int = -1
    cpulist: str = ""
    group: str | None = None
    multifunction: bool = False
    gpu: Gpu | None = None
    # PCIe AER counters since boot (sysfs aer_dev_<kind>): (kind, name, count) for the non-zero ones.
    aer: tuple[tuple[str, str, int], ...] = ()

    @property
    def is_bridge(self) -> bool:
        return self.secondary is not None

    @property
    def nvidia(self) -> bool:
        return self.vendor == 0x10DE


@dataclass(frozen=True)
class GpuModel:
    """What one GPU model reports, wherever it sits."""

    name: str
    device: int
    cls: int
    lspci_name: str
    subsystem: tuple[int, int]
    compute_capability: tuple[int, int]
    memory_mib: int
    bar0: int
    bar1: int
    bar1_max: int
    bar3: int = 32 * MIB
    io_bar: bool = False
    gen: int = 4
    brand: int = 0
    ecc: int | None = None  # None: the GPU has no ECC mode (NVML says NotSupported)
    mig: int | None = None
    audio: tuple[int, str] | None = None  # the HDA function's device id and name


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML enumerates it."""

    index: int
    model: GpuModel
    uuid: str
    persistence: int = 1
    gen: int | None = None  # current link generation NVML reports; None: the model's
    virtualization_mode: int = 0
    nvlinks: tuple[tuple[bool, str | None], ...] = ()  # (active, remote bus id) per link
    # NVML health readings that differ from a healthy, idle GPU of its model (see nvml_health).
    health: tuple[tuple[str, Any], ...] = ()


H100_SXM = GpuModel(
    name="NVIDIA H100 80GB HBM3", device=0x2330, cls=0x030200, lspci_name="GH100 [H100 SXM5 80GB]",
    subsystem=(0x10DE, 0x16C1), compute_capability=(9, 0), memory_mib=81559, bar0=16 * MIB,
    bar1=128 * GIB, bar1_max=128 * GIB, gen=5, brand=14, ecc=1, mig=0)
RTX_PRO_6000_SE = GpuModel(
    name="NVIDIA RTX PRO 6000 Blackwell Server Edition", device=0x2BB5, cls=0x030200,
    lspci_name="GB202GL [RTX PRO 6000 Blackwell Server Edition]", subsystem=(0x10DE, 0x204E),
    compute_capability=(12, 0), memory_mib=97887, bar0=64 * MIB, bar1=128 * GIB, bar1_max=128 * GIB, gen=5,
    brand=13, ecc=1, mig=0)
RTX_PRO_6000_MAXQ = GpuModel(
    name="NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", device=0x2BB4, cls=0x030000,
    lspci_name="GB202GL [RTX PRO 6000 Blackwell Max-Q Workstation Edition]", subsystem=(0x10DE, 0x204C),
    compute_capability=(12, 0), memory_mib=97887, bar0=64 * MIB, bar1=128 * GIB, bar1_max=128 * GIB, io_bar=True,
    gen=5, brand=13, ecc=0, mig=0, audio=(0x22E8, "GB202 High Definition Audio Controller"))
RTX_A6000 = GpuModel(
    name="NVIDIA RTX A6000", device=0x2230, cls=0x030000, lspci_name="GA102GL [RTX A6000]",
    subsystem=(0x10DE, 0x1459), compute_capability=(8, 6), memory_mib=49140, bar0=16 * MIB, bar1=256 * MIB,
    bar1_max=64 * GIB, io_bar=True, gen=4, brand=13, ecc=0, mig=None,
    audio=(0x1AEF, "GA102 High Definition Audio Controller"))
RTX_4090 = GpuModel(
    name="NVIDIA GeForce RTX 4090", device=0x2684, cls=0x030000, lspci_name="AD102 [GeForce RTX 4090]",
    subsystem=(0x10B0, 0xF297), compute_capability=(8, 9), memory_mib=24564, bar0=16 * MIB, bar1=256 * MIB,
    bar1_max=32 * GIB, io_bar=True, gen=4, brand=5, ecc=0, mig=None,
    audio=(0x22BA, "AD102 High Definition Audio Controller"))


def gpu_uuid(host: str, bdf: str) -> str:
    """Stable, made-up GPU UUIDs: the captures must not change between builds."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'gpuhost-capture/{host}/{bdf}')}"


def gpu_functions(host: str, bdf: str, index: int, model: GpuModel, parent: str | None, *, link: Link | None,
                  driver: str | None, numa: int = -1, cpulist: str = "", group: str | None = None,
                  audio_driver: str | None = "snd_hda_intel", **gpu: Any) -> list[Dev]:
    """A GPU (and its audio function, when the model has one) as PCI functions."""
    bars = [Bar(0, model.bar0, "mem32", False), Bar(1, model.bar1), Bar(3, model.bar3)]
    if model.io_bar:
        bars.append(Bar(5, 128, "io", False))
    bars.append(Bar(6, 512 * 1024, "rom", False))  # the expansion ROM, disabled
    port = "legacy_endpoint" if model.cls == 0x030000 else "endpoint"
    functions = [Dev(
        bdf=bdf, vendor=0x10DE, device=model.device, cls=model.cls, revision=0xA1,
        name=f"NVIDIA Corporation {model.lspci_name}", parent=parent, driver=driver, subsystem=model.subsystem,
        port=port if link else None, link=link, bars=tuple(bars),
        rebar=(Rebar(1, model.bar1, model.bar1_max),) if link else (), numa=numa, cpulist=cpulist, group=group,
        multifunction=model.audio is not None,
        gpu=Gpu(index=index, model=model, uuid=gpu_uuid(host, bdf), **gpu))]
    if model.audio is not None:
        device, name = model.audio
        functions.append(Dev(
            bdf=bdf[:-1] + "1", vendor=0x10DE, device=device, cls=0x040300, revision=0xA1,
            name=f"NVIDIA Corporation {name}", parent=parent, driver=audio_driver, subsystem=model.subsystem,
            port="endpoint" if link else None, link=link, bars=(Bar(0, 16 * 1024, "mem32", False),), numa=numa,
            cpulist=cpulist, group=group, multifunction=True))
    return functions


# ---------------------------------------------------------------------------
# Config space, as the kernel hands it out of /sys/bus/pci/devices/<bdf>/config


def _put16(buf: bytearray, offset: int, value: int) -> None:
    struct.pack_into("<H", buf, offset, value)


def _put32(buf: bytearray, offset: int, value: int) -> None:
    struct.pack_into("<I", buf, offset, value)


# Where the capabilities sit: endpoints as NVIDIA GPUs lay them out (PM at 0x60, MSI at 0x68, PCI
# Express at 0x78, Resizable BAR at 0xbb0); bridges use the common
# 0x40/0x50/0x60 layout and ACS right after AER.
GPU_LAYOUT = {"pm": 0x60, "msi": 0x68, "express": 0x78, "aer": 0x100, "rebar": 0xBB0}
BRIDGE_LAYOUT = {"pm": 0x40, "msi": 0x50, "express": 0x60, "aer": 0x100, "acs": 0x148}


def config_space(dev: Dev, addresses: dict[int, int], size: int) -> bytes:
    """The device's config space: the header, the capability list and the extended capabilities.

    ``size`` is what the reader gets: 4096 as root on PCI Express, 256 as root
    on conventional PCI, 64 without root (the header only).
    """
    buf = bytearray(4096)
    layout = BRIDGE_LAYOUT if dev.is_bridge else GPU_LAYOUT
    _put16(buf, 0x00, dev.vendor)
    _put16(buf, 0x02, dev.device)
    io = any(bar.kind == "io" for bar in dev.bars)
    _put16(buf, 0x04, 0x0406 | (0x0001 if io else 0))  # memory, bus master, INTx off (MSI)
    _put16(buf, 0x06, 0x0010)  # capability list present
    buf[0x08] = dev.revision
    buf[0x09], buf[0x0A], buf[0x0B] = dev.cls & 0xFF, (dev.cls >> 8) & 0xFF, dev.cls >> 16
    buf[0x0C] = 0x10
    buf[0x0E] = (0x01 if dev.is_bridge else 0x00) | (0x80 if dev.multifunction else 0)
    if dev.is_bridge:
        bus = int(dev.bdf[5:7], 16)
        buf[0x18], buf[0x19], buf[0x1A] = bus, dev.secondary or 0, dev.secondary or 0
    else:
        for bar in dev.bars:
            address = addresses.get(bar.index, 0)
            register = 0x10 + 4 * bar.index
            if bar.kind == "rom":
                _put32(buf, 0x30, address)  # enable bit clear: the ROM is not decoded
            elif bar.kind == "io":
                _put32(buf, register, address | 0x1)
            elif bar.kind == "mem32":
                _put32(buf, register, address | (0x8 if bar.prefetchable else 0))
            else:
                _put32(buf, register, (address & 0xFFFFFFF0) | 0x4 | (0x8 if bar.prefetchable else 0))
                _put32(buf, register + 4, address >> 32)
        _put16(buf, 0x2C, dev.subsystem[0])
        _put16(buf, 0x2E, dev.subsystem[1])
    buf[0x3C], buf[0x3D] = 0xFF, 0x01

    caps = [("pm", 0x01), ("msi", 0x05)] + ([("express", 0x10)] if dev.port else [])
    buf[0x34] = layout[caps[0][0]]
    for position, (key, cap_id) in enumerate(caps):
        at = layout[key]
        buf[at] = cap_id
        buf[at + 1] = layout[caps[position + 1][0]] if position + 1 < len(caps) else 0
    _put16(buf, layout["pm"] + 2, 0x0003)  # PM version 3
    _put16(buf, layout["msi"] + 2, 0x0180)  # 64-bit, per-vector masking
    if dev.port:
        _express_capability(buf, layout["express"], dev)

    if dev.port:  # extended capabilities exist only behind a PCI Express capability
        ext = [("aer", 0x0001, 2)]
        if dev.acs is not None:
            ext.append(("acs", 0x000D, 1))
        if dev.rebar:
            ext.append(("rebar", 0x0015, 1))
        for position, (key, cap_id, version) in enumerate(ext):
            next_at = layout[ext[position + 1][0]] if position + 1 < len(ext) else 0
            _put32(buf, layout[key], cap_id | (version << 16) | (next_at << 20))
        if dev.acs is not None:
            _put16(buf, layout["acs"] + 4, _acs_bits(dev.acs.cap))
            _put16(buf, layout["acs"] + 6, _acs_bits(dev.acs.ctrl))
        for entry, rebar in enumerate(dev.rebar):
            at = layout["rebar"] + 4 + 8 * entry
            supported = 0
            for power in range(rebar.min_size.bit_length() - 21, rebar.max_size.bit_length() - 20):
                supported |= 1 << (power + 4)
            control = rebar.bar | (rebar.size.bit_length() - 21) << 8
            if entry == 0:
                control |= len(dev.rebar) << 5
            _put32(buf, at, supported)
            _put32(buf, at + 4, control)
    if not dev.port:
        size = min(size, 256)  # no extended config space on conventional PCI
    return bytes(buf[:size])


def _acs_bits(names: Iterable[str]) -> int:
    value = 0
    for name in names:
        value |= ACS_BITS[name]
    return value


def _express_capability(buf: bytearray, at: int, dev: Dev) -> None:
    port_type = PORT_TYPES[dev.port or "endpoint"]
    slot = port_type in (0x4, 0x6)
    _put16(buf, at + 0x02, 0x2 | (port_type << 4) | (0x100 if slot else 0))
    _put32(buf, at + 0x04, 0x1 | (0x10000000 if port_type in (0x0, 0x1) else 0))  # MPS 256, FLR on endpoints
    _put16(buf, at + 0x08, 0x2830)
    link = dev.link
    if link is not None:
        max_code = SPEED_CODES[link.max_speed]
        port_number = int(dev.bdf[8:10], 16) if slot else 0
        _put32(buf, at + 0x0C, max_code | (link.max_width << 4) | (0x3 << 10) | (port_number << 24))
        status = SPEED_CODES[link.speed] | (link.width << 4)
        if slot:
            status |= 0x2000  # Data Link Layer Link Active
        _put16(buf, at + 0x12, status)
        _put32(buf, at + 0x2C, ((1 << max_code) - 1) << 1)  # Link Capabilities 2: supported speeds
        _put16(buf, at + 0x30, max_code)  # Link Control 2: target speed


# ---------------------------------------------------------------------------
# sysfs attribute text


def resource_text(dev: Dev, addresses: dict[int, int]) -> str:
    """/sys/bus/pci/devices/<bdf>/resource: 13 lines (6 BARs, ROM, 6 SR-IOV BARs)."""
    lines = []
    bars = {bar.index: bar for bar in dev.bars}
    for index in range(13):
        bar = bars.get(index)
        if bar is None:
            lines.append(f"0x{0:016x} 0x{0:016x} 0x{0:016x}")
            continue
        start = addresses[index]
        if bar.kind == "rom":
            flags = 0x46200
        elif bar.kind == "io":
            flags = 0x40101
        elif bar.kind == "mem32":
            flags = 0x40200 | (0x2008 if bar.prefetchable else 0)
        else:
            flags = 0x140204 | (0x2008 if bar.prefetchable else 0)
        lines.append(f"0x{start:016x} 0x{start + bar.size - 1:016x} 0x{flags:016x}")
    return "\n".join(lines) + "\n"


def speed_text(speed: float) -> str:
    """current_link_speed / max_link_speed as the kernel prints them: "2.5 GT/s PCIe", "32.0 GT/s PCIe"."""
    return f"{speed:g} GT/s PCIe\n" if speed == 2.5 else f"{speed:.1f} GT/s PCIe\n"


# ---------------------------------------------------------------------------
# Host descriptions


@dataclass
class Host:
    """One host: its PCI functions and what its files, commands and NVML say."""

    name: str
    note: str
    devices: list[Dev]
    cpuinfo: str
    cmdline: str
    meminfo: str
    dmi: dict[str, str | None]
    dmesg: dict[str, Any]  # a command result: {"rc", "stdout", "stderr"}
    detect_vm: str
    detect_container: str = "none"
    as_root: bool = True
    cgroup: str = "0::/init.scope\n"
    nodes: tuple[int, ...] = (0,)
    modules: tuple[str, ...] = ()
    iommu_hardware: tuple[str, ...] = ()
    group_type: str | None = None  # /sys/kernel/iommu_groups/<g>/type for every group
    nvml: dict[str, Any] = field(default_factory=dict)
    commands: dict[str, dict[str, Any]] = field(default_factory=dict)
    container_files: dict[str, str | None] = field(default_factory=dict)
    # Anything else the host shows the audit (a Proxmox node's VM configs): path -> text or None.
    extra_files: dict[str, str | None] = field(default_factory=dict)
    extra_dirs: dict[str, list[str] | None] = field(default_factory=dict)
    # /sys/module/nvidia/version, written when the nvidia module is in ``modules``.
    module_version: str | None = None
    # `systemctl is-active nvidia-fabricmanager` on hosts with NVSwitches: what it prints.
    fabric_manager: str | None = None
    # `journalctl -k -b --no-pager -q`, read by the audit when dmesg is refused.
    journal: dict[str, Any] | None = None


def _ok(stdout: str) -> dict[str, Any]:
    return {"rc": 0, "stdout": stdout, "stderr": ""}


def _failed(rc: int | None, stdout: str = "", stderr: str = "") -> dict[str, Any]:
    return {"rc": rc, "stdout": stdout, "stderr": stderr}


def _allocate(devices: Iterable[Dev]) -> dict[str, dict[int, int]]:
    """BAR addresses: each BAR aligned to its size, as firmware assigns them."""
    # Prefetchable 64-bit BARs go above 4 GiB; everything else that is memory below it.
    cursors = {"low": 0xA0000000, "high": 0x200000000000, "io": 0x1000}
    addresses: dict[str, dict[int, int]] = {}
    for dev in devices:
        own = addresses.setdefault(dev.bdf, {})
        for bar in sorted(dev.bars, key=lambda b: -b.size):
            region = "io" if bar.kind == "io" else "high" if bar.kind == "mem64" and bar.prefetchable else "low"
            align = bar.size if bar.kind == "io" else max(bar.size, 0x1000)
            start = (cursors[region] + align - 1) // align * align
            own[bar.index] = start
            cursors[region] = start + bar.size
    return addresses


def _sys_path(by_bdf: dict[str, Dev], dev: Dev) -> str:
    chain = [dev.bdf]
    parent = dev.parent
    while parent is not None:
        chain.append(parent)
        parent = by_bdf[parent].parent
    root = chain[-1]
    return f"/sys/devices/pci{root[:7]}/" + "/".join(reversed(chain))


def _up(path: str) -> str:
    """The "../" that lead from a sysfs device directory back to /sys."""
    return "../" * (path.count("/") - 1)


def capture(host: Host) -> dict[str, Any]:
    """Everything the audit reads from this host, as LiveSource(record=True) would record it."""
    files: dict[str, Any] = {}
    dirs: dict[str, Any] = {}
    links: dict[str, Any] = {}
    realpaths: dict[str, Any] = {}
    commands: dict[str, Any] = {}
    by_bdf = {dev.bdf: dev for dev in host.devices}
    addresses = _allocate(host.devices)

    def text(path: str, value: str | None) -> None:
        files[path] = None if value is None else encode_bytes(value.encode())

    text("/proc/cpuinfo", host.cpuinfo)
    text("/proc/cmdline", host.cmdline + "\n")
    text("/proc/meminfo", host.meminfo)
    text("/proc/1/cgroup", host.cgroup)
    for name in ("sys_vendor", "product_name", "product_version", "product_uuid", "bios_vendor", "bios_version",
                 "board_vendor", "board_name", "chassis_vendor"):
        value = host.dmi.get(name)
        if name == "product_uuid" and value is not None and not host.as_root:
            files[f"{DMI}/{name}"] = {"error": "PermissionError: Permission denied"}  # mode 0400
        else:
            text(f"{DMI}/{name}", None if value is None else value + "\n")
    for path in ("/run/.containerenv", "/run/systemd/container", "/.dockerenv"):
        text(path, host.container_files.get(path))

    commands["dmesg"] = host.dmesg
    if host.dmesg.get("rc") != 0:
        # A user outside the adm and systemd-journal groups sees no kernel lines in the journal either.
        commands[JOURNAL.key] = host.journal or _ok("")
    if "nvidia" in host.modules:
        text("/sys/module/nvidia/version", host.module_version + "\n" if host.module_version else None)
    if any(dev.nvidia and dev.cls >> 8 == 0x0680 for dev in host.devices):
        state = host.fabric_manager or "inactive"
        commands[FABRIC_MANAGER.key] = _ok(state + "\n") if state == "active" else _failed(3, state + "\n")
    commands["systemd-detect-virt --vm"] = _ok(host.detect_vm + "\n") if host.detect_vm != "none" \
        else _failed(1, "none\n")
    commands["systemd-detect-virt --container"] = _ok(host.detect_container + "\n") \
        if host.detect_container != "none" else _failed(1, "none\n")

    dirs["/sys/devices/system/node"] = sorted(
        ["has_cpu", "has_memory", "has_normal_memory", "online", "possible", "power", "uevent"]
        + [f"node{n}" for n in host.nodes])
    dirs["/sys/module"] = sorted(host.modules)
    dirs["/sys/class/iommu"] = sorted(host.iommu_hardware)
    groups: dict[str, list[str]] = {}
    for dev in host.devices:
        if dev.group is not None:
            groups.setdefault(dev.group, []).append(dev.bdf)
    dirs[GROUPS] = sorted(groups)
    for group, members in groups.items():
        dirs[f"{GROUPS}/{group}/devices"] = sorted(members)
        text(f"{GROUPS}/{group}/type", None if host.group_type is None else host.group_type + "\n")

    dirs[PCI] = sorted(by_bdf)
    read_config: set[str] = set()
    for dev in host.devices:
        base = f"{PCI}/{dev.bdf}"
        text(f"{base}/vendor", f"0x{dev.vendor:04x}\n")
        text(f"{base}/device", f"0x{dev.device:04x}\n")
        text(f"{base}/class", f"0x{dev.cls:06x}\n")
        if not dev.nvidia:
            continue
        read_config.add(dev.bdf)
        parent = dev.parent
        while parent is not None:
            read_config.add(parent)
            parent = by_bdf[parent].parent
        path = _sys_path(by_bdf, dev)
        realpaths[base] = path
        links[f"{base}/iommu_group"] = f"{_up(path)}kernel/iommu_groups/{dev.group}" if dev.group else None
        links[f"{base}/driver"] = f"{_up(path)}bus/pci/drivers/{dev.driver}" if dev.driver else None
        text(f"{base}/resource", resource_text(dev, addresses[dev.bdf]))
        link = dev.link
        text(f"{base}/current_link_speed", speed_text(link.speed) if link else None)
        text(f"{base}/max_link_speed", speed_text(link.max_speed) if link else None)
        text(f"{base}/current_link_width", f"{link.width}\n" if link else None)
        text(f"{base}/max_link_width", f"{link.max_width}\n" if link else None)
        text(f"{base}/numa_node", f"{dev.numa}\n")
        text(f"{base}/local_cpulist", dev.cpulist + "\n")
    for bdf in sorted(read_config):
        dev = by_bdf[bdf]
        size = 4096 if host.as_root else 64
        files[f"{PCI}/{bdf}/config"] = encode_bytes(config_space(dev, addresses[bdf], size))
        for kind in AER_TOTALS:
            # The kernel keeps AER counters for every PCIe function whose AER capability it drives.
            text(f"{PCI}/{bdf}/aer_dev_{kind}", aer_text(kind, dev.aer) if dev.link else None)
    if not host.as_root:
        commands[command_key(["lspci", "-vvv", "-D"])] = _ok(lspci_unprivileged(host.devices, addresses))

    for path, value in host.extra_files.items():
        text(path, value)
    dirs.update(host.extra_dirs)
    commands.update(host.commands)
    result: dict[str, Any] = {
        "format": CAPTURE_FORMAT,
        "note": host.note,
        "files": files,
        "dirs": dirs,
        "links": links,
        "realpaths": realpaths,
        "commands": commands,
    }
    if host.nvml:
        result["nvml"] = host.nvml
    return result


# ---------------------------------------------------------------------------
# NVML snapshots (the shape nvml.read_nvml returns) and nvidia-smi's text


AER_CORRECTABLE = ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr", "HeaderOF")
AER_UNCORRECTABLE = ("Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF", "MalfTLP",
                     "ECRC", "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked", "TLPBlockedErr",
                     "PoisonTLPBlocked")
AER_TOTALS = {"correctable": "TOTAL_ERR_COR", "nonfatal": "TOTAL_ERR_NONFATAL", "fatal": "TOTAL_ERR_FATAL"}


def aer_text(kind: str, counts: tuple[tuple[str, str, int], ...]) -> str:
    """sysfs aer_dev_<kind> as drivers/pci/pcie/aer.c prints it: every named bit, then the total."""
    mine = {name: count for k, name, count in counts if k == kind}
    names = AER_CORRECTABLE if kind == "correctable" else AER_UNCORRECTABLE
    return "".join(f"{name} {mine.get(name, 0)}\n" for name in names) + f"{AER_TOTALS[kind]} {sum(mine.values())}\n"


def gpus_of(devices: Iterable[Dev]) -> list[Dev]:
    return sorted((d for d in devices if d.gpu is not None), key=lambda d: d.gpu.index if d.gpu else 0)


def nvml_bus_id(bdf: str) -> str:
    """NVML's form of a PCI address: an 8-digit domain, uppercase hex."""
    return f"0000{bdf}".upper()


def nvml_snapshot(devices: list[Dev], *, driver: str, cuda: int, p2p: dict[str, Callable[[int, int], int]],
                  topology: Callable[[int, int], int]) -> dict[str, Any]:
    gpus = gpus_of(devices)
    snapshot: dict[str, Any] = {
        "driver_version": driver,
        "cuda_driver_version": cuda,
        "nvml_version": f"{cuda // 1000}.{driver}",
        "devices": [nvml_device(dev) for dev in gpus],
        "errors": {},
        "device_count": len(gpus),
        "matrix_gpus": list(range(len(gpus))),
    }
    indexes = range(len(gpus))
    snapshot["p2p"] = {cap: [[None if i == j else pair(i, j) for j in indexes] for i in indexes]
                       for cap, pair in p2p.items()}
    snapshot["topology"] = [[None if i == j else topology(i, j) for j in indexes] for i in indexes]
    return snapshot


def nvml_device(dev: Dev) -> dict[str, Any]:
    gpu = dev.gpu
    assert gpu is not None
    model = gpu.model
    errors = {}
    if model.mig is None:
        errors["mig"] = "NVMLError_NotSupported"
    if model.ecc is None:
        errors["ecc"] = "NVMLError_NotSupported"
    link = dev.link
    return {
        "index": gpu.index,
        "name": model.name,
        "uuid": gpu.uuid,
        "pci_bus_id": nvml_bus_id(dev.bdf),
        "compute_capability": list(model.compute_capability),
        "memory_total_bytes": model.memory_mib * MIB,
        "bar1_total_bytes": model.bar1 if link else 256 * MIB,
        "pcie_gen_current": gpu.gen if gpu.gen is not None else SPEED_CODES[link.speed] if link else model.gen,
        "pcie_gen_max": model.gen,
        "pcie_width_current": link.width if link else 16,
        "pcie_width_max": link.max_width if link else 16,
        "persistence_mode": gpu.persistence,
        "ecc_current": model.ecc,
        "mig_current": model.mig,
        "brand": model.brand,
        "virtualization_mode": gpu.virtualization_mode,
        "nvlinks": [{"link": n, "active": active, "remote_bus_id": remote}
                    for n, (active, remote) in enumerate(gpu.nvlinks)],
        "errors": errors,
        "health": nvml_health(gpu),
    }


def nvml_health(gpu: Gpu) -> dict[str, Any]:
    """What audit/nvml_health.read_device_health reads from an idle, healthy GPU of this model, then the GPU's
    own readings (``Gpu.health``). Page retirement is pre-Ampere only (every model here has row remapping
    instead, where it has ECC); fabric state is Hopper and newer."""
    model = gpu.model
    errors: dict[str, str] = {}
    not_supported = "NVMLError_NotSupported"
    ecc_on = model.ecc == 1
    reading: dict[str, Any] = {
        "ecc_mode_current": model.ecc, "ecc_mode_pending": model.ecc,
        "ecc_uncorrected_volatile": 0 if ecc_on else None, "ecc_uncorrected_aggregate": 0 if ecc_on else None,
        "ecc_corrected_volatile": 0 if ecc_on else None, "ecc_corrected_aggregate": 0 if ecc_on else None,
        "retired_pages_pending": None, "retired_pages_sbe": None, "retired_pages_dbe": None,
        "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": 0, "failure": 0} if ecc_on else None,
        "clocks_event_reasons": 0x1,
        "fabric": ({"state": 3, "status": 0} if gpu.nvlinks else {"state": 0, "status": 0})
        if model.compute_capability[0] >= 9 else None,
    }
    for label, value in reading.items():
        if value is None:
            errors["ecc_mode" if label.startswith("ecc_mode") else label] = not_supported
    reading.update(dict(gpu.health))
    reading["errors"] = {label: error for label, error in errors.items()
                         if reading.get(label if label != "ecc_mode" else "ecc_mode_current") is None}
    return reading


def lose_gpu(snapshot: dict[str, Any], index: int, error: str = "NVMLError_GpuIsLost") -> dict[str, Any]:
    """The snapshot read_nvml takes when GPU ``index``'s handle fails: NVML still counts it, its device
    entry is missing and the matrices cover the other GPUs only."""
    keep = [n for n in range(snapshot["device_count"]) if n != index]

    def without(matrix: list[list[Any]]) -> list[list[Any]]:
        return [[matrix[i][j] for j in keep] for i in keep]

    return {**snapshot, "devices": [d for d in snapshot["devices"] if d["index"] != index],
            "errors": {**snapshot["errors"], f"gpu{index}.handle": error}, "matrix_gpus": keep,
            "p2p": {cap: without(m) for cap, m in snapshot["p2p"].items()}, "topology": without(snapshot["topology"])}


P2P_LABELS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
P2P_LEGEND = ("\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n  CNS  = Chipset not supported\n"
              "  GNS  = GPU not supported\n  TNS  = Topology not supported\n  NS   = Not supported\n"
              "  DR   = Disabled by regkey\n  U    = Unknown\n")
TOPO_LEGEND = (
    "\nLegend:\n\n  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
    "  PIX  = Connection traversing at most a single PCIe bridge\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n")
TOPO_LABELS = {10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def smi_list(devices: list[Dev]) -> str:
    """nvidia-smi -L"""
    return "".join(f"GPU {d.gpu.index}: {d.gpu.model.name} (UUID: {d.gpu.uuid})\n"
                   for d in gpus_of(devices) if d.gpu)


def smi_query_gpu(devices: list[Dev], driver: str) -> str:
    """nvidia-smi --query-gpu=<QUERY_GPU_FIELDS> --format=csv,noheader,nounits"""
    lines = []
    for dev in gpus_of(devices):
        gpu = dev.gpu
        assert gpu is not None
        model = gpu.model
        word = {0: "Disabled", 1: "Enabled", None: "[N/A]"}
        values = {
            "index": str(gpu.index), "name": model.name, "uuid": gpu.uuid,
            "pci.bus_id": nvml_bus_id(dev.bdf), "compute_cap": "{}.{}".format(*model.compute_capability),
            "memory.total": str(model.memory_mib), "driver_version": driver,
            "pcie.link.gen.current": str(gpu.gen or model.gen), "pcie.link.gen.max": str(model.gen),
            "pcie.link.width.current": "16", "pcie.link.width.max": "16",
            "persistence_mode": word[gpu.persistence], "ecc.mode.current": word[model.ecc],
            "mig.mode.current": word[model.mig],
        }
        lines.append(", ".join(values[name] for name in QUERY_GPU_FIELDS))
    return "\n".join(lines) + "\n"


def smi_topo_p2p(count: int, pair: Callable[[int, int], int]) -> str:
    """nvidia-smi topo -p2p r|w|n|a"""
    names = [f"GPU{i}" for i in range(count)]
    out = " \t" + "".join(f"{name}\t" for name in names) + "\n"
    for i in range(count):
        cells = ["X" if i == j else P2P_LABELS[pair(i, j)] for j in range(count)]
        out += f" GPU{i}\t" + "".join(f"{cell}\t" for cell in cells) + "\n"
    return out + P2P_LEGEND


def smi_topo_matrix(count: int, level: Callable[[int, int], int], cpu_affinity: str, numa_affinity: str) -> str:
    """nvidia-smi topo -m (no NICs). A guest without NUMA information gets empty affinity cells."""
    names = [f"GPU{i}" for i in range(count)]
    out = "\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    for i in range(count):
        cells = [" X " if i == j else TOPO_LABELS[level(i, j)] for j in range(count)]
        out += f"GPU{i}\t" + "\t".join(cells) + f"\t{cpu_affinity}\t{numa_affinity}\t\tN/A\n"
    return out + TOPO_LEGEND


def smi_commands(devices: list[Dev], driver: str, p2p: dict[str, Callable[[int, int], int]],
                 topology: Callable[[int, int], int], cpu_affinity: str, numa_affinity: str) -> dict[str, Any]:
    """What the nvidia-smi fallback runs when NVML cannot be read, with nvidia-smi's answers."""
    count = len(gpus_of(devices))
    query = ["nvidia-smi", f"--query-gpu={','.join(QUERY_GPU_FIELDS)}", "--format=csv,noheader,nounits"]
    commands = {command_key(query): _ok(smi_query_gpu(devices, driver))}
    for cap, letter in (("read", "r"), ("write", "w"), ("nvlink", "n"), ("atomics", "a")):
        commands[f"nvidia-smi topo -p2p {letter}"] = _ok(smi_topo_p2p(count, p2p[cap]))
    commands["nvidia-smi topo -m"] = _ok(smi_topo_matrix(count, topology, cpu_affinity, numa_affinity))
    health = ["nvidia-smi", f"--query-gpu={','.join(HEALTH_QUERY_FIELDS)}", "--format=csv,noheader,nounits"]
    commands[command_key(health)] = _ok(smi_query_health(devices))
    return commands


def smi_query_health(devices: list[Dev]) -> str:
    """nvidia-smi --query-gpu=<HEALTH_QUERY_FIELDS> --format=csv,noheader,nounits, from the NVML readings."""
    lines = []
    for dev in gpus_of(devices):
        assert dev.gpu is not None
        raw = nvml_health(dev.gpu)

        def cell(key: str, words: tuple[str, str] | None = None, raw: dict[str, Any] = raw) -> str:
            value = raw.get(key)
            if value is None:
                return "[N/A]"
            return (words[1] if value else words[0]) if words else str(value)

        lines.append(", ".join([
            str(dev.gpu.index), nvml_bus_id(dev.bdf), cell("ecc_mode_current", ("Disabled", "Enabled")),
            cell("ecc_mode_pending", ("Disabled", "Enabled")), cell("ecc_uncorrected_volatile"),
            cell("ecc_uncorrected_aggregate"), cell("ecc_corrected_volatile"), cell("ecc_corrected_aggregate"),
            cell("retired_pages_pending", ("No", "Yes")), cell("retired_pages_sbe"), cell("retired_pages_dbe"),
            f"0x{raw['clocks_event_reasons']:016x}"]))
    return "\n".join(lines) + "\n"


# nvidia-smi -q -x as driver 590 writes it (DTD v13), shaped after tests/fixtures/nvidia-smi/
# q_550_2xH100-HBM3_fabric.xml and q_580_2xRTX-PRO-6000-Blackwell_vm-passthrough.txt.
SMI_BRANDS = {0: "Unknown", 1: "Quadro", 2: "Tesla", 5: "GeForce", 13: "NVIDIA RTX", 14: "NVIDIA", 15: "GeForce RTX"}
SMI_ARCHITECTURES = {12: "Blackwell", 10: "Blackwell", 9: "Hopper", 8: "Ampere"}
SMI_VIRTUALIZATION = {0: "None", 1: "Pass-Through", 2: "VGPU", 3: "Host VGPU", 4: "Host VSGA"}
SMI_REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown",
               "hw_power_brake_slowdown", "sync_boost", "sw_thermal_slowdown", "display_clocks_setting")
SMI_REASON_BITS = {"gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
                   "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
                   "hw_power_brake_slowdown": 0x80, "display_clocks_setting": 0x100}


def _xml(tag: str, body: Any, depth: int) -> str:
    """One element, nested as nvidia-smi nests them: a tab per level, a section's children on their own lines."""
    pad = "\t" * depth
    if isinstance(body, list):
        return f"{pad}<{tag}>\n" + "".join(_xml(t, b, depth + 1) for t, b in body) + f"{pad}</{tag}>\n"
    return f"{pad}<{tag}>{body}</{tag}>\n"


def smi_q_xml(devices: list[Dev], driver: str, cuda: str, timestamp: str, *, in_vm: bool) -> str:
    """nvidia-smi -q -x, from the same descriptions (and NVML health readings) as the other nvidia-smi outputs."""
    gpus = gpus_of(devices)
    out = ('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">\n<nvidia_smi_log>\n'
           + "".join(_xml(t, b, 1) for t, b in (("timestamp", timestamp), ("driver_version", driver),
                                                 ("cuda_version", cuda), ("attached_gpus", len(gpus)))))
    for dev in gpus:
        out += _smi_q_gpu(dev, driver, in_vm=in_vm)
    return out + "\n</nvidia_smi_log>\n"


def _smi_q_gpu(dev: Dev, driver: str, *, in_vm: bool) -> str:
    gpu = dev.gpu
    assert gpu is not None
    model, raw = gpu.model, nvml_health(gpu)
    word = {0: "Disabled", 1: "Enabled", None: "N/A"}

    def count(key: str) -> Any:
        return "N/A" if raw.get(key) is None else raw[key]

    rows, fabric = raw.get("remapped_rows"), raw.get("fabric") or {}
    mask = raw.get("clocks_event_reasons") or 0
    gen = gpu.gen or model.gen
    bar1 = (model.bar1 if dev.link else 256 * MIB) // MIB
    used, reserved = 1, 637
    ecc = [("sram_correctable", 0 if model.ecc == 1 else "N/A"),
           ("sram_uncorrectable_parity", 0 if model.ecc == 1 else "N/A"),
           ("sram_uncorrectable_secded", 0 if model.ecc == 1 else "N/A")]
    counts = {kind: [*ecc, ("dram_correctable", count(f"ecc_corrected_{kind}")),
                     ("dram_uncorrectable", count(f"ecc_uncorrected_{kind}"))] for kind in ("volatile", "aggregate")}
    fabric_known = fabric.get("state") == 3
    body = [
        ("product_name", model.name), ("product_brand", SMI_BRANDS.get(model.brand, "Unknown")),
        ("product_architecture", SMI_ARCHITECTURES.get(model.compute_capability[0], "N/A")),
        ("display_mode", "Requested functionality has been deprecated"), ("display_attached", "No"),
        ("display_active", "Disabled"), ("persistence_mode", word[gpu.persistence]), ("addressing_mode", "HMM"),
        ("mig_mode", [("current_mig", word[model.mig]), ("pending_mig", word[model.mig])]),
        ("mig_devices", "\n\t\t\tNone\n\t\t"), ("accounting_mode", "Disabled"),
        ("accounting_mode_buffer_size", 4000), ("driver_model", [("current_dm", "N/A"), ("pending_dm", "N/A")]),
        ("serial", f"17950250{14172 + gpu.index}"), ("uuid", gpu.uuid), ("minor_number", gpu.index),
        ("vbios_version", "98.02.52.00.07"), ("multigpu_board", "No"), ("board_id", f"0x{int(dev.bdf[5:7], 16):02x}00"),
        ("gpu_virtualization_mode", [("virtualization_mode", SMI_VIRTUALIZATION[gpu.virtualization_mode]),
                                     ("host_vgpu_mode", "N/A"), ("vgpu_heterogeneous_mode", "N/A")]),
        ("gpu_recovery_action", "None"), ("gsp_firmware_version", driver),
        ("pci", [("pci_bus", dev.bdf[5:7]), ("pci_device", dev.bdf[8:10]), ("pci_domain", dev.bdf[:4]),
                 ("pci_base_class", model.cls >> 16), ("pci_sub_class", (model.cls >> 8) & 0xFF),
                 ("pci_device_id", f"{model.device:04X}10DE"), ("pci_bus_id", nvml_bus_id(dev.bdf)),
                 ("pci_sub_system_id", f"{model.subsystem[1]:04X}{model.subsystem[0]:04X}"),
                 ("pci_gpu_link_info", [
                     ("pcie_gen", [("max_link_gen", model.gen), ("current_link_gen", gen),
                                   ("device_current_link_gen", gen), ("max_device_link_gen", model.gen),
                                   ("max_host_link_gen", "N/A" if in_vm else model.gen)]),
                     ("link_widths", [("max_link_width", "16x"), ("current_link_width", "16x")])]),
                 ("replay_counter", 0), ("replay_rollover_counter", 0), ("tx_util", "0 KB/s"), ("rx_util", "0 KB/s"),
                 ("atomic_caps_outbound", "N/A"), ("atomic_caps_inbound", "N/A")]),
        ("fan_speed", "N/A"), ("performance_state", "P8"),
        ("clocks_event_reasons", [(f"clocks_event_reason_{name}", "Active" if mask & SMI_REASON_BITS[name]
                                   else "Not Active") for name in SMI_REASONS]),
        ("sparse_operation_mode", "N/A"),
        ("fb_memory_usage", [("total", f"{model.memory_mib} MiB"), ("reserved", f"{reserved} MiB"),
                             ("used", f"{used} MiB"), ("free", f"{model.memory_mib - reserved - used} MiB")]),
        ("bar1_memory_usage", [("total", f"{bar1} MiB"), ("used", "1 MiB"), ("free", f"{bar1 - 1} MiB")]),
        ("compute_mode", "Default"),
        ("ecc_mode", [("current_ecc", word[model.ecc]), ("pending_ecc", word[model.ecc])]),
        ("ecc_errors", [("volatile", counts["volatile"]),
                        ("aggregate", counts["aggregate"] + [("sram_threshold_exceeded",
                                                              "No" if model.ecc == 1 else "N/A")])]),
        ("retired_pages", [("multiple_single_bit_retirement", [("retired_count", "N/A"), ("retired_pagelist", "N/A")]),
                           ("double_bit_retirement", [("retired_count", "N/A"), ("retired_pagelist", "N/A")]),
                           ("pending_blacklist", "N/A"), ("pending_retirement", "N/A")]),
        ("remapped_rows", "N/A" if rows is None else [
            ("remapped_row_corr", rows["correctable"]), ("remapped_row_unc", rows["uncorrectable"]),
            ("remapped_row_pending", "Yes" if rows["pending"] else "No"),
            ("remapped_row_failure", "Yes" if rows["failure"] else "No"),
            ("row_remapper_histogram", [(f"row_remapper_histogram_{bucket}", f"{512 if bucket == 'max' else 0} bank(s)")
                                        for bucket in ("max", "high", "partial", "low", "none")])]),
        ("temperature", [("gpu_temp", "31 C"), ("gpu_temp_tlimit", "56 C"), ("memory_temp", "N/A")]),
        ("gpu_power_readings", [("average_power_draw", "32.41 W"), ("instant_power_draw", "32.41 W"),
                                ("current_power_limit", "600.00 W"), ("max_power_limit", "600.00 W")]),
        ("clocks", [("graphics_clock", "180 MHz"), ("sm_clock", "180 MHz"), ("mem_clock", "405 MHz"),
                    ("video_clock", "600 MHz")]),
        ("fabric", [("state", "Completed" if fabric_known else "N/A"),
                    ("status", "Success" if fabric_known else "N/A"), ("cliqueId", 0 if fabric_known else "N/A"),
                    ("clusterUuid", "N/A"), ("health", [("summary", "N/A"), ("bandwidth", "N/A")])]),
        ("processes", "\n\t\t"), ("accounted_processes", "\n\t\t"), ("capabilities", [("egm", "disabled")]),
    ]
    return f'\t<gpu id="{nvml_bus_id(dev.bdf)}">\n' + "".join(_xml(t, b, 2) for t, b in body) + "\t</gpu>\n"


# ---------------------------------------------------------------------------
# lspci -vvv -D as a user without root: no capabilities, so no ACS


LSPCI_CLASSES = {
    0x030000: ("VGA compatible controller", "00 [VGA controller]"),
    0x030200: ("3D controller", None),
    0x040300: ("Audio device", None),
    0x060000: ("Host bridge", None),
    0x060400: ("PCI bridge", "00 [Normal decode]"),
    0x088000: ("System peripheral", None),
    0x010802: ("Non-Volatile memory controller", "02 [NVM Express]"),
    0x020000: ("Ethernet controller", None),
    0x0C0330: ("USB controller", "30 [XHCI]"),
}


SUBSYSTEM_VENDORS = {0x10B0: "Gainward GmbH", 0x10DE: "NVIDIA Corporation", 0x1043: "ASUSTeK Computer Inc.",
                     0x144D: "Samsung Electronics Co Ltd", 0x8086: "Intel Corporation"}


def _windows(devices: list[Dev], bridge: Dev, addresses: dict[str, dict[int, int]]) -> list[str]:
    """The windows of a bridge, spanning the BARs behind it as firmware sizes them."""
    behind = [d for d in devices if d.parent == bridge.bdf]
    lines = []
    for kind, label, bits in (("mem32", "Memory behind bridge", "32-bit"),
                              ("mem64", "Prefetchable memory behind bridge", "64-bit")):
        spans = [(addresses[d.bdf][b.index], b.size) for d in behind for b in d.bars if b.kind != "io"
                 and (b.kind == "mem64" and b.prefetchable) == (kind == "mem64")]
        if not spans:
            continue
        start = min(a for a, _ in spans) // MIB * MIB
        end = (max(a + n for a, n in spans) + MIB - 1) // MIB * MIB - 1
        digits = 8 if kind == "mem32" else 16
        lines.append(f"\t{label}: {start:0{digits}x}-{end:0{digits}x} [size={_size_word(end - start + 1)}] "
                     f"[{bits}]")
    return lines


def lspci_unprivileged(devices: list[Dev], addresses: dict[str, dict[int, int]]) -> str:
    """lspci -vvv -D run by a user: what sysfs gives anyone, and no capabilities."""
    blocks = []
    for irq, dev in enumerate(sorted(devices, key=lambda d: d.bdf), start=32):
        class_name, prog_if = LSPCI_CLASSES[dev.cls]
        head = f"{dev.bdf} {class_name}: {dev.name}"
        if dev.revision:
            head += f" (rev {dev.revision:02x})"
        if prog_if:
            head += f" (prog-if {prog_if})"
        lines = [head]
        if dev.subsystem != (0, 0) and not dev.is_bridge:
            vendor = SUBSYSTEM_VENDORS.get(dev.subsystem[0])
            lines.append(f"\tSubsystem: {vendor} Device {dev.subsystem[1]:04x}" if vendor
                         else f"\tSubsystem: Device {dev.subsystem[0]:04x}:{dev.subsystem[1]:04x}")
        io = any(bar.kind == "io" for bar in dev.bars)
        lines.append(f"\tControl: I/O{'+' if io else '-'} Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- "
                     "Stepping- SERR- FastB2B- DisINTx+")
        lines.append("\tStatus: Cap+ 66MHz- UDF- FastB2B- ParErr- DEVSEL=fast >TAbort- <TAbort- <MAbort- >SERR- "
                     "<PERR- INTx-")
        lines.append("\tLatency: 0, Cache Line Size: 64 bytes" if dev.is_bridge else "\tLatency: 0")
        lines.append(f"\tInterrupt: pin A routed to IRQ {irq}")
        if dev.numa >= 0:
            lines.append(f"\tNUMA node: {dev.numa}")
        if dev.is_bridge:
            bus = dev.bdf[5:7]
            lines.append(f"\tBus: primary={bus}, secondary={dev.secondary:02x}, subordinate={dev.secondary:02x}, "
                         "sec-latency=0")
            lines += _windows(devices, dev, addresses)
            lines.append("\tSecondary status: 66MHz- FastB2B- ParErr- DEVSEL=fast >TAbort- <TAbort- <MAbort- "
                         "<SERR- <PERR-")
            lines.append("\tBridgeCtl: Parity- SERR+ NoISA- VGA- VGA16- MAbort- >Reset- FastB2B-")
            lines.append("\t\tPriDiscTmr- SecDiscTmr- DiscTmrStat- DiscTmrSERREn-")
        for bar in sorted(dev.bars, key=lambda b: b.index):
            start = addresses[dev.bdf][bar.index]
            if bar.kind == "rom":
                lines.append(f"\tExpansion ROM at {start:08x} [disabled] [size={_size_word(bar.size)}]")
                continue
            if bar.kind == "io":
                lines.append(f"\tRegion {bar.index}: I/O ports at {start:04x} [size={bar.size}]")
                continue
            bits = "64-bit" if bar.kind == "mem64" else "32-bit"
            pref = "prefetchable" if bar.prefetchable else "non-prefetchable"
            lines.append(f"\tRegion {bar.index}: Memory at {start:x} ({bits}, {pref}) [size={_size_word(bar.size)}]")
        lines.append("\tCapabilities: <access denied>")
        if dev.driver:
            lines.append(f"\tKernel driver in use: {dev.driver}")
        if dev.driver == "nvidia":
            lines.append("\tKernel modules: nvidiafb, nouveau, nvidia_drm, nvidia")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks) + "\n"


def _size_word(size: int) -> str:
    for unit, scale in (("G", GIB), ("M", MIB), ("K", 1024)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


# ---------------------------------------------------------------------------
# Text files every host has


def cpuinfo(model: str, vendor: str, family: int, model_id: int, siblings: int, cores: int, flags: str,
            bugs: str, mhz: float, address_sizes: str) -> str:
    """The first processor block of /proc/cpuinfo (the others repeat it with their own ids)."""
    return (f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model_id}\n"
            f"model name\t: {model}\nstepping\t: 1\ncpu MHz\t\t: {mhz:.3f}\nphysical id\t: 0\n"
            f"siblings\t: {siblings}\ncore id\t\t: 0\ncpu cores\t: {cores}\napicid\t\t: 0\n"
            "initial apicid\t: 0\nfpu\t\t: yes\nfpu_exception\t: yes\ncpuid level\t: 16\nwp\t\t: yes\n"
            f"flags\t\t: {flags}\nbugs\t\t: {bugs}\nbogomips\t: {mhz * 2:.2f}\nclflush size\t: 64\n"
            f"cache_alignment\t: 64\naddress sizes\t: {address_sizes}\npower management:\n\n")


def meminfo(total_kib: int, hugepages: int = 0, hugepage_kib: int = 2048) -> str:
    free = total_kib * 9 // 10 - hugepages * hugepage_kib
    rows = [
        ("MemTotal", total_kib), ("MemFree", free), ("MemAvailable", free + total_kib // 50),
        ("Buffers", 412_316), ("Cached", total_kib // 60), ("SwapCached", 0), ("Active", total_kib // 90),
        ("Inactive", total_kib // 70), ("SwapTotal", 8_388_604), ("SwapFree", 8_388_604), ("Dirty", 84),
        ("Writeback", 0), ("AnonPages", 1_843_200), ("Mapped", 611_048), ("Shmem", 34_116),
        ("KReclaimable", 402_644), ("Slab", 1_204_492), ("SReclaimable", 402_644), ("SUnreclaim", 801_848),
        ("KernelStack", 38_720), ("PageTables", 31_212), ("CommitLimit", total_kib // 2),
        ("Committed_AS", 6_301_516), ("VmallocTotal", 34_359_738_367), ("VmallocUsed", 412_096),
        ("Percpu", 196_608), ("HardwareCorrupted", 0), ("AnonHugePages", 0), ("ShmemHugePages", 0),
        ("ShmemPmdMapped", 0), ("FileHugePages", 0), ("FilePmdMapped", 0),
    ]
    text = "".join(f"{key + ':':<16}{value:>8} kB\n" for key, value in rows)
    text += (f"HugePages_Total: {hugepages:>7}\nHugePages_Free:  {hugepages:>7}\nHugePages_Rsvd:  {0:>7}\n"
             f"HugePages_Surp:  {0:>7}\nHugepagesize:   {hugepage_kib:>8} kB\n"
             f"Hugetlb:        {hugepages * hugepage_kib:>8} kB\n")
    return text


def dmesg(*lines: tuple[float, str]) -> dict[str, Any]:
    return _ok("".join(f"[{stamp:12.6f}] {message}\n" for stamp, message in lines))


DMESG_RESTRICTED = _failed(1, "", "dmesg: read kernel buffer failed: Operation not permitted\n")

INTEL_SPR_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss "
    "ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology "
    "nonstop_tsc cpuid aperfmperf tsc_known_freq pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg "
    "fma cx16 xtpr pdcm pcid dca sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand "
    "lahf_lm abm 3dnowprefetch cpuid_fault epb cat_l3 cat_l2 cdp_l3 intel_ppin cdp_l2 ssbd mba ibrs ibpb stibp "
    "ibrs_enhanced tpr_shadow flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid "
    "cqm rdt_a avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb intel_pt avx512cd sha_ni avx512bw "
    "avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local split_lock_detect "
    "user_shstk avx_vnni avx512_bf16 wbnoinvd dtherm ida arat pln pts hfi vnmi avx512vbmi umip pku ospke waitpkg "
    "avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg tme avx512_vpopcntdq la57 rdpid bus_lock_detect "
    "cldemote movdiri movdir64b enqcmd fsrm md_clear serialize tsxldtrk pconfig arch_lbr ibt amx_bf16 avx512_fp16 "
    "amx_tile amx_int8 flush_l1d arch_capabilities")
INTEL_SPR_BUGS = "spectre_v1 spectre_v2 spec_store_bypass swapgs eibrs_pbrsb bhi"
AMD_ZEN_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall "
    "nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good amd_lbr_v2 nopl nonstop_tsc cpuid extd_apicid "
    "aperfmperf rapl pni pclmulqdq monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx "
    "f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit wdt "
    "tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 hw_pstate ssbd mba perfmon_v2 "
    "ibrs ibpb stibp ibrs_enhanced vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid cqm rdt_a avx512f "
    "avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 "
    "xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local user_shstk avx_vnni avx512_bf16 clzero irperf "
    "xsaveerptr rdpru wbnoinvd amd_ppin cppc arat npt lbrv svm_lock nrip_save tsc_scale vmcb_clean flushbyasid "
    "decodeassists pausefilter pfthreshold avic v_vmsave_vmload vgif x2avic v_spec_ctrl vnmi avx512vbmi umip pku "
    "ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid bus_lock_detect "
    "movdiri movdir64b overflow_recov succor smca fsrm avx512_vp2intersect flush_l1d debug_swap")
# What a KVM guest with `cpu: host` on the same CPU sees: the hypervisor bit, no host-only features.
AMD_ZEN_GUEST_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall "
    "nx mmxext fxsr_opt pdpe1gb rdtscp lm rep_good nopl cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma "
    "cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm "
    "cmp_legacy svm cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext perfctr_core ssbd ibrs ibpb stibp "
    "ibrs_enhanced vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap "
    "avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni "
    "avx512_bf16 clzero xsaveerptr wbnoinvd arat npt lbrv nrip_save tsc_scale vmcb_clean flushbyasid pausefilter "
    "pfthreshold v_vmsave_vmload vgif vnmi avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni "
    "avx512_bitalg avx512_vpopcntdq rdpid movdiri movdir64b fsrm avx512_vp2intersect flush_l1d arch_capabilities")
AMD_ZEN_BUGS = "sysret_ss_attrs spectre_v1 spectre_v2 spec_store_bypass srso"

SERVER_MODULES = ("acpi_ipmi", "ahci", "ast", "bridge", "crc32c_intel", "drm", "drm_kms_helper", "efi_pstore",
                  "ext4", "i2c_algo_bit", "ib_core", "ipmi_devintf", "ipmi_msghandler", "ipmi_si", "libahci",
                  "nvme", "nvme_core", "overlay", "pcieport", "rdma_cm", "sch_fq_codel", "usbcore", "xfs")
NVIDIA_MODULES = ("nvidia", "nvidia_drm", "nvidia_modeset", "nvidia_uvm")


# ---------------------------------------------------------------------------
# 1. DGX/HGX H100: NVLink through NVSwitches, PCIe through Broadcom switches


def dgx_h100(name: str = "baremetal-8xH100-SXM") -> Host:
    # GPU bus numbers of an HGX H100 board as nvidia-smi prints them (thamada/nvidia-smi, nvsim/H100SXMx8_smi.py).
    gpu_buses = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
    switch_buses = (0x0D, 0x0E, 0x0F, 0x10)
    gen5 = Link(32.0, 16, 32.0, 16)
    cpus = ("0-55,112-167", "56-111,168-223")
    pex = "Broadcom / LSI PEX890xx PCIe Gen 5 Switch"
    pex_acs = Acs(frozenset({"SV", "TB", "RR", "CR", "UF", "EC", "DT"}))  # supported, all off
    devices = [Dev("0000:00:00.0", 0x8086, 0x09A2, 0x088000, "Intel Corporation Ice Lake Memory Map/VT-d",
                   numa=0)]
    # Each NVSwitch is a PCIe endpoint (Gen4 x2) behind a management switch; NVLink does the real work.
    devices.append(Dev("0000:0a:01.0", 0x8086, 0x352A, 0x060400, "Intel Corporation Device 352a",
                       driver="pcieport", port="root_port", link=Link(16.0, 4, 32.0, 16),
                       acs=Acs(frozenset({"SV", "TB", "RR", "CR", "UF"})), secondary=0x0B, numa=0))
    devices.append(Dev("0000:0b:00.0", 0x11F8, 0x4128, 0x060400, "PMC-Sierra Inc. Device 4128",
                       parent="0000:0a:01.0", driver="pcieport", port="upstream_port", link=Link(16.0, 4, 16.0, 4),
                       secondary=0x0C, numa=0))
    for n, bus in enumerate(switch_buses):
        port = f"0000:0c:{n:02x}.0"
        devices.append(Dev(port, 0x11F8, 0x4128, 0x060400, "PMC-Sierra Inc. Device 4128", parent="0000:0b:00.0",
                           driver="pcieport", port="downstream_port", link=Link(16.0, 2, 16.0, 2), secondary=bus,
                           numa=0))
        devices.append(Dev(f"0000:{bus:02x}:00.0", 0x10DE, 0x22A3, 0x068000,
                           "NVIDIA Corporation GH100 [H100 NVSwitch]", parent=port, driver="nvidia-nvswitch",
                           subsystem=(0x10DE, 0x1796), revision=0xA1, port="endpoint", link=Link(16.0, 2, 16.0, 2),
                           bars=(Bar(0, 32 * MIB, "mem64", False),), numa=0, cpulist=cpus[0]))
    # 18 NVLinks per GPU, spread over the four NVSwitches as on HGX H100 (5, 4, 4, 5).
    nvlinks = tuple((True, nvml_bus_id(f"0000:{switch_buses[s]:02x}:00.0"))
                    for s, count in enumerate((5, 4, 4, 5)) for _ in range(count))
    for index, bus in enumerate(gpu_buses):
        socket = index // 4
        root = bus - 3
        rp, usp, dsp, nic_dsp = (f"0000:{root:02x}:01.0", f"0000:{root + 1:02x}:00.0",
                                 f"0000:{root + 2:02x}:00.0", f"0000:{root + 2:02x}:01.0")
        devices += [
            Dev(f"0000:{root:02x}:00.0", 0x8086, 0x09A2, 0x088000, "Intel Corporation Ice Lake Memory Map/VT-d",
                numa=socket),
            Dev(rp, 0x8086, 0x352A, 0x060400, "Intel Corporation Device 352a", driver="pcieport",
                port="root_port", link=gen5, acs=Acs(frozenset({"SV", "TB", "RR", "CR", "UF"})), secondary=root + 1,
                numa=socket),
            Dev(usp, 0x1000, 0xC030, 0x060400, pex, parent=rp, driver="pcieport", port="upstream_port", link=gen5,
                secondary=root + 2, numa=socket),
            Dev(dsp, 0x1000, 0xC030, 0x060400, pex, parent=usp, driver="pcieport", port="downstream_port",
                link=gen5, acs=pex_acs, secondary=bus, numa=socket),
            Dev(nic_dsp, 0x1000, 0xC030, 0x060400, pex, parent=usp, driver="pcieport", port="downstream_port",
                link=gen5, acs=pex_acs, secondary=bus + 1, numa=socket),
            Dev(f"0000:{bus + 1:02x}:00.0", 0x15B3, 0x1021, 0x020700, "Mellanox Technologies MT2910 Family "
                "[ConnectX-7]", parent=nic_dsp, driver="mlx5_core", port="endpoint", link=gen5,
                bars=(Bar(0, 32 * MIB),), numa=socket, cpulist=cpus[socket]),
        ]
        devices += gpu_functions(name, f"0000:{bus:02x}:00.0", index, H100_SXM, dsp, link=gen5, driver="nvidia",
                                 numa=socket, cpulist=cpus[socket], nvlinks=nvlinks)

    def same_socket(i: int, j: int) -> int:
        return 40 if i // 4 == j // 4 else 50

    all_ok = {cap: (lambda i, j: 0) for cap in ("read", "write", "nvlink", "atomics", "pci")}
    nvml = nvml_snapshot(devices, driver="550.127.05", cuda=12040, p2p=all_ok, topology=same_socket)
    return Host(
        name=name,
        note=("Reconstructed DGX/HGX H100 (8x H100 SXM5 80GB, 4 NVSwitches, 2x Xeon Platinum 8480C): bare metal, "
              "IOMMU off, persistence on, NVLink 18 links per GPU through the NVSwitches, PCIe Gen5 x16 through "
              "Broadcom PEX890xx switches with ACS supported but off. Built by tests/captures/build.py; sources in "
              "tests/captures/SOURCES.md. /proc/cpuinfo holds the first processor only, dmesg an excerpt, and the "
              "PCI bus the devices on the GPU, NIC and NVSwitch paths."),
        devices=devices,
        cpuinfo=cpuinfo("Intel(R) Xeon(R) Platinum 8480C", "GenuineIntel", 6, 143, 112, 56, INTEL_SPR_FLAGS,
                        INTEL_SPR_BUGS, 2000.0, "46 bits physical, 57 bits virtual"),
        cmdline=("BOOT_IMAGE=/boot/vmlinuz-5.15.0-1053-nvidia root=UUID=9b2f6c1e-5d0a-4c1e-9f4b-6a3d2c1b0e8f ro "
                 "console=tty0 console=ttyS1,115200n8 intel_iommu=off pci=realloc=off rd.driver.blacklist=nouveau "
                 "nouveau.modeset=0"),
        meminfo=meminfo(2_113_392_640),
        dmi={"sys_vendor": "NVIDIA", "product_name": "DGXH100", "product_version": "Not Specified",
             "product_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpuhost-capture/{name}/dmi")),
             "bios_vendor": "American Megatrends International, LLC.", "bios_version": "1.5.0",
             "board_vendor": "NVIDIA", "board_name": "DGXH100", "chassis_vendor": "NVIDIA"},
        dmesg=dmesg((0.0, "Linux version 5.15.0-1053-nvidia (buildd@lcy02-amd64-031) (gcc (Ubuntu "
                          "11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #54-Ubuntu SMP"),
                    (0.0, "DMI: NVIDIA DGXH100/DGXH100, BIOS 1.5.0 06/01/2024"),
                    (0.0, "DMAR: IOMMU disabled"),
                    (1.402118, "pci 0000:18:00.0: [10de:2330] type 00 class 0x030200"),
                    (22.311204, "nvidia-nvswitch: Probing device 0000:0d:00.0, Vendor Id = 0x10de, "
                                "Device Id = 0x22a3, Class = 0x68000"),
                    (23.902113, "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.127.05")),
        detect_vm="none",
        nodes=(0, 1),
        modules=(*SERVER_MODULES, *NVIDIA_MODULES, "mlx5_core", "mlx5_ib", "nvidia_peermem", "kvm", "kvm_intel"),
        module_version="550.127.05",
        fabric_manager="active",
        nvml=nvml,
        commands={"nvidia-smi -L": _ok(smi_list(devices))},
    )


# ---------------------------------------------------------------------------
# 2. 8x RTX PRO 6000 Server Edition on one EPYC 9335, IOMMU in passthrough, P2P granted


AMD_ROOT_PORT = "Advanced Micro Devices, Inc. [AMD] Device 14ab"
AMD_ROOT_ACS = frozenset({"SV", "TB", "RR", "CR", "UF"})


def epyc_gpu_host(name: str, model: GpuModel, slots: list[tuple[str, str]], *, driver: str,
                  group_of: Callable[[int], str] | None, acs_ctrl: frozenset[str], link: Link,
                  cpulist: str) -> list[Dev]:
    """GPUs straight on EPYC root ports; ``slots`` is (root port, GPU) per GPU, in NVML order."""
    devices: list[Dev] = []
    roots = sorted({rp[:7] for rp, _gpu in slots})
    for n, root in enumerate(roots):
        devices.append(Dev(f"{root}:00.0", 0x1022, 0x14A4, 0x060000,
                           "Advanced Micro Devices, Inc. [AMD] Device 14a4", numa=0,
                           group=group_of(100 + n) if group_of else None))
    for index, (rp, gpu) in enumerate(slots):
        devices.append(Dev(rp, 0x1022, 0x14AB, 0x060400, AMD_ROOT_PORT, driver="pcieport", port="root_port",
                           link=link, acs=Acs(AMD_ROOT_ACS, acs_ctrl), secondary=int(gpu[5:7], 16), numa=0,
                           group=group_of(200 + index) if group_of else None))
        devices += gpu_functions(name, gpu, index, model, rp, link=link, driver=driver, numa=0, cpulist=cpulist,
                                 group=group_of(index) if group_of else None,
                                 audio_driver="vfio-pci" if driver == "vfio-pci" else "snd_hda_intel")
    return devices


def rtx_pro_6000_baremetal(name: str = "baremetal-8xRTXPRO6000-p2p-ok") -> Host:
    # Two GPUs per I/O quadrant: pairs share a host bridge (PHB), the rest meet across the I/O die (NODE).
    slots = [(f"0000:{root:02x}:{port}", f"0000:{root + offset:02x}:00.0")
             for root in (0x00, 0x40, 0x80, 0xC0) for port, offset in (("01.1", 1), ("03.1", 2))]
    groups = {}

    def group_of(key: int) -> str:
        return groups.setdefault(key, str(len(groups) + 2))

    link = Link(32.0, 16, 32.0, 16)
    devices = epyc_gpu_host(name, RTX_PRO_6000_SE, slots, driver="nvidia", group_of=group_of,
                            acs_ctrl=KERNEL_ACS, link=link, cpulist="0-63")

    def level(i: int, j: int) -> int:
        return 30 if i // 2 == j // 2 else 40

    p2p = {"read": lambda i, j: 0, "write": lambda i, j: 0, "nvlink": lambda i, j: 5, "atomics": lambda i, j: 5,
           "pci": lambda i, j: 0}
    nvml = nvml_snapshot(devices, driver="580.95.05", cuda=13000, p2p=p2p, topology=level)
    return Host(
        name=name,
        note=("Reconstructed bare-metal 8x RTX PRO 6000 Blackwell Server Edition on one AMD EPYC 9335 (NPS1): "
              "driver 580 open kernel modules, CUDA 13.0, IOMMU on in passthrough (iommu=pt, every group "
              "identity), the kernel's ACS bits (SV RR CR UF) on the root ports, P2P read/write OK, atomics and "
              "NVLink not supported, PCIe Gen5 x16. Built by tests/captures/build.py; sources in "
              "tests/captures/SOURCES.md. /proc/cpuinfo holds the first processor only, dmesg an excerpt, and the "
              "PCI bus the devices on the GPU paths."),
        devices=devices,
        cpuinfo=cpuinfo("AMD EPYC 9335 32-Core Processor", "AuthenticAMD", 26, 2, 64, 32, AMD_ZEN_FLAGS,
                        AMD_ZEN_BUGS, 3000.0, "52 bits physical, 57 bits virtual"),
        cmdline=("BOOT_IMAGE=/vmlinuz-6.8.0-85-generic root=UUID=0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f ro iommu=pt "
                 "pcie_aspm=off"),
        meminfo=meminfo(791_248_896),
        dmi={"sys_vendor": "ASRockRack", "product_name": "To Be Filled By O.E.M.",
             "product_version": "To Be Filled By O.E.M.",
             "product_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpuhost-capture/{name}/dmi")),
             "bios_vendor": "American Megatrends International, LLC.", "bios_version": "10.10",
             "board_vendor": "ASRockRack", "board_name": "GENOAD8X-2T/BCM", "chassis_vendor": "To Be Filled By O.E.M."},
        dmesg=dmesg((0.0, "Linux version 6.8.0-85-generic (buildd@lcy02-amd64-016) (x86_64-linux-gnu-gcc-13 (Ubuntu "
                          "13.3.0-6ubuntu2~24.04) 13.3.0, GNU ld (GNU Binutils for Ubuntu) 2.42) #85-Ubuntu SMP "
                          "PREEMPT_DYNAMIC"),
                    (0.0, "Command line: BOOT_IMAGE=/vmlinuz-6.8.0-85-generic "
                          "root=UUID=0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f ro iommu=pt pcie_aspm=off"),
                    (0.0, "PCIe ASPM is disabled"),
                    (2.104512, "pci 0000:00:00.2: AMD-Vi: IOMMU performance counters supported"),
                    (2.218763, "iommu: Default domain type: Passthrough (set via kernel command line)"),
                    (2.331007, "AMD-Vi: Extended features (0x246577efa2254afa, 0x0): PPR NX GT [5] IA GA PC GA_vAPIC"),
                    (21.550812, "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05")),
        detect_vm="none",
        modules=(*SERVER_MODULES, *NVIDIA_MODULES, "kvm", "kvm_amd"),
        module_version="580.95.05",
        iommu_hardware=("ivhd0", "ivhd1", "ivhd2", "ivhd3"),
        group_type="identity",
        nvml=nvml,
        commands={"nvidia-smi -L": _ok(smi_list(devices))},
    )


# ---------------------------------------------------------------------------
# 3. The incident: a Proxmox q35 guest with 8x RTX PRO 6000, every GPU pair NS


def proxmox_q35_guest(name: str = "proxmox-q35-guest-8xRTXPRO6000-p2p-NS") -> Host:
    link = Link(32.0, 16, 32.0, 16)
    port_link = Link(16.0, 32, 16.0, 32)  # Proxmox sets x-speed=16,x-width=32 on its pcie-root-ports
    ich9 = "Intel Corporation 82801I (ICH9 Family)"
    devices = [
        Dev("0000:00:00.0", 0x8086, 0x29C0, 0x060000, "Intel Corporation 82G33/G31/P35/P31 Express DRAM Controller"),
        Dev("0000:00:01.0", 0x1234, 0x1111, 0x030000, "Device 1234:1111", revision=0x02),
        Dev("0000:00:1b.0", 0x8086, 0x293E, 0x040300, f"{ich9} HD Audio Controller", driver="snd_hda_intel",
            revision=0x03),
        Dev("0000:00:1f.0", 0x8086, 0x2918, 0x060100, "Intel Corporation 82801IB (ICH9) LPC Interface Controller",
            revision=0x02, multifunction=True),
        Dev("0000:00:1f.2", 0x8086, 0x2922, 0x010601, "Intel Corporation 82801IR/IO/IH (ICH9R/DO/DH) 6 port SATA "
            "Controller [AHCI mode]", driver="ahci", revision=0x02, multifunction=True),
        Dev("0000:00:1f.3", 0x8086, 0x2930, 0x0C0500, f"{ich9} SMBus Controller", revision=0x02, multifunction=True),
    ]
    # The USB controllers pve-q35-4.0.cfg adds: UHCI 1-3 and EHCI 1 at 1d.x, UHCI 4-6 and EHCI 2 at 1a.x.
    for slot, functions in (("1d", ((0, 0x2934, "uhci"), (1, 0x2935, "uhci"), (2, 0x2936, "uhci"),
                                    (7, 0x293A, "ehci"))),
                            ("1a", ((0, 0x2937, "uhci"), (1, 0x2938, "uhci"), (2, 0x2939, "uhci"),
                                    (7, 0x293C, "ehci")))):
        for function, device, kind in functions:
            devices.append(Dev(f"0000:00:{slot}.{function}", 0x8086, device,
                               0x0C0320 if kind == "ehci" else 0x0C0300,
                               f"{ich9} USB {kind.upper()} Controller", driver=f"{kind}_hcd" if kind == "ehci"
                               else "uhci_hcd", revision=0x03, multifunction=True))
    # The DMI-to-PCI bridge and the pci-bridges "pci.0".."pci.3" behind it; Proxmox puts its virtio devices
    # on "pci.0" at the slots of get_pci_addr_map (balloon0 3, scsihw0 5, net0 0x12). On conventional PCI,
    # virtio functions keep their transitional (legacy) ids.
    devices.append(Dev("0000:00:1e.0", 0x8086, 0x244E, 0x060401, "Intel Corporation 82801 PCI Bridge",
                       revision=0x92, secondary=0x09))
    for n in range(4):
        devices.append(Dev(f"0000:09:0{n + 1}.0", 0x1B36, 0x0001, 0x060400, "Red Hat, Inc. QEMU PCI-PCI bridge",
                           parent="0000:00:1e.0", secondary=0x0A + n))
    devices += [
        Dev("0000:0a:03.0", 0x1AF4, 0x1002, 0x00FF00, "Red Hat, Inc. Virtio memory balloon", parent="0000:09:01.0",
            driver="virtio-pci", bars=(Bar(0, 64, "io", False), Bar(4, 16 * 1024))),
        Dev("0000:0a:12.0", 0x1AF4, 0x1000, 0x020000, "Red Hat, Inc. Virtio network device", parent="0000:09:01.0",
            driver="virtio-pci", bars=(Bar(0, 32, "io", False), Bar(1, 4096, "mem32", False), Bar(4, 16 * 1024))),
        Dev("0000:0a:05.0", 0x1AF4, 0x1004, 0x010000, "Red Hat, Inc. Virtio SCSI", parent="0000:09:01.0",
            driver="virtio-pci", bars=(Bar(0, 64, "io", False), Bar(1, 4096, "mem32", False), Bar(4, 16 * 1024))),
    ]
    # hostpci0-3 sit on ich9-pcie-port-1..4 (00:1c.0-3, from pve-q35-4.0.cfg), hostpci4-7 on the ports
    # qemu-server adds at 00:10.0-3. Firmware numbers buses in slot order, so hostpci4 gets bus 01 and
    # NVML's GPU0 is hostpci4.
    for hostpci in range(8):
        port = f"0000:00:1c.{hostpci}" if hostpci < 4 else f"0000:00:10.{hostpci - 4}"
        bus = 0x05 + hostpci if hostpci < 4 else 0x01 + hostpci - 4
        devices.append(Dev(port, 0x1B36, 0x000C, 0x060400, "Red Hat, Inc. QEMU PCIe Root port", driver="pcieport",
                           port="root_port", link=port_link, acs=Acs(frozenset({"SV", "TB", "RR", "CR", "UF"})),
                           secondary=bus, multifunction=port.endswith(".0")))
        devices += gpu_functions(name, f"0000:{bus:02x}:00.0", bus - 1, RTX_PRO_6000_SE, port, link=link,
                                 driver="nvidia", numa=-1, cpulist="0-63", virtualization_mode=1)
    ns = {cap: (lambda i, j: 5) for cap in ("read", "write", "nvlink", "atomics", "pci")}
    nvml = nvml_snapshot(devices, driver="590.44.01", cuda=13010, p2p=ns, topology=lambda i, j: 30)
    return Host(
        name=name,
        note=("Reconstructed incident guest: a Proxmox VE (KVM/QEMU 9.0, machine q35, OVMF) virtual machine with "
              "8x RTX PRO 6000 Blackwell Server Edition passed through with pcie=1 on QEMU pcie-root-ports, 64 "
              "vCPUs on an AMD EPYC 9335 host (cpu: host), Ubuntu 24.04, driver 590, CUDA 13.1. "
              "nvidia-smi topo -p2p r says NS for every pair, as in the incident (BRIEF.md). No IOMMU in the guest, "
              "NUMA node -1 on every GPU. Built by tests/captures/build.py; sources in tests/captures/SOURCES.md. "
              "/proc/cpuinfo holds the first processor only and dmesg an excerpt."),
        devices=devices,
        cpuinfo=cpuinfo("AMD EPYC 9335 32-Core Processor", "AuthenticAMD", 26, 2, 64, 64, AMD_ZEN_GUEST_FLAGS,
                        AMD_ZEN_BUGS, 2999.998, "52 bits physical, 57 bits virtual"),
        cmdline="BOOT_IMAGE=/vmlinuz-6.8.0-88-generic root=/dev/mapper/ubuntu--vg-ubuntu--lv ro",
        meminfo=meminfo(453_017_600),
        dmi={"sys_vendor": "QEMU", "product_name": "Standard PC (Q35 + ICH9, 2009)", "product_version": "pc-q35-9.0",
             "product_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpuhost-capture/{name}/dmi")),
             "bios_vendor": "EDK II", "bios_version": "4.2023.08-4", "board_vendor": None, "board_name": None,
             "chassis_vendor": "QEMU"},
        dmesg=dmesg((0.0, "Linux version 6.8.0-88-generic (buildd@lcy02-amd64-004) (x86_64-linux-gnu-gcc-13 (Ubuntu "
                          "13.3.0-6ubuntu2~24.04) 13.3.0, GNU ld (GNU Binutils for Ubuntu) 2.42) #89-Ubuntu SMP "
                          "PREEMPT_DYNAMIC"),
                    (0.0, "DMI: QEMU Standard PC (Q35 + ICH9, 2009), BIOS 4.2023.08-4 02/15/2024"),
                    (0.0, "Hypervisor detected: KVM"),
                    (0.0, "kvm-clock: Using msrs 4b564d01 and 4b564d00"),
                    (0.412233, "pci 0000:01:00.0: [10de:2bb5] type 00 class 0x030200 PCIe Endpoint"),
                    (14.203318, "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  590.44.01")),
        detect_vm="kvm",
        modules=("ahci", "drm", "ehci_hcd", "ext4", "libahci", "nvidia", "nvidia_drm", "nvidia_modeset",
                 "nvidia_uvm", "pcieport", "snd_hda_intel", "uhci_hcd", "virtio_balloon", "virtio_net", "virtio_pci",
                 "virtio_scsi", "xfs"),
        module_version="590.44.01",
        nvml=nvml,
        commands={"nvidia-smi -L": _ok(smi_list(devices))},
    )


# ---------------------------------------------------------------------------
# 4. A Proxmox i440fx guest with 2x RTX A6000: no PCIe at all; NVML not readable


def proxmox_i440fx_guest() -> Host:
    name = "proxmox-i440fx-guest-2xA6000"
    devices = [
        Dev("0000:00:00.0", 0x8086, 0x1237, 0x060000, "Intel Corporation 440FX - 82441FX PMC [Natoma]",
            revision=0x02),
        Dev("0000:00:01.0", 0x8086, 0x7000, 0x060100, "Intel Corporation 82371SB PIIX3 ISA [Natoma/Triton II]",
            multifunction=True),
        Dev("0000:00:01.1", 0x8086, 0x7010, 0x010180, "Intel Corporation 82371SB PIIX3 IDE [Natoma/Triton II]",
            driver="ata_piix", multifunction=True),
        Dev("0000:00:01.2", 0x8086, 0x7020, 0x0C0300, "Intel Corporation 82371SB PIIX3 USB [Natoma/Triton II]",
            driver="uhci_hcd", revision=0x01, multifunction=True),
        Dev("0000:00:01.3", 0x8086, 0x7113, 0x068000, "Intel Corporation 82371AB/EB/MB PIIX4 ACPI",
            driver="piix4_smbus", revision=0x03, multifunction=True),
        Dev("0000:00:02.0", 0x1234, 0x1111, 0x030000, "Device 1234:1111", revision=0x02),
        Dev("0000:00:03.0", 0x1AF4, 0x1002, 0x00FF00, "Red Hat, Inc. Virtio memory balloon", driver="virtio-pci"),
        Dev("0000:00:05.0", 0x1AF4, 0x1004, 0x010000, "Red Hat, Inc. Virtio SCSI", driver="virtio-pci"),
        Dev("0000:00:12.0", 0x1AF4, 0x1000, 0x020000, "Red Hat, Inc. Virtio network device", driver="virtio-pci"),
    ]
    for index, slot in enumerate(("10", "11")):
        devices += gpu_functions(name, f"0000:00:{slot}.0", index, RTX_A6000, None, link=None, driver="nvidia",
                                 numa=-1, cpulist="0-31", persistence=0, gen=1, virtualization_mode=1)
    ns = {cap: (lambda i, j: 5) for cap in ("read", "write", "nvlink", "atomics")}
    return Host(
        name=name,
        note=("Reconstructed Proxmox VE guest on the i440fx machine (SeaBIOS) with 2x RTX A6000 passed through "
              "without pcie=1: the GPUs and their audio functions sit on bus 0, their config space has no PCI "
              "Express capability, and sysfs has no link attributes for them. NVML is made unreadable on purpose "
              "(library_missing) so that the nvidia-smi fallback is exercised; the nvidia-smi outputs follow the "
              "formats of tests/fixtures/nvidia-smi/. P2P NS everywhere. Built by tests/captures/build.py; sources "
              "in tests/captures/SOURCES.md. /proc/cpuinfo holds the first processor only and dmesg an excerpt."),
        devices=devices,
        cpuinfo=cpuinfo("AMD EPYC 7443P 24-Core Processor", "AuthenticAMD", 25, 1, 32, 32, AMD_ZEN_GUEST_FLAGS,
                        AMD_ZEN_BUGS, 2850.0, "48 bits physical, 48 bits virtual"),
        cmdline="BOOT_IMAGE=/vmlinuz-6.8.0-85-generic root=UUID=7e6d5c4b-3a29-4180-9f7e-6d5c4b3a2918 ro quiet splash",
        meminfo=meminfo(131_926_528),
        dmi={"sys_vendor": "QEMU", "product_name": "Standard PC (i440FX + PIIX, 1996)",
             "product_version": "pc-i440fx-9.0",
             "product_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpuhost-capture/{name}/dmi")),
             "bios_vendor": "SeaBIOS", "bios_version": "rel-1.16.3-0-ga6ed6b701f0a-prebuilt.qemu.org",
             "board_vendor": None, "board_name": None, "chassis_vendor": "QEMU"},
        dmesg=dmesg((0.0, "DMI: QEMU Standard PC (i440FX + PIIX, 1996), BIOS "
                          "rel-1.16.3-0-ga6ed6b701f0a-prebuilt.qemu.org 04/01/2014"),
                    (0.0, "Hypervisor detected: KVM"),
                    (0.389120, "pci 0000:00:10.0: [10de:2230] type 00 class 0x030000 conventional PCI endpoint"),
                    (9.871002, "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05")),
        detect_vm="kvm",
        modules=("ata_piix", "drm", "ext4", "nvidia", "nvidia_drm", "nvidia_modeset", "nvidia_uvm", "snd_hda_intel",
                 "virtio_balloon", "virtio_net", "virtio_pci", "virtio_scsi"),
        module_version="580.95.05",
        nvml={"error": "NVMLError_LibraryNotFound: NVML Shared Library Not Found", "kind": "library_missing"},
        commands=smi_commands(devices, "580.95.05", ns, lambda i, j: 30, "", ""),
    )


# ---------------------------------------------------------------------------
# 5. A workstation with 4x GeForce RTX 4090, audited without root


def rtx4090_workstation() -> Host:
    name = "baremetal-4xRTX4090-consumer"
    # Sapphire Rapids-WS: each x16 slot on its own IIO stack; slot 4 is wired x8.
    stacks = (0x15, 0x37, 0x59, 0x7B)
    idle = Link(2.5, 16, 16.0, 16)
    devices = [Dev("0000:00:00.0", 0x8086, 0x09A2, 0x088000, "Intel Corporation Ice Lake Memory Map/VT-d", numa=0),
               Dev("0000:00:1c.0", 0x8086, 0x352A, 0x060400, "Intel Corporation Device 352a", driver="pcieport",
                   port="root_port", link=Link(16.0, 4, 16.0, 4), secondary=0x01, numa=0),
               Dev("0000:01:00.0", 0x144D, 0xA80A, 0x010802, "Samsung Electronics Co Ltd NVMe SSD Controller "
                   "PM9A1/PM9A3/980PRO", parent="0000:00:1c.0", driver="nvme", port="endpoint",
                   link=Link(16.0, 4, 16.0, 4), bars=(Bar(0, 16 * 1024, "mem64", False),), numa=0),
               Dev("0000:02:00.0", 0x8086, 0x125C, 0x020000, "Intel Corporation Ethernet Controller I226-V",
                   driver="igc", revision=0x04, bars=(Bar(0, MIB, "mem32", False), Bar(3, 16 * 1024, "mem32", False)),
                   numa=0)]
    for index, root in enumerate(stacks):
        rp, gpu = f"0000:{root:02x}:01.0", f"0000:{root + 1:02x}:00.0"
        link = Link(2.5, 8, 16.0, 16) if index == 3 else idle
        devices += [
            Dev(f"0000:{root:02x}:00.0", 0x8086, 0x09A2, 0x088000, "Intel Corporation Ice Lake Memory Map/VT-d",
                numa=0),
            Dev(rp, 0x8086, 0x352A, 0x060400, "Intel Corporation Device 352a", driver="pcieport", port="root_port",
                link=Link(link.speed, link.width, 32.0, 16), acs=Acs(frozenset({"SV", "TB", "RR", "CR", "UF"})),
                secondary=root + 1, numa=0),
        ]
        devices += gpu_functions(name, gpu, index, RTX_4090, rp, link=link, driver="nvidia", numa=0,
                                 cpulist="0-47", gen=1)

    def read(i: int, j: int) -> int:
        return 1 if 3 in (i, j) else 2  # CNS with the GPU on the x8 slot, GNS between the others

    p2p = {"read": read, "write": read, "nvlink": lambda i, j: 5, "atomics": lambda i, j: 5, "pci": read}
    nvml = nvml_snapshot(devices, driver="550.127.05", cuda=12040, p2p=p2p, topology=lambda i, j: 40)
    return Host(
        name=name,
        note=("Reconstructed workstation: Xeon w7-2495X on a W790 board with 4x GeForce RTX 4090 (driver 550, "
              "CUDA 12.4), bare metal, IOMMU off, Resizable BAR off (BAR1 256 MiB), each GPU on its own CPU root "
              "port, the fourth slot wired x8, GPUs idle at 2.5 GT/s. Audited as an unprivileged user: config "
              "space is the 64-byte header, product_uuid unreadable, dmesg restricted, and lspci -vvv shows "
              "'Capabilities: <access denied>'. P2P read: GNS between GPU0-2, CNS with GPU3. Built by "
              "tests/captures/build.py; sources in tests/captures/SOURCES.md. /proc/cpuinfo holds the first "
              "processor only, and the PCI bus the devices that matter here."),
        devices=devices,
        cpuinfo=cpuinfo("Intel(R) Xeon(R) w7-2495X", "GenuineIntel", 6, 143, 48, 24, INTEL_SPR_FLAGS,
                        INTEL_SPR_BUGS, 2500.0, "46 bits physical, 57 bits virtual"),
        cmdline=("BOOT_IMAGE=/boot/vmlinuz-6.8.0-85-generic root=UUID=2b3c4d5e-6f70-4182-93a4-b5c6d7e8f901 ro quiet "
                 "splash"),
        meminfo=meminfo(263_598_080),
        dmi={"sys_vendor": "ASUS", "product_name": "System Product Name", "product_version": "System Version",
             "product_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpuhost-capture/{name}/dmi")),
             "bios_vendor": "American Megatrends Inc.", "bios_version": "3201",
             "board_vendor": "ASUSTeK COMPUTER INC.", "board_name": "Pro WS W790-ACE",
             "chassis_vendor": "Default string"},
        dmesg=DMESG_RESTRICTED,
        detect_vm="none",
        as_root=False,
        cgroup="0::/init.scope\n",
        modules=("drm", "drm_kms_helper", "ext4", "igc", "nvme", "nvme_core", "snd_hda_intel", "usbcore",
                 *NVIDIA_MODULES),
        module_version="550.127.05",
        nvml=nvml,
        commands={"nvidia-smi -L": _ok(smi_list(devices))},
    )


# ---------------------------------------------------------------------------
# 6. The Proxmox VE hypervisor: 4 GPUs bound to vfio-pci, no NVIDIA driver


def proxmox_host() -> Host:
    name = "proxmox-host-4xRTXPRO6000-vfio"
    slots = [("0000:00:01.1", "0000:01:00.0"), ("0000:40:01.1", "0000:41:00.0"),
             ("0000:80:01.1", "0000:81:00.0"), ("0000:c0:01.1", "0000:c1:00.0")]
    groups = {}

    def group_of(key: int) -> str:
        return groups.setdefault(key, str(len(groups) + 10))

    devices = epyc_gpu_host(name, RTX_PRO_6000_MAXQ, slots, driver="vfio-pci", group_of=group_of,
                            acs_ctrl=KERNEL_ACS, link=Link(2.5, 16, 32.0, 16), cpulist="0-63")
    devices.append(Dev("0000:c0:05.1", 0x1022, 0x14AB, 0x060400, AMD_ROOT_PORT, driver="pcieport",
                       port="root_port", link=Link(8.0, 4, 32.0, 4), acs=Acs(AMD_ROOT_ACS, KERNEL_ACS),
                       secondary=0xC2, numa=0, group=group_of(300)))
    devices.append(Dev("0000:c2:00.0", 0x14E4, 0x165F, 0x020000, "Broadcom Inc. and subsidiaries NetXtreme "
                       "BCM5720 Gigabit Ethernet PCIe", parent="0000:c0:05.1", driver="tg3", port="endpoint",
                       link=Link(5.0, 1, 5.0, 1), bars=(Bar(0, 64 * 1024),), numa=0, group=group_of(301)))
    return Host(
        name=name,
        note=("Reconstructed Proxmox VE 8 hypervisor (Supermicro H13SSL-N, one AMD EPYC 9004, bare metal) with "
              "4x RTX PRO 6000 Blackwell Max-Q Workstation Edition and their audio functions bound to vfio-pci, "
              "each GPU in its own IOMMU group with only its audio function, IOMMU in passthrough (iommu=pt), "
              "the kernel's ACS bits on the root ports, vfio and kvm_amd loaded, no NVIDIA driver, no NVML library "
              "and no nvidia-smi. Built by tests/captures/build.py; sources in tests/captures/SOURCES.md. "
              "/proc/cpuinfo holds the first processor only, dmesg an excerpt, and the PCI bus the devices that "
              "matter here."),
        devices=devices,
        cpuinfo=cpuinfo("AMD EPYC 9354 32-Core Processor", "AuthenticAMD", 25, 17, 64, 32, AMD_ZEN_FLAGS,
                        AMD_ZEN_BUGS, 3250.0, "52 bits physical, 57 bits virtual"),
        cmdline="BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve root=/dev/mapper/pve-root ro quiet iommu=pt",
        meminfo=meminfo(791_248_896, hugepages=640, hugepage_kib=1_048_576),
        dmi={"sys_vendor": "Supermicro", "product_name": "Super Server", "product_version": "0123456789",
             "product_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpuhost-capture/{name}/dmi")),
             "bios_vendor": "American Megatrends International, LLC.", "bios_version": "3.1",
             "board_vendor": "Supermicro", "board_name": "H13SSL-N", "chassis_vendor": "Supermicro"},
        dmesg=dmesg((0.0, "Linux version 6.8.12-4-pve (build@proxmox) (gcc (Debian 12.2.0-14) 12.2.0, GNU ld (GNU "
                          "Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC PMX 6.8.12-4"),
                    (0.0, "DMI: Supermicro Super Server/H13SSL-N, BIOS 3.1 05/22/2024"),
                    (2.011734, "iommu: Default domain type: Passthrough (set via kernel command line)"),
                    (2.120145, "pci 0000:00:00.2: AMD-Vi: Found IOMMU cap 0x40"),
                    (6.412388, "VFIO - User Level meta-driver version: 0.3"),
                    (6.530912, "vfio-pci 0000:01:00.0: vgaarb: VGA decodes changed: olddecodes=io+mem,"
                               "decodes=io+mem:owns=none")),
        detect_vm="none",
        modules=(*SERVER_MODULES, "irqbypass", "kvm", "kvm_amd", "vfio", "vfio_iommu_type1", "vfio_pci",
                 "vfio_pci_core", "zfs"),
        iommu_hardware=("ivhd0", "ivhd1", "ivhd2", "ivhd3"),
        group_type="identity",
        nvml={"error": "NVMLError_LibraryNotFound: NVML Shared Library Not Found", "kind": "library_missing"},
        commands={command_key(["nvidia-smi", f"--query-gpu={','.join(QUERY_GPU_FIELDS)}",
                               "--format=csv,noheader,nounits"]): _failed(None, "", "nvidia-smi: command not found")},
    )


# ---------------------------------------------------------------------------
# 7. The incident's hypervisor: 8x RTX PRO 6000 on vfio-pci, and the VM of the incident guest


PVE_NODE = "pve-gpu-01"
INCIDENT_VMID = 120
# The incident guest's DMI product_uuid is its VM's smbios1 uuid: the link between the two audits.
INCIDENT_VM_UUID = str(uuid.uuid5(uuid.NAMESPACE_URL, "gpuhost-capture/proxmox-q35-guest-8xRTXPRO6000-p2p-NS/dmi"))
# hostpci0-7 in the host's bus order (the guest's comment in proxmox_q35_guest says how they land there).
INCIDENT_GPU_BDFS = ("0000:01:00.0", "0000:02:00.0", "0000:41:00.0", "0000:42:00.0", "0000:81:00.0", "0000:82:00.0",
                     "0000:c1:00.0", "0000:c2:00.0")
CLIQUE_ARGS = " ".join(f"-set device.hostpci{n}.x-nv-gpudirect-clique=0" for n in range(8))


def incident_vm_config(*, fixed: bool) -> str:
    """/etc/pve/qemu-server/120.conf as qemu-server writes it: description, keys sorted, then sections."""
    lines = ["#GLM-5-NVFP4 on SGLang, TP8 (inference team)",
             "#Owner%3A ml-platform; do not migrate (PCI passthrough)",
             "agent: 1"]
    if fixed:
        lines += [f"args: {CLIQUE_ARGS} -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=2097152", "balloon: 0"]
    lines += ["bios: ovmf", "boot: order=scsi0;net0", "cores: 64", "cpu: host",
              f"efidisk0: local-lvm:vm-{INCIDENT_VMID}-disk-0,efitype=4m,pre-enrolled-keys=1,size=4M"]
    lines += [f"hostpci{n}: {bdf},pcie=1" for n, bdf in enumerate(INCIDENT_GPU_BDFS)]
    if fixed:
        lines.append("hugepages: 1024")
    lines += ["machine: q35", "memory: 458752", "meta: creation-qemu=9.0.2,ctime=1733312345", "name: glm5-tp8",
              "net0: virtio=BC:24:11:5A:3C:7E,bridge=vmbr0,firewall=1", "numa: 0", "onboot: 1", "ostype: l26"]
    if not fixed:
        lines.append("parent: pre-driver-590")
    lines += [f"scsi0: local-lvm:vm-{INCIDENT_VMID}-disk-1,discard=on,size=1T,ssd=1", "scsihw: virtio-scsi-pci",
              f"smbios1: uuid={INCIDENT_VM_UUID}", "sockets: 1", "tags: gpu;sglang",
              "vmgenid: 3f9c2b7e-41d5-4a8e-9b61-0c7d2e5f8a14"]
    if not fixed:
        # Set with `qm set 120 --cpu host,hidden=1` while the VM ran, so it waits for the next start.
        lines += ["", "[PENDING]", "cpu: host,hidden=1"]
        lines += ["", "[pre-driver-590]", "agent: 1", "bios: ovmf", "boot: order=scsi0;net0", "cores: 64",
                  "cpu: host", f"efidisk0: local-lvm:vm-{INCIDENT_VMID}-disk-0,efitype=4m,pre-enrolled-keys=1,size=4M"]
        lines += [f"hostpci{n}: {bdf},pcie=1" for n, bdf in enumerate(INCIDENT_GPU_BDFS)]
        lines += ["machine: q35", "memory: 458752", "meta: creation-qemu=9.0.2,ctime=1733312345", "name: glm5-tp8",
                  "net0: virtio=BC:24:11:5A:3C:7E,bridge=vmbr0,firewall=1", "numa: 0", "onboot: 1", "ostype: l26",
                  f"scsi0: local-lvm:vm-{INCIDENT_VMID}-disk-1,discard=on,size=1T,ssd=1", "scsihw: virtio-scsi-pci",
                  f"smbios1: uuid={INCIDENT_VM_UUID}", "snaptime: 1734001200", "sockets: 1",
                  "vmgenid: 3f9c2b7e-41d5-4a8e-9b61-0c7d2e5f8a14"]
    return "\n".join(lines) + "\n"


UTILITY_VM_CONFIG = (
    "boot: order=scsi0;net0\ncores: 2\ncpu: x86-64-v2-AES\nmemory: 4096\n"
    "meta: creation-qemu=8.1.5,ctime=1712000000\nname: gpu-exporter\n"
    "net0: virtio=BC:24:11:0E:61:22,bridge=vmbr0,firewall=1\nnuma: 0\nostype: l26\n"
    "scsi0: local-lvm:vm-101-disk-0,iothread=1,size=32G\nscsihw: virtio-scsi-single\n"
    "smbios1: uuid=5b0e8d55-7a2c-4f0e-8a3b-1f6c9d2e4a70\nsockets: 1\n"
    "vmgenid: 0d8a6c41-2e7b-4c59-a1f3-6b9e0c5d7f28\n")


def proxmox_incident_host(name: str, *, fixed: bool) -> Host:
    slots = [(f"0000:{root:02x}:{port}", f"0000:{root + offset:02x}:00.0")
             for root in (0x00, 0x40, 0x80, 0xC0) for port, offset in (("01.1", 1), ("03.1", 2))]
    groups = {}

    def group_of(key: int) -> str:
        return groups.setdefault(key, str(len(groups) + 10))

    devices = epyc_gpu_host(name, RTX_PRO_6000_SE, slots, driver="vfio-pci", group_of=group_of,
                            acs_ctrl=KERNEL_ACS, link=Link(32.0, 16, 32.0, 16), cpulist="0-63")
    devices.append(Dev("0000:c0:05.1", 0x1022, 0x14AB, 0x060400, AMD_ROOT_PORT, driver="pcieport",
                       port="root_port", link=Link(8.0, 4, 32.0, 4), acs=Acs(AMD_ROOT_ACS, KERNEL_ACS),
                       secondary=0xC3, numa=0, group=group_of(300)))
    devices.append(Dev("0000:c3:00.0", 0x14E4, 0x165F, 0x020000, "Broadcom Inc. and subsidiaries NetXtreme "
                       "BCM5720 Gigabit Ethernet PCIe", parent="0000:c0:05.1", driver="tg3", port="endpoint",
                       link=Link(5.0, 1, 5.0, 1), bars=(Bar(0, 64 * 1024),), numa=0, group=group_of(301)))
    hugepages = " default_hugepagesz=1G hugepagesz=1G hugepages=448" if fixed else ""
    qemu_server = "/etc/pve/qemu-server"
    state = ("the VM fixed: a clique for every GPU, a 2 TiB OVMF window, balloon 0 and 1 GiB hugepages"
             if fixed else
             "the VM as it was during the incident: q35, pcie=1 on every GPU, no args line (so no clique), "
             "the balloon device on, and `cpu: host,hidden=1` waiting in [PENDING] (set while the VM ran; the "
             "guest capture still shows KVM), with one snapshot section")
    return Host(
        name=name,
        note=("Reconstructed Proxmox VE 8.3 hypervisor of the incident (one AMD EPYC 9335, NPS1, bare metal) with "
              "8x RTX PRO 6000 Blackwell Server Edition bound to vfio-pci, each alone in its IOMMU group, IOMMU in "
              "passthrough, no NVIDIA driver on the host, and VM 120, whose smbios1 uuid is the DMI product_uuid "
              f"of proxmox-q35-guest-8xRTXPRO6000-p2p-NS: {state}. VM 101 passes nothing through. Built by "
              "tests/captures/build.py; sources in tests/captures/SOURCES.md. /proc/cpuinfo holds the first "
              "processor only, dmesg an excerpt, and the PCI bus the devices that matter here."),
        devices=devices,
        cpuinfo=cpuinfo("AMD EPYC 9335 32-Core Processor", "AuthenticAMD", 26, 2, 64, 32, AMD_ZEN_FLAGS,
                        AMD_ZEN_BUGS, 3000.0, "52 bits physical, 57 bits virtual"),
        cmdline=f"BOOT_IMAGE=/boot/vmlinuz-6.8.12-5-pve root=/dev/mapper/pve-root ro quiet iommu=pt{hugepages}",
        meminfo=meminfo(791_248_896, hugepages=448 if fixed else 0, hugepage_kib=1_048_576 if fixed else 2048),
        dmi={"sys_vendor": "ASRockRack", "product_name": "To Be Filled By O.E.M.",
             "product_version": "To Be Filled By O.E.M.",
             "product_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, "gpuhost-capture/proxmox-host-8xRTXPRO6000/dmi")),
             "bios_vendor": "American Megatrends International, LLC.", "bios_version": "10.10",
             "board_vendor": "ASRockRack", "board_name": "GENOAD8X-2T/BCM", "chassis_vendor": "To Be Filled By O.E.M."},
        dmesg=dmesg((0.0, "Linux version 6.8.12-5-pve (build@proxmox) (gcc (Debian 12.2.0-14) 12.2.0, GNU ld (GNU "
                          "Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC PMX 6.8.12-5"),
                    (0.0, "DMI: To Be Filled By O.E.M. To Be Filled By O.E.M./GENOAD8X-2T/BCM, BIOS 10.10 "
                          "06/17/2024"),
                    (2.104512, "pci 0000:00:00.2: AMD-Vi: IOMMU performance counters supported"),
                    (2.218763, "iommu: Default domain type: Passthrough (set via kernel command line)"),
                    (6.412388, "VFIO - User Level meta-driver version: 0.3")),
        detect_vm="none",
        modules=(*SERVER_MODULES, "irqbypass", "kvm", "kvm_amd", "vfio", "vfio_iommu_type1", "vfio_pci",
                 "vfio_pci_core", "vhost_net", "zfs"),
        iommu_hardware=("ivhd0", "ivhd1", "ivhd2", "ivhd3"),
        group_type="identity",
        nvml={"error": "NVMLError_LibraryNotFound: NVML Shared Library Not Found", "kind": "library_missing"},
        commands={command_key(["nvidia-smi", f"--query-gpu={','.join(QUERY_GPU_FIELDS)}",
                               "--format=csv,noheader,nounits"]): _failed(None, "", "nvidia-smi: command not found"),
                  "pveversion": _ok("pve-manager/8.3.2/3e76eec21c4a14a7 (running kernel: 6.8.12-5-pve)\n")},
        extra_files={"/proc/sys/kernel/hostname": f"{PVE_NODE}\n",
                     f"{qemu_server}/101.conf": UTILITY_VM_CONFIG,
                     f"{qemu_server}/{INCIDENT_VMID}.conf": incident_vm_config(fixed=fixed)},
        extra_dirs={qemu_server: ["101.conf", f"{INCIDENT_VMID}.conf"]},
    )


def proxmox_host_vm_no_clique() -> Host:
    return proxmox_incident_host("proxmox-host-8xRTXPRO6000-vm-no-clique", fixed=False)


def proxmox_host_vm_clique_ok() -> Host:
    return proxmox_incident_host("proxmox-host-8xRTXPRO6000-vm-clique-ok", fixed=True)


# ---------------------------------------------------------------------------
# 8. Hosts whose GPUs cannot be used, and a host with GPU health problems ("Audit truth")

NVML_MISMATCH = "NVMLError_LibRmVersionMismatch: RM has detected an NVML/RM version mismatch."
SMI_MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 590.48\n"


def incident_guest_driver_mismatch() -> Host:
    """The incident guest after `apt upgrade` moved the driver from 590.44.01 to 590.48 without a reboot: the
    590.44.01 kernel module still runs, NVML and nvidia-smi are 590.48 and refuse to talk to it."""
    host = proxmox_q35_guest("proxmox-q35-guest-8xRTXPRO6000-driver-mismatch")
    host.note = ("Reconstructed from the incident guest (proxmox-q35-guest-8xRTXPRO6000-p2p-NS) after the driver "
                 "packages were upgraded from 590.44.01 to 590.48 without a reboot: the PCI bus still shows the 8 GPUs "
                 "bound to nvidia and /sys/module/nvidia/version says 590.44.01, while NVML fails to initialise with "
                 "NVMLError_LibRmVersionMismatch and every nvidia-smi call exits 18 with 'Failed to initialize NVML: "
                 "Driver/library version mismatch'; dmesg has the kernel module's 'API mismatch' lines. Built by "
                 "tests/captures/build.py; sources in tests/captures/SOURCES.md.")
    host.nvml = {"error": NVML_MISMATCH, "kind": "version_mismatch"}
    query = ["nvidia-smi", f"--query-gpu={','.join(QUERY_GPU_FIELDS)}", "--format=csv,noheader,nounits"]
    host.commands = {command_key(query): _failed(18, SMI_MISMATCH)}
    lines = host.dmesg["stdout"] + "".join(
        f"[{stamp:12.6f}] {message}\n" for stamp, message in (
            (93512.118402, "NVRM: API mismatch: the client has the version 590.48, but"),
            (93512.118405, "NVRM: this kernel module has the version 590.44.01.  Please"),
            (93512.118406, "NVRM: make sure that this kernel module and all NVIDIA driver"),
            (93512.118407, "NVRM: components have the same version.")))
    host.dmesg = _ok(lines)
    return host


def incident_guest_no_nvml() -> Host:
    """The incident guest audited by an interpreter without nvidia-ml-py: nvidia-smi answers instead."""
    host = proxmox_q35_guest("proxmox-q35-guest-8xRTXPRO6000-no-nvml")
    host.note = ("Reconstructed from the incident guest (proxmox-q35-guest-8xRTXPRO6000-p2p-NS), audited by a Python "
                 "without nvidia-ml-py: NVML is not read, nvidia-smi (driver 590.44.01) answers every query, and its "
                 "topo -p2p says NS for every pair as NVML did. Built by tests/captures/build.py; sources in "
                 "tests/captures/SOURCES.md.")
    host.nvml = {"error": "the Python binding nvidia-ml-py (module pynvml) is not installed for this interpreter",
                 "kind": "binding_missing"}
    ns = {cap: (lambda i, j: 5) for cap in ("read", "write", "nvlink", "atomics")}
    host.commands = smi_commands(host.devices, "590.44.01", ns, lambda i, j: 30, "0-63", "N/A")
    host.commands["nvidia-smi -q -x"] = _ok(smi_q_xml(host.devices, "590.44.01", "13.1", "Tue Dec 30 09:49:57 2025",
                                                      in_vm=True))
    return host


LOST_GPU = 3


def rtx_pro_6000_gpu_lost() -> Host:
    """The bare-metal RTX PRO 6000 host after GPU3 fell off the bus (Xid 79): NVML counts 8, GPU3's handle says
    GPU is lost, the matrices cover the other 7, its root port logged a Surprise Down."""
    name = "baremetal-8xRTXPRO6000-gpu-lost"
    host = rtx_pro_6000_baremetal(name)
    gpu = gpus_of(host.devices)[LOST_GPU]
    bus = gpu.bdf[:-2]
    host.devices = [replace(d, aer=(("fatal", "SDES", 1),)) if d.bdf == gpu.parent else d for d in host.devices]
    host.nvml = lose_gpu(host.nvml, LOST_GPU)
    host.note = ("Reconstructed from baremetal-8xRTXPRO6000-p2p-ok after GPU3 (0000:42:00.0) fell off the bus: the "
                 "kernel logged Xid 79 and 'GPU has fallen off the bus', its root port counted a Surprise Down "
                 "(AER fatal), NVML still counts 8 GPUs but GPU3's handle fails with NVMLError_GpuIsLost, so the "
                 "P2P and topology matrices cover the other 7, and nvidia-smi -L names the lost GPU. Built by "
                 "tests/captures/build.py; sources in tests/captures/SOURCES.md.")
    listing = smi_list([d for d in host.devices if d.gpu is not None and d.gpu.index != LOST_GPU])
    host.commands = {"nvidia-smi -L": _failed(15, listing + f"Unable to determine the device handle for GPU{bus.upper()}"
                                                            f".0: GPU is lost.  Reboot the system to recover this "
                                                            "GPU\n")}
    short = f"PCI:{bus}"
    lines = host.dmesg["stdout"] + "".join(f"[{stamp:12.6f}] {message}\n" for stamp, message in (
        (402117.250911, f"NVRM: GPU at {short}: {gpu.gpu.uuid if gpu.gpu else ''}"),
        (402117.250916, "NVRM: GPU Board Serial Number: 1652924012345"),
        (402117.250920, f"NVRM: Xid ({short}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
        (402117.250925, f"NVRM: GPU {gpu.bdf}: GPU has fallen off the bus."),
        (402117.250931, "NVRM: A GPU crash dump has been created. If possible, please run"),
        (402117.250932, "NVRM: nvidia-bug-report.sh as root to collect this data before"),
        (402117.250933, "NVRM: the NVIDIA kernel module is unloaded.")))
    host.dmesg = _ok(lines)
    return host


def dgx_h100_health() -> Host:
    """The DGX H100 after an uncorrectable memory error on GPU2 and with GPU5's clocks held back."""
    name = "baremetal-8xH100-SXM-xid48-row-remap"
    host = dgx_h100(name)
    gpus = gpus_of(host.devices)
    sick, slow = gpus[2], gpus[5]
    remap = {"correctable": 0, "uncorrectable": 1, "pending": 1, "failure": 0}
    readings = {
        sick.bdf: (("ecc_uncorrected_volatile", 1), ("ecc_uncorrected_aggregate", 1), ("ecc_corrected_volatile", 3),
                   ("ecc_corrected_aggregate", 12), ("remapped_rows", remap)),
        slow.bdf: (("clocks_event_reasons", 0x88),),
    }
    noisy_port = slow.parent
    host.devices = [replace(d, gpu=replace(d.gpu, health=readings[d.bdf])) if d.gpu and d.bdf in readings
                    else replace(d, aer=(("correctable", "BadTLP", 181), ("correctable", "BadDLLP", 57),
                                         ("correctable", "Rollover", 2))) if d.bdf == noisy_port
                    else d for d in host.devices]
    host.nvml = nvml_snapshot(host.devices, driver="550.127.05", cuda=12040,
                              p2p={cap: (lambda i, j: 0) for cap in ("read", "write", "nvlink", "atomics", "pci")},
                              topology=lambda i, j: 40 if i // 4 == j // 4 else 50)
    host.commands = {"nvidia-smi -L": _ok(smi_list(host.devices))}
    short = f"PCI:{sick.bdf[:-2]}"
    host.note = ("Reconstructed from baremetal-8xH100-SXM on a bad day: GPU2 (0000:3a:00.0) took an uncorrectable "
                 "HBM error during a job (Xid 48, then 94 contained and 63 row remap event), NVML counts one "
                 "uncorrectable error since boot and a row remap pending; GPU5's clocks are held back by HW slowdown "
                 "and power brake; the switch port above GPU5 counted 240 corrected PCIe errors. Fabric manager "
                 "active, every GPU's fabric registration completed. Built by tests/captures/build.py; sources in "
                 "tests/captures/SOURCES.md.")
    lines = host.dmesg["stdout"] + "".join(f"[{stamp:12.6f}] {message}\n" for stamp, message in (
        (51233.871020, f"NVRM: Xid ({short}): 48, pid=48211, name=python3, An uncorrectable double bit error (DBE) "
                       "has been detected on GPU in the framebuffer at partition 6, subpartition 0."),
        (51233.871544, f"NVRM: Xid ({short}): 94, pid=48211, name=python3, Contained: CE User Channel (0x9). "
                       "RST: No, D-RST: No"),
        (51233.902117, f"NVRM: Xid ({short}): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row (0x0000000000"
                       "1c2e40) marked for remapping, reset gpu to activate.")))
    host.dmesg = _ok(lines)
    return host


HOSTS: dict[str, Callable[[], Host]] = {
    "baremetal-8xH100-SXM": dgx_h100,
    "baremetal-8xRTXPRO6000-p2p-ok": rtx_pro_6000_baremetal,
    "proxmox-q35-guest-8xRTXPRO6000-p2p-NS": proxmox_q35_guest,
    "proxmox-i440fx-guest-2xA6000": proxmox_i440fx_guest,
    "baremetal-4xRTX4090-consumer": rtx4090_workstation,
    "proxmox-host-4xRTXPRO6000-vfio": proxmox_host,
    "proxmox-host-8xRTXPRO6000-vm-no-clique": proxmox_host_vm_no_clique,
    "proxmox-host-8xRTXPRO6000-vm-clique-ok": proxmox_host_vm_clique_ok,
    "proxmox-q35-guest-8xRTXPRO6000-driver-mismatch": incident_guest_driver_mismatch,
    "proxmox-q35-guest-8xRTXPRO6000-no-nvml": incident_guest_no_nvml,
    "baremetal-8xRTXPRO6000-gpu-lost": rtx_pro_6000_gpu_lost,
    "baremetal-8xH100-SXM-xid48-row-remap": dgx_h100_health,
}


# ---------------------------------------------------------------------------
# Writing, checking, and live captures


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def build(name: str) -> str:
    return dumps(capture(HOSTS[name]()))


def live_capture(note: str) -> dict[str, Any]:
    """Capture this machine exactly as gpu_host_facts with save_capture: true does."""
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
    from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import LiveSource

    source = LiveSource(record=True)
    facts.audit(source, facts.resolve_subsets(["all"]), RuleOptions())
    return {**source.capture, "note": note}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    parser.add_argument("--live", metavar="NAME", help="capture this machine into tests/captures/NAME.json")
    parser.add_argument("--note", default="", help="provenance note for --live")
    parser.add_argument("names", nargs="*", help="captures to build (default: all described ones)")
    args = parser.parse_args(argv)
    if args.live:
        if not args.note:
            parser.error("--live needs --note: say what machine this is and how it was captured")
        (HERE / f"{args.live}.json").write_text(dumps(live_capture(args.note)), encoding="utf-8")
        return 0
    stale = []
    for name in args.names or HOSTS:
        text = build(name)
        path = HERE / f"{name}.json"
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"out of date: {', '.join(stale)}; run python tests/captures/build.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
