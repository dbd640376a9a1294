"""The rules engine: facts in, findings out.

Each rule is a small function over the facts dictionary (the same one the
JSON report holds), so rules run on live hosts, on captures and on saved
reports alike. A finding names what was seen (``evidence``: the values used)
and what to do (``remedy``: a command, a config line, a setting), never just
"check your configuration".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any

from ansible.module_utils.gpuhost.rules.proxmox_plans import VmPlan, all_plans

SEVERITIES = ("critical", "warning", "info")
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}

# GPUs whose P2P grant is known to be unreliable: the driver may report OK while
# the window is a private mirror (NVIDIA/nccl#2335). Matched on NVML brand or name.
CONSUMER_BRANDS = {"geforce", "geforce_rtx", "titan", "titan_rtx"}
CONSUMER_NAME_WORDS = ("geforce", "titan")

# BAR1 is the window peers and the CPU map GPU memory through. Without Resizable
# BAR / above-4G decoding it stays at 256 MiB.
DEFAULT_MIN_BAR1_MIB = 1024
# PCIe port type name for switch downstream ports, as pci_config reports it.
DOWNSTREAM_PORT = "downstream_port"


@dataclass
class Finding:
    id: str
    severity: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    remedy: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RuleOptions:
    tensor_parallel_gpus: list[int] | None = None  # None: every GPU
    min_bar1_mib: int = DEFAULT_MIN_BAR1_MIB


Rule = Callable[[dict[str, Any], RuleOptions], list[Finding]]


# ---------------------------------------------------------------------------
# Views over the facts that several rules share


def pci_gpus(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in (facts.get("pci") or {}).get("nvidia_devices", []) if d.get("kind") == "gpu"]


def gpu_devices(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return list((facts.get("gpus") or {}).get("devices") or [])


def is_vm(facts: dict[str, Any]) -> bool:
    return (facts.get("virtualization") or {}).get("type") == "vm"


def tp_group(facts: dict[str, Any], options: RuleOptions) -> list[int]:
    indices = [d.get("index") for d in gpu_devices(facts) if isinstance(d.get("index"), int)]
    if options.tensor_parallel_gpus is None:
        return indices
    return [i for i in options.tensor_parallel_gpus if i in indices]


def matrix_pairs(matrix: list[list[str]], group: list[int]) -> list[tuple[int, int, str]]:
    """(i, j, label) for every ordered pair of the group that the matrix covers."""
    pairs = []
    for i in group:
        for j in group:
            if i != j and i < len(matrix) and j < len(matrix[i]):
                pairs.append((i, j, matrix[i][j]))
    return pairs


def _pairs_text(pairs: list[tuple[int, int, str]], limit: int = 8) -> list[str]:
    shown = [f"GPU{i}->GPU{j}: {label}" for i, j, label in pairs[:limit]]
    if len(pairs) > limit:
        shown.append(f"... and {len(pairs) - limit} more pairs")
    return shown


# ---------------------------------------------------------------------------
# Remedies that more than one rule gives


def proxmox_clique_remedy(gpu_count: int) -> str:
    """The host-side fix for P2P in a Proxmox guest, written out for this many GPUs."""
    count = max(gpu_count, 2)
    sets = " ".join(f"-set device.hostpci{n}.x-nv-gpudirect-clique=0" for n in range(count))
    hostpci = "\n".join(f"  hostpci{n}: 0000:BB:00.0,pcie=1" for n in range(min(count, 2)))
    return (
        "On the Proxmox host, in /etc/pve/qemu-server/<vmid>.conf (or with `qm set`):\n"
        "  machine: q35\n"
        f"{hostpci}\n"
        "  (one line per GPU; name the .0 function explicitly, and remove `hidden=1`: it sets kvm=off\n"
        "   and the guest driver then ignores the clique)\n"
        f"  args: {sets}\n"
        "Then stop and start the VM from the host (a reboot inside the guest keeps the old QEMU)\n"
        "and audit again: `nvidia-smi topo -p2p r` should say OK. Reported effect: small-message\n"
        "latency from 12-15 us down to 1.0-1.4 us.\n"
        "Until then, run without P2P on purpose: NCCL_P2P_DISABLE=1, SGLang --disable-custom-all-reduce,\n"
        "and fewer GPUs per tensor-parallel group."
    )


P2P_CAUSES_BARE_METAL = {
    "CNS": "the chipset/root complex does not allow P2P between these GPUs (often: GPUs on different "
           "CPU sockets, or ACS redirect forcing traffic through the root complex)",
    "GNS": "the GPU model does not support P2P (most GeForce cards) or the driver disabled it",
    "TNS": "the PCIe topology between these GPUs does not support P2P (e.g. across CPU sockets)",
    "DR": "P2P is disabled by a driver registry key (NVreg_RegistryDwords)",
    "NS": "P2P is not supported on this path",
    "U": "the driver could not tell",
}


# ---------------------------------------------------------------------------
# The rules


def rule_no_gpu(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    if pci_gpus(facts) or gpu_devices(facts):
        return []
    gpus = facts.get("gpus") or {}
    return [Finding(
        "no_nvidia_gpu", "critical",
        "No NVIDIA GPU found: neither the PCI bus nor NVML/nvidia-smi shows one, so this host cannot serve a model.",
        {"pci_nvidia_gpus": 0, "nvml": gpus.get("nvml_error") or "not read",
         "nvidia_smi": gpus.get("nvidia_smi_error") or "not read",
         "virtualization": (facts.get("virtualization") or {}).get("summary")},
        "If this host should have GPUs: `lspci -nn -d 10de:` on it lists what the bus sees. In a VM, the GPUs "
        "must be passed through on the hypervisor (Proxmox: `qm set <vmid> --hostpci0 0000:BB:00.0,pcie=1`). "
        "If this host is a controller or has no GPUs by design, nothing is wrong.")]


def rule_vfio_bound(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    bound = [d["bdf"] for d in pci_gpus(facts) if d.get("driver") == "vfio-pci"]
    if not bound:
        return []
    return [Finding(
        "gpus_bound_to_vfio", "info",
        f"{len(bound)} NVIDIA GPU(s) are bound to vfio-pci: this host passes them to virtual machines and "
        "cannot use them itself.",
        {"bdfs": bound},
        "Nothing to do on a hypervisor. To serve from this host instead, unbind them from vfio-pci "
        "(remove their ids from vfio-pci.ids / modprobe.d) and install the NVIDIA driver.")]


def rule_driver_missing(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    unbound = [d for d in pci_gpus(facts) if d.get("driver") not in ("nvidia", "vfio-pci")]
    if not unbound or gpu_devices(facts):
        return []
    gpus = facts.get("gpus") or {}
    return [Finding(
        "nvidia_driver_not_loaded", "critical",
        f"{len(unbound)} NVIDIA GPU(s) on the PCI bus have no NVIDIA driver bound, and NVML sees none.",
        {"devices": {d["bdf"]: d.get("driver") or "none" for d in unbound},
         "nvml": gpus.get("nvml_error"), "nvidia_smi": gpus.get("nvidia_smi_error")},
        "Install the NVIDIA driver (the nvidia_driver role of this project: open kernel modules, branch 570 or "
        "newer for Blackwell) and reboot; `nvidia-smi` must then list every GPU.")]


def rule_nouveau(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    modules = (facts.get("iommu") or {}).get("modules") or {}
    drivers = {d["bdf"]: d.get("driver") for d in pci_gpus(facts) if d.get("driver") == "nouveau"}
    if not modules.get("nouveau") and not drivers:
        return []
    return [Finding(
        "nouveau_loaded", "critical",
        "The nouveau driver is loaded: it holds the GPUs and the NVIDIA driver cannot bind them.",
        {"module_loaded": bool(modules.get("nouveau")), "devices_bound_to_nouveau": sorted(drivers)},
        "Blacklist it: /etc/modprobe.d/blacklist-nouveau.conf with `blacklist nouveau` and "
        "`options nouveau modeset=0`, then `update-initramfs -u` and reboot (the nvidia_driver role does this).")]


def rule_gpu_count(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    gpus = facts.get("gpus") or {}
    counts = {"pci_with_nvidia_driver": sum(1 for d in pci_gpus(facts) if d.get("driver") == "nvidia")}
    if gpus.get("source"):
        counts[gpus["source"]] = len(gpu_devices(facts))
    if isinstance(gpus.get("nvidia_smi_count"), int):
        counts["nvidia_smi"] = gpus["nvidia_smi_count"]
    if not gpus.get("source") or len(set(counts.values())) <= 1:
        return []
    return [Finding(
        "gpu_count_mismatch", "critical",
        "The GPU count differs between the PCI bus, NVML and nvidia-smi: a GPU failed to initialise or fell off the "
        "bus.",
        counts,
        "Look for Xid errors: `dmesg | grep -i -e NVRM -e Xid`. A GPU that fell off the bus needs a cold reboot; "
        "one that keeps failing, reseating or RMA. In a VM, compare the guest's GPUs with the hostpci lines of "
        "the VM config.")]


def rule_p2p(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    read = (facts.get("p2p") or {}).get("read") or []
    group = tp_group(facts, options)
    if len(group) < 2 or not read:
        return []
    bad = [(i, j, label) for i, j, label in matrix_pairs(read, group) if label != "OK"]
    if not bad:
        return []
    virt = facts.get("virtualization") or {}
    labels = sorted({label for _i, _j, label in bad})
    evidence = {"group": [f"GPU{i}" for i in group], "pairs_without_p2p": len(bad),
                "pairs_checked": len(group) * (len(group) - 1), "statuses": labels,
                "examples": _pairs_text(bad), "source": (facts.get("gpus") or {}).get("source")}
    if is_vm(facts):
        evidence["virtualization"] = virt.get("summary")
        summary = (f"No GPU peer-to-peer in this {virt.get('summary') or 'VM'}: {len(bad)} of "
                   f"{evidence['pairs_checked']} GPU pairs report {'/'.join(labels)}. Every all-reduce bounces "
                   "through host memory, and small-message latency caps decode speed.")
        if virt.get("machine_type") == "i440fx":
            remedy = ("The VM uses the i440fx machine, which has no PCIe: switch it to q35 first "
                      "(`qm set <vmid> --machine q35`, hostpci lines with pcie=1), then:\n"
                      + proxmox_clique_remedy(len(group)))
        else:
            remedy = ("The guest sees QEMU's emulated root ports, which the NVIDIA driver does not trust for P2P; "
                      "the clique option tells it which GPUs may peer.\n" + proxmox_clique_remedy(len(group)))
    else:
        summary = (f"No GPU peer-to-peer between {len(bad)} of {evidence['pairs_checked']} GPU pairs "
                   f"({'/'.join(labels)}); all-reduce falls back to host memory.")
        causes = "; ".join(f"{label}: {P2P_CAUSES_BARE_METAL.get(label, 'unknown status')}" for label in labels)
        remedy = (f"Cause by status: {causes}. Keep each tensor-parallel group on GPUs that show OK in "
                  "`nvidia-smi topo -p2p r` (and ideally one NUMA node); otherwise run with NCCL_P2P_DISABLE=1 "
                  "and SGLang --disable-custom-all-reduce, and expect the host-memory latency floor.")
    return [Finding("p2p_not_supported", "critical", summary, evidence, remedy)]


def rule_i440fx(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    virt = facts.get("virtualization") or {}
    if not is_vm(facts) or virt.get("machine_type") != "i440fx":
        return []
    has_gpus = bool(pci_gpus(facts))
    return [Finding(
        "qemu_machine_i440fx", "critical" if has_gpus else "warning",
        "This guest runs on QEMU's i440fx machine: it has no PCIe, so passed-through GPUs get no PCIe "
        "capabilities, no link information and no P2P.",
        {"machine_type": "i440fx", "evidence": [e for e in virt.get("evidence", []) if "i440fx" in str(e)]},
        "On the Proxmox host: `qm set <vmid> --machine q35` and add `,pcie=1` to every hostpciN line "
        "(OVMF firmware recommended for large BARs); stop and start the VM.")]


def rule_numa(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    group = tp_group(facts, options)
    by_bus = {d.get("pci_bus_id"): d.get("index") for d in gpu_devices(facts)}
    nodes = {by_bus[d.get("bdf")]: d["numa_node"] for d in pci_gpus(facts)
             if by_bus.get(d.get("bdf")) in group and isinstance(d.get("numa_node"), int)}
    topology = (facts.get("topology") or {}).get("matrix") or []
    # Pairs joined by NVLink never touch the CPU interconnect; only PCIe pairs matter.
    crossing = [(i, j, label) for i, j, label in matrix_pairs(topology, sorted(nodes))
                if i < j and not label.startswith("NV") and nodes[i] != nodes[j]]
    if not crossing and (topology or len(set(nodes.values())) <= 1):
        return []
    return [Finding(
        "gpus_on_several_numa_nodes", "warning",
        f"The tensor-parallel GPUs sit on {len(set(nodes.values()))} NUMA nodes and talk over PCIe across them: "
        "that traffic crosses the CPU interconnect, which is slower and often blocks P2P.",
        {"numa_node_by_gpu": {f"GPU{i}": n for i, n in sorted(nodes.items())},
         "pcie_pairs_across_nodes": _pairs_text(crossing)},
        "Prefer tensor-parallel groups within one NUMA node (CUDA_VISIBLE_DEVICES), or check that "
        "`nvidia-smi topo -m` shows NV# or PIX/PXB between them. In a VM, give it vNUMA matching the host "
        "(Proxmox: numa: 1 and numaN lines) and pin vCPUs.")]


def rule_link(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    narrow, slow = [], []
    for device in pci_gpus(facts):
        link = device.get("link") or {}
        if _less(link.get("width_current"), link.get("width_max")):
            narrow.append(f"{device['bdf']}: x{link['width_current']} of x{link['width_max']}")
        if _less(link.get("speed_current_gts"), link.get("speed_max_gts")):
            slow.append(f"{device['bdf']}: {link['speed_current_gts']} of {link['speed_max_gts']} GT/s")
    findings = []
    if narrow:
        findings.append(Finding(
            "pcie_link_narrow", "warning",
            f"{len(narrow)} GPU link(s) trained narrower than they can: bandwidth to those GPUs is cut.",
            {"links": narrow},
            "Reseat the card or riser, check the slot's wiring (an x16 slot wired x8) and BIOS bifurcation "
            "settings. In a VM, the guest may show the emulated port's width: compare with "
            "`lspci -vv -s <bdf>` on the host."))
    if slow:
        findings.append(Finding(
            "pcie_link_slow", "info",
            f"{len(slow)} GPU link(s) run below their top speed right now. Idle GPUs drop to a low PCIe gen to "
            "save power, so this is only a problem if it stays under load.",
            {"links": slow},
            "Check under load: `nvidia-smi -q -d PCIE` while a job runs should show the max gen. If not, look at "
            "BIOS PCIe speed settings, risers and retimers."))
    return findings


def _less(current: Any, maximum: Any) -> bool:
    return isinstance(current, (int, float)) and isinstance(maximum, (int, float)) and 0 < current < maximum


def rule_bar1(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    small = {f"GPU{d.get('index')}": d.get("bar1_total_mib") for d in gpu_devices(facts)
             if isinstance(d.get("bar1_total_mib"), int) and d["bar1_total_mib"] < options.min_bar1_mib}
    if not small:
        return []
    if is_vm(facts):
        remedy = ("Enable Resizable BAR / above-4G decoding in the host BIOS, then give the guest a 64-bit MMIO "
                  "window big enough for every GPU's BAR (OVMF: `args: -fw_cfg name=opt/ovmf/X-PciMmio64Mb,"
                  "string=262144` for 256 GB; add it to the existing args line), and use q35 with pcie=1.")
    else:
        remedy = ("Enable 'Above 4G decoding' and 'Resizable BAR' in the BIOS; some datacenter GPUs also need "
                  "their BAR1 mode switched with NVIDIA's display mode selector tool.")
    return [Finding(
        "small_bar1", "warning",
        f"{len(small)} GPU(s) expose a BAR1 below {options.min_bar1_mib} MiB: peers and the CPU see GPU memory "
        "through a small window, which limits P2P and GPUDirect.",
        {"bar1_mib_by_gpu": small, "threshold_mib": options.min_bar1_mib},
        remedy)]


def rule_iommu_group_shared(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    shared = {}
    for device in pci_gpus(facts):
        others = [bdf for bdf in device.get("iommu_group_peers") or [] if not _same_slot(bdf, device["bdf"])]
        if others:
            shared[device["bdf"]] = {"group": device.get("iommu_group"), "also_in_group": others}
    if not shared:
        return []
    return [Finding(
        "iommu_group_shared", "warning",
        f"{len(shared)} GPU(s) share their IOMMU group with unrelated devices: they can only be passed through "
        "together with them, and isolation between them is not enforced.",
        {"groups": shared},
        "Put the GPU in a slot behind a port with ACS, or enable ACS in the BIOS. The pcie_acs_override kernel "
        "patch splits groups without real isolation: use it only if you accept that risk.")]


def _same_slot(a: str, b: str) -> bool:
    return a.rsplit(".", 1)[0] == b.rsplit(".", 1)[0]


def rule_acs_redirect(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    if is_vm(facts):
        return []  # a guest's bridges are QEMU's; the host audit judges the real ones
    gpus = [d for d in pci_gpus(facts) if d.get("upstream") is not None]
    redirecting: dict[str, dict[str, Any]] = {}
    for a, b in combinations(gpus, 2):
        chain_a = [u["bdf"] for u in a["upstream"]]
        chain_b = [u["bdf"] for u in b["upstream"]]
        shared = set(chain_a) & set(chain_b)
        for bridge in a["upstream"] + b["upstream"]:
            # Switch ports below the common ancestor are on the P2P path; ACS redirect
            # there sends traffic up to the root complex instead of across the switch.
            # Root ports are left alone: traffic between root ports crosses the root
            # complex anyway, and the kernel sets their ACS whenever the IOMMU is on.
            if bridge["bdf"] in shared or bridge.get("port_type") != DOWNSTREAM_PORT:
                continue
            acs = bridge.get("acs_ctrl") or {}
            if acs.get("RR") or acs.get("CR"):
                on = [bit for bit in ("RR", "CR", "UF", "EC", "DT", "SV", "TB") if acs.get(bit)]
                redirecting[bridge["bdf"]] = {"acs_ctrl_enabled": on, "port_type": bridge.get("port_type")}
    if not redirecting:
        return []
    return [Finding(
        "acs_redirect_between_gpus", "warning",
        f"ACS request/completion redirect is on at {len(redirecting)} bridge(s) between GPUs: P2P traffic is "
        "sent up to the root complex, which cuts bandwidth or makes NCCL hang.",
        {"bridges": redirecting},
        "On a serving host (no GPU passthrough), disable ACS in the BIOS ('ACS Control' / 'PCIe ACS') or at boot "
        "for each bridge: `setpci -s <bdf> ECAP_ACS+0x6.w=0000`. Keep ACS on hypervisors that pass GPUs to VMs: "
        "it is what isolates them.")]


def rule_acs_unreadable(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    unread = sorted({u["bdf"] for d in pci_gpus(facts) for u in d.get("upstream") or []
                     if u.get("acs_ctrl") is None and u.get("acs_source") == "unreadable"})
    if not unread or is_vm(facts):
        return []
    return [Finding(
        "acs_unreadable", "info",
        f"The ACS settings of {len(unread)} bridge(s) above the GPUs could not be read: that needs root.",
        {"bridges": unread},
        "Run the audit with privileges (`become: true`, or as root) to check ACS redirect between GPUs.")]


def rule_consumer_p2p(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    consumer = [d.get("index") for d in gpu_devices(facts) if _is_consumer(d)]
    read = (facts.get("p2p") or {}).get("read") or []
    granted = [(i, j, label) for i, j, label in matrix_pairs(read, consumer) if label == "OK"]
    if not granted:
        return []
    return [Finding(
        "consumer_p2p_unproven", "warning",
        "The driver grants P2P between consumer GPUs. On some of them the granted window is a private mirror: "
        "writes succeed and the peer reads zeros, NCCL hangs or returns wrong data (NVIDIA/nccl#2335).",
        {"pairs": _pairs_text(granted), "gpus": [f"GPU{i}" for i in consumer]},
        "Prove it before serving: run the P2P probe (a write checked at the destination) and a value-checked "
        "all-reduce with a timeout, with NCCL_P2P_DISABLE=1 as the control. If the proof fails, set "
        "NCCL_P2P_DISABLE=1 and SGLang --disable-custom-all-reduce.")]


def _is_consumer(device: dict[str, Any]) -> bool:
    if device.get("brand") in CONSUMER_BRANDS:
        return True
    name = (device.get("name") or "").lower()
    return any(word in name for word in CONSUMER_NAME_WORDS)


def rule_persistence(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    off = [f"GPU{d.get('index')}" for d in gpu_devices(facts) if d.get("persistence_mode") is False]
    if not off:
        return []
    return [Finding(
        "persistence_mode_off", "info",
        f"Persistence mode is off on {len(off)} GPU(s): the driver tears down and re-initialises them between "
        "clients, which slows every start and can reset clocks.",
        {"gpus": off},
        "Enable the daemon: `systemctl enable --now nvidia-persistenced` (the nvidia_driver role does this).")]


def rule_nvml_unavailable(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    gpus = facts.get("gpus") or {}
    if gpus.get("source") != "nvidia-smi":
        return []
    return [Finding(
        "nvml_unavailable", "info",
        "NVML could not be read from Python, so GPU facts came from nvidia-smi: BAR1, brand and "
        "virtualization mode are missing.",
        {"nvml": gpus.get("nvml_error")},
        "Install nvidia-ml-py for the interpreter that runs the audit (for example the serving venv, set as "
        "ansible_python_interpreter) to get every field.")]


def rule_audit_incomplete(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    problems = facts.get("problems") or []
    if not problems:
        return []
    return [Finding(
        "audit_incomplete", "info",
        f"{len(problems)} thing(s) could not be read; the facts that depend on them are missing, not wrong.",
        {"unreadable": problems[:20]},
        "Run the audit as root (`become: true`) for privileged files such as PCI extended config space and "
        "dmesg; a timed-out nvidia-smi points to a wedged GPU (check `dmesg | grep Xid`).")]


# ---------------------------------------------------------------------------
# Proxmox VE host: the VMs that pass GPUs through (facts from proxmox.py, plans from proxmox_remedy.py)


def _vm_evidence(plan: VmPlan, keys: list[str], **extra: Any) -> dict[str, Any]:
    lines = plan.vm.get("config_lines") or {}
    config = [lines[k] for k in keys if lines.get(k)]
    return {"vmid": plan.vmid, "name": plan.vm.get("name"), "config_file": plan.vm.get("config_file"),
            "config": config, **extra}


def _vm_name(plan: VmPlan) -> str:
    return f"VM {plan.vmid}" + (f" ({plan.vm['name']})" if plan.vm.get("name") else "")


def _run(plan: VmPlan, *topics: str) -> str:
    commands = [plan.commands[t] for t in topics if t in plan.commands]
    if not commands:
        return ""
    return "\n".join(["On the Proxmox host:", *(f"  {c}" for c in commands),
                      f"  {plan.commands['restart']}",
                      "(`qm set` on a running VM lands in [PENDING]; stop and start it from the host to apply)"])


def rule_proxmox_vm_no_clique(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        gpu_ids = [e["id"] for e in plan.gpus]
        keys = [*gpu_ids, "args"]
        if plan.missing_clique:
            unnamed = [i for i in plan.missing_clique if i in plan.not_named]
            findings.append(Finding(
                "proxmox_vm_no_clique", "critical",
                f"{_vm_name(plan)} passes {len(plan.gpus)} NVIDIA GPUs but args gives no x-nv-gpudirect-clique to "
                f"{', '.join(plan.missing_clique)}: the guest driver is not told which GPUs may peer and reports "
                "P2P as not supported (NS), so every all-reduce goes through host memory.",
                _vm_evidence(plan, keys, gpus=gpu_ids, without_clique=plan.missing_clique,
                             cliques={str(k): v for k, v in sorted(plan.cliques.items())},
                             args=plan.vm.get("args")),
                (f"First name the GPU function of {', '.join(unnamed)} (see proxmox_vm_function_not_explicit): "
                 "QEMU names the functions of a multifunction device hostpciN.0, hostpciN.1, and -set cannot "
                 "reach them.\n" if unnamed else "")
                + "Give every GPU of the VM the same clique (this keeps the rest of the args line):\n"
                + _run(plan, *(["hostpci"] if unnamed else []), "args")
                + "\nThen in the guest `nvidia-smi topo -p2p r` should say OK (reported effect: all-reduce latency "
                "from 12-15 us down to 1.0-1.4 us). The clique is ignored while KVM is hidden: see proxmox_vm_hidden."))
        elif len(plan.cliques) > 1:
            findings.append(Finding(
                "proxmox_vm_no_clique", "warning",
                f"{_vm_name(plan)} splits its NVIDIA GPUs across cliques {sorted(plan.cliques)}: only GPUs of one "
                "clique may peer, so a tensor-parallel group spanning them has no P2P.",
                _vm_evidence(plan, keys, cliques={str(k): v for k, v in sorted(plan.cliques.items())}),
                "If the split is not deliberate (one tensor-parallel group per clique), put every GPU in one "
                f"clique: `qm set {plan.vmid} --args '...'` with `-set device.hostpciN.x-nv-gpudirect-clique=0` "
                "for each GPU, then stop and start the VM."))
    return findings


def rule_proxmox_vm_hidden(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.hidden:
            continue
        sources = [s["source"] for s in plan.hidden]
        invalid = [s for s in sources if s.endswith(" hidden=1")]
        pending = [s["source"] for s in plan.hidden if s.get("pending_only")]
        shown = "; ".join(s.get("line") or s["source"] for s in plan.hidden)
        topics = [t for t, hit in (("hostpci", any(s.startswith("hostpci") for s in sources)),
                                   ("cpu", "cpu" in sources), ("args", any(s.startswith("args") for s in sources)))
                  if hit]
        summary = (f"{_vm_name(plan)} hides KVM from the guest ({shown}): QEMU runs it with "
                   "kvm=off, and the NVIDIA driver then ignores the GPU clique, so P2P stays off.")
        if invalid:
            summary += (" `hidden` is not a hostpci option: qemu-server refuses the line and the VM does not "
                        "start until it is removed.")
        if pending:
            summary += " The change is pending: it takes effect at the next start, exactly when a clique fix would."
        keys = ["cpu", "args", *[s["source"].split()[0] for s in plan.hidden if s["source"].startswith("hostpci")]]
        findings.append(Finding(
            "proxmox_vm_hidden", "critical" if plan.several_gpus or invalid else "warning", summary,
            _vm_evidence(plan, keys, hidden_by=sources, pending=pending),
            "Current NVIDIA drivers (465 and newer) run in a visible VM; drop what hides KVM "
            "(cpu hidden=1, x-vga=1 on a compute GPU, kvm=off in args, hidden=1 on a hostpci line):\n"
            + _run(plan, *topics)))
    return findings


def rule_proxmox_vm_not_q35(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.not_q35:
            continue
        with_pcie = [e["id"] for e in plan.vm.get("hostpci") or [] if e.get("pcie")]
        machine = f"machine: {plan.vm['machine']}" if plan.vm.get("machine") else "no machine line: the default"
        findings.append(Finding(
            "proxmox_vm_not_q35", "critical",
            f"{_vm_name(plan)} uses the i440fx machine ({machine}): "
            "it has no PCIe, so its GPUs get no PCI Express capability, no link information and no P2P."
            + (f" pcie=1 on {', '.join(with_pcie)} needs q35: qemu-server refuses to start the VM." if with_pcie
               else ""),
            _vm_evidence(plan, ["machine", "bios", *[e["id"] for e in plan.gpus]], machine_type="i440fx"),
            "Switch to q35 and put the GPUs on PCIe root ports. A Linux guest renames its network interfaces "
            "(check /etc/netplan or /etc/network/interfaces from the console); OVMF (`bios: ovmf` with an "
            "efidisk) suits large BARs best.\n" + _run(plan, "machine", "hostpci")))
    return findings


def rule_proxmox_vm_no_pcie(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.no_pcie:
            continue
        findings.append(Finding(
            "proxmox_vm_no_pcie", "critical" if plan.several_gpus else "warning",
            f"{_vm_name(plan)} is q35 but passes {', '.join(plan.no_pcie)} without pcie=1: those GPUs sit on a "
            "conventional PCI bridge, with no PCI Express capability or link, and the driver gives them no P2P.",
            _vm_evidence(plan, plan.no_pcie, without_pcie=plan.no_pcie),
            _run(plan, "hostpci")))
    return findings


def rule_proxmox_vm_function_not_explicit(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.not_named:
            continue
        entries = [e for e in plan.gpus if e["id"] in plan.not_named]
        mapped = [e["id"] for e in entries if e.get("mapping")]
        detail = {e["id"]: {"passes": e.get("bdfs"), "qemu_ids": e.get("qemu_ids")} for e in entries}
        broken = [e["id"] for e in entries if (plan.vm.get("args") or "").find(f"device.{e['id']}.") >= 0]
        findings.append(Finding(
            "proxmox_vm_function_not_explicit", "warning",
            f"{_vm_name(plan)} passes {', '.join(plan.not_named)} as whole multifunction devices (no `.0`): QEMU "
            "names their functions hostpciN.0, hostpciN.1, so `-set device.hostpciN.x-nv-gpudirect-clique` "
            "cannot reach the GPU."
            + (f" args already sets device.{broken[0]}...: QEMU finds no device of that id and refuses to start."
               if broken else ""),
            _vm_evidence(plan, [e["id"] for e in entries], devices=detail),
            "Pass the GPU function alone (a compute GPU does not need its audio function in the guest; pass it "
            "as its own hostpci line if you do):\n" + _run(plan, "hostpci")
            + (f"\nFor {', '.join(mapped)}, edit the resource mapping (Datacenter > Resource Mappings) so that "
               "its path names the .0 function." if mapped else "")))
    return findings


def rule_proxmox_vm_balloon(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.balloon:
            continue
        vm = plan.vm
        if plan.balloon == "ballooning":
            severity = "warning"
            summary = (f"{_vm_name(plan)} passes PCI devices through with ballooning on (balloon "
                       f"{vm.get('balloon')} MiB of {vm.get('memory_mib')} MiB): passthrough pins all guest memory, "
                       "so inflating the balloon frees nothing on the host and takes memory from the model server.")
        else:
            severity = "info"
            summary = (f"{_vm_name(plan)} passes PCI devices through and keeps the balloon device "
                       "(`balloon` unset): harmless while the minimum equals memory, but passthrough pins all guest "
                       "memory, so the balloon can never help; turn it off.")
        findings.append(Finding(
            "proxmox_vm_balloon", severity, summary,
            _vm_evidence(plan, ["balloon", "memory"], balloon=vm.get("balloon"), memory_mib=vm.get("memory_mib")),
            _run(plan, "balloon")))
    return findings


def rule_proxmox_vm_mmio_window_small(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.mmio_small:
            continue
        vm = plan.vm
        findings.append(Finding(
            "proxmox_vm_mmio_window_small", "warning",
            f"{_vm_name(plan)} gives OVMF a 64-bit MMIO window of {plan.mmio_window_mb} MiB, but its passed devices' "
            f"BARs need {vm.get('mmio64_needed_mb')} MiB: the firmware cannot map every BAR, and GPUs come up "
            "with a small or no BAR1 (or not at all).",
            _vm_evidence(plan, ["args", "cpu", "bios"], window_mb=plan.mmio_window_mb,
                         window_basis=vm.get("mmio64_basis"), needed_mb=vm.get("mmio64_needed_mb")),
            f"Set the window to {plan.mmio_recommended_mb} MiB (the next power of two) in args:\n"
            + _run(plan, "args")))
    return findings


def rule_proxmox_gpu_not_vfio(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.not_vfio:
            continue
        ids = sorted({f"{d['vendor_id']}:{d['device_id']}" for e in plan.gpus for d in e.get("host_devices") or []
                      if d["bdf"] in plan.not_vfio and d.get("device_id")})
        drivers = sorted(set(plan.not_vfio.values()))
        findings.append(Finding(
            "proxmox_gpu_not_vfio", "warning",
            f"{_vm_name(plan)} passes GPU functions that the host has bound to {', '.join(drivers)}, not vfio-pci: "
            "the VM is not running, and at its start qemu-server must unbind them from a host driver that may "
            "hold them (or hang the host).",
            _vm_evidence(plan, [e["id"] for e in plan.gpus], drivers=plan.not_vfio),
            "Bind them to vfio-pci at boot on the host:\n"
            "  printf 'vfio\\nvfio_iommu_type1\\nvfio_pci\\n' >> /etc/modules\n"
            f"  echo 'options vfio-pci ids={','.join(ids)}' > /etc/modprobe.d/vfio.conf\n"
            + "".join(f"  echo 'softdep {d} pre: vfio-pci' >> /etc/modprobe.d/vfio.conf\n" for d in drivers)
            + "  update-initramfs -u -k all && reboot\n"
            "`lspci -nnk -s <bdf>` must then say `Kernel driver in use: vfio-pci`."))
    return findings


def rule_proxmox_gpu_group_shared(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.group_shared:
            continue
        findings.append(Finding(
            "proxmox_gpu_group_shared", "warning",
            f"{_vm_name(plan)} passes devices whose IOMMU group holds other devices too: the VM takes the whole "
            "group (qemu-server binds it all to vfio-pci), or does not start, and the guest is not isolated "
            "from them.",
            _vm_evidence(plan, sorted({v["hostpci"] for v in plan.group_shared.values()}), groups=plan.group_shared),
            "Move the GPU to a slot whose root port has ACS (its own group), or enable ACS / 'PCIe ARI' in the "
            "BIOS, then check `find /sys/kernel/iommu_groups/ -type l`. pcie_acs_override=downstream only "
            "pretends to split groups: use it only if you accept that the devices are not isolated."))
    return findings


def rule_proxmox_iommu_off(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    proxmox = facts.get("proxmox") or {}
    host = proxmox.get("host") or {}
    vms = [vm["vmid"] for vm in proxmox.get("vms") or []]
    if not vms or host.get("iommu_enabled", True):
        return []
    vendor = host.get("cpu_vendor")
    parameters = "intel_iommu=on iommu=pt" if vendor == "intel" else "iommu=pt"
    firmware = ("VT-d" if vendor == "intel" else "IOMMU / AMD-Vi (and SVM)") if vendor in ("intel", "amd") \
        else "VT-d (Intel) or IOMMU / AMD-Vi (AMD)"
    grub = (f"  GRUB: add `{parameters}` to GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, then `update-grub`")
    sdboot = f"  systemd-boot: add `{parameters}` to /etc/kernel/cmdline, then `proxmox-boot-tool refresh`"
    loader = host.get("bootloader")
    boot = [grub] if loader == "grub" else [sdboot] if loader == "systemd-boot" else [grub, sdboot]
    return [Finding(
        "proxmox_iommu_off", "critical",
        f"The IOMMU is off on this Proxmox host, yet {len(vms)} VM(s) pass PCI devices through: qemu-server "
        "refuses to start them ('IOMMU not present').",
        {"vmids": vms, "cpu_vendor": vendor, "iommu_cmdline": host.get("iommu_cmdline"),
         "bootloader": loader, "vfio_modules": host.get("vfio_modules")},
        f"Enable {firmware} in the firmware setup. "
        + ("On AMD the kernel turns the IOMMU on by itself once the firmware does; `iommu=pt` keeps host DMA "
           "fast. " if vendor == "amd" else
           "On Intel, kernels before 6.8 need intel_iommu=on; set it anyway. " if vendor == "intel" else "")
        + "Kernel parameters, for the boot loader this host uses:\n" + "\n".join(boot)
        + "\nReboot; `dmesg | grep -e DMAR -e AMD-Vi` and a non-empty /sys/kernel/iommu_groups prove it.")]


def rule_proxmox_cpu_not_host(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.cpu_not_host:
            continue
        vm = plan.vm
        findings.append(Finding(
            "proxmox_cpu_not_host", "warning",
            f"{_vm_name(plan)} runs its GPUs with CPU type {vm.get('cpu_type')}, not host: the guest misses CPU "
            "features the serving stack uses (AVX-512, AMX, ...), and its physical address bits (QEMU's default "
            "of 40) shrink OVMF's 64-bit MMIO window for large BARs.",
            _vm_evidence(plan, ["cpu"], cpu_type=vm.get("cpu_type")),
            "A VM with passed-through devices cannot live-migrate anyway, so nothing is lost:\n" + _run(plan, "cpu")))
    return findings


def rule_proxmox_no_numa(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    host_nodes = ((facts.get("proxmox") or {}).get("host") or {}).get("numa_nodes") or []
    for plan in all_plans(facts):
        if not plan.no_numa:
            continue
        gpu_nodes = {e["id"]: (e.get("host_device") or {}).get("numa_node") for e in plan.gpus}
        findings.append(Finding(
            "proxmox_no_numa", "info",
            f"{_vm_name(plan)} has no vNUMA (`numa` off) on a host with {len(host_nodes)} NUMA nodes: the guest "
            "cannot keep a tensor-parallel group, its CPU threads and its memory on the node its GPUs sit on.",
            _vm_evidence(plan, ["numa", "sockets", "cores", "memory", "hugepages"], host_numa_nodes=host_nodes,
                         gpu_host_numa_node=gpu_nodes),
            "Mirror the host's nodes in the VM (and bind its memory to them), e.g.:\n" + _run(plan, "numa")
            + "\nThen pin each serving process to the node of its GPUs in the guest."))
    return findings


RULES: tuple[Rule, ...] = (
    rule_no_gpu,
    rule_vfio_bound,
    rule_driver_missing,
    rule_nouveau,
    rule_gpu_count,
    rule_p2p,
    rule_i440fx,
    rule_numa,
    rule_link,
    rule_bar1,
    rule_iommu_group_shared,
    rule_acs_redirect,
    rule_acs_unreadable,
    rule_consumer_p2p,
    rule_persistence,
    rule_nvml_unavailable,
    rule_audit_incomplete,
    rule_proxmox_iommu_off,
    rule_proxmox_vm_not_q35,
    rule_proxmox_vm_no_pcie,
    rule_proxmox_vm_function_not_explicit,
    rule_proxmox_vm_hidden,
    rule_proxmox_vm_no_clique,
    rule_proxmox_vm_mmio_window_small,
    rule_proxmox_gpu_not_vfio,
    rule_proxmox_gpu_group_shared,
    rule_proxmox_vm_balloon,
    rule_proxmox_cpu_not_host,
    rule_proxmox_no_numa,
)


def evaluate(facts: dict[str, Any], options: RuleOptions | None = None) -> list[dict[str, Any]]:
    """Every rule over the facts, worst first. A rule that trips on odd facts becomes a finding itself."""
    options = options or RuleOptions()
    findings: list[Finding] = []
    for rule in RULES:
        try:
            findings.extend(rule(facts, options))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            findings.append(Finding(
                "rule_error", "warning",
                f"The rule {rule.__name__} could not judge these facts ({type(exc).__name__}: {exc}).",
                {"rule": rule.__name__},
                "Report this with the capture of the host (playbooks/capture.yml) attached."))
    findings.sort(key=lambda f: SEVERITY_RANK.get(f.severity, len(SEVERITIES)))
    return [f.as_dict() for f in findings]


def worst(findings: list[dict[str, Any]]) -> dict[str, Any] | None:
    return min(findings, key=lambda f: SEVERITY_RANK.get(f.get("severity"), len(SEVERITIES)), default=None)
