"""What the rules read: their options, and the views over the gpu_host facts that several share.

The facts are the same dictionaries the JSON report holds (docs/gpu_host.schema.json), so
rules run on live hosts, on captures and on saved reports alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# BAR1 is the window peers and the CPU map GPU memory through. Without Resizable
# BAR / above-4G decoding it stays at 256 MiB.
DEFAULT_MIN_BAR1_MIB = 1024


@dataclass
class RuleOptions:
    tensor_parallel_gpus: list[int] | None = None  # None: every GPU
    min_bar1_mib: int = DEFAULT_MIN_BAR1_MIB
    manifest: dict[str, Any] | None = None  # the host class's manifest, loaded (rules/manifest_format.py)


# What material may not hold, by the id facts["not_seen"] names it with (audit/seen.py decides), in
# the words findings use. Rules that need one of these say they could not judge rather than pass or fire.
NOT_SEEN = {
    "nvml": "NVML (the driver's library)",
    "gpus": "a GPU list (NVML, or nvidia-smi --query-gpu, -q -x, -q or its topology matrices)",
    "p2p": "a P2P read or write matrix (NVML, or nvidia-smi topo -p2p r)",
    "pci": "PCI devices from sysfs (/sys/bus/pci/devices)",
    "iommu": "IOMMU groups and devices from sysfs (/sys/kernel/iommu_groups, /sys/class/iommu)",
    "kernel_log": "the kernel log (dmesg)",
    "virtualization": "any sign of bare metal, a VM or a container (/proc/cpuinfo, DMI, dmesg, PCI, "
                      "systemd-detect-virt)",
}


def not_seen(facts: dict[str, Any]) -> set[str]:
    """The NOT_SEEN ids of what the audited material did not hold; empty for a host or a capture of one."""
    return {item for item in facts.get("not_seen") or [] if isinstance(item, str)}


def pci_gpus(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in (facts.get("pci") or {}).get("nvidia_devices", []) if d.get("kind") == "gpu"]


def gpu_devices(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return list((facts.get("gpus") or {}).get("devices") or [])


def is_vm(facts: dict[str, Any]) -> bool:
    return (facts.get("virtualization") or {}).get("type") == "vm"


def tp_group(facts: dict[str, Any], options: RuleOptions) -> list[int]:
    indices = [d.get("index") for d in gpu_devices(facts) if isinstance(d.get("index"), int)]
    if options.tensor_parallel_gpus is None:
        return indices
    return [i for i in options.tensor_parallel_gpus if i in indices]


def matrix_pairs(matrix: list[list[str | None]], group: list[int]) -> list[tuple[int, int, str]]:
    """(i, j, label) for every ordered pair of the group that the matrix covers. The matrices are keyed by
    NVML index; a None cell is a pair that was not read (a GPU NVML could not open) and is left out."""
    pairs = []
    for i in group:
        for j in group:
            if i != j and i < len(matrix) and j < len(matrix[i]) and matrix[i][j] is not None:
                pairs.append((i, j, matrix[i][j]))
    return pairs


def unread_pairs(matrix: list[list[str | None]], group: list[int]) -> list[tuple[int, int]]:
    """(i, j) for every ordered pair of the group the matrix has no label for (not read, or beyond it)."""
    if not matrix:
        return []
    return [(i, j) for i in group for j in group
            if i != j and not (i < len(matrix) and j < len(matrix[i]) and matrix[i][j] is not None)]


def pairs_text(pairs: list[tuple[int, int, str]], limit: int = 8) -> list[str]:
    shown = [f"GPU{i}->GPU{j}: {label}" for i, j, label in pairs[:limit]]
    if len(pairs) > limit:
        shown.append(f"... and {len(pairs) - limit} more pairs")
    return shown
