"""The audit's rules about a Proxmox VE host: the VMs that pass GPUs through, as their configs say.

``proxmox_plans.plan_vm`` decides, once per VM, which problems it has and the `qm set`
commands that fix them; each rule here words one problem as a finding from the catalog
(findings/catalog.py), with the commands for that VM filled into the catalog's remedy text.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make, text
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.remedies import proxmox_commands
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import VmPlan, all_plans
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions


def _vm_evidence(plan: VmPlan, keys: list[str], **extra: Any) -> dict[str, Any]:
    lines = plan.vm.get("config_lines") or {}
    config = [lines[k] for k in keys if lines.get(k)]
    return {"vmid": plan.vmid, "name": plan.vm.get("name"), "config_file": plan.vm.get("config_file"),
            "config": config, **extra}


def _vm_name(plan: VmPlan) -> str:
    return f"VM {plan.vmid}" + (f" ({plan.vm['name']})" if plan.vm.get("name") else "")


def _fixing_findings(plan: VmPlan) -> int:
    """How many of the VM's findings give `qm set` commands: with more than one they share one restart, which the
    report gives once with the VM's whole fix (report/proxmox_fix_md.py) instead of once per finding."""
    return sum(bool(problem) for problem in (plan.missing_clique, plan.hidden, plan.not_q35, plan.no_pcie,
                                             plan.not_named, plan.balloon, plan.mmio_small, plan.cpu_not_host,
                                             plan.no_numa))


def _run(plan: VmPlan, *topics: str) -> str:
    commands = [plan.commands[t] for t in topics if t in plan.commands]
    return proxmox_commands(commands, plan.commands.get("restart", ""), shared_with=_fixing_findings(plan) - 1,
                            vmid=plan.vmid)


