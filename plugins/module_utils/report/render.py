"""Reports for people and machines, rendered from the facts of each host.

Output is deterministic (sorted keys, no clock) so that writing the same audit
twice changes nothing, and a re-run of the playbook reports changed=0.
"""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.serving_env import describe as describe_serving_env
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import findings_named, with_findings
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_capability import NOT_STATED
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.bench_shape import check_bench, finite
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.drift_md import drift_section, fleet_drift_lines
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.findings_md import findings_markdown
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.gpu_count import gpus_counted, lower_bound
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.health_md import health_tables
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.markdown import anchor, at, inline, matrix_table, table
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.markdown import cell as _cell
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.markdown import plain as _plain
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.material_md import material_section
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.nccl_transports_md import nccl_transports_section
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.p2p_md import p2p_sections
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.pictures import P2P, finding_pictures, picture_links
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.proxmox_fix_md import fix_first_lines
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.scope import verdict_scope
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.nccl_amd_topology import amd_topology_findings
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.p2p_evidence import NCCL_LOG, p2p_evidence

# Probe matrices shown in the Markdown report: the all-reduce range people compare.
SMALL_PROBE_SIZES = (4096, 16384, 65536)


def report_json(host: str, facts: dict[str, Any]) -> str:
    """The report as strict JSON: a number that is not finite (no JSON has NaN) is written as null."""
    document, _unused = finite({"host": host, **facts})
    return json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"


def bench_findings(bench: dict[str, Any]) -> list[dict[str, Any]]:
    """Findings of the benchmark phase; a step that could not run is a finding too."""
    found: list[dict[str, Any]] = []
    for step, label in (("probe", "P2P probe"), ("nccl", "NCCL benchmark")):
        result = bench.get(step)
        if not isinstance(result, dict):
            continue
        if result.get("failed"):
            found.append(make(f"bench_{step}_not_run",
                              f"The {label} could not run: {result.get('msg', 'no reason given')}",
                              {"step": step}).as_dict())
        found.extend(f for f in result.get("findings") or [] if isinstance(f, dict))
    return found


def merge_bench(facts: dict[str, Any], bench: dict[str, Any] | None) -> dict[str, Any]:
    """The host's facts with the benchmark's results and findings folded in, summary recounted.

    A bench the report cannot carry (see bench_shape) is left out; callers that want to say so check it first.
    """
    bench = check_bench(bench).bench
    if not bench:
        return facts
    # The one judgement that needs both the audit's facts (CPU, GPUs, NUMA) and the benchmark's NCCL versions.
    amd_topology = [f.as_dict() for f in amd_topology_findings(facts, bench)]
    merged = with_findings(dict(facts, bench=bench), bench_findings(bench) + amd_topology)
    named = _models_of_ranks(merged["summary"], bench)
    if named:
        merged["summary"]["gpu_models"] = named
    ceiling = (bench.get("nccl") or {}).get("communication_ceiling") or {}
    if ceiling.get("summary"):
        merged["summary"]["communication_ceiling"] = ceiling["summary"]
    return merged


def _models_of_ranks(summary: dict[str, Any], bench: dict[str, Any]) -> list[str]:
    """The GPU model the benchmark log's rank lines name (nccl-tests prints it on each), where the audit's facts named
    none: one model on as many ranks as the host has GPUs, so every GPU is that model. Ranks are CUDA devices, which
    need not be in the facts' order, so mixed models name nothing."""
    if summary.get("gpu_models"):
        return []
    devices = _mapping(_mapping(_mapping(bench.get("nccl")).get("versions"))).get("devices")
    names = {str(name).strip() for name in devices if str(name).strip()} if isinstance(devices, list) else set()
    if len(names) == 1 and len(devices) == summary.get("gpu_count"):
        return sorted(names)
    return []


def _ceiling_label(facts: dict[str, Any]) -> str:
    """The first screen's name for the ceiling's line: where the material gave the rate the user sees, the line says
    why that rate is what it is."""
    ceiling = _mapping(_mapping(_mapping(facts.get("bench")).get("nccl")).get("communication_ceiling"))
    return "Observed decode and communication" if ceiling.get("observed") else "Communication ceiling"


