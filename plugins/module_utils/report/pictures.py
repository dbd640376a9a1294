"""A host's pictures: which there are, their file names, and which findings each explains.

One list for the files a run writes (files_plan.py) and the links the Markdown report puts under the findings
(findings_md.py), so that a link never points at a picture that was not drawn. Each is drawn from the host's
judged record: the P2P heatmap (heatmap.py) where the facts hold a P2P matrix, the NCCL chart (plot.py) where
the benchmark holds a sweep.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import category_of
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.heatmap import p2p_heatmap
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.plot import nccl_chart, nccl_sweeps
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.p2p_evidence import p2p_evidence

# name: (file name suffix, alt text)
P2P, NCCL = "p2p", "nccl"
PICTURES = {P2P: ("-p2p.svg", "GPU pairs by P2P state"),
            NCCL: ("-nccl.svg", "busbw and latency against message size")}
# The findings outside the p2p and nccl categories that a chart explains: the ceiling is priced from the sweep.
_NCCL_IDS = frozenset({"communication_ceiling", "comm_floor"})


def drawn(facts: dict[str, Any]) -> list[str]:
    """The names of the pictures this record gives, in PICTURES' order."""
    out = [P2P] if p2p_evidence(facts) is not None else []
    return [*out, NCCL] if nccl_sweeps(facts) else out


def file_name(host: str, name: str) -> str:
    return host + PICTURES[name][0]


def picture_files(host: str, facts: dict[str, Any]) -> dict[str, str]:
    """File name -> SVG text of every picture of the host."""
    draw = {P2P: p2p_heatmap, NCCL: nccl_chart}
    files = {file_name(host, name): draw[name](host, facts) for name in drawn(facts)}
    return {name: svg for name, svg in files.items() if svg}


def explained_by(finding_id: Any, names: list[str]) -> str | None:
    """The picture among ``names`` that shows what a finding of this id is about; None for none."""
    category = category_of(finding_id)
    if category == "p2p" and P2P in names:
        return P2P
    if (category == "nccl" or finding_id in _NCCL_IDS) and NCCL in names:
        return NCCL
    return None


def picture_links(host: str, facts: dict[str, Any]) -> dict[str, str]:
    """Name -> the Markdown image link of each picture the record gives."""
    return {name: f"![{PICTURES[name][1]}]({file_name(host, name)})" for name in drawn(facts)}


def finding_pictures(findings: list[dict[str, Any]], links: dict[str, str]) -> dict[str, str]:
    """Finding id -> the image link of the picture that shows it, for the findings some picture shows."""
    out = {}
    for finding in findings:
        name = explained_by(finding.get("id"), list(links)) if isinstance(finding, dict) else None
        if name:
            out[finding["id"]] = links[name]
    return out
