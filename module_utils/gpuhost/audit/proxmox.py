"""Proxmox VE hypervisor: the VMs that pass GPUs through, as their configs say.

A guest cannot see why its GPUs get no peer-to-peer: the cause sits in
``/etc/pve/qemu-server/<vmid>.conf`` on the host (machine type, ``pcie=1``,
the ``x-nv-gpudirect-clique`` options in ``args``, KVM hidden from the guest).
This module reads those configs the way qemu-server does and joins each
passed-through device to what the host's PCI facts say about it: driver,
IOMMU group, NUMA node, BAR sizes.

The parser is pure (text in, ``VmConfig`` out) and follows qemu-server's own
``parse_vm_config``: a description in ``#`` lines, ``key: value`` lines, then
``[PENDING]``, ``[special:...]`` and snapshot sections. Lines it cannot read
become warnings, as qemu-server warns and carries on.

The VM facts describe the VM as it will start next time: the current config
with its pending changes applied, because every fix here takes effect at the
next start, and so does every pending change.
"""

from __future__ import annotations

import re
import shlex
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from ansible.module_utils.gpuhost.audit.pci import PCI_DIR, kind_of, read_ids
from ansible.module_utils.gpuhost.audit.source import Source
from ansible.module_utils.gpuhost.audit.virt import parse_node_names

QEMU_SERVER_DIR = "/etc/pve/qemu-server"
PCI_MAPPING_FILE = "/etc/pve/mapping/pci.cfg"
HOSTNAME_FILE = "/proc/sys/kernel/hostname"
NODE_DIR = "/sys/devices/system/node"

CLIQUE_OPTION = "x-nv-gpudirect-clique"
OVMF_MMIO64_NAME = "opt/ovmf/X-PciMmio64Mb"
NVIDIA_VENDOR = "10de"
MAX_HOSTPCI = 16
MAX_CLIQUE = 15  # the clique id is 4 bits wide (QEMU vfio-pci)
MIB = 1 << 20

# QEMU's phys-bits for every CPU model but host (target/i386: 40); `cpu: host` takes the host's.
QEMU_DEFAULT_PHYS_BITS = 40
# OVMF sizes its 64-bit MMIO window to 1/8 of the guest's physical address space, with the
# address width capped at 46 bits (OvmfPkg PlatformInitLib: PlatformDynamicMmioWindow).
OVMF_MAX_PHYS_BITS = 46

# Keys of the qemu-server config schema whose lines the findings quote.
CONFIG_KEYS_OF_INTEREST = re.compile(
    r"^(hostpci\d+|args|cpu|machine|bios|numa\d*|hugepages|balloon|memory|smbios1|sockets|cores|name)$")

SECTION = re.compile(r"^\[(?P<name>[^\]]*)\]\s*$")
SNAPSHOT_NAME = re.compile(r"^[a-z][a-z0-9_\-]+$", re.IGNORECASE)
SPECIAL_SECTIONS = ("cloudinit", "fleecing")
KEY_VALUE = re.compile(r"^(?P<key>[a-z][a-z_\-]*\d*):\s*(?P<value>.+?)\s*$")
ARGS_LINE = re.compile(r"^args:\s*(?P<value>.*\S)\s*$")
DESCRIPTION_LINE = re.compile(r"^description:\s*(?P<value>.*\S)\s*$")
DELETE_LINE = re.compile(r"^delete:\s*(?P<value>.*\S)\s*$")
VM_CONFIG_NAME = re.compile(r"^(?P<vmid>\d+)\.conf$")

# hostpciN options of qemu-server (PVE/QemuServer/PCI.pm, $hostpci_fmt). `hidden` is not one of
# them: qemu-server refuses the line, and the VM does not start.
HOSTPCI_OPTIONS = frozenset({"host", "mapping", "rombar", "romfile", "pcie", "x-vga", "legacy-igd", "mdev",
                             "vendor-id", "device-id", "sub-vendor-id", "sub-device-id"})
PCI_ID = re.compile(r"^(?:(?P<domain>[0-9a-f]{4,}):)?(?P<bus>[0-9a-f]{2}):(?P<slot>[0-9a-f]{2})"
                    r"(?:\.(?P<function>[0-7]))?$", re.IGNORECASE)
TRUE_WORDS = frozenset({"1", "on", "yes", "true"})
FALSE_WORDS = frozenset({"0", "off", "no", "false"})

