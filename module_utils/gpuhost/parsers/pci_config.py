"""What PCI devices say about themselves: config space, ``lspci -vvv``, sysfs.

Pure parsers from bytes or text to dataclasses. Nothing here touches the
system; ``source.py`` reads, these decode. The only exception raised is
``PciParseError`` (a ``ValueError``), for input that is not what the parser
was given to read. Damage inside otherwise readable data (a capability list
that loops, a pointer out of range) is not an exception: it lands in the
result's ``warnings`` and the walk stops there, because the fields read up to
that point are still true.

How much of ``/sys/bus/pci/devices/<bdf>/config`` a reader gets:

* 64 bytes without CAP_SYS_ADMIN (128 for CardBus bridges): the header only,
  no capability list. The kernel refuses more because some chips lock up on
  reads of undefined registers.
* 256 bytes as root on conventional PCI devices, and on PCIe devices when the
  kernel has no extended config access (no MMCONFIG/ECAM; an i440fx guest).
* 4096 bytes as root on PCIe devices with extended config access.

``ConfigSpace.capabilities_readable`` and ``extended_readable`` say which of
these the caller had; when ACS or Resizable BAR matter and they are False, the
answer is to read again as root or to parse ``lspci -vvv`` run as root.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

CONFIG_HEADER_SIZE = 64
CONFIG_STANDARD_SIZE = 256
CONFIG_EXTENDED_SIZE = 4096

_STATUS_CAP_LIST = 0x10
_EXT_CAP_START = 0x100
# The kernel's own walks stop after this many hops; so do we.
_MAX_STD_CAPS = 48
_MAX_EXT_CAPS = (CONFIG_EXTENDED_SIZE - CONFIG_STANDARD_SIZE) // 8

_MB = 1 << 20

VENDOR_NVIDIA = "10de"

STD_CAPABILITY_NAMES = {
    0x00: "Null",
    0x01: "Power Management",
    0x02: "AGP",
    0x03: "Vital Product Data",
    0x04: "Slot Identification",
    0x05: "MSI",
    0x06: "CompactPCI Hot Swap",
    0x07: "PCI-X",
    0x08: "HyperTransport",
    0x09: "Vendor Specific",
    0x0A: "Debug Port",
    0x0B: "CompactPCI Central Resource Control",
    0x0C: "PCI Hot-Plug",
    0x0D: "Bridge Subsystem Vendor ID",
    0x0E: "AGP 8x",
    0x0F: "Secure Device",
    0x10: "PCI Express",
    0x11: "MSI-X",
    0x12: "SATA",
    0x13: "Advanced Features",
    0x14: "Enhanced Allocation",
    0x15: "Flattening Portal Bridge",
}

EXT_CAPABILITY_NAMES = {
    0x0000: "Null",
    0x0001: "Advanced Error Reporting",
    0x0002: "Virtual Channel",
    0x0003: "Device Serial Number",
    0x0004: "Power Budgeting",
    0x0005: "Root Complex Link Declaration",
    0x0006: "Root Complex Internal Link Control",
    0x0007: "Root Complex Event Collector Endpoint Association",
    0x0008: "Multi-Function Virtual Channel",
    0x0009: "Virtual Channel",
    0x000A: "Root Complex Register Block",
    0x000B: "Vendor Specific",
    0x000D: "Access Control Services",
    0x000E: "Alternative Routing-ID Interpretation",
    0x000F: "Address Translation Services",
    0x0010: "Single Root I/O Virtualization",
    0x0011: "Multi-Root I/O Virtualization",
    0x0012: "Multicast",
    0x0013: "Page Request Interface",
    0x0015: "Resizable BAR",
    0x0016: "Dynamic Power Allocation",
    0x0017: "TPH Requester",
    0x0018: "Latency Tolerance Reporting",
    0x0019: "Secondary PCI Express",
    0x001A: "Protocol Multiplexing",
    0x001B: "Process Address Space ID",
    0x001D: "Downstream Port Containment",
    0x001E: "L1 PM Substates",
    0x001F: "Precision Time Measurement",
    0x0023: "Designated Vendor-Specific",
    0x0024: "VF Resizable BAR",
    0x0025: "Data Link Feature",
    0x0026: "Physical Layer 16.0 GT/s",
    0x0027: "Lane Margining at the Receiver",
    0x0029: "Native PCIe Enclosure Management",
    0x002A: "Physical Layer 32.0 GT/s",
    0x002E: "Data Object Exchange",
    0x0031: "Physical Layer 64.0 GT/s",
}
EXT_CAP_ACS = 0x000D
EXT_CAP_REBAR = 0x0015

# PCI Express Capabilities register, Device/Port Type field.
PORT_TYPES = {
    0x0: "endpoint",
    0x1: "legacy_endpoint",
    0x4: "root_port",
    0x5: "upstream_port",
    0x6: "downstream_port",
    0x7: "pcie_to_pci_bridge",
    0x8: "pci_to_pcie_bridge",
    0x9: "rc_integrated_endpoint",
    0xA: "rc_event_collector",
}
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

# Link Capabilities "Max Link Speed" / Link Status "Current Link Speed".
LINK_SPEEDS_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
_GENERATIONS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
# Widths the specification defines; anything else is a link that is down.
LINK_WIDTHS = (1, 2, 4, 8, 12, 16, 32)

# ACS Capability and Control registers share one bit layout.
_ACS_BITS = (
    ("src_valid", "SrcValid", 0x01),
    ("trans_blk", "TransBlk", 0x02),
    ("req_redir", "ReqRedir", 0x04),
    ("cmplt_redir", "CmpltRedir", 0x08),
    ("upstream_fwd", "UpstreamFwd", 0x10),
    ("egress_ctrl", "EgressCtrl", 0x20),
    ("direct_trans", "DirectTrans", 0x40),
)

# include/linux/ioport.h
IORESOURCE_IO = 0x00000100
IORESOURCE_MEM = 0x00000200
IORESOURCE_PREFETCH = 0x00002000
IORESOURCE_READONLY = 0x00004000
IORESOURCE_MEM_64 = 0x00100000
IORESOURCE_DISABLED = 0x10000000
IORESOURCE_UNSET = 0x20000000


class PciParseError(ValueError):
    """Input a parser cannot read; the message says what was expected and found."""


@dataclass
class Capability:
    """One entry of a capability list. ``cap_id`` is None when only a name was seen (lspci)."""

    offset: int
    cap_id: int | None
    name: str
    version: int | None = None
    extended: bool = False


@dataclass
class PcieInfo:
    """The PCI Express capability: what the port is and how its link trained.

    Speeds are in GT/s, widths in lanes; None where the field is reserved,
    unreadable or reports a link that is down.
    """

    offset: int | None
    version: int | None
    port_type: str
    port_type_code: int | None
    slot_implemented: bool | None
    max_link_speed_gts: float | None
    max_link_width: int | None
    link_speed_gts: float | None
    link_width: int | None

    @property
    def link_downgraded(self) -> bool | None:
        """True when the link trained below what the port can do (speed or width).

        On root and downstream ports a slower device below is the usual reason,
        which is why lspci only calls it "downgraded" on the device side.
        """
        speed, max_speed = self.link_speed_gts, self.max_link_speed_gts
        width, max_width = self.link_width, self.max_link_width
        if speed is None or max_speed is None or width is None or max_width is None:
            return None
        return speed < max_speed or width < max_width


@dataclass(frozen=True)
class AcsFlags:
    """One ACS register decoded; names follow lspci's ACSCap/ACSCtl words."""

    src_valid: bool
    trans_blk: bool
    req_redir: bool
    cmplt_redir: bool
    upstream_fwd: bool
    egress_ctrl: bool
    direct_trans: bool

    @classmethod
    def from_register(cls, value: int) -> AcsFlags:
        return cls(**{name: bool(value & bit) for name, _word, bit in _ACS_BITS})

    @property
    def redirects_p2p(self) -> bool:
        """Peer requests or completions are sent up to the root complex instead of across."""
        return self.req_redir or self.cmplt_redir


