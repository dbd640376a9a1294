"""Is this bare metal, a virtual machine or a container, and which one?

No single signal can be trusted: systemd-detect-virt calls a KVM microVM with a
stale /.dockerenv "docker", DMI is absent on some hypervisors, and a guest's
PCI tree is whatever QEMU chose to emulate. So every signal is read, kept as
evidence, and the verdict is a vote in which the strong signals win. Where no
signal could be read at all (material without /proc/cpuinfo, DMI, dmesg,
PCI or systemd-detect-virt), there is no verdict: the type is null, said
"unknown", never bare metal.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import DETECT_VIRT, DMESG, LSPCI
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import PciParseError

DMI_DIR = "/sys/class/dmi/id"
DMI_FIELDS = ("sys_vendor", "product_name", "product_version", "product_uuid", "bios_vendor",
              "bios_version", "board_vendor", "board_name", "chassis_vendor")

# DMI sys_vendor / product_name fragments and the hypervisor they name.
DMI_HYPERVISORS = (
    ("qemu", "kvm"),
    ("kvm", "kvm"),
    ("vmware", "vmware"),
    ("virtualbox", "virtualbox"),
    ("innotek", "virtualbox"),
    ("xen", "xen"),
    ("amazon ec2", "kvm"),
    ("google compute engine", "kvm"),
    ("openstack", "kvm"),
    ("bochs", "bochs"),
    ("parallels", "parallels"),
)
# Microsoft names both its laptops and Hyper-V guests in sys_vendor; only the
# product name "Virtual Machine" marks a guest.
HYPERV_PRODUCT = "virtual machine"

# dmesg: "Hypervisor detected: KVM" (x86) names the hypervisor the kernel found.
# The name is the rest of the line, stripped where it is read: a lazy name before \s*$ tried the blanks' run again at
# each of its characters (quadratic in a line of blanks).
DMESG_HYPERVISOR = re.compile(r"Hypervisor detected:\s*(?P<name>[^\n]+)")
DMESG_HYPERVISOR_NAMES = {"kvm": "kvm", "vmware": "vmware", "microsoft hyper-v": "hyperv",
                          "microsoft hyperv": "hyperv", "xen hvm": "xen", "xen pv": "xen",
                          "acrn": "acrn", "jailhouse": "jailhouse", "bhyve": "bhyve"}

# PCI vendors that exist only inside virtual machines.
VIRTUAL_PCI_VENDORS = {
    "0x1af4": ("kvm", "virtio device (Red Hat / QEMU)"),
    "0x1b36": ("kvm", "QEMU emulated device (Red Hat)"),
    "0x15ad": ("vmware", "VMware virtual device"),
    "0x1414": ("hyperv", "Hyper-V virtual device (Microsoft)"),
    "0x5853": ("xen", "Xen platform device"),
    "0x80ee": ("virtualbox", "VirtualBox guest device"),
}
# Host bridges that hypervisors emulate: (QEMU machine type, platform). The first two
# are also the ids of Intel chipsets from 1996 and 2007; no GPU server has those, so
# they count as VM signals.
EMULATED_HOST_BRIDGES = {
    ("0x8086", "0x29c0"): ("q35", None),
    ("0x8086", "0x1237"): ("i440fx", None),
    ("0x8086", "0x0d57"): (None, "rust-vmm"),
}
# PCIe switch ports QEMU emulates under their real ids: TI's XIO3130 (x3130-upstream, xio3130-downstream), a
# PCIe 1.1 x1 switch of 2007 that no GPU server carries, so above a GPU they are a hypervisor's.
EMULATED_SWITCH_PORTS = {
    ("0x104c", "0x8232"): "TI XIO3130 upstream port (QEMU x3130-upstream)",
    ("0x104c", "0x8233"): "TI XIO3130 downstream port (QEMU xio3130-downstream)",
}

SYSTEMD_DETECT_VIRT_NAMES = {"microsoft": "hyperv", "oracle": "virtualbox", "qemu": "kvm"}


@dataclass
class Evidence:
    signal: str
    value: str
    says: str
    weight: str = "strong"


@dataclass
class Virtualization:
    type: str | None = "bare_metal"  # bare_metal | vm | container; None when nothing was read
    hypervisor: str | None = None
    platform: str | None = None  # proxmox, firecracker, ec2... when a signal names it
    container: str | None = None
    machine_type: str | None = None  # q35 | i440fx for QEMU guests
    virtual_iommu: bool = False
    dmi: dict[str, str | None] = field(default_factory=dict)
    product_uuid: str | None = None
    numa_nodes: list[int] = field(default_factory=list)
    hugepages: dict[str, int | None] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    summary: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def cpuinfo_has_hypervisor_flag(text: str) -> bool | None:
    """The CPUID hypervisor bit as the kernel shows it; None when no flags line exists (non-x86)."""
    for line in text.splitlines():
        key, _unused, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return "hypervisor" in value.split()
    return None


def dmesg_hypervisor(text: str) -> str | None:
    match = DMESG_HYPERVISOR.search(text)
    if not match:
        return None
    name = match.group("name").strip().lower()
    return DMESG_HYPERVISOR_NAMES.get(name, name)


def dmi_hypervisor(dmi: dict[str, str | None]) -> str | None:
    vendor = (dmi.get("sys_vendor") or "").lower()
    product = (dmi.get("product_name") or "").lower()
    if "microsoft" in vendor and HYPERV_PRODUCT in product:
        return "hyperv"
    for fragment, name in DMI_HYPERVISORS:
        if fragment in vendor or fragment in product:
            return name
    return None


def dmi_machine_type(dmi: dict[str, str | None]) -> str | None:
    """QEMU writes its machine into DMI: "Standard PC (Q35 + ICH9, 2009)" or "(i440FX + PIIX, 1996)"."""
    text = f"{dmi.get('product_name') or ''} {dmi.get('product_version') or ''}".lower()
    if "q35" in text:
        return "q35"
    if "i440fx" in text:
        return "i440fx"
    return None


def parse_meminfo_hugepages(text: str) -> dict[str, int | None]:
    values: dict[str, int | None] = {"total": None, "free": None, "size_kb": None}
    keys = {"HugePages_Total": "total", "HugePages_Free": "free", "Hugepagesize": "size_kb"}
    for line in text.splitlines():
        key, _unused, rest = line.partition(":")
        if key in keys:
            number = rest.split()[0] if rest.split() else ""
            values[keys[key]] = int(number) if number.isdigit() else None
    return values


def parse_node_names(names: list[str]) -> list[int]:
    return sorted(int(name[4:]) for name in names if re.fullmatch(r"node\d+", name))


def read_dmi(source: Source) -> dict[str, str | None]:
    return {name: source.read_value(f"{DMI_DIR}/{name}") for name in DMI_FIELDS}


def _container_signals(source: Source) -> list[Evidence]:
    found: list[Evidence] = []
    if source.read_bytes("/run/.containerenv") is not None:
        found.append(Evidence("/run/.containerenv", "present", "podman"))
    systemd_container = source.read_value("/run/systemd/container")
    if systemd_container:
        found.append(Evidence("/run/systemd/container", systemd_container, systemd_container))
    cgroup = source.read_text("/proc/1/cgroup") or ""
    runtime = re.search(r"/(docker|libpod|containerd|kubepods|lxc)[-/.]", cgroup)
    if runtime:
        name = {"libpod": "podman", "kubepods": "kubernetes"}.get(runtime.group(1), runtime.group(1))
        found.append(Evidence("/proc/1/cgroup", runtime.group(0), name))
    if source.read_bytes("/.dockerenv") is not None:
        # Images built with Docker keep /.dockerenv when booted as a VM's root file
        # system; alone it proves nothing, so it only counts when seconded.
        found.append(Evidence("/.dockerenv", "present", "docker", weight="weak"))
    return found


def _detect_virt(source: Source, flag: str) -> str | None:
    result = source.run(DETECT_VIRT[flag].argv)
    if result.rc is None:
        return None
    value = result.stdout.strip()
    return value or None


def gather_virtualization(source: Source, pci_ids: list[tuple[str, str, str]],
                          iommu_group_count: int, iommu_hardware: list[str]) -> Virtualization:
    """``pci_ids``: (bdf, vendor, device) of every PCI device, as read by the PCI gatherer."""
    virt = Virtualization()
    vm_votes: list[Evidence] = []

    cpuinfo = source.read_text("/proc/cpuinfo")
    if cpuinfo is not None:
        flag = cpuinfo_has_hypervisor_flag(cpuinfo)
        if flag is not None:
            evidence = Evidence("/proc/cpuinfo", "hypervisor flag" if flag else "no hypervisor flag",
                                "vm" if flag else "bare_metal")
            virt.evidence.append(evidence)
            if flag:
                vm_votes.append(evidence)

    dmesg = source.run(DMESG.argv)
    if dmesg.ok:
        name = dmesg_hypervisor(dmesg.stdout)
        if name:
            evidence = Evidence("dmesg", f"Hypervisor detected: {name}", name)
            virt.evidence.append(evidence)
            vm_votes.append(evidence)
        if "DMI not present or invalid" in dmesg.stdout:
            virt.evidence.append(Evidence("dmesg", "DMI not present or invalid", "no DMI", weight="weak"))
    elif dmesg.rc is not None:
        # Unprivileged users get "Operation not permitted" with kernel.dmesg_restrict=1.
        source.note_problem(DMESG.key, (dmesg.stderr or dmesg.stdout).strip()[:200] or f"exit {dmesg.rc}")

    virt.dmi = read_dmi(source)
    virt.product_uuid = virt.dmi.get("product_uuid")
    dmi_name = dmi_hypervisor(virt.dmi)
    if dmi_name:
        evidence = Evidence("DMI", f"{virt.dmi.get('sys_vendor')} / {virt.dmi.get('product_name')}", dmi_name)
        virt.evidence.append(evidence)
        vm_votes.append(evidence)
    virt.machine_type = dmi_machine_type(virt.dmi)
    if "+pve" in (virt.dmi.get("product_version") or ""):
        virt.platform = "proxmox"
        virt.evidence.append(Evidence("DMI product_version", virt.dmi["product_version"] or "", "proxmox"))

    for bdf, vendor, device in pci_ids:
        if (vendor, device) in EMULATED_HOST_BRIDGES:
            machine, platform = EMULATED_HOST_BRIDGES[(vendor, device)]
            virt.machine_type = virt.machine_type or machine
            virt.platform = virt.platform or platform
            evidence = Evidence(f"PCI {bdf}", f"{vendor[2:]}:{device[2:]} {machine or platform} host bridge", "kvm")
            virt.evidence.append(evidence)
            vm_votes.append(evidence)
    virtual_vendors = sorted({vendor for _bdf, vendor, _device in pci_ids if vendor in VIRTUAL_PCI_VENDORS})
    for vendor in virtual_vendors:
        name, label = VIRTUAL_PCI_VENDORS[vendor]
        count = sum(1 for _bdf, v, _d in pci_ids if v == vendor)
        evidence = Evidence("PCI vendor", f"{count} x {label}", name)
        virt.evidence.append(evidence)
        vm_votes.append(evidence)

    if source.partial and not pci_ids:
        signals, machine = lspci_signals(source)
        virt.evidence += signals
        vm_votes += signals
        virt.machine_type = virt.machine_type or machine

    cmdline = source.read_value("/proc/cmdline") or ""
    if "firecracker" in cmdline:
        virt.platform = "firecracker"  # more precise than the rust-vmm host bridge
        evidence = Evidence("/proc/cmdline", "names firecracker", "kvm")
        virt.evidence.append(evidence)
        vm_votes.append(evidence)

    # An NCCL topology dump in material (material/nccl_topology.py): the source's readers read it.
    topology_votes, topology_notes = source.readers.topology_signals(source)
    virt.evidence.extend(topology_votes)
    vm_votes.extend(topology_votes)

    detected_vm = _detect_virt(source, "--vm")
    if detected_vm and detected_vm != "none":
        name = SYSTEMD_DETECT_VIRT_NAMES.get(detected_vm, detected_vm)
        evidence = Evidence("systemd-detect-virt --vm", detected_vm, name)
        virt.evidence.append(evidence)
        vm_votes.append(evidence)
    elif detected_vm == "none":
        virt.evidence.append(Evidence("systemd-detect-virt --vm", "none", "bare_metal", weight="weak"))

    container_votes = _container_signals(source)
    detected_container = _detect_virt(source, "--container")
    if detected_container and detected_container != "none":
        # systemd decides "docker" from /.dockerenv alone, so it is no stronger than that file.
        weight = "weak" if detected_container == "docker" else "strong"
        container_votes.append(Evidence("systemd-detect-virt --container", detected_container,
                                        detected_container, weight=weight))
    virt.evidence.extend(container_votes)
    virt.container = _container_verdict(container_votes)

    if vm_votes:
        virt.type = "vm"
        named = [e.says for e in vm_votes if e.says != "vm"]
        virt.hypervisor = max(set(named), key=named.count) if named else "unknown"
    elif virt.container:
        virt.type = "container"
    elif not (virt.evidence or pci_ids or any(virt.dmi.values())):
        virt.type = None  # no signal was read: bare metal would be a guess

    # Weak signs vote for nothing and come after the verdict: alone they must not turn "unknown" into bare metal.
    virt.evidence.extend(topology_notes)
    virt.virtual_iommu = virt.type == "vm" and (iommu_group_count > 0 or bool(iommu_hardware))
    virt.numa_nodes = parse_node_names(source.listdir("/sys/devices/system/node") or [])
    meminfo = source.read_text("/proc/meminfo")
    virt.hugepages = parse_meminfo_hugepages(meminfo) if meminfo else {}
    virt.summary = describe(virt)
    return virt


def _container_verdict(votes: list[Evidence]) -> str | None:
    # Weak signals (a /.dockerenv, and systemd saying "docker" because of it) are one
    # fact that images leave behind; only a strong signal names a container.
    strong = [e.says for e in votes if e.weight == "strong"]
    return strong[0] if strong else None


HYPERVISOR_LABELS = {"kvm": "KVM", "vmware": "VMware", "hyperv": "Hyper-V", "xen": "Xen",
                     "virtualbox": "VirtualBox", "unknown": "unknown hypervisor"}


UNKNOWN = "unknown (nothing read tells bare metal, a virtual machine or a container apart)"


def with_vm_config(virt: dict[str, Any], vm: dict[str, Any]) -> dict[str, Any]:
    """The virtualization facts with the vote of the VM config that came with a guest's material (the one VM passing
    as many devices as the guest has GPUs, rules/proxmox_given.py): the guest is that KVM VM, of its machine type.
    A strong signal of its own, as DMI is: the config is the hypervisor's record of this guest. A verdict that is
    already a VM keeps its hypervisor and gains the machine type where it had none; a container is left alone."""
    if virt.get("type") not in (None, "vm", "bare_metal") or not vm.get("machine_type"):
        return virt
    updated = Virtualization(**{**virt, "evidence": [Evidence(**e) for e in virt.get("evidence") or []]})
    updated.evidence.append(Evidence(f"VM config {vm.get('vmid')} (given with the material)",
                                     f"machine {vm.get('machine_type')}", "kvm"))
    if updated.type != "vm":
        updated.type, updated.hypervisor = "vm", "kvm"
    updated.machine_type = updated.machine_type or vm["machine_type"]
    updated.platform = updated.platform or "proxmox"
    updated.summary = describe(updated)
    return updated.as_dict()


def describe(virt: Virtualization) -> str:
    if virt.type is None:
        return UNKNOWN
    if virt.type == "bare_metal":
        return "bare metal"
    if virt.type == "container":
        return f"{virt.container} container on bare metal"
    text = f"{HYPERVISOR_LABELS.get(virt.hypervisor or 'unknown', virt.hypervisor)} virtual machine"
    details = [d for d in (virt.platform, virt.machine_type and f"machine {virt.machine_type}") if d]
    if details:
        text += f" ({', '.join(details)})"
    if virt.container:
        text += f", inside a {virt.container} container"
    return text


# NVML virtualization modes (audit/nvml.py VIRTUALIZATION_MODES) that only a guest's GPU reports: passed through
# whole, or a vGPU. The hypervisor's own modes (host_vgpu, host_vsga) say this is the host, not a guest.
GUEST_GPU_MODES = {"passthrough": "Pass-Through", "vgpu": "VGPU"}


def note_gpu_modes(virt: Virtualization, gpus: dict[str, Any], iommu_seen: bool) -> None:
    """The driver's word on each GPU (``GPU Virtualization Mode`` of ``nvidia-smi -q``, NVML's mode): a GPU
    passed through or a vGPU is in a virtual machine, whatever else was read. Read after the GPUs, so the
    verdict is made again here when it changes. ``iommu_seen``: IOMMU groups or hardware were found, which in a
    guest is a virtual IOMMU."""
    guests = [(device.get("index"), device["virtualization_mode"]) for device in gpus.get("devices") or []
              if device.get("virtualization_mode") in GUEST_GPU_MODES]
    if not guests:
        return
    modes = sorted({mode for _index, mode in guests})
    signal = "NVML" if gpus.get("source") == "nvml" else "nvidia-smi -q"
    virt.evidence.append(Evidence(f"{signal} GPU Virtualization Mode",
                                  f"{', '.join(GUEST_GPU_MODES[m] for m in modes)} on {len(guests)} GPU(s)", "vm"))
    if virt.type != "vm":
        virt.type, virt.hypervisor = "vm", "unknown"
        virt.virtual_iommu = iommu_seen
        virt.summary = describe(virt)


# Device names lspci prints (without -nn) for what only a hypervisor emulates: the host bridges of
# EMULATED_HOST_BRIDGES and the Red Hat (QEMU, virtio) vendor. tests/fixtures/pci/lspci/q35-guest.*.txt
_EMULATED_BRIDGE_NAMES = (("82G33/G31/P35/P31 Express DRAM Controller", "q35"), ("440FX - 82441FX PMC", "i440fx"))
_VIRTUAL_VENDOR_NAME = re.compile(r"^(?:Red Hat, Inc\.|Red Hat, Inc)\s")


def lspci_signals(source: Source) -> tuple[list[Evidence], str | None]:
    """What a pasted ``lspci -vvv`` shows of a hypervisor, where the material has no sysfs PCI tree: emulated host
    bridges and QEMU's virtual devices, by id (``-nn``) or by name. Nothing from a healthy host's lspci: a paste
    may hold only some devices, so no device proves bare metal. With them, the QEMU machine type the bridge
    tells."""
    # Imported here, not above: only material without a sysfs tree is read so, and the module every audited host
    # runs compiles only what it runs (docs/development.md).
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.lspci import parse_lspci_vvv

    result = source.run(LSPCI.argv)
    if not result.ok:
        return [], None
    try:
        devices = parse_lspci_vvv(result.stdout)
    except PciParseError:
        return [], None  # the PCI gatherer reports what does not read
    found: list[Evidence] = []
    machine_type = None
    virtual = 0
    for bdf, device in sorted(devices.items()):
        ids = (f"0x{device.vendor_id}", f"0x{device.device_id}") if device.vendor_id and device.device_id else None
        bridge = EMULATED_HOST_BRIDGES.get(ids) if ids else next(
            ((machine, None) for name, machine in _EMULATED_BRIDGE_NAMES if name in device.description), None)
        if bridge:
            machine_type = machine_type or bridge[0]
            found.append(Evidence(f"lspci {bdf}", f"{device.description}: {bridge[0] or bridge[1]} host bridge",
                                  "kvm"))
        if (ids and ids[0] in ("0x1af4", "0x1b36")) or (not ids and _VIRTUAL_VENDOR_NAME.match(device.description)):
            virtual += 1
    if virtual:
        found.append(Evidence("lspci", f"{virtual} x Red Hat / QEMU virtual device", "kvm"))
    return found, machine_type
