"""A host's report as node_exporter textfile metrics: what Prometheus alerts on between audits.

One pure function, ``textfile(report, timestamp)``, from the report as ``report_json`` writes it (facts, the
benchmark folded in, ``drift`` and ``proof`` when the report has them) to the text exposition format
(prom_text.py). Names follow Prometheus' conventions: the ``gpuhost_`` prefix, base units (seconds, bytes,
transfers per second), ``_info`` series for versions. No series has a ``host`` or ``instance`` label (Prometheus
adds ``instance``), and every label takes a bounded set of values: a GPU index or bus id, a P2P capability, a
severity, a finding id of the catalog, a drift item. A value the report does not hold is absent, never
guessed: a sample left out, or an empty label value (which Prometheus reads as no label).

The series (``SERIES`` gives each its help text, written into the file):

- ``gpuhost_verdict{verdict}``: 1 for the host's verdict, 0 for each other verdict of findings/finding.VERDICTS.
- ``gpuhost_action{action}``: 1 for the host's action (summary.action), 0 for each other of
  findings/actions.ACTIONS; absent in a report older than actions.
- ``gpuhost_findings{severity}``: how many findings of each severity; ``gpuhost_finding{id,severity}`` 1 per
  finding id that fired (an id this version's catalog does not know, from a report edited by hand, is counted
  but gets no series of its own, which keeps the label's values bounded).
- ``gpuhost_gpus``: the GPUs seen; ``gpuhost_tensor_parallel_size``: see ``tensor_parallel_size``.
- ``gpuhost_p2p_status{gpu_a,gpu_b,capability}``: per GPU pair (gpu_a < gpu_b, NVML indexes) and NVML P2P
  capability, 1 when the driver reports it OK both ways, 0 when either way says it is not supported; absent when
  neither tells (unknown, not read).
- ``gpuhost_p2p_proven``: 1 when the P2P probe saw data cross every pair intact with peer access granted, 0 when
  a pair failed (no peer access, wrong data) or the probe hung; absent without a probe result.
- ``gpuhost_allreduce_latency_seconds{source}`` and ``gpuhost_allreduce_message_bytes``: the all-reduce at the
  message size one decode step of the benchmarked model sends (batch 1): ``measured`` when the NCCL benchmark
  measured that size (or sizes on both sides of it), ``predicted_ceiling`` when it was estimated from the
  GPU-to-GPU copy latency.
- ``gpuhost_communication_ceiling_tokens_per_second{basis}``: the single-stream decode rate that all-reduce
  alone allows the benchmarked model (the communication ceiling every report shows), ``basis`` as ``source``
  above.
- ``gpuhost_gpu_pcie_link_width``, ``_max_width``, ``gpuhost_gpu_pcie_link_speed_transfers_per_second``,
  ``gpuhost_gpu_pcie_link_max_speed_transfers_per_second`` per GPU ``{gpu,bus_id}``, from sysfs (NVML's PCIe
  generation where sysfs was not read).
- ``gpuhost_drift{item}`` (1 for each item of the last drift, 0 for the others) and ``gpuhost_proof_stale``:
  only when the report has a ``drift`` section.
- ``gpuhost_last_audit_timestamp_seconds``: ``timestamp``, the time of the audit that wrote the file.
- ``gpuhost_last_proof_timestamp_seconds``: ``proof.measured_at``.
- ``gpuhost_info{driver_version,cuda_driver_version,kernel,virtualization}`` and
  ``gpuhost_gpu_info{gpu,bus_id,name,vbios}``: 1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.p2p_proof import read_probe
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.actions import ACTIONS
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import CATALOG
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import SEVERITIES, VERDICTS
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.prom_text import Family, render
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.drift_basis import ITEMS as DRIFT_ITEMS
from ansible_collections.gpuhost.gpu.plugins.module_utils.values import as_dict, as_list

# The series whose sample moves on every audit: a writer that sees only it change has nothing new to say.
HEARTBEAT = "gpuhost_last_audit_timestamp_seconds"
# NVML's P2P capabilities, as the audit's p2p matrices name them.
CAPABILITIES = ("read", "write", "nvlink", "atomics", "pci")
# NVML's P2P status labels that say a capability is not there (chipset, GPU, topology not supported, disabled by
# registry key, not supported); "U" (unknown) and codes this version does not know say nothing.
P2P_NOT_OK = {"NS", "CNS", "GNS", "TNS", "DR"}
PROOF_STALE_ID = "p2p_proof_stale"
# GT/s of each PCIe generation, for GPUs whose link is known only from NVML.
GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0, 7: 128.0}

SERIES = {
    "gpuhost_verdict": "The audit's verdict: 1 for the host's verdict, 0 for the others.",
    "gpuhost_action": "What the host needs (none, drain, reset_gpu, reboot, reinstall_driver, fix_hypervisor): 1 "
                      "for its action, 0 for the others.",
    "gpuhost_findings": "Findings of the last audit, by severity.",
    "gpuhost_finding": "1 for each finding id the last audit raised.",
    "gpuhost_gpus": "GPUs the audit saw (those the driver lists, else those on the PCI bus).",
    "gpuhost_tensor_parallel_size": "Tensor-parallel size the host is judged for (1 when there is none).",
    "gpuhost_p2p_status": "NVML P2P status per GPU pair and capability: 1 OK both ways, 0 not supported.",
    "gpuhost_p2p_proven": "1 when the P2P probe saw data cross every GPU pair intact over peer access, 0 when not.",
    "gpuhost_allreduce_latency_seconds": "All-reduce time at the message size of one decode step (batch 1).",
    "gpuhost_allreduce_message_bytes": "All-reduce message size of one decode step of the benchmarked model.",
    "gpuhost_communication_ceiling_tokens_per_second": "Single-stream decode rate that all-reduce alone allows.",
    "gpuhost_gpu_pcie_link_width": "PCIe link width of the GPU now, in lanes.",
    "gpuhost_gpu_pcie_link_max_width": "Widest PCIe link the GPU and its slot support, in lanes.",
    "gpuhost_gpu_pcie_link_speed_transfers_per_second": "PCIe link speed of the GPU now, per lane.",
    "gpuhost_gpu_pcie_link_max_speed_transfers_per_second": "Fastest PCIe link speed the GPU supports, per lane.",
    "gpuhost_drift": "1 for each item the last audit found changed since the previous report, 0 for the others.",
    "gpuhost_proof_stale": "1 when a change since the P2P proof or benchmark can invalidate it.",
    "gpuhost_last_audit_timestamp_seconds": "Time of the audit that wrote this file, seconds since the epoch.",
    "gpuhost_last_proof_timestamp_seconds": "Time the P2P proof or benchmark in the report was measured.",
    "gpuhost_info": "Versions of the host's GPU stack, as labels.",
    "gpuhost_gpu_info": "Each GPU's identity, as labels.",
}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | int | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text(value: Any) -> str:
    """A label value: the string, or empty (no label) when the report does not say."""
    return value if isinstance(value, str) else str(value) if isinstance(value, (int, float)) else ""


def textfile(report: dict[str, Any], timestamp: float | int, warn: Callable[[str], None] | None = None) -> str:
    """The host's metrics as a node_exporter textfile; ``timestamp`` is the audit's time (epoch seconds).

    ``warn`` hears of what the report held that the metrics leave out (a GPU listed twice)."""
    families = {name: Family(name, text) for name, text in SERIES.items()}
    _verdict(families, report)
    _findings(families, report)
    summary = as_dict(report.get("summary"))
    gpu_count = _int(summary.get("gpu_count"))
    # Material that held no GPU list cannot tell how many GPUs there are: 0 would be a guess.
    if not ("gpus" in as_list(report.get("not_seen")) and not gpu_count):
        families["gpuhost_gpus"].add(gpu_count)
    families["gpuhost_tensor_parallel_size"].add(tensor_parallel_size(report))
    _p2p(families["gpuhost_p2p_status"], as_dict(report.get("p2p")))
    families["gpuhost_p2p_proven"].add(p2p_proven(as_dict(report.get("bench")).get("probe")))
    _allreduce(families, as_dict(as_dict(as_dict(report.get("bench")).get("nccl")).get("communication_ceiling")))
    _links(families, report, warn or (lambda _message: None))
    _drift(families, report)
    families[HEARTBEAT].add(_number(timestamp))
    families["gpuhost_last_proof_timestamp_seconds"].add(_int(as_dict(report.get("proof")).get("measured_at")))
    gpus = as_dict(report.get("gpus"))
    families["gpuhost_info"].add(1, {
        "driver_version": _text(gpus.get("driver_version")),
        "cuda_driver_version": _text(gpus.get("cuda_driver_version")),
        "kernel": _text(kernel_release(report)),
        "virtualization": _text(summary.get("virtualization")),
    })
    return render(families.values())


def _verdict(families: dict[str, Family], report: dict[str, Any]) -> None:
    verdict = as_dict(report.get("summary")).get("verdict")
    if verdict in VERDICTS:
        for name in VERDICTS:
            families["gpuhost_verdict"].add(int(name == verdict), {"verdict": name})
    action = as_dict(report.get("summary")).get("action")
    if action in ACTIONS:
        for name in ACTIONS:
            families["gpuhost_action"].add(int(name == action), {"action": name})


def _findings(families: dict[str, Family], report: dict[str, Any]) -> None:
    findings = report.get("findings")
    if not isinstance(findings, list):
        return
    findings = [f for f in findings if isinstance(f, dict)]
    for severity in SEVERITIES:
        families["gpuhost_findings"].add(sum(1 for f in findings if f.get("severity") == severity),
                                         {"severity": severity})
    fired = {(f.get("id"), f.get("severity")) for f in findings
             if f.get("id") in CATALOG and f.get("severity") in SEVERITIES}
    for finding_id, severity in sorted(fired):
        families["gpuhost_finding"].add(1, {"id": finding_id, "severity": severity})


def tensor_parallel_size(report: dict[str, Any]) -> int | None:
    """The tensor-parallel size the host is judged for.

    The model's, when the benchmark priced one (its communication ceiling); else the group the audit judged the
    P2P and NUMA rules on, as a finding about that group names it; else every GPU the driver lists (the audit's
    default group), 1 with one GPU or none. None when the audit was given a group that no finding names
    (a report does not record gpu_audit_tensor_parallel_gpus), or when the GPU list was not seen.
    """
    nccl = as_dict(as_dict(report.get("bench")).get("nccl"))
    priced = as_dict(as_dict(nccl.get("communication_ceiling")).get("batch_1"))
    size = _int(priced.get("tensor_parallel_size"))
    if size and size > 0:
        return size
    for finding in as_list(report.get("findings")):
        group = as_dict(as_dict(finding).get("evidence")).get("group") \
            if as_dict(finding).get("id") == "p2p_not_supported" else None
        if isinstance(group, list) and group:
            return len(group)
    if "gpus" in as_list(report.get("not_seen")):
        return None
    asked = [f for f in as_list(report.get("findings")) if as_dict(f).get("id") == "tensor_parallel_gpus_not_on_host"]
    if asked:
        judged = as_dict(as_dict(asked[0]).get("evidence")).get("judged")
        return max(len(judged), 1) if isinstance(judged, list) else None
    devices = as_dict(report.get("gpus")).get("devices")
    return max(len(devices), 1) if isinstance(devices, list) else None


def _p2p(family: Family, p2p: dict[str, Any]) -> None:
    for capability in CAPABILITIES:
        matrix = as_list(p2p.get(capability))
        for a in range(len(matrix)):
            for b in range(a + 1, len(matrix)):
                family.add(pair_status(matrix, a, b), {"gpu_a": a, "gpu_b": b, "capability": capability})


def pair_status(matrix: list[Any], a: int, b: int) -> int | None:
    """1 when both ways are OK, 0 when either way is a status that says not supported, None when unknown."""
    cells = []
    for i, j in ((a, b), (b, a)):
        row = as_list(matrix[i]) if i < len(matrix) else []
        cells.append(row[j] if j < len(row) else None)
    if any(cell in P2P_NOT_OK for cell in cells):
        return 0
    return 1 if cells == ["OK", "OK"] else None


def p2p_proven(probe: Any) -> int | None:
    """1: every GPU pair the probe tried got peer access and its data intact; 0: a pair did not, or the probe hung;
    None: no probe result (not run, or it could not run)."""
    probe = as_dict(probe)
    if not probe or probe.get("failed"):
        return None
    verdicts = read_probe(probe)
    hung = probe.get("hung_at") or any(as_dict(f).get("id") == "p2p_probe_timeout"
                                       for f in as_list(probe.get("findings")))
    if hung:
        return 0
    if not verdicts:
        return None
    return int(all(verdicts.values()))


def _allreduce(families: dict[str, Family], ceiling: dict[str, Any]) -> None:
    single = as_dict(ceiling.get("batch_1"))
    size = _int(single.get("allreduce_bytes"))
    latency = _number(single.get("allreduce_latency_us"))
    # No all-reduce at TP1 (size 0); a size outside the measured sweep was clamped or extrapolated, not measured.
    if not size or latency is None or latency <= 0:
        return
    source = {("measured_all_reduce", "measured"): "measured", ("measured_all_reduce", "interpolated"): "measured",
              ("estimated_from_pair_latency", "estimated"): "predicted_ceiling"}.get(
        (single.get("basis"), single.get("latency_basis")))
    if source is None:
        return
    families["gpuhost_allreduce_latency_seconds"].add(latency / 1e6, {"source": source})
    families["gpuhost_allreduce_message_bytes"].add(size)
    # The figure every report shows (bench/host_ceiling.py), its basis as the reports name it.
    rate = _number(single.get("max_tokens_per_s_single_stream"))
    if rate and rate > 0:
        families["gpuhost_communication_ceiling_tokens_per_second"].add(rate, {"basis": source})


def _links(families: dict[str, Family], report: dict[str, Any], warn: Callable[[str], None]) -> None:
    devices = [d for d in as_list(as_dict(report.get("gpus")).get("devices")) if isinstance(d, dict)]
    pci = {str(d.get("bdf")).lower(): d for d in as_list(as_dict(report.get("pci")).get("nvidia_devices"))
           if isinstance(d, dict) and d.get("kind") == "gpu"}
    listed = set()
    exported: set[tuple[str, str]] = set()
    for device in devices:
        bus_id = _text(device.get("pci_bus_id")).lower()
        labels = {"gpu": _text(_int(device.get("index"))), "bus_id": bus_id}
        # One PCI address is one GPU: a second row for it (a GPU list pasted twice in the material, a
        # capture edited by hand) is the same GPU again, not another one. Its first row is exported, and only once,
        # since a series may not have two samples; the rows without a bus id are told apart by their index.
        key = (bus_id, "") if bus_id else ("", labels["gpu"])
        if key in exported:
            warn(f"the GPU at PCI address {bus_id or '(not known)'} (index {labels['gpu'] or 'not known'}) is "
                 "listed twice in the report's GPU list: its metrics are those of its first row")
            continue
        exported.add(key)
        listed.add(bus_id)
        link = as_dict(pci.get(bus_id, {}).get("link")) or _nvml_link(as_dict(device.get("pcie")))
        _link(families, link, labels)
        families["gpuhost_gpu_info"].add(1, {**labels, "name": _text(device.get("name")),
                                             "vbios": _text(device.get("vbios_version"))})
    # GPUs on the bus the driver does not list (bound to vfio-pci for guests, or lost): no index to give them.
    for bdf, device in sorted(pci.items()):
        if bdf not in listed:
            _link(families, as_dict(device.get("link")), {"gpu": "", "bus_id": bdf})


def _nvml_link(pcie: dict[str, Any]) -> dict[str, Any]:
    return {"width_current": pcie.get("width_current"), "width_max": pcie.get("width_max"),
            "speed_current_gts": GEN_GTS.get(_int(pcie.get("gen_current"))),
            "speed_max_gts": GEN_GTS.get(_int(pcie.get("gen_max")))}


def _link(families: dict[str, Family], link: dict[str, Any], labels: dict[str, str]) -> None:
    def positive(value: Any) -> float | int | None:
        number = _number(value)
        return number if number is not None and number > 0 else None

    families["gpuhost_gpu_pcie_link_width"].add(positive(link.get("width_current")), labels)
    families["gpuhost_gpu_pcie_link_max_width"].add(positive(link.get("width_max")), labels)
    for key, name in (("speed_current_gts", "gpuhost_gpu_pcie_link_speed_transfers_per_second"),
                      ("speed_max_gts", "gpuhost_gpu_pcie_link_max_speed_transfers_per_second")):
        gts = positive(link.get(key))
        families[name].add(round(gts * 1e9) if gts is not None else None, labels)


def _drift(families: dict[str, Family], report: dict[str, Any]) -> None:
    """Only a report that has a drift section can say what did not change."""
    if not isinstance(report.get("drift"), dict):
        return
    changed = {as_dict(c).get("item") for c in as_list(report["drift"].get("changes"))}
    for item in DRIFT_ITEMS:
        families["gpuhost_drift"].add(int(item in changed), {"item": item})
    stale = any(as_dict(f).get("id") == PROOF_STALE_ID for f in as_list(report.get("findings")))
    families["gpuhost_proof_stale"].add(int(stale))


def kernel_release(report: dict[str, Any]) -> str | None:
    """The running kernel's release (kernel.release); in a report older than it, a Proxmox VE node's version
    report names it."""
    release = as_dict(report.get("kernel")).get("release")
    return release if isinstance(release, str) else as_dict(report.get("proxmox")).get("kernel")
