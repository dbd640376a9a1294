"""The Finding type and the severity order that every part of the project shares.

A finding names what was seen (``summary``, ``evidence``: the values used) and what to
do (``remedy``). Findings are made only through ``findings.catalog.make``, which takes the
remedy text from the catalog; this module holds no text of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.actions import most_disruptive

SEVERITIES = ("critical", "warning", "info")
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}


@dataclass
class Finding:
    id: str
    severity: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    remedy: str = ""
    action: str = "none"  # findings/actions.py ACTIONS, declared per id in the catalog

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def severity_rank(severity: Any) -> int:
    """Sort key: critical first, unknown severities last."""
    return SEVERITY_RANK.get(severity, len(SEVERITIES))


def worst_first(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: severity_rank(f.severity))


def worst(findings: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The first of the most severe findings (finding dicts, as in the facts)."""
    return min(findings, key=lambda f: severity_rank(f.get("severity")), default=None)


def counts(findings: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many findings of each severity, every severity present."""
    found = [f.get("severity") for f in findings]
    return {s: found.count(s) for s in SEVERITIES}


# The finding material raises when it lacked what other findings need (rules/host.py).
NOT_JUDGED_ID = "audit_not_judged"
VERDICTS = ("fit", "fit, with warnings", "not judged", "unfit")


def verdict(findings: Iterable[Mapping[str, Any]]) -> str:
    """A host's verdict from its findings: one critical finding makes it unfit. Without one, material that lacked
    what some rules need is "not judged": those rules could neither pass nor fail it, so "fit" would be a guess."""
    findings = list(findings)
    by_severity = counts(findings)
    if by_severity["critical"]:
        return "unfit"
    if any(finding.get("id") == NOT_JUDGED_ID for finding in findings):
        return "not judged"
    return "fit, with warnings" if by_severity["warning"] else "fit"


def judgement(findings: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The part of a host's summary its findings decide: verdict, worst finding, counts by severity and the
    action the host needs (the most disruptive of its findings' actions, findings/actions.py). The one place
    they are computed, whichever phase (audit, benchmark, drift) added the findings."""
    findings = list(findings)
    first = worst(findings)
    return {"verdict": verdict(findings),
            "worst_finding": {"id": first["id"], "severity": first["severity"]} if first else None,
            "counts": counts(findings),
            "action": most_disruptive(f.get("action") for f in findings)}


# The verdict line names at most this many findings; past it, their counts and the worst.
_NAMED_AT_MOST = 6


def findings_named(record: Mapping[str, Any]) -> str:
    """What a one-line verdict says of a record's findings: every critical and warning finding by id, grouped
    by severity (``critical: a; warning: b, c``), or past a few their counts and the worst; without any, the
    worst info finding or "no findings". Read from the record's findings, the list its summary's judgement
    was computed from, so that the line shows all that the verdict rests on, not a selection."""
    listed = [f for f in record.get("findings") or [] if isinstance(f, Mapping)]
    serious = [f for f in listed if f.get("severity") in ("critical", "warning")]
    first = worst(listed)
    if not serious:
        return f"{first.get('severity')}: {first.get('id')}" if first else "no findings"
    by_severity = counts(serious)
    if len(serious) > _NAMED_AT_MOST:
        sizes = " and ".join(f"{by_severity[s]} {s}" for s in ("critical", "warning") if by_severity[s])
        return f"{sizes} findings, the worst {first.get('severity')}: {first.get('id')} (all in the report)"
    return "; ".join(f"{severity}: " + ", ".join(str(f.get("id")) for f in serious if f.get("severity") == severity)
                     for severity in ("critical", "warning") if by_severity[severity])


def with_findings(record: Mapping[str, Any], added: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The record with ``added`` findings folded in, worst first (stable: equal severities keep their order),
    and its summary's judgement recomputed from them."""
    merged = dict(record)
    merged["findings"] = sorted([*record.get("findings", []), *added], key=lambda f: severity_rank(f.get("severity")))
    merged["summary"] = {**(record.get("summary") or {}), **judgement(merged["findings"])}
    return merged
