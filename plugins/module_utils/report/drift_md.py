"""The "Changed since" section of a host's report and the fleet's one line per host that drifted."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.report.markdown import table
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.drift import describe


def drift_section(drift: Any) -> list[str]:
    """The recorded changes, newest first as recorded; nothing when there is no record."""
    if not isinstance(drift, dict) or not drift.get("changes"):
        return []
    since = drift.get("since") or "the previous report (date not known)"
    rows = [[c.get("item"), describe(c), c.get("since") or "-", "yes" if c.get("invalidates_proof") else "no"]
            for c in drift["changes"] if isinstance(c, dict)]
    return [f"## Changed since {since}", "",
            "What changed that matters since the previous report (kept until a later change; a GPU still gone "
            "or a link still lower stays listed).", "",
            *table(["Item", "Change", "Since", "Invalidates a proof"], rows)]


def fleet_drift_lines(reports: dict[str, dict[str, Any]]) -> list[str]:
    """One line per host whose report records drift: its items and date."""
    lines = []
    for host in sorted(reports):
        drift = (reports[host] or {}).get("drift")
        if isinstance(drift, dict) and drift.get("changes"):
            items = sorted({str(c.get("item")) for c in drift["changes"] if isinstance(c, dict)})
            lines.append(f"- {host}: {', '.join(items)} (since {drift.get('since') or 'a date not known'})")
    return ["Changed since the previous report:", "", *lines, ""] if lines else []
