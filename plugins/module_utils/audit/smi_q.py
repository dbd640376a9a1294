"""What ``nvidia-smi -q -x`` (or its text form, ``nvidia-smi -q``) tells the audit when NVML cannot be read.

``nvidia-smi --query-gpu`` has no field for BAR1, the virtualization mode, the brand, row remapping or
the NVLink fabric; ``nvidia-smi -q -x`` prints them all. parsers/nvidia_smi_q reads the document into
``GpuQuery`` values; the pure functions here turn them into what the audit keeps, in the shapes NVML's
readings give:

* ``health_reading(gpu, index)``: one GPU's health in the raw keys of an NVML reading
  (``nvml_health.RAW_KEYS``: ECC mode and counts, retired pages, remapped rows, the clocks event
  reasons as NVML's bit mask, the fabric state and status as NVML's codes), for
  ``nvml_health.health_from_parsed``. What the document could not tell (N/A, a section a driver
  generation does not print, a word not known here) is None and named in ``errors`` (the facts'
  ``unsupported``); never 0.
* ``health_facts(parsed, indexes)``: every GPU's ``health.gpus[]`` fact, ``source`` "nvidia-smi -q -x"
  (``SOURCE_TEXT``, "nvidia-smi -q", for a document read from text).
* ``fill_device(device, gpu)``: a ``--query-gpu`` device fact (gpus.smi_device_facts) with what it
  could not give taken from the same GPU's -q -x reading: BAR1, virtualization mode and brand, and any
  field ``--query-gpu`` printed as N/A. ``by_bus_id`` matches the two by PCI bus id, never by position.
* ``device_of(gpu)``: the device fact of a GPU that only -q (-x) shows (material without
  ``--query-gpu``): ``fill_device`` over a fact that knows nothing but the GPU's index and bus id.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import SMI_Q_TEXT, SMI_Q_XML
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.nvml import BRANDS, VIRTUALIZATION_MODES
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.nvml_health import (
    CLOCKS_EVENT_REASONS,
    FABRIC_STATES,
    NVML_RETURNS,
    health_from_parsed,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q import GpuQuery, NvidiaSmiQ

SOURCE = SMI_Q_XML.key
SOURCE_TEXT = SMI_Q_TEXT.key

_REASON_BITS = {name: bit for bit, name in CLOCKS_EVENT_REASONS.items()}
# nvidia-smi prints the fabric state in words ("In Progress") and the status as nvmlErrorString
# ("Success"); read in snake case they are the names FABRIC_STATES and NVML_RETURNS give the codes.
_FABRIC_STATE_CODES = {name: code for code, name in FABRIC_STATES.items()}
_FABRIC_STATUS_CODES = {name: code for code, name in NVML_RETURNS.items()} | {"insufficient_permissions": 4}
# Product Brand as printed, in snake case -> NVML's brand name; the plain ones are NVML's names already.
_BRAND_WORDS = {
    "nvidia_virtual_applications": "vapps", "nvidia_virtual_pc": "vpc", "nvidia_virtual_compute_server": "vcs",
    "nvidia_rtx_virtual_workstation": "vws", "nvidia_cloud_gaming": "cloud_gaming",
}
_BRAND_NAMES = set(BRANDS.values())
# "Pass-Through", "Host VGPU": the letters only, lower case.
_VIRTUALIZATION_WORDS = {name.replace("_", ""): name for name in VIRTUALIZATION_MODES.values()}

# Device fact -> the --query-gpu field whose N/A the fact's ``unsupported`` names (gpus.smi_device_facts).
_QUERY_FIELDS = {
    "name": "name", "uuid": "uuid", "compute_capability": "compute_cap", "memory_total_mib": "memory.total",
    "persistence_mode": "persistence_mode", "ecc": "ecc.mode.current", "mig": "mig.mode.current",
}
_PCIE_QUERY_FIELDS = {
    "gen_current": "pcie.link.gen.current", "gen_max": "pcie.link.gen.max",
    "width_current": "pcie.link.width.current", "width_max": "pcie.link.width.max",
}
_NOT_GIVEN = "N/A or not printed"


def bus_key(bus_id: Any) -> str | None:
    """The last 12 characters of a PCI address, lower case: NVML's, nvidia-smi's and sysfs's forms agree."""
    if not isinstance(bus_id, str) or len(bus_id) < 12:
        return None
    return bus_id[-12:].lower()


