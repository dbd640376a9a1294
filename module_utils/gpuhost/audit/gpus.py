"""GPU facts, P2P matrices and the topology matrix: from NVML when it can be
read, otherwise from nvidia-smi's text, in the same shape either way."""

from __future__ import annotations

from typing import Any

from ansible.module_utils.gpuhost.audit import nvml
from ansible.module_utils.gpuhost.audit.source import Source
from ansible.module_utils.gpuhost.parsers import nvidia_smi_list, nvidia_smi_query, nvidia_smi_topo
from ansible.module_utils.gpuhost.parsers.nvidia_smi_common import NvidiaSmiParseError
from ansible.module_utils.gpuhost.parsers.nvidia_smi_failure import nvidia_smi_failure

# nvidia-smi topo -p2p letters for each matrix the audit keeps.
P2P_LETTERS = {"read": "r", "write": "w", "nvlink": "n", "atomics": "a"}


def gather_gpus(source: Source, pci_facts: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(gpus, p2p, topology) facts."""
    snapshot = source.nvml()
    problem = None if snapshot.get("error") else nvml.shape_problem(snapshot)
    if problem:
        source.note_problem("NVML readings", problem)
        snapshot = {"error": f"unusable NVML readings: {problem}"}
    if not snapshot.get("error"):
        gpus, p2p, topology = _from_nvml(snapshot, pci_facts)
        count = _nvidia_smi_count(source)
        if count is not None:
            gpus["nvidia_smi_count"] = count
        return gpus, p2p, topology
    gpus, p2p, topology = _from_nvidia_smi(source)
    gpus["nvml_error"] = snapshot.get("error")
    return gpus, p2p, topology


def _from_nvml(snapshot: dict[str, Any], pci_facts: dict[str, Any]) -> tuple[dict, dict, dict]:
    devices = [nvml.device_facts(raw) for raw in snapshot.get("devices") or []]
    gpus = {
        "source": "nvml",
        "driver_version": snapshot.get("driver_version"),
        "cuda_driver_version": nvml.cuda_version_text(snapshot.get("cuda_driver_version")),
        "nvml_version": snapshot.get("nvml_version"),
        "count": len(devices),
        "devices": devices,
    }
    by_bus = {d["bdf"]: d for d in pci_facts.get("nvidia_devices") or []}
    affinity = [by_bus.get(d.get("pci_bus_id") or "", {}) for d in devices]
    topology = {
        "source": "nvml",
        "gpus": [f"GPU{d['index']}" for d in devices],
        "matrix": nvml.topology_matrix(snapshot),
        "cpu_affinity": [a.get("local_cpulist") for a in affinity],
        "numa_affinity": [a.get("numa_node") for a in affinity],
    }
    return gpus, nvml.p2p_matrices(snapshot), topology


def _nvidia_smi_count(source: Source) -> int | None:
    result = source.run(["nvidia-smi", "-L"])
    if not result.ok:
        return None
    try:
        return len(nvidia_smi_list.parse_list_gpus(result.stdout))
    except NvidiaSmiParseError as exc:
        source.note_problem("nvidia-smi -L", str(exc))
        return None


def _smi(source: Source, argv: list[str]) -> tuple[str | None, str | None]:
    """(stdout, error) of one nvidia-smi call."""
    result = source.run(argv)
    if result.rc is None:
        return None, "nvidia-smi is not installed"
    failure = nvidia_smi_failure(result.rc, result.stdout, result.stderr)
    if failure or not result.ok:
        return None, failure or f"exit {result.rc}: {(result.stderr or result.stdout).strip()[:200]}"
    return result.stdout, None


def _from_nvidia_smi(source: Source) -> tuple[dict, dict, dict]:
    fields = list(nvidia_smi_query.QUERY_GPU_FIELDS)
    argv = ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
    text, error = _smi(source, argv)
    gpus: dict[str, Any] = {"source": None, "count": 0, "devices": []}
    if error:
        gpus["nvidia_smi_error"] = error
        return gpus, {}, {}
    try:
        rows = nvidia_smi_query.parse_query_gpu_csv(text or "", fields)
    except NvidiaSmiParseError as exc:
        gpus["nvidia_smi_error"] = str(exc)
        return gpus, {}, {}
    devices = [smi_device_facts(row) for row in rows]
    gpus.update({
        "source": "nvidia-smi",
        "driver_version": rows[0].get("driver_version") if rows else None,
        "count": len(devices),
        "devices": devices,
    })
    p2p: dict[str, list[list[str]]] = {}
    for name, letter in P2P_LETTERS.items():
        out, p2p_error = _smi(source, ["nvidia-smi", "topo", "-p2p", letter])
        if out is None:
            source.note_problem(f"nvidia-smi topo -p2p {letter}", p2p_error or "no output")
            continue
        try:
            p2p[name] = nvidia_smi_topo.parse_topo_p2p(out).matrix
        except NvidiaSmiParseError as exc:
            source.note_problem(f"nvidia-smi topo -p2p {letter}", str(exc))
    topology: dict[str, Any] = {}
    out, topo_error = _smi(source, ["nvidia-smi", "topo", "-m"])
    if out is None:
        source.note_problem("nvidia-smi topo -m", topo_error or "no output")
    else:
        try:
            parsed = nvidia_smi_topo.parse_topo_matrix(out)
        except NvidiaSmiParseError as exc:
            source.note_problem("nvidia-smi topo -m", str(exc))
        else:
            topology = {
                "source": "nvidia-smi",
                "gpus": list(parsed.gpus),
                "matrix": [list(row) for row in parsed.matrix],
                "cpu_affinity": list(parsed.cpu_affinity),
                "numa_affinity": list(parsed.numa_affinity),
            }
    return gpus, p2p, topology


def smi_device_facts(row: dict[str, Any]) -> dict[str, Any]:
    """One nvidia-smi --query-gpu row in the shape nvml.device_facts gives."""
    cap = row.get("compute_cap")
    memory = row.get("memory.total")
    bus = row.get("pci.bus_id")
    return {
        "index": row.get("index"),
        "name": row.get("name"),
        "uuid": row.get("uuid"),
        "pci_bus_id": bus[-12:].lower() if isinstance(bus, str) and len(bus) >= 12 else None,
        "compute_capability": cap,
        "sm": f"sm_{cap.replace('.', '')}" if isinstance(cap, str) else None,
        "memory_total_mib": memory if isinstance(memory, int) else None,
        "bar1_total_mib": None,
        "pcie": {
            "gen_current": row.get("pcie.link.gen.current"),
            "gen_max": row.get("pcie.link.gen.max"),
            "width_current": row.get("pcie.link.width.current"),
            "width_max": row.get("pcie.link.width.max"),
        },
        "persistence_mode": row.get("persistence_mode"),
        "ecc": row.get("ecc.mode.current"),
        "mig": row.get("mig.mode.current"),
        "brand": None,
        "virtualization_mode": None,
        "nvlink": None,
        "unsupported": sorted(k for k, v in row.items() if v is None),
    }
