"""``nvidia-smi -q`` in either form, text or XML (``-x``): the one entry point to read it.

Pure functions from text to typed data: no Ansible, no subprocess. ``parse_nvidia_smi_q`` tells the
XML of ``nvidia-smi -q -x`` from the text of ``nvidia-smi -q`` by its first line (or an
``<nvidia_smi_log>`` anywhere) and hands it to nvidia_smi_q_xml or nvidia_smi_q_text; both raise only
``NvidiaSmiParseError`` (a ``ValueError``), which says what was expected, what was found and what to
do.

Output schema: ``NvidiaSmiQ`` (``format``, ``driver_version``, ``cuda_version``, ``attached_gpus``,
``timestamp``, ``complete``, ``gpus``: one ``GpuQuery`` per GPU), as the docstring of
nvidia_smi_q_result describes field by field; ``.as_dict()`` gives plain dicts. ``health_view(gpu)``
gives the flat dict a health check reads (``ecc_mode``, ``ecc_uncorrected_volatile``,
``ecc_uncorrected_aggregate``, ``retired_pages_pending``, ``remapped_rows_pending``,
``remapped_rows_failed``, ``clocks_event_reasons`` (the active reasons' names), ``persistence_mode``,
``virtualization_mode``, ``bar1_total_mib``, ``pcie`` ``{gen_current, gen_max, width_current,
width_max}``), the fallback of the audit when NVML is missing.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import output_lines
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q_result import (
    CLOCKS_EVENT_REASONS,
    EccCounts,
    EccErrors,
    Fabric,
    GpuQuery,
    NvidiaSmiQ,
    PcieLink,
    RemappedRows,
    RetiredPages,
    health_view,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q_text import (
    clean_paste_lines,
    parse_nvidia_smi_q_text,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q_xml import (
    looks_like_xml,
    parse_nvidia_smi_q_xml,
)

__all__ = [
    "CLOCKS_EVENT_REASONS",
    "EccCounts",
    "EccErrors",
    "Fabric",
    "GpuQuery",
    "NvidiaSmiQ",
    "PcieLink",
    "RemappedRows",
    "RetiredPages",
    "health_view",
    "parse_nvidia_smi_q",
    "parse_nvidia_smi_q_text",
    "parse_nvidia_smi_q_xml",
]


def parse_nvidia_smi_q(text: Any) -> NvidiaSmiQ:
    """Every GPU of ``nvidia-smi -q`` or ``nvidia-smi -q -x`` output (``str`` or ``bytes``), or of a
    paste of either."""
    lines = clean_paste_lines(output_lines(text, "nvidia-smi -q"))
    if looks_like_xml("\n".join(lines)):
        return parse_nvidia_smi_q_xml(text)
    return parse_nvidia_smi_q_text(text)
