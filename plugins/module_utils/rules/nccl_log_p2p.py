"""What a pasted NCCL INFO log says of P2P that proves nothing on its own: GPUs of one host connected through SHM
or the network, with no refusal in the log (material/nccl_transports.py). Said when no read or write matrix
decided P2P (rules/p2p_evidence.py judges, this rule only says why it could not from the log), and as info when
the log's environment switched P2P off: then the choice was the user's, not the driver's.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make, text
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.gpu_pairs import pair_count_text
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.p2p_evidence import nccl_evidence, p2p_evidence
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import (
    RuleOptions,
    matrix_pairs,
    pairs_text,
    tp_group,
)


def rule_nccl_log_no_p2p(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    evidence = nccl_evidence(facts)
    decided = p2p_evidence(facts)
    group = tp_group(facts, options)
    if evidence is None or len(group) < 2 or (decided is not None and decided.peer_access):
        return []
    without = [(i, j, label) for i, j, label in matrix_pairs(evidence.matrix, group) if label in ("SHM", "NET")]
    if not without:
        return []
    transports = facts["nccl_transports"]
    counted = pair_count_text([(i, j) for i, j, _label in without], len(group))
    labels = sorted({label for _i, _j, label in without})
    details = {"group": [f"GPU{i}" for i in group], "pairs_without_p2p": len(without), "transports": labels,
               "examples": pairs_text(without), "nccl_version": transports.get("nccl_version")}
    setting = transports.get("p2p_off_by_environment")
    if setting:
        details["p2p_off_by_environment"] = setting
        return [make(
            "nccl_log_no_p2p",
            f"The NCCL INFO log connects {counted} through {'/'.join(labels)}, not P2P, because its environment "
            f"said so ({setting}): P2P is not judged from it.",
            details, severity="info", remedy=text("nccl_log_no_p2p", "environment", setting=setting))]
    return [make(
        "nccl_log_no_p2p",
        f"The NCCL INFO log connects {counted} through {'/'.join(labels)}, not P2P, and logs no refusal: NCCL does "
        "that when the driver refuses P2P and also, by default, across PCIe host bridges, so P2P is not judged "
        "from it.",
        details)]


NCCL_LOG_RULES = (rule_nccl_log_no_p2p,)