PVEVERSION = re.compile(r"pve-manager/(?P<version>[0-9][^/\s]*)(?:/(?P<build>\S+))?"
                        r"(?:\s+\(running kernel:\s*(?P<kernel>[^)\s]+)\))?")
ADDRESS_SIZES = re.compile(r"^address sizes\s*:\s*(?P<bits>\d+) bits physical", re.MULTILINE)
CPU_VENDOR = re.compile(r"^vendor_id\s*:\s*(?P<vendor>\S+)", re.MULTILINE)


class ProxmoxParseError(ValueError):
    """Input that cannot be a qemu-server config at all."""


# ---------------------------------------------------------------------------
# The config file


@dataclass
class Section:
    """One part of a config file: the current config, [PENDING], a snapshot or a special section."""

    options: dict[str, str] = field(default_factory=dict)
    lines: dict[str, str] = field(default_factory=dict)  # key -> the line as written
    description: str | None = None


@dataclass
class VmConfig:
    current: Section = field(default_factory=Section)
    pending: Section = field(default_factory=Section)
    pending_delete: list[str] = field(default_factory=list)
    snapshots: dict[str, Section] = field(default_factory=dict)
    special: dict[str, Section] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def description(self) -> str | None:
        return self.current.description

    def effective(self) -> dict[str, str]:
        """The config the VM starts with next time: current, then pending deletions and changes."""
        options = {k: v for k, v in self.current.options.items() if k not in self.pending_delete}
        options.update(self.pending.options)
        return options

    def line(self, key: str) -> str | None:
        """The line behind an effective key, marked when it comes from [PENDING]."""
        if key in self.pending.lines:
            return f"[PENDING] {self.pending.lines[key]}"
        if key in self.pending_delete:
            return f"[PENDING] delete: {key}"
        return self.current.lines.get(key)


def decode_text(text: str) -> str:
    """qemu-server writes descriptions with %XX escapes (PVE::Tools::encode_text)."""
    return urllib.parse.unquote_to_bytes(text).decode("utf-8", errors="replace")


