"""Is the IOMMU on, in which mode, and how are devices grouped?

Passthrough hosts need it on with every GPU alone in its group; guests only
have one when the VM was given a virtual IOMMU. The kernel states the truth in
each group's ``type`` (DMA, DMA-FQ, identity...), which beats reading intent
from the command line. Material that shows neither the groups nor
/sys/class/iommu leaves ``enabled`` null: off would be a guess.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import DMESG
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source

GROUPS_DIR = "/sys/kernel/iommu_groups"
IOMMU_CLASS_DIR = "/sys/class/iommu"
# Kernel parameters that steer the IOMMU and VFIO.
CMDLINE_KEYS = ("intel_iommu", "amd_iommu", "iommu", "iommu.passthrough", "iommu.strict",
                "vfio-pci.ids", "vfio_pci.ids", "vfio_iommu_type1.allow_unsafe_interrupts",
                "pcie_acs_override", "pci")
MODULES_OF_INTEREST = ("vfio", "vfio_iommu_type1", "vfio_pci", "nvidia", "nvidia_uvm", "nvidia_drm",
                       "nvidia_modeset", "nouveau", "kvm", "kvm_intel", "kvm_amd")
GROUP_TYPE_MODES = {"identity": "passthrough", "DMA": "translated", "DMA-FQ": "translated",
                    "blocked": "blocked", "unmanaged": "unmanaged"}
DMESG_DEFAULT_DOMAIN = re.compile(r"iommu: Default domain type: (?P<mode>\w+)")


@dataclass
class Iommu:
    enabled: bool | None = False  # None: neither the groups nor /sys/class/iommu were seen
    mode: str | None = None  # passthrough | translated | mixed | None when off
    mode_source: str | None = None
    vendor: str | None = None  # intel (DMAR) | amd (AMD-Vi) | virtio | other
    hardware: list[str] = field(default_factory=list)
    cmdline: dict[str, str] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    group_types: dict[str, str] = field(default_factory=dict)
    modules: dict[str, bool] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_cmdline(text: str) -> dict[str, str]:
    """Kernel parameters that matter here; a bare flag maps to ""."""
    found: dict[str, str] = {}
    for token in text.split():
        if token == "--":
            break  # what follows belongs to init, not the kernel
        key, sep, value = token.partition("=")
        if key in CMDLINE_KEYS:
            found[key] = value if sep else ""
    return found


def cmdline_mode(cmdline: dict[str, str]) -> str | None:
    if cmdline.get("iommu") == "pt" or cmdline.get("iommu.passthrough") == "1":
        return "passthrough"
    if cmdline.get("iommu.passthrough") == "0" or cmdline.get("iommu") == "nopt":
        return "translated"
    return None


def iommu_vendor(hardware: list[str]) -> str | None:
    if any(name.startswith("dmar") for name in hardware):
        return "intel"
    if any(name.startswith("ivhd") for name in hardware):
        return "amd"
    if any(name.startswith("virtio") for name in hardware):
        return "virtio"
    return "other" if hardware else None


def mode_from_group_types(types: dict[str, str]) -> str | None:
    modes = {GROUP_TYPE_MODES.get(t, t) for t in types.values()}
    modes.discard("blocked")
    modes.discard("unmanaged")  # groups held by vfio for a guest say nothing of the default
    if not modes:
        return None
    return modes.pop() if len(modes) == 1 else "mixed"


def gather_iommu(source: Source) -> Iommu:
    iommu = Iommu()
    iommu.cmdline = parse_cmdline(source.read_value("/proc/cmdline") or "")
    iommu.hardware = source.listdir(IOMMU_CLASS_DIR) or []
    iommu.vendor = iommu_vendor(iommu.hardware)
    for group in sorted(source.listdir(GROUPS_DIR) or [], key=lambda g: (len(g), g)):
        members = source.listdir(f"{GROUPS_DIR}/{group}/devices") or []
        iommu.groups[group] = members
        group_type = source.read_value(f"{GROUPS_DIR}/{group}/type")
        if group_type:
            iommu.group_types[group] = group_type
    loaded = set(source.listdir("/sys/module") or [])
    iommu.modules = {name: name in loaded for name in MODULES_OF_INTEREST}

    iommu.enabled = bool(iommu.groups) or bool(iommu.hardware)
    if not iommu.enabled and not (source.seen("dirs", GROUPS_DIR) or source.seen("dirs", IOMMU_CLASS_DIR)):
        iommu.enabled = None
    if not iommu.enabled:
        return iommu
    for mode, origin in ((mode_from_group_types(iommu.group_types), "iommu group types"),
                         (_dmesg_mode(source), "dmesg"),
                         (cmdline_mode(iommu.cmdline), "kernel command line")):
        if mode:
            iommu.mode, iommu.mode_source = mode, origin
            break
    return iommu


def _dmesg_mode(source: Source) -> str | None:
    result = source.run(DMESG.argv)
    if not result.ok:
        return None
    match = DMESG_DEFAULT_DOMAIN.search(result.stdout)
    if not match:
        return None
    return {"passthrough": "passthrough", "translated": "translated"}.get(match.group("mode").lower())


def group_of(iommu: Iommu, bdf: str) -> str | None:
    for group, members in iommu.groups.items():
        if bdf in members:
            return group
    return None
