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
        out += [f"Fix for VM {vm.get('vmid')}: the commands of all its findings, then one restart:", "",
                *fenced("\n".join([*commands.values(), QM_SET_PENDING]), "text"), ""]
    return out
