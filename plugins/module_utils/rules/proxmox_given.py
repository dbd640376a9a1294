"""A guest's VM config given with its material, without the Proxmox node: which entries are GPUs, the link from the
guest's findings to that VM, and the same across the inputs of one analysis.

Support tickets carry a guest's outputs and, often, its VM's ``/etc/pve/qemu-server/<vmid>.conf`` pasted from the
node, in one input or as a second one (``guest/`` and ``pve01/``). No uuid links them (the guest's DMI is rarely
pasted), and the node's PCI devices are rarely there: the guest's GPU count decides which VM runs it and which of
its entries are GPUs, and every place that does so says it assumed. Pure: facts in, facts out.
"""

from __future__ import annotations

import copy
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import with_findings
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox import PROXMOX_RULES
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import (
    GIVEN_NODE,
    GIVEN_WITH_MATERIAL,
    _concerns,
    all_plans,
    with_link,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions, gpu_devices


def assume_guest_gpus(vms: list[dict[str, Any]], guest_gpu_count: int) -> None:
    """Which hostpci entries are GPUs, for VM configs given without their node: no device of the node is known, so
    the guest's GPU count decides. The one VM whose passthrough entries are as many as the guest's GPUs has them
    all taken for GPUs, and says so; any other VM is left with its GPUs unknown, and says what would tell."""
    unknown = [vm for vm in vms if all(d.get("kind") == "absent" for e in vm["hostpci"] for d in e["host_devices"])]
    fits = [vm for vm in unknown if guest_gpu_count and len([e for e in vm["hostpci"] if not e.get("mdev")])
            == guest_gpu_count]
    for vm in unknown:
        entries = len(vm["hostpci"])
        if len(fits) == 1 and vm is fits[0]:
            vm["gpus_assumed"] = (f"the material holds the guest's {guest_gpu_count} GPUs and this VM's {entries} "
                                  "hostpci entries, but not the node's PCI devices: every entry is taken for a GPU, "
                                  "function 0 of each for the GPU itself")
            continue
        why = (f"{entries} hostpci entries, {guest_gpu_count} GPUs in the guest's material" if guest_gpu_count
               else "the material shows no GPU of the guest")
        if len(fits) > 1:
            why = f"{len(fits)} VMs pass as many devices as the guest has GPUs"
        vm["gpus_not_known"] = (f"which hostpci entries are GPUs is not known ({why}): give the node's `lspci -nn -D "
                                "-d 10de:` or its `qm config` with the guest's `nvidia-smi -L`")


def given_vm_link(facts: dict[str, Any]) -> dict[str, Any] | None:
    """The VM whose config came in the guest's own material (no node audited, no uuid to match): the one VM of the
    material that passes GPUs through, or None when there is none or several."""
    proxmox = facts.get("proxmox") or {}
    if proxmox.get("node_evidence") is not None:
        return None
    plans = [p for p in all_plans(facts) if p.gpus]
    if len(plans) != 1:
        return None
    plan = plans[0]
    vmid = plan.vmid
    findings = [f for f in facts.get("findings") or [] if _concerns(f, vmid)]
    return {"host": proxmox.get("node") or GIVEN_NODE, "node": proxmox.get("node"), "vmid": vmid,
            "name": plan.vm.get("name"), "matched_by": GIVEN_WITH_MATERIAL, "findings": findings,
            "commands": list(plan.commands.values()), "pending": plan.vm.get("pending") or {},
            "assumed": plan.vm.get("gpus_assumed")}


def linked_to_given_vm(facts: dict[str, Any]) -> dict[str, Any]:
    """The facts with the guest's findings fixed on the VM whose config came with them pointing there (the audit of
    one input); the facts unchanged when no one VM of theirs passes GPUs."""
    link = given_vm_link(facts)
    return facts if link is None else with_link(facts, link)


def _guest_gpu_count(facts: dict[str, Any]) -> int:
    return len(gpu_devices(facts))


def _given_configs(facts: dict[str, Any]) -> bool:
    proxmox = facts.get("proxmox")
    return isinstance(proxmox, dict) and "node_evidence" in proxmox and proxmox.get("node_evidence") is None


def link_across_inputs(hosts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Guests of one analysis linked to a VM config given as another input (``pve01/`` beside ``guest/``), when no
    uuid could: a guest with GPUs and no VM config of its own, and exactly one VM among the config-only inputs
    passing as many devices as it has GPUs. The guest's facts then hold that VM as if given with them (its GPUs
    assumed where the config's input could not tell them), its findings, and the link, so that its report is the
    one its material would give in one input. Other hosts are returned unchanged."""
    guests = [h for h, f in hosts.items() if _guest_gpu_count(f) and not f.get("proxmox")]
    configs = [(h, vm) for h, f in hosts.items() if _given_configs(f) and not _guest_gpu_count(f)
               for vm in f["proxmox"].get("vms") or []]
    if not guests or not configs:
        return hosts
    linked = dict(hosts)
    for guest in guests:
        count = _guest_gpu_count(hosts[guest])
        fits = [(h, vm) for h, vm in configs if len([e for e in vm.get("hostpci") or [] if not e.get("mdev")]) == count]
        if len(fits) != 1:
            continue
        source, vm = fits[0]
        vm = copy.deepcopy(vm)
        vm.pop("gpus_not_known", None)
        assume_guest_gpus([vm], count)
        proxmox = {**copy.deepcopy(hosts[source]["proxmox"]), "vms": [vm]}
        facts = {**hosts[guest], "proxmox": proxmox}
        found = [f.as_dict() for rule in PROXMOX_RULES for f in rule(facts, RuleOptions())]
        linked[guest] = linked_to_given_vm(with_findings(facts, found))
    return linked
