"""NVML readings: taken live through nvidia-ml-py, or replayed from a capture.

``read_nvml`` is the only function here that touches a GPU. It turns what NVML
says into a plain "snapshot" (numbers and strings, NVML's own codes), which is
what a capture stores. Everything else converts a snapshot into facts and is
pure. A field that one GPU does not support is recorded as such, never fatal.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.nvml_health import read_device_health

# nvmlDeviceGetP2PStatus capability indexes, in the order nvidia-smi's topo -p2p
# letters name them (r, w, n, a, p).
P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3, "pci": 4}
# NVML_P2P_STATUS_* -> the label nvidia-smi prints.
P2P_STATUS_LABELS = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
P2P_LABEL_MEANINGS = {
    "X": "self",
    "OK": "supported",
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "DR": "disabled by registry key",
    "U": "unknown",
}
# NVML_TOPOLOGY_* -> the label nvidia-smi topo -m prints.
TOPOLOGY_LABELS = {0: "SELF", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
BRANDS = {0: "unknown", 1: "quadro", 2: "tesla", 3: "nvs", 4: "grid", 5: "geforce", 6: "titan",
          7: "vapps", 8: "vpc", 9: "vcs", 10: "vws", 11: "cloud_gaming", 12: "quadro_rtx",
          13: "nvidia_rtx", 14: "nvidia", 15: "geforce_rtx", 16: "titan_rtx"}
VIRTUALIZATION_MODES = {0: "none", 1: "passthrough", 2: "vgpu", 3: "host_vgpu", 4: "host_vsga"}
MAX_NVLINKS = 18


def read_nvml() -> dict[str, Any]:
    """Read every GPU through NVML. Never raises: failure is ``{"error": ..., "kind": ...}``."""
    try:
        import pynvml
    except ImportError:
        return {"error": "the Python binding nvidia-ml-py (module pynvml) is not installed for this "
                         "interpreter", "kind": "binding_missing"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "kind": classify_init_error(type(exc).__name__)}
    except Exception as exc:  # a broken binding or libnvidia-ml; the audit goes on without NVML
        return {"error": f"{type(exc).__name__}: {exc}", "kind": "nvml_error"}
    try:
        return _read_initialised(pynvml)
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def classify_init_error(name: str) -> str:
    if "LibRmVersionMismatch" in name:
        return "version_mismatch"
    if "LibraryNotFound" in name:
        return "library_missing"
    if "DriverNotLoaded" in name:
        return "driver_not_loaded"
    if "NoPermission" in name:
        return "no_permission"
    return "nvml_error"


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _read_initialised(nvml: Any) -> dict[str, Any]:
    errors: dict[str, str] = {}

    def call(label: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except nvml.NVMLError as exc:
            errors[label] = type(exc).__name__
            return None

    snapshot: dict[str, Any] = {
        "driver_version": _maybe_text(call("driver_version", nvml.nvmlSystemGetDriverVersion)),
        "cuda_driver_version": call("cuda_driver_version", nvml.nvmlSystemGetCudaDriverVersion),
        "nvml_version": _maybe_text(call("nvml_version", nvml.nvmlSystemGetNVMLVersion)),
        "devices": [],
        "errors": errors,
    }
    count = call("device_count", nvml.nvmlDeviceGetCount)
    snapshot["device_count"] = count
    handles = []
    for index in range(count or 0):
        handle = call(f"gpu{index}.handle", nvml.nvmlDeviceGetHandleByIndex, index)
        handles.append(handle)
        if handle is not None:
            snapshot["devices"].append(_read_device(nvml, index, handle))
    usable = [h for h in handles if h is not None]
    # The matrices below cover only the GPUs whose handle opened: their NVML indexes, in row order.
    snapshot["matrix_gpus"] = [index for index, handle in enumerate(handles) if handle is not None]
    snapshot["p2p"] = {
        name: _pair_matrix(usable, lambda a, b, cap=cap: nvml.nvmlDeviceGetP2PStatus(a, b, cap), nvml)
        for name, cap in P2P_CAPS.items()
    }
    snapshot["topology"] = _pair_matrix(usable, nvml.nvmlDeviceGetTopologyCommonAncestor, nvml)
    return snapshot


def _maybe_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _pair_matrix(handles: list[Any], fn: Any, nvml: Any) -> list[list[Any]]:
    matrix: list[list[Any]] = []
    for i, a in enumerate(handles):
        row: list[Any] = []
        for j, b in enumerate(handles):
            if i == j:
                row.append(None)
                continue
            try:
                row.append(int(fn(a, b)))
            except nvml.NVMLError as exc:
                row.append(type(exc).__name__)
        matrix.append(row)
    return matrix


def _read_device(nvml: Any, index: int, handle: Any) -> dict[str, Any]:
    errors: dict[str, str] = {}

    def call(label: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(handle, *args)
        except nvml.NVMLError as exc:
            errors[label] = type(exc).__name__
            return None

    pci = call("pci", nvml.nvmlDeviceGetPciInfo)
    memory = call("memory", nvml.nvmlDeviceGetMemoryInfo)
    bar1 = call("bar1", nvml.nvmlDeviceGetBAR1MemoryInfo)
    ecc = call("ecc", nvml.nvmlDeviceGetEccMode)
    mig = call("mig", nvml.nvmlDeviceGetMigMode)
    device = {
        "index": index,
        "name": _maybe_text(call("name", nvml.nvmlDeviceGetName)),
        "uuid": _maybe_text(call("uuid", nvml.nvmlDeviceGetUUID)),
        "pci_bus_id": _text(pci.busId) if pci is not None else None,
        "compute_capability": list(call("compute_capability", nvml.nvmlDeviceGetCudaComputeCapability) or [])
        or None,
        "memory_total_bytes": int(memory.total) if memory is not None else None,
        "bar1_total_bytes": int(bar1.bar1Total) if bar1 is not None else None,
        "pcie_gen_current": call("pcie_gen_current", nvml.nvmlDeviceGetCurrPcieLinkGeneration),
        "pcie_gen_max": call("pcie_gen_max", nvml.nvmlDeviceGetMaxPcieLinkGeneration),
        "pcie_width_current": call("pcie_width_current", nvml.nvmlDeviceGetCurrPcieLinkWidth),
        "pcie_width_max": call("pcie_width_max", nvml.nvmlDeviceGetMaxPcieLinkWidth),
        "persistence_mode": call("persistence_mode", nvml.nvmlDeviceGetPersistenceMode),
        "ecc_current": ecc[0] if ecc else None,
        "mig_current": mig[0] if mig else None,
        "brand": call("brand", nvml.nvmlDeviceGetBrand),
        "virtualization_mode": call("virtualization_mode", nvml.nvmlDeviceGetVirtualizationMode),
        "vbios_version": _maybe_text(call("vbios_version", nvml.nvmlDeviceGetVbiosVersion))
        if hasattr(nvml, "nvmlDeviceGetVbiosVersion") else None,
        "nvlinks": [],
        "errors": errors,
        "health": read_device_health(nvml, handle),
    }
    for link in range(MAX_NVLINKS):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except nvml.NVMLError:
            break  # links are numbered densely; the first unsupported one ends them
        remote = None
        if state:
            try:
                remote = _text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)
            except nvml.NVMLError:
                remote = None
        device["nvlinks"].append({"link": link, "active": bool(state), "remote_bus_id": remote})
    return device


# ---------------------------------------------------------------------------
# Snapshot -> facts (pure)

_DEVICE_TYPES: dict[str, tuple[type, ...]] = {
    "index": (int,), "name": (str,), "uuid": (str,), "pci_bus_id": (str,), "compute_capability": (list,),
    "memory_total_bytes": (int,), "bar1_total_bytes": (int,), "nvlinks": (list,), "errors": (dict,),
    "health": (dict,),
}


def shape_problem(snapshot: dict[str, Any]) -> str | None:
    """What is wrong with a snapshot's structure, or None. Values may be null; types may not lie."""
    devices = snapshot.get("devices")
    if not isinstance(devices, list):
        return f"'devices' must be a list, found {type(devices).__name__}"
    for n, device in enumerate(devices):
        if not isinstance(device, dict):
            return f"devices[{n}] must be a mapping, found {type(device).__name__}"
        for key, types in _DEVICE_TYPES.items():
            value = device.get(key)
            if value is not None and not isinstance(value, types):
                return f"devices[{n}].{key} must be {types[0].__name__}, found {type(value).__name__}"
        if any(not isinstance(link, dict) for link in device.get("nvlinks") or []):
            return f"devices[{n}].nvlinks must hold mappings"
    p2p = snapshot.get("p2p")
    if p2p is not None and not (isinstance(p2p, dict) and all(_is_matrix(m) for m in p2p.values())):
        return "'p2p' must map capability names to square lists of lists"
    topology = snapshot.get("topology")
    if topology is not None and not _is_matrix(topology):
        return "'topology' must be a list of lists"
    covered = snapshot.get("matrix_gpus")
    if covered is not None and not (isinstance(covered, list) and all(_is_index(i) for i in covered)):
        return "'matrix_gpus' must be a list of GPU indexes"
    if snapshot.get("device_count") is not None and not _is_index(snapshot.get("device_count")):
        return "'device_count' must be a whole number"
    return None


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 4096


