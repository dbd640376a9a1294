"""A Proxmox host report's fix per VM: every command its findings call for, then the one restart that applies them.

Each finding's remedy gives the commands for its own problem; a VM with several findings needs them all and one
stop and start of QEMU, not one per finding. The commands come from the VM's plan (rules/proxmox_plans.py), the one
place that decides them, which the findings' remedies and a guest's link read too.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.remedies import QM_SET_PENDING
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.markdown import fenced
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import plan_vm


def vm_fix_lines(proxmox: dict[str, Any]) -> list[str]:
    """Per VM with anything to change, its whole fix in one code block; nothing when no VM needs one."""
    out: list[str] = []
    for vm in proxmox.get("vms") or []:
        commands = plan_vm(vm, proxmox).commands
        if not commands:
            continue
        assumed = [f"Assumed, as the material cannot tell: {vm['gpus_assumed']}. Check on the node before running "
                   "(`qm config`, `lspci -nn -D -d 10de:`).", ""] if vm.get("gpus_assumed") else []
        out += [f"Fix for VM {vm.get('vmid')}: the commands of all its findings, then one restart:", "", *assumed,
                *fenced("\n".join([*commands.values(), QM_SET_PENDING]), "text"), ""]
    return out


def fix_first_lines(facts: dict[str, Any]) -> list[str]:
    """The first screen's fix, before any evidence: the commands of each VM this host's findings are fixed on. A
    node's own VMs (their plans), or the VM a guest's findings were linked to (its node audited beside it, or its
    config given in the same material: the commands the link carries in the finding's evidence)."""
    out: list[str] = []
    if facts.get("proxmox"):
        out = vm_fix_lines(facts["proxmox"])
    shown = {str(vm.get("vmid")) for vm in (facts.get("proxmox") or {}).get("vms") or []} if out else set()
    for finding in facts.get("findings") or []:
        evidence = finding.get("evidence") if isinstance(finding.get("evidence"), dict) else {}
        commands = evidence.get("commands")
        if not commands or str(evidence.get("vmid")) in shown or finding.get("severity") == "info":
            continue
        shown.add(str(evidence.get("vmid")))
        out += [f"Fix for VM {evidence.get('vmid')} (`{finding.get('id')}`): run on its Proxmox node, then one "
                "restart:", "", *fenced("\n".join([*commands, QM_SET_PENDING]), "text"), ""]
    return ["## The fix", "", *out] if out else []