def parse_vm_config(text: str | bytes) -> VmConfig:
    """A /etc/pve/qemu-server/<vmid>.conf, section by section; unreadable lines become warnings."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise ProxmoxParseError(f"expected the text of a qemu-server config, found {type(text).__name__}")
    config = VmConfig()
    section: Section | None = config.current
    in_pending = False
    description: list[str] | None = None

    def finish_description() -> None:
        nonlocal description
        if description is not None and section is not None:
            section.description = "\n".join(description).rstrip() or None
        description = None

    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        header = SECTION.match(line)
        if header:
            finish_description()
            name = header.group("name")
            in_pending = False
            if name.upper() == "PENDING":
                section, in_pending = config.pending, True
            elif name.lower().startswith("special:") and name[8:].lower() in SPECIAL_SECTIONS:
                section = config.special.setdefault(name[8:].lower(), Section())
            elif SNAPSHOT_NAME.match(name):
                if name in config.snapshots:
                    config.warnings.append(f"line {number}: duplicate snapshot section [{name}]")
                section = config.snapshots.setdefault(name, Section())
            else:
                config.warnings.append(f"line {number}: skipping unknown section [{name}]")
                section = None
            continue
        if section is None:
            continue
        if line.startswith("#"):
            description = [] if description is None else description
            description.append(decode_text(line[1:]))
            continue
        described = DESCRIPTION_LINE.match(line)
        if described:
            description = [] if description is None else description
            description.append(decode_text(described.group("value")))
            continue
        deleted = DELETE_LINE.match(line)
        if deleted:
            if in_pending:
                config.pending_delete += [k.lstrip("!") for k in re.split(r"[,;\s]+", deleted.group("value")) if k]
            else:
                config.warnings.append(f"line {number}: 'delete' is only allowed in [PENDING]")
            continue
        match = ARGS_LINE.match(line) or KEY_VALUE.match(line)
        if not match:
            config.warnings.append(f"line {number}: unable to parse {line[:120]!r}")
            continue
        key = "args" if line.startswith("args:") else match.group("key")
        if key in section.options:
            config.warnings.append(f"line {number}: {key} given twice; the last one counts")
        section.options[key] = match.group("value")
        section.lines[key] = line.strip()
    finish_description()
    return config


def parse_property_string(value: str, default_key: str | None = None) -> tuple[dict[str, str], list[str]]:
    """`host=41:00.0,pcie=1` -> {"host": "41:00.0", "pcie": "1"}; a bare first word is the default key."""
    result: dict[str, str] = {}
    warnings: list[str] = []
    for part in value.split(","):
        if not part.strip():
            continue
        key, sep, item = part.partition("=")
        key, item = key.strip(), item.strip()
        if not sep:
            key, item = default_key or "", part.strip()
            if not default_key:
                warnings.append(f"{part.strip()!r} has no key")
                continue
        elif not item:
            warnings.append(f"{key!r} has no value")
            continue
        if key in result:
            warnings.append(f"{key!r} given twice")
        result[key] = item
    return result, warnings


def parse_bool(value: str | None) -> bool | None:
    if value is None:
        return None
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


def parse_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip(), 0)
    except ValueError:
        return None


# ---------------------------------------------------------------------------
# Typed views of single options


def normalize_pci_id(text: str) -> str | None:
    """`41:00.0` -> `0000:41:00.0`, `41:00` -> `0000:41:00` (every function); None when not a PCI id."""
    match = PCI_ID.match(text.strip())
    if not match:
        return None
    domain = (match.group("domain") or "0000").lower()
    base = f"{domain[-4:]:0>4}:{match.group('bus').lower()}:{match.group('slot').lower()}"
    function = match.group("function")
    return f"{base}.{function}" if function is not None else base


@dataclass
class HostPci:
    index: int
    value: str
    host_ids: list[str] = field(default_factory=list)  # normalized; without function: every function
    mapping: str | None = None
    pcie: bool = False
    x_vga: bool = False
    rombar: bool = True
    romfile: str | None = None
    mdev: str | None = None
    hidden: bool = False
    legacy_igd: bool = False
    unknown_options: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"hostpci{self.index}"

    @property
    def functions_named(self) -> bool:
        """Every host id names one function (`.0`), so the device is not split into functions by id."""
        return bool(self.host_ids) and all("." in host for host in self.host_ids)


def parse_hostpci(index: int, value: str) -> HostPci:
    options, warnings = parse_property_string(value, default_key="host")
    entry = HostPci(index=index, value=value, warnings=warnings)
    for raw in (options.get("host") or "").split(";"):
        if not raw.strip():
            continue
        normalized = normalize_pci_id(raw)
        if normalized is None:
            entry.warnings.append(f"{raw!r} is not a PCI id (bus:dev.func)")
        else:
            entry.host_ids.append(normalized)
    entry.mapping = options.get("mapping")
    if not entry.host_ids and not entry.mapping:
        entry.warnings.append("neither host nor mapping is set")
    entry.pcie = bool(parse_bool(options.get("pcie")))
    entry.x_vga = bool(parse_bool(options.get("x-vga")))
    entry.rombar = parse_bool(options.get("rombar")) is not False
    entry.romfile = options.get("romfile")
    entry.mdev = options.get("mdev")
    entry.hidden = bool(parse_bool(options.get("hidden")))
    entry.legacy_igd = bool(parse_bool(options.get("legacy-igd")))
    entry.unknown_options = sorted(k for k in options if k not in HOSTPCI_OPTIONS)
    return entry


@dataclass
class Cpu:
    cputype: str = "kvm64"  # qemu-server's default when `cpu` is absent
    hidden: bool | None = None
    flags: list[str] = field(default_factory=list)
    phys_bits: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def parse_cpu(value: str | None) -> Cpu:
    if value is None:
        return Cpu()
    options, warnings = parse_property_string(value, default_key="cputype")
    return Cpu(cputype=options.get("cputype") or "kvm64", hidden=parse_bool(options.get("hidden")),
               flags=[f for f in (options.get("flags") or "").split(";") if f],
               phys_bits=options.get("phys-bits"), options=options, warnings=warnings)


def machine_type(value: str | None) -> str:
    """q35, i440fx (the default when `machine` is absent) or what the value names (virt on ARM)."""
    options, _warnings = parse_property_string(value or "", default_key="type")
    machine = (options.get("type") or "").lower()
    if not machine:
        return "i440fx"
    if "q35" in machine:
        return "q35"
    if machine.startswith("pc"):
        return "i440fx"
    return machine.split("-")[0].split("+")[0]


@dataclass
class QemuArgs:
    """The `args` line: extra QEMU options, split like a shell as qemu-server does."""

    tokens: list[str] = field(default_factory=list)
    sets: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (group, id, property) -> value
    globals: dict[tuple[str, str], str] = field(default_factory=dict)  # (driver, property) -> value
    fw_cfg: dict[str, str] = field(default_factory=dict)  # name -> string value
    cpu: str | None = None
    warnings: list[str] = field(default_factory=list)


SET_OPTION = re.compile(r"^(?P<group>[^.=]+)\.(?P<id>[^.=]+)\.(?P<prop>[^=]+)=(?P<value>.*)$")
GLOBAL_SHORT = re.compile(r"^(?P<driver>[^.=]+)\.(?P<prop>[^=]+)=(?P<value>.*)$")


def split_args(value: str) -> tuple[list[str], list[str]]:
    try:
        return shlex.split(value), []
    except ValueError as exc:
        return [], [f"the args line cannot be split into words as qemu-server does ({exc}): QEMU gets none of it"]


def parse_args(value: str | None) -> QemuArgs:
    if value is None:
        return QemuArgs()
    tokens, warnings = split_args(value)
    parsed = QemuArgs(tokens=tokens, warnings=warnings)
    position = 0
    while position < len(tokens):
        option = "-" + tokens[position].lstrip("-") if tokens[position].startswith("-") else tokens[position]
        argument = tokens[position + 1] if position + 1 < len(tokens) else None
        if option in ("-set", "-global", "-fw_cfg", "-cpu"):
            position += 2
            if argument is None:
                parsed.warnings.append(f"{option} at the end of args has no value")
                continue
            _take_option(parsed, option, argument)
        else:
            position += 1
    return parsed


def _take_option(parsed: QemuArgs, option: str, argument: str) -> None:
    if option == "-set":
        match = SET_OPTION.match(argument)
        if match:
            parsed.sets[(match.group("group"), match.group("id"), match.group("prop"))] = match.group("value")
        else:
            parsed.warnings.append(f"-set {argument}: QEMU cannot parse this (expected group.id.property=value)")
    elif option == "-global":
        match = GLOBAL_SHORT.match(argument)
        if match:
            parsed.globals[(match.group("driver"), match.group("prop"))] = match.group("value")
        else:
            fields, _warnings = parse_property_string(argument)
            if {"driver", "property", "value"} <= set(fields):
                parsed.globals[(fields["driver"], fields["property"])] = fields["value"]
            else:
                parsed.warnings.append(f"-global {argument}: expected driver.property=value")
    elif option == "-fw_cfg":
        fields, _warnings = parse_property_string(argument, default_key="name")
        if fields.get("name") and "string" in fields:
            parsed.fw_cfg[fields["name"]] = fields["string"]
        elif fields.get("name") and "file" in fields:
            parsed.fw_cfg[fields["name"]] = f"file:{fields['file']}"
    else:
        parsed.cpu = argument


def clique_of(args: QemuArgs, qemu_id: str) -> tuple[int | None, str | None]:
    """The clique QEMU gives device `qemu_id`, and where it comes from (None when unset or invalid)."""
    value = args.sets.get(("device", qemu_id, CLIQUE_OPTION))
    origin = f"-set device.{qemu_id}.{CLIQUE_OPTION}"
    if value is None:
        value = args.globals.get(("vfio-pci", CLIQUE_OPTION))
        origin = f"-global vfio-pci.{CLIQUE_OPTION}"
    if value is None:
        return None, None
    clique = parse_int(value)
    if clique is None or not 0 <= clique <= MAX_CLIQUE:
        return None, f"{origin}={value} (invalid: QEMU takes 0..{MAX_CLIQUE} and refuses to start)"
    return clique, origin


def args_hide_kvm(args: QemuArgs) -> bool:
    """`-cpu ...,kvm=off` in args: it comes after qemu-server's own -cpu, so it wins."""
    if args.cpu is None:
        return False
    options, _warnings = parse_property_string(args.cpu, default_key="model")
    return parse_bool(options.get("kvm")) is False


