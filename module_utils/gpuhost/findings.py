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
