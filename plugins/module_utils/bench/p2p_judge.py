"""What the P2P probe's measurements mean: matrices, proof, findings.

Pure functions over the p2p harness's JSON events or the parsed output of
p2pBandwidthLatencyTest / nvbandwidth (parsers/p2p_bandwidth). Matrices come in its shape: rows are
the source GPU, columns the destination, ``None`` where nothing was measured; latencies are judged
in us (nvbandwidth's ns through ``values_us``), and a matrix whose unit the output did not say is
not judged.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.units import human_bytes
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding, worst_first
from ansible_collections.gpuhost.gpu.plugins.module_utils.gpu_pairs import pair_count_text
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.harness_events import harness_events
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_bandwidth import latency_us, off_diagonal

# Small-copy latency between two GPUs, the host-memory fallback's clearest sign.
# p2pBandwidthLatencyTest (one 16-byte copy, launch excluded): with P2P 0.36-0.52 us on PCIe Gen5
# (voipmonitor/rtx6kpro, hardware/pcie-bandwidth.md) and 2.2-2.3 us over NVLink between A100 PCIe
# (tests/fixtures/p2p); without P2P 11-22 us (the same fixtures; 13.7 us at 12 KB in the incident
# VM). The probe's own figure at 16 KiB adds the transfer itself, ~0.3-0.7 us at 25-56 GB/s.
# 5 us leaves a factor of 2 over the slowest P2P figure and of 2 under the fastest fallback.
DEFAULT_MAX_SMALL_LATENCY_US = 5.0
REFERENCE_BYTES = 16 * 1024
# Peer copies within 10% of the host route: the "peer" path goes through host memory too.
NO_GAIN_RATIO = 0.9


class ProbeInputError(ValueError):
    """Harness output that cannot be read, with what was expected."""


def empty_matrix(count: int) -> list[list[Any]]:
    return [[None] * count for _unused in range(count)]


def is_harness_output(text: str) -> bool:
    """Whether a log is the harness's own JSON lines (it always ends with a summary event)."""
    return any(event.get("event") == "summary" and "status" in event for event in harness_events(text))


def parse_harness_output(text: str) -> dict[str, Any]:
    """The harness's JSON lines as {start, proofs, timings, summary}."""
    start: dict[str, Any] = {}
    proofs: list[dict[str, Any]] = []
    timings: list[dict[str, Any]] = []
    summary: dict[str, Any] | None = None
    for event in harness_events(text):
        kind = event.get("event")
        if kind == "start":
            start = event
        elif kind == "proof":
            proofs.append(event)
        elif kind == "timing":
            timings.append(event)
        elif kind == "summary":
            summary = event
    if summary is None:
        raise ProbeInputError("the P2P harness printed no summary line; its output was:\n" + text[-2000:])
    return {"start": start, "proofs": proofs, "timings": timings, "summary": summary}


def harness_result(run: dict[str, Any]) -> dict[str, Any]:
    """Matrices and proof from a harness run, in the shape the module returns."""
    start = run["start"]
    count = len(start.get("devices") or [])
    proof = empty_matrix(count)
    for event in run["proofs"]:
        i, j = event["src"], event["dst"]
        if i < count and j < count:
            proof[i][j] = {k: event.get(k) for k in ("ce_wrong", "sm_wrong", "zeros_at_destination", "elements",
                                                     "peer_access")}
    sizes = sorted({t["size_bytes"] for t in run["timings"]})
    matrices = []
    for path, metric, kind, unit in (("peer", "gpu_us", "latency", "us"), ("peer", "time_us", "latency", "us"),
                                     ("host", "time_us", "latency", "us"), ("peer", "gbps", "bandwidth", "GB/s"),
                                     ("host", "gbps", "bandwidth", "GB/s")):
        for size in sizes:
            values = empty_matrix(count)
            for t in run["timings"]:
                if t["size_bytes"] == size and t["src"] < count and t["dst"] < count:
                    values[t["src"]][t["dst"]] = (t.get(path) or {}).get(metric)
            name = {"gpu_us": "copy time on the GPU (events)", "time_us": "copy time, wall clock",
                    "gbps": "copy bandwidth"}[metric]
            matrices.append({"name": f"{path} {name}, {human_bytes(size)}", "kind": kind, "unit": unit,
                             "path": path, "metric": metric, "bidirectional": False, "measured_by": "gpu",
                             "size_bytes": size, "values": values})
    return {
        "tool": "torch",
        "devices": start.get("devices") or [],
        "access": start.get("access") or empty_matrix(count),
        "proof": proof,
        "matrices": matrices,
        "versions": {k: start.get(k) for k in ("torch_version", "cuda_version", "python") if start.get(k)},
    }


