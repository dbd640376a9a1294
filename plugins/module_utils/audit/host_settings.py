"""Host settings that the PCIe Blackwell rules (rules/pcie_blackwell.py) and the NCCL topology check
(rules/nccl_amd_topology.py) judge: the CPU's vendor and nvidia_uvm's ``uvm_disable_hmm``. Read only.

``uvm_disable_hmm`` is a ``bool`` module parameter, mode 0444 (kernel-open/nvidia-uvm/uvm_hmm.c:
``module_param(uvm_disable_hmm, bool, 0444)``), so sysfs prints what the kernel's param_get_bool prints,
``Y`` or ``N``. The file exists only while nvidia_uvm is loaded; absent (module not loaded, a capture made
before the audit read it, material) it is null: what HMM will do is not known, never assumed.
The kernel command line (``pcie_aspm=off``) is the audit's kernel section (audit/kernel.py), read once.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source

UVM_DISABLE_HMM = "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm"
CPUINFO = "/proc/cpuinfo"
# The CPUID vendor strings NCCL itself tells apart (src/graph/xml.cc kvDictCpuVendor); another vendor is null.
CPU_VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}
VENDOR_LINE = re.compile(r"^vendor_id\s*:\s*(?P<vendor>\S+)", re.MULTILINE)


def parse_module_bool(value: str | None) -> bool | None:
    """A bool module parameter as sysfs prints it ('Y'/'N'; '1'/'0' from a hand-typed paste); None otherwise."""
    word = (value or "").strip().upper()
    return {"Y": True, "1": True, "N": False, "0": False}.get(word)


def cpu_vendor(cpuinfo: str | None) -> str | None:
    """Without the proxmox module (audit/passthrough_host.py has its own): it is loaded on Proxmox nodes only."""
    match = VENDOR_LINE.search(cpuinfo or "")
    return CPU_VENDORS.get(match.group("vendor")) if match else None


def gather_host_settings(source: Source) -> dict[str, Any]:
    return {"cpu_vendor": cpu_vendor(source.read_text(CPUINFO)),
            "uvm_disable_hmm": parse_module_bool(source.read_value(UVM_DISABLE_HMM))}
