"""The reports of an offline analysis: the files gpu_audit_report writes, from facts and benchmarks that
gpu_analyze computed in the same process.

The analysis writes its reports itself instead of handing its facts to gpu_audit_report: a fleet's facts
passed between two tasks go through Ansible's templating and result handling, which costs several times the
analysis itself (scripts/bench_analyze.py). The content comes from the same code (report/render.py,
report/plot.py, rules/proxmox_plans.py, files/report_files.py), so a report reads the same whichever way it
was made, and files/writer.py writes them for both. What differs is on purpose: every report's name ends in
``.analysis`` (ANALYSIS_SUFFIX), so that it never replaces an audit's report of the same host;
the material is the whole truth about a host here, so a report never keeps the benchmark of an earlier
report, and its index is analysis.md, listing the inputs of this run only (an input that could not be read is
a row saying why). It never writes fleet.md: the analysis often goes to the reports/ an audit wrote, whose
fleet.md lists the audited fleet and is kept by the audit's later phases (a table of this run's inputs in its
place cut it to them, and the benchmark then kept the inputs' rows as hosts of the fleet).
"""

from __future__ import annotations

import os
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.files.report_files import check_host_names
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.plot import sweep_svg
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import (
    fleet_markdown,
    host_markdown,
    merge_bench,
    report_json,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import enrich_guest_findings

# The index's name: an input of that name would be a host report overwriting it ("fleet" is the audit's).
INDEX = "analysis"
RESERVED = ("fleet", INDEX)
# Ends the name of every analysed input's report (<name>.analysis.md, .json, -nccl.svg): the analysis often writes
# into the reports/ of an audit, and material named after an audited host (gpu-node-1/) would otherwise replace
# that host's report, which the audit's fleet.md then read as the host's last audit. An inventory name ending so
# would have to be a host in a top-level domain "analysis".
ANALYSIS_SUFFIX = ".analysis"


def merged_facts(hosts: dict[str, dict[str, Any]], bench: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each host's facts with its benchmark folded in, and guests linked to the Proxmox hosts analysed with them."""
    merged = {host: merge_bench(facts, bench.get(host)) for host, facts in hosts.items()}
    proxmox_hosts = {host: facts for host, facts in merged.items() if facts.get("proxmox")}
    if proxmox_hosts:
        merged = {host: enrich_guest_findings(facts, proxmox_hosts) for host, facts in merged.items()}
    return merged


def planned_files(dest: str, hosts: dict[str, dict[str, Any]], not_read: dict[str, str],
                  fleet: bool = True) -> dict[str, str]:
    """Path -> content of every report: per host its JSON, Markdown and NCCL chart, and the index analysis.md."""
    check_host_names([*hosts, *not_read], RESERVED)
    files: dict[str, str] = {}
    for host, facts in sorted(hosts.items()):
        rows = ((facts.get("bench") or {}).get("nccl") or {}).get("results")
        if rows:
            # A log holds one environment's run: no tuning candidates to draw beside it.
            files[os.path.join(dest, f"{host}-nccl.svg")] = sweep_svg(f"{host}: NCCL all-reduce", {"as run": rows})
        files[os.path.join(dest, f"{host}.json")] = report_json(host, facts)
        files[os.path.join(dest, f"{host}.md")] = host_markdown(host, facts)
    if fleet:
        absent = {host: {"status": "failed", "msg": msg, "report": None, "report_date": None}
                  for host, msg in not_read.items()}
        files[os.path.join(dest, f"{INDEX}.md")] = fleet_markdown(hosts, absent,
                                                                  title="Offline analysis of support material")
    return files
