"""GPU facts, P2P matrices and the topology matrix: from NVML when it can be
read, otherwise from nvidia-smi's text, in the same shape either way.

Without NVML, ``nvidia-smi -q -x`` (or, where it was not seen, ``nvidia-smi -q``) is read once, here:
it completes the device facts ``--query-gpu`` has no field for (BAR1, virtualization mode, brand;
audit/smi_q.py) and its per-GPU health facts are handed back for ``health.gather_health(parsed_gpus=...)``.

Material (a partial source) may hold the matrices without ``--query-gpu``: they are read all
the same, and the GPUs they show (their indexes, nothing else) become the device facts until ``-q``
tells more."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import nvml
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import (
    LIST_GPUS,
    P2P_LETTERS,
    QUERY_GPU,
    TOPO_MATRIX,
    TOPO_P2P,
    TOPO_P2P_MATERIAL,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers import nvidia_smi_list, nvidia_smi_query
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import NvidiaSmiParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_failure import nvidia_smi_failure
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_capability import NOT_STATED, capability_name

NOT_INSTALLED = "nvidia-smi is not installed"
# A command partial material holds no output of: nothing is said of the host.
NOT_SEEN = "not seen: the material holds no output of it"
# How a -q -x failure that is worth a line in ``problems`` on its own starts (see gather_gpus).
# The loaded kernel module's version: with NVML's and nvidia-smi's it tells a driver upgraded
# without a reboot (the library is new, the module still the old one).
KERNEL_MODULE_VERSION = "/sys/module/nvidia/version"


def gather_gpus(source: Source, pci_facts: dict[str, Any]) \
        -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], list[dict[str, Any]] | None]:
    """(gpus, p2p, topology) facts, and the per-GPU health facts of ``nvidia-smi -q -x`` when NVML was not
    read and that answered (else None: the health gatherer reads NVML's or ``--query-gpu``'s)."""
    smi_health = None
    snapshot = source.nvml()
    problem = None if snapshot.get("error") else nvml.shape_problem(snapshot)
    if problem:
        source.note_problem("NVML readings", problem)
        snapshot = {"error": f"unusable NVML readings: {problem}"}
    if not snapshot.get("error"):
        gpus, p2p, topology = _from_nvml(snapshot, pci_facts)
        _note_nvml_errors(source, snapshot)
        count = _nvidia_smi_count(source)
        if count is not None:
            gpus["nvidia_smi_count"] = count
    else:
        gpus, p2p, topology = _from_nvidia_smi(source)
        gpus["nvml_error"] = snapshot.get("error")
        if gpus.get("nvidia_smi_error") != NOT_INSTALLED:  # a host without nvidia-smi is not asked for it twice
            # Imported here: only hosts without NVML read -q -x, and its reader is most of the audit's code.
            from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import smi_q_gather
            smi_health = smi_q_gather.complete_from_smi_q(source, gpus)
        if source.partial:
            _complete_from_list(source, gpus)
            if not gpus.get("devices"):
                _devices_from_nccl(source, gpus)
    module_version = source.read_value(KERNEL_MODULE_VERSION) if "nvidia" in (source.listdir("/sys/module") or []) \
        else None
    if module_version:
        gpus["kernel_module_version"] = module_version
    return gpus, p2p, topology, smi_health


def _note_nvml_errors(source: Source, snapshot: dict[str, Any]) -> None:
    """A GPU whose handle did not open, or a count NVML refused, is something the audit could not read."""
    errors = snapshot.get("errors") if isinstance(snapshot.get("errors"), dict) else {}
    for label, error in sorted(errors.items(), key=lambda item: _handle_index(item[0]) or 0):
        index = _handle_index(label)
        if index is not None:
            source.note_problem(f"NVML GPU{index} (nvmlDeviceGetHandleByIndex)", str(error))
        elif label == "device_count":
            source.note_problem("NVML GPU count (nvmlDeviceGetCount)", str(error))


def _handle_index(label: Any) -> int | None:
    """``gpu3.handle`` -> 3."""
    if not isinstance(label, str) or not label.startswith("gpu") or not label.endswith(".handle"):
        return None
    number = label[3:-len(".handle")]
    return int(number) if number.isdigit() else None


def handle_errors(snapshot: dict[str, Any]) -> dict[str, str]:
    """NVML index (as text, for JSON) -> the error of each GPU whose handle did not open."""
    errors = snapshot.get("errors") if isinstance(snapshot.get("errors"), dict) else {}
    found = {_handle_index(label): str(error) for label, error in errors.items()}
    return {str(index): error for index, error in sorted((i, e) for i, e in found.items() if i is not None)}


def _from_nvml(snapshot: dict[str, Any], pci_facts: dict[str, Any]) -> tuple[dict, dict, dict]:
    devices = [nvml.device_facts(raw) for raw in snapshot.get("devices") or []]
    gpus: dict[str, Any] = {
        "source": "nvml",
        "driver_version": snapshot.get("driver_version"),
        "cuda_driver_version": nvml.cuda_version_text(snapshot.get("cuda_driver_version")),
        "nvml_version": snapshot.get("nvml_version"),
        "count": len(devices),
        "devices": devices,
    }
    if isinstance(snapshot.get("device_count"), int):
        gpus["nvml_device_count"] = snapshot["device_count"]
    lost_handles = handle_errors(snapshot)
    if lost_handles:
        gpus["nvml_handle_errors"] = lost_handles
    # The matrices are keyed by NVML index, every GPU NVML counted; rows of GPUs it could not open
    # hold None (not read), so that rules and the gate never take one GPU's pair for another's.
    by_bus = {d["bdf"]: d for d in pci_facts.get("nvidia_devices") or []}
    by_index = {d.get("index"): by_bus.get(d.get("pci_bus_id") or "", {}) for d in devices}
    matrix = nvml.topology_matrix(snapshot)
    indexes = range(len(matrix)) if matrix else [d.get("index") for d in devices]
    topology = {
        "source": "nvml",
        "gpus": [f"GPU{i}" for i in indexes],
        "matrix": matrix,
        "cpu_affinity": [by_index.get(i, {}).get("local_cpulist") for i in indexes],
        "numa_affinity": [by_index.get(i, {}).get("numa_node") for i in indexes],
    }
    return gpus, nvml.p2p_matrices(snapshot), topology


def _nvidia_smi_count(source: Source) -> int | None:
    result = source.run(LIST_GPUS.argv)
    if not result.ok:
        return None
    try:
        return len(nvidia_smi_list.parse_list_gpus(result.stdout))
    except NvidiaSmiParseError as exc:
        source.note_problem(LIST_GPUS.key, str(exc))
        return None


def _smi(source: Source, argv: list[str]) -> tuple[str | None, str | None]:
    """(stdout, error) of one nvidia-smi call."""
    result = source.run(argv)
    if not result.seen:
        return None, NOT_SEEN
    if result.rc is None:
        return None, NOT_INSTALLED
    failure = nvidia_smi_failure(result.rc, result.stdout, result.stderr)
    if failure or not result.ok:
        return None, failure or f"exit {result.rc}: {(result.stderr or result.stdout).strip()[:200]}"
    return result.stdout, None


def _from_nvidia_smi(source: Source) -> tuple[dict, dict, dict]:
    fields = list(nvidia_smi_query.QUERY_GPU_FIELDS)
    text, error = _smi(source, QUERY_GPU.argv)
    gpus: dict[str, Any] = {"source": None, "count": 0, "devices": []}
    if error and error != NOT_SEEN:
        gpus["nvidia_smi_error"] = error
        return gpus, {}, {}
    if error:
        gpus["nvidia_smi_error"] = error
    else:
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
    p2p = _p2p_matrices(source)
    topology = _topology(source)
    if gpus["source"] is None:
        _devices_from_matrices(gpus, p2p, topology)
    return gpus, p2p, topology


def _p2p_matrices(source: Source) -> dict[str, list[list[str]]]:
    p2p: dict[str, list[list[str]]] = {}
    for name, letter in P2P_LETTERS.items():
        out, p2p_error = _smi(source, TOPO_P2P[letter].argv)
        if out is None:
            if p2p_error != NOT_SEEN:  # what material did not hold is not a problem of the host
                source.note_problem(TOPO_P2P[letter].key, p2p_error or "no output")
            continue
        try:
            p2p[name] = _p2p_matrix(source, TOPO_P2P[letter].key, out)
        except NvidiaSmiParseError as exc:
            source.note_problem(TOPO_P2P[letter].key, str(exc))
    if source.partial:
        # Material's matrices of several capabilities, or of one it does not state (material/capture.py).
        for letters, command in TOPO_P2P_MATERIAL.items():
            out, _unused = _smi(source, command.argv) if source.seen("commands", command.key) else (None, None)
            if out is None:
                continue
            try:
                p2p[capability_name(letters) if letters else NOT_STATED] = _p2p_matrix(source, command.key, out)
            except NvidiaSmiParseError as exc:
                source.note_problem(command.key, str(exc))
    return p2p


def _p2p_matrix(source: Source, key: str, out: str) -> list[list[str | None]]:
    """A topo -p2p matrix; material's paste cut after some rows gives those rows (the others not read,
    and said so), as a host's own output is never cut."""
    # Imported here and in _topology, not above: only a host without NVML readings (or material) reads nvidia-smi's
    # matrices, and the module every audited host runs compiles only what it runs (docs/development.md).
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers import nvidia_smi_topo

    parsed = nvidia_smi_topo.parse_topo_p2p(out, cut_ok=source.partial)
    if parsed.missing_rows:
        source.note_problem(key, f"the paste is cut: rows {', '.join(parsed.missing_rows)} are missing, their pairs "
                                 "are not read; paste the whole output to judge them")
    return parsed.matrix


