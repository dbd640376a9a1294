"""GPU health readings: NVML's (taken live through nvidia-ml-py) and their facts.

``read_device_health`` is the only function here that touches a GPU: nvml.py calls it for every
GPU whose handle opened and keeps what it returns under the device's ``health`` key of the NVML
snapshot, which captures store and replay. Every call is guarded: a field the GPU or driver does
not support (NotSupported, FunctionNotFound, a binding too old to have the function) is recorded
in ``errors`` and left null, never fatal.

``gpu_health`` turns one such reading into the ``health.gpus[]`` fact (docs/gpu_host.schema.json)
and is pure; ``health_from_parsed`` is the seam for readings that come from elsewhere (nvidia-smi
``-q -x`` through audit/smi_q.py, or ``--query-gpu``): it takes per-GPU dicts with the same raw keys as
the NVML reading plus ``index`` and ``pci_bus_id`` and gives the same facts.
"""

from __future__ import annotations

from typing import Any

# nvmlClocksEventReason* bits (older bindings: nvmlClocksThrottleReason*), by the names the facts use.
CLOCKS_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# NVML_GPU_FABRIC_STATE_*
FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
# nvmlReturn_t values that a fabric status may carry (the rest are named by number), as nvml.h numbers them.
NVML_RETURNS = {0: "success", 1: "uninitialized", 2: "invalid_argument", 3: "not_supported",
                4: "no_permission", 6: "not_found", 10: "timeout", 15: "gpu_is_lost", 16: "reset_required",
                27: "not_ready", 999: "unknown"}
# NVML_MEMORY_ERROR_TYPE_* and NVML_*_ECC counter types, as nvidia-ml-py names them.
_CORRECTED, _UNCORRECTED = 0, 1
_VOLATILE, _AGGREGATE = 0, 1
# NVML_PAGE_RETIREMENT_CAUSE_*
_RETIRED_SBE, _RETIRED_DBE = 0, 1

# The raw keys of one reading, the shape health_from_parsed also takes.
RAW_KEYS = ("ecc_mode_current", "ecc_mode_pending", "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate",
            "ecc_corrected_volatile", "ecc_corrected_aggregate", "retired_pages_pending", "retired_pages_sbe",
            "retired_pages_dbe", "remapped_rows", "clocks_event_reasons", "fabric")


def read_device_health(nvml: Any, handle: Any) -> dict[str, Any]:
    """One GPU's health readings as plain data; never raises."""
    errors: dict[str, str] = {}

    def call(label: str, names: tuple[str, ...], *args: Any) -> Any:
        for name in names:
            fn = getattr(nvml, name, None)
            if fn is None:
                continue
            try:
                return fn(handle, *args)
            except nvml.NVMLError as exc:
                errors[label] = type(exc).__name__
                return None
            except Exception as exc:  # a binding that does not match the library; go on without the field
                errors[label] = f"{type(exc).__name__}: {exc}"[:200]
                return None
        errors[label] = "not in this nvidia-ml-py"
        return None

    ecc = call("ecc_mode", ("nvmlDeviceGetEccMode",))
    remapped = call("remapped_rows", ("nvmlDeviceGetRemappedRows",))
    sbe = call("retired_pages_sbe", ("nvmlDeviceGetRetiredPages",), _RETIRED_SBE)
    dbe = call("retired_pages_dbe", ("nvmlDeviceGetRetiredPages",), _RETIRED_DBE)
    reading = {
        "ecc_mode_current": _int_at(ecc, 0),
        "ecc_mode_pending": _int_at(ecc, 1),
        "ecc_uncorrected_volatile": call("ecc_uncorrected_volatile", ("nvmlDeviceGetTotalEccErrors",),
                                         _UNCORRECTED, _VOLATILE),
        "ecc_uncorrected_aggregate": call("ecc_uncorrected_aggregate", ("nvmlDeviceGetTotalEccErrors",),
                                          _UNCORRECTED, _AGGREGATE),
        "ecc_corrected_volatile": call("ecc_corrected_volatile", ("nvmlDeviceGetTotalEccErrors",),
                                       _CORRECTED, _VOLATILE),
        "ecc_corrected_aggregate": call("ecc_corrected_aggregate", ("nvmlDeviceGetTotalEccErrors",),
                                        _CORRECTED, _AGGREGATE),
        "retired_pages_pending": call("retired_pages_pending", ("nvmlDeviceGetRetiredPagesPendingStatus",)),
        "retired_pages_sbe": len(sbe) if isinstance(sbe, list) else None,
        "retired_pages_dbe": len(dbe) if isinstance(dbe, list) else None,
        "remapped_rows": ({"correctable": _int_at(remapped, 0), "uncorrectable": _int_at(remapped, 1),
                           "pending": _int_at(remapped, 2), "failure": _int_at(remapped, 3)}
                          if remapped is not None else None),
        "clocks_event_reasons": call("clocks_event_reasons", ("nvmlDeviceGetCurrentClocksEventReasons",
                                                              "nvmlDeviceGetCurrentClocksThrottleReasons")),
        "fabric": _fabric(nvml, handle, errors),
        "errors": errors,
    }
    return {key: _plain(value) for key, value in reading.items()}


def _fabric(nvml: Any, handle: Any, errors: dict[str, str]) -> dict[str, Any] | None:
    struct = getattr(nvml, "c_nvmlGpuFabricInfo_t", None)
    fn = getattr(nvml, "nvmlDeviceGetGpuFabricInfo", None)
    if struct is None or fn is None:
        errors["fabric"] = "not in this nvidia-ml-py"
        return None
    info = struct()
    try:
        fn(handle, info)
    except nvml.NVMLError as exc:
        errors["fabric"] = type(exc).__name__
        return None
    except Exception as exc:
        errors["fabric"] = f"{type(exc).__name__}: {exc}"[:200]
        return None
    return {"state": _int(getattr(info, "state", None)), "status": _int(getattr(info, "status", None))}


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _int_at(values: Any, position: int) -> int | None:
    try:
        return _int(values[position])
    except (TypeError, IndexError, KeyError):
        return None


