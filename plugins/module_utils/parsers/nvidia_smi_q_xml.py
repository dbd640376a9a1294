"""Reader of ``nvidia-smi -q -x`` (XML): every ``<gpu>``, into nvidia_smi_q_result's types.

Pure functions from text to typed data: no Ansible, no subprocess. ``parse_nvidia_smi_q_xml`` raises
only ``NvidiaSmiParseError`` (a ``ValueError``), saying what it expected, what it found and what to do.
Output schema: ``NvidiaSmiQ`` with ``format`` "xml", as described in nvidia_smi_q_result.

The document (DTDs ``nvsmi_device_v10.dtd`` to ``v13``, see tests/fixtures/nvidia-smi/SOURCES.md):
``<nvidia_smi_log>`` holds ``timestamp``, ``driver_version``, ``cuda_version``, ``attached_gpus`` and
one ``<gpu id="00000000:41:00.0">`` per GPU. Sections nest as in the text (``pci`` /
``pci_gpu_link_info`` / ``pcie_gen`` / ``max_link_gen``); a section nvidia-smi cannot fill is the
element's text (``<remapped_rows>N/A</remapped_rows>``). Names changed with the drivers:
``clocks_throttle_reasons`` / ``clocks_throttle_reason_*`` became ``clocks_event_reasons`` /
``clocks_event_reason_*`` in R535; the ECC counters went from ``single_bit`` / ``double_bit`` (with
``device_memory`` ... ``total``) to ``sram_*`` / ``dram_*`` with Ampere, ``sram_uncorrectable`` split
into ``_parity`` and ``_secded`` in R550; ``fabric`` gained ``cliqueId``, ``clusterUuid`` and
``health`` in R550.

The first line, ``<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">``, names a DTD that is never
read: it is taken off before parsing, and a document that declares entities or an internal DTD
subset is refused, so entity expansion (the "billion laughs") cannot happen. A document cut short
gives the GPUs and fields it holds, with ``complete`` False; text before the XML declaration (a
prompt line) and after ``</nvidia_smi_log>`` is ignored, as are mpirun and Slurm prefixes.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import without_surrogates
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import output_lines, smi_error
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q_build import (
    build_gpu,
    is_unavailable,
    snake,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q_result import NvidiaSmiQ
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q_text import clean_paste_lines
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.safe_xml import pull_parse

_WHAT = "nvidia-smi -q -x"
_START_RE = re.compile(r"<\?xml|<!DOCTYPE|<nvidia_smi_log\b")
_DECLARATION_RE = re.compile(r"^\s*<\?xml[^>]*\?>")
# The DOCTYPE nvidia-smi writes: a name and an external identifier, no internal subset.
_QUOTED = r"(?:\"[^\"<>\[\]]*\"|'[^'<>\[\]]*')"
_DOCTYPE_RE = re.compile(rf"<!DOCTYPE\s+[\w.:-]+(?:\s+(?:SYSTEM|PUBLIC)(?:\s+{_QUOTED}){{1,2}})?\s*>")
_END_TAG = "</nvidia_smi_log>"
_REASON_PREFIX_RE = re.compile(r"^clocks_(?:event|throttle)_reasons?_")
# Tags whose name is not the NVML name of the reason.
_REASON_NAMES = {"display_clocks_setting": "display_clock_setting", "idle": "gpu_idle"}


def looks_like_xml(text: str) -> bool:
    """True for ``nvidia-smi -q -x`` output (or anything that starts as an XML document)."""
    if "<nvidia_smi_log" in text:
        return True
    first = next((line.strip() for line in text.split("\n") if line.strip()), "")
    return first.startswith(("<?xml", "<!DOCTYPE", "<"))


def parse_nvidia_smi_q_xml(text: Any) -> NvidiaSmiQ:
    """Every GPU of ``nvidia-smi -q -x`` output; see the module docstring."""
    # expat encodes its input: a lone surrogate would escape as UnicodeEncodeError, not as this parser's error.
    document = without_surrogates(_document(output_lines(text, _WHAT)))
    root, complete = _parse(document)
    if root.tag != "nvidia_smi_log":
        raise smi_error(_WHAT, "an <nvidia_smi_log> document", document,
                        "Pass the output of nvidia-smi -q -x; other XML is not read here.")
    gpus = root.findall("gpu")
    attached = _header_int(root, "attached_gpus")
    return NvidiaSmiQ(
        format="xml",
        gpus=[build_gpu(_fields(gpu), position, position if attached == len(gpus) else None)
              for position, gpu in enumerate(gpus)],
        driver_version=_header_text(root, "driver_version"),
        cuda_version=_header_text(root, "cuda_version"),
        attached_gpus=attached,
        timestamp=_header_text(root, "timestamp"),
        complete=complete,
    )


# --------------------------------------------------------------------------------------------------
# The document, safely


def _document(lines: list[str]) -> str:
    text = "\n".join(clean_paste_lines(lines))
    start = _START_RE.search(text)
    if start is None:
        raise smi_error(_WHAT, "an XML document starting with <?xml or <nvidia_smi_log>", text,
                        "Pass the output of nvidia-smi -q -x, or the text of nvidia-smi -q to the text reader.")
    text = text[start.start():]
    end = text.rfind(_END_TAG)
    if end >= 0:
        text = text[:end + len(_END_TAG)]
    text = _DECLARATION_RE.sub("", text, count=1)
    if re.search(r"<!ENTITY", text, re.IGNORECASE):
        raise smi_error(_WHAT, "nvidia-smi's XML, which declares no entities", text[text.upper().find("<!ENTITY"):],
                        "Refusing a document that declares entities (it could expand without bound); "
                        "pass the output of nvidia-smi -q -x as it printed it.")
    text = _DOCTYPE_RE.sub("", text, count=1)
    if re.search(r"<!DOCTYPE", text, re.IGNORECASE):
        raise smi_error(_WHAT, '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_vNN.dtd">, without an internal subset',
                        text[text.upper().find("<!DOCTYPE"):],
                        "Refusing a DTD inside the document; pass the output of nvidia-smi -q -x as it printed it.")
    return text


def _parse(document: str) -> tuple[ET.Element, bool]:
    """The root element and whether the document was whole (safe_xml: elements read before a break are kept)."""
    root, error = pull_parse(document)
    if root is None:
        raise smi_error(_WHAT, "an XML document", document,
                        f"The XML could not be read ({error}); pass the output of nvidia-smi -q -x unchanged.")
    return root, error is None


# --------------------------------------------------------------------------------------------------
# A <gpu>'s fields


def _text(element: ET.Element | None) -> str | None:
    """An element's text; None for a missing element or a section (an element with children)."""
    if element is None or len(element):
        return None
    return (element.text or "").strip()


