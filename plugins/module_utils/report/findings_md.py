"""A host report's findings: the "What to do next" list at the top, and a block per finding below it.

The list is ordered by impact (critical, then warning; the findings come worst first already, and the sort
keeps their order within a severity); each item says what is wrong in one line and links to the finding's
block, which holds the evidence and the remedy with its commands. Info findings need nothing done to serve
and are only counted. A remedy goes in a fenced block whatever it holds (see markdown.fenced).
"""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import severity_rank
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.markdown import anchor, fenced, first_sentence, inline
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import GIVEN_NODE

SEVERITY_MARK = {"critical": "CRITICAL", "warning": "warning", "info": "info"}
ACTIONABLE = ("critical", "warning")


def _heading(finding: dict[str, Any]) -> str:
    return f"{SEVERITY_MARK.get(finding.get('severity'), finding.get('severity'))}: {finding.get('id')}"


def _text(summary: Any) -> str:
    """A summary as one paragraph that shows as written: it quotes what the host or the material held (a GPU's
    name, a file's), which must not start a heading or bring HTML, links or images of its own."""
    return inline(summary) if summary else ""


def _where(finding: dict[str, Any]) -> str:
    """Where the fix runs, when that is not this host: a guest's finding linked to its Proxmox VM."""
    evidence = finding.get("evidence")
    if not isinstance(evidence, dict) or not evidence.get("proxmox_host"):
        return ""
    if evidence.get("proxmox_host") == GIVEN_NODE:
        return f" The fix runs on the Proxmox node of VM {evidence.get('vmid')}."
    return f" The fix runs on the Proxmox host {evidence['proxmox_host']}, VM {evidence.get('vmid')}."


def next_steps(findings: list[dict[str, Any]], anchors: list[str]) -> list[str]:
    ranked = sorted((i for i, f in enumerate(findings) if f.get("severity") in ACTIONABLE),
                    key=lambda i: severity_rank(findings[i].get("severity")))
    out = ["## What to do next", ""]
    for number, i in enumerate(ranked, 1):
        finding = findings[i]
        out.append(f"{number}. **{SEVERITY_MARK[finding['severity']]}** `{finding.get('id')}`: "
                   f"{_text(first_sentence(finding.get('summary')))}{_where(finding)} [What to do](#{anchors[i]})")
    if not ranked:
        out.append("Nothing: no critical or warning finding.")
    infos = sum(1 for f in findings if f.get("severity") not in ACTIONABLE)
    if infos:
        out += ["", f"{infos} info finding(s) below leave the verdict as it is."]
    return [*out, ""]


def findings_markdown(findings: list[dict[str, Any]], taken: dict[str, int],
                      pictures: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """("What to do next", "Findings") sections. `taken`: the anchors of the headings above them, updated;
    `pictures`: finding id -> the image link of the picture that shows it, put before the evidence."""
    anchor("What to do next", taken)
    anchor("Findings", taken)
    anchors = [anchor(_heading(f), taken) for f in findings]
    out = ["## Findings", ""]
    if not findings:
        out += ["None.", ""]
    for finding in findings:
        picture = (pictures or {}).get(finding.get("id"))
        out += [f"### {_heading(finding)}", "", _text(finding.get("summary")), "", *([picture, ""] if picture else []),
                "Evidence:", "",
                *fenced(json.dumps(finding.get("evidence"), indent=2, sort_keys=True), "json"), "", "Remedy:", "",
                *fenced(str(finding.get("remedy", "")), "text"), "",
                f"Action: {finding.get('action') or 'not stated'}", ""]
    return next_steps(findings, anchors), out