def parse_numa_node(value: str) -> dict[str, Any]:
    """`numa0: cpus=0-31,hostnodes=0,memory=131072,policy=bind`; cpus may be `0-7;16-23`."""
    options, warnings = parse_property_string(value)
    return {"cpus": options.get("cpus"), "hostnodes": options.get("hostnodes"),
            "memory_mib": parse_int(options.get("memory")), "policy": options.get("policy"),
            "warnings": warnings}


def parse_smbios_uuid(value: str | None) -> str | None:
    if value is None:
        return None
    options, _warnings = parse_property_string(value)
    uuid = options.get("uuid")
    return uuid.lower() if uuid else None


def parse_pveversion(text: str) -> dict[str, str | None]:
    """`pve-manager/8.3.2/3e76eec21c4a14a7 (running kernel: 6.8.12-5-pve)`."""
    match = PVEVERSION.search(text)
    if not match:
        return {"version": None, "build": None, "kernel": None}
    return {"version": match.group("version"), "build": match.group("build"), "kernel": match.group("kernel")}


def parse_pci_mapping(text: str, node: str | None) -> dict[str, list[dict[str, str]]]:
    """/etc/pve/mapping/pci.cfg: an id line, then tab-indented `map ...` lines; this node's maps only."""
    mappings: dict[str, list[dict[str, str]]] = {}
    current: str | None = None
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if not raw[0].isspace():
            current = raw.strip()
            mappings.setdefault(current, [])
            continue
        key, _sep, value = raw.strip().partition(" ")
        if current is None or key != "map":
            continue
        entry, _warnings = parse_property_string(value.strip())
        if node is None or entry.get("node") == node:
            mappings[current].append(entry)
    return mappings


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