def _at(element: ET.Element, path: str) -> str | None:
    return _text(element.find(path))


def _section(element: ET.Element, path: str) -> ET.Element | str | None:
    """A section element; the text printed in its place (``N/A``); or None when missing."""
    found = element.find(path)
    if found is None:
        return None
    if len(found):
        return found
    return (found.text or "").strip()


def _header_text(root: ET.Element, tag: str) -> str | None:
    value = _at(root, tag)
    return None if value is None or is_unavailable(value) else value


def _header_int(root: ET.Element, tag: str) -> int | None:
    value = _at(root, tag)
    return int(value) if value is not None and re.fullmatch(r"\d{1,6}", value) else None


def _fields(gpu: ET.Element) -> dict[str, Any]:
    link = "pci/pci_gpu_link_info/"
    return {
        "bus_id": gpu.get("id") or _at(gpu, "pci/pci_bus_id"),
        "product_name": _at(gpu, "product_name"),
        "product_brand": _at(gpu, "product_brand"),
        "product_architecture": _at(gpu, "product_architecture"),
        "vbios_version": _at(gpu, "vbios_version"),
        "uuid": _at(gpu, "uuid"),
        "minor_number": _at(gpu, "minor_number"),
        "compute_capability": _at(gpu, "compute_cap"),
        "persistence_mode": _at(gpu, "persistence_mode"),
        "mig_mode": _at(gpu, "mig_mode/current_mig"),
        "pcie_gen_current": _at(gpu, link + "pcie_gen/current_link_gen"),
        "pcie_gen_max": _at(gpu, link + "pcie_gen/max_link_gen"),
        "pcie_gen_device_max": _at(gpu, link + "pcie_gen/max_device_link_gen"),
        "pcie_gen_host_max": _at(gpu, link + "pcie_gen/max_host_link_gen"),
        "pcie_width_current": _at(gpu, link + "link_widths/current_link_width"),
        "pcie_width_max": _at(gpu, link + "link_widths/max_link_width"),
        "bar1_total": _at(gpu, "bar1_memory_usage/total"),
        "fb_total": _at(gpu, "fb_memory_usage/total"),
        "ecc_mode_current": _at(gpu, "ecc_mode/current_ecc"),
        "ecc_mode_pending": _at(gpu, "ecc_mode/pending_ecc"),
        "virtualization_mode": _at(gpu, "gpu_virtualization_mode/virtualization_mode"),
        "host_vgpu_mode": _at(gpu, "gpu_virtualization_mode/host_vgpu_mode"),
        "ecc_errors": _ecc_errors(_section(gpu, "ecc_errors")),
        "retired_pages": _mapped(_section(gpu, "retired_pages"), {
            "multiple_single_bit_retirement/retired_count": "single_bit",
            "double_bit_retirement/retired_count": "double_bit",
            "pending_blacklist": "pending_blacklist", "pending_retirement": "pending_retirement"}),
        "remapped_rows": _remapped_rows(_section(gpu, "remapped_rows")),
        "clocks_event_reasons": _reasons(_first_section(gpu, "clocks_event_reasons", "clocks_throttle_reasons")),
        "fabric": _mapped(_section(gpu, "fabric"), {
            "state": "state", "status": "status", "cliqueId": "clique_id", "clusterUuid": "cluster_uuid",
            "health/summary": "health_summary"}),
    }