@dataclass
class Acs:
    """Access Control Services: what the port supports and what is switched on."""

    offset: int | None
    capability: AcsFlags | None
    control: AcsFlags | None


@dataclass
class ResizableBar:
    """One BAR of a Resizable BAR capability; sizes in bytes."""

    index: int
    current_size: int | None
    supported_sizes: list[int] = field(default_factory=list)

    @property
    def max_size(self) -> int | None:
        return max(self.supported_sizes) if self.supported_sizes else None


@dataclass
class ConfigSpace:
    """The decoded bytes of one device's config space."""

    size: int
    vendor_id: str
    device_id: str
    revision: int
    class_code: str
    header_type: int
    multifunction: bool
    subsystem_vendor_id: str | None = None
    subsystem_id: str | None = None
    primary_bus: int | None = None
    secondary_bus: int | None = None
    subordinate_bus: int | None = None
    capabilities_readable: bool = False
    capabilities: list[Capability] = field(default_factory=list)
    pcie: PcieInfo | None = None
    extended_readable: bool = False
    extended_capabilities: list[Capability] = field(default_factory=list)
    acs: Acs | None = None
    resizable_bars: list[ResizableBar] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def is_bridge(self) -> bool:
        return self.header_type == 1

    def has_extended_capability(self, cap_id: int) -> bool:
        return any(cap.cap_id == cap_id for cap in self.extended_capabilities)


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