def _mapping(value: Any) -> dict[str, Any]:
    """A mapping read from a report of any age: anything else reads as empty."""
    return value if isinstance(value, dict) else {}


def _gpu_line(summary: dict[str, Any], gpus: dict[str, Any], pci_devices: list[dict[str, Any]] | None = None) -> str:
    count = summary.get("gpu_count") or 0
    if not count:
        return "none found"
    models_listed = summary.get("gpu_models") if isinstance(summary.get("gpu_models"), list) else []
    models = (", ".join(str(model) for model in models_listed if model)
              or f"NVIDIA GPU ({_why_unknown(gpus, pci_devices)})")
    driver = gpus.get("driver_version")
    cuda = gpus.get("cuda_driver_version")
    extra = ", ".join(x for x in (driver and f"driver {driver}", cuda and f"CUDA {cuda}") if x)
    if lower_bound(gpus):
        return f"{gpus_counted(count, gpus)}: {models}" + (f" ({extra})" if extra else "")
    return f"{count} x {models}" + (f" ({extra})" if extra else "")


def _why_unknown(gpus: dict[str, Any], pci_devices: list[dict[str, Any]] | None) -> str:
    """Why no GPU model is known, as far as the evidence goes: a bound driver that NVML and nvidia-smi could not
    read; GPUs seen on the PCI bus with no driver, or with another one (vfio-pci on a passthrough host); or,
    when nothing read shows the GPUs' PCI functions (a pasted matrix counts GPUs and names none), that the
    material does not say, which is no sign of a driver fault."""
    gpu_functions = [d for d in pci_devices or [] if isinstance(d, dict) and d.get("kind") == "gpu"]
    if any(d.get("driver") == "nvidia" for d in gpu_functions) or gpus.get("kernel_module_version"):
        return "model unknown: the nvidia driver is loaded but NVML and nvidia-smi cannot read the GPUs"
    if not gpu_functions:
        return "model not stated in the material"
    others = sorted({str(d["driver"]) for d in gpu_functions if d.get("driver")})
    if others:
        return f"model unknown: bound to {', '.join(others)}, not to the nvidia driver"
    return "model unknown: no driver"


def _p2p_label(facts: dict[str, Any]) -> str:
    """``P2P (read)``, or the capability of the matrix the verdict was judged from (rules/p2p_evidence.py)."""
    decided = p2p_evidence(facts)
    if decided is None or decided.capability == "read":
        return "P2P (read)"
    if decided.capability == NOT_STATED:
        return "P2P (capability not stated)"
    if decided.capability == NCCL_LOG:
        return "P2P (NCCL INFO log)"
    return f"P2P ({decided.capability})"


def _iommu_line(iommu: dict[str, Any]) -> str:
    if not iommu:
        return "not gathered"
    # None: the material never showed the IOMMU's directories, so nothing says it is off.
    if iommu.get("enabled") is None:
        return "not seen"
    if not iommu["enabled"]:
        return "off (no IOMMU groups)"
    return f"on, {iommu.get('mode') or 'mode unknown'} ({len(iommu.get('groups') or {})} groups)"


