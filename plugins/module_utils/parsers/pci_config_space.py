"""Config space: the bytes of ``/sys/bus/pci/devices/<bdf>/config``, decoded.

A pure parser from bytes to a dataclass; ``source.py`` reads, this decodes.
``parse_config_space(data)`` returns a ``ConfigSpace``:

* header: size (bytes given), vendor_id, device_id (4 hex digits), revision,
  class_code (6 hex digits with prog-if), header_type (0 endpoint, 1 bridge,
  2 CardBus), multifunction; subsystem_vendor_id and subsystem_id (from the
  header, or a bridge's Subsystem capability); primary/secondary/subordinate
  bus on bridges;
* capabilities_readable and capabilities (``Capability`` list, the standard
  list); pcie (``PcieInfo``, when there is a PCI Express capability);
* extended_readable and extended_capabilities; acs (``Acs``) and
  resizable_bars (``ResizableBar`` list) decoded from them;
* warnings: what stopped a walk early.

It raises ``PciParseError`` only when there is no header to decode.

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

import struct
from dataclasses import dataclass, field

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import (
    EXT_CAP_START,
    EXT_CAPABILITY_NAMES,
    Acs,
    AcsFlags,
    Capability,
    PcieInfo,
    PciParseError,
    ResizableBar,
    port_type_name,
    valid_link_width,
)

CONFIG_HEADER_SIZE = 64
CONFIG_STANDARD_SIZE = 256
CONFIG_EXTENDED_SIZE = 4096

_STATUS_CAP_LIST = 0x10
# The kernel's own walks stop after this many hops; so do we.
_MAX_STD_CAPS = 48
_MAX_EXT_CAPS = (CONFIG_EXTENDED_SIZE - CONFIG_STANDARD_SIZE) // 8

_MB = 1 << 20

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

EXT_CAP_ACS = 0x000D
EXT_CAP_REBAR = 0x0015

# Link Capabilities "Max Link Speed" / Link Status "Current Link Speed".
LINK_SPEEDS_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


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
    for _unused in range(_MAX_STD_CAPS):
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
        port_type=port_type_name(type_code),
        port_type_code=type_code,
        slot_implemented=None if flags is None else bool(flags & 0x100),
        max_link_speed_gts=_link_speed(link_cap) if has_link else None,
        max_link_width=(
            valid_link_width(None if link_cap is None else (link_cap >> 4) & 0x3F) if has_link else None
        ),
        link_speed_gts=_link_speed(link_status) if has_link else None,
        link_width=(
            valid_link_width(None if link_status is None else (link_status >> 4) & 0x3F) if has_link else None
        ),
    )


def _walk_extended_capabilities(data: bytes, config: ConfigSpace) -> None:
    first = _u32(data, EXT_CAP_START)
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
    offset = EXT_CAP_START
    header = first
    for _unused in range(_MAX_EXT_CAPS):
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
        if next_offset < EXT_CAP_START:
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
