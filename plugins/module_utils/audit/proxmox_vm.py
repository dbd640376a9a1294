"""A Proxmox VM's passthrough joined to what the host knows about each passed device.

Pure: a parsed ``VmConfig`` and a ``HostView`` (the host facts the configs refer
to, which ``proxmox.gather_proxmox`` reads) in, plain dictionaries out; nothing
here reads the host. The facts describe the VM as it will start next time: the
current config with its pending changes applied, because every fix here takes
effect at the next start, and so does every pending change.

``vm_facts(vmid, config, host)`` returns a dict: vmid, name, config_file,
machine, machine_type, bios, hostpci (one dict per hostpciN: its options, the
functions it passes (bdfs), multifunction, qemu_ids, clique and clique_origin,
host_device and host_devices from ``host_device_facts``, warnings), clique
(hostpciN -> clique or None), args, cpu, cpu_type, cpu_hidden and
cpu_hidden_sources, phys_bits, numa and numa_nodes, sockets, cores, vcpus,
hugepages, balloon, memory_mib, smbios_uuid, mmio64_mb, mmio64_needed_mb,
mmio64_estimated_mb, mmio64_basis, pending, pending_delete, snapshots,
description, config_lines (key -> the line the findings quote), warnings.

``host_device_facts(bdf, host, passed)`` returns: bdf, kind ("absent" when the
host has no such device), vendor_id, device_id, driver, iommu_group,
iommu_group_peers, unrelated_in_group, alone_in_group, numa_node,
bars_64bit_bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import same_slot
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import (
    MAX_HOSTPCI,
    OVMF_MMIO64_NAME,
    PCI_MAPPING_FILE,
    QEMU_SERVER_DIR,
    Cpu,
    HostPci,
    VmConfig,
    args_hide_kvm,
    clique_of,
    machine_type,
    normalize_pci_id,
    parse_args,
    parse_bool,
    parse_cpu,
    parse_hostpci,
    parse_int,
    parse_numa_node,
    parse_property_string,
    parse_smbios_uuid,
    redact_secret_values,
    without_secrets,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.vm_devices import next_power_of_two

MIB = 1 << 20

# QEMU's phys-bits for every CPU model but host (target/i386: 40); `cpu: host` takes the host's.
QEMU_DEFAULT_PHYS_BITS = 40
# OVMF sizes its 64-bit MMIO window to 1/8 of the guest's physical address space, with the
# address width capped at 46 bits (OvmfPkg PlatformInitLib: PlatformDynamicMmioWindow).
OVMF_MAX_PHYS_BITS = 46

# Keys of the qemu-server config schema whose lines the findings quote.
CONFIG_KEYS_OF_INTEREST = re.compile(
    r"^(hostpci\d+|args|cpu|machine|bios|numa\d*|hugepages|balloon|memory|smbios1|sockets|cores|name)$")


# ---------------------------------------------------------------------------
# Host devices: what the host's PCI facts say about each passed-through function


@dataclass
class HostView:
    """What the host knows that the VM configs refer to."""

    devices: dict[str, dict[str, Any]] = field(default_factory=dict)  # bdf -> device facts
    bdfs: list[str] | None = None  # every function on the bus; None when not read
    groups: dict[str, list[str]] = field(default_factory=dict)
    mappings: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    phys_bits: int | None = None
    numa_nodes: list[int] = field(default_factory=list)


def expand_host_ids(host_ids: list[str], bdfs: list[str] | None) -> tuple[list[str], bool | None]:
    """The functions a hostpci line passes, and whether there is more than one (None: unknown).

    qemu-server passes every function of `41:00` and of a `;` list as one multifunction
    device, and then names its QEMU devices hostpciN.0, hostpciN.1... instead of hostpciN.
    """
    functions: list[str] = []
    unknown = False
    for host in host_ids:
        if "." in host:
            functions.append(host)
        elif bdfs is None:
            unknown = True
            functions.append(f"{host}.0")
        else:
            found = sorted(b for b in bdfs if b.startswith(f"{host}."))
            functions += found or [f"{host}.0"]
    if len(functions) > 1:
        return functions, True
    return functions, None if unknown else False


def mapped_ids(entry: HostPci, host: HostView) -> tuple[list[str], list[str]]:
    """The host ids a `mapping=` stands for on this node: the first map entry, as qemu-server tries it first."""
    if entry.mapping is None:
        return entry.host_ids, []
    maps = host.mappings.get(entry.mapping)
    if not maps:
        return [], [f"mapping {entry.mapping!r} has no entry for this node in {PCI_MAPPING_FILE}"]
    ids = [normalize_pci_id(p) for p in (maps[0].get("path") or "").split(";") if p.strip()]
    return [i for i in ids if i], []


def host_device_facts(bdf: str, host: HostView, passed: set[str]) -> dict[str, Any]:
    device = host.devices.get(bdf)
    if device is None:
        return {"bdf": bdf, "kind": "absent", "vendor_id": None, "device_id": None, "driver": None,
                "iommu_group": None, "iommu_group_peers": [], "unrelated_in_group": [], "alone_in_group": None,
                "numa_node": None, "bars_64bit_bytes": []}
    group = device.get("iommu_group")
    peers = [m for m in host.groups.get(group or "", []) if m != bdf] if group else []
    unrelated = [p for p in peers if not same_slot(p, bdf) and p not in passed
                 and not (host.devices.get(p) or {}).get("is_bridge")]
    return {
        "bdf": bdf,
        "kind": device.get("kind"),
        "vendor_id": device.get("vendor_id"),
        "device_id": device.get("device_id"),
        "driver": device.get("driver"),
        "iommu_group": group,
        "iommu_group_peers": peers,
        "unrelated_in_group": unrelated,
        "alone_in_group": not unrelated if group else None,
        "numa_node": device.get("numa_node"),
        "bars_64bit_bytes": [b["size_bytes"] for b in device.get("bars") or []
                             if b.get("is_64bit") and isinstance(b.get("size_bytes"), int)],
    }


def mmio64_needed_bytes(hostpci: list[dict[str, Any]]) -> int:
    """The 64-bit MMIO the passed devices' BARs take in the guest.

    Each hostpci sits behind its own (root) port, whose window must hold the BARs of its
    functions aligned to the largest one: 128 GiB + 32 MiB of BARs take 256 GiB of window.
    """
    total = 0
    for entry in hostpci:
        sizes = [size for device in entry["host_devices"] for size in device["bars_64bit_bytes"]]
        if sizes:
            largest = next_power_of_two(max(sizes))
            total += -(-sum(sizes) // largest) * largest
    return total


def estimated_mmio64_window(cpu: Cpu, host: HostView) -> tuple[int | None, str]:
    """OVMF's own window when args do not set one: 1/8 of the guest's physical address space."""
    if cpu.phys_bits and cpu.phys_bits != "host":
        bits, origin = parse_int(cpu.phys_bits), f"phys-bits={cpu.phys_bits}"
    elif cpu.phys_bits == "host" or cpu.cputype == "host":
        bits, origin = host.phys_bits, "the host's physical address bits (cpu: host)"
    else:
        bits, origin = QEMU_DEFAULT_PHYS_BITS, f"QEMU's default of {QEMU_DEFAULT_PHYS_BITS} bits (cpu: {cpu.cputype})"
    if bits is None or bits < 32:
        return None, "unknown: the host's physical address bits were not read"
    bits = min(bits, OVMF_MAX_PHYS_BITS)
    return (1 << (bits - 3)) // MIB, (f"estimated from {origin}, capped at {OVMF_MAX_PHYS_BITS} by OVMF: "
                                      f"1/8 of 2^{bits} bytes (OVMF builds before edk2-stable202211 use 32 GiB)")


# ---------------------------------------------------------------------------
# One VM's facts


def vm_facts(vmid: int, config: VmConfig, host: HostView) -> dict[str, Any]:
    """Everything the rules judge about one VM, as it will start next time."""
    options = config.effective()
    warnings = list(config.warnings)
    entries = []
    for index in range(MAX_HOSTPCI):
        value = options.get(f"hostpci{index}")
        if value is not None:
            entries.append(parse_hostpci(index, value))
    machine = options.get("machine")
    kind = machine_type(machine)
    bios = options.get("bios") or "seabios"
    cpu = parse_cpu(options.get("cpu"))
    args = parse_args(options.get("args"))
    warnings += [f"cpu: {w}" for w in cpu.warnings] + [f"args: {w}" for w in args.warnings]

    resolved = []
    for entry in entries:
        ids, mapping_warnings = mapped_ids(entry, host)
        functions, multifunction = expand_host_ids(ids, host.bdfs)
        if entry.mdev:
            multifunction, functions = False, functions[:1]  # a mediated device is one virtual function
        resolved.append((entry, functions, multifunction, mapping_warnings))
    passed = {bdf for _entry, functions, _mf, _w in resolved for bdf in functions}

    hostpci, clique = [], {}
    for entry, functions, multifunction, mapping_warnings in resolved:
        qemu_ids = [f"{entry.id}.{n}" for n in range(len(functions))] if multifunction else [entry.id]
        value, origin = clique_of(args, entry.id) if not multifunction else (None, None)
        clique[entry.id] = value
        devices = [host_device_facts(bdf, host, passed) for bdf in functions]
        primary = next((d for d in devices if d["kind"] == "gpu"), devices[0] if devices else None)
        hostpci.append({
            "index": entry.index, "id": entry.id, "value": entry.value, "line": config.line(entry.id),
            "host": ";".join(entry.host_ids) or None, "mapping": entry.mapping, "bdfs": functions,
            "functions_named": entry.functions_named, "multifunction": multifunction, "qemu_ids": qemu_ids,
            "pcie": entry.pcie, "x_vga": entry.x_vga, "rombar": entry.rombar, "romfile": entry.romfile,
            "mdev": entry.mdev, "hidden": entry.hidden, "legacy_igd": entry.legacy_igd,
            "unknown_options": entry.unknown_options, "clique": value, "clique_origin": origin,
            "host_device": primary, "host_devices": devices,
            "warnings": entry.warnings + mapping_warnings,
        })

    hidden_sources = []
    if cpu.hidden:
        hidden_sources.append({"source": "cpu", "line": config.line("cpu"),
                               "pending_only": "cpu" in config.pending.options
                               and not parse_cpu(config.current.options.get("cpu")).hidden})
    elif cpu.hidden is None:
        # qemu-server sets kvm=off for x-vga devices unless the cpu line says hidden=0.
        hidden_sources += [{"source": e["id"] + " x-vga=1", "line": e["line"], "pending_only": False}
                           for e in hostpci if e["x_vga"]]
    hidden_sources += [{"source": e["id"] + " hidden=1", "line": e["line"], "pending_only": False}
                       for e in hostpci if e["hidden"]]
    if args_hide_kvm(args):
        hidden_sources.append({"source": "args -cpu kvm=off", "line": config.line("args"), "pending_only": False})

    explicit_mmio = args.fw_cfg.get(OVMF_MMIO64_NAME)
    needed = mmio64_needed_bytes(hostpci)
    estimated, basis = estimated_mmio64_window(cpu, host)
    sockets, cores = parse_int(options.get("sockets")) or 1, parse_int(options.get("cores")) or 1
    return {
        "vmid": vmid,
        "name": options.get("name"),
        "config_file": f"{QEMU_SERVER_DIR}/{vmid}.conf",
        "machine": machine,
        "machine_type": kind,
        "bios": bios,
        "hostpci": hostpci,
        "clique": clique,
        # Parsed above as written; shown with the secrets QEMU arguments can carry (a secret object's data, a
        # password property) redacted, as every secret-named key is.
        "args": redact_secret_values(options.get("args")),
        "cpu": options.get("cpu"),
        "cpu_type": cpu.cputype,
        "cpu_hidden": bool(hidden_sources),
        "cpu_hidden_sources": hidden_sources,
        "phys_bits": cpu.phys_bits,
        "numa": bool(parse_bool(options.get("numa"))),
        "numa_nodes": {k: parse_numa_node(v) for k, v in sorted(options.items()) if re.fullmatch(r"numa\d+", k)},
        "sockets": sockets,
        "cores": cores,
        "vcpus": sockets * cores,
        "hugepages": options.get("hugepages"),
        "balloon": parse_int(options.get("balloon")),
        "memory_mib": parse_int(_memory_value(options.get("memory"))) or 512,
        "smbios_uuid": parse_smbios_uuid(config.current.options.get("smbios1") or options.get("smbios1")),
        "mmio64_mb": parse_int(explicit_mmio) if explicit_mmio is not None else None,
        "mmio64_needed_mb": -(-needed // MIB) if needed else None,
        "mmio64_estimated_mb": estimated if bios == "ovmf" else None,
        "mmio64_basis": ("set in args" if explicit_mmio is not None else basis) if bios == "ovmf"
        else "SeaBIOS: sizes its 64-bit window itself",
        "pending": without_secrets(dict(sorted(config.pending.options.items()))),
        "pending_delete": list(config.pending_delete),
        "snapshots": list(config.snapshots),
        "description": redact_secret_values(config.description),
        "config_lines": {k: redact_secret_values(config.line(k))
                         for k in sorted(set(options) | set(config.pending_delete))
                         if CONFIG_KEYS_OF_INTEREST.match(k) and config.line(k)},
        "warnings": [redact_secret_values(w) for w in warnings + [f"{e['id']}: {w}" for e in hostpci
                                                                  for w in e["warnings"]]],
    }


def _memory_value(value: str | None) -> str | None:
    """`memory: 262144` or, since PVE 8.1, `memory: current=262144`."""
    if value is None:
        return None
    options, _warnings = parse_property_string(value, default_key="current")
    return options.get("current")
