"""Rules about GPUs the host has but cannot use: driver bound and nothing answers, a driver/library
version mismatch, a loaded module that binds no GPU, a GPU lost from the bus, a GPU NVML cannot open.

Each is critical: a host whose GPUs cannot be used is never fit, whatever else is right with it.
The summary says what was seen and its cause; the catalog's remedy what to do.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make, text
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions, gpu_devices, pci_gpus

# What a GPU bound to nvidia and unreadable by both NVML and nvidia-smi suffers from, by cause. The
# keys are the remedy texts of ``gpus_unusable`` in the catalog.
UNUSABLE_CAUSES = {
    "no_permission": "the audit's user may not open the GPUs' device files (/dev/nvidia*)",
    "driver_not_answering": "the driver is bound in sysfs but does not answer: its control device "
                            "(/dev/nvidiactl) is missing or the driver failed after it bound",
    "user_space_missing": "the driver's user-space part is missing: no NVML library (libnvidia-ml.so) and no "
                          "nvidia-smi",
    "not_verifiable": "NVML was not read and nvidia-smi did not answer, so nothing shows that the GPUs work",
    "hung": "nvidia-smi or NVML hung (no answer within the audit's time limit): a wedged GPU or driver",
    "gpu_lost": "a GPU fell off the bus and takes NVML down with it",
    "no_devices": "the driver initialised no GPU although they are bound to it",
    "other": "NVML and nvidia-smi both failed",
}
# Why NVML may refuse one GPU's handle, by the error nvidia-ml-py names.
HANDLE_CAUSES = {
    "NVMLError_InsufficientPower": "its auxiliary power cables are not connected, or the supply cannot feed it",
    "NVMLError_NoPermission": "the audit's user may not open its device file (/dev/nvidiaN)",
    "NVMLError_IrqIssue": "the kernel could not set up its interrupts (MSI/MSI-X)",
    "NVMLError_ResetRequired": "it needs a reset before it can be used",
    "NVMLError_Memory": "the driver could not allocate memory for it",
    "NVMLError_CorruptedInforom": "its InfoROM is corrupted",
}
_LIBRARY_VERSION_RE = re.compile(r"NVML library version:\s*([0-9][0-9.]*)")


def _bound_to_nvidia(facts: dict[str, Any]) -> list[str]:
    return [d["bdf"] for d in pci_gpus(facts) if d.get("driver") == "nvidia"]


def _errors(gpus: dict[str, Any]) -> tuple[str, str]:
    return str(gpus.get("nvml_error") or ""), str(gpus.get("nvidia_smi_error") or "")


def is_version_mismatch(nvml_error: str, smi_error: str) -> bool:
    return "LibRmVersionMismatch" in nvml_error or smi_error.startswith("version_mismatch")


def driver_without_pci(facts: dict[str, Any]) -> bool:
    """The PCI bus was not gathered, but the nvidia module is loaded or NVML/nvidia-smi name a version mismatch:
    there are GPUs, bound to the driver, that nothing could read."""
    gpus = facts.get("gpus") or {}
    return "pci" not in facts and bool(gpus.get("kernel_module_version") or is_version_mismatch(*_errors(gpus)))


def unusable_cause(gpus: dict[str, Any]) -> str:
    nvml_error, smi_error = _errors(gpus)
    both = f"{nvml_error}\n{smi_error}"
    if "NoPermission" in both or "Insufficient Permissions" in both:
        return "no_permission"
    if "GpuIsLost" in nvml_error or smi_error.startswith("gpu_lost"):
        return "gpu_lost"
    # audit/nvml_bounded.py's words for an NVML read stopped at its deadline.
    if smi_error.startswith("timeout") or nvml_error.startswith("NVML did not answer"):
        return "hung"
    if "DriverNotLoaded" in nvml_error or smi_error.startswith("driver_not_loaded"):
        return "driver_not_answering"
    if (gpus.get("source") == "nvml" and not gpus.get("devices")) or smi_error.startswith("no_devices"):
        return "no_devices"
    smi_absent = smi_error.startswith("nvidia-smi is not installed") or smi_error.startswith("not_installed")
    if smi_absent and ("not read in this capture" in nvml_error or "nvidia-ml-py" in nvml_error):
        return "not_verifiable"
    if (smi_absent and "LibraryNotFound" in nvml_error) or smi_error.startswith("nvml_not_found"):
        return "user_space_missing"
    return "other"


def rule_gpus_unusable(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    """GPUs bound to nvidia, and neither NVML nor nvidia-smi can use one of them."""
    bound = _bound_to_nvidia(facts)
    gpus = facts.get("gpus") or {}
    if "gpus" not in facts or gpu_devices(facts) or not (bound or driver_without_pci(facts)):
        return []
    nvml_error, smi_error = _errors(gpus)
    evidence: dict[str, Any] = {"pci_gpus_bound_to_nvidia": bound if "pci" in facts else "PCI not gathered",
                                "nvml": nvml_error or None, "nvidia_smi": smi_error or None}
    which = f"{len(bound)} GPU(s) are" if bound else "The GPUs are"
    module = gpus.get("kernel_module_version")
    if is_version_mismatch(nvml_error, smi_error):
        library = _LIBRARY_VERSION_RE.search(smi_error)
        evidence.update({"kernel_module_version": module, "nvml_library_version": library.group(1) if library
                         else None})
        return [make(
            "gpu_driver_library_mismatch",
            f"{which} bound to the nvidia driver but unusable: the loaded kernel module "
            f"({module or 'version not read'}) and the user-space library "
            f"({evidence['nvml_library_version'] or 'version not read'}) are different driver versions (NVML: "
            "LibRmVersionMismatch; nvidia-smi: Driver/library version mismatch). A driver upgraded without a "
            "reboot leaves this; CUDA, NCCL and SGLang fail the same way.",
            evidence)]
    if module:
        evidence["kernel_module_version"] = module
    cause = unusable_cause(gpus)
    evidence["cause"] = cause
    return [make(
        "gpus_unusable",
        f"{which} bound to the nvidia driver but none can be used: {UNUSABLE_CAUSES[cause]}.",
        evidence, remedy=text("gpus_unusable", "remedy" if cause == "other" else cause))]


def rule_driver_not_binding(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    """The nvidia module is loaded, yet GPUs on the bus have no driver (the driver refused them)."""
    modules = (facts.get("iommu") or {}).get("modules") or {}
    if not modules.get("nvidia"):
        return []
    unbound = {d["bdf"]: d.get("driver") or "none" for d in pci_gpus(facts)
               if d.get("driver") not in ("nvidia", "vfio-pci", "nouveau")}
    if not unbound:
        return []
    gpus = facts.get("gpus") or {}
    usable = len(gpu_devices(facts))
    evidence = {"module_loaded": "nvidia", "kernel_module_version": gpus.get("kernel_module_version"),
                "gpus_without_driver": unbound, "usable_gpus": usable,
                "nvml": gpus.get("nvml_error"), "nvidia_smi": gpus.get("nvidia_smi_error")}
    return [make(
        "nvidia_driver_not_binding",
        f"The nvidia kernel module is loaded but {len(unbound)} GPU(s) on the PCI bus have no driver bound: the "
        f"driver refused them at probe; {usable} GPU(s) usable.",
        evidence, severity="critical" if not usable else "warning")]


def xid_events(facts: dict[str, Any]) -> list[dict[str, Any]]:
    kernel_log = ((facts.get("health") or {}).get("kernel_log")) or {}
    return [e for e in kernel_log.get("xid_events") or [] if isinstance(e, dict)]


def event_text(event: dict[str, Any], names: dict[str, str]) -> str:
    """``Xid 48 on GPU2 (0000:3a:00.0), 3 time(s) from 812.4 s: <message>``."""
    bus = event.get("pci_bus_id")
    where = f"{names[bus]} ({bus})" if bus in names else bus or "an unnamed GPU"
    what = f"Xid {event['xid']}" if event.get("xid") is not None else "fallen off the bus"
    when = event.get("first_time") or (f"{event['first_uptime_s']} s after boot"
                                       if event.get("first_uptime_s") is not None else "")
    return f"{what} on {where}, {event.get('count', 1)} time(s){', first at ' + when if when else ''}: " \
           f"{str(event.get('message') or '')[:160]}"


def gpu_names(facts: dict[str, Any]) -> dict[str, str]:
    """PCI address -> ``GPU<NVML index>``."""
    return {d["pci_bus_id"]: f"GPU{d.get('index')}" for d in gpu_devices(facts) if d.get("pci_bus_id")}


def rule_gpu_lost(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    """NVML says a GPU is lost, nvidia-smi says so, or the kernel log has Xid 79 / fallen off the bus."""
    gpus = facts.get("gpus") or {}
    lost = {index: error for index, error in (gpus.get("nvml_handle_errors") or {}).items() if "GpuIsLost" in error}
    smi_lost = str(gpus.get("nvidia_smi_error") or "").startswith("gpu_lost")
    events = [e for e in xid_events(facts) if e.get("xid") == 79 or e.get("kind") == "fallen_off_bus"]
    if not (lost or smi_lost or events):
        return []
    names = gpu_names(facts)
    buses = sorted({e["pci_bus_id"] for e in events if e.get("pci_bus_id")})
    listed = set(names)
    evidence: dict[str, Any] = {
        "nvml_handles_lost": [f"GPU{index}" for index in lost],
        "nvidia_smi": gpus.get("nvidia_smi_error") if smi_lost else None,
        "kernel_log": [event_text(e, names) for e in events[:10]],
        "pci_gpus_not_listed": [d["bdf"] for d in pci_gpus(facts)
                                if d.get("driver") == "nvidia" and d["bdf"] not in listed] if listed else [],
    }
    count = max(len(buses), len(lost), 1)
    where = ", ".join(buses) or ", ".join(evidence["nvml_handles_lost"]) or "a GPU"
    return [make(
        "gpu_lost",
        f"{count} GPU(s) fell off the bus ({where}): the driver lost contact over PCIe and the GPU stays "
        "unusable until the machine is power-cycled.",
        evidence)]


def rule_gpu_handle_failed(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    """NVML counted a GPU but could not open it, for another reason than a lost GPU."""
    gpus = facts.get("gpus") or {}
    failed = {index: error for index, error in (gpus.get("nvml_handle_errors") or {}).items()
              if "GpuIsLost" not in error}
    if not failed:
        return []
    causes = {f"GPU{index}": f"{error}: {HANDLE_CAUSES.get(error, 'read the kernel log for NVRM and Xid lines')}"
              for index, error in failed.items()}
    return [make(
        "gpu_handle_failed",
        f"NVML counts {len(failed)} GPU(s) it cannot open ({', '.join(causes)}): they cannot be used.",
        {"gpus": causes, "nvml_device_count": gpus.get("nvml_device_count"), "usable": len(gpu_devices(facts))},
        causes="; ".join(f"{gpu}: {cause}" for gpu, cause in causes.items()))]


GPU_USABLE_RULES = (
    rule_gpus_unusable,
    rule_driver_not_binding,
    rule_gpu_lost,
    rule_gpu_handle_failed,
)
