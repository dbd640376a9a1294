"""What a VM's facts say of a device passed to it, and the power of two a BAR window rounds to.

Both the facts of a VM (audit/proxmox_vm.py, which sizes the 64-bit MMIO its devices need) and the
plans that fix it (proxmox_plans.py, which recommends a window) read devices and round sizes the
same way; they import it from here. Pure: dictionaries and numbers in, answers out.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import VENDOR_NVIDIA


def is_nvidia_gpu_device(device: dict[str, Any]) -> bool:
    """Whether a device of the audit's facts is an NVIDIA GPU: its ``kind`` is the audit's reading of the PCI
    class (parsers/pci_common.is_nvidia_gpu), not read again here."""
    return device.get("kind") == "gpu" and device.get("vendor_id") == VENDOR_NVIDIA


def next_power_of_two(value: int) -> int:
    return 1 << max(value - 1, 0).bit_length()