def _first_section(gpu: ET.Element, *tags: str) -> ET.Element | str | None:
    return next((section for section in (_section(gpu, tag) for tag in tags) if section is not None), None)


def _mapped(section: ET.Element | str | None, paths: dict[str, str]) -> dict[str, str | None] | str | None:
    if not isinstance(section, ET.Element):
        return section
    return {name: _at(section, path) for path, name in paths.items() if section.find(path) is not None}


def _ecc_errors(section: ET.Element | str | None) -> dict[str, Any] | str | None:
    if not isinstance(section, ET.Element):
        return section
    return {timescale: _ecc_counters(_section(section, timescale)) for timescale in ("volatile", "aggregate")}


def _ecc_counters(section: ET.Element | str | None) -> dict[str, str | None] | str | None:
    if not isinstance(section, ET.Element):
        return section
    counters: dict[str, str | None] = {}
    for child in section:
        if child.tag in ("single_bit", "double_bit"):
            for part in child:
                counters[f"{child.tag}_{snake(part.tag)}"] = _text(part)
        elif not len(child):
            counters[snake(child.tag)] = _text(child)
    return counters


def _remapped_rows(section: ET.Element | str | None) -> dict[str, Any] | str | None:
    rows = _mapped(section, {"remapped_row_corr": "correctable", "remapped_row_unc": "uncorrectable",
                             "remapped_row_pending": "pending", "remapped_row_failure": "failure"})
    if isinstance(rows, dict) and isinstance(section, ET.Element):
        histogram = _section(section, "row_remapper_histogram")
        if histogram is not None:
            rows["histogram"] = _mapped(histogram, {f"row_remapper_histogram_{bucket}": bucket
                                                    for bucket in ("max", "high", "partial", "low", "none")})
    return rows


def _reasons(section: ET.Element | str | None) -> dict[str, str | None] | str | None:
    if not isinstance(section, ET.Element):
        return section
    reasons: dict[str, str | None] = {}
    for child in section.iter():
        if child is not section and not len(child):
            name = _REASON_PREFIX_RE.sub("", snake(child.tag))
            reasons.setdefault(_REASON_NAMES.get(name, name), _text(child))
    return reasons