def _is_matrix(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(row, list) for row in value)


def p2p_label(code: Any, same: bool = False) -> str:
    if same:
        return "X"
    if isinstance(code, int):
        return P2P_STATUS_LABELS.get(code, "U")
    return "U"


def matrix_indexes(snapshot: dict[str, Any]) -> list[int]:
    """The NVML indexes the snapshot's matrices cover, in row order: ``matrix_gpus`` when recorded,
    else the devices' (a snapshot reads the devices and the matrices over the same opened handles)."""
    covered = snapshot.get("matrix_gpus")
    if isinstance(covered, list) and all(_is_index(i) for i in covered):
        return list(covered)
    devices = [d for d in snapshot.get("devices") or [] if isinstance(d, dict)]
    return [d["index"] if _is_index(d.get("index")) else n for n, d in enumerate(devices)]


def matrix_size(snapshot: dict[str, Any]) -> int:
    """Rows of the facts' matrices: every GPU NVML counted, whether its handle opened or not."""
    count = snapshot.get("device_count")
    indexes = matrix_indexes(snapshot)
    return max([count if _is_index(count) else 0, *(i + 1 for i in indexes)])


def by_nvml_index(compact: list[list[Any]], covered: list[int], size: int) -> list[list[Any]]:
    """A matrix over the covered GPUs (row r is GPU covered[r]) re-keyed by NVML index, ``size`` rows:
    "X" on the diagonal, None for every pair with a GPU the matrix does not cover."""
    if not compact:
        return []
    full: list[list[Any]] = [["X" if i == j else None for j in range(size)] for i in range(size)]
    for r, i in enumerate(covered[:len(compact)]):
        row = compact[r]
        for c, j in enumerate(covered[:len(row)]):
            if i != j and i < size and j < size:
                full[i][j] = row[c]
    return full