def _pairs_text(pairs: list[tuple[int, int]]) -> str:
    return ", ".join(f"GPU{i}->GPU{j}" for i, j in pairs)


def small_latency_matrix(result: dict[str, Any]) -> dict[str, Any] | None:
    """The matrix that says best what one small copy between two GPUs costs."""
    matrices = result.get("matrices") or []
    if result.get("tool") == "torch":
        peer = [m for m in matrices if m.get("path") == "peer" and m.get("metric") == "gpu_us"]
        if not peer:
            return None
        return min(peer, key=lambda m: abs((m["size_bytes"] or 0) - REFERENCE_BYTES))
    for wanted in ("p2p_enabled", "peer"):
        # A latency in a unit the output did not say (a matrix pasted without its title) judges nothing.
        found = [m for m in matrices if m.get("kind") == "latency" and m.get("path") == wanted
                 and m.get("measured_by") == "gpu" and latency_us(m) is not None]
        if found:
            return found[0]
    return None


def peer_bandwidth_matrix(result: dict[str, Any]) -> dict[str, Any] | None:
    """The matrix that says best what a large one-way copy between two GPUs reaches, in GB/s: the probe's peer
    copy at its largest size; a tool's unidirectional P2P-enabled (p2pBandwidthLatencyTest) or peer
    (nvbandwidth) bandwidth matrix. None when the result holds none (a matrix of a unit not said judges nothing)."""
    matrices = result.get("matrices") or []
    if result.get("tool") == "torch":
        peer = [m for m in matrices if m.get("path") == "peer" and m.get("metric") == "gbps"]
        return max(peer, key=lambda m: m.get("size_bytes") or 0) if peer else None
    for wanted in ("p2p_enabled", "peer"):
        found = [m for m in matrices if m.get("kind") == "bandwidth" and m.get("path") == wanted
                 and m.get("unit") == "GB/s" and not m.get("bidirectional")]
        if found:
            return found[0]
    return None


def _below_floor(result: dict[str, Any], floor_gbps: float, manifest_class: str | None) -> list[Finding]:
    found = peer_bandwidth_matrix(result)
    if found is None:
        return []
    slow = [(i, j, v) for i, j, v in off_diagonal(found.get("values") or []) if v < floor_gbps]
    if not slow:
        return []
    worst = min(slow, key=lambda cell: cell[2])
    return [make(
        "manifest_peer_bandwidth_below",
        f"{len(slow)} GPU pair(s) copy below the {floor_gbps:g} GB/s peer bandwidth the manifest of class "
        f"{manifest_class or '(unnamed)'} asks for: down to {worst[2]:g} GB/s (GPU{worst[0]}->GPU{worst[1]}, "
        f"{found.get('name')}).",
        {"manifest_class": manifest_class, "floor_gbps": floor_gbps, "matrix": found.get("name"),
         "slow_pairs": {f"GPU{i}->GPU{j}": v for i, j, v in slow[:28]}},
        manifest_class=manifest_class or "(unnamed)", floor=f"{floor_gbps:g}")]


