"""Where each finding of the audit, the benchmark and the probe goes: reason, accepted, resolved or other.

Every critical finding blocks unless listed in ``accept``; the consequences of an accepted
``p2p_not_supported`` are accepted with it; a finding the launch remedies, or one about GPUs the gate
did not choose, is resolved; at tensor-parallel size 1 the P2P and NCCL findings do not apply.
Findings below critical are listed under ``other_findings``.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.host_ceiling import probe_host_index
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import (
    MULTI_GPU_CATEGORIES,
    category_of,
    gate_accept_hint,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.decision import Decision
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import (
    Gpu,
    Host,
    as_dict,
    as_int,
    as_list,
    as_text,
)

# Findings that measure what missing P2P costs; accepting p2p_not_supported accepts them.
P2P_CONSEQUENCES = frozenset({"nccl_small_message_latency", "p2p_small_copy_latency"})


def triage_findings(out: Decision, host: Host, bench: dict[str, Any], probe: Any, group: tuple[Gpu, ...] | None,
                    p2p: dict[str, Any], env: dict[str, str], accepted: frozenset[str]) -> None:
    one_gpu = bool(group) and len(group) == 1
    no_p2p_accepted = any(a["id"] == "p2p_not_supported" for a in out.accepted)
    recommended = as_dict(as_dict(bench.get("tuning")).get("recommended")).get("env")
    sources = (("audit", host.findings), ("bench", as_list(bench.get("findings"))),
               ("probe", as_list(as_dict(probe).get("findings"))))
    for source, findings in sources:
        for finding in findings:
            if not isinstance(finding, dict) or not isinstance(finding.get("id"), str):
                continue
            fid = finding["id"]
            brief = {"id": fid, "source": source, "severity": finding.get("severity"),
                     "summary": as_text(finding.get("summary")) or f"{source} finding {fid} (it gives no summary)",
                     "evidence": finding.get("evidence"), "remedy": as_text(finding.get("remedy")) or ""}
            if one_gpu and category_of(fid) in MULTI_GPU_CATEGORIES:
                out.resolved.append({**brief, "resolved_by": "tensor-parallel size 1: no collectives between GPUs"})
                continue
            if source == "audit" and fid == "p2p_not_supported" and group:
                continue  # judged again for the chosen GPUs (judge_p2p.py)
            if source == "probe" and group and _avoids_named_pairs(finding, group, probe_host_index(probe)):
                out.resolved.append({**brief, "resolved_by": "the chosen GPUs include none of the pairs it names"})
                continue
            if finding.get("severity") != "critical":
                out.other_findings.append({k: brief[k] for k in ("id", "source", "severity", "summary")})
                continue
            if fid == "nccl_tuning_recommendation" and isinstance(recommended, dict) and \
                    all(env.get(str(k)) == str(v) for k, v in recommended.items()):
                out.resolved.append({**brief, "resolved_by": "the launch uses the environment the tuning recommends"})
            elif fid in accepted:
                out.accepted.append({**brief, "accepted_because": "listed in accept"})
            elif fid in P2P_CONSEQUENCES and no_p2p_accepted and p2p.get("state") in ("absent", "partial"):
                out.accepted.append({**brief, "accepted_because": "consequence of the accepted p2p_not_supported"})
            else:
                out.reasons.append({**brief, "severity": "critical",
                                    "remedy": (brief["remedy"] + "\n" if brief["remedy"] else "")
                                    + gate_accept_hint(fid)})


def _avoids_named_pairs(finding: dict[str, Any], group: tuple[Gpu, ...], host_index: Any) -> bool:
    """Whether a probe finding lists its GPU pairs and none of them lies within the group."""
    pairs = as_list(as_dict(finding.get("evidence")).get("pairs"))
    if not pairs:
        return False
    chosen = {g.index for g in group}
    for pair in pairs:
        src, dst = as_int(as_dict(pair).get("src")), as_int(as_dict(pair).get("dst"))
        if src is None or dst is None:
            return False
        if host_index(src) in chosen and host_index(dst) in chosen:
            return False
    return True
