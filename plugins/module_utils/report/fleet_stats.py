"""The fleet's verdicts in the compact shape that set_stats publishes: AWX shows it as the job's artifacts and
passes it to the next nodes of a workflow, so that the summary outlives an execution environment's disk.

Small on purpose (a fleet of hundreds of hosts is one artifact of a few hundred lines): per host its verdict, its
worst finding, its action and the path of its report; for the fleet the count of each verdict.
"""

from __future__ import annotations

from typing import Any

# The statuses of hosts the run tried and lost (gpu_audit_report's fleet return), counted beside the verdicts.
LOST = ("unreachable", "failed")


def host_verdicts(hosts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per host, the verdict, the worst finding (``severity: id``, None without findings) and the action
    (findings/actions.py; None in a report older than actions) of its facts."""
    out = {}
    for host, facts in hosts.items():
        summary = facts.get("summary") if isinstance(facts.get("summary"), dict) else {}
        worst = summary.get("worst_finding")
        out[host] = {"verdict": summary.get("verdict"),
                     "worst_finding": f"{worst.get('severity')}: {worst.get('id')}" if isinstance(worst, dict)
                     else None,
                     "action": summary.get("action")}
    return out


def fleet_stats(verdicts: dict[str, dict[str, Any]], sources: dict[str, dict[str, Any]],
                reports: dict[str, str | None]) -> dict[str, Any]:
    """The hosts judged (``verdicts``) and those the run lost (``sources`` whose audit is unreachable or failed),
    each with its report's path (``reports``; None when it has none), and the count of each verdict or status.

    Hosts a table only keeps from an earlier run (not audited) are not this run's and are left out.
    """
    hosts: dict[str, dict[str, Any]] = {}
    for host, verdict in verdicts.items():
        hosts[host] = {"audit": "this run", **verdict, "report": reports.get(host)}
    for host, source in sources.items():
        status = (source or {}).get("audit")
        if host in hosts or status not in LOST:
            continue
        hosts[host] = {"audit": status, "verdict": None, "worst_finding": None, "action": None,
                       "report": reports.get(host), "msg": source.get("msg")}
    counts: dict[str, int] = {}
    for row in hosts.values():
        key = row["verdict"] if row["audit"] == "this run" else row["audit"]
        counts[str(key)] = counts.get(str(key), 0) + 1
    return {"hosts": dict(sorted(hosts.items())), "counts": dict(sorted(counts.items()))}