@dataclass
class Bar:
    """One non-empty line of sysfs ``resource``."""

    index: int
    kind: str
    start: int
    end: int
    size: int
    flags: int
    io: bool
    mem: bool
    prefetchable: bool
    mem64: bool
    disabled: bool
    unset: bool


# ---------------------------------------------------------------------------
# Identifiers


_BDF_RE = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<device>[0-9a-fA-F]{1,2})\.(?P<function>[0-7])$"
)


def parse_bdf(text: str) -> str:
    """Normalize a PCI address to ``dddd:bb:dd.f``, lowercase.

    Takes lspci's ``41:00.0``, sysfs's ``0000:41:00.0`` and NVML's
    ``00000000:41:00.0``. Domains above ffff (Intel VMD) keep their digits.
    """
    if not isinstance(text, str):
        raise PciParseError(f"expected a PCI address as text like 0000:41:00.0, found {type(text).__name__}")
    match = _BDF_RE.match(text.strip())
    if match is None:
        raise PciParseError(
            f"expected a PCI address like 0000:41:00.0 or 41:00.0, found {text!r}; "
            "pass the address as lspci -D, sysfs or nvidia-smi print it"
        )
    device = int(match["device"], 16)
    if device > 0x1F:
        raise PciParseError(f"expected a device number 00..1f in {text!r}, found {device:02x}")
    domain = int(match["domain"], 16) if match["domain"] else 0
    return f"{domain:04x}:{int(match['bus'], 16):02x}:{device:02x}.{match['function']}"


def same_slot(bdf_a: str, bdf_b: str) -> bool:
    """True for two functions of one card (GPU 41:00.0 and its audio 41:00.1)."""
    return parse_bdf(bdf_a).rsplit(".", 1)[0] == parse_bdf(bdf_b).rsplit(".", 1)[0]


