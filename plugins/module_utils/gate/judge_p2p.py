"""How far P2P holds between the chosen GPUs: proven, claimed, absent, partial or unknown.

A missing P2P blocks with ``p2p_not_supported`` (judged again here for the chosen GPUs, under the
audit's id) unless it is accepted; the notes say what each state means for the launch.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import text
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.all_reduce import nvlink_mesh
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.decision import Decision
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import Gpu, Host, cell
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.placement import P2P_STATES, pair_state


def judge_p2p(out: Decision, host: Host, proof: dict[tuple[int, int], bool], group: tuple[Gpu, ...] | None,
              accepted: frozenset[str]) -> dict[str, Any]:
    if not group:
        return {"state": "n/a", "pairs": {}}
    if len(group) == 1:
        return {"state": "n/a (one GPU)", "pairs": {}}
    by_state: dict[str, list[str]] = {state: [] for state in P2P_STATES}
    for a, b in combinations(group, 2):
        by_state[pair_state(host, proof, a.index, b.index)].append(f"GPU{a.index}-GPU{b.index}")
    counts = {state: len(pairs) for state, pairs in by_state.items()}
    total = sum(counts.values())
    if counts["proven"] == total:
        state = "proven"
    elif counts["absent"] or counts["failed"]:
        state = "absent" if counts["absent"] + counts["failed"] == total else "partial"
    elif counts["unknown"]:
        state = "unknown"
    else:
        state = "claimed"
    result = {"state": state, "pairs": counts}
    if counts["absent"] or counts["failed"]:
        audit_finding = next((f for f in host.findings if f.get("id") == "p2p_not_supported"), {})
        labels = sorted({cell(host.p2p_read, a.index, b.index) or "?" for a, b in combinations(group, 2)
                         if pair_state(host, proof, a.index, b.index) in ("absent", "failed")})
        out.block("p2p_not_supported",
                  f"No working GPU peer-to-peer between {counts['absent'] + counts['failed']} of the {total} pairs of "
                  f"the chosen GPUs {[g.index for g in group]}: every all-reduce goes through host memory."
                  + (" The P2P probe found no peer access, or saw data not arrive, between "
                     f"{', '.join(by_state['failed'])}."
                     if by_state["failed"] else ""),
                  {"gpus": [g.index for g in group], "statuses": labels,
                   "pairs_absent": by_state["absent"][:16], "pairs_failed_probe": by_state["failed"][:16],
                   "virtualization": host.virtualization},
                  accept=accepted, remedy=text("p2p_not_supported", "gate", audit_remedy=audit_finding.get("remedy")
                                               or text("p2p_not_supported", "gate_default")))
    if (counts["absent"] or counts["failed"]) and any(a["id"] == "p2p_not_supported" for a in out.accepted):
        out.notes.append("Missing P2P is accepted as a risk: NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce make "
                         "the lack explicit, and every all-reduce pays the host-memory latency (see "
                         "communication_ceiling_tok_s). Fewer GPUs per group, or P2P fixed at the hypervisor, "
                         "raise that ceiling.")
    elif state == "claimed" and len(group) > 2 and nvlink_mesh(host, [g.index for g in group])[0] is not True:
        # Two GPUs, and an NVLink mesh of any size, get SGLang's own P2P check instead (launch.py says so).
        out.notes.append("P2P is claimed by the driver between every pair of the chosen GPUs but not proven: custom "
                         "all-reduce stays off. Run gpu_p2p_probe and pass its result as probe to turn it on.")
    elif state == "unknown":
        out.notes.append(f"The P2P status of {counts['unknown']} pair(s) of the chosen GPUs is unknown (no P2P matrix "
                         "in the audit, no probe): custom all-reduce stays off and NCCL decides for itself.")
    return result