def _same_slot(a: str, b: str) -> bool:
    return a.rsplit(".", 1)[0] == b.rsplit(".", 1)[0]


def host_device_facts(bdf: str, host: HostView, passed: set[str]) -> dict[str, Any]:
    device = host.devices.get(bdf)
    if device is None:
        return {"bdf": bdf, "kind": "absent", "vendor_id": None, "device_id": None, "driver": None,
                "iommu_group": None, "iommu_group_peers": [], "unrelated_in_group": [], "alone_in_group": None,
                "numa_node": None, "bars_64bit_bytes": []}
    group = device.get("iommu_group")
    peers = [m for m in host.groups.get(group or "", []) if m != bdf] if group else []
    unrelated = [p for p in peers if not _same_slot(p, bdf) and p not in passed
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


def is_nvidia_gpu(device: dict[str, Any]) -> bool:
    return device.get("kind") == "gpu" and device.get("vendor_id") == NVIDIA_VENDOR


def next_power_of_two(value: int) -> int:
    return 1 << max(value - 1, 0).bit_length()


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
        "args": options.get("args"),
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
        "pending": dict(sorted(config.pending.options.items())),
        "pending_delete": list(config.pending_delete),
        "snapshots": list(config.snapshots),
        "description": config.description,
        "config_lines": {k: config.line(k) for k in sorted(set(options) | set(config.pending_delete))
                         if CONFIG_KEYS_OF_INTEREST.match(k) and config.line(k)},
        "warnings": warnings + [f"{e['id']}: {w}" for e in hostpci for w in e["warnings"]],
    }


def _memory_value(value: str | None) -> str | None:
    """`memory: 262144` or, since PVE 8.1, `memory: current=262144`."""
    if value is None:
        return None
    options, _warnings = parse_property_string(value, default_key="current")
    return options.get("current")


# ---------------------------------------------------------------------------
# The gatherer: the only part that reads the host


def is_proxmox_node(source: Source) -> bool:
    """A Proxmox VE node has the cluster file system's qemu-server directory (even with no VM yet)."""
    return source.listdir(QEMU_SERVER_DIR) is not None


def _device_from_pci_facts(device: dict[str, Any]) -> dict[str, Any]:
    return {"kind": device.get("kind"), "vendor_id": device.get("vendor_id"), "device_id": device.get("device_id"),
            "driver": device.get("driver"), "iommu_group": device.get("iommu_group"),
            "numa_node": device.get("numa_node"), "bars": device.get("bars") or [], "is_bridge": False}


def _device_from_sysfs(source: Source, bdf: str, groups: dict[str, list[str]]) -> dict[str, Any] | None:
    ids = read_ids(source, bdf)
    if not ids["vendor"]:
        return None
    class_code = ids["class"] or ""
    return {"kind": kind_of(ids), "vendor_id": ids["vendor"][2:], "device_id": (ids["device"] or "")[2:] or None,
            "driver": None, "iommu_group": next((g for g, m in groups.items() if bdf in m), None),
            "numa_node": None, "bars": [], "is_bridge": class_code.startswith("0x0604")}


def _host_phys_bits(cpuinfo: str | None) -> int | None:
    match = ADDRESS_SIZES.search(cpuinfo or "")
    return int(match.group("bits")) if match else None


