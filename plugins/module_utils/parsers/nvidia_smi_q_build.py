"""How the strings ``nvidia-smi -q`` prints become nvidia_smi_q_result's values, for both readers.

nvidia_smi_q_text and nvidia_smi_q_xml each map a GPU's output to ``RAW_FIELDS``: every key the
string printed (missing keys: not printed), the sections (ECC errors, retired pages, remapped rows,
clocks event reasons, fabric) as mappings of their fields, or the string printed in place of the
section (``N/A``). ``build_gpu`` reads them all by one set of rules, the ones the docstring of
nvidia_smi_q_result states: unavailable markers and empty sections are None, numbers lose their units,
modes become bools, values of another form are None and noted in ``unread``, and the ECC totals are
the sums described there. ``is_unavailable`` and ``snake`` are the helpers the readers share.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q_result import (
    CLOCKS_EVENT_REASONS,
    HISTOGRAM_BUCKETS,
    EccCounts,
    EccErrors,
    Fabric,
    GpuQuery,
    PcieLink,
    RemappedRows,
    RetiredPages,
    normal_bus_id,
)

RAW_FIELDS = (
    "bus_id", "product_name", "product_brand", "product_architecture", "uuid", "minor_number",
    "compute_capability", "persistence_mode", "mig_mode", "pcie_gen_current", "pcie_gen_max",
    "pcie_gen_device_max", "pcie_gen_host_max", "pcie_width_current", "pcie_width_max", "bar1_total",
    "fb_total", "ecc_mode_current", "ecc_mode_pending", "virtualization_mode", "host_vgpu_mode", "vbios_version",
    # Sections: a mapping of their fields as printed, or the string printed in place of the section.
    "ecc_errors", "retired_pages", "remapped_rows", "clocks_event_reasons", "fabric",
)
"""What a reader hands to ``build_gpu``: these keys, each the string printed (sections a mapping)."""

_UNAVAILABLE = {
    "", "n/a", "na", "not supported", "unknown error", "requested functionality has been deprecated",
    "insufficient permissions", "gpu is lost", "not available", "gpu requires reset",
}
_BOOL_WORDS = {
    "enabled": True, "disabled": False, "yes": True, "no": False, "active": True, "not active": False,
    "on": True, "off": False, "true": True, "false": False,
}
_MAX_DIGITS = 18


def is_unavailable(raw: str | None) -> bool:
    """True for what nvidia-smi prints when it cannot give a value: N/A, [Not Supported]..."""
    if raw is None:
        return True
    value = raw.strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1].strip()
    return re.sub(r"\s+", " ", value).lower() in _UNAVAILABLE


class _Reader:
    """Turns the strings printed into values, noting those of an unexpected form in ``unread``."""

    def __init__(self) -> None:
        self.unread: dict[str, str] = {}

    def text(self, raw: Any, name: str) -> str | None:
        if not isinstance(raw, str):
            return self._odd(raw, name)
        return None if is_unavailable(raw) else re.sub(r"\s+", " ", raw.strip())

    def integer(self, raw: Any, name: str, unit: str = "") -> int | None:
        if not isinstance(raw, str):
            return self._odd(raw, name)
        if is_unavailable(raw):
            return None
        # Units as nvidia-smi prints them after the number: "81559 MiB", "16x", "639 bank(s)".
        pattern = rf"(\d{{1,{_MAX_DIGITS}}})\s*(?:{unit})?" if unit else rf"(\d{{1,{_MAX_DIGITS}}})"
        match = re.fullmatch(pattern, raw.strip(), re.IGNORECASE)
        if match is None and unit == "x":
            match = re.fullmatch(rf"x(\d{{1,{_MAX_DIGITS}}})", raw.strip(), re.IGNORECASE)
        if match is None:
            return self._note(raw, name)
        return int(match.group(1))

    def boolean(self, raw: Any, name: str) -> bool | None:
        if not isinstance(raw, str):
            return self._odd(raw, name)
        if is_unavailable(raw):
            return None
        word = re.sub(r"\s+", " ", raw.strip()).lower()
        if word not in _BOOL_WORDS:
            return self._note(raw, name)
        return _BOOL_WORDS[word]

    def section(self, raw: Any, name: str) -> Mapping[str, Any] | None:
        """The fields of a section, or None when it is missing or printed as N/A."""
        if raw is None or isinstance(raw, Mapping):
            return raw
        if isinstance(raw, str) and not is_unavailable(raw):
            self._note(raw, name)
        return None

    def _note(self, raw: str, name: str) -> None:
        self.unread[name] = raw.strip()
        return None

    def _odd(self, raw: Any, name: str) -> None:
        if raw is not None:
            self.unread[name] = repr(raw)
        return None


def snake(label: str) -> str:
    """``SRAM Uncorrectable SEC-DED`` -> ``sram_uncorrectable_sec_ded``: a printed label as a name."""
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def build_gpu(fields: Mapping[str, Any], position: int, index: int | None) -> GpuQuery:
    """One GPU from a reader's mapping of ``RAW_FIELDS`` to the strings printed."""
    read = _Reader()
    return GpuQuery(
        position=position,
        index=index,
        bus_id=_bus_id(fields.get("bus_id")),
        uuid=read.text(fields.get("uuid"), "uuid"),
        minor_number=read.integer(fields.get("minor_number"), "minor_number"),
        product_name=read.text(fields.get("product_name"), "product_name"),
        product_brand=read.text(fields.get("product_brand"), "product_brand"),
        product_architecture=read.text(fields.get("product_architecture"), "product_architecture"),
        vbios_version=read.text(fields.get("vbios_version"), "vbios_version"),
        compute_capability=_compute_capability(read, fields.get("compute_capability")),
        persistence_mode=read.boolean(fields.get("persistence_mode"), "persistence_mode"),
        mig_mode=read.boolean(fields.get("mig_mode"), "mig_mode"),
        pcie=PcieLink(
            gen_current=read.integer(fields.get("pcie_gen_current"), "pcie_gen_current"),
            gen_max=read.integer(fields.get("pcie_gen_max"), "pcie_gen_max"),
            gen_device_max=read.integer(fields.get("pcie_gen_device_max"), "pcie_gen_device_max"),
            gen_host_max=read.integer(fields.get("pcie_gen_host_max"), "pcie_gen_host_max"),
            width_current=read.integer(fields.get("pcie_width_current"), "pcie_width_current", "x"),
            width_max=read.integer(fields.get("pcie_width_max"), "pcie_width_max", "x"),
        ),
        bar1_total_mib=read.integer(fields.get("bar1_total"), "bar1_total", "MiB"),
        fb_total_mib=read.integer(fields.get("fb_total"), "fb_total", "MiB"),
        ecc_mode_current=read.boolean(fields.get("ecc_mode_current"), "ecc_mode_current"),
        ecc_mode_pending=read.boolean(fields.get("ecc_mode_pending"), "ecc_mode_pending"),
        ecc_errors=_ecc_errors(read, read.section(fields.get("ecc_errors"), "ecc_errors")),
        retired_pages=_retired_pages(read, read.section(fields.get("retired_pages"), "retired_pages")),
        remapped_rows=_remapped_rows(read, read.section(fields.get("remapped_rows"), "remapped_rows")),
        clocks_event_reasons=_reasons(read, read.section(fields.get("clocks_event_reasons"), "clocks_event_reasons")),
        virtualization_mode=read.text(fields.get("virtualization_mode"), "virtualization_mode"),
        host_vgpu_mode=read.text(fields.get("host_vgpu_mode"), "host_vgpu_mode"),
        fabric=_fabric(read, read.section(fields.get("fabric"), "fabric")),
        unread=read.unread,
    )