def _plain(value: Any) -> Any:
    """ctypes numbers and the like as int; mappings and None as they are."""
    if value is None or isinstance(value, (bool, str, dict)):
        return value
    return _int(value)


# ---------------------------------------------------------------------------
# Readings -> facts (pure)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    return bool(value) if isinstance(value, int) else None


def clocks_reasons(mask: Any) -> list[str]:
    """The names of the bits set in a clocks event reasons mask; unknown bits as hex."""
    if not isinstance(mask, int) or isinstance(mask, bool) or mask < 0:
        return []
    names = [name for bit, name in CLOCKS_EVENT_REASONS.items() if mask & bit]
    rest = mask & ~sum(CLOCKS_EVENT_REASONS)
    return names + ([f"0x{rest:x}"] if rest else [])


def gpu_health(index: Any, bus_id: Any, raw: dict[str, Any], source: str) -> dict[str, Any]:
    """The ``health.gpus[]`` fact of one GPU from its raw reading."""
    remapped = raw.get("remapped_rows") if isinstance(raw.get("remapped_rows"), dict) else {}
    fabric = raw.get("fabric") if isinstance(raw.get("fabric"), dict) else {}
    mask = raw.get("clocks_event_reasons")
    state, status = fabric.get("state"), fabric.get("status")
    errors = raw.get("errors") if isinstance(raw.get("errors"), dict) else {}
    return {
        "index": index if isinstance(index, int) else None,
        "pci_bus_id": _norm_bus(bus_id),
        "source": source,
        "ecc": {
            "mode_current": _flag(raw.get("ecc_mode_current")),
            "mode_pending": _flag(raw.get("ecc_mode_pending")),
            "uncorrected_volatile": _count(raw.get("ecc_uncorrected_volatile")),
            "uncorrected_aggregate": _count(raw.get("ecc_uncorrected_aggregate")),
            "corrected_volatile": _count(raw.get("ecc_corrected_volatile")),
            "corrected_aggregate": _count(raw.get("ecc_corrected_aggregate")),
        },
        "retired_pages": {
            "pending": _flag(raw.get("retired_pages_pending")),
            "single_bit": _count(raw.get("retired_pages_sbe")),
            "double_bit": _count(raw.get("retired_pages_dbe")),
        },
        "row_remap": {
            "correctable": _count(remapped.get("correctable")),
            "uncorrectable": _count(remapped.get("uncorrectable")),
            "pending": _flag(remapped.get("pending")),
            "failed": _flag(remapped.get("failure")),
        },
        "clocks_event_reasons": {
            "mask": _count(mask),
            "active": clocks_reasons(mask),
        },
        "fabric": {
            "state": FABRIC_STATES.get(state, f"state {state}") if isinstance(state, int) else None,
            "status": NVML_RETURNS.get(status, f"nvml return {status}") if isinstance(status, int) else None,
        },
        "unsupported": sorted(str(k) for k in errors),
    }


def _norm_bus(bus_id: Any) -> str | None:
    if not isinstance(bus_id, str) or len(bus_id) < 12:
        return None
    return bus_id[-12:].lower()


def health_from_nvml(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """``health.gpus`` from an NVML snapshot: the GPUs whose reading holds a ``health`` mapping."""
    return [gpu_health(device.get("index"), device.get("pci_bus_id"), device["health"], "nvml")
            for device in snapshot.get("devices") or []
            if isinstance(device, dict) and isinstance(device.get("health"), dict)]


def health_from_parsed(rows: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    """``health.gpus`` from per-GPU dicts parsed from another tool (nvidia-smi ``--query-gpu`` or ``-q -x``).

    Each row holds ``index``, ``pci_bus_id`` (any form ending in ``0000:41:00.0``) and any of
    ``RAW_KEYS`` with the NVML reading's types (ints for counts and 0/1 flags or bools, the clocks
    event reasons as a bit mask, ``remapped_rows`` as {correctable, uncorrectable, pending, failure},
    ``fabric`` as {state, status} NVML codes); missing keys stay null. ``errors`` may name fields the
    tool could not give. The flat view of ``nvidia_smi_q.health_view`` is taken as well (``ecc_mode``,
    ``remapped_rows_pending`` / ``_failed``, ``clocks_event_reasons`` as a list of reason names): add
    ``index`` and ``pci_bus_id`` to each and pass them here.
    """
    return [gpu_health(row.get("index"), row.get("pci_bus_id"), _raw(row), source)
            for row in rows if isinstance(row, dict)]


_REASON_BITS = {name: bit for bit, name in CLOCKS_EVENT_REASONS.items()}


def _raw(row: dict[str, Any]) -> dict[str, Any]:
    """A parsed row in the raw keys: the flat health view's names and types translated."""
    raw = dict(row)
    if "ecc_mode" in row and "ecc_mode_current" not in row:
        raw["ecc_mode_current"] = row["ecc_mode"]
    if "remapped_rows" not in row and ({"remapped_rows_pending", "remapped_rows_failed"} & set(row)):
        raw["remapped_rows"] = {"pending": row.get("remapped_rows_pending"), "failure": row.get("remapped_rows_failed")}
    reasons = row.get("clocks_event_reasons")
    if isinstance(reasons, list):
        known = [_REASON_BITS[r] for r in reasons if r in _REASON_BITS]
        raw["clocks_event_reasons"] = sum(known) if len(known) == len(reasons) else None
    return raw
