"""One audit of one host: every gatherer over one Source, then the rules."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.dcgm_diag import DEFAULT_TIMEOUT_S, gather_dcgm_diag
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.gpus import gather_gpus
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.health import gather_health
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.host_settings import gather_host_settings
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.iommu import Iommu, gather_iommu
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.kernel import gather_kernel
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.packages import gather_packages
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.pci import PCI_DIR, gather_pci, read_ids
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.proxmox_probe import has_vm_configs, node_evidence
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.virt import (
    gather_virtualization,
    note_gpu_modes,
    with_vm_config,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import judgement
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules import engine
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.p2p_evidence import p2p_evidence
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import (
    RuleOptions,
    gpu_devices,
    matrix_pairs,
    not_seen,
    pci_gpus,
    tp_group,
    unread_pairs,
)

SCHEMA_VERSION = 8
SUBSETS = ("virtualization", "iommu", "pci", "gpus", "proxmox")


class SubsetError(ValueError):
    pass


def resolve_subsets(requested: list[str]) -> list[str]:
    """``setup``-style subsets: "all", names, and "!name" to leave one out."""
    chosen: set[str] = set()
    excluded: set[str] = set()
    for item in requested or ["all"]:
        name = item.strip()
        negate = name.startswith("!")
        name = name.lstrip("!")
        if name == "all":
            (excluded if negate else chosen).update(SUBSETS)
        elif name in SUBSETS:
            (excluded if negate else chosen).add(name)
        else:
            raise SubsetError(f"unknown gather_subset {item!r}: expected all, {', '.join(SUBSETS)} "
                              "or one of them prefixed with '!'")
    if not chosen and excluded:
        chosen = set(SUBSETS)
    return [s for s in SUBSETS if s in chosen and s not in excluded]


def p2p_verdict(facts: dict[str, Any], group: list[int]) -> str:
    decided = p2p_evidence(facts)
    read = decided.matrix if decided else []
    pairs = matrix_pairs(read, group)
    unread = len(unread_pairs(read, group))
    if not group:
        # Material that held no GPU list cannot tell whether a GPU is usable here.
        return "unknown" if "gpus" in not_seen(facts) else "n/a (no GPU usable here)"
    if len(group) < 2:
        return "n/a (one GPU)"
    if not pairs:
        return "unknown"
    states = [decided.state(label) for _i, _j, label in pairs] if decided else []
    ok = states.count("ok")
    if "unknown" in states and "none" not in states:
        return "unknown"  # cells of a capability that says nothing of peer access (rules/p2p_evidence.py)
    if ok == len(pairs):
        # What was read is fine; pairs with a GPU NVML could not open are not claimed.
        return f"unknown ({unread} of {len(pairs) + unread} pairs not read)" if unread else "ok"
    total = len(pairs) + unread
    return "none" if ok == 0 and not unread else f"partial ({ok} of {total} pairs)"


def audit(source: Source, subsets: list[str], options: RuleOptions, dcgm_diag: bool = False,
          dcgm_diag_timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
    """The facts, findings and summary of one host. ``dcgm_diag`` runs ``dcgmi diag -r 1`` (opt-in: it loads the
    GPUs; audit/dcgm_diag.py); material's DCGM output is read whatever it says."""
    facts: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "gather_subset": subsets}
    if options.manifest:  # the fleet compares the hosts of one class (rules/fleet_class.py)
        facts["manifest_class"] = options.manifest["class"]
    # Two small reads whatever the subsets: the drift between audits compares them (report/drift.py).
    facts["kernel"] = gather_kernel(source)

    # One directory listing says whether there are VM configs; the node's own tools whether it is a Proxmox VE node.
    # Configs without a node are read only from material (a guest's ticket with its VM's config); on a live host
    # they are a copy or a leftover, and the host is audited as what it is.
    vm_configs = "proxmox" in subsets and has_vm_configs(source)
    node = node_evidence(source, facts["kernel"]) if vm_configs else None
    proxmox_node = node is not None
    given_configs = vm_configs and not proxmox_node and source.partial
    iommu = gather_iommu(source) if {"iommu", "pci", "virtualization"} & set(subsets) or proxmox_node else Iommu()
    if "iommu" in subsets:
        facts["iommu"] = iommu.as_dict()

    pci_ids: list[tuple[str, str, str]] = []
    pci_facts: dict[str, Any] = {}
    if "pci" in subsets or "gpus" in subsets or proxmox_node:
        pci_facts, pci_ids = gather_pci(source, iommu.groups)
        if "pci" in subsets:
            facts["pci"] = pci_facts
    elif "virtualization" in subsets:
        pci_ids = [(bdf, ids["vendor"] or "", ids["device"] or "")
                   for bdf in source.listdir(PCI_DIR) or [] for ids in [read_ids(source, bdf)]]

    if "virtualization" in subsets:
        virt = gather_virtualization(source, pci_ids, len(iommu.groups), iommu.hardware)
        facts["virtualization"] = virt.as_dict()

    if "gpus" in subsets:
        # Without NVML, nvidia-smi -q -x is read once, by gather_gpus; its health readings come back with it.
        facts["gpus"], facts["p2p"], facts["topology"], smi_health = gather_gpus(source, pci_facts)
        facts["health"] = gather_health(source, pci_facts, facts["gpus"], source.nvml(), parsed_gpus=smi_health)
        diag = gather_dcgm_diag(source, dcgm_diag, dcgm_diag_timeout_s)
        if diag is not None:  # absent where DCGM was neither run nor given: the reports of before stay as they were
            facts["health"]["dcgm_diag"] = diag
        facts["host_settings"] = gather_host_settings(source)
        facts["packages"] = gather_packages(source)
        if "virtualization" in facts:
            note_gpu_modes(virt, facts["gpus"], bool(iommu.groups) or bool(iommu.hardware))
            facts["virtualization"] = virt.as_dict()

        if source.partial:
            # Only material holds an NCCL INFO log: its reader comes with the source (material/nccl_transports.py).
            transports = source.readers.transports(source, facts["gpus"])
            if transports is not None:
                facts["nccl_transports"] = transports

    if proxmox_node or given_configs:
        # Loaded on Proxmox VE nodes (and material with VM configs) only: a host compiles every module it imports.
        from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.proxmox import gather_proxmox

        proxmox = gather_proxmox(source, iommu, pci_facts, node, len(gpu_devices(facts)))
        if proxmox is not None:
            facts["proxmox"] = proxmox
            runs_in = [vm for vm in proxmox["vms"] if vm.get("gpus_assumed")] if given_configs else []
            if len(runs_in) == 1 and "virtualization" in facts:
                facts["virtualization"] = with_vm_config(facts["virtualization"], runs_in[0])

    if source.partial:
        # Imported here: only material leaves things unseen.
        from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.seen import material_not_seen

        facts["not_seen"] = material_not_seen(source, facts)
    facts["problems"] = list(source.problems)
    facts["findings"] = engine.evaluate(facts, options)
    if given_configs and facts.get("proxmox"):
        # Material of a guest with its VM's config: the guest's findings fixed on the VM give that VM's commands.
        from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_given import linked_to_given_vm

        facts["findings"] = linked_to_given_vm(facts)["findings"]
    group = tp_group(facts, options)
    facts["summary"] = {
        "virtualization": (facts.get("virtualization") or {}).get("summary"),
        "gpu_count": len(gpu_devices(facts)) or len(pci_gpus(facts)),
        "gpu_models": sorted({d.get("name") for d in gpu_devices(facts) if d.get("name")}),
        "p2p": p2p_verdict(facts, group),
        **judgement(facts["findings"]),
    }
    return facts