def p2p_matrices(snapshot: dict[str, Any]) -> dict[str, list[list[str | None]]]:
    """The P2P matrices by NVML index; pairs with a GPU NVML could not open are None (not read)."""
    covered, size = matrix_indexes(snapshot), matrix_size(snapshot)
    matrices: dict[str, list[list[str | None]]] = {}
    for name, rows in (snapshot.get("p2p") or {}).items():
        if not isinstance(rows, list):
            continue
        compact = [[p2p_label(code, i == j) for j, code in enumerate(row)]
                   for i, row in enumerate(rows) if isinstance(row, list)]
        matrices[name] = by_nvml_index(compact, covered, size)
    return matrices


def topology_matrix(snapshot: dict[str, Any]) -> list[list[str | None]]:
    """nvidia-smi's labels from NVML by NVML index: NV# where NVLinks join two GPUs, else the PCIe
    ancestor; None for pairs with a GPU NVML could not open."""
    return by_nvml_index(_topology_compact(snapshot), matrix_indexes(snapshot), matrix_size(snapshot))


def _topology_compact(snapshot: dict[str, Any]) -> list[list[str]]:
    devices = snapshot.get("devices") or []
    levels = snapshot.get("topology") or []
    links = [_nvlink_peers(d, devices) for d in devices]
    matrix: list[list[str]] = []
    for i, row in enumerate(levels):
        if not isinstance(row, list):
            continue
        labels = []
        for j, level in enumerate(row):
            if i == j:
                labels.append("X")
            elif i < len(links) and links[i].get(j):
                labels.append(f"NV{links[i][j]}")
            else:
                labels.append(TOPOLOGY_LABELS.get(level, "U") if isinstance(level, int) else "U")
        matrix.append(labels)
    return matrix