def _cpu_vendor(cpuinfo: str | None) -> str | None:
    match = CPU_VENDOR.search(cpuinfo or "")
    if not match:
        return None
    return {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(match.group("vendor"), match.group("vendor"))


def _bootloader(cmdline: str | None) -> str | None:
    """GRUB passes BOOT_IMAGE=; systemd-boot (proxmox-boot-tool, ZFS on UEFI) passes initrd=."""
    if not cmdline:
        return None
    if "BOOT_IMAGE=" in cmdline:
        return "grub"
    if "initrd=" in cmdline:
        return "systemd-boot"
    return None


def gather_proxmox(source: Source, iommu: Any, pci_facts: dict[str, Any]) -> dict[str, Any] | None:
    """The node's VMs that pass PCI devices through, joined to the host's facts; None off Proxmox VE."""
    names = source.listdir(QEMU_SERVER_DIR)
    if names is None:
        return None
    version = source.run(["pveversion"])
    node = source.read_value(HOSTNAME_FILE)
    cpuinfo = source.read_text("/proc/cpuinfo")
    cmdline = source.read_value("/proc/cmdline")

    configs: dict[int, VmConfig] = {}
    for name in names:
        match = VM_CONFIG_NAME.match(name)
        text = source.read_text(f"{QEMU_SERVER_DIR}/{name}") if match else None
        if match and text is not None:
            configs[int(match.group("vmid"))] = parse_vm_config(text)
    with_hostpci = {vmid: c for vmid, c in sorted(configs.items())
                    if any(re.fullmatch(r"hostpci\d+", k) for k in c.effective())}

    groups = dict(getattr(iommu, "groups", {}) or {})
    host = HostView(groups=groups, phys_bits=_host_phys_bits(cpuinfo),
                    numa_nodes=parse_node_names(source.listdir(NODE_DIR) or []))
    if any("mapping=" in v for c in with_hostpci.values() for k, v in c.effective().items() if k.startswith("hostpci")):
        host.mappings = parse_pci_mapping(source.read_text(PCI_MAPPING_FILE) or "", node)
    if with_hostpci:
        host.bdfs = source.listdir(PCI_DIR)
        host.devices = {d["bdf"]: _device_from_pci_facts(d) for d in pci_facts.get("nvidia_devices") or []}
        _read_other_devices(source, with_hostpci, host)

    vms = [vm_facts(vmid, config, host) for vmid, config in with_hostpci.items()]
    modules = getattr(iommu, "modules", {}) or {}
    return {
        "node": node,
        **parse_pveversion(version.stdout if version.ok else ""),
        "vm_count": len(configs),
        "vms_without_hostpci": sorted(set(configs) - set(with_hostpci)),
        "host": {
            "cpu_vendor": _cpu_vendor(cpuinfo),
            "phys_bits": host.phys_bits,
            "numa_nodes": host.numa_nodes,
            "bootloader": _bootloader(cmdline),
            "iommu_enabled": bool(getattr(iommu, "enabled", False)),
            "iommu_cmdline": dict(getattr(iommu, "cmdline", {}) or {}),
            "vfio_modules": {m: bool(modules.get(m)) for m in ("vfio", "vfio_iommu_type1", "vfio_pci")},
        },
        "vms": vms,
    }


def _read_other_devices(source: Source, configs: dict[int, VmConfig], host: HostView) -> None:
    """Devices the configs name that the NVIDIA PCI facts do not cover, and their IOMMU group peers."""
    wanted: set[str] = set()
    for config in configs.values():
        for key, value in config.effective().items():
            if re.fullmatch(r"hostpci\d+", key):
                entry = parse_hostpci(int(key[7:]), value)
                ids, _warnings = mapped_ids(entry, host)
                wanted.update(expand_host_ids(ids, host.bdfs)[0])
    for bdf in sorted(wanted):
        if bdf not in host.devices and (host.bdfs is None or bdf in host.bdfs):
            device = _device_from_sysfs(source, bdf, host.groups)
            if device is not None:
                device["driver"] = _driver(source, bdf)
                host.devices[bdf] = device
    peers = {p for bdf in wanted for g in [(host.devices.get(bdf) or {}).get("iommu_group")] if g
             for p in host.groups.get(g, [])}
    for bdf in sorted(peers - set(host.devices)):
        device = _device_from_sysfs(source, bdf, host.groups)
        if device is not None:
            host.devices[bdf] = device


def _driver(source: Source, bdf: str) -> str | None:
    target = source.readlink(f"{PCI_DIR}/{bdf}/driver")
    return target.rsplit("/", 1)[-1] if target else None