def host_markdown(host: str, facts: dict[str, Any]) -> str:
    summary = facts.get("summary") or {}
    counts = summary.get("counts") or {}
    gpus = facts.get("gpus") or {}
    title = f"GPU host audit: {host}"
    out = [f"# {title}", ""]
    out.append(f"**Verdict: {summary.get('verdict', 'unknown')}** ({counts.get('critical', 0)} critical, "
               f"{counts.get('warning', 0)} warning, {counts.get('info', 0)} info)")
    out.append("")
    scope = verdict_scope(facts)
    if scope:
        out += [f"Verdict scope: {scope.line}", ""]
        out += [inline(scope.two_hosts), ""] if scope.two_hosts else []
    out += [f"**Action: {summary.get('action') or 'not stated'}**: the most disruptive its findings ask "
            "(none < drain < reset_gpu < reboot < reinstall_driver < fix_hypervisor)", ""]
    out += table(["", ""], [
        ["Virtualization", summary.get("virtualization") or "not gathered"],
        ["GPUs", _gpu_line(summary, gpus, (facts.get("pci") or {}).get("nvidia_devices"))],
        ["GPU facts from", gpus.get("source") or "nothing (no NVML, no nvidia-smi)"],
        [_p2p_label(facts), summary.get("p2p")],
        ["IOMMU", _iommu_line(facts.get("iommu") or {})],
        *([[_ceiling_label(facts), summary["communication_ceiling"]]] if summary.get("communication_ceiling")
          else []),
    ])

    # The commands come before any evidence: they are what the reader came for (a VM to change on its node).
    out += fix_first_lines(facts)
    taken: dict[str, int] = {}
    anchor(title, taken)
    links = picture_links(host, facts)
    next_steps, findings = findings_markdown(facts.get("findings") or [], taken,
                                             finding_pictures(facts.get("findings") or [], links))
    out += [*next_steps, *findings]
    out += drift_section(facts.get("drift"))
    out += material_section(facts.get("material"))

    devices = gpus.get("devices") or []
    if devices:
        out += ["## GPUs", ""]
        out += table(["#", "Name", "Bus id", "CC", "Memory MiB", "BAR1 MiB", "PCIe gen cur/max",
                      "Width cur/max", "Persistence", "ECC", "MIG"], [
            [d.get("index"), d.get("name"), d.get("pci_bus_id"), d.get("compute_capability"),
             d.get("memory_total_mib"), d.get("bar1_total_mib"),
             f"{_plain(d['pcie'].get('gen_current'))}/{_plain(d['pcie'].get('gen_max'))}",
             f"{_plain(d['pcie'].get('width_current'))}/{_plain(d['pcie'].get('width_max'))}",
             d.get("persistence_mode"), d.get("ecc"), d.get("mig")] for d in devices])

    names = [f"GPU{d.get('index')}" for d in devices]
    out += p2p_sections(facts.get("p2p"), links.get(P2P))
    out += nccl_transports_section(facts.get("nccl_transports"))

    topology = facts.get("topology") or {}
    if topology.get("matrix"):
        topo_names = topology.get("gpus") or names
        rows = [[at(topo_names, i) or f"GPU{i}", *row, at(topology.get("cpu_affinity"), i),
                 at(topology.get("numa_affinity"), i)] for i, row in enumerate(topology["matrix"])]
        out += ["## Topology", "", *table(["", *topo_names, "CPU affinity", "NUMA"], rows)]

    for heading, before, headers, rows in health_tables(facts):
        out += [f"## {heading}", "", *([*before, ""] if before else []), *table(headers, rows)]

    pci = (facts.get("pci") or {}).get("nvidia_devices") or []
    if pci:
        out += ["## NVIDIA PCI devices", ""]
        out += table(["BDF", "Kind", "Driver", "IOMMU group", "Link", "NUMA", "Bridges above (ACS RR/CR)"], [
            [d.get("bdf"), d.get("kind"), d.get("driver"), d.get("iommu_group"), _link_text(d.get("link") or {}),
             d.get("numa_node"), _bridges_text(d.get("upstream") or [])] for d in pci])

    out += bench_markdown(host, facts.get("bench") or {})

    if facts.get("proxmox"):
        out += proxmox_section(facts["proxmox"])

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


