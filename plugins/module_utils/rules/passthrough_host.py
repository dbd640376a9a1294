"""Which PCI functions a Proxmox VE node hands to vfio-pci for GPU passthrough, and whether it may.

Pure: the host's PCI devices and IOMMU groups (as audit/passthrough_host.py reads them) in, a
``HostPlan`` out. The GPUs are the NVIDIA display and 3D controllers asked for (every one by
default); with each GPU go the other functions of its board, those on the same slot
(``0000:41:00.1`` audio, ``.2`` USB-C, ``.3`` its USB-C controller's serial bus): VFIO lets a VM
use a group only when no host driver holds any device of it, and the board's functions share it.

vfio-pci is told the ``vendor:device`` ids to claim (``options vfio-pci ids=``), so it claims every
device with such an id. The plan refuses, before anything is written:

- a GPU whose IOMMU group holds a device that is neither a function of a chosen board nor a PCI
  bridge (the root port above a slot is in its group on platforms without ACS): binding the group
  away would take that device from the host (a NIC, a disk controller), and leaving it makes the
  group unusable for a VM;
- an id that a device not chosen also has (a second GPU of the same model kept for the host):
  vfio-pci would take that device too.

Without IOMMU groups (the IOMMU is off, as before this role's first reboot) the groups cannot be
checked yet: the plan says so and the check runs again once the kernel has them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.kernel_cmdline import Rule
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import is_nvidia_gpu

BRIDGE_CLASSES = ("0x0604", "0x0609")  # PCI-to-PCI (root and switch ports), semi-transparent
CLASS_NAMES = {"0x0300": "VGA controller", "0x0302": "3D controller", "0x0403": "audio device",
               "0x0c03": "USB controller", "0x0c80": "serial bus controller", "0x0200": "Ethernet controller",
               "0x0207": "InfiniBand controller", "0x0108": "NVMe controller", "0x0106": "SATA controller",
               "0x0104": "RAID controller", "0x0600": "host bridge", "0x0c05": "SMBus controller"}
# Host drivers that would claim a board function first unless modprobe loads vfio-pci before them.
# snd_hda_intel is always listed: every NVIDIA board with a display output has an HDMI audio function.
ALWAYS_PRECEDED = ("nvidia", "nouveau", "snd_hda_intel")
PRECEDED_BY_CLASS = {"0x0c03": "xhci_pci", "0x0c80": "i2c_nvidia_gpu"}
REMEDIES = ("put the GPU in another slot (one whose root port has ACS, often a CPU-attached slot rather than "
            "one behind the chipset), or enable ACS (sometimes called 'ACS enable' or 'PCIe ARI/ACS') in the "
            "firmware setup so that the kernel can separate the devices; the pcie_acs_override kernel "
            "parameter also splits the groups, but only on paper: the devices can still reach each other's "
            "memory behind the IOMMU's back, which breaks the isolation between the VM and the host")

INTEL_CMDLINE = (Rule("intel_iommu", "on", frozenset({"off"})), Rule("iommu", "pt", frozenset({"off", "nopt"})))
# The AMD IOMMU is on unless amd_iommu=off; "amd_iommu=on" is not a value the kernel knows (it logs
# "AMD-Vi: Unknown option"), so nothing is added for AMD but the taking out of "off".
AMD_CMDLINE = (Rule("amd_iommu", None, frozenset({"off"})), Rule("iommu", "pt", frozenset({"off", "nopt"})))


class PassthroughError(ValueError):
    """A choice or host the plan cannot serve, with what was expected and what to do."""


def cmdline_rules(cpu_vendor: str | None) -> tuple[Rule, ...]:
    if cpu_vendor == "intel":
        return INTEL_CMDLINE
    if cpu_vendor == "amd":
        return AMD_CMDLINE
    raise PassthroughError(f"expected an Intel or AMD CPU (GenuineIntel or AuthenticAMD in /proc/cpuinfo), found "
                           f"{cpu_vendor or 'none'}; set proxmox_gpu_host_cpu_vendor to intel or amd")


@dataclass(frozen=True)
class Device:
    bdf: str
    vendor_id: str | None
    device_id: str | None
    class_code: str | None  # 0x030000
    driver: str | None = None
    iommu_group: str | None = None

    @property
    def slot(self) -> str:
        return self.bdf.rpartition(".")[0]

    @property
    def pci_id(self) -> str:
        return f"{self.vendor_id}:{self.device_id}"

    @property
    def class_prefix(self) -> str:
        return (self.class_code or "")[:6]

    @property
    def is_gpu(self) -> bool:
        return is_nvidia_gpu(self.vendor_id, self.class_code)

    @property
    def is_bridge(self) -> bool:
        return self.class_prefix in BRIDGE_CLASSES

    def describe(self) -> str:
        what = CLASS_NAMES.get(self.class_prefix, f"class {self.class_code or 'unknown'}")
        driver = f", driver {self.driver}" if self.driver else ", no driver"
        return f"{self.bdf} ({what} [{self.pci_id}]{driver})"

    def as_dict(self) -> dict[str, Any]:
        return {"bdf": self.bdf, "vendor_id": self.vendor_id, "device_id": self.device_id, "class": self.class_code,
                "driver": self.driver, "iommu_group": self.iommu_group}


@dataclass
class HostPlan:
    gpus: list[str] = field(default_factory=list)
    functions: list[Device] = field(default_factory=list)  # every function handed to vfio-pci, GPUs first by slot
    vfio_ids: list[str] = field(default_factory=list)
    preceded_drivers: list[str] = field(default_factory=list)
    groups_checked: bool = False
    refusals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    host_nvidia_gpus: list[str] = field(default_factory=list)  # NVIDIA GPUs left to the host

    def as_dict(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "functions": [f.as_dict() for f in self.functions], "vfio_ids": self.vfio_ids,
                "preceded_drivers": self.preceded_drivers, "groups_checked": self.groups_checked,
                "refusals": self.refusals, "notes": self.notes, "host_nvidia_gpus": self.host_nvidia_gpus}


def _choose(devices: Mapping[str, Device], wanted: Sequence[str]) -> list[Device]:
    if not wanted:
        return [d for d in devices.values() if d.is_gpu]
    chosen = []
    for bdf in wanted:
        key = bdf if bdf.count(":") == 2 else f"0000:{bdf}"
        device = devices.get(key.lower())
        if device is None or not device.is_gpu:
            found = "no such PCI device" if device is None else device.describe()
            raise PassthroughError(f"expected each of proxmox_gpu_host_gpus to be an NVIDIA display or 3D controller "
                                   f"such as 0000:41:00.0, found {bdf}: {found}; list the GPUs with lspci -D -d 10de:")
        chosen.append(device)
    return chosen


def plan_host(devices: Iterable[Device], groups: Mapping[str, Sequence[str]] | None,
              wanted: Sequence[str] = ()) -> HostPlan:
    """The functions to bind and the ids to give vfio-pci; refusals say why the host must not be changed."""
    by_bdf = {d.bdf: d for d in sorted(devices, key=lambda d: d.bdf)}
    plan = HostPlan()
    gpus = _choose(by_bdf, wanted)
    plan.gpus = [g.bdf for g in gpus]
    slots = {g.slot for g in gpus}
    plan.functions = [d for d in by_bdf.values() if d.slot in slots and not d.is_bridge]
    plan.host_nvidia_gpus = [d.bdf for d in by_bdf.values() if d.is_gpu and d.slot not in slots]
    plan.vfio_ids = list(dict.fromkeys(d.pci_id for d in sorted(plan.functions, key=lambda d: not d.is_gpu)))
    plan.preceded_drivers = list(dict.fromkeys(
        [*ALWAYS_PRECEDED, *(PRECEDED_BY_CLASS[d.class_prefix] for d in plan.functions
                             if d.class_prefix in PRECEDED_BY_CLASS)]))
    if not gpus:
        plan.notes.append("no NVIDIA GPU (vendor 10de, class 0300, 0302 or 0380) on this host; "
                          "nothing to pass through")
        return plan

    bound = {d.bdf for d in plan.functions}
    for pci_id in plan.vfio_ids:
        others = [d for d in by_bdf.values() if d.pci_id == pci_id and d.bdf not in bound]
        if others:
            plan.refusals.append(
                f"vfio-pci is given device ids, not addresses, and {', '.join(d.describe() for d in others)} "
                f"has the id {pci_id} of a chosen function but is not chosen: vfio-pci would take it from the host "
                f"too. Choose every GPU with that id in proxmox_gpu_host_gpus, or bind by address with "
                f"driver_override, which this role does not do")
    _check_groups(plan, by_bdf, groups, bound)
    return plan


def _check_groups(plan: HostPlan, by_bdf: Mapping[str, Device], groups: Mapping[str, Sequence[str]] | None,
                  bound: set[str]) -> None:
    if not groups:
        plan.notes.append("the kernel shows no IOMMU groups (the IOMMU is off, or its parameters are not in the "
                          "running kernel's command line yet), so whether each GPU is alone in its group is checked "
                          "after the reboot")
        return
    plan.groups_checked = True
    group_of = {bdf: group for group, members in groups.items() for bdf in members}
    for gpu in plan.gpus:
        group = group_of.get(gpu)
        if group is None:
            plan.refusals.append(f"GPU {gpu} is in no IOMMU group although the kernel shows groups: the IOMMU does "
                                 f"not cover its slot, and no VM can be given it. Check the firmware's IOMMU (VT-d, "
                                 f"AMD-Vi) settings")
            continue
        strangers = [by_bdf.get(bdf) or Device(bdf, None, None, None) for bdf in groups[group]
                     if bdf not in bound and not (bdf in by_bdf and by_bdf[bdf].is_bridge)]
        together = [g for g in plan.gpus if g != gpu and group_of.get(g) == group]
        if together and gpu < min(together):
            plan.notes.append(f"GPUs {', '.join([gpu, *together])} share IOMMU group {group} (no ACS between them): "
                              f"they can only be given to one VM together")
        if strangers:
            plan.refusals.append(
                f"GPU {gpu} shares IOMMU group {group} with {', '.join(d.describe() for d in strangers)}, which the "
                f"host would lose: a VM gets a whole group, and vfio-pci must hold every device of it. To fix it, "
                f"{REMEDIES}")


def plan_from_facts(devices: Iterable[Mapping[str, Any]], groups: Mapping[str, Sequence[str]] | None,
                    wanted: Sequence[str] = ()) -> HostPlan:
    """``plan_host`` over plain dicts: bdf, vendor_id, device_id, class, driver, iommu_group."""
    return plan_host([Device(d["bdf"], d.get("vendor_id"), d.get("device_id"), d.get("class"), d.get("driver"),
                             d.get("iommu_group")) for d in devices], groups, wanted)


def pending_reasons(plan: HostPlan, devices: Mapping[str, Mapping[str, Any]], cmdline_ok: bool,
                    rules: Sequence[Rule]) -> list[str]:
    """What the running kernel does not have yet of the plan; [] when the host is ready."""
    reasons = []
    if not cmdline_ok:
        wanted = " ".join(f"{r.key}={r.value}" for r in rules if r.value is not None)
        reasons.append(f"the running kernel's command line lacks {wanted or 'the IOMMU settings'}"
                       + (" or still turns the IOMMU off" if any(r.conflicts for r in rules) else ""))
    for function in plan.functions:
        driver = (devices.get(function.bdf) or {}).get("driver")
        if driver != "vfio-pci":
            reasons.append(f"{function.bdf} is bound to {driver or 'no driver'}, not vfio-pci")
    return reasons
