"""The audit's rules about the host itself: GPUs and driver, P2P, PCIe, IOMMU, a guest's VM.

Each rule is a small function over the facts dictionary (views.py), returning findings
made from the catalog (findings/catalog.py): the rule words what it saw (``summary``, ``evidence``:
the values used), the catalog says what to do. The rules about a Proxmox host's VM
configs are in proxmox.py; engine.py runs them all.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make, text
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.remedies import (
    P2P_CAUSES_BARE_METAL,
    proxmox_clique_fix,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.gpu_pairs import pair_count_text
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import same_slot
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.gpu_usable import driver_without_pci
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.p2p_evidence import (
    NCCL_LOG,
    p2p_evidence,
    rule_p2p_capability_not_stated,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import (
    NOT_SEEN,
    RuleOptions,
    gpu_devices,
    is_vm,
    matrix_pairs,
    not_seen,
    pairs_text,
    pci_gpus,
    tp_group,
    unread_pairs,
)

# GPUs whose P2P grant is known to be unreliable: the driver may report OK while
# the window is a private mirror (NVIDIA/nccl#2335). Matched on NVML brand or name.
CONSUMER_BRANDS = {"geforce", "geforce_rtx", "titan", "titan_rtx"}
CONSUMER_NAME_WORDS = ("geforce", "titan")

# PCIe port type name for switch downstream ports, as the PCI parsers report it.
DOWNSTREAM_PORT = "downstream_port"


def rule_no_gpu(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    if pci_gpus(facts) or gpu_devices(facts) or driver_without_pci(facts):
        return []  # the last: GPUs the driver holds and nothing reads, gpu_usable.rule_gpus_unusable's
    if {"pci", "gpus"} & not_seen(facts):
        return []  # material that shows no PCI bus or no GPU list cannot tell there is no GPU (rule_not_judged)
    gpus = facts.get("gpus") or {}
    return [make(
        "no_nvidia_gpu",
        "No NVIDIA GPU found: neither the PCI bus nor NVML/nvidia-smi shows one, so this host cannot serve a model.",
        {"pci_nvidia_gpus": 0, "nvml": gpus.get("nvml_error") or "not read",
         "nvidia_smi": gpus.get("nvidia_smi_error") or "not read",
         "virtualization": (facts.get("virtualization") or {}).get("summary")})]


def rule_vfio_bound(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    bound = [d["bdf"] for d in pci_gpus(facts) if d.get("driver") == "vfio-pci"]
    if not bound:
        return []
    return [make(
        "gpus_bound_to_vfio",
        f"{len(bound)} NVIDIA GPU(s) are bound to vfio-pci: this host passes them to virtual machines and "
        "cannot use them itself.",
        {"bdfs": bound})]


def rule_driver_missing(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    unbound = [d for d in pci_gpus(facts) if d.get("driver") not in ("nvidia", "vfio-pci")]
    if not unbound or gpu_devices(facts) or nvidia_module_loaded(facts):
        return []  # a loaded module that binds nothing is gpu_usable.rule_driver_not_binding
    gpus = facts.get("gpus") or {}
    return [make(
        "nvidia_driver_not_loaded",
        f"{len(unbound)} NVIDIA GPU(s) on the PCI bus have no NVIDIA driver bound, and NVML sees none.",
        {"devices": {d["bdf"]: d.get("driver") or "none" for d in unbound},
         "nvml": gpus.get("nvml_error"), "nvidia_smi": gpus.get("nvidia_smi_error")})]


def nvidia_module_loaded(facts: dict[str, Any]) -> bool:
    return bool(((facts.get("iommu") or {}).get("modules") or {}).get("nvidia"))


def rule_nouveau(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    modules = (facts.get("iommu") or {}).get("modules") or {}
    drivers = {d["bdf"]: d.get("driver") for d in pci_gpus(facts) if d.get("driver") == "nouveau"}
    if not modules.get("nouveau") and not drivers:
        return []
    return [make(
        "nouveau_loaded",
        "The nouveau driver is loaded: it holds the GPUs and the NVIDIA driver cannot bind them.",
        {"module_loaded": bool(modules.get("nouveau")), "devices_bound_to_nouveau": sorted(drivers)})]


def rule_gpu_count(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    gpus = facts.get("gpus") or {}
    counts: dict[str, int] = {}
    if "pci" not in not_seen(facts):  # a PCI bus the material did not show counts nothing
        counts["pci_with_nvidia_driver"] = sum(1 for d in pci_gpus(facts) if d.get("driver") == "nvidia")
    if gpus.get("source"):
        counts[gpus["source"]] = len(gpu_devices(facts))
    if isinstance(gpus.get("nvidia_smi_count"), int):
        counts["nvidia_smi"] = gpus["nvidia_smi_count"]
    if not gpus.get("source") or len(set(counts.values())) <= 1:
        return []
    evidence: dict[str, Any] = dict(counts)
    seen = {d.get("pci_bus_id") for d in gpu_devices(facts)}
    missing = [d["bdf"] for d in pci_gpus(facts) if d.get("driver") == "nvidia" and d["bdf"] not in seen]
    if missing:
        evidence["pci_gpus_not_listed"] = missing
    if isinstance(gpus.get("nvml_device_count"), int) and gpus["nvml_device_count"] != len(gpu_devices(facts)):
        evidence["nvml_device_count"] = gpus["nvml_device_count"]
    return [make(
        "gpu_count_mismatch",
        "The GPU count differs between the PCI bus, NVML and nvidia-smi: a GPU failed to initialise or fell off the "
        "bus.",
        evidence)]


def rule_p2p(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    decided = p2p_evidence(facts)
    group = tp_group(facts, options)
    if len(group) < 2 or decided is None:
        return []
    read = decided.matrix
    bad = [(i, j, label) for i, j, label in matrix_pairs(read, group) if decided.state(label) == "none"]
    if not bad:
        return []
    virt = facts.get("virtualization") or {}
    labels = sorted({label for _i, _j, label in bad})
    evidence = {"group": [f"GPU{i}" for i in group], "pairs_without_p2p": len(bad),
                "pairs_checked": len(group) * (len(group) - 1), "statuses": labels,
                "examples": pairs_text(bad), "source": (facts.get("gpus") or {}).get("source")}
    if decided.capability != "read":
        evidence["capability"] = decided.capability
    # What the pairs showed, in the text: nvidia-smi's statuses, or the NCCL log's refusals.
    shown = "/".join(labels)
    if decided.capability == NCCL_LOG:
        shown = "an NCCL refusal (NCCL INFO log: Could not enable P2P / P2P is disabled)"
        evidence["source"] = "NCCL INFO log"
    unread = unread_pairs(read, group)
    if unread:
        evidence["pairs_not_read"] = len(unread)
    # The evidence's pairs_* count directions (each matrix cell); the text counts GPU pairs first.
    counted = pair_count_text([(i, j) for i, j, _label in bad], len(group))
    if is_vm(facts):
        evidence["virtualization"] = virt.get("summary")
        summary = (f"No GPU peer-to-peer in this {virt.get('summary') or 'VM'}: {counted} report "
                   f"{shown}. Every all-reduce bounces "
                   "through host memory, and small-message latency caps decode speed.")
        which = "vm_i440fx" if virt.get("machine_type") == "i440fx" else "vm"
        remedy = text("p2p_not_supported", which, clique_fix=proxmox_clique_fix(len(group)))
    else:
        summary = (f"No GPU peer-to-peer between {counted}, status {shown}: all-reduce falls back to host "
                   "memory.")
        causes = "; ".join(f"{label}: {P2P_CAUSES_BARE_METAL.get(label, 'unknown status')}" for label in labels)
        remedy = text("p2p_not_supported", causes=causes)
    return [make("p2p_not_supported", summary, evidence, remedy=remedy)]


def rule_i440fx(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    virt = facts.get("virtualization") or {}
    if not is_vm(facts) or virt.get("machine_type") != "i440fx":
        return []
    has_gpus = bool(pci_gpus(facts))
    return [make(
        "qemu_machine_i440fx",
        "This guest runs on QEMU's i440fx machine: it has no PCIe, so passed-through GPUs get no PCIe "
        "capabilities, no link information and no P2P.",
        {"machine_type": "i440fx", "evidence": [e for e in virt.get("evidence", []) if "i440fx" in str(e)]},
        severity="critical" if has_gpus else "warning")]


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
    return [make(
        "gpus_on_several_numa_nodes",
        f"The tensor-parallel GPUs sit on {len(set(nodes.values()))} NUMA nodes and talk over PCIe across them: "
        "that traffic crosses the CPU interconnect, which is slower and often blocks P2P.",
        {"numa_node_by_gpu": {f"GPU{i}": n for i, n in sorted(nodes.items())},
         "pcie_pairs_across_nodes": pairs_text(crossing)})]


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
        findings.append(make(
            "pcie_link_narrow",
            f"{len(narrow)} GPU link(s) trained narrower than they can: bandwidth to those GPUs is cut.",
            {"links": narrow}))
    if slow:
        findings.append(make(
            "pcie_link_slow",
            f"{len(slow)} GPU link(s) run below their top speed right now. Idle GPUs drop to a low PCIe gen to "
            "save power, so this is only a problem if it stays under load.",
            {"links": slow}))
    return findings


def _less(current: Any, maximum: Any) -> bool:
    return isinstance(current, (int, float)) and isinstance(maximum, (int, float)) and 0 < current < maximum


def rule_bar1(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    small = {f"GPU{d.get('index')}": d.get("bar1_total_mib") for d in gpu_devices(facts)
             if isinstance(d.get("bar1_total_mib"), int) and d["bar1_total_mib"] < options.min_bar1_mib}
    if not small:
        return []
    return [make(
        "small_bar1",
        f"{len(small)} GPU(s) expose a BAR1 below {options.min_bar1_mib} MiB: peers and the CPU see GPU memory "
        "through a small window, which limits P2P and GPUDirect.",
        {"bar1_mib_by_gpu": small, "threshold_mib": options.min_bar1_mib},
        remedy=text("small_bar1", "vm") if is_vm(facts) else None)]


def rule_iommu_group_shared(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    shared = {}
    for device in pci_gpus(facts):
        others = [bdf for bdf in device.get("iommu_group_peers") or [] if not same_slot(bdf, device["bdf"])]
        if others:
            shared[device["bdf"]] = {"group": device.get("iommu_group"), "also_in_group": others}
    if not shared:
        return []
    return [make(
        "iommu_group_shared",
        f"{len(shared)} GPU(s) share their IOMMU group with unrelated devices: they can only be passed through "
        "together with them, and isolation between them is not enforced.",
        {"groups": shared})]


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
    return [make(
        "acs_redirect_between_gpus",
        f"ACS request/completion redirect is on at {len(redirecting)} bridge(s) between GPUs: P2P traffic is "
        "sent up to the root complex, which cuts bandwidth or makes NCCL hang.",
        {"bridges": redirecting})]


def rule_acs_unreadable(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    unread = sorted({u["bdf"] for d in pci_gpus(facts) for u in d.get("upstream") or []
                     if u.get("acs_ctrl") is None and u.get("acs_source") == "unreadable"})
    if not unread or is_vm(facts):
        return []
    return [make(
        "acs_unreadable",
        f"The ACS settings of {len(unread)} bridge(s) above the GPUs could not be read: that needs root.",
        {"bridges": unread})]


def rule_consumer_p2p(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    consumer = [d.get("index") for d in gpu_devices(facts) if _is_consumer(d)]
    read = (facts.get("p2p") or {}).get("read") or []
    granted = [(i, j, label) for i, j, label in matrix_pairs(read, consumer) if label == "OK"]
    if not granted:
        return []
    return [make(
        "consumer_p2p_unproven",
        "The driver grants P2P between consumer GPUs. On some of them the granted window is a private mirror: "
        "writes succeed and the peer reads zeros, NCCL hangs or returns wrong data (NVIDIA/nccl#2335).",
        {"pairs": pairs_text(granted), "gpus": [f"GPU{i}" for i in consumer]})]


def _is_consumer(device: dict[str, Any]) -> bool:
    if device.get("brand") in CONSUMER_BRANDS:
        return True
    name = (device.get("name") or "").lower()
    return any(word in name for word in CONSUMER_NAME_WORDS)


def rule_persistence(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    off = [f"GPU{d.get('index')}" for d in gpu_devices(facts) if d.get("persistence_mode") is False]
    if not off:
        return []
    return [make(
        "persistence_mode_off",
        f"Persistence mode is off on {len(off)} GPU(s): the driver tears down and re-initialises them between "
        "clients, which slows every start and can reset clocks.",
        {"gpus": off})]


def rule_nvml_unavailable(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    gpus = facts.get("gpus") or {}
    if gpus.get("source") != "nvidia-smi" or "nvml" in not_seen(facts):
        return []  # material without NVML readings says nothing of whether NVML works on the host
    return [make(
        "nvml_unavailable",
        "NVML could not be read from Python, so GPU facts came from nvidia-smi: BAR1, brand and "
        "virtualization mode are missing.",
        {"nvml": gpus.get("nvml_error")})]


def rule_audit_incomplete(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    problems = facts.get("problems") or []
    if not problems:
        return []
    return [make(
        "audit_incomplete",
        f"{len(problems)} thing(s) could not be read; the facts that depend on them are missing, not wrong.",
        {"unreadable": problems[:20]})]


# What each judgement needs of what material may lack (views.NOT_SEEN ids): any one of them unseen, the
# finding cannot be judged.
NEEDS = {
    "no_nvidia_gpu": ("pci", "gpus"),
    "gpu_count_mismatch": ("pci",),
    "nvidia_driver_not_loaded": ("pci",),
    "gpus_bound_to_vfio": ("pci",),
    "p2p_not_supported": ("p2p",),
    "consumer_p2p_unproven": ("p2p",),
    "pcie_link_narrow": ("pci",),
    "pcie_link_slow": ("pci",),
    "acs_redirect_between_gpus": ("pci",),
    "iommu_group_shared": ("pci", "iommu"),
    "gpus_on_several_numa_nodes": ("pci",),
    "xid_errors": ("kernel_log",),
    "xid_needs_reset": ("kernel_log",),
    "small_bar1": ("gpus",),
    "persistence_mode_off": ("gpus",),
    "ecc_uncorrectable_errors": ("gpus",),
    "qemu_machine_i440fx": ("virtualization",),
}
# A Proxmox node's judgements, listed only when the material holds VM configs.
PROXMOX_NEEDS = {
    "proxmox_iommu_off": ("iommu",),
    "proxmox_gpu_group_shared": ("iommu", "pci"),
    "proxmox_gpu_not_vfio": ("pci",),
}


# What fills each of those in material (a kind material/kinds.py reads): the outputs a remedy asks for, only for what
# is missing. PCI devices and IOMMU groups from sysfs only a capture of the host holds (playbooks/capture.yml).
ASK_FOR = {
    "gpus": "`nvidia-smi -q`",
    "p2p": "`nvidia-smi topo -p2p r`",
    "kernel_log": "`dmesg` run as root",
    "virtualization": "`dmesg` (its DMI and hypervisor lines)",
}
BUG_REPORT = "an nvidia-bug-report.log.gz (sudo nvidia-bug-report.sh)"


def rule_not_judged(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    """Partial material: what it did not hold, and the findings that needed it, so that their absence from the
    findings reads as 'could not judge', not as a pass."""
    if "not_seen" not in facts:
        return []  # a host, or a capture of one: everything the audit reads was there to read
    missing = [item for item in NOT_SEEN if item in not_seen(facts)]
    if not missing:
        return []
    needs = {**NEEDS, **(PROXMOX_NEEDS if (facts.get("proxmox") or {}).get("vms") else {})}
    if gpu_devices(facts) or pci_gpus(facts):
        needs.pop("no_nvidia_gpu")  # GPUs seen: there is one, whatever else was not seen
    judged = {finding: [item for item in items if item in missing]
              for finding, items in sorted(needs.items()) if set(missing) & set(items)}
    return [make(
        "audit_not_judged",
        f"The audited material did not hold {len(missing)} thing(s) the audit reads, so {len(judged)} finding(s) "
        "could not be judged: their absence from these findings is no pass.",
        {"not_seen": {item: NOT_SEEN[item] for item in missing}, "not_judged": judged},
        outputs=", ".join(dict.fromkeys([*(ASK_FOR[item] for item in missing if item in ASK_FOR and item in {
            need for items in judged.values() for need in items}), BUG_REPORT])))]


HOST_RULES = (
    rule_no_gpu,
    rule_vfio_bound,
    rule_driver_missing,
    rule_nouveau,
    rule_gpu_count,
    rule_p2p,
    rule_p2p_capability_not_stated,
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
    rule_not_judged,
)