def _topology(source: Source) -> dict[str, Any]:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers import nvidia_smi_topo  # see _p2p_matrix

    out, topo_error = _smi(source, TOPO_MATRIX.argv)
    if out is None:
        if topo_error != NOT_SEEN:
            source.note_problem(TOPO_MATRIX.key, topo_error or "no output")
        return {}
    try:
        parsed = nvidia_smi_topo.parse_topo_matrix(out, cut_ok=source.partial)
    except NvidiaSmiParseError as exc:
        source.note_problem(TOPO_MATRIX.key, str(exc))
        return {}
    if parsed.missing_rows:
        source.note_problem(TOPO_MATRIX.key, f"the paste is cut: rows {', '.join(parsed.missing_rows)} are missing, "
                                             "their links are not read; paste the whole output to judge them")
    topology: dict[str, Any] = {
        "source": "nvidia-smi",
        "gpus": list(parsed.gpus),
        "matrix": [list(row) for row in parsed.matrix],
        "cpu_affinity": list(parsed.cpu_affinity),
        "numa_affinity": list(parsed.numa_affinity),
    }
    if parsed.notes:  # what the parser repaired or left unknown (merged cells of hosts with many NICs)
        topology["notes"] = list(parsed.notes)
    return topology


def _devices_from_matrices(gpus: dict[str, Any], p2p: dict[str, Any], topology: dict[str, Any]) -> None:
    """Without --query-gpu (partial material), the GPUs the matrices show: their indexes and nothing else.
    nvidia-smi names them GPU0, GPU1 ... by index; the matrices' rows are in that order."""
    names = topology.get("gpus") or []
    indexes = [int(name[3:]) for name in names if name[:3] == "GPU" and name[3:].isdigit()]
    if not names or len(indexes) != len(names):
        sizes = {len(matrix) for matrix in p2p.values() if matrix}
        indexes = list(range(sizes.pop())) if len(sizes) == 1 else []
    if not indexes:
        return
    unknown = {field: None for field in nvidia_smi_query.QUERY_GPU_FIELDS}
    gpus.update({"source": "nvidia-smi", "count": len(indexes),
                 "devices": [smi_device_facts({**unknown, "index": index}) for index in indexes]})
    gpus.pop("nvidia_smi_error", None)