def findings(result: dict[str, Any], max_small_latency_us: float = DEFAULT_MAX_SMALL_LATENCY_US,
             status: str = "ok", hung_at: dict[str, Any] | None = None,
             timeout_s: float | None = None, peer_min_gbps: float | None = None,
             manifest_class: str | None = None) -> list[dict[str, Any]]:
    """Every finding of one probe result; ``peer_min_gbps`` (a class manifest's bandwidth.peer_min_gbps) adds
    the pairs below that floor (manifest_peer_bandwidth_below)."""
    out: list[Finding] = []
    if peer_min_gbps is not None:
        out.extend(_below_floor(result, peer_min_gbps, manifest_class))
    access = result.get("access") or []

    wrong = []
    for i, row in enumerate(result.get("proof") or []):
        for j, cell in enumerate(row):
            if isinstance(cell, dict) and ((cell.get("ce_wrong") or 0) + (cell.get("sm_wrong") or 0)) > 0:
                wrong.append({"src": i, "dst": j, **cell})
    if wrong:
        mirror = [w for w in wrong if w.get("peer_access") and w.get("zeros_at_destination")]
        out.append(make(
            "p2p_write_not_arriving",
            f"Data copied between {len(wrong)} GPU pair(s) did not arrive intact"
            + (": the destination reads zeros where the peer window was granted, the private-mirror failure "
               "(NVIDIA/nccl#2335)." if mirror else "."),
            {"pairs": wrong[:16]}))

    if status == "timeout":
        at = hung_at or {}
        where = (f"GPU{at.get('src')}->GPU{at.get('dst')} ({at.get('phase')}"
                 + (f", {human_bytes(at['size_bytes'])}" if at.get("size_bytes") else "") + ")"
                 if at.get("src") is not None else "at start-up")
        out.append(make(
            "p2p_probe_timeout",
            f"The P2P probe hung {where} and was stopped after {timeout_s:g} s.",
            {"hung_at": hung_at, "timeout_s": timeout_s}))

    denied = [(i, j) for i, row in enumerate(access) for j, v in enumerate(row) if v is False]
    latency = small_latency_matrix(result)
    if denied:
        evidence: dict[str, Any] = {"pairs": _pairs_text(denied[:28]), "gpus": len(access)}
        if latency:
            evidence["latency_us"] = {f"GPU{i}->GPU{j}": v for i, j, v in off_diagonal(latency_us(latency) or [])
                                      if (i, j) in set(denied)}
            evidence["latency_matrix"] = latency["name"]
        out.append(make(
            "p2p_peer_access_unavailable",
            f"{pair_count_text(denied, len(access))} cannot access each other's memory: "
            "copies between them go through host memory.",
            evidence))

    if latency:
        slow = [(i, j, v) for i, j, v in off_diagonal(latency_us(latency) or []) if v > max_small_latency_us]
        if slow:
            granted = [(i, j, v) for i, j, v in slow
                       if i < len(access) and j < len(access[i]) and access[i][j]]
            worst = max(slow, key=lambda cell: cell[2])
            size = latency.get("size_bytes")
            out.append(make(
                "p2p_small_copy_latency",
                f"A small copy between GPUs takes up to {worst[2]:g} us (GPU{worst[0]}->GPU{worst[1]}"
                f"{', ' + human_bytes(size) if size else ''}), above the {max_small_latency_us:g} us that peer-to-peer "
                "gives: this is the host-memory path, and every all-reduce of a decode step pays it"
                + (f"; {len(granted)} of these pairs were granted peer access." if granted else "."),
                {"matrix": latency["name"], "limit_us": max_small_latency_us, "slow_pairs": len(slow),
                 "worst": {"pair": f"GPU{worst[0]}->GPU{worst[1]}", "us": worst[2]},
                 "granted_but_slow": _pairs_text([(i, j) for i, j, _unused in granted][:16])}))

    if result.get("tool") == "torch":
        out.extend(_no_gain(result, access))

    return [f.as_dict() for f in worst_first(out)]


def _no_gain(result: dict[str, Any], access: list[list[Any]]) -> list[Finding]:
    matrices = result.get("matrices") or []

    def at(path: str) -> dict[str, Any] | None:
        found = [m for m in matrices if m.get("path") == path and m.get("metric") == "time_us"]
        return min(found, key=lambda m: abs((m["size_bytes"] or 0) - REFERENCE_BYTES)) if found else None

    peer, host = at("peer"), at("host")
    if not peer or not host:
        return []
    same = []
    for i, j, value in off_diagonal(peer["values"]):
        other = host["values"][i][j]
        if access[i][j] and other and value >= NO_GAIN_RATIO * other:
            same.append({"pair": f"GPU{i}->GPU{j}", "peer_us": value, "host_us": other})
    if not same:
        return []
    return [make(
        "p2p_no_gain",
        f"On {len(same)} GPU pair(s) granted peer access, a {human_bytes(peer['size_bytes'])} copy is no faster "
        "than through host memory: the peer path is not doing what it should.",
        {"pairs": same[:16]})]
