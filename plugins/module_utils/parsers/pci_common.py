"""What the PCI parsers share: their error, the capability types, the id and address helpers.

``pci_config_space`` (config space bytes) and ``lspci`` (``lspci -vvv`` text)
decode the same capabilities into the same types, so the two can be compared
field by field; ``sysfs_pci`` reads the kernel's attributes. All three raise
only ``PciParseError`` (a ``ValueError``), for input that is not what the
parser was given to read. Damage inside otherwise readable data (a capability
list that loops, a pointer out of range) is not an exception: it lands in the
result's ``warnings`` and the walk stops there, because the fields read up to
that point are still true.

The types both decoders fill:

* ``Capability``: offset, cap_id (None when lspci printed only a name), name,
  version, extended.
* ``PcieInfo``: the PCI Express capability: offset, version, port_type (a
  ``PORT_TYPES`` name) and port_type_code, slot_implemented, max/current link
  speed (GT/s) and width (lanes); ``link_downgraded``.
* ``Acs``: offset and two ``AcsFlags`` (capability, control), each with the
  seven ACS bits and ``redirects_p2p``.
* ``ResizableBar``: index, current_size and supported_sizes in bytes.

The helpers: ``parse_bdf`` (any PCI address to ``dddd:bb:dd.f``),
``same_slot`` (two functions of one device), ``format_id`` (a vendor/device id
to four hex digits), ``device_kind`` (what an NVIDIA function is) and
``describe_pci_id`` (the devices hypervisors emulate).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import ParseError

# Where extended capabilities start, in PCIe config space and in lspci's offsets.
EXT_CAP_START = 0x100

# NVIDIA's PCI vendor id, in the form format_id gives (sysfs writes 0x10de, lspci -nn 10de).
VENDOR_NVIDIA = "10de"

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

# Widths the specification defines; anything else is a link that is down.
LINK_WIDTHS = (1, 2, 4, 8, 12, 16, 32)

# ACS Capability and Control registers share one bit layout.
ACS_BITS = (
    ("src_valid", "SrcValid", 0x01),
    ("trans_blk", "TransBlk", 0x02),
    ("req_redir", "ReqRedir", 0x04),
    ("cmplt_redir", "CmpltRedir", 0x08),
    ("upstream_fwd", "UpstreamFwd", 0x10),
    ("egress_ctrl", "EgressCtrl", 0x20),
    ("direct_trans", "DirectTrans", 0x40),
)


class PciParseError(ParseError):
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
        return cls(**{name: bool(value & bit) for name, _word, bit in ACS_BITS})

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


def port_type_name(code: int | None) -> str:
    """The ``PORT_TYPES`` name of a Device/Port Type code; ``unknown`` or ``unknown_<n>`` otherwise."""
    if code is None:
        return "unknown"
    return PORT_TYPES.get(code, f"unknown_{code}")


def valid_link_width(value: int | None) -> int | None:
    """A width the specification defines, in lanes; None for anything else (a link that is down)."""
    return value if value in LINK_WIDTHS else None


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
    """True for two functions of one card (GPU 41:00.0 and its audio 41:00.1).

    Addresses are compared as ``parse_bdf`` writes them, so ``41:00.0`` and
    ``0000:41:00.1`` match. Facts read back from a report can hold any text: when
    either is text ``parse_bdf`` does not read, the two are compared as written, up
    to the last ``.``, rather than raising.
    """
    try:
        return parse_bdf(bdf_a).rsplit(".", 1)[0] == parse_bdf(bdf_b).rsplit(".", 1)[0]
    except PciParseError:
        return bdf_a.rsplit(".", 1)[0] == bdf_b.rsplit(".", 1)[0]


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


def is_nvidia(vendor_id: int | str | None) -> bool:
    """Whether a vendor id, in any form sysfs, lspci or the facts give it (``0x10de``, ``10de``), is NVIDIA's."""
    try:
        return format_id(vendor_id) == VENDOR_NVIDIA  # type: ignore[arg-type]
    except PciParseError:
        return False


def is_nvidia_gpu(vendor_id: int | str | None, class_code: int | str | None) -> bool:
    """Whether a PCI function is an NVIDIA GPU: VGA 0x0300 (boards with display outputs), 3D controller
    0x0302 (compute boards) or display controller 0x0380 (some headless boards); never the board's other
    functions (HDMI audio 0x0403, USB-C 0x0c03, UCSI 0x0c80). The one test every caller uses."""
    try:
        return device_kind(vendor_id, class_code) == "gpu"  # type: ignore[arg-type]
    except PciParseError:
        return False


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
