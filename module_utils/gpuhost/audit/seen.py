"""What partial material (a capture built from support material, audit/bundle.py) did not hold, in the
ids of rules/views.py NOT_SEEN: the facts' ``not_seen``, which the rules read to say they could not judge
rather than judge from absence. A host, or a capture of one, holds everything the audit reads: nothing is
listed."""

from __future__ import annotations

from typing import Any

from ansible.module_utils.gpuhost.audit.gpus import P2P_LETTERS
from ansible.module_utils.gpuhost.audit.health import DMESG, JOURNAL
from ansible.module_utils.gpuhost.audit.iommu import GROUPS_DIR, IOMMU_CLASS_DIR
from ansible.module_utils.gpuhost.audit.pci import PCI_DIR
from ansible.module_utils.gpuhost.audit.smi_q import SMI_Q, SMI_Q_TEXT
from ansible.module_utils.gpuhost.audit.source import Source, command_key
from ansible.module_utils.gpuhost.parsers.nvidia_smi_query import QUERY_GPU_FIELDS
from ansible.module_utils.gpuhost.rules.views import NOT_SEEN

QUERY = command_key(["nvidia-smi", f"--query-gpu={','.join(QUERY_GPU_FIELDS)}", "--format=csv,noheader,nounits"])
P2P_READ = f"nvidia-smi topo -p2p {P2P_LETTERS['read']}"
# Each nvidia-smi output the GPU facts can come from (audit/gpus.py, audit/smi_q_gather.py).
GPU_LISTS = (QUERY, command_key(SMI_Q), command_key(SMI_Q_TEXT), "nvidia-smi topo -m",
             *(f"nvidia-smi topo -p2p {letter}" for letter in P2P_LETTERS.values()))


def material_not_seen(source: Source, facts: dict[str, Any]) -> list[str]:
    """The NOT_SEEN ids the source lacks, in NOT_SEEN's order. ``facts``: what was gathered from it, for
    the virtualization signals, which audit/virt.py alone weighs."""
    nvml = source.seen("nvml")
    dmesg = source.seen("commands", command_key(DMESG)) or source.seen("commands", command_key(JOURNAL))
    missing = {
        "nvml": not nvml,
        "gpus": not nvml and not any(source.seen("commands", key) for key in GPU_LISTS),
        "p2p": not nvml and not source.seen("commands", P2P_READ),
        "pci": not source.seen("dirs", PCI_DIR),
        "iommu": not (source.seen("dirs", GROUPS_DIR) or source.seen("dirs", IOMMU_CLASS_DIR)),
        "kernel_log": not dmesg,
        "virtualization": "virtualization" in facts and (facts["virtualization"] or {}).get("type") is None,
    }
    return [item for item in NOT_SEEN if missing[item]]