def format_id(value: int | str, digits: int = 4) -> str:
    """``0x10DE``, ``10de`` or 4318 as ``10de``: the form every result here uses."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise PciParseError(f"expected a hex id like 10de, found {type(value).__name__}")
    if isinstance(value, int):
        number = value
    else:
        text = value.strip().lower()
        text = text[2:] if text.startswith("0x") else text
        if not text or len(text) > digits or any(ch not in "0123456789abcdef" for ch in text):
            raise PciParseError(f"expected a hex id of up to {digits} digits like 10de, found {value!r}")
        number = int(text, 16)
    if not 0 <= number < 16**digits:
        raise PciParseError(f"expected an id below 0x{16**digits:x}, found {value!r}")
    return f"{number:0{digits}x}"


def _class_parts(class_code: int | str) -> tuple[int, int]:
    """Base class and subclass from a 24-bit code, or a 16-bit one without prog-if."""
    if isinstance(class_code, str):
        text = class_code.strip().lower()
        text = text[2:] if text.startswith("0x") else text
        # Four digits are base class and subclass, as lspci -nn prints them.
        code = int(format_id(text, 4), 16) << 8 if len(text) == 4 else int(format_id(text, 6), 16)
    else:
        code = int(format_id(class_code, 6), 16)
    return code >> 16, (code >> 8) & 0xFF


def device_kind(vendor_id: int | str, class_code: int | str) -> str:
    """What an NVIDIA function is: gpu, audio, nvswitch, usb, serial; "other" otherwise."""
    if format_id(vendor_id) != VENDOR_NVIDIA:
        return "other"
    base, sub = _class_parts(class_code)
    # VGA, 3D controller, and "display controller, other" that some headless boards report.
    if base == 0x03 and sub in (0x00, 0x02, 0x80):
        return "gpu"
    if (base, sub) == (0x04, 0x03):
        return "audio"
    if (base, sub) == (0x06, 0x80):
        return "nvswitch"
    # Turing boards carry a USB-C controller and its UCSI function.
    if (base, sub) == (0x0C, 0x03):
        return "usb"
    if (base, sub) == (0x0C, 0x80):
        return "serial"
    return "other"


# Host bridges that name the machine a guest runs in.
HOST_BRIDGE_MODELS = {
    ("8086", "29c0"): "q35 (ICH9 MCH, emulated by QEMU)",
    ("8086", "1237"): "i440fx (emulated by QEMU; no PCI Express)",
    ("1b36", "0008"): "QEMU generic PCIe host bridge (virt machines)",
    ("8086", "0d57"): "virtual PCIe host of rust-vmm hypervisors (cloud-hypervisor, Firecracker)",
}

# Other emulated functions worth naming when deciding whether we are a guest.
# Some ids are real silicon that QEMU copies; the text says so.
EMULATED_DEVICES = {
    ("1b36", "0001"): "QEMU PCI-PCI bridge (pci-bridge)",
    ("1b36", "000b"): "QEMU PCIe expander bridge (pxb-pcie)",
    ("1b36", "000c"): "QEMU PCIe root port (pcie-root-port)",
    ("1b36", "000d"): "QEMU XHCI USB controller (qemu-xhci)",
    ("1b36", "000e"): "QEMU PCIe-to-PCI bridge (pcie-pci-bridge)",
    ("1b36", "0010"): "QEMU NVMe controller",
    ("1234", "1111"): "QEMU standard VGA (bochs)",
    ("8086", "2918"): "ICH9 LPC bridge (q35 machine)",
    ("8086", "2922"): "ICH9 AHCI controller (q35 machine)",
    ("8086", "2930"): "ICH9 SMBus controller (q35 machine)",
    ("8086", "7000"): "PIIX3 ISA bridge (i440fx machine)",
    ("8086", "7010"): "PIIX3 IDE controller (i440fx machine)",
    ("8086", "7113"): "PIIX4 ACPI (i440fx machine)",
    ("8086", "3420"): "Intel 5520/X58 root port; QEMU's ioh3420 emulates it, without ACS",
    ("104c", "8232"): "TI XIO3130 switch upstream port; QEMU's x3130-upstream emulates it",
    ("104c", "8233"): "TI XIO3130 switch downstream port; QEMU's xio3130-downstream emulates it, without ACS",
    ("15ad", "0405"): "VMware SVGA II adapter",
    ("15ad", "0790"): "VMware PCI bridge",
    ("15ad", "07a0"): "VMware PCI Express root port",
    ("1414", "5353"): "Hyper-V virtual VGA",
    ("1414", "008e"): "Microsoft Basic Render Driver (GPU paravirtualization, WSL2 / Hyper-V)",
}

VIRTUAL_VENDORS = {
    "1af4": "virtio (Red Hat / QEMU)",
    "1b36": "QEMU (Red Hat)",
    "1234": "QEMU",
    "15ad": "VMware",
    "1414": "Microsoft (Hyper-V)",
}

# Modern virtio ids are 0x1040 + the virtio device type.
_VIRTIO_TYPES = {
    1: "network",
    2: "block",
    3: "console",
    4: "entropy",
    5: "memory balloon",
    8: "SCSI",
    9: "9P transport",
    16: "GPU",
    18: "input",
    19: "vsock",
    26: "filesystem",
}
_VIRTIO_LEGACY = {0x1000: 1, 0x1001: 2, 0x1002: 5, 0x1003: 3, 0x1004: 8, 0x1005: 4, 0x1009: 9}


def describe_pci_id(vendor: int | str, device: int | str) -> str | None:
    """Name a device that hypervisors emulate; None for anything else."""
    key = (format_id(vendor), format_id(device))
    if key in HOST_BRIDGE_MODELS:
        return HOST_BRIDGE_MODELS[key]
    if key in EMULATED_DEVICES:
        return EMULATED_DEVICES[key]
    vendor_id, device_number = key[0], int(key[1], 16)
    if vendor_id == "1af4":
        kind = _VIRTIO_LEGACY.get(device_number)
        if kind is None and 0x1040 <= device_number <= 0x107F:
            kind = device_number - 0x1040
        if kind is not None:
            return f"virtio {_VIRTIO_TYPES.get(kind, f'type {kind}')} device"
    if vendor_id in VIRTUAL_VENDORS:
        return f"{VIRTUAL_VENDORS[vendor_id]} virtual device"
    return None


# ---------------------------------------------------------------------------
# Config space


def _u8(data: bytes, offset: int) -> int | None:
    return data[offset] if 0 <= offset < len(data) else None


def _u16(data: bytes, offset: int) -> int | None:
    if offset < 0 or offset + 2 > len(data):
        return None
    return struct.unpack_from("<H", data, offset)[0]


def _u32(data: bytes, offset: int) -> int | None:
    if offset < 0 or offset + 4 > len(data):
        return None
    return struct.unpack_from("<I", data, offset)[0]


def parse_config_space(data: bytes) -> ConfigSpace:
    """Decode the bytes of ``/sys/bus/pci/devices/<bdf>/config``.

    Raises PciParseError when there is no header to decode: fewer than 64
    bytes, or a vendor id of ffff/0000 (no device answered: removed, powered
    down, or the read failed).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise PciParseError(f"expected the config file's bytes, found {type(data).__name__}")
    data = bytes(data)
    if len(data) < CONFIG_HEADER_SIZE:
        raise PciParseError(
            f"expected at least the {CONFIG_HEADER_SIZE}-byte config header, found {len(data)} bytes; "
            "read /sys/bus/pci/devices/<bdf>/config whole, in binary mode"
        )
    vendor, device = struct.unpack_from("<HH", data, 0)
    if vendor in (0xFFFF, 0x0000):
        raise PciParseError(
            f"expected a vendor id, found {vendor:04x}: no device answered at this address "
            "(removed, powered off, or in D3cold); check that it is still listed and awake, then read again"
        )
    status = _u16(data, 6) or 0
    header_byte = data[0x0E]
    config = ConfigSpace(
        size=len(data),
        vendor_id=f"{vendor:04x}",
        device_id=f"{device:04x}",
        revision=data[0x08],
        class_code=f"{data[0x0B]:02x}{data[0x0A]:02x}{data[0x09]:02x}",
        header_type=header_byte & 0x7F,
        multifunction=bool(header_byte & 0x80),
    )
    if config.header_type == 0:
        config.subsystem_vendor_id = f"{_u16(data, 0x2C):04x}"
        config.subsystem_id = f"{_u16(data, 0x2E):04x}"
        cap_pointer_at = 0x34
    elif config.header_type == 1:
        config.primary_bus, config.secondary_bus, config.subordinate_bus = data[0x18], data[0x19], data[0x1A]
        cap_pointer_at = 0x34
    elif config.header_type == 2:
        cap_pointer_at = 0x14
    else:
        config.warnings.append(
            f"header type {config.header_type:#x} is not one the PCI specification defines (0, 1, 2); "
            "capabilities were not read"
        )
        return config

    if status & _STATUS_CAP_LIST:
        _walk_capabilities(data, data[cap_pointer_at] & 0xFC, config)
    else:
        config.capabilities_readable = True
    _walk_extended_capabilities(data, config)
    return config


