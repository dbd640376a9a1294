"""Host settings the RTX PRO 6000 / RTX 5090 (PCIe Blackwell, SM120) community relies on, judged on hosts
with such GPUs only: nvidia_uvm's HMM (``uvm_disable_hmm``) and PCIe ASPM (``pcie_aspm=off``).

A GPU counts as PCIe Blackwell when NVML or nvidia-smi gives compute capability 12.x (SM120: GB202/GB203,
sold only as PCIe boards), or, where no capability was read, when its name says RTX PRO ... Blackwell or
GeForce RTX 50x0. Data-centre Blackwell (B200, SM100) and older GPUs are never judged here; a host whose
GPUs are bound to vfio-pci (a hypervisor: no GPU named) is not either. ASPM is not judged in a VM guest:
its setting there acts on emulated ports, the physical links being the hypervisor's.

What a setting was not read as (nvidia_uvm not loaded, a capture or material that lacks the file, no
/proc/cmdline) stays unknown: no finding, as nothing says the setting is wrong.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions, gpu_devices, is_vm

PCIE_BLACKWELL_NAME = re.compile(r"RTX PRO \d+ Blackwell|GeForce RTX 50\d0", re.IGNORECASE)


def pcie_blackwell_gpus(facts: dict[str, Any]) -> list[str]:
    """'GPU<index> (<name>)' of each PCIe Blackwell GPU of the host, in index order."""
    found = []
    for device in gpu_devices(facts):
        capability, name = device.get("compute_capability"), device.get("name") or ""
        if isinstance(capability, str) and capability:
            blackwell = capability.split(".")[0] == "12"
        else:
            blackwell = bool(PCIE_BLACKWELL_NAME.search(str(name)))
        if blackwell:
            found.append(f"GPU{device.get('index')} ({name or 'name not read'})")
    return found


def rule_uvm_hmm(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    gpus = pcie_blackwell_gpus(facts)
    disabled = (facts.get("host_settings") or {}).get("uvm_disable_hmm")
    if not gpus or disabled is not False:
        return []
    return [make(
        "uvm_hmm_enabled",
        f"nvidia_uvm runs with HMM allowed (uvm_disable_hmm=N) on a host with {len(gpus)} PCIe Blackwell GPU(s).",
        {"uvm_disable_hmm": False, "gpus": gpus})]


def aspm_setting(cmdline: str) -> str | None:
    """The ``pcie_aspm=`` value the kernel acts on: the last one given (each occurrence calls the kernel's
    handler again, drivers/pci/pcie/aspm.c); None when the line has none."""
    # Imported here, not above: only a host with PCIe Blackwell GPUs splits its command line here, and the module
    # every audited host runs compiles only what it runs (docs/development.md).
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.kernel_cmdline import params

    options = params(cmdline).get("pcie_aspm")
    return options[-1] if options else None


def rule_pcie_aspm(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    gpus = pcie_blackwell_gpus(facts)
    cmdline = (facts.get("kernel") or {}).get("cmdline")
    if not gpus or not isinstance(cmdline, str) or is_vm(facts):
        # A guest's ASPM setting acts on emulated ports: the physical links are the hypervisor's.
        return []
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.kernel_cmdline import CmdlineError  # see above

    try:
        setting = aspm_setting(cmdline)
    except CmdlineError:
        return []  # a line the kernel itself would not have split: nothing sure to say of it
    if setting == "off":
        return []
    return [make(
        "pcie_aspm_not_off",
        f"PCIe ASPM is not turned off ({'pcie_aspm=' + setting if setting else 'no pcie_aspm= parameter'}) "
        f"on a host with {len(gpus)} PCIe Blackwell GPU(s).",
        {"pcie_aspm": setting, "gpus": gpus})]


PCIE_BLACKWELL_RULES = (rule_uvm_hmm, rule_pcie_aspm)