def _complete_from_list(source: Source, gpus: dict[str, Any]) -> None:
    """Material whose only GPU names are in ``nvidia-smi -L``: its GPUs, or the names and UUIDs of the
    GPUs the matrices showed by index (the same GPU0, GPU1 ... order). Nothing when another output named them."""
    devices = gpus.get("devices") or []
    if any(device.get("name") for device in devices) or not source.seen("commands", LIST_GPUS.key):
        return
    result = source.run(LIST_GPUS.argv)
    try:
        listed = nvidia_smi_list.parse_list_gpus(result.stdout) if result.ok else []
    except NvidiaSmiParseError as exc:
        source.note_problem(LIST_GPUS.key, str(exc))
        return
    if not listed or (devices and [d.get("index") for d in devices] != [gpu.index for gpu in listed]):
        return  # GPUs the matrices show otherwise than -L: neither is taken for the other
    unknown = {field: None for field in nvidia_smi_query.QUERY_GPU_FIELDS}
    gpus.update({"source": "nvidia-smi", "count": len(listed),
                 "devices": [smi_device_facts({**unknown, "index": gpu.index, "name": gpu.name, "uuid": gpu.uuid})
                             for gpu in listed]})
    gpus.pop("nvidia_smi_error", None)


def _devices_from_nccl(source: Source, gpus: dict[str, Any]) -> None:
    """Material whose only GPU list is NCCL's (the source's readers: material/nccl_gpus.py): those GPUs, by bus id,
    with the index and model nvidia-smi would give left unknown."""
    found = source.readers.gpus(source)
    if not found:
        return
    unknown = {field: None for field in nvidia_smi_query.QUERY_GPU_FIELDS}
    devices = []
    for gpu in found:
        device = smi_device_facts({**unknown, "compute_cap": gpu["compute_capability"]})
        device["pci_bus_id"] = gpu["pci_bus_id"]
        device["index"] = gpu.get("index")
        devices.append(device)
    gpus.update({"source": "nccl", "count": len(devices), "devices": devices})
    gpus.pop("nvidia_smi_error", None)


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
        "vbios_version": None,  # not among the --query-gpu fields the captures were recorded with
        "nvlink": None,
        "unsupported": sorted(k for k, v in row.items() if v is None),
    }
