"""GPU health facts: per GPU (ECC, retired pages, row remapping, clocks event reasons, fabric state),
the kernel log's Xid events, the PCIe AER counters of the GPUs and the ports above them, and the
fabric manager on NVSwitch hosts. Everything is read through the Source.

Per-GPU readings come from the NVML snapshot (audit/nvml_health.py) when NVML was read; otherwise from
``nvidia-smi -q -x``, which audit/gpus.py reads once and converts (audit/smi_q.py) and audit/facts.py
passes to ``gather_health`` as ``parsed_gpus``; when that did not answer, from ``nvidia-smi --query-gpu``
(parsers/nvidia_smi_health.py: no row remapping, no fabric). ``gpus_from_parsed`` makes the same facts
from per-GPU dicts of raw health keys that any other parser gives.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import (
    DMESG,
    FABRIC_MANAGER,
    FABRIC_MANAGER_JOURNAL,
    FABRIC_MANAGER_PACKAGE,
    HEALTH_QUERY,
    HEALTH_QUERY_OLD,
    JOURNAL,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.nvml_health import health_from_nvml, health_from_parsed
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.pci import PCI_DIR
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.health_limits import FABRIC_MANAGER_RUNNING
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.kernel_log import parse_kernel_log, summarize_events
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import NvidiaSmiParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_failure import nvidia_smi_failure
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_health import (
    HEALTH_QUERY_FIELDS,
    HEALTH_QUERY_FIELDS_OLD,
    parse_health_query,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_query import is_invalid_field_error
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvswitch_sxid import parse_sxid_log, summarize_sxids
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_aer import AER_KINDS, parse_aer_counters
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import PciParseError

MAX_XID_ENTRIES = 50
# A fabric manager log or journal given as material (material/capture.py files it here).
FABRIC_MANAGER_LOG_MATERIAL = "fabric-manager-log"


def gather_health(source: Source, pci_facts: dict[str, Any], gpus_facts: dict[str, Any], snapshot: dict[str, Any],
                  parsed_gpus: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The ``health`` facts. ``gpus_facts`` are the ``gpus`` facts (their ``source`` says what answered);
    ``snapshot`` the NVML snapshot; ``parsed_gpus``, when given, per-GPU health facts already made
    (``gpus_from_parsed``), used instead of NVML's and nvidia-smi's."""
    if parsed_gpus is not None:
        gpus, gpus_source = parsed_gpus, (parsed_gpus[0]["source"] if parsed_gpus else None)
    elif gpus_facts.get("source") == "nvml":
        gpus, gpus_source = health_from_nvml(snapshot), "nvml"
    elif gpus_facts.get("source") == "nvidia-smi":
        gpus, gpus_source = _from_nvidia_smi(source), "nvidia-smi"
    else:
        gpus, gpus_source = [], None  # neither answered: the gpus facts and findings say why
    return {
        "gpus_source": gpus_source if gpus else None,
        "gpus": gpus,
        "kernel_log": gather_kernel_log(source),
        "aer": gather_aer(source, pci_facts),
        "fabric_manager": gather_fabric_manager(source, pci_facts),
    }


def gpus_from_parsed(rows: list[dict[str, Any]], source: str = "nvidia-smi") -> list[dict[str, Any]]:
    """Per-GPU health facts from dicts a parser made (see nvml_health.health_from_parsed for the keys)."""
    return health_from_parsed(rows, source)


def _from_nvidia_smi(source: Source) -> list[dict[str, Any]]:
    for command, fields in ((HEALTH_QUERY, HEALTH_QUERY_FIELDS), (HEALTH_QUERY_OLD, HEALTH_QUERY_FIELDS_OLD)):
        result = source.run(command.argv)
        if result.rc is None:
            return []  # not installed (or not in the capture): the GPU facts already say so
        if is_invalid_field_error(result.stdout + result.stderr) and fields is HEALTH_QUERY_FIELDS:
            continue  # a driver before R530: the clocks field has its old name
        failure = nvidia_smi_failure(result.rc, result.stdout, result.stderr)
        if failure:
            source.note_problem(command.key, failure)
            return []
        try:
            return health_from_parsed(parse_health_query(result.stdout, fields), "nvidia-smi")
        except NvidiaSmiParseError as exc:
            source.note_problem(command.key, str(exc))
            return []
    return []


