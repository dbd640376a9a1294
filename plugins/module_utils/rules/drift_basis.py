"""The facts that drift between audits compares, read out of a host's facts or an old report.

One flat mapping per host, ITEMS its keys, each value null where the facts did not tell (a subset not
gathered, a report older than the field, a source that did not hold it). Drift compares two of these and
a P2P proof keeps the one it was measured on (report/drift.py). A report of any age or written by hand is
read without raising: what is not in the shape written today reads as null.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import link_guest_to_host
from ansible_collections.gpuhost.gpu.plugins.module_utils.values import as_dict, as_list

ITEMS = ("driver", "cuda_driver", "kernel", "kernel_cmdline", "bios", "vbios", "gpu_set", "link", "iommu", "p2p",
         "proxmox_vm_config")
P2P_CAPABILITIES = ("read", "write", "nvlink", "atomics", "pci")
# What of a VM config decides passthrough and P2P (the config lines of its GPUs, its clique, what hides the
# hypervisor, its machine and firmware, its memory layout); its name, description and snapshots do not.
VM_SETTINGS = ("machine", "bios", "cpu", "args", "hostpci", "balloon", "numa", "hugepages", "memory_mib", "mmio64_mb",
               "pending", "pending_delete")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _bus(value: Any) -> str | None:
    return value.lower() if isinstance(value, str) and value else None


def _devices(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in as_list(as_dict(facts.get("gpus")).get("devices")) if isinstance(d, dict) and _bus(
        d.get("pci_bus_id"))]


def _pci_gpus(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in as_list(as_dict(facts.get("pci")).get("nvidia_devices"))
            if isinstance(d, dict) and d.get("kind") == "gpu" and _bus(d.get("bdf"))]


def gpu_set(facts: dict[str, Any]) -> dict[str, str] | None:
    """The GPUs the driver lists (a GPU fallen off the bus can stay enumerated on PCI while the driver drops
    it); without a driver list, the GPUs on the PCI bus; None when neither was gathered."""
    devices = _devices(facts)
    if devices:
        return {_bus(d["pci_bus_id"]): _text(d.get("name")) or _bus(d["pci_bus_id"]) for d in devices}
    if "pci" in facts and "pci" not in as_list(facts.get("not_seen")):
        return {_bus(d["bdf"]): _bus(d["bdf"]) for d in _pci_gpus(facts)}
    return None


def links(facts: dict[str, Any]) -> dict[str, dict[str, int | None]] | None:
    """Per GPU, the width it trained at and the link's maximums: from sysfs, or NVML where sysfs did not say.
    The current speed is left out: an idle GPU downshifts it (pcie_link_slow), so it would differ by load."""
    found: dict[str, dict[str, int | None]] = {}
    for device in _devices(facts):
        pcie = as_dict(device.get("pcie"))
        found[_bus(device["pci_bus_id"])] = {"width": _int(pcie.get("width_current")),
                                             "width_max": _int(pcie.get("width_max")),
                                             "gen_max": _int(pcie.get("gen_max"))}
    for device in _pci_gpus(facts):
        link = as_dict(device.get("link"))
        read = {"width": _int(link.get("width_current")), "width_max": _int(link.get("width_max")),
                "gen_max": _int(link.get("gen_max"))}
        if any(value is not None for value in read.values()):
            found[_bus(device["bdf"])] = read
    found = {bus: link for bus, link in found.items() if any(value is not None for value in link.values())}
    return found or None


def vbios(facts: dict[str, Any]) -> dict[str, str] | None:
    known = {_bus(d["pci_bus_id"]): d["vbios_version"] for d in _devices(facts) if _text(d.get("vbios_version"))}
    return known or None


def iommu(facts: dict[str, Any]) -> str | None:
    state = as_dict(facts.get("iommu"))
    if state.get("enabled") is None:
        return None
    return (_text(state.get("mode")) or "on") if state["enabled"] else "off"


def p2p(facts: dict[str, Any]) -> dict[str, dict[str, str | None]] | None:
    """Each capability's statuses by pair "i-j" (row i to column j), for the GPUs the matrices show."""
    matrices = as_dict(facts.get("p2p"))
    found: dict[str, dict[str, str | None]] = {}
    for capability in P2P_CAPABILITIES:
        rows = [row for row in as_list(matrices.get(capability)) if isinstance(row, list)]
        cells = {f"{i}-{j}": cell if isinstance(cell, str) else None
                 for i, row in enumerate(rows) for j, cell in enumerate(row) if i != j}
        if cells:
            found[capability] = cells
    return found or None


def kernel_cmdline(facts: dict[str, Any]) -> str | None:
    """The command line without BOOT_IMAGE, the image's file name: the kernel item says when the kernel moved."""
    cmdline = _text(as_dict(facts.get("kernel")).get("cmdline"))
    if cmdline is None:
        return None
    return " ".join(word for word in cmdline.split() if not word.startswith("BOOT_IMAGE="))


def vm_settings(vm: dict[str, Any]) -> dict[str, Any]:
    settings = {key: vm.get(key) for key in VM_SETTINGS if key != "hostpci"}
    settings["hostpci"] = [entry.get("line") for entry in as_list(vm.get("hostpci")) if isinstance(entry, dict)]
    return settings


def proxmox_vms(facts: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    """A Proxmox host's VMs that pass devices through, by VM id."""
    if not isinstance(facts.get("proxmox"), dict):
        return None
    return {str(vm.get("vmid")): vm_settings(vm) for vm in as_list(facts["proxmox"].get("vms"))
            if isinstance(vm, dict) and vm.get("vmid") is not None}


def guest_vm(guest: dict[str, Any], proxmox_hosts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]] | None:
    """The guest's own VM (DMI product_uuid = smbios1 uuid) on a Proxmox host audited in the same run, or None.
    A clone that shares the uuid matches too; the first host by name is taken, as the guest link names it."""
    for host in sorted(proxmox_hosts):
        link = link_guest_to_host(guest, proxmox_hosts[host], host)
        if link is None:
            continue
        for vm in as_list(as_dict(proxmox_hosts[host].get("proxmox")).get("vms")):
            if isinstance(vm, dict) and vm.get("vmid") == link["vmid"]:
                return {str(vm["vmid"]): vm_settings(vm)}
    return None


def basis_of(facts: dict[str, Any], vm_config: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The comparable facts of a host; ``vm_config`` is a guest's own VM config (guest_vm), when known."""
    gpus = as_dict(facts.get("gpus"))
    return {
        "driver": _text(gpus.get("driver_version")),
        "cuda_driver": _text(gpus.get("cuda_driver_version")),
        "kernel": _text(as_dict(facts.get("kernel")).get("release")),
        "kernel_cmdline": kernel_cmdline(facts),
        "bios": _text(as_dict(as_dict(facts.get("virtualization")).get("dmi")).get("bios_version")),
        "vbios": vbios(facts),
        "gpu_set": gpu_set(facts),
        "link": links(facts),
        "iommu": iommu(facts),
        "p2p": p2p(facts),
        "proxmox_vm_config": proxmox_vms(facts) if vm_config is None else vm_config,
    }


def stored_basis(value: Any) -> dict[str, Any] | None:
    """A basis read back from a report: each item kept only in the shape basis_of writes, else null."""
    if not isinstance(value, dict):
        return None
    shapes = {"vbios": dict, "gpu_set": dict, "link": dict, "p2p": dict, "proxmox_vm_config": dict}
    return {item: value.get(item) if isinstance(value.get(item), shapes.get(item, str)) else None for item in ITEMS}
