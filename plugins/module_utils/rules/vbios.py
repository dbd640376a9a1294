"""VBIOS consistency across the GPUs of one host: GPUs of one model should run one VBIOS.

Fleet health tools check it (Meta's GCM among them) because a board left on an older VBIOS after a field
update behaves differently from its neighbours (clocks, power limits, NVLink and PCIe training fixes land in
VBIOS updates) and its failures are then read as the GPU's. The versions come from NVML
(nvmlDeviceGetVbiosVersion) or from ``nvidia-smi -q`` (``VBIOS Version``, ``<vbios_version>`` in -x); a GPU
whose version was not read is left out, never counted as different.

The driver needs no such rule: one kernel module serves every GPU, and a module that differs from the
libraries is gpu_driver_library_mismatch (rules/gpu_usable.py).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions, gpu_devices


def _versions_by_model(facts: dict[str, Any]) -> dict[str, dict[str, list[int]]]:
    """model name -> VBIOS version -> the NVML indexes of the GPUs that run it (versions read only)."""
    models: dict[str, dict[str, list[int]]] = {}
    for device in gpu_devices(facts):
        name, version = device.get("name"), device.get("vbios_version")
        if isinstance(name, str) and isinstance(version, str) and version.strip():
            models.setdefault(name, {}).setdefault(version.strip(), []).append(device.get("index"))
    return models


def rule_vbios_consistency(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    differing = {model: versions for model, versions in _versions_by_model(facts).items() if len(versions) > 1}
    if not differing:
        return []
    said = "; ".join(f"{model}: " + ", ".join(f"{version} on GPU {', '.join(map(str, gpus))}"
                                              for version, gpus in sorted(versions.items()))
                     for model, versions in sorted(differing.items()))
    return [make("gpu_vbios_mismatch",
                 f"GPUs of one model run different VBIOS versions ({said}).",
                 {"vbios_by_model": differing})]


VBIOS_RULES = (rule_vbios_consistency,)
