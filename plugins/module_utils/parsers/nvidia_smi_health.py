"""GPU health from ``nvidia-smi --query-gpu=<HEALTH_QUERY_FIELDS> --format=csv,noheader,nounits``.

Pure: text in, data out. Used when NVML cannot be read from Python but nvidia-smi answers. The
rows come out with the raw keys of an NVML health reading (audit/nvml_health.py ``RAW_KEYS``):
``index``, ``pci_bus_id`` (as printed), ``ecc_mode_current`` / ``ecc_mode_pending`` (1/0),
``ecc_uncorrected_volatile`` / ``_aggregate`` and ``ecc_corrected_volatile`` / ``_aggregate`` (ints),
``retired_pages_pending`` (1/0), ``retired_pages_sbe`` / ``_dbe`` (ints), ``clocks_event_reasons``
(the bit mask) and ``errors`` (field -> what nvidia-smi printed instead of a value). nvidia-smi's
``--query-gpu`` has no row remapping or fabric fields: those stay absent (``nvidia-smi -q`` has them).

Drivers before R530 call the clocks field ``clocks_throttle_reasons.active``; ``HEALTH_QUERY_FIELDS_OLD``
asks for that name. ``parse_health_query`` raises ``NvidiaSmiParseError`` (from split_query_gpu_csv) for
output that is no such CSV, and for a value of the wrong form.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import (
    NvidiaSmiParseError,
    smi_error,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_query import split_query_gpu_csv

CLOCKS_FIELD = "clocks_event_reasons.active"
CLOCKS_FIELD_OLD = "clocks_throttle_reasons.active"
HEALTH_QUERY_FIELDS = (
    "index",
    "pci.bus_id",
    "ecc.mode.current",
    "ecc.mode.pending",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.corrected.aggregate.total",
    "retired_pages.pending",
    "retired_pages.sbe",
    "retired_pages.dbe",
    CLOCKS_FIELD,
)
HEALTH_QUERY_FIELDS_OLD = tuple(CLOCKS_FIELD_OLD if f == CLOCKS_FIELD else f for f in HEALTH_QUERY_FIELDS)

_RAW_NAMES = {
    "index": "index",
    "pci.bus_id": "pci_bus_id",
    "ecc.mode.current": "ecc_mode_current",
    "ecc.mode.pending": "ecc_mode_pending",
    "ecc.errors.uncorrected.volatile.total": "ecc_uncorrected_volatile",
    "ecc.errors.uncorrected.aggregate.total": "ecc_uncorrected_aggregate",
    "ecc.errors.corrected.volatile.total": "ecc_corrected_volatile",
    "ecc.errors.corrected.aggregate.total": "ecc_corrected_aggregate",
    "retired_pages.pending": "retired_pages_pending",
    "retired_pages.sbe": "retired_pages_sbe",
    "retired_pages.dbe": "retired_pages_dbe",
    CLOCKS_FIELD: "clocks_event_reasons",
    CLOCKS_FIELD_OLD: "clocks_event_reasons",
}
_FLAGS = {"enabled": 1, "disabled": 0, "yes": 1, "no": 0, "on": 1, "off": 0}
_FLAG_FIELDS = ("ecc.mode.current", "ecc.mode.pending", "retired_pages.pending")


def _unavailable(value: str) -> bool:
    return value in ("N/A", "") or (value.startswith("[") and value.endswith("]"))


def _value(name: str, value: str, where: str) -> Any:
    if name == "pci.bus_id":
        return value
    if name in _FLAG_FIELDS:
        if value.lower() not in _FLAGS:
            raise smi_error(f"{where} field {name}", "Enabled/Disabled or Yes/No", value,
                            "Report this value so the parser learns it.")
        return _FLAGS[value.lower()]
    try:
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    except ValueError:
        raise smi_error(f"{where} field {name}", "a whole number (or a 0x mask)", value,
                        "Query with --format=csv,noheader,nounits.") from None


def parse_health_query(text: str, fields: Sequence[str] = HEALTH_QUERY_FIELDS) -> list[dict[str, Any]]:
    """One dict of raw health keys per GPU."""
    rows = []
    for number, row in enumerate(split_query_gpu_csv(text, fields), start=1):
        raw: dict[str, Any] = {"errors": {}}
        for name, value in row.items():
            key = _RAW_NAMES.get(name)
            if key is None:
                continue
            value = value.strip()
            if _unavailable(value):
                raw["errors"][key] = value or "empty"
                raw[key] = None
            else:
                raw[key] = _value(name, value, f"nvidia-smi --query-gpu GPU row {number}")
        rows.append(raw)
    return rows


__all__ = ["HEALTH_QUERY_FIELDS", "HEALTH_QUERY_FIELDS_OLD", "NvidiaSmiParseError", "parse_health_query"]