def _probe_log_notes(probe: dict[str, Any]) -> list[str]:
    """What a tool's log said beside its matrices: where a cut paste ends, simpleP2P's copy figure and result."""
    out = []
    cut = probe.get("cut")
    if isinstance(cut, dict):
        out += [f"The {probe.get('tool')} paste ends inside {cut.get('matrix') or 'a matrix'} ({cut.get('rows')} of "
                f"{cut.get('of')} rows): the rows not printed are not judged; peer access is read from the lines "
                "before it.", ""]
    copy = probe.get("memcpy_peer")
    if isinstance(copy, dict) and len(copy.get("pair") or []) == 2:
        first, second = copy["pair"]
        result = {True: "; its data check passed", False: "; its data check FAILED"}.get(probe.get("passed"), "")
        out += [f"simpleP2P: cudaMemcpyPeer between GPU{first} and GPU{second}, both ways with peer access on: "
                f"{_num(copy.get('gb_per_s'))} GB/s{result}.", ""]
    return out


def bench_markdown(host: str, bench: dict[str, Any]) -> list[str]:
    out: list[str] = []
    probe = bench.get("probe") or {}
    for matrix in probe.get("matrices") or []:
        values = matrix.get("values") or []
        if values and matrix.get("size_bytes") in (None, *SMALL_PROBE_SIZES):
            names = [f"GPU{i}" for i in range(len(values))]
            out += [f"## P2P probe: {inline(matrix.get('name') or 'a matrix pasted without its title')} "
                    f"({matrix.get('unit')}, {matrix.get('path')}, "
                    f"{matrix.get('size_bytes')} B)", "", *matrix_table(names, [[_num(v) for v in row]
                                                                                for row in values])]
    out += _probe_log_notes(probe)
    nccl = bench.get("nccl") or {}
    rows = nccl.get("results") or []
    if rows:
        # The collective the results are of; logs that do not name it stay unnamed.
        collective = nccl.get("collective", "all_reduce")
        what = collective.replace("_", "-") if collective else "results of a collective the log does not name"
        out += [f"## NCCL {what} ({nccl.get('engine')}, {nccl.get('nranks')} ranks, NCCL "
                f"{nccl.get('nccl_version') or 'version unknown'})", "",
                f"![busbw and latency against message size]({host}-nccl.svg)", ""]
        out += table(["Size (B)", "Time (us)", "algbw (GB/s)", "busbw (GB/s)", "Wrong"], [
            [row.get("size_bytes"), _num(p.get("time_us")), _num(p.get("algbw_gbps")), _num(p.get("busbw_gbps")),
             p.get("wrong")] for row in rows for p in [row.get("out_of_place") or row.get("in_place") or {}]])
        if nccl.get("transports"):
            counts = (nccl["transports"] or {}).get("transports") or {}
            out += [f"Transports NCCL chose: {', '.join(f'{k} x{v}' for k, v in sorted(counts.items())) or '-'}",
                    ""]
        out += [f"Note: {note}" for note in nccl.get("notes") or []] + ([""] if nccl.get("notes") else [])
        served = describe_serving_env(nccl.get("serving_env"))
        out += [served, ""] if served else []
        if nccl.get("recommended_env") is not None:
            out += [f"Recommended NCCL environment: `{json.dumps(nccl['recommended_env'], sort_keys=True)}`", ""]
        ceiling = nccl.get("communication_ceiling") or {}
        for key in ("summary", "summary_batch"):
            if ceiling.get(key):
                out += [f"**{ceiling[key][0].upper()}{ceiling[key][1:]}.**", ""]
    return out


def _num(value: Any) -> Any:
    return round(value, 2) if isinstance(value, float) else value


