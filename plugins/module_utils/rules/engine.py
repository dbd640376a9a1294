"""The rules engine: gpu_host facts in, findings out, worst first.

The rules live in host.py (the host itself), nccl_log_p2p.py (a pasted NCCL log's P2P), gpu_usable.py (GPUs the
host cannot use), tp_group.py (the tensor-parallel group asked for), health.py (GPU health), fabric_manager.py
(its log and package), sxids.py (NVSwitch SXids), dcgm_diag.py (DCGM's diagnostic verdicts), vbios.py (one VBIOS per
GPU model), manifest.py (the host against its class's manifest), pcie_blackwell.py (host settings of PCIe Blackwell
hosts), package_drift.py (driver packages unattended-upgrades may move) and proxmox.py (a Proxmox host's VMs); every
finding they make comes from the catalog (findings/catalog.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding, worst_first
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.dcgm_diag import DCGM_DIAG_RULES
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.fabric_manager import FABRIC_MANAGER_RULES
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.gpu_usable import GPU_USABLE_RULES
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.health import HEALTH_RULES
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.host import HOST_RULES
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.manifest import MANIFEST_RULES
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.nccl_log_p2p import NCCL_LOG_RULES
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.package_drift import PACKAGE_DRIFT_RULES
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.pcie_blackwell import PCIE_BLACKWELL_RULES
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.sxids import SXID_RULES
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.tp_group import TP_GROUP_RULES
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.vbios import VBIOS_RULES
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

Rule = Callable[[dict[str, Any], RuleOptions], list[Finding]]

# GPUs the host cannot use come first: among findings of one severity, they name the cause that the others
# (a count that differs, a matrix that lacks a GPU) only show. The Proxmox rules come last (rules_for).
RULES: tuple[Rule, ...] = (*GPU_USABLE_RULES, *HOST_RULES, *NCCL_LOG_RULES, *TP_GROUP_RULES, *HEALTH_RULES,
                           *FABRIC_MANAGER_RULES, *SXID_RULES, *DCGM_DIAG_RULES, *VBIOS_RULES, *MANIFEST_RULES,
                           *PCIE_BLACKWELL_RULES, *PACKAGE_DRIFT_RULES)


def rules_for(facts: dict[str, Any]) -> tuple[Rule, ...]:
    """RULES, and the rules of a Proxmox node's VMs when the facts hold a node's. Those (and the VM config
    parsers under them) are loaded only then: a host compiles every module it imports, on every run, and few
    hosts are Proxmox VE nodes. Without facts["proxmox"] they find nothing anyway."""
    if not facts.get("proxmox"):
        return RULES
    from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox import PROXMOX_RULES

    return (*RULES, *PROXMOX_RULES)


def evaluate(facts: dict[str, Any], options: RuleOptions | None = None,
             rules: tuple[Rule, ...] | None = None) -> list[dict[str, Any]]:
    """Every rule over the facts, worst first. A rule that trips on odd facts becomes a finding itself."""
    options = options or RuleOptions()
    rules = rules_for(facts) if rules is None else rules
    findings: list[Finding] = []
    for rule in rules:
        try:
            findings.extend(rule(facts, options))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            findings.append(make(
                "rule_error", f"The rule {rule.__name__} could not judge these facts ({type(exc).__name__}: {exc}).",
                {"rule": rule.__name__}))
    return [f.as_dict() for f in worst_first(findings)]
