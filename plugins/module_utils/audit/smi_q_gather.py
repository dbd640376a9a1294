"""``nvidia-smi -q -x`` for a host without NVML: read once, it completes the ``--query-gpu`` device facts
(BAR1, virtualization mode, brand; by PCI bus id) and gives the per-GPU health facts (audit/smi_q.py).
audit/gpus.py imports this only on such hosts.

Where material holds no ``-q -x``, ``nvidia-smi -q``'s text is read instead, to the same facts:
an nvidia-bug-report holds that one. Where ``--query-gpu`` gave no GPU list (material without it), the
document's GPUs become the device facts."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import smi_q
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import SMI_Q_TEXT, SMI_Q_XML, Command
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import NvidiaSmiParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_failure import nvidia_smi_failure
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q import (
    NvidiaSmiQ,
    parse_nvidia_smi_q_text,
    parse_nvidia_smi_q_xml,
)

UNREADABLE = "unreadable: "


def complete_from_smi_q(source: Source, gpus: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Complete ``gpus`` (the --query-gpu facts, changed in place) from -q -x; its health facts, or None."""
    command = SMI_Q_XML
    document, q_error = _read_smi_q(source, command)
    if document is None and q_error is None and not source.seen("commands", command.key):
        # Material without -q -x (a bug report holds -q). A host that has nvidia-smi answers -q -x.
        command = SMI_Q_TEXT
        document, q_error = _read_smi_q(source, command)
    if document is not None:
        return _with_smi_q(source, gpus, document)
    if q_error is not None and (gpus["source"] is not None or q_error.startswith(UNREADABLE)):
        # Said only when it tells something: --query-gpu answered where -q -x did not, or the document
        # did not read. nvidia-smi failing alike for both is already in the GPU facts.
        source.note_problem(command.key, q_error)
    return None


def _read_smi_q(source: Source, command: Command) -> tuple[NvidiaSmiQ | None, str | None]:
    """The ``nvidia-smi -q -x`` (or ``-q``) document with at least one GPU, or (None, why); why is None
    when nvidia-smi is not there at all, or the material holds no such output."""
    result = source.run(command.argv)
    if result.rc is None:
        return None, None
    failure = nvidia_smi_failure(result.rc, result.stdout, result.stderr)
    if failure or not result.ok:
        return None, failure or f"exit {result.rc}: {(result.stderr or result.stdout).strip()[:200]}"
    parse = parse_nvidia_smi_q_xml if command is SMI_Q_XML else parse_nvidia_smi_q_text
    try:
        document = parse(result.stdout)
    except NvidiaSmiParseError as exc:
        return None, f"{UNREADABLE}{exc}"
    if not document.gpus:
        return None, f"{UNREADABLE}the document lists no GPU; --query-gpu was used instead"
    if document.complete is False:
        source.note_problem(command.key, "the document ends before </nvidia_smi_log>: the GPUs and "
                            "fields it holds are used, what was cut off is null")
    return document, None


def _with_smi_q(source: Source, gpus: dict[str, Any], document: NvidiaSmiQ) -> list[dict[str, Any]]:
    """Complete the --query-gpu facts from -q -x, GPU by GPU by PCI bus id; the per-GPU health facts."""
    if not any(device.get("pci_bus_id") for device in gpus["devices"]):
        _devices_from_document(source, gpus, document)
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


def _devices_from_document(source: Source, gpus: dict[str, Any], document: NvidiaSmiQ) -> None:
    """No --query-gpu list (material without it): the document's GPUs are the devices. The matrices may have
    shown the GPUs' indexes; a document that shows another number of GPUs is said to differ."""
    shown = len(gpus["devices"])
    if shown and shown != len(document.gpus):
        source.note_problem("nvidia-smi topo", f"the matrices show {shown} GPUs, nvidia-smi -q shows "
                                               f"{len(document.gpus)}: the GPU facts are -q's")
    gpus["devices"] = [smi_q.device_of(gpu) for gpu in document.gpus]
    gpus.update(source="nvidia-smi", count=len(gpus["devices"]))
    gpus.pop("nvidia_smi_error", None)
