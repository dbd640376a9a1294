"""What the audit reads, and what material gave of it: the ``seen``, ``unread``, ``not_seen`` and
``kept`` lists of a capture's from_material section (material/capture.py builds the capture, this says what of it the
gatherers will read and why some of it goes unread).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import (
    DETECT_VIRT,
    DMESG,
    FABRIC_MANAGER,
    GPU_LISTS,
    HEALTH_QUERY,
    HEALTH_QUERY_OLD,
    JOURNAL,
    LIST_GPUS,
    LSPCI,
    P2P_LETTERS,
    PVEVERSION,
    QUERY_GPU,
    SMI_Q_TEXT,
    SMI_Q_XML,
    TOPO_MATRIX,
    TOPO_P2P,
    TOPO_P2P_MATERIAL,
    Command,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.dcgm_diag import DCGM_DIAG_MATERIAL
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.health import FABRIC_MANAGER_LOG_MATERIAL
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.pci import PCI_DIR
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.proxmox_probe import QEMU_SERVER_DIR
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_gpus import NCCL_DEBUG_MATERIAL
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_topology import NCCL_TOPO_MATERIAL

CMDLINE_FILE = "/proc/cmdline"
QUERY_KEY = QUERY_GPU.key
HEALTH_KEYS = (HEALTH_QUERY.key, HEALTH_QUERY_OLD.key)
SMI_Q_KEY = SMI_Q_TEXT.key
SMI_Q_XML_KEY = SMI_Q_XML.key


@dataclass(frozen=True)
class _Read:
    what: str
    entries: Callable[[dict[str, Any]], list[str]]  # the capture entries (section:key) that answer it
    needs: Callable[[dict[str, Any]], str | None] = lambda capture: None  # why it goes unread, or None
    # False for what only material can hold: its absence is nothing the audit missed.
    listed_when_absent: bool = True


def _commands(*keys: str) -> Callable[[dict[str, Any]], list[str]]:
    return lambda capture: [f"commands:{key}" for key in keys if key in capture["commands"]]


def _files(*paths: str) -> Callable[[dict[str, Any]], list[str]]:
    return lambda capture: [f"files:{path}" for path in paths if path in capture["files"]]


def _read(command: Command, needs: Callable[[dict[str, Any]], str | None] = lambda capture: None) -> _Read:
    return _Read(command.reads, _commands(command.key), needs)


def _under(section: str, prefix: str) -> Callable[[dict[str, Any]], list[str]]:
    return lambda capture: [f"{section}:{key}" for key in capture[section] if key == prefix or
                            key.startswith(prefix + "/")]


_GPU_LISTS = tuple(command.key for command in GPU_LISTS)


def _needs_gpus(capture: dict[str, Any]) -> str | None:
    if SMI_Q_XML_KEY in capture["commands"] or SMI_Q_KEY in capture["commands"]:
        return "the audit takes GPU health from nvidia-smi -q (-x), which the material holds"
    if any(key in capture["commands"] for key in _GPU_LISTS):
        return None
    return ("the audit reads GPU health for the GPUs a GPU list shows (--query-gpu, -q or the topology "
            "matrices), and the material holds none")


def _needs_no_xml(capture: dict[str, Any]) -> str | None:
    if SMI_Q_XML_KEY in capture["commands"]:
        return f"the audit reads {SMI_Q_KEY} only where {SMI_Q_XML_KEY} is missing, and the material holds it"
    return None


def _needs_nvml(capture: dict[str, Any]) -> str | None:
    if not any(key in capture["commands"] for key in (QUERY_KEY, SMI_Q_XML_KEY, SMI_Q_KEY)):
        return None  # the GPUs' names and UUIDs where no other output names them (audit/gpus.py)
    return "the audit compares nvidia-smi -L with NVML's GPU count, and reads it only when NVML answered"


def _needs_pci(capture: dict[str, Any]) -> str | None:
    if PCI_DIR in capture["dirs"]:
        return None
    return "the audit reads lspci only for the bridges above GPUs it found in sysfs, which the material lacks"


_READS = (
    _Read("NVML (GPU facts, P2P and topology from the driver's library)", lambda capture: []),
    _read(QUERY_GPU),
    *(_read(TOPO_P2P[letter]) for letter in P2P_LETTERS.values()),
    *(_Read(command.reads, _commands(command.key), listed_when_absent=False) for command in TOPO_P2P_MATERIAL.values()),
    _read(TOPO_MATRIX),
    _Read(HEALTH_QUERY.reads, _commands(*HEALTH_KEYS), _needs_gpus),
    _read(SMI_Q_XML),
    _read(SMI_Q_TEXT, _needs_no_xml),
    _read(LIST_GPUS, _needs_nvml),
    _read(DMESG),
    _Read(JOURNAL.reads, _commands(JOURNAL.key), listed_when_absent=False),
    _Read(f"kernel command line ({CMDLINE_FILE})", _files(CMDLINE_FILE)),
    _Read("CPU flags (/proc/cpuinfo)", _files("/proc/cpuinfo")),
    _Read("memory and huge pages (/proc/meminfo)", _files("/proc/meminfo")),
    _Read(f"PCI devices from sysfs ({PCI_DIR})", _under("dirs", PCI_DIR)),
    _Read("IOMMU groups from sysfs (/sys/kernel/iommu_groups)", _under("dirs", "/sys/kernel/iommu_groups")),
    _Read("IOMMU hardware (/sys/class/iommu)", _under("dirs", "/sys/class/iommu")),
    _Read("loaded kernel modules (/sys/module)", _under("dirs", "/sys/module")),
    _Read("NUMA nodes (/sys/devices/system/node)", _under("dirs", "/sys/devices/system/node")),
    _Read("DMI from sysfs (/sys/class/dmi/id)", _under("files", "/sys/class/dmi/id")),
    _Read(DETECT_VIRT["--vm"].reads, _commands(*(command.key for command in DETECT_VIRT.values()))),
    _Read("container markers (/run/.containerenv, /run/systemd/container, /proc/1/cgroup, /.dockerenv)",
          _files("/run/.containerenv", "/run/systemd/container", "/proc/1/cgroup", "/.dockerenv")),
    # Without sysfs, lspci is read for what it shows of a hypervisor (audit/virt.py lspci_signals).
    _read(LSPCI),
    _read(FABRIC_MANAGER, _needs_pci),
    _Read(f"Proxmox VM configs ({QEMU_SERVER_DIR})", _under("dirs", QEMU_SERVER_DIR)),
    _read(PVEVERSION),
)


_MATERIAL_READS = {NCCL_TOPO_MATERIAL: "NCCL topology dump (GPU placement, links, NUMA; virtualization signs)",
                   NCCL_DEBUG_MATERIAL: "NCCL INFO log (the GPUs its ranks used, where nothing else lists GPUs)",
                   DCGM_DIAG_MATERIAL: "DCGM diagnostic (dcgmi diag --json: per-test and per-GPU verdicts)",
                   FABRIC_MANAGER_LOG_MATERIAL: "fabric manager log (its refusals and start failures)"}


def coverage(capture: dict[str, Any], sources: dict[str, list[str]]) -> dict[str, Any]:
    seen: list[dict[str, Any]] = []
    unread: list[dict[str, Any]] = []
    not_seen: list[str] = []
    claimed: set[str] = set()
    for read in _READS:
        entries = read.entries(capture)
        claimed.update(entries)
        if not entries:
            if read.listed_when_absent:
                not_seen.append(read.what)
            continue
        origins = sorted({origin for entry in entries for origin in sources.get(entry, [])})
        why = read.needs(capture)
        if why:
            unread.append({"what": read.what, "why": why, "from": origins})
        else:
            seen.append({"what": read.what, "from": origins})
    for key, what in _MATERIAL_READS.items():  # seen when given, never missed (a live host has none)
        if f"material:{key}" in sources:
            claimed.add(f"material:{key}")
            seen.append({"what": what, "from": sorted(sources[f"material:{key}"])})
    # The VM configs in the listing are read with it.
    claimed.update(f"files:{QEMU_SERVER_DIR}/{name}" for name in capture["dirs"].get(QEMU_SERVER_DIR, []))
    kept = sorted(entry for entry in sources if entry not in claimed)
    return {"seen": seen, "unread": unread, "not_seen": not_seen, "kept": kept}
