"""Proxmox VE hypervisor: the VMs that pass GPUs through, as their configs say.

A guest cannot see why its GPUs get no peer-to-peer: the cause sits in
``/etc/pve/qemu-server/<vmid>.conf`` on the host (machine type, ``pcie=1``,
the ``x-nv-gpudirect-clique`` options in ``args``, KVM hidden from the guest).
This gatherer reads those configs (``parsers/proxmox_config.py`` parses them)
and what the host knows about each passed-through device: driver, IOMMU group,
NUMA node, BAR sizes; ``proxmox_vm.py`` joins the two into each VM's facts.

``gather_proxmox`` returns None off Proxmox VE, else a dict: node, version,
build, kernel (``pveversion``), vm_count, vms_without_hostpci, host
(cpu_vendor, phys_bits, numa_nodes, bootloader, iommu_enabled, iommu_cmdline,
vfio_modules) and vms (``proxmox_vm.vm_facts`` of each VM that passes a
device through).
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import PVEVERSION
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.pci import PCI_DIR, kind_of, read_ids
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.proxmox_vm import (
    HostView,
    expand_host_ids,
    mapped_ids,
    vm_facts,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.virt import parse_node_names
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import (
    PCI_MAPPING_FILE,
    QEMU_SERVER_DIR,
    VmConfig,
    parse_hostpci,
    parse_pci_mapping,
    parse_vm_config,
    passes_pci_through,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pveversion import parse_pveversion
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_given import assume_guest_gpus

HOSTNAME_FILE = "/proc/sys/kernel/hostname"
NODE_DIR = "/sys/devices/system/node"
VM_CONFIG_NAME = re.compile(r"^(?P<vmid>\d+)\.conf$")
ADDRESS_SIZES = re.compile(r"^address sizes\s*:\s*(?P<bits>\d+) bits physical", re.MULTILINE)
CPU_VENDOR = re.compile(r"^vendor_id\s*:\s*(?P<vendor>\S+)", re.MULTILINE)


def _device_from_pci_facts(device: dict[str, Any]) -> dict[str, Any]:
    return {"kind": device.get("kind"), "vendor_id": device.get("vendor_id"), "device_id": device.get("device_id"),
            "driver": device.get("driver"), "iommu_group": device.get("iommu_group"),
            "numa_node": device.get("numa_node"), "bars": device.get("bars") or [], "is_bridge": False}


def _device_from_sysfs(source: Source, bdf: str, groups: dict[str, list[str]]) -> dict[str, Any] | None:
    ids = read_ids(source, bdf)
    if not ids["vendor"]:
        return None
    class_code = ids["class"] or ""
    return {"kind": kind_of(ids), "vendor_id": ids["vendor"][2:], "device_id": (ids["device"] or "")[2:] or None,
            "driver": None, "iommu_group": next((g for g, m in groups.items() if bdf in m), None),
            "numa_node": None, "bars": [], "is_bridge": class_code.startswith("0x0604")}


def _host_phys_bits(cpuinfo: str | None) -> int | None:
    match = ADDRESS_SIZES.search(cpuinfo or "")
    return int(match.group("bits")) if match else None


def _cpu_vendor(cpuinfo: str | None) -> str | None:
    match = CPU_VENDOR.search(cpuinfo or "")
    if not match:
        return None
    return {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(match.group("vendor"), match.group("vendor"))


def _bootloader(cmdline: str | None) -> str | None:
    """GRUB passes BOOT_IMAGE=; systemd-boot (proxmox-boot-tool, ZFS on UEFI) passes initrd=."""
    if not cmdline:
        return None
    if "BOOT_IMAGE=" in cmdline:
        return "grub"
    if "initrd=" in cmdline:
        return "systemd-boot"
    return None


def gather_proxmox(source: Source, iommu: Any, pci_facts: dict[str, Any], node_evidence: str | None = "pveversion",
                   guest_gpu_count: int = 0) -> dict[str, Any] | None:
    """The node's VMs that pass PCI devices through, joined to the host's facts; None without VM configs.

    ``node_evidence`` None: the configs came in material without the node (a guest's ticket with its VM's config).
    Nothing of the host's is read then (what the material shows is the guest's), and where no device of a VM is
    known, its hostpci entries are taken for the guest's ``guest_gpu_count`` GPUs when the counts agree
    (``gpus_assumed`` says so), else left unjudged (``gpus_not_known`` says what to give)."""
    names = source.listdir(QEMU_SERVER_DIR)
    if names is None:
        return None
    is_node = node_evidence is not None
    version = source.run(PVEVERSION.argv)
    node = source.read_value(HOSTNAME_FILE) if is_node else None
    cpuinfo = source.read_text("/proc/cpuinfo") if is_node else None
    cmdline = source.read_value("/proc/cmdline") if is_node else None

    configs: dict[int, VmConfig] = {}
    for name in names:
        match = VM_CONFIG_NAME.match(name)
        text = source.read_text(f"{QEMU_SERVER_DIR}/{name}") if match else None
        if match and text is not None:
            configs[int(match.group("vmid"))] = parse_vm_config(text)
    with_hostpci = {vmid: c for vmid, c in sorted(configs.items()) if passes_pci_through(c)}

    groups = dict(getattr(iommu, "groups", {}) or {}) if is_node else {}
    host = HostView(groups=groups, phys_bits=_host_phys_bits(cpuinfo),
                    numa_nodes=parse_node_names(source.listdir(NODE_DIR) or []) if is_node else [])
    if any("mapping=" in v for c in with_hostpci.values() for k, v in c.effective().items() if k.startswith("hostpci")):
        host.mappings = parse_pci_mapping(source.read_text(PCI_MAPPING_FILE) or "", node)
    if with_hostpci and is_node:
        host.bdfs = source.listdir(PCI_DIR)
        host.devices = {d["bdf"]: _device_from_pci_facts(d) for d in pci_facts.get("nvidia_devices") or []}
        _read_other_devices(source, with_hostpci, host)

    vms = [vm_facts(vmid, config, host) for vmid, config in with_hostpci.items()]
    if not is_node:
        assume_guest_gpus(vms, guest_gpu_count)
    modules = getattr(iommu, "modules", {}) or {} if is_node else {}
    return {
        "node": node,
        "node_evidence": node_evidence,
        **parse_pveversion(version.stdout if version.ok else ""),
        "vm_count": len(configs),
        "vms_without_hostpci": sorted(set(configs) - set(with_hostpci)),
        "host": {
            "cpu_vendor": _cpu_vendor(cpuinfo),
            "phys_bits": host.phys_bits,
            "numa_nodes": host.numa_nodes,
            "bootloader": _bootloader(cmdline),
            # None where the material showed neither IOMMU groups nor /sys/class/iommu, or showed no node at all.
            "iommu_enabled": getattr(iommu, "enabled", False) if is_node else None,
            "iommu_cmdline": dict(getattr(iommu, "cmdline", {}) or {}) if is_node else {},
            "vfio_modules": {m: bool(modules.get(m)) if is_node else None
                             for m in ("vfio", "vfio_iommu_type1", "vfio_pci")},
        },
        "vms": vms,
    }


def _read_other_devices(source: Source, configs: dict[int, VmConfig], host: HostView) -> None:
    """Devices the configs name that the NVIDIA PCI facts do not cover, and their IOMMU group peers."""
    wanted: set[str] = set()
    for config in configs.values():
        for key, value in config.effective().items():
            if re.fullmatch(r"hostpci\d+", key):
                entry = parse_hostpci(int(key[7:]), value)
                ids, _warnings = mapped_ids(entry, host)
                wanted.update(expand_host_ids(ids, host.bdfs)[0])
    for bdf in sorted(wanted):
        if bdf not in host.devices and (host.bdfs is None or bdf in host.bdfs):
            device = _device_from_sysfs(source, bdf, host.groups)
            if device is not None:
                device["driver"] = _driver(source, bdf)
                host.devices[bdf] = device
    peers = {p for bdf in wanted for g in [(host.devices.get(bdf) or {}).get("iommu_group")] if g
             for p in host.groups.get(g, [])}
    for bdf in sorted(peers - set(host.devices)):
        device = _device_from_sysfs(source, bdf, host.groups)
        if device is not None:
            host.devices[bdf] = device


def _driver(source: Source, bdf: str) -> str | None:
    target = source.readlink(f"{PCI_DIR}/{bdf}/driver")
    return target.rsplit("/", 1)[-1] if target else None
