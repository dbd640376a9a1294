"""``nvidia-smi -q -x`` for a host without NVML: read once, it completes the ``--query-gpu`` device facts
(BAR1, virtualization mode, brand; by PCI bus id) and gives the per-GPU health facts (audit/smi_q.py).
audit/gpus.py imports this only on such hosts."""

from __future__ import annotations

from typing import Any

from ansible.module_utils.gpuhost.audit import smi_q
from ansible.module_utils.gpuhost.audit.source import Source, command_key
from ansible.module_utils.gpuhost.parsers.nvidia_smi_common import NvidiaSmiParseError
from ansible.module_utils.gpuhost.parsers.nvidia_smi_failure import nvidia_smi_failure
from ansible.module_utils.gpuhost.parsers.nvidia_smi_q import NvidiaSmiQ, parse_nvidia_smi_q_xml

UNREADABLE = "unreadable: "


def complete_from_smi_q(source: Source, gpus: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Complete ``gpus`` (the --query-gpu facts, changed in place) from -q -x; its health facts, or None."""
    document, q_error = _read_smi_q(source)
    if document is not None:
        return _with_smi_q(gpus, document)
    if q_error is not None and (gpus["source"] is not None or q_error.startswith(UNREADABLE)):
        # Said only when it tells something: --query-gpu answered where -q -x did not, or the document
        # did not read. nvidia-smi failing alike for both is already in the GPU facts.
        source.note_problem(command_key(smi_q.SMI_Q), q_error)
    return None


def _read_smi_q(source: Source) -> tuple[NvidiaSmiQ | None, str | None]:
    """The ``nvidia-smi -q -x`` document with at least one GPU, or (None, why); why is None when
    nvidia-smi is not there at all."""
    result = source.run(smi_q.SMI_Q)
    if result.rc is None:
        return None, None
    failure = nvidia_smi_failure(result.rc, result.stdout, result.stderr)
    if failure or not result.ok:
        return None, failure or f"exit {result.rc}: {(result.stderr or result.stdout).strip()[:200]}"
    try:
        document = parse_nvidia_smi_q_xml(result.stdout)
    except NvidiaSmiParseError as exc:
        return None, f"{UNREADABLE}{exc}"
    if not document.gpus:
        return None, f"{UNREADABLE}the document lists no GPU; --query-gpu was used instead"
    if document.complete is False:
        source.note_problem(command_key(smi_q.SMI_Q), "the document ends before </nvidia_smi_log>: the GPUs and "
                            "fields it holds are used, what was cut off is null")
    return document, None


def _with_smi_q(gpus: dict[str, Any], document: NvidiaSmiQ) -> list[dict[str, Any]]:
    """Complete the --query-gpu facts from -q -x, GPU by GPU by PCI bus id; the per-GPU health facts."""
    found = smi_q.by_bus_id(document)
    gpus["devices"] = [smi_q.fill_device(device, found[key]) if key in found else device
                       for device in gpus["devices"] for key in [smi_q.bus_key(device.get("pci_bus_id")) or ""]]
    if gpus.get("cuda_driver_version") is None and document.cuda_version:
        gpus["cuda_driver_version"] = document.cuda_version
    if gpus.get("driver_version") is None and document.driver_version:
        gpus["driver_version"] = document.driver_version
    indexes = {key: device["index"] for device in gpus["devices"]
               for key in [smi_q.bus_key(device.get("pci_bus_id"))] if key and isinstance(device.get("index"), int)}
    return smi_q.health_facts(document, indexes)