def by_bus_id(parsed: NvidiaSmiQ) -> dict[str, GpuQuery]:
    """The GPUs of a -q -x document by ``bus_key``; GPUs without a readable bus id are left out."""
    found: dict[str, GpuQuery] = {}
    for gpu in parsed.gpus:
        key = bus_key(gpu.bus_id)
        if key is not None and key not in found:
            found[key] = gpu
    return found


def _snake(word: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", word.lower()).strip("_")


def _clocks_mask(reasons: dict[str, bool | None] | None, errors: dict[str, str]) -> int | None:
    """NVML's mask of the active reasons; None when one reason's state is unknown, or an active one has no bit."""
    if reasons is None:
        errors["clocks_event_reasons"] = _NOT_GIVEN
        return None
    mask = 0
    for name, active in reasons.items():
        bit = _REASON_BITS.get(name)
        if active is None or (active and bit is None):
            # Leaving the bit out would say "not active"; a mask that cannot be told whole is no mask.
            errors["clocks_event_reasons"] = f"{name}: {'unknown state' if active is None else 'active, no NVML bit'}"
            return None
        if active and bit is not None:
            mask |= bit
    return mask


def _code(word: str | None, codes: dict[str, int], label: str, errors: dict[str, str]) -> int | None:
    if word is None:
        errors[label] = _NOT_GIVEN
        return None
    code = codes.get(_snake(word))
    if code is None:
        errors[label] = word
    return code


def _fabric(gpu: GpuQuery, errors: dict[str, str]) -> dict[str, int | None] | None:
    if gpu.fabric is None:
        errors["fabric"] = _NOT_GIVEN
        return None
    return {"state": _code(gpu.fabric.state, _FABRIC_STATE_CODES, "fabric.state", errors),
            "status": _code(gpu.fabric.status, _FABRIC_STATUS_CODES, "fabric.status", errors)}


def health_reading(gpu: GpuQuery, index: int | None = None) -> dict[str, Any]:
    """One GPU's health in the raw keys of an NVML reading, with ``index`` (the GPU's NVML index when known
    from elsewhere, else the parser's) and ``pci_bus_id``; unknowns None and named in ``errors``."""
    errors: dict[str, str] = {}
    ecc = gpu.ecc_errors
    volatile = ecc.volatile if ecc else None
    aggregate = ecc.aggregate if ecc else None
    pages = gpu.retired_pages
    rows = gpu.remapped_rows
    reading: dict[str, Any] = {
        "ecc_mode_current": gpu.ecc_mode_current,
        "ecc_mode_pending": gpu.ecc_mode_pending,
        "ecc_uncorrected_volatile": volatile.uncorrectable if volatile else None,
        "ecc_uncorrected_aggregate": aggregate.uncorrectable if aggregate else None,
        "ecc_corrected_volatile": volatile.correctable if volatile else None,
        "ecc_corrected_aggregate": aggregate.correctable if aggregate else None,
        "retired_pages_pending": pages.pending if pages else None,
        "retired_pages_sbe": pages.single_bit if pages else None,
        "retired_pages_dbe": pages.double_bit if pages else None,
        "remapped_rows": ({"correctable": rows.correctable, "uncorrectable": rows.uncorrectable,
                           "pending": rows.pending, "failure": rows.failure} if rows else None),
    }
    for key, value in reading.items():
        if value is None:
            errors["ecc_mode" if key.startswith("ecc_mode") else key] = _NOT_GIVEN
    for key, value in (reading["remapped_rows"] or {}).items():
        if value is None:
            errors[f"remapped_rows.{key}"] = _NOT_GIVEN
    reading["clocks_event_reasons"] = _clocks_mask(gpu.clocks_event_reasons, errors)
    reading["fabric"] = _fabric(gpu, errors)
    return {"index": index if index is not None else gpu.index, "pci_bus_id": gpu.bus_id, **reading,
            "errors": errors}


def health_facts(parsed: NvidiaSmiQ, indexes: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """``health.gpus`` from a -q -x (or -q) document. ``indexes``: ``bus_key`` -> NVML index, from the GPU
    facts, so that a document that does not say every GPU's index (``nvidia-smi -q -x -i``) still gives them."""
    known = indexes or {}
    rows = [health_reading(gpu, known.get(bus_key(gpu.bus_id) or "")) for gpu in parsed.gpus]
    return health_from_parsed(rows, SOURCE_TEXT if parsed.format == "text" else SOURCE)


def brand_name(printed: str | None) -> str | None:
    """``Product Brand`` as printed ("NVIDIA RTX", "GeForce") -> NVML's brand name; None when not known."""
    if printed is None:
        return None
    word = _snake(printed)
    word = _BRAND_WORDS.get(word, word)
    return word if word in _BRAND_NAMES else None


def virtualization_name(printed: str | None) -> str | None:
    """``Virtualization Mode`` as printed ("Pass-Through", "Host VGPU") -> NVML's name; None when not known."""
    if printed is None:
        return None
    return _VIRTUALIZATION_WORDS.get(re.sub(r"[^a-z]", "", printed.lower()))


def fill_device(device: dict[str, Any], gpu: GpuQuery) -> dict[str, Any]:
    """A ``--query-gpu`` device fact completed from the same GPU's -q -x reading: what --query-gpu gave is
    kept, what it could not give is taken from -q -x; ``unsupported`` then names what neither gave."""
    filled = {**device, "pcie": dict(device.get("pcie") or {})}
    unsupported = set(device.get("unsupported") or [])

    def fill(key: str, value: Any) -> None:
        if filled.get(key) is None and value is not None:
            filled[key] = value
            unsupported.discard(_QUERY_FIELDS.get(key, key))

    fill("name", gpu.product_name)
    fill("uuid", gpu.uuid)
    fill("vbios_version", gpu.vbios_version)
    fill("compute_capability", gpu.compute_capability)
    if filled.get("sm") is None and isinstance(filled.get("compute_capability"), str):
        filled["sm"] = f"sm_{filled['compute_capability'].replace('.', '')}"
    fill("memory_total_mib", gpu.fb_total_mib)
    fill("persistence_mode", gpu.persistence_mode)
    fill("ecc", gpu.ecc_mode_current)
    fill("mig", gpu.mig_mode)
    for key, field in _PCIE_QUERY_FIELDS.items():
        value = getattr(gpu.pcie, key)
        if filled["pcie"].get(key) is None and value is not None:
            filled["pcie"][key] = value
            unsupported.discard(field)
    # --query-gpu has no field for these three: what -q -x cannot tell is named with NVML's labels.
    for key, label, value in (("bar1_total_mib", "bar1", gpu.bar1_total_mib),
                              ("brand", "brand", brand_name(gpu.product_brand)),
                              ("virtualization_mode", "virtualization_mode",
                               virtualization_name(gpu.virtualization_mode))):
        fill(key, value)
        if filled.get(key) is None:
            unsupported.add(label)
    filled["unsupported"] = sorted(unsupported)
    return filled


def device_of(gpu: GpuQuery) -> dict[str, Any]:
    """The device fact of a GPU only -q (-x) shows: what the document cannot tell is null, and named in
    ``unsupported`` by the --query-gpu field that would have given it."""
    empty = {"index": gpu.index, "name": None, "uuid": None, "pci_bus_id": bus_key(gpu.bus_id),
             "compute_capability": None, "sm": None, "memory_total_mib": None, "bar1_total_mib": None,
             "pcie": dict.fromkeys(_PCIE_QUERY_FIELDS), "persistence_mode": None, "ecc": None, "mig": None,
             "brand": None, "virtualization_mode": None, "vbios_version": None, "nvlink": None,
             "unsupported": sorted([*_QUERY_FIELDS.values(), *_PCIE_QUERY_FIELDS.values()])}
    return fill_device(empty, gpu)
