"""Which report files a run writes and what each holds: the one planner of the audit's reports (gpu_audit_report)
and the analysis's (gpu_analyze), so that a report reads the same whichever way it was made.

Pure: it assembles contents from facts already in hand (report/render.py, report/plot.py) and returns path ->
text; writing them is files/writer.py's, and which host names may be file names is files/report_files.py's, which
the callers check before planning. It lives in report/, the lowest layer that holds everything a report is made
of, so that files/ stays the controller's I/O and assembles no report. Paths are joined with ``/``: reports are
written on the controller, a POSIX system.

Per host: ``<host>.json``, ``<host>.md`` and its pictures (report/pictures.py): with a P2P matrix
``<host>-p2p.svg``, with an NCCL sweep ``<host>-nccl.svg`` (the baseline and each tuning candidate that ran);
then the index, ``fleet.md`` for the audit, ``analysis.md`` for the analysis; the audit also saves captures
under their own directory.

The analysis writes its reports itself instead of handing its facts to gpu_audit_report: a fleet's facts
passed between two tasks go through Ansible's templating and result handling, which costs several times the
analysis itself (scripts/bench_analyze.py). What differs is on purpose: every analysed input's report name ends
in ``.analysis`` (ANALYSIS_SUFFIX), so that it never replaces an audit's report of the same host; the material is
the whole truth about a host there, so a report never keeps the benchmark of an earlier report, and its index is
analysis.md, listing the inputs of this run only (an input that could not be read is a row saying why). It never
writes fleet.md: the analysis often goes to the reports/ an audit wrote, whose fleet.md lists the audited fleet
and is kept by the audit's later phases.
"""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.report.pictures import picture_files
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import (
    fleet_markdown,
    host_markdown,
    merge_bench,
    report_json,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_given import link_across_inputs
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import enrich_guest_findings

# The audit's index.
FLEET_INDEX = "fleet"
# The analysis's index: an input of that name would be a host report overwriting it ("fleet" is the audit's).
ANALYSIS_INDEX = "analysis"
ANALYSIS_RESERVED = (FLEET_INDEX, ANALYSIS_INDEX)
# Ends the name of every analysed input's report (<name>.analysis.md, .json, -nccl.svg): the analysis often writes
# into the reports/ of an audit, and material named after an audited host (gpu-node-1/) would otherwise replace
# that host's report, which the audit's fleet.md then read as the host's last audit. An inventory name ending so
# would have to be a host in a top-level domain "analysis".
ANALYSIS_SUFFIX = ".analysis"
ANALYSIS_TITLE = "Offline analysis of material"


def merged_facts(hosts: dict[str, dict[str, Any]], bench: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The analysis's hosts: each host's facts with its benchmark folded in, and guests linked to the Proxmox hosts
    analysed with them."""
    merged = link_across_inputs({host: merge_bench(facts, bench.get(host)) for host, facts in hosts.items()})
    proxmox_hosts = {host: facts for host, facts in merged.items() if facts.get("proxmox")}
    if proxmox_hosts:
        merged = {host: enrich_guest_findings(facts, proxmox_hosts) for host, facts in merged.items()}
    return merged


def planned_files(dest: str, hosts: dict[str, dict[str, Any]], index: str | None = FLEET_INDEX,
                  listed: dict[str, dict[str, Any]] | None = None, absent: dict[str, dict[str, Any]] | None = None,
                  title: str | None = None, captures: dict[str, dict[str, Any]] | None = None,
                  captures_dest: str = "") -> dict[str, str]:
    """Path -> content of every report of ``hosts`` under ``dest``, then the index ``<index>.md`` (None: none)
    listing ``hosts``, the other hosts of the table with their facts (``listed``) and those without a report of
    this run (``absent``: ``{status, msg, report, report_date}``); ``captures`` are saved under ``captures_dest``."""
    files: dict[str, str] = {}
    for host, facts in sorted(hosts.items()):
        for name, svg in picture_files(host, facts).items():
            files[_path(dest, name)] = svg
    for host, capture in sorted((captures or {}).items()):
        files[_path(captures_dest, f"{host}.json")] = json.dumps(capture, indent=1, sort_keys=True) + "\n"
    for host, facts in sorted(hosts.items()):
        files[_path(dest, f"{host}.json")] = report_json(host, facts)
        files[_path(dest, f"{host}.md")] = host_markdown(host, facts)
    if index is not None:
        table = {**hosts, **(listed or {})}
        files[_path(dest, f"{index}.md")] = fleet_markdown(table, absent or {}, **({"title": title} if title else {}))
    return files


def _path(directory: str, name: str) -> str:
    """``directory/name`` as os.path.join writes it on POSIX, without touching the system."""
    if not directory:
        return name
    return directory + name if directory.endswith("/") else f"{directory}/{name}"
