"""The report's account of material: what each input was, what it gave, and what was not in it.

Only reports of material (``gpu_analyze``) carry a ``material`` key. A reader
of such a report must see, before trusting a verdict, which parts of a host the material never showed: the
rules that needed them said "could not judge" (``audit_not_judged``), and this section says why.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.report.markdown import inline, table
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.scope import two_hosts
from ansible_collections.gpuhost.gpu.plugins.module_utils.values import as_list

TWO_HOSTS_SAID = "two hosts in the material: see the line under the verdict scope, at the top of this report"


def material_section(material: Any) -> list[str]:
    if not isinstance(material, dict):
        return []
    out = ["## Material", ""]
    inputs = [i for i in material.get("inputs") or [] if isinstance(i, dict)]
    if inputs:
        out += table(["Input", "Recognised as", "Gave"], [
            [_input_name(i), i.get("kind") or "not recognised",
             (", ".join(i.get("as") or []) or "nothing read") + _capability_text(i.get("capability"))]
            for i in inputs])
    not_seen = [str(what) for what in material.get("not_seen") or []]
    if not_seen:
        out += ["Not seen in the material (rules that need it could not judge):", ""]
        out += [f"- {inline(what)}" for what in not_seen] + [""]
    unmapped = [u for u in material.get("unmapped") or [] if isinstance(u, dict)]
    if unmapped:
        out += ["Not used:", "", *table(["What", "Why"], [[u.get("name"), u.get("why")] for u in unmapped])]
    # Said once, under the verdict scope (report/scope.py two_hosts): here only where to read it.
    node_outputs = [str(name) for name in as_list(material.get("node_outputs"))]
    said = two_hosts(node_outputs) if node_outputs else None
    warnings = [TWO_HOSTS_SAID if str(w) == said else str(w) for w in material.get("warnings") or []]
    if warnings:
        # Warnings quote the material (file names, lines): each stays one line of text.
        out += ["Warnings:", ""] + [f"- {inline(w)}" for w in warnings] + [""]
    return out


def _capability_text(capability: Any) -> str:
    """What told a topo -p2p matrix's capability, where its own command line did not (material/p2p_matrix.py)."""
    if not isinstance(capability, dict) or capability.get("from") == "command line":
        return ""
    if capability.get("letters"):
        return f" (capability {capability['letters']} from its {capability.get('from') or 'file name'})"
    return " (capability not stated: see p2p_capability_not_stated)"


def _input_name(item: dict[str, Any]) -> str:
    marks = [word for word, on in (("gzip", item.get("gzip")), ("cut short", item.get("truncated"))) if on]
    return f"{item.get('name')} ({', '.join(marks)})" if marks else str(item.get("name"))