def proxmox_section(proxmox: dict[str, Any]) -> list[str]:
    """The node's VMs that pass devices through: one row per VM, one per passed device."""
    vms = proxmox.get("vms") or []
    version = f"Proxmox VE {proxmox.get('version') or '(version unknown)'}"
    if proxmox.get("kernel"):
        version += f" (kernel {proxmox['kernel']})"
    out = ["## Proxmox VMs", "",
           f"{version} on node {proxmox.get('node') or '-'}: {proxmox.get('vm_count', 0)} VM(s), "
           f"{len(vms)} passing PCI devices through.", ""]
    if not vms:
        return out
    out += table(["VMID", "Name", "Machine", "BIOS", "CPU", "GPUs", "pcie=1", "Clique", "KVM hidden", "Balloon",
                  "NUMA", "Hugepages", "Memory MiB", "MMIO64 MiB window / needed"],
                 [[vm.get("vmid"), vm.get("name"), vm.get("machine_type"), vm.get("bios"), vm.get("cpu_type"),
                   _vm_gpus(vm), f"{sum(1 for e in vm['hostpci'] if e.get('pcie'))}/{len(vm['hostpci'])}",
                   _cliques(vm), _hidden(vm), "off" if vm.get("balloon") == 0 else vm.get("balloon") or "device",
                   vm.get("numa"), vm.get("hugepages"), vm.get("memory_mib"), _mmio(vm)] for vm in vms])
    out += table(["VMID", "hostpci", "Host functions", "Host driver", "IOMMU group", "Alone in group", "NUMA",
                  "QEMU id"],
                 [[vm.get("vmid"), e.get("id"), ", ".join(e.get("bdfs") or []) or e.get("mapping"),
                   ", ".join(str(d.get("driver") or "none") for d in e.get("host_devices") or []),
                   (e.get("host_device") or {}).get("iommu_group"), (e.get("host_device") or {}).get("alone_in_group"),
                   (e.get("host_device") or {}).get("numa_node"), ", ".join(e.get("qemu_ids") or [])]
                  for vm in vms for e in vm.get("hostpci") or []])
    for vm in vms:
        notes = [f"[PENDING] {k}: {v}" for k, v in (vm.get("pending") or {}).items()]
        notes += [f"[PENDING] delete: {k}" for k in vm.get("pending_delete") or []]
        notes += [f"config warning: {w}" for w in vm.get("warnings") or []]
        if notes:
            out += [f"VM {vm.get('vmid')}:", "", *[f"- {n}" for n in notes], ""]
    return out


def _vm_gpus(vm: dict[str, Any]) -> str:
    gpus = [e for e in vm.get("hostpci") or [] if (e.get("host_device") or {}).get("kind") == "gpu"]
    return f"{len(gpus)} of {len(vm.get('hostpci') or [])} hostpci"


