"""What is wrong with a Proxmox VM's GPU passthrough, the `qm set` commands that fix it,
and the link from a guest's audit to the VM it runs in.

Everything here is pure: it reads the ``proxmox`` facts that ``proxmox.gather_proxmox``
wrote (the same dictionaries the JSON report holds), so it works on live hosts, on
captures and on saved reports. ``plan_vm`` decides, once, which problems a VM has;
the rules in ``findings`` word them, and ``link_guest_to_host`` hands the same
commands to the guest's report.
"""

from __future__ import annotations

import copy
import shlex
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import text
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import judgement
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import is_nvidia
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import (
    CLIQUE_OPTION,
    OVMF_MMIO64_NAME,
    REDACTED,
    parse_property_string,
    split_args,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.vm_devices import (
    is_nvidia_gpu_device,
    next_power_of_two,
)

# How a guest's material names the VM it runs in when the config came with it, and its node when nothing named it.
GIVEN_WITH_MATERIAL = "config, given in the same material"
GIVEN_NODE = "the Proxmox node that runs it"
# Guest findings whose remedy is a change to the VM on the hypervisor.
GUEST_FINDINGS_FIXED_ON_HOST = ("p2p_not_supported", "qemu_machine_i440fx")
# Host findings that decide whether the guest's driver grants P2P.
P2P_BLOCKERS = ("proxmox_iommu_off", "proxmox_vm_not_q35", "proxmox_vm_no_pcie", "proxmox_vm_function_not_explicit",
                "proxmox_vm_hidden", "proxmox_vm_no_clique")


@dataclass
class VmPlan:
    """The problems of one VM's passthrough, and the commands that fix them."""

    vm: dict[str, Any]
    gpus: list[dict[str, Any]] = field(default_factory=list)
    missing_clique: list[str] = field(default_factory=list)
    cliques: dict[int, list[str]] = field(default_factory=dict)
    hidden: list[dict[str, Any]] = field(default_factory=list)
    not_q35: bool = False
    no_pcie: list[str] = field(default_factory=list)
    not_named: list[str] = field(default_factory=list)
    balloon: str | None = None  # "ballooning": a minimum below memory; "device": the device, no target
    mmio_window_mb: int | None = None
    mmio_small: bool = False
    mmio_recommended_mb: int | None = None
    cpu_not_host: bool = False
    no_numa: bool = False
    not_vfio: dict[str, str] = field(default_factory=dict)
    group_shared: dict[str, dict[str, Any]] = field(default_factory=dict)
    hostpci_values: dict[str, str] = field(default_factory=dict)  # hostpciN -> fixed value
    commands: dict[str, str] = field(default_factory=dict)  # topic -> command, in the order to run them

    @property
    def vmid(self) -> int:
        return self.vm["vmid"]

    @property
    def several_gpus(self) -> bool:
        return len(self.gpus) >= 2


def vm_gpus(vm: dict[str, Any]) -> list[dict[str, Any]]:
    """The hostpci entries that pass an NVIDIA GPU: as the node's devices say, or, for a config given without its
    node, every entry where the facts took them for the guest's GPUs (``gpus_assumed``, audit/proxmox.py)."""
    if vm.get("gpus_assumed"):
        return [e for e in vm.get("hostpci") or [] if not e.get("mdev")]
    return [e for e in vm.get("hostpci") or [] if any(is_nvidia_gpu_device(d) for d in e.get("host_devices") or [])]


def plan_vm(vm: dict[str, Any], proxmox: dict[str, Any]) -> VmPlan:
    plan = VmPlan(vm=vm, gpus=vm_gpus(vm))
    hostpci = vm.get("hostpci") or []
    if plan.several_gpus:
        plan.missing_clique = [e["id"] for e in plan.gpus if e.get("clique") is None]
        for entry in plan.gpus:
            if entry.get("clique") is not None:
                plan.cliques.setdefault(entry["clique"], []).append(entry["id"])
        plan.not_named = [e["id"] for e in plan.gpus if e.get("multifunction") is not False]
        plan.hidden = list(vm.get("cpu_hidden_sources") or [])
    else:
        # hidden=1 is not a hostpci option at all: qemu-server refuses the line, whatever the GPU count.
        plan.hidden = [s for s in vm.get("cpu_hidden_sources") or [] if s["source"].endswith(" hidden=1")]
    if plan.gpus:
        plan.not_q35 = vm.get("machine_type") == "i440fx"
        if vm.get("machine_type") == "q35":
            plan.no_pcie = [e["id"] for e in plan.gpus if not e.get("pcie")]
        plan.cpu_not_host = vm.get("cpu_type") != "host"
        host_nodes = (proxmox.get("host") or {}).get("numa_nodes") or []
        plan.no_numa = not vm.get("numa") and len(host_nodes) > 1
    if hostpci:
        balloon, memory = vm.get("balloon"), vm.get("memory_mib") or 0
        if balloon is None or balloon >= memory > 0:
            plan.balloon = "device"
        elif balloon > 0:
            plan.balloon = "ballooning"
    needed = vm.get("mmio64_needed_mb")
    if vm.get("bios") == "ovmf" and needed:
        window = vm.get("mmio64_mb") if vm.get("mmio64_mb") is not None else vm.get("mmio64_estimated_mb")
        plan.mmio_window_mb = window
        plan.mmio_small = window is not None and window < needed
        plan.mmio_recommended_mb = next_power_of_two(needed)
    for entry in plan.gpus:
        for device in entry.get("host_devices") or []:
            if is_nvidia(device.get("vendor_id")) and device.get("driver") not in (None, "vfio-pci"):
                plan.not_vfio[device["bdf"]] = device["driver"]
    for entry in hostpci:
        for device in entry.get("host_devices") or []:
            if device.get("unrelated_in_group"):
                plan.group_shared[device["bdf"]] = {"hostpci": entry["id"], "group": device.get("iommu_group"),
                                                    "also_in_group": device["unrelated_in_group"]}
    _plan_commands(plan)
    return plan


# ---------------------------------------------------------------------------
# Commands


def qm_set_argv(vmid: int, options: list[tuple[str, str]], delete: list[str] | tuple[str, ...] = ()) -> list[str]:
    """`qm set <vmid> --name value ... [--delete a,b]` as an argv list, to run without a shell."""
    argv = ["qm", "set", str(vmid)]
    for name, value in options:
        argv += [f"--{name}", value]
    if delete:
        argv += ["--delete", ",".join(delete)]
    return argv


def qm_set(vmid: int, *options: tuple[str, str]) -> str:
    """The same command as one line for a person to paste, each word quoted for a POSIX shell."""
    return shlex.join(qm_set_argv(vmid, list(options)))


def restart_command(vmid: int) -> str:
    """Pending changes take effect when QEMU starts again; a reboot inside the guest keeps the same QEMU."""
    return f"qm shutdown {vmid} && qm start {vmid}"


def hostpci_value(options: dict[str, str], *, host: str | None, pcie: bool, drop_x_vga: bool) -> str:
    """A hostpci value: ``host`` first (None for a mapped device: the mapping names it), the other
    options as they were but ``hidden`` (no hostpci option: qemu-server refuses the line) and, when
    asked, ``x-vga`` (it makes qemu-server hide KVM), and ``pcie=1`` last where q35 allows it."""
    parts: list[str] = [host] if host else []
    for key, value in options.items():
        if key in ("host", "hidden", "pcie") or (key == "x-vga" and drop_x_vga):
            continue
        parts.append(f"{key}={value}")
    if pcie:
        parts.append("pcie=1")
    return ",".join(p for p in parts if p)


def fixed_hostpci_value(entry: dict[str, Any], *, pcie: bool, drop_x_vga: bool, name_function: bool,
                        assumed: bool = False) -> str:
    """The hostpci value with the GPU's function named, pcie=1 where q35 allows it, and no kvm=off source. With the
    GPUs ``assumed`` (no device of the node known), the GPU is taken to be function 0, as on every NVIDIA board."""
    options, _warnings = parse_property_string(entry.get("value") or "", default_key="host")
    gpu = next((d["bdf"] for d in entry.get("host_devices") or [] if is_nvidia_gpu_device(d)), None)
    if gpu is None and assumed and len(entry.get("bdfs") or []) == 1:
        gpu = entry["bdfs"][0]
    host = None if entry.get("mapping") is not None else gpu if name_function and gpu else options.get("host")
    return hostpci_value(options, host=host, pcie=pcie, drop_x_vga=drop_x_vga)


def without_kvm_off(cpu: str) -> str:
    """A `-cpu` value of args without `kvm=off`, which hides KVM and makes the driver ignore the clique."""
    return ",".join(p for p in cpu.split(",") if p.replace(" ", "").lower() not in ("kvm=off", "kvm=no"))


def clique_set(qemu_id: str, clique: int) -> list[str]:
    return ["-set", f"device.{qemu_id}.{CLIQUE_OPTION}={clique}"]


def proposed_args(plan: VmPlan) -> str | None:
    """The args line with a clique for every GPU, no kvm=off, and a big enough OVMF window; None: no change."""
    vm = plan.vm
    tokens, warnings = split_args(vm.get("args") or "")
    if warnings:
        tokens = []
    gpu_ids = {e["id"] for e in plan.gpus}
    kept: list[str] = []
    position = 0
    while position < len(tokens):
        option, value = tokens[position], tokens[position + 1] if position + 1 < len(tokens) else None
        bare = "-" + option.lstrip("-")
        if value is not None and bare == "-set" and plan.several_gpus and sets_clique_of(value, gpu_ids):
            position += 2
            continue
        if value is not None and bare == "-fw_cfg" and plan.mmio_small and OVMF_MMIO64_NAME in value:
            position += 2
            continue
        if value is not None and bare == "-cpu" and plan.several_gpus:
            value = without_kvm_off(value)
            kept += [option, value] if value else []
            position += 2
            continue
        kept.append(option)
        position += 1
    if plan.several_gpus:
        counts = Counter(e["clique"] for e in plan.gpus if e.get("clique") is not None)
        default = counts.most_common(1)[0][0] if counts else 0
        for entry in sorted(plan.gpus, key=lambda e: e["index"]):
            clique = entry["clique"] if entry.get("clique") is not None else default
            kept += clique_set(entry["id"], clique)
    if plan.mmio_small and plan.mmio_recommended_mb:
        kept += ["-fw_cfg", f"name={OVMF_MMIO64_NAME},string={plan.mmio_recommended_mb}"]
    text = " ".join(shlex.quote(t) for t in kept)
    return None if text == (vm.get("args") or "") else text


def sets_clique_of(value: str, ids: set[str]) -> bool:
    """Whether a `-set` argument gives the clique of one of the QEMU devices ``ids``."""
    head, _sep, _clique = value.partition("=")
    parts = head.split(".")
    return len(parts) >= 3 and parts[0] == "device" and parts[1] in ids and head.endswith(CLIQUE_OPTION)


def _plan_commands(plan: VmPlan) -> None:
    vm, vmid = plan.vm, plan.vmid
    if plan.not_q35:
        plan.commands["machine"] = qm_set(vmid, ("machine", "q35"))
    q35 = vm.get("machine_type") == "q35" or plan.not_q35
    hiding_x_vga = {s["source"].split()[0] for s in plan.hidden if s["source"].endswith("x-vga=1")}
    for entry in plan.gpus + [e for e in vm.get("hostpci") or [] if e.get("hidden") and e not in plan.gpus]:
        value = fixed_hostpci_value(entry, pcie=q35 and (entry in plan.gpus or bool(entry.get("pcie"))),
                                    drop_x_vga=entry["id"] in hiding_x_vga, name_function=entry["id"] in plan.not_named,
                                    assumed=bool(vm.get("gpus_assumed")))
        if value != entry.get("value") and entry["id"] not in plan.hostpci_values:
            plan.hostpci_values[entry["id"]] = value
    if plan.hostpci_values:
        plan.commands["hostpci"] = qm_set(vmid, *sorted(plan.hostpci_values.items(), key=lambda kv: int(kv[0][7:])))
    cpu_sources = [s for s in plan.hidden if s["source"] == "cpu"]
    # One command whether hidden=1 waits in [PENDING] or runs already: the one proxmox_vm_gpu runs
    # (rules/proxmox_desired.py _cpu_wanted), so the report and playbooks/proxmox_fix.yml say the same. A
    # `--revert cpu` here would also drop any other pending cpu option; --cpu keeps them.
    if cpu_sources or plan.cpu_not_host:
        options, _warnings = parse_property_string(vm.get("cpu") or "", default_key="cputype")
        rest = [f"{k}={v}" for k, v in options.items() if k not in ("cputype", "hidden")]
        plan.commands["cpu"] = qm_set(vmid, ("cpu", ",".join(["host", *rest])))
    args = proposed_args(plan) if (plan.missing_clique or plan.mmio_small
                                   or any(s["source"].startswith("args") for s in plan.hidden)) else None
    if args is not None:
        plan.commands["args"] = qm_set(vmid, ("args", args))
        if REDACTED in args:
            # The facts show args with their secrets redacted: pasted as it is, the command would write the marker
            # in place of the secret. playbooks/proxmox_fix.yml builds its change from the config on the node.
            plan.commands["args"] = (f"# args hold a secret, shown here as {REDACTED}: put it back before running "
                                     "this, or run playbooks/proxmox_fix.yml, which reads the config on the node\n"
                                     + plan.commands["args"])
    if plan.balloon:
        plan.commands["balloon"] = qm_set(vmid, ("balloon", "0"))
    if plan.no_numa:
        plan.commands["numa"] = numa_command(plan)
    if plan.commands:
        plan.commands["restart"] = restart_command(vmid)


def numa_command(plan: VmPlan) -> str:
    """vNUMA that mirrors the host nodes the VM's GPUs sit on (or every host node)."""
    vm = plan.vm
    gpu_nodes = sorted({d["numa_node"] for e in plan.gpus for d in e.get("host_devices") or []
                        if isinstance(d.get("numa_node"), int) and d["numa_node"] >= 0})
    nodes = gpu_nodes if len(gpu_nodes) > 1 else list(range(2))
    count = len(nodes)
    cores = max(1, (vm.get("vcpus") or count) // count)
    memory = (vm.get("memory_mib") or 0) // count
    options = [("numa", "1"), ("sockets", str(count)), ("cores", str(cores))]
    for n, node in enumerate(nodes):
        options.append((f"numa{n}", f"cpus={n * cores}-{(n + 1) * cores - 1},hostnodes={node},memory={memory},"
                                    "policy=bind"))
    return qm_set(plan.vmid, *options)


def all_plans(facts: dict[str, Any]) -> list[VmPlan]:
    proxmox = facts.get("proxmox") or {}
    return [plan_vm(vm, proxmox) for vm in proxmox.get("vms") or []]


# ---------------------------------------------------------------------------
# Guest to host


def uuid_variants(text: str | None) -> dict[str, str]:
    """The UUID as written, and with its first three fields byte-swapped (SMBIOS before 2.6)."""
    if not text:
        return {}
    try:
        value = uuid.UUID(text.strip())
    except ValueError:
        return {text.strip().lower(): "smbios1 uuid"}
    return {str(value): "smbios1 uuid", str(uuid.UUID(bytes=value.bytes_le)): "smbios1 uuid (byte-swapped fields)"}


def link_guest_to_host(guest_facts: dict[str, Any], host_facts: dict[str, Any],
                       host: str | None = None) -> dict[str, Any] | None:
    """The VM on this Proxmox host that runs this guest (DMI product_uuid = smbios1 uuid), or None."""
    product_uuid = ((guest_facts.get("virtualization") or {}).get("product_uuid") or "").strip().lower()
    proxmox = host_facts.get("proxmox") or {}
    if not product_uuid:
        return None
    for vm in proxmox.get("vms") or []:
        matched = uuid_variants(vm.get("smbios_uuid")).get(product_uuid)
        if not matched:
            continue
        plan = plan_vm(vm, proxmox)
        findings = [f for f in host_facts.get("findings") or [] if _concerns(f, vm["vmid"])]
        return {"host": host or proxmox.get("node"), "node": proxmox.get("node"), "vmid": vm["vmid"],
                "name": vm.get("name"), "matched_by": matched, "findings": findings,
                "commands": list(plan.commands.values()), "pending": vm.get("pending") or {}}
    return None


def _concerns(finding: dict[str, Any], vmid: int) -> bool:
    evidence = finding.get("evidence") or {}
    return evidence.get("vmid") == vmid or vmid in (evidence.get("vmids") or [])


def enrich_guest_findings(guest_facts: dict[str, Any],
                          host_facts_by_host: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The guest's facts with its host-side remedies filled in, when one of the hosts runs it.

    Returns a new dictionary; the guest's P2P finding gains ``evidence.proxmox_host`` and
    ``evidence.vmid``, and its generic remedy gives way to the commands for that VM.
    """
    links = [link for host in sorted(host_facts_by_host)
             for link in [link_guest_to_host(guest_facts, host_facts_by_host[host], host)] if link is not None]
    if not links:
        return guest_facts
    # A cloned VM keeps its smbios1 uuid. The match whose config blocks P2P explains the guest's finding
    # better than a clone without a blocker; the other matches are named rather than dropped silently.
    links.sort(key=lambda link: not any(f.get("id") in P2P_BLOCKERS for f in link["findings"]))
    link, others = links[0], [f"{o['host']} VM {o['vmid']}" for o in links[1:]]
    return with_link(guest_facts, link, others)


def with_link(guest_facts: dict[str, Any], link: dict[str, Any], others: list[str] | None = None) -> dict[str, Any]:
    """The guest's facts with the findings fixed on its VM pointing there: evidence naming the VM and its host, the
    remedy giving that VM's commands, the action ``fix_hypervisor`` (nothing done inside the guest helps), and the
    summary's judgement computed again from them. A new dictionary."""
    enriched = copy.deepcopy(guest_facts)
    for finding in enriched.get("findings") or []:
        if finding.get("id") not in GUEST_FINDINGS_FIXED_ON_HOST:
            continue
        evidence = finding.setdefault("evidence", {})
        evidence.update({"proxmox_host": link["host"], "vmid": link["vmid"], "proxmox_vm": link["name"],
                         "matched_by": link["matched_by"],
                         "host_findings": [f"{f['severity']}: {f['id']}" for f in link["findings"]],
                         "commands": list(link["commands"])})
        if others:
            evidence["also_matched"] = others
        finding["remedy"] = host_remedy(link, others)
        if finding.get("severity") != "info":
            finding["action"] = "fix_hypervisor"
    enriched["summary"] = {**(enriched.get("summary") or {}), **judgement(enriched.get("findings") or [])}
    return enriched


def ambiguous_link(guest: str, facts: dict[str, Any]) -> str | None:
    """A warning line when the guest's uuid matched VMs on several Proxmox hosts (enrich_guest_findings chose one),
    naming them all; None when it matched one or none."""
    for finding in facts.get("findings") or []:
        evidence = finding.get("evidence") or {}
        if isinstance(evidence, dict) and evidence.get("also_matched"):
            chosen = f"{evidence.get('proxmox_host')} VM {evidence.get('vmid')}"
            return (f"{guest}: its DMI product_uuid is the smbios1 uuid of VMs on several Proxmox hosts: "
                    f"{', '.join([chosen, *evidence['also_matched']])}. Its report gives the fix for {chosen} (the "
                    "one whose config blocks P2P); check that this VM runs the guest, and give each clone its own "
                    "uuid")
    return None


def host_remedy(link: dict[str, Any], also_matched: list[str] | None = None) -> str:
    vm = f"VM {link['vmid']}" + (f" ({link['name']})" if link.get("name") else "")
    blockers = [f for f in link["findings"] if f.get("id") in P2P_BLOCKERS]
    others = [f for f in link["findings"] if f.get("id") not in P2P_BLOCKERS]

    def say(which: str, **fields: Any) -> str:
        return text("p2p_not_supported", which, **fields)

    if link["matched_by"] == GIVEN_WITH_MATERIAL:
        lines = [say("given_link", vm=vm)]
        if link.get("assumed"):
            lines.append(say("given_link_assumed", assumed=link["assumed"]))
    else:
        lines = [say("host_link", vm=vm, host=link["host"], matched_by=link["matched_by"])]
    if also_matched:
        lines.append(say("host_link_ambiguous", others=", ".join(also_matched), vm=vm, host=link["host"]))
    if blockers:
        lines.append(say("host_link_blockers"))
        lines += [f"  - {f['id']}: {f['summary']}" for f in blockers]
    else:
        lines.append(say("host_link_no_blocker", vmid=link["vmid"]))
    if others:
        lines.append(say("host_link_also", others=", ".join(f"{f['id']} ({f['severity']})" for f in others)))
    if link["commands"]:
        lines.append(say("host_link_run", host=link["host"]) if link["host"] != GIVEN_NODE
                     else say("given_link_run", vmid=link["vmid"]))
        lines += [f"  {command}" for command in link["commands"]]
        lines.append(say("host_link_restart"))
    lines.append(say("host_link_then"))
    return "\n".join(lines)
