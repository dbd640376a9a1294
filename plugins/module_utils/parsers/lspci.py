"""``lspci -vvv``: the same capabilities as config space, as lspci prints them.

A pure parser from text to dataclasses. ``parse_lspci_vvv(text)`` returns a
dict from PCI address (``dddd:bb:dd.f``, as ``parse_bdf`` writes it) to an
``LspciDevice``:

* from the device line: bdf, description, class_name, class_code (6 hex digits
  with prog-if, with ``-nn`` or ``-n``), vendor_id, device_id, revision;
* from the indented lines: subsystem_vendor_id and subsystem_id, numa_node,
  iommu_group, driver, modules;
* capabilities (``Capability`` list, standard and extended together; cap_id
  where the name tells it), capabilities_access_denied (run without root);
  pcie (``PcieInfo``), acs (``Acs``) and resizable_bars (``ResizableBar``
  list), in the types ``parse_config_space`` gives, so the two compare;
* warnings: lines that could not be read.

It raises ``PciParseError`` only for input that is not text, or text with
lines but no device line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import unify_newlines
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import (
    ACS_BITS,
    EXT_CAP_START,
    EXT_CAPABILITY_NAMES,
    Acs,
    AcsFlags,
    Capability,
    PcieInfo,
    PciParseError,
    ResizableBar,
    parse_bdf,
    port_type_name,
    valid_link_width,
)

# The words lspci prints for the same field (ls-caps.c, cap_express).
_LSPCI_PORT_TYPES = {
    "Endpoint": 0x0,
    "Legacy Endpoint": 0x1,
    "Root Port": 0x4,
    "Upstream Port": 0x5,
    "Downstream Port": 0x6,
    "PCI-Express to PCI/PCI-X Bridge": 0x7,
    "PCI/PCI-X to PCI-Express Bridge": 0x8,
    "Root Complex Integrated Endpoint": 0x9,
    "Root Complex Event Collector": 0xA,
}


@dataclass
class LspciDevice:
    """One device block of ``lspci -vvv`` (``-nn`` adds the ids, ``-D`` the domain)."""

    bdf: str
    description: str
    class_name: str | None = None
    class_code: str | None = None
    vendor_id: str | None = None
    device_id: str | None = None
    revision: int | None = None
    subsystem_vendor_id: str | None = None
    subsystem_id: str | None = None
    numa_node: int | None = None
    iommu_group: int | None = None
    driver: str | None = None
    modules: list[str] = field(default_factory=list)
    capabilities_access_denied: bool = False
    capabilities: list[Capability] = field(default_factory=list)
    pcie: PcieInfo | None = None
    acs: Acs | None = None
    resizable_bars: list[ResizableBar] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


_LSPCI_HEADER_RE = re.compile(
    r"^(?P<bdf>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(?P<rest>\S.*)$"
)
# Each starts where a run of blanks starts ((?<!\s)): from every blank of a long run, \s* ran to its end, and a device
# line with 64 KiB of blanks took seconds (docs/development.md, "Regexes over input").
_PROG_IF_RE = re.compile(r"(?<!\s)\s*\(prog-if (?P<progif>[0-9a-fA-F]{2})(?: \[[^\]]*\])?\)\s*$")
_REV_RE = re.compile(r"(?<!\s)\s*\(rev (?P<rev>[0-9a-fA-F]{2})\)\s*$")
_IDS_NN_RE = re.compile(r"(?<!\s)\s*\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\]\s*$")
_IDS_N_RE = re.compile(r"^(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})$")
_CLASS_NN_RE = re.compile(r"^(?P<name>.*?)(?<!\s)\s*\[(?P<code>[0-9a-fA-F]{4})\]$")
_CLASS_N_RE = re.compile(r"^(?:Class )?(?P<code>[0-9a-fA-F]{4})$")
_CAP_RE = re.compile(r"^Capabilities:\s*\[(?P<offset>[0-9a-fA-F]+)(?:\s+v(?P<version>\d+))?\]\s*(?P<name>.*)$")
_EXPRESS_RE = re.compile(
    r"^Express\s+(?:\(v(?P<version>\d+)\)\s+)?(?P<type>.+?)"
    r"(?:(?<!\s)\s+\(Slot(?P<slot>[+-])\))?(?:,\s*(?:MSI|IntMsgNum)\s+[0-9a-fA-F]+)?(?:,.*)?$"
)
_SPEED_RE = re.compile(r"Speed\s+(?P<speed>[0-9.]+)\s*GT/s|Speed\s+unknown", re.IGNORECASE)
_WIDTH_RE = re.compile(r"Width\s+x(?P<width>\d+)")
_REBAR_ENTRY_RE = re.compile(
    r"^BAR\s+(?P<index>\d+):\s*current size:\s*(?P<current>\S+?)\s*(?:,\s*supported:\s*(?P<supported>.*))?$"
)
_SIZE_RE = re.compile(r"^(?P<number>\d+)(?P<unit>MB|GB|TB|PB|EB)$")
_SIZE_UNITS = {"MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40, "PB": 1 << 50, "EB": 1 << 60}
_LSPCI_EXT_NAMES: dict[str, int] = {}
for _cap_id, _name in EXT_CAPABILITY_NAMES.items():
    _LSPCI_EXT_NAMES.setdefault(_name, _cap_id)
_LSPCI_EXT_NAMES.update(
    {
        "Alternative Routing-ID Interpretation (ARI)": 0x000E,
        "Single Root I/O Virtualization (SR-IOV)": 0x0010,
        "Physical Resizable BAR": 0x0015,
        "Virtual Resizable BAR": 0x0024,
        "Process Address Space ID (PASID)": 0x001B,
        "Page Request Interface (PRI)": 0x0013,
        "Downstream Port Containment": 0x001D,
    }
)


# How lspci starts the line of each standard capability (ls-caps.c); MSI-X before MSI.
_LSPCI_STD_PREFIXES = (
    ("Null", 0x00),
    ("Power Management", 0x01),
    ("AGP3", 0x0E),
    ("AGP", 0x02),
    ("Vital Product Data", 0x03),
    ("Slot ID", 0x04),
    ("MSI-X", 0x11),
    ("MSI", 0x05),
    ("CompactPCI hot-swap", 0x06),
    ("PCI-X", 0x07),
    ("HyperTransport", 0x08),
    ("Vendor Specific", 0x09),
    ("Debug port", 0x0A),
    ("CompactPCI central resource control", 0x0B),
    ("Hot-plug capable", 0x0C),
    ("Subsystem", 0x0D),
    ("Secure device", 0x0F),
    ("Express", 0x10),
    ("SATA HBA", 0x12),
    ("PCI Advanced Features", 0x13),
    ("Enhanced Allocation", 0x14),
)


def parse_lspci_vvv(text: str) -> dict[str, LspciDevice]:
    """Decode ``lspci -vvv`` (with or without ``-nn`` and ``-D``) into devices by address.

    Tolerates the formats of lspci 3.5 to 3.14 (link status with and without
    "(ok)"/"(downgraded)", "MSI 00" or "IntMsgNum 0"), space-indented copies,
    and ``Capabilities: <access denied>`` from runs without root, which is
    recorded per device. Empty output gives an empty dict; text with lines
    but no device line raises PciParseError.
    """
    if not isinstance(text, str):
        raise PciParseError(f"expected lspci -vvv output as text, found {type(text).__name__}")
    devices: dict[str, LspciDevice] = {}
    current: _LspciBlock | None = None
    saw_content = False
    for raw in unify_newlines(text).split("\n"):
        line = raw.rstrip()
        if not line.strip():
            continue
        saw_content = True
        header = _LSPCI_HEADER_RE.match(line)
        if header is not None:
            if current is not None:
                _store_device(devices, current.device)
            current = _LspciBlock(_parse_lspci_header(header["bdf"], header["rest"]))
            continue
        if current is not None and raw[:1].isspace():
            current.feed(line.strip())
    if current is not None:
        _store_device(devices, current.device)
    if saw_content and not devices:
        first = next((line for line in text.splitlines() if line.strip()), "")
        raise PciParseError(
            f"expected lspci -vvv output with device lines like '0000:41:00.0 VGA compatible controller: ...', "
            f"found none; first line: {first[:120]!r}; run lspci -vvv -nn -D and pass its stdout"
        )
    return devices


def _store_device(devices: dict[str, LspciDevice], device: LspciDevice) -> None:
    if device.bdf in devices:
        device.warnings.append(f"{device.bdf} appears more than once in the output; the last block is kept")
    devices[device.bdf] = device


def _parse_lspci_header(bdf: str, rest: str) -> LspciDevice:
    class_part, sep, device_part = rest.partition(": ")
    if not sep:
        class_part, device_part = "", rest
    device_part = device_part.strip()
    prog_if = None
    match = _PROG_IF_RE.search(device_part)
    if match is not None:
        prog_if = match["progif"].lower()
        device_part = device_part[: match.start()]
    revision = None
    match = _REV_RE.search(device_part)
    if match is not None:
        revision = int(match["rev"], 16)
        device_part = device_part[: match.start()]
    vendor_id = device_id = None
    match = _IDS_NN_RE.search(device_part) or _IDS_N_RE.match(device_part.strip())
    if match is not None:
        vendor_id, device_id = match["vendor"].lower(), match["device"].lower()
        device_part = device_part[: match.start()] if match.re is _IDS_NN_RE else ""
    class_name = class_code = None
    class_part = class_part.strip()
    match = _CLASS_NN_RE.match(class_part) or _CLASS_N_RE.match(class_part)
    if match is not None:
        class_code = match["code"].lower() + (prog_if or "00")
        class_name = match.groupdict().get("name") or None
    elif class_part:
        class_name = class_part
    return LspciDevice(
        bdf=parse_bdf(bdf),
        description=device_part.strip(),
        class_name=class_name,
        class_code=class_code,
        vendor_id=vendor_id,
        device_id=device_id,
        revision=revision,
    )


class _LspciBlock:
    """Reads the indented lines of one device; keeps which capability they belong to."""

    def __init__(self, device: LspciDevice) -> None:
        self.device = device
        self.section = ""
        self.acs_offset: int | None = None
        self.acs_cap: AcsFlags | None = None
        self.acs_ctl: AcsFlags | None = None

    def feed(self, line: str) -> None:
        device = self.device
        key, _sep, value = line.partition(":")
        value = value.strip()
        if line.startswith("Capabilities:"):
            self._start_capability(line)
            return
        if key in ("Kernel driver in use", "Kernel modules", "IOMMU group", "NUMA node", "Subsystem"):
            self.section = ""
            if key == "Kernel driver in use":
                device.driver = value or None
            elif key == "Kernel modules":
                device.modules = [name.strip() for name in value.split(",") if name.strip()]
            elif key == "IOMMU group":
                device.iommu_group = _int_or_warn(value, "IOMMU group", device)
            elif key == "NUMA node":
                device.numa_node = _int_or_warn(value, "NUMA node", device)
            else:
                ids = _IDS_NN_RE.search(value)
                if ids is not None:
                    device.subsystem_vendor_id, device.subsystem_id = ids["vendor"].lower(), ids["device"].lower()
            return
        if self.section == "express" and device.pcie is not None:
            if key == "LnkCap":
                device.pcie.max_link_speed_gts, device.pcie.max_link_width = _lspci_link(value)
            elif key == "LnkSta":
                device.pcie.link_speed_gts, device.pcie.link_width = _lspci_link(value)
        elif self.section == "acs" and key in ("ACSCap", "ACSCtl"):
            flags = _lspci_acs_flags(value, device)
            if key == "ACSCap":
                self.acs_cap = flags
            else:
                self.acs_ctl = flags
            device.acs = Acs(self.acs_offset, self.acs_cap, self.acs_ctl)
        elif self.section == "rebar":
            entry = _REBAR_ENTRY_RE.match(line)
            if entry is not None:
                device.resizable_bars.append(
                    ResizableBar(
                        index=int(entry["index"]),
                        current_size=_lspci_size(entry["current"]),
                        supported_sizes=[
                            size
                            for size in (_lspci_size(word) for word in (entry["supported"] or "").split())
                            if size is not None
                        ],
                    )
                )

    def _start_capability(self, line: str) -> None:
        device = self.device
        self.section = ""
        if "<access denied>" in line:
            device.capabilities_access_denied = True
            return
        match = _CAP_RE.match(line)
        if match is None:
            return
        offset = int(match["offset"], 16)
        extended = match["version"] is not None or offset >= EXT_CAP_START
        name = match["name"].strip()
        device.capabilities.append(
            Capability(
                offset=offset,
                cap_id=_lspci_cap_id(name, extended),
                name=name,
                version=int(match["version"]) if match["version"] else None,
                extended=extended,
            )
        )
        if not extended and name.startswith("Subsystem:") and device.subsystem_vendor_id is None:
            # Bridges carry their subsystem ids in a capability, not in the header.
            ids = _IDS_NN_RE.search(name)
            if ids is not None:
                device.subsystem_vendor_id, device.subsystem_id = ids["vendor"].lower(), ids["device"].lower()
        if not extended and name.startswith("Express") and device.pcie is None:
            device.pcie = _lspci_express(name, offset)
            self.section = "express"
        elif extended and name.startswith("Access Control Services") and device.acs is None:
            self.section = "acs"
            self.acs_offset = offset
            device.acs = Acs(offset, None, None)
        elif extended and name.startswith("Physical Resizable BAR"):
            self.section = "rebar"


def _int_or_warn(value: str, what: str, device: LspciDevice) -> int | None:
    try:
        return int(value)
    except ValueError:
        device.warnings.append(f"{what} {value!r} is not a number; ignored")
        return None


def _lspci_cap_id(name: str, extended: bool) -> int | None:
    if extended:
        if name.startswith("#"):
            # lspci before 3.6 prints undecoded extended ids as "#15".
            try:
                return int(name[1:].split()[0], 16)
            except (ValueError, IndexError):  # "#" with no id after it
                return None
        if name.startswith("Extended Capability ID"):
            try:
                return int(name.rsplit(None, 1)[-1], 16)
            except ValueError:
                return None
        for known, cap_id in _LSPCI_EXT_NAMES.items():
            if name.startswith(known):
                return cap_id
        return None
    for prefix, cap_id in _LSPCI_STD_PREFIXES:
        if name.startswith(prefix):
            return cap_id
    if name.startswith("Capability ID"):
        try:
            return int(name.split()[2], 16)
        except (IndexError, ValueError):
            return None
    return None


def _lspci_express(name: str, offset: int) -> PcieInfo:
    match = _EXPRESS_RE.match(name)
    type_text = match["type"].strip() if match is not None else ""
    code = _LSPCI_PORT_TYPES.get(type_text)
    if code is None and type_text.startswith("Unknown type"):
        try:
            code = int(type_text.rsplit(None, 1)[-1])
        except ValueError:
            code = None
    slot = None
    if match is not None and match["slot"]:
        slot = match["slot"] == "+"
    elif code is not None:
        slot = False
    return PcieInfo(
        offset=offset,
        version=int(match["version"]) if match is not None and match["version"] else None,
        port_type=port_type_name(code),
        port_type_code=code,
        slot_implemented=slot,
        max_link_speed_gts=None,
        max_link_width=None,
        link_speed_gts=None,
        link_width=None,
    )


def _lspci_link(value: str) -> tuple[float | None, int | None]:
    speed = None
    match = _SPEED_RE.search(value)
    if match is not None and match["speed"]:
        try:
            speed = float(match["speed"])
        except ValueError:
            speed = None
    width = None
    match = _WIDTH_RE.search(value)
    if match is not None:
        width = valid_link_width(int(match["width"]))
    return speed, width


def _lspci_acs_flags(value: str, device: LspciDevice) -> AcsFlags | None:
    words = dict(re.findall(r"(?<![A-Za-z])([A-Za-z]+)([+-])", value))  # from a word's start: linear
    found = {name: words.get(word) for name, word, _bit in ACS_BITS}
    if all(sign is None for sign in found.values()):
        device.warnings.append(f"ACS line without flags: {value!r}")
        return None
    missing = [word for name, word, _bit in ACS_BITS if found[name] is None]
    if missing:
        device.warnings.append(f"ACS line lacks {', '.join(missing)}; taken as off")
    return AcsFlags(**{name: sign == "+" for name, sign in found.items()})


def _lspci_size(word: str) -> int | None:
    match = _SIZE_RE.match(word.strip().rstrip(","))
    if match is None:
        return None
    return int(match["number"]) * _SIZE_UNITS[match["unit"]]