def _cliques(vm: dict[str, Any]) -> str:
    values = list((vm.get("clique") or {}).values())
    if not values or all(v is None for v in values):
        return "none"
    counts: dict[Any, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return ", ".join(f"{'unset' if k is None else k}: {n}" for k, n in counts.items())


def _hidden(vm: dict[str, Any]) -> str:
    sources = vm.get("cpu_hidden_sources") or []
    if not sources:
        return "no"
    return "yes (" + ", ".join(s["source"] + (" pending" if s.get("pending_only") else "") for s in sources) + ")"


def _mmio(vm: dict[str, Any]) -> str:
    window = vm.get("mmio64_mb") if vm.get("mmio64_mb") is not None else vm.get("mmio64_estimated_mb")
    if window is None and not vm.get("mmio64_needed_mb"):
        return "-"
    mark = "" if vm.get("mmio64_mb") is not None else " (est.)"
    return f"{_plain(window)}{mark} / {_plain(vm.get('mmio64_needed_mb'))}"


def _link_text(link: dict[str, Any]) -> str:
    if not link.get("speed_max_gts") and not link.get("width_max"):
        return "-"
    return (f"{_plain(link.get('speed_current_gts'))}/{_plain(link.get('speed_max_gts'))} GT/s "
            f"x{_plain(link.get('width_current'))}/x{_plain(link.get('width_max'))}")


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


# Rows of hosts this run wrote no facts for (gpu_audit_report's fleet_hosts): why, in the order the header counts.
ABSENT_STATUSES = ("unreachable", "failed", "not audited")


def fleet_markdown(hosts: dict[str, dict[str, Any]], absent: dict[str, dict[str, Any]] | None = None,
                   title: str = "GPU fleet audit") -> str:
    """One row per host of the fleet, none lost.

    `hosts`: the facts of every host audited in this run. `absent`: every other host of the fleet, each as
    {status (unreachable, failed, not audited), msg, report (the facts of its last report, or None), report_date
    (that report's date, a string, or None)}; its row shows that last report, marked with its status and date.
    `title`: the page's heading (an offline analysis writes its own index with this table, not fleet.md).
    """
    absent = {host: row for host, row in (absent or {}).items() if host not in hosts}
    rows = []
    for host in sorted({*hosts, *absent}):
        if host in hosts:
            rows.append(_fleet_row(host, "this run", hosts[host]))
            continue
        row = absent[host]
        date = row.get("report_date")
        rows.append(_fleet_row(host, f"{row.get('status')}, " + (f"last report {date}" if date else "no report yet"),
                               row.get("report") or {}))
    verdicts = [(hosts[h].get("summary") or {}).get("verdict") for h in hosts]
    statuses = [row.get("status") for row in absent.values()]
    header = (f"{len(hosts) + len(absent)} host(s): {verdicts.count('fit')} fit, "
              f"{verdicts.count('fit, with warnings')} fit with warnings, {verdicts.count('unfit')} unfit"
              + (f", {verdicts.count('not judged')} not judged" if "not judged" in verdicts else ""))
    others = [f"{statuses.count(s)} {s}" for s in ABSENT_STATUSES if s in statuses]
    if others:
        header += f"; {', '.join(others)} in this run (rows from their last report)"
    out = [f"# {title}", "", header + ".", ""]
    out += table(["Host", "Audit", "Verdict", "Judged as", "GPUs", "Virtualization", "P2P", "Worst finding",
                  "Action"], rows)
    out += ["Judged as: what each verdict judges. A hypervisor's covers its passthrough setup and VM configs, not "
            "serving (its guests are judged in their own audits); \"TP over N GPUs\" judges every GPU pair of the "
            "tensor-parallel group, which a model on one GPU does not use. Each host's report says more under its "
            "verdict.", ""]
    out += fleet_drift_lines({**{h: row.get("report") or {} for h, row in absent.items()}, **hosts})
    reasons = [f"- {host}: {absent[host].get('status')}: {_cell(absent[host]['msg'])}"
               for host in sorted(absent) if absent[host].get("msg")]
    if reasons:
        out += ["Not audited in this run:", "", *reasons, ""]
    return "\n".join(out).rstrip() + "\n"


def _fleet_row(host: str, audit: str, facts: dict[str, Any]) -> list[Any]:
    """A host's row; empty facts (no report yet) leave every cell after the audit column empty."""
    if not facts:
        return [host, audit, None, None, None, None, None, None, None]
    # A last report may be of any age or edited by hand: what is not in the shape written today shows as "-".
    summary = _mapping(facts.get("summary"))
    worst = summary.get("worst_finding")
    worst_text = (f"{worst.get('severity')}: {worst.get('id')}" if isinstance(worst, dict) and worst
                  else None if worst else "none")
    scope = verdict_scope(facts)
    return [host, audit, summary.get("verdict"), scope.short if scope else None,
            _gpu_line(summary, _mapping(facts.get("gpus"))),
            summary.get("virtualization"), summary.get("p2p"), worst_text, summary.get("action")]


def verdict_line(host: str, facts: dict[str, Any], link: dict[str, Any] | None, report: str,
                 not_written: bool = False) -> str:
    """The one line the audit prints per host: verdict, what it runs on, every critical and warning finding
    (findings/finding.py findings_named), the report (``not_written``: check mode left that file absent or out
    of date, and the line says so)."""
    summary = facts.get("summary") or {}
    counted = gpus_counted(summary.get("gpu_count"), facts.get("gpus"))
    line = (f"{host}: {summary.get('verdict')} ({summary.get('virtualization')}; {counted}; "
            f"P2P {summary.get('p2p')}) - {findings_named(facts)}.")
    if link:
        line += f" Runs as VM {link.get('vmid')} on {link.get('proxmox_host')}, which holds the fix (see the report)."
    return f"{line} Check mode: would write {report}" if not_written else f"{line} Report: {report}"