def _compute_capability(read: _Reader, raw: Any) -> str | None:
    value = read.text(raw, "compute_capability")
    if value is not None and not re.fullmatch(r"\d{1,3}\.\d{1,3}", value):
        read.unread["compute_capability"] = value
        return None
    return value


def _total(values: list[int | None]) -> int | None:
    """The sum when every counter is known; a sum above 0 of the known ones; else None."""
    known = [value for value in values if value is not None]
    if not known:
        return None
    if len(known) == len(values) or sum(known) > 0:
        return sum(known)
    return None


def _ecc_counts(read: _Reader, raw: Any, name: str) -> tuple[EccCounts | None, str | None]:
    section = read.section(raw, name)
    if not section:
        return None, None
    counters: dict[str, int | None] = {}
    for key, value in section.items():
        # Flags such as "SRAM Threshold Exceeded : No" sit among the counters; they are not counts.
        if key.endswith("_exceeded"):
            continue
        counters[key] = read.integer(value, f"{name}.{key}")
    if any(key.startswith(("single_bit_", "double_bit_")) for key in counters):
        layout = "bit"
        correctable = _bit_total(counters, "single_bit_")
        uncorrectable = _bit_total(counters, "double_bit_")
    elif any(key.startswith(("sram_", "dram_")) for key in counters):
        layout = "sram_dram"
        correctable = _total([counters.get("sram_correctable"), counters.get("dram_correctable")])
        if "sram_uncorrectable" in counters or not any(key.startswith("sram_uncorrectable_") for key in counters):
            sram = [counters.get("sram_uncorrectable")]
        else:
            sram = [counters.get("sram_uncorrectable_parity"), counters.get("sram_uncorrectable_secded")]
        uncorrectable = _total([*sram, counters.get("dram_uncorrectable")])
    else:
        layout, correctable, uncorrectable = None, None, None
    if correctable is None and uncorrectable is None and all(value is None for value in counters.values()):
        return None, layout
    return EccCounts(correctable, uncorrectable, counters), layout


