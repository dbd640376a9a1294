"""Reports for people and machines, rendered from the facts of each host.

Output is deterministic (sorted keys, no clock) so that writing the same audit
twice changes nothing, and a re-run of the playbook reports changed=0.
"""

from __future__ import annotations

import json
from typing import Any

SEVERITY_MARK = {"critical": "CRITICAL", "warning": "warning", "info": "info"}


def report_json(host: str, facts: dict[str, Any]) -> str:
    return json.dumps({"host": host, **facts}, indent=2, sort_keys=True) + "\n"


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def matrix_table(names: list[str], matrix: list[list[str]]) -> list[str]:
    return table(["", *names], [[_at(names, i) or f"GPU{i}", *row] for i, row in enumerate(matrix)])


def _gpu_line(summary: dict[str, Any], gpus: dict[str, Any]) -> str:
    count = summary.get("gpu_count") or 0
    if not count:
        return "none found"
    models = ", ".join(summary.get("gpu_models") or []) or "NVIDIA GPU (model unknown: no driver)"
    driver = gpus.get("driver_version")
    cuda = gpus.get("cuda_driver_version")
    extra = ", ".join(x for x in (driver and f"driver {driver}", cuda and f"CUDA {cuda}") if x)
    return f"{count} x {models}" + (f" ({extra})" if extra else "")


def _iommu_line(iommu: dict[str, Any]) -> str:
    if not iommu:
        return "not gathered"
    if not iommu.get("enabled"):
        return "off (no IOMMU groups)"
    return f"on, {iommu.get('mode') or 'mode unknown'} ({len(iommu.get('groups') or {})} groups)"


def host_markdown(host: str, facts: dict[str, Any]) -> str:
    summary = facts.get("summary") or {}
    counts = summary.get("counts") or {}
    gpus = facts.get("gpus") or {}
    out = [f"# GPU host audit: {host}", ""]
    out.append(f"**Verdict: {summary.get('verdict', 'unknown')}** ({counts.get('critical', 0)} critical, "
               f"{counts.get('warning', 0)} warning, {counts.get('info', 0)} info)")
    out.append("")
    out += table(["", ""], [
        ["Virtualization", summary.get("virtualization") or "not gathered"],
        ["GPUs", _gpu_line(summary, gpus)],
        ["GPU facts from", gpus.get("source") or "nothing (no NVML, no nvidia-smi)"],
        ["P2P (read)", summary.get("p2p")],
        ["IOMMU", _iommu_line(facts.get("iommu") or {})],
    ])

    findings = facts.get("findings") or []
    out += ["## Findings", ""]
    if not findings:
        out += ["None.", ""]
    for finding in findings:
        out += [f"### {SEVERITY_MARK.get(finding.get('severity'), finding.get('severity'))}: "
                f"{finding.get('id')}", "", str(finding.get("summary", "")), "", "Evidence:", "", "```json",
                json.dumps(finding.get("evidence"), indent=2, sort_keys=True), "```", "", "Remedy:", "",
                "```text", str(finding.get("remedy", "")), "```", ""]

    devices = gpus.get("devices") or []
    if devices:
        out += ["## GPUs", ""]
        out += table(["#", "Name", "Bus id", "CC", "Memory MiB", "BAR1 MiB", "PCIe gen cur/max",
                      "Width cur/max", "Persistence", "ECC", "MIG"], [
            [d.get("index"), d.get("name"), d.get("pci_bus_id"), d.get("compute_capability"),
             d.get("memory_total_mib"), d.get("bar1_total_mib"),
             f"{_cell(d['pcie'].get('gen_current'))}/{_cell(d['pcie'].get('gen_max'))}",
             f"{_cell(d['pcie'].get('width_current'))}/{_cell(d['pcie'].get('width_max'))}",
             d.get("persistence_mode"), d.get("ecc"), d.get("mig")] for d in devices])

    names = [f"GPU{d.get('index')}" for d in devices]
    for name, matrix in sorted((facts.get("p2p") or {}).items()):
        if matrix:
            out += [f"## P2P {name} matrix", "", *matrix_table(names, matrix)]

    topology = facts.get("topology") or {}
    if topology.get("matrix"):
        topo_names = topology.get("gpus") or names
        rows = [[_at(topo_names, i) or f"GPU{i}", *row, _at(topology.get("cpu_affinity"), i),
                 _at(topology.get("numa_affinity"), i)] for i, row in enumerate(topology["matrix"])]
        out += ["## Topology", "", *table(["", *topo_names, "CPU affinity", "NUMA"], rows)]

    pci = (facts.get("pci") or {}).get("nvidia_devices") or []
    if pci:
        out += ["## NVIDIA PCI devices", ""]
        out += table(["BDF", "Kind", "Driver", "IOMMU group", "Link", "NUMA", "Bridges above (ACS RR/CR)"], [
            [d.get("bdf"), d.get("kind"), d.get("driver"), d.get("iommu_group"), _link_text(d.get("link") or {}),
             d.get("numa_node"), _bridges_text(d.get("upstream") or [])] for d in pci])

    virt = facts.get("virtualization") or {}
    if virt.get("evidence"):
        out += ["## Virtualization evidence", ""]
        out += table(["Signal", "Value", "Says", "Weight"],
                     [[e.get("signal"), e.get("value"), e.get("says"), e.get("weight")] for e in virt["evidence"]])

    problems = facts.get("problems") or []
    if problems:
        out += ["## Could not read", "", *table(["What", "Error"], [[p.get("what"), p.get("error")]
                                                                     for p in problems])]
    return "\n".join(out).rstrip() + "\n"


def _at(values: list[Any] | None, index: int) -> Any:
    return values[index] if values and index < len(values) else None


def _link_text(link: dict[str, Any]) -> str:
    if not link.get("speed_max_gts") and not link.get("width_max"):
        return "-"
    return (f"{_cell(link.get('speed_current_gts'))}/{_cell(link.get('speed_max_gts'))} GT/s "
            f"x{_cell(link.get('width_current'))}/x{_cell(link.get('width_max'))}")


def _bridges_text(upstream: list[dict[str, Any]]) -> str:
    parts = []
    for bridge in upstream:
        acs = bridge.get("acs_ctrl")
        if acs is None:
            state = {"absent": "no ACS", "unreadable": "ACS unread"}.get(bridge.get("acs_source") or "", "?")
        else:
            state = "RR/CR on" if acs.get("RR") or acs.get("CR") else "RR/CR off"
        parts.append(f"{bridge.get('bdf')} {bridge.get('port_type') or ''} ({state})".replace("  ", " "))
    return "; ".join(parts) or "-"


def fleet_markdown(hosts: dict[str, dict[str, Any]]) -> str:
    rows = []
    for host in sorted(hosts):
        summary = hosts[host].get("summary") or {}
        worst = summary.get("worst_finding") or {}
        rows.append([host, summary.get("verdict"), _gpu_line(summary, hosts[host].get("gpus") or {}),
                     summary.get("virtualization"), summary.get("p2p"),
                     f"{worst.get('severity')}: {worst.get('id')}" if worst else "none"])
    verdicts = [(hosts[h].get("summary") or {}).get("verdict") for h in hosts]
    out = ["# GPU fleet audit", "",
           f"{len(hosts)} host(s): {verdicts.count('fit')} fit, {verdicts.count('fit, with warnings')} fit with "
           f"warnings, {verdicts.count('unfit')} unfit.", ""]
    out += table(["Host", "Verdict", "GPUs", "Virtualization", "P2P", "Worst finding"], rows)
    return "\n".join(out).rstrip() + "\n"