def gather_kernel_log(source: Source) -> dict[str, Any]:
    """Xid events (and NVSwitch SXid events) of this boot from dmesg, or from the journal when dmesg is refused."""
    result = source.run(DMESG.argv)
    origin = "dmesg"
    if not result.ok:
        journal = source.run(JOURNAL.argv)
        if journal.ok and journal.stdout.strip():
            result, origin = journal, "journal"
        elif journal.rc is not None and not journal.ok:
            source.note_problem(JOURNAL.key, (journal.stderr or journal.stdout).strip()[:200]
                                or f"exit {journal.rc}")
    if origin == "dmesg" and not result.ok:
        # dmesg refused (kernel.dmesg_restrict, not root): noted as audit/virt.py notes it, so that one entry
        # stands for both. A journal this user may not read answers with nothing, which says nothing either.
        if result.rc is not None:
            source.note_problem(DMESG.key, (result.stderr or result.stdout).strip()[:200] or f"exit {result.rc}")
        return {"source": None, "events": 0, "xid_events": [], "sxid_events": []}
    events = parse_kernel_log(result.stdout)
    summary = summarize_events(events)
    return {"source": origin, "events": len(events), "xid_events": summary[:MAX_XID_ENTRIES],
            "sxid_events": summarize_sxids(parse_sxid_log(result.stdout))[:MAX_XID_ENTRIES]}


def gather_aer(source: Source, pci_facts: dict[str, Any]) -> list[dict[str, Any]]:
    """AER counters of every NVIDIA GPU and of each bridge above it, where the kernel keeps them."""
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for device in pci_facts.get("nvidia_devices") or []:
        if device.get("kind") != "gpu":
            continue
        targets = [(device["bdf"], "gpu")] + [(u.get("bdf"), "upstream") for u in device.get("upstream") or []]
        for bdf, role in targets:
            if not bdf or bdf in seen:
                continue
            seen.add(bdf)
            counters = _aer_of(source, bdf)
            if counters is not None:
                entries.append({"bdf": bdf, "role": role, "gpu": device["bdf"], **counters})
    return entries


def _aer_of(source: Source, bdf: str) -> dict[str, Any] | None:
    found: dict[str, Any] = {}
    for kind in AER_KINDS:
        path = f"{PCI_DIR}/{bdf}/aer_dev_{kind}"
        text = source.read_text(path)
        if text is None:
            found[kind] = None
            continue
        try:
            counters = parse_aer_counters(text)
        except PciParseError as exc:
            source.note_problem(path, str(exc))
            found[kind] = None
            continue
        found[kind] = {"total": counters.total, "nonzero": counters.nonzero()}
    return found if any(value is not None for value in found.values()) else None


def gather_fabric_manager(source: Source, pci_facts: dict[str, Any]) -> dict[str, Any] | None:
    """On a host with NVSwitches: whether nvidia-fabricmanager runs (systemctl is-active); when it does not,
    whether its log says it refused a driver of another version (``version_mismatch``; None when the log was
    not read or says no such thing); when it does, the installed package's version (``package_version``, for
    rules/health.py to compare with the loaded driver's). A fabric manager log in material is read
    whatever the PCI bus showed (``log``: its errors, parsers/fabric_manager_log.py); ``nvswitches`` is then
    None where the material showed no PCI bus."""
    switches = [d["bdf"] for d in pci_facts.get("nvidia_devices") or [] if d.get("kind") == "nvswitch"]
    material = source.material(FABRIC_MANAGER_LOG_MATERIAL)
    if not switches and material is None:
        return None
    # Imported here, not above: only a host with NVSwitches (or material) reads the fabric manager's log, and the
    # module every audited host runs compiles only what it runs (docs/development.md).
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.fabric_manager_log import (
        log_events,
        package_version,
        version_mismatch,
    )

    if material is not None:
        nvswitches = len(switches) if pci_facts.get("nvidia_devices") else None
        return {"nvswitches": nvswitches, "service": None, "version_mismatch": version_mismatch(material),
                "log": log_events(material)}
    result = source.run(FABRIC_MANAGER.argv)
    state = result.stdout.strip().splitlines()[0].strip() if result.rc is not None and result.stdout.strip() else None
    if result.rc is not None and state is None:
        source.note_problem(FABRIC_MANAGER.key, (result.stderr.strip() or f"exit {result.rc}")[:200])
    mismatch = None
    if state is not None and state not in FABRIC_MANAGER_RUNNING:
        log = source.run(FABRIC_MANAGER_JOURNAL.argv)
        mismatch = version_mismatch(log.stdout) if log.ok else None
    found: dict[str, Any] = {"nvswitches": len(switches), "service": state, "version_mismatch": mismatch}
    if state in FABRIC_MANAGER_RUNNING:
        package = source.run(FABRIC_MANAGER_PACKAGE.argv)
        found["package_version"] = package_version(package.stdout) if package.ok else None
    return found