def rule_proxmox_vm_no_clique(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        gpu_ids = [e["id"] for e in plan.gpus]
        keys = [*gpu_ids, "args"]
        if plan.missing_clique:
            unnamed = [i for i in plan.missing_clique if i in plan.not_named]
            findings.append(make(
                "proxmox_vm_no_clique",
                f"{_vm_name(plan)} passes {len(plan.gpus)} NVIDIA GPUs but args gives no x-nv-gpudirect-clique to "
                f"{', '.join(plan.missing_clique)}: the guest driver is not told which GPUs may peer and reports "
                "P2P as not supported (NS), so every all-reduce goes through host memory.",
                _vm_evidence(plan, keys, gpus=gpu_ids, without_clique=plan.missing_clique,
                             cliques={str(k): v for k, v in sorted(plan.cliques.items())},
                             args=plan.vm.get("args")),
                name_first=text("proxmox_vm_no_clique", "name_first", unnamed=", ".join(unnamed)) if unnamed else "",
                commands=_run(plan, *(["hostpci"] if unnamed else []), "args")))
        elif len(plan.cliques) > 1:
            findings.append(make(
                "proxmox_vm_no_clique",
                f"{_vm_name(plan)} splits its NVIDIA GPUs across cliques {sorted(plan.cliques)}: only GPUs of one "
                "clique may peer, so a tensor-parallel group spanning them has no P2P.",
                _vm_evidence(plan, keys, cliques={str(k): v for k, v in sorted(plan.cliques.items())}),
                severity="warning", remedy=text("proxmox_vm_no_clique", "split", vmid=plan.vmid)))
    return findings


def rule_proxmox_vm_hidden(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.hidden:
            continue
        sources = [s["source"] for s in plan.hidden]
        invalid = [s for s in sources if s.endswith(" hidden=1")]
        pending = [s["source"] for s in plan.hidden if s.get("pending_only")]
        shown = "; ".join(s.get("line") or s["source"] for s in plan.hidden)
        topics = [t for t, hit in (("hostpci", any(s.startswith("hostpci") for s in sources)),
                                   ("cpu", "cpu" in sources), ("args", any(s.startswith("args") for s in sources)))
                  if hit]
        summary = (f"{_vm_name(plan)} hides KVM from the guest ({shown}): QEMU runs it with "
                   "kvm=off, and the NVIDIA driver then ignores the GPU clique, so P2P stays off.")
        if invalid:
            summary += (" `hidden` is not a hostpci option: qemu-server refuses the line and the VM does not "
                        "start until it is removed.")
        if pending:
            summary += " The change is pending: it takes effect at the next start, exactly when a clique fix would."
        keys = ["cpu", "args", *[s["source"].split()[0] for s in plan.hidden if s["source"].startswith("hostpci")]]
        findings.append(make(
            "proxmox_vm_hidden", summary, _vm_evidence(plan, keys, hidden_by=sources, pending=pending),
            severity="critical" if plan.several_gpus or invalid else "warning", commands=_run(plan, *topics)))
    return findings


def rule_proxmox_vm_not_q35(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.not_q35:
            continue
        with_pcie = [e["id"] for e in plan.vm.get("hostpci") or [] if e.get("pcie")]
        machine = f"machine: {plan.vm['machine']}" if plan.vm.get("machine") else "no machine line: the default"
        findings.append(make(
            "proxmox_vm_not_q35",
            f"{_vm_name(plan)} uses the i440fx machine ({machine}): "
            "it has no PCIe, so its GPUs get no PCI Express capability, no link information and no P2P."
            + (f" pcie=1 on {', '.join(with_pcie)} needs q35: qemu-server refuses to start the VM." if with_pcie
               else ""),
            _vm_evidence(plan, ["machine", "bios", *[e["id"] for e in plan.gpus]], machine_type="i440fx"),
            commands=_run(plan, "machine", "hostpci")))
    return findings


def rule_proxmox_vm_no_pcie(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.no_pcie:
            continue
        findings.append(make(
            "proxmox_vm_no_pcie",
            f"{_vm_name(plan)} is q35 but passes {', '.join(plan.no_pcie)} without pcie=1: those GPUs sit on a "
            "conventional PCI bridge, with no PCI Express capability or link, and the driver gives them no P2P.",
            _vm_evidence(plan, plan.no_pcie, without_pcie=plan.no_pcie),
            severity="critical" if plan.several_gpus else "warning", commands=_run(plan, "hostpci")))
    return findings


def rule_proxmox_vm_function_not_explicit(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.not_named:
            continue
        entries = [e for e in plan.gpus if e["id"] in plan.not_named]
        mapped = [e["id"] for e in entries if e.get("mapping")]
        detail = {e["id"]: {"passes": e.get("bdfs"), "qemu_ids": e.get("qemu_ids")} for e in entries}
        broken = [e["id"] for e in entries if (plan.vm.get("args") or "").find(f"device.{e['id']}.") >= 0]
        known = all(e.get("multifunction") for e in entries)
        findings.append(make(
            "proxmox_vm_function_not_explicit",
            f"{_vm_name(plan)} passes {', '.join(plan.not_named)} as whole "
            + ("multifunction devices (no `.0`): QEMU names their functions hostpciN.0, hostpciN.1"
               if known else "devices (no `.0`), whose functions the material does not show: where a device has "
               "more than the GPU (its audio function), QEMU names them hostpciN.0, hostpciN.1")
            + ", so `-set device.hostpciN.x-nv-gpudirect-clique` cannot reach the GPU."
            + (f" args already sets device.{broken[0]}...: QEMU finds no device of that id and refuses to start."
               if broken else ""),
            _vm_evidence(plan, [e["id"] for e in entries], devices=detail),
            commands=_run(plan, "hostpci"),
            mapping_note=text("proxmox_vm_function_not_explicit", "mapping_note", mapped=", ".join(mapped))
            if mapped else ""))
    return findings


def rule_proxmox_vm_balloon(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.balloon:
            continue
        vm = plan.vm
        if plan.balloon == "ballooning":
            severity = "warning"
            summary = (f"{_vm_name(plan)} passes PCI devices through with ballooning on (balloon "
                       f"{vm.get('balloon')} MiB of {vm.get('memory_mib')} MiB): passthrough pins all guest memory, "
                       "so inflating the balloon frees nothing on the host and takes memory from the model server.")
        else:
            severity = "info"
            summary = (f"{_vm_name(plan)} passes PCI devices through and keeps the balloon device "
                       "(`balloon` unset): harmless while the minimum equals memory, but passthrough pins all guest "
                       "memory, so the balloon can never help; turn it off.")
        findings.append(make(
            "proxmox_vm_balloon", summary,
            _vm_evidence(plan, ["balloon", "memory"], balloon=vm.get("balloon"), memory_mib=vm.get("memory_mib")),
            severity=severity, commands=_run(plan, "balloon")))
    return findings


def rule_proxmox_vm_mmio_window_small(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.mmio_small:
            continue
        vm = plan.vm
        findings.append(make(
            "proxmox_vm_mmio_window_small",
            f"{_vm_name(plan)} gives OVMF a 64-bit MMIO window of {plan.mmio_window_mb} MiB, but its passed devices' "
            f"BARs need {vm.get('mmio64_needed_mb')} MiB: the firmware cannot map every BAR, and GPUs come up "
            "with a small or no BAR1 (or not at all).",
            _vm_evidence(plan, ["args", "cpu", "bios"], window_mb=plan.mmio_window_mb,
                         window_basis=vm.get("mmio64_basis"), needed_mb=vm.get("mmio64_needed_mb")),
            recommended_mb=plan.mmio_recommended_mb, commands=_run(plan, "args")))
    return findings


def rule_proxmox_gpu_not_vfio(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.not_vfio:
            continue
        ids = sorted({f"{d['vendor_id']}:{d['device_id']}" for e in plan.gpus for d in e.get("host_devices") or []
                      if d["bdf"] in plan.not_vfio and d.get("device_id")})
        drivers = sorted(set(plan.not_vfio.values()))
        findings.append(make(
            "proxmox_gpu_not_vfio",
            f"{_vm_name(plan)} passes GPU functions that the host has bound to {', '.join(drivers)}, not vfio-pci: "
            "the VM is not running, and at its start qemu-server must unbind them from a host driver that may "
            "hold them (or hang the host).",
            _vm_evidence(plan, [e["id"] for e in plan.gpus], drivers=plan.not_vfio),
            ids=",".join(ids),
            softdeps="".join(text("proxmox_gpu_not_vfio", "softdep", driver=d) for d in drivers)))
    return findings


def rule_proxmox_gpu_group_shared(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.group_shared:
            continue
        findings.append(make(
            "proxmox_gpu_group_shared",
            f"{_vm_name(plan)} passes devices whose IOMMU group holds other devices too: the VM takes the whole "
            "group (qemu-server binds it all to vfio-pci), or does not start, and the guest is not isolated "
            "from them.",
            _vm_evidence(plan, sorted({v["hostpci"] for v in plan.group_shared.values()}), groups=plan.group_shared)))
    return findings


def rule_proxmox_iommu_off(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    proxmox = facts.get("proxmox") or {}
    host = proxmox.get("host") or {}
    vms = [vm["vmid"] for vm in proxmox.get("vms") or []]
    if not vms or host.get("iommu_enabled") is not False:
        return []  # on, or (None) not seen in the material: rules.host.rule_not_judged says so
    vendor = host.get("cpu_vendor")
    parameters = "intel_iommu=on iommu=pt" if vendor == "intel" else "iommu=pt"
    firmware = ("VT-d" if vendor == "intel" else "IOMMU / AMD-Vi (and SVM)") if vendor in ("intel", "amd") \
        else "VT-d (Intel) or IOMMU / AMD-Vi (AMD)"
    loader = host.get("bootloader")
    loaders = [loader] if loader in ("grub", "systemd-boot") else ["grub", "systemd-boot"]
    boot = "\n".join(text("proxmox_iommu_off", name, parameters=parameters) for name in loaders)
    return [make(
        "proxmox_iommu_off",
        f"The IOMMU is off on this Proxmox host, yet {len(vms)} VM(s) pass PCI devices through: qemu-server "
        "refuses to start them ('IOMMU not present').",
        {"vmids": vms, "cpu_vendor": vendor, "iommu_cmdline": host.get("iommu_cmdline"),
         "bootloader": loader, "vfio_modules": host.get("vfio_modules")},
        firmware=firmware, boot=boot,
        vendor_note=text("proxmox_iommu_off", f"{vendor}_note") if vendor in ("amd", "intel") else "")]


def rule_proxmox_cpu_not_host(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    for plan in all_plans(facts):
        if not plan.cpu_not_host:
            continue
        vm = plan.vm
        findings.append(make(
            "proxmox_cpu_not_host",
            f"{_vm_name(plan)} runs its GPUs with CPU type {vm.get('cpu_type')}, not host: the guest misses CPU "
            "features the serving stack uses (AVX-512, AMX, ...), and its physical address bits (QEMU's default "
            "of 40) shrink OVMF's 64-bit MMIO window for large BARs.",
            _vm_evidence(plan, ["cpu"], cpu_type=vm.get("cpu_type")), commands=_run(plan, "cpu")))
    return findings


def rule_proxmox_no_numa(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    findings = []
    host_nodes = ((facts.get("proxmox") or {}).get("host") or {}).get("numa_nodes") or []
    for plan in all_plans(facts):
        if not plan.no_numa:
            continue
        gpu_nodes = {e["id"]: (e.get("host_device") or {}).get("numa_node") for e in plan.gpus}
        findings.append(make(
            "proxmox_no_numa",
            f"{_vm_name(plan)} has no vNUMA (`numa` off) on a host with {len(host_nodes)} NUMA nodes: the guest "
            "cannot keep a tensor-parallel group, its CPU threads and its memory on the node its GPUs sit on.",
            _vm_evidence(plan, ["numa", "sockets", "cores", "memory", "hugepages"], host_numa_nodes=host_nodes,
                         gpu_host_numa_node=gpu_nodes),
            commands=_run(plan, "numa")))
    return findings


PROXMOX_RULES = (
    rule_proxmox_iommu_off,
    rule_proxmox_vm_not_q35,
    rule_proxmox_vm_no_pcie,
    rule_proxmox_vm_function_not_explicit,
    rule_proxmox_vm_hidden,
    rule_proxmox_vm_no_clique,
    rule_proxmox_vm_mmio_window_small,
    rule_proxmox_gpu_not_vfio,
    rule_proxmox_gpu_group_shared,
    rule_proxmox_vm_balloon,
    rule_proxmox_cpu_not_host,
    rule_proxmox_no_numa,
)
