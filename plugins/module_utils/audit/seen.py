"""What partial material (a capture built from material, material/capture.py) did not hold, in the
ids of rules/views.py NOT_SEEN: the facts' ``not_seen``, which the rules read to say they could not judge
rather than judge from absence. A host, or a capture of one, holds everything the audit reads: nothing is
listed."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import (
    DMESG,
    GPU_LISTS,
    JOURNAL,
    LIST_GPUS,
    P2P_LETTERS,
    TOPO_P2P,
    TOPO_P2P_MATERIAL,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.iommu import GROUPS_DIR, IOMMU_CLASS_DIR
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.pci import PCI_DIR
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import NOT_SEEN

P2P_READ = TOPO_P2P[P2P_LETTERS["read"]].key
# Matrices the P2P rule can judge from (rules/p2p_evidence.py): read or write, several capabilities at once,
# or a capability not stated, where GNS and CNS still decide and the rule says what the rest cannot.
P2P_JUDGED_FROM = (P2P_READ, TOPO_P2P[P2P_LETTERS["write"]].key,
                   *(command.key for command in TOPO_P2P_MATERIAL.values()))


def material_not_seen(source: Source, facts: dict[str, Any]) -> list[str]:
    """The NOT_SEEN ids the source lacks, in NOT_SEEN's order. ``facts``: what was gathered from it, for
    the virtualization signals, which audit/virt.py alone weighs."""
    nvml = source.seen("nvml")
    dmesg = source.seen("commands", DMESG.key) or source.seen("commands", JOURNAL.key)
    missing = {
        "nvml": not nvml,
        # NCCL's outputs list GPUs only where nothing else does (material/nccl_gpus.py): then they were seen.
        "gpus": not nvml and not any(source.seen("commands", command.key) for command in (*GPU_LISTS, LIST_GPUS))
        and (facts.get("gpus") or {}).get("source") != "nccl",
        # An NCCL INFO log whose pairs prove P2P or its refusal is evidence too (rules/p2p_evidence.py).
        "p2p": not nvml and not any(source.seen("commands", key) for key in P2P_JUDGED_FROM)
        and not _nccl_proves(facts),
        "pci": not source.seen("dirs", PCI_DIR),
        "iommu": not (source.seen("dirs", GROUPS_DIR) or source.seen("dirs", IOMMU_CLASS_DIR)),
        "kernel_log": not dmesg,
        "virtualization": "virtualization" in facts and (facts["virtualization"] or {}).get("type") is None,
    }
    return [item for item in NOT_SEEN if missing[item]]


def _nccl_proves(facts: dict[str, Any]) -> bool:
    matrix = (facts.get("nccl_transports") or {}).get("matrix") or []
    return any(cell in ("P2P", "refused") for row in matrix if isinstance(row, list) for cell in row)