def _nvlink_peers(device: dict[str, Any], devices: list[dict[str, Any]]) -> dict[int, int]:
    """Active links to each peer GPU; links to an NVSwitch count toward every switched peer."""
    bus_to_index = {_norm_bus(d.get("pci_bus_id")): j for j, d in enumerate(devices)}
    direct: dict[int, int] = {}
    switched = 0
    for link in device.get("nvlinks") or []:
        if not link.get("active"):
            continue
        peer = bus_to_index.get(_norm_bus(link.get("remote_bus_id")))
        if peer is None:
            switched += 1
        else:
            direct[peer] = direct.get(peer, 0) + 1
    if switched:
        for j, other in enumerate(devices):
            if other is device:
                continue
            other_switched = sum(1 for link in other.get("nvlinks") or [] if link.get("active")
                                 and _norm_bus(link.get("remote_bus_id")) not in bus_to_index)
            if other_switched:
                direct[j] = direct.get(j, 0) + min(switched, other_switched)
    return direct


def _norm_bus(bus_id: Any) -> str | None:
    """NVML prints 00000000:41:00.0; sysfs 0000:41:00.0. Compare on the last 12 characters."""
    if not isinstance(bus_id, str) or len(bus_id) < 12:
        return None
    return bus_id[-12:].lower()


def cuda_version_text(value: Any) -> str | None:
    """NVML's CUDA driver version 12080 -> "12.8"."""
    if not isinstance(value, int) or value <= 0:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def device_facts(raw: dict[str, Any]) -> dict[str, Any]:
    capability = raw.get("compute_capability")
    cap_text = (f"{capability[0]}.{capability[1]}" if isinstance(capability, list) and len(capability) == 2
                else None)
    return {
        "index": raw.get("index"),
        "name": raw.get("name"),
        "uuid": raw.get("uuid"),
        "pci_bus_id": _norm_bus(raw.get("pci_bus_id")),
        "compute_capability": cap_text,
        "sm": f"sm_{capability[0]}{capability[1]}" if cap_text else None,
        "memory_total_mib": _mib(raw.get("memory_total_bytes")),
        "bar1_total_mib": _mib(raw.get("bar1_total_bytes")),
        "pcie": {
            "gen_current": raw.get("pcie_gen_current"),
            "gen_max": raw.get("pcie_gen_max"),
            "width_current": raw.get("pcie_width_current"),
            "width_max": raw.get("pcie_width_max"),
        },
        "persistence_mode": _flag(raw.get("persistence_mode")),
        "ecc": _flag(raw.get("ecc_current")),
        "mig": _flag(raw.get("mig_current")),
        "brand": BRANDS.get(raw.get("brand")) if isinstance(raw.get("brand"), int) else None,
        "virtualization_mode": VIRTUALIZATION_MODES.get(raw.get("virtualization_mode"))
        if isinstance(raw.get("virtualization_mode"), int) else None,
        # Absent from snapshots recorded before it was read: null, as for any field not read.
        "vbios_version": raw.get("vbios_version") if isinstance(raw.get("vbios_version"), str) else None,
        "nvlink": {
            "links": len(raw.get("nvlinks") or []),
            "active": sum(1 for link in raw.get("nvlinks") or [] if link.get("active")),
        },
        "unsupported": sorted((raw.get("errors") or {}).keys()),
    }


def _mib(value: Any) -> int | None:
    return value // (1024 * 1024) if isinstance(value, int) else None


def _flag(value: Any) -> bool | None:
    return bool(value) if isinstance(value, int) else None