def _walk_capabilities(data: bytes, pointer: int, config: ConfigSpace) -> None:
    seen: set[int] = set()
    config.capabilities_readable = True
    for _ in range(_MAX_STD_CAPS):
        if pointer == 0:
            return
        if pointer < CONFIG_HEADER_SIZE or pointer > CONFIG_STANDARD_SIZE - 4:
            config.warnings.append(
                f"capability pointer {pointer:#04x} is outside 0x40..0xfc; the list is corrupt, "
                f"walk stopped after {len(config.capabilities)} capabilities"
            )
            return
        if pointer + 2 > len(data):
            config.capabilities_readable = False
            config.warnings.append(
                f"the capability list continues at {pointer:#04x}, beyond the {len(data)} bytes read; "
                "unprivileged reads of config stop at 64 bytes: read it as root, or parse lspci -vvv run as root"
            )
            return
        if pointer in seen:
            config.warnings.append(f"capability list loops back to {pointer:#04x}; walk stopped there")
            return
        seen.add(pointer)
        cap_id, next_pointer = data[pointer], data[pointer + 1] & 0xFC
        if cap_id == 0xFF:
            config.warnings.append(
                f"capability at {pointer:#04x} reads as ff (device not answering or list broken); walk stopped"
            )
            return
        config.capabilities.append(
            Capability(pointer, cap_id, STD_CAPABILITY_NAMES.get(cap_id, f"Capability {cap_id:#04x}"))
        )
        if cap_id == 0x10 and config.pcie is None:
            config.pcie = _decode_pcie(data, pointer, config)
        elif cap_id == 0x0D and config.header_type == 1:
            config.subsystem_vendor_id = _hex_or_none(_u16(data, pointer + 4), 4)
            config.subsystem_id = _hex_or_none(_u16(data, pointer + 6), 4)
        pointer = next_pointer
    config.warnings.append(f"capability list longer than {_MAX_STD_CAPS} entries; walk stopped")