def _bit_total(counters: dict[str, int | None], prefix: str) -> int | None:
    if counters.get(prefix + "total") is not None:
        return counters[prefix + "total"]
    parts = [value for key, value in counters.items() if key.startswith(prefix) and key != prefix + "total"]
    return _total(parts) if parts else None


def _ecc_errors(read: _Reader, section: Mapping[str, Any] | None) -> EccErrors | None:
    if section is None:
        return None
    volatile, layout_v = _ecc_counts(read, section.get("volatile"), "ecc_errors.volatile")
    aggregate, layout_a = _ecc_counts(read, section.get("aggregate"), "ecc_errors.aggregate")
    if volatile is None and aggregate is None:
        return None
    return EccErrors(layout_v or layout_a, volatile, aggregate)


def _retired_pages(read: _Reader, section: Mapping[str, Any] | None) -> RetiredPages | None:
    if section is None:
        return None
    pages = RetiredPages(
        single_bit=read.integer(section.get("single_bit"), "retired_pages.single_bit"),
        double_bit=read.integer(section.get("double_bit"), "retired_pages.double_bit"),
        pending_blacklist=read.boolean(section.get("pending_blacklist"), "retired_pages.pending_blacklist"),
        pending_retirement=read.boolean(section.get("pending_retirement"), "retired_pages.pending_retirement"),
    )
    return None if _nothing_known(pages) else pages


def _remapped_rows(read: _Reader, section: Mapping[str, Any] | None) -> RemappedRows | None:
    if section is None:
        return None
    histogram_section = read.section(section.get("histogram"), "remapped_rows.histogram")
    histogram = None
    if histogram_section:
        histogram = {bucket: read.integer(histogram_section.get(bucket), f"remapped_rows.histogram.{bucket}",
                                          r"banks?(?:\(s\))?") for bucket in HISTOGRAM_BUCKETS}
        if all(value is None for value in histogram.values()):
            histogram = None
    rows = RemappedRows(
        correctable=read.integer(section.get("correctable"), "remapped_rows.correctable"),
        uncorrectable=read.integer(section.get("uncorrectable"), "remapped_rows.uncorrectable"),
        pending=read.boolean(section.get("pending"), "remapped_rows.pending"),
        failure=read.boolean(section.get("failure"), "remapped_rows.failure"),
        histogram=histogram,
    )
    return None if _nothing_known(rows) else rows


def _reasons(read: _Reader, section: Mapping[str, Any] | None) -> dict[str, bool | None] | None:
    if not section:
        return None
    # nvidia-smi's order first, then any reason a newer driver adds, in the order printed.
    names = [name for name in CLOCKS_EVENT_REASONS if name in section]
    names += [name for name in section if name not in CLOCKS_EVENT_REASONS]
    reasons = {name: read.boolean(section[name], f"clocks_event_reasons.{name}") for name in names}
    return None if all(value is None for value in reasons.values()) else reasons


def _fabric(read: _Reader, section: Mapping[str, Any] | None) -> Fabric | None:
    if section is None:
        return None
    fabric = Fabric(
        state=read.text(section.get("state"), "fabric.state"),
        status=read.text(section.get("status"), "fabric.status"),
        clique_id=read.integer(section.get("clique_id"), "fabric.clique_id"),
        cluster_uuid=read.text(section.get("cluster_uuid"), "fabric.cluster_uuid"),
        health_summary=read.text(section.get("health_summary"), "fabric.health_summary"),
    )
    return None if _nothing_known(fabric) else fabric


def _nothing_known(result: Any) -> bool:
    return all(value is None for value in asdict(result).values())


def _bus_id(raw: Any) -> str | None:
    return None if not isinstance(raw, str) or is_unavailable(raw) else normal_bus_id(raw)
