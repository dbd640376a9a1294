"""What a Proxmox VE node's passthrough setup depends on, read through a ``Source``: every PCI
function's ids, class, driver and IOMMU group, the groups, the CPU vendor and the running kernel's
command line. rules/passthrough_host.py decides from it; nothing here judges.

The readers are the audit's (pci.read_ids, iommu.gather_iommu), so the role sees the host as the
audit does.
"""

from __future__ import annotations

import os
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.iommu import gather_iommu, group_of
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.pci import PCI_DIR, read_ids
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.proxmox import CPU_VENDOR
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source

CPU_VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}


def cpu_vendor(cpuinfo: str | None) -> str | None:
    match = CPU_VENDOR.search(cpuinfo or "")
    return CPU_VENDORS.get(match.group("vendor")) if match else None


def _hex(value: str | None) -> str | None:
    return value[2:] if value and value.startswith("0x") else value


def gather_passthrough(source: Source) -> dict[str, Any]:
    """devices (bdf, vendor_id, device_id, class, driver, iommu_group), iommu_groups, iommu_enabled,
    cmdline, cpu_vendor, problems."""
    iommu = gather_iommu(source)
    devices = []
    for bdf in source.listdir(PCI_DIR) or []:
        ids = read_ids(source, bdf)
        driver = source.readlink(f"{PCI_DIR}/{bdf}/driver")
        devices.append({"bdf": bdf, "vendor_id": _hex(ids["vendor"]), "device_id": _hex(ids["device"]),
                        "class": ids["class"], "driver": os.path.basename(driver) if driver else None,
                        "iommu_group": group_of(iommu, bdf)})
    return {
        "devices": devices,
        "iommu_groups": iommu.groups,
        "iommu_enabled": iommu.enabled,
        "cmdline": source.read_value("/proc/cmdline") or "",
        "cpu_vendor": cpu_vendor(source.read_text("/proc/cpuinfo")),
        "problems": source.problems,
    }