def _hex_or_none(value: int | None, digits: int) -> str | None:
    return None if value is None else f"{value:0{digits}x}"


def _link_speed(code: int | None) -> float | None:
    return None if code is None else LINK_SPEEDS_GTS.get(code & 0xF)


def _link_width(value: int | None) -> int | None:
    return value if value in LINK_WIDTHS else None


def _decode_pcie(data: bytes, offset: int, config: ConfigSpace) -> PcieInfo:
    flags = _u16(data, offset + 2)
    link_cap = _u32(data, offset + 0x0C)
    link_status = _u16(data, offset + 0x12)
    if flags is None or link_cap is None or link_status is None:
        config.warnings.append(
            f"PCI Express capability at {offset:#04x} runs past the {len(data)} bytes read; link fields unknown"
        )
    type_code = None if flags is None else (flags >> 4) & 0xF
    has_link = type_code not in (0x9, 0xA)  # root complex integrated parts have no link of their own
    return PcieInfo(
        offset=offset,
        version=None if flags is None else flags & 0xF,
        port_type=_port_type_name(type_code),
        port_type_code=type_code,
        slot_implemented=None if flags is None else bool(flags & 0x100),
        max_link_speed_gts=_link_speed(link_cap) if has_link else None,
        max_link_width=_link_width(None if link_cap is None else (link_cap >> 4) & 0x3F) if has_link else None,
        link_speed_gts=_link_speed(link_status) if has_link else None,
        link_width=_link_width(None if link_status is None else (link_status >> 4) & 0x3F) if has_link else None,
    )


def _port_type_name(code: int | None) -> str:
    if code is None:
        return "unknown"
    return PORT_TYPES.get(code, f"unknown_{code}")


def _walk_extended_capabilities(data: bytes, config: ConfigSpace) -> None:
    first = _u32(data, _EXT_CAP_START)
    if first is None:
        return
    if first == 0xFFFFFFFF:
        config.warnings.append(
            "extended config space reads as all ones: the kernel has no extended config access "
            "to this device; ACS and Resizable BAR are unknown from here"
        )
        return
    config.extended_readable = True
    seen: set[int] = set()
    offset = _EXT_CAP_START
    header = first
    for _ in range(_MAX_EXT_CAPS):
        if header == 0:
            return
        if header == 0xFFFFFFFF:
            config.warnings.append(f"extended capability at {offset:#05x} reads as all ones; walk stopped")
            return
        seen.add(offset)
        cap_id, version, next_offset = header & 0xFFFF, (header >> 16) & 0xF, (header >> 20) & 0xFFC
        config.extended_capabilities.append(
            Capability(
                offset, cap_id, EXT_CAPABILITY_NAMES.get(cap_id, f"Extended Capability {cap_id:#06x}"), version, True
            )
        )
        if cap_id == EXT_CAP_ACS:
            _decode_acs(data, offset, config)
        elif cap_id == EXT_CAP_REBAR:
            _decode_rebar(data, offset, config)
        if next_offset == 0:
            return
        if next_offset < _EXT_CAP_START:
            config.warnings.append(
                f"extended capability at {offset:#05x} points to {next_offset:#05x}, below 0x100; walk stopped"
            )
            return
        if next_offset in seen:
            config.warnings.append(f"extended capability list loops back to {next_offset:#05x}; walk stopped")
            return
        next_header = _u32(data, next_offset)
        if next_header is None:
            config.warnings.append(
                f"extended capability list continues at {next_offset:#05x}, beyond the {len(data)} bytes read"
            )
            return
        offset, header = next_offset, next_header
    config.warnings.append(f"extended capability list longer than {_MAX_EXT_CAPS} entries; walk stopped")


