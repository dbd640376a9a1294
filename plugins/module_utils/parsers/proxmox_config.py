"""Proxmox VE's qemu-server configs, read the way qemu-server reads them.

Pure parsers, text in, data out; nothing here reads a file. ``parse_vm_config``
follows qemu-server's own ``parse_vm_config``: a description in ``#`` lines,
``key: value`` lines, then ``[PENDING]``, ``[special:...]`` and snapshot
sections. Lines it cannot read become warnings, as qemu-server warns and
carries on; the only exception is ``ProxmoxParseError`` (a ``ValueError``), for
input that cannot be a config at all.

Output:

* ``parse_vm_config(text) -> VmConfig``: current, pending (``Section``: options
  key -> value, lines key -> the line as written, description), pending_delete
  (keys), snapshots and special (name -> ``Section``), warnings ("line N: ...");
  ``effective()`` is the config the VM starts with next time, ``line(key)`` the
  line behind a key; ``passes_pci_through(config)`` whether that config has a
  ``hostpciN`` device.
* Single options: ``parse_hostpci -> HostPci`` (host_ids normalized by
  ``normalize_pci_id``, mapping, pcie, x_vga, rombar, romfile, mdev, hidden,
  legacy_igd, unknown_options, warnings); ``parse_cpu -> Cpu`` (cputype,
  hidden, flags, phys_bits); ``machine_type -> "q35" | "i440fx" | ...``;
  ``parse_args -> QemuArgs`` (tokens, sets, globals, fw_cfg, cpu, warnings) and
  ``clique_of``/``args_hide_kvm`` over it; ``parse_numa_node`` (cpus,
  hostnodes, memory_mib, policy, warnings); ``parse_smbios_uuid``;
  ``parse_property_string`` (``a=1,b=2`` -> dict and warnings);
  ``parse_bool``, ``parse_int`` (None when not one).
* Other files: ``parse_pci_mapping`` (``/etc/pve/mapping/pci.cfg``: mapping
  id -> this node's map entries); pveversion's output: parsers/pveversion.py.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import ParseError, without_surrogates

# Re-exported: the audit, the capture and the plans take the secret rules from here, beside the parser.
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_secrets import (  # noqa: F401
    REDACTED,
    SECRET_KEY,
    redact_secret_values,
    without_secrets,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.shell_words import shell_words

# Where qemu-server keeps what these parsers read.
QEMU_SERVER_DIR = "/etc/pve/qemu-server"
PCI_MAPPING_FILE = "/etc/pve/mapping/pci.cfg"

CLIQUE_OPTION = "x-nv-gpudirect-clique"
OVMF_MMIO64_NAME = "opt/ovmf/X-PciMmio64Mb"
MAX_HOSTPCI = 16
MAX_CLIQUE = 15  # the clique id is 4 bits wide (QEMU vfio-pci)

SECTION = re.compile(r"^\[(?P<name>[^\]]*)\]\s*$")
SNAPSHOT_NAME = re.compile(r"^[a-z][a-z0-9_\-]+$", re.IGNORECASE)
SPECIAL_SECTIONS = ("cloudinit", "fleecing")
# The value is .*\S|. (a blank value: one blank), never .+?\s*$, which tried \s*$ from each blank of a run inside the
# value: quadratic in a line of blanks (docs/development.md, "Regexes over input").
KEY_VALUE = re.compile(r"^(?P<key>[a-z][a-z_\-]*\d*):\s*(?P<value>.*\S|.)\s*$")
ARGS_LINE = re.compile(r"^args:\s*(?P<value>.*\S)\s*$")
DESCRIPTION_LINE = re.compile(r"^description:\s*(?P<value>.*\S)\s*$")
DELETE_LINE = re.compile(r"^delete:\s*(?P<value>.*\S)\s*$")

# hostpciN options of qemu-server (PVE/QemuServer/PCI.pm, $hostpci_fmt). `hidden` is not one of
# them: qemu-server refuses the line, and the VM does not start.
HOSTPCI_OPTIONS = frozenset({"host", "mapping", "rombar", "romfile", "pcie", "x-vga", "legacy-igd", "mdev",
                             "vendor-id", "device-id", "sub-vendor-id", "sub-device-id"})
PCI_ID = re.compile(r"^(?:(?P<domain>[0-9a-f]{4,}):)?(?P<bus>[0-9a-f]{2}):(?P<slot>[0-9a-f]{2})"
                    r"(?:\.(?P<function>[0-7]))?$", re.IGNORECASE)
TRUE_WORDS = frozenset({"1", "on", "yes", "true"})
FALSE_WORDS = frozenset({"0", "off", "no", "false"})


class ProxmoxParseError(ParseError):
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


HOSTPCI_KEY = re.compile(r"hostpci\d+")


def passes_pci_through(config: VmConfig) -> bool:
    """Whether the VM starts with a hostpciN device next time (current config plus pending changes)."""
    return any(HOSTPCI_KEY.fullmatch(key) for key in config.effective())


def decode_text(text: str) -> str:
    """qemu-server writes descriptions with %XX escapes (PVE::Tools::encode_text)."""
    # unquote_to_bytes encodes its input: a lone surrogate would escape as UnicodeEncodeError.
    return urllib.parse.unquote_to_bytes(without_surrogates(text)).decode("utf-8", errors="replace")


def parse_vm_config(text: str | bytes) -> VmConfig:
    """A /etc/pve/qemu-server/<vmid>.conf, section by section; unreadable lines become warnings."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise ProxmoxParseError(f"expected the text of a qemu-server config, found {type(text).__name__}")
    text = without_surrogates(text)
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
            # The line may be a secret qemu-server would not read either (``CIPASSWORD: ...``): quoted redacted.
            config.warnings.append(f"line {number}: unable to parse {redact_secret_values(line[:120])!r}")
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
        return shell_words(value), []
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
