"""The before/after comparison of a Proxmox guest whose VM got the P2P fix (playbooks/proxmox_fix.yml).

Pure: it reads the guest's audit facts (``ansible_facts.gpu_host``) and the benchmark's results
(``gpu_bench_results``: the registered results of gpu_p2p_probe and nccl_bench) taken before and after
the change, and the result of the proxmox_vm_gpu module. A value nothing measured stays null.

The report's shape (``FORMAT``):
- ``guest``, ``node``, ``vmid``, ``date``;
- ``change``: the keys changed (``key``, ``old``, ``new``), the ``qm set`` command line, the backup of the
  config, whether QEMU was restarted;
- ``before`` and ``after`` (``after`` null when the guest was not measured again), each a ``measurement``;
- ``latency``: per all-reduce size measured on either side, its time before and after and the ratio;
- ``restored``: null, or why the backed-up config was put back (``reason``, ``backup``);
- ``verdict``: one of ``VERDICTS``, and ``summary``, one line.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.p2p_evidence import P2PEvidence, p2p_evidence
from ansible_collections.gpuhost.gpu.plugins.module_utils.values import as_dict

FORMAT = "gpuhost-p2p-fix/1"
VERDICTS = ("fixed", "granted_unproven", "not_fixed", "pending", "restored")


def _off_diagonal(matrix: Any) -> list[Any]:
    if not isinstance(matrix, list):
        return []
    return [cell for i, row in enumerate(matrix) if isinstance(row, list)
            for j, cell in enumerate(row) if i != j]


def read_state(matrix: Any) -> str | None:
    """The P2P read matrix in one word: ok (every pair OK), none (no pair OK), partial; null without a matrix."""
    return p2p_state(P2PEvidence("read", matrix) if isinstance(matrix, list) else None)


def p2p_state(evidence: P2PEvidence | None) -> str | None:
    """The matrix the P2P rule judges from, in one word, by what each cell proves (rules/p2p_evidence.py): ok
    (every pair granted), none (every pair proved without P2P), partial (some granted); null without a matrix
    or where its cells prove nothing (NS under NVLink is every PCIe card's answer)."""
    cells = _off_diagonal(evidence.matrix) if evidence is not None else []
    if not cells:
        return None
    states = [evidence.state(cell) if isinstance(cell, str) else "unknown" for cell in cells]
    if all(state == "ok" for state in states):
        return "ok"
    if "ok" in states:
        return "partial"
    return "none" if all(state == "none" for state in states) else None


def probe_proof(probe: Any) -> dict[str, Any]:
    """What the probe proved: pairs tried, granted peer access, whose data arrived intact, whose did not."""
    probe = as_dict(probe)
    findings = [f.get("id") for f in probe.get("findings") or [] if isinstance(f, dict)]
    cells = [cell for cell in _off_diagonal(probe.get("proof")) if isinstance(cell, dict)]
    ran = bool(cells) and not probe.get("failed")
    wrong = [cell for cell in cells if (cell.get("ce_wrong") or 0) + (cell.get("sm_wrong") or 0) > 0]
    granted = [cell for cell in cells if cell.get("peer_access")]
    return {
        "ran": ran,
        "source": probe.get("source"),
        "why_not": None if ran else (probe.get("msg") or "the probe did not run"),
        "pairs": len(cells) if ran else None,
        "peer_access_pairs": len(granted) if ran else None,
        "data_wrong_pairs": len(wrong) if ran else None,
        "proven_pairs": len([c for c in granted if c not in wrong]) if ran else None,
        "data_check": None if not ran else "failed" if wrong or "p2p_probe_timeout" in findings else "passed",
        "findings": findings,
    }


def allreduce_times(nccl: Any) -> dict[int, float]:
    """The out-of-place all-reduce time (us) per message size; in-place where out-of-place is missing."""
    times: dict[int, float] = {}
    for row in as_dict(nccl).get("results") or []:
        row = as_dict(row)
        size = row.get("size_bytes")
        time_us = as_dict(row.get("out_of_place")).get("time_us")
        if time_us is None:
            time_us = as_dict(row.get("in_place")).get("time_us")
        if isinstance(size, int) and isinstance(time_us, (int, float)):
            times[size] = float(time_us)
    return times


def ceiling(nccl: Any) -> dict[str, Any] | None:
    """The decode ceiling the all-reduce curve predicts (nccl_bench's communication_ceiling), or null."""
    priced = as_dict(as_dict(nccl).get("communication_ceiling"))
    if not priced:
        return None
    single = as_dict(priced.get("batch_1"))
    batches = sorted((as_dict(v) for k, v in priced.items() if k.startswith("batch_") and k != "batch_1"),
                     key=lambda b: b.get("batch") or 0)
    batch = batches[-1] if batches else {}
    return {
        "model": single.get("model"),
        "tensor_parallel_size": single.get("tensor_parallel_size"),
        "single_stream_tokens_per_s": single.get("max_tokens_per_s_single_stream"),
        "batch": batch.get("batch"),
        "batch_tokens_per_s": batch.get("max_tokens_per_s_aggregate"),
        "summary": priced.get("summary"),
    }


def measurement(facts: Any, bench: Any) -> dict[str, Any]:
    """One side of the comparison, from the guest's audit facts and its benchmark results."""
    facts, bench = as_dict(facts), as_dict(bench)
    summary = as_dict(facts.get("summary"))
    # The matrix the P2P rule judged (on a live guest the read matrix), so that the comparison and the audit's
    # verdict never read two different matrices.
    evidence = p2p_evidence(facts)
    nccl = as_dict(bench.get("nccl"))
    measured = bool(allreduce_times(nccl))
    return {
        "verdict": summary.get("verdict"),
        "virtualization": summary.get("virtualization"),
        "findings": [f.get("id") for f in facts.get("findings") or [] if isinstance(f, dict)],
        "p2p_read": evidence.matrix if evidence is not None else None,
        "p2p_read_state": p2p_state(evidence),
        "p2p_capability": evidence.capability if evidence is not None else None,
        "probe": probe_proof(bench.get("probe")),
        "allreduce_us": {str(size): time for size, time in sorted(allreduce_times(nccl).items())},
        "allreduce_why_not": None if measured else (nccl.get("msg") or "no all-reduce curve measured"),
        "ceiling": ceiling(nccl),
    }


def latency_rows(before: dict[str, Any], after: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per size measured on either side: before, after (us), and before/after (how many times faster)."""
    first = {int(k): v for k, v in before.get("allreduce_us", {}).items()}
    second = {int(k): v for k, v in (after or {}).get("allreduce_us", {}).items()}
    rows = []
    for size in sorted(set(first) | set(second)):
        old, new = first.get(size), second.get(size)
        rows.append({"size_bytes": size, "before_us": old, "after_us": new,
                     "speedup": round(old / new, 2) if old and new else None})
    return rows


def verdict(after: dict[str, Any] | None, restored: dict[str, Any] | None) -> str:
    if restored:
        return "restored"
    if after is None:
        return "pending"
    proven = after["probe"]["data_check"] == "passed" and after["probe"]["proven_pairs"] == after["probe"]["pairs"]
    if after["p2p_read_state"] == "ok" and proven:
        return "fixed"
    if after["p2p_read_state"] == "ok" and not after["probe"]["ran"]:
        return "granted_unproven"
    return "not_fixed"


def summary_line(report: dict[str, Any]) -> str:
    guest, vm = report["guest"], f"VM {report['vmid']} on {report['node']}"
    before = report["before"]["p2p_read_state"] or "unknown"
    after = (report["after"] or {}).get("p2p_read_state") or "unknown"
    said = {
        "fixed": f"{guest}: P2P {before} before, {after} after the change to {vm}; the probe proved every pair",
        "granted_unproven": f"{guest}: the driver grants P2P after the change to {vm} ({before} before), but no "
                            "probe proved it",
        "not_fixed": f"{guest}: P2P still {after} after the change to {vm} (was {before})",
        "pending": f"{guest}: the change to {vm} waits until QEMU starts again; the guest was not measured again",
        "restored": f"{guest}: the change to {vm} was undone, the backed-up config restored: "
                    f"{(report['restored'] or {}).get('reason')}",
    }
    return said[report["verdict"]]


def compare(*, guest: str, node: str | None, vmid: Any, date: str | None, before: dict[str, Any],
            after: dict[str, Any] | None, change: dict[str, Any], restored: dict[str, Any] | None = None
            ) -> dict[str, Any]:
    """The report of one fix: `before`/`after` are ``measurement`` results (after null: not measured)."""
    change = as_dict(change)
    report = {
        "format": FORMAT, "guest": guest, "node": node, "vmid": vmid, "date": date,
        "change": {"changes": change.get("changes") or [], "command_line": change.get("command_line"),
                   "backup": change.get("backup"), "restarted": bool(change.get("restarted"))},
        "before": before, "after": after, "latency": latency_rows(before, after),
        "restored": restored or None,
    }
    report["verdict"] = verdict(after, restored)
    report["summary"] = summary_line(report)
    return report