def _decode_acs(data: bytes, offset: int, config: ConfigSpace) -> None:
    if config.acs is not None:
        config.warnings.append(f"second ACS capability at {offset:#05x} ignored; the first one is reported")
        return
    capability, control = _u16(data, offset + 4), _u16(data, offset + 6)
    if capability is None or control is None:
        config.warnings.append(f"ACS capability at {offset:#05x} runs past the {len(data)} bytes read")
    config.acs = Acs(
        offset=offset,
        capability=None if capability is None else AcsFlags.from_register(capability),
        control=None if control is None else AcsFlags.from_register(control),
    )


def _decode_rebar(data: bytes, offset: int, config: ConfigSpace) -> None:
    first_control = _u32(data, offset + 8)
    if first_control is None:
        config.warnings.append(f"Resizable BAR capability at {offset:#05x} runs past the {len(data)} bytes read")
        return
    count = (first_control >> 5) & 0x7
    if not 1 <= count <= 6:
        config.warnings.append(
            f"Resizable BAR capability at {offset:#05x} claims {count} BARs (1..6 allowed); entries not read"
        )
        return
    for entry in range(count):
        capability = _u32(data, offset + 4 + 8 * entry)
        control = _u32(data, offset + 8 + 8 * entry)
        if capability is None or control is None:
            config.warnings.append(f"Resizable BAR entry {entry} at {offset:#05x} runs past the bytes read")
            return
        sizes = [_MB << bit for bit in range(28) if (capability >> 4) & (1 << bit)]
        sizes += [_MB << (bit + 28) for bit in range(16) if (control >> 16) & (1 << bit)]
        config.resizable_bars.append(
            ResizableBar(index=control & 0x7, current_size=_MB << ((control >> 8) & 0x3F), supported_sizes=sizes)
        )


# ---------------------------------------------------------------------------
# lspci -vvv


_LSPCI_HEADER_RE = re.compile(
    r"^(?P<bdf>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(?P<rest>\S.*)$"
)
_PROG_IF_RE = re.compile(r"\s*\(prog-if (?P<progif>[0-9a-fA-F]{2})(?: \[[^\]]*\])?\)\s*$")
_REV_RE = re.compile(r"\s*\(rev (?P<rev>[0-9a-fA-F]{2})\)\s*$")
_IDS_NN_RE = re.compile(r"\s*\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\]\s*$")
_IDS_N_RE = re.compile(r"^(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})$")
_CLASS_NN_RE = re.compile(r"^(?P<name>.*?)\s*\[(?P<code>[0-9a-fA-F]{4})\]$")
_CLASS_N_RE = re.compile(r"^(?:Class )?(?P<code>[0-9a-fA-F]{4})$")
_CAP_RE = re.compile(r"^Capabilities:\s*\[(?P<offset>[0-9a-fA-F]+)(?:\s+v(?P<version>\d+))?\]\s*(?P<name>.*)$")
_EXPRESS_RE = re.compile(
    r"^Express\s+(?:\(v(?P<version>\d+)\)\s+)?(?P<type>.+?)"
    r"(?:\s+\(Slot(?P<slot>[+-])\))?(?:,\s*(?:MSI|IntMsgNum)\s+[0-9a-fA-F]+)?(?:,.*)?$"
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
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
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
        extended = match["version"] is not None or offset >= _EXT_CAP_START
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
        port_type=_port_type_name(code),
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
        width = _link_width(int(match["width"]))
    return speed, width


def _lspci_acs_flags(value: str, device: LspciDevice) -> AcsFlags | None:
    words = dict(re.findall(r"([A-Za-z]+)([+-])", value))
    found = {name: words.get(word) for name, word, _bit in _ACS_BITS}
    if all(sign is None for sign in found.values()):
        device.warnings.append(f"ACS line without flags: {value!r}")
        return None
    missing = [word for name, word, _bit in _ACS_BITS if found[name] is None]
    if missing:
        device.warnings.append(f"ACS line lacks {', '.join(missing)}; taken as off")
    return AcsFlags(**{name: sign == "+" for name, sign in found.items()})


def _lspci_size(word: str) -> int | None:
    match = _SIZE_RE.match(word.strip().rstrip(","))
    if match is None:
        return None
    return int(match["number"]) * _SIZE_UNITS[match["unit"]]


# ---------------------------------------------------------------------------
# sysfs attributes


_RESOURCE_LINE_RE = re.compile(r"^0x(?P<start>[0-9a-fA-F]+)\s+0x(?P<end>[0-9a-fA-F]+)\s+0x(?P<flags>[0-9a-fA-F]+)$")


def parse_resource(text: str) -> list[Bar]:
    """Decode sysfs ``resource``: one ``start end flags`` line per resource.

    Lines 0-5 are the BARs, 6 the expansion ROM. After that the layout depends
    on the device and kernel: with SR-IOV support compiled in (13 lines for
    endpoints, 17 for bridges) lines 7-12 are the VF BARs and 13-16 a bridge's
    windows; without it (7 or 11 lines) lines 7-10 are the bridge windows.
    Empty lines (all zero) are left out.
    """
    if not isinstance(text, str):
        raise PciParseError(f"expected the resource file as text, found {type(text).__name__}")
    lines = [line.strip() for line in text.strip().splitlines()]
    if not lines or lines == [""]:
        raise PciParseError(
            "expected lines of 'start end flags' in hex (sysfs resource), found nothing; "
            "read /sys/bus/pci/devices/<bdf>/resource"
        )
    with_sriov = len(lines) >= 13
    bars = []
    for index, line in enumerate(lines):
        match = _RESOURCE_LINE_RE.match(line)
        if match is None:
            raise PciParseError(
                f"expected 'start end flags' as three 0x-prefixed hex numbers on resource line {index}, "
                f"found {line[:80]!r}; pass the file as the kernel wrote it"
            )
        start, end, flags = (int(match[name], 16) for name in ("start", "end", "flags"))
        if start == 0 and end == 0 and flags == 0:
            continue
        if end < start:
            raise PciParseError(
                f"expected end >= start on resource line {index}, found start {start:#x} end {end:#x}"
            )
        bars.append(
            Bar(
                index=index,
                kind=_resource_kind(index, with_sriov),
                start=start,
                end=end,
                size=end - start + 1,
                flags=flags,
                io=bool(flags & IORESOURCE_IO),
                mem=bool(flags & IORESOURCE_MEM),
                prefetchable=bool(flags & IORESOURCE_PREFETCH),
                mem64=bool(flags & IORESOURCE_MEM_64),
                disabled=bool(flags & IORESOURCE_DISABLED),
                unset=bool(flags & IORESOURCE_UNSET),
            )
        )
    return bars


def _resource_kind(index: int, with_sriov: bool) -> str:
    if index < 6:
        return "bar"
    if index == 6:
        return "rom"
    if with_sriov and index < 13:
        return "sriov_bar"
    return "bridge_window"


_SYSFS_SPEED_RE = re.compile(r"^(?P<speed>[0-9]+(?:\.[0-9]+)?)\s*GT/s(?:\s+PCIe)?$", re.IGNORECASE)


def parse_link_speed(text: str) -> float | None:
    """``current_link_speed`` / ``max_link_speed`` in GT/s; None for "Unknown" and friends."""
    if not isinstance(text, str):
        raise PciParseError(f"expected a link speed as text like '16.0 GT/s PCIe', found {type(text).__name__}")
    value = text.strip()
    if value.lower().startswith("unknown"):
        return None
    match = _SYSFS_SPEED_RE.match(value)
    if match is None:
        raise PciParseError(
            f"expected a link speed like '16.0 GT/s PCIe', '8 GT/s' or 'Unknown', found {text[:80]!r}"
        )
    speed = float(match["speed"])
    return speed if speed > 0 else None


def link_gen(speed_gts: float | None) -> int | None:
    """PCIe generation of a per-lane rate: 2.5 -> 1 ... 64 -> 6; None when not one of those."""
    if speed_gts is None or isinstance(speed_gts, bool) or not isinstance(speed_gts, (int, float)):
        return None
    for rate, generation in _GENERATIONS.items():
        if abs(rate - speed_gts) < 0.01:
            return generation
    return None


def parse_link_width(text: str) -> int | None:
    """``current_link_width`` / ``max_link_width`` in lanes; None for 0 (link down) and 255."""
    if not isinstance(text, str):
        raise PciParseError(f"expected a link width as text like '16', found {type(text).__name__}")
    value = text.strip().lower()
    value = value[1:] if value.startswith("x") else value
    if not value.isdigit() or not value.isascii():
        raise PciParseError(f"expected a link width like '16' or 'x16', found {text[:80]!r}")
    return _link_width(int(value))
