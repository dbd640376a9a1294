"""Tests of the PCI parsers over captured and synthesized devices (tests/fixtures/pci/SOURCES.md)."""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ansible.module_utils.gpuhost.parsers.pci_config import (
    EXT_CAP_ACS,
    EXT_CAP_REBAR,
    HOST_BRIDGE_MODELS,
    Acs,
    AcsFlags,
    Bar,
    PcieInfo,
    PciParseError,
    ResizableBar,
    describe_pci_id,
    device_kind,
    format_id,
    link_gen,
    parse_bdf,
    parse_config_space,
    parse_link_speed,
    parse_link_width,
    parse_lspci_vvv,
    parse_resource,
    same_slot,
)
from tests import paths

FIXTURES = paths.FIXTURES / "pci"
MB = 1 << 20
GB = 1 << 30

_HEX_LINE = re.compile(r"^(?P<offset>[0-9a-f]+): (?P<bytes>[0-9a-f]{2}(?: [0-9a-f]{2})*)$")


def load_config(name: str) -> bytes:
    """A config/*.hex fixture (lspci -xxxx layout) as the bytes sysfs would give."""
    data = bytearray()
    for line in (FIXTURES / "config" / name).read_text().splitlines():
        match = _HEX_LINE.match(line.strip())
        if match is None:
            continue
        offset, chunk = int(match["offset"], 16), bytes.fromhex(match["bytes"])
        assert offset == len(data), f"{name}: gap or overlap at {offset:#x}"
        data += chunk
    return bytes(data)


def load_lspci(name: str) -> str:
    return (FIXTURES / "lspci" / name).read_text()


def load_sysfs(name: str) -> str:
    return (FIXTURES / "sysfs" / name).read_text()


CONFIG_FIXTURES = sorted(path.name for path in (FIXTURES / "config").glob("*.hex"))
LSPCI_FIXTURES = sorted(path.name for path in (FIXTURES / "lspci").glob("*.txt"))

ACS_LINUX_DEFAULT = AcsFlags(
    src_valid=True, trans_blk=False, req_redir=True, cmplt_redir=True,
    upstream_fwd=True, egress_ctrl=False, direct_trans=False,
)
ACS_OFF = AcsFlags(
    src_valid=False, trans_blk=False, req_redir=False, cmplt_redir=False,
    upstream_fwd=False, egress_ctrl=False, direct_trans=False,
)
QEMU_ROOT_PORT_ACS_CAP = AcsFlags(
    src_valid=True, trans_blk=True, req_redir=True, cmplt_redir=True,
    upstream_fwd=True, egress_ctrl=False, direct_trans=True,
)
RTX4090_REBAR = [
    ResizableBar(index=0, current_size=16 * MB, supported_sizes=[16 * MB]),
    ResizableBar(index=1, current_size=32 * GB, supported_sizes=[(64 * MB) << shift for shift in range(10)]),
    ResizableBar(index=3, current_size=32 * MB, supported_sizes=[32 * MB]),
]


# ---------------------------------------------------------------------------
# Config space: exact values per fixture


def test_fixture_loader_reads_whole_dumps():
    sizes = {name: len(load_config(name)) for name in CONFIG_FIXTURES}
    assert sizes["q35-pcie-root-port.1b36-000c.root.hex"] == 4096
    assert sizes["q35-pcie-root-port.1b36-000c.user.hex"] == 64
    assert sizes["rtx4090.10de-2684.user.hex"] == 64
    assert sizes["q35-host-bridge.8086-29c0.root.hex"] == 256
    assert sizes["firecracker-virtio-net.1af4-1041.root.hex"] == 256
    assert set(sizes.values()) == {64, 256, 4096}


def test_qemu_pcie_root_port_as_root():
    config = parse_config_space(load_config("q35-pcie-root-port.1b36-000c.root.hex"))
    assert (config.size, config.vendor_id, config.device_id, config.class_code) == (4096, "1b36", "000c", "060400")
    assert (config.header_type, config.is_bridge, config.multifunction) == (1, True, False)
    assert (config.primary_bus, config.secondary_bus, config.subordinate_bus) == (0, 1, 1)
    assert (config.subsystem_vendor_id, config.subsystem_id) == ("1b36", "0000")
    assert [(cap.offset, cap.cap_id) for cap in config.capabilities] == [(0x54, 0x10), (0x48, 0x11), (0x40, 0x0D)]
    assert config.pcie == PcieInfo(
        offset=0x54, version=2, port_type="root_port", port_type_code=4, slot_implemented=True,
        max_link_speed_gts=16.0, max_link_width=32, link_speed_gts=2.5, link_width=1,
    )
    assert config.pcie.link_downgraded is True
    assert config.extended_readable and config.capabilities_readable
    assert [(cap.offset, cap.cap_id, cap.version, cap.name) for cap in config.extended_capabilities] == [
        (0x100, 0x0001, 2, "Advanced Error Reporting"),
        (0x148, 0x000D, 1, "Access Control Services"),
    ]
    assert config.acs == Acs(offset=0x148, capability=QEMU_ROOT_PORT_ACS_CAP, control=ACS_LINUX_DEFAULT)
    assert config.acs.control.redirects_p2p is True
    assert config.resizable_bars == []
    assert config.warnings == []


@pytest.mark.parametrize(
    "name", ["q35-pcie-root-port.1b36-000c.user.hex", "rtx4090.10de-2684.user.hex"]
)
def test_unprivileged_read_has_header_but_no_capabilities(name):
    config = parse_config_space(load_config(name))
    assert config.size == 64
    assert config.capabilities_readable is False
    assert (config.pcie, config.acs, config.extended_readable) == (None, None, False)
    assert config.capabilities == [] and config.resizable_bars == []
    assert len(config.warnings) == 1
    assert "beyond the 64 bytes read" in config.warnings[0] and "root" in config.warnings[0]


def test_unprivileged_read_keeps_the_header_fields():
    root = parse_config_space(load_config("rtx4090.10de-2684.root.hex"))
    user = parse_config_space(load_config("rtx4090.10de-2684.user.hex"))
    fields = ("vendor_id", "device_id", "revision", "class_code", "header_type", "multifunction",
              "subsystem_vendor_id", "subsystem_id")
    assert [getattr(user, name) for name in fields] == [getattr(root, name) for name in fields]
    assert (user.vendor_id, user.device_id, user.subsystem_id) == ("10de", "2684", "167c")


def test_rtx4090_as_root_with_resizable_bar():
    config = parse_config_space(load_config("rtx4090.10de-2684.root.hex"))
    assert (config.vendor_id, config.device_id, config.revision, config.class_code) == ("10de", "2684", 0xA1, "030000")
    assert config.multifunction is True
    assert (config.subsystem_vendor_id, config.subsystem_id) == ("10de", "167c")
    assert [(cap.offset, cap.cap_id) for cap in config.capabilities] == [(0x60, 1), (0x68, 5), (0x78, 0x10), (0xB4, 9)]
    assert config.pcie == PcieInfo(
        offset=0x78, version=2, port_type="legacy_endpoint", port_type_code=1, slot_implemented=False,
        max_link_speed_gts=16.0, max_link_width=16, link_speed_gts=2.5, link_width=16,
    )
    assert [(cap.offset, cap.cap_id) for cap in config.extended_capabilities] == [
        (0x100, 0x02), (0x250, 0x18), (0x258, 0x1E), (0x128, 0x04), (0x420, 0x01), (0x600, 0x0B),
        (0x900, 0x19), (0xBB0, 0x15), (0xC1C, 0x26), (0xD00, 0x27), (0xE00, 0x25),
    ]
    assert config.has_extended_capability(EXT_CAP_REBAR) and not config.has_extended_capability(EXT_CAP_ACS)
    assert config.resizable_bars == RTX4090_REBAR
    assert config.resizable_bars[1].max_size == 32 * GB
    assert config.acs is None
    assert config.warnings == []
    assert device_kind(config.vendor_id, config.class_code) == "gpu"


def test_rtx4090_without_extended_config_access():
    """Root on a host without ECAM reads 256 bytes: the link is known, ReBAR and ACS are not."""
    full = parse_config_space(load_config("rtx4090.10de-2684.root.hex"))
    config = parse_config_space(load_config("rtx4090.10de-2684.root.hex")[:256])
    assert config.capabilities_readable is True
    assert config.pcie == full.pcie
    assert (config.extended_readable, config.acs, config.resizable_bars) == (False, None, [])
    assert config.extended_capabilities == []
    assert config.warnings == []


def test_plx_downstream_port_redirects_peer_traffic():
    config = parse_config_space(load_config("plx-pex8747-downstream.10b5-8747.root.hex"))
    assert (config.vendor_id, config.device_id, config.class_code, config.header_type) == ("10b5", "8747", "060400", 1)
    assert (config.primary_bus, config.secondary_bus, config.subordinate_bus) == (0x42, 0x43, 0x43)
    assert (config.subsystem_vendor_id, config.subsystem_id) == ("10b5", "8747")
    assert config.pcie == PcieInfo(
        offset=0x68, version=2, port_type="downstream_port", port_type_code=6, slot_implemented=True,
        max_link_speed_gts=8.0, max_link_width=16, link_speed_gts=8.0, link_width=16,
    )
    assert config.pcie.link_downgraded is False
    assert config.acs == Acs(
        offset=0x520,
        capability=AcsFlags(True, True, True, True, True, True, True),
        control=AcsFlags(
            src_valid=True, trans_blk=False, req_redir=True, cmplt_redir=True,
            upstream_fwd=True, egress_ctrl=False, direct_trans=False,
        ),
    )
    assert config.acs.control.redirects_p2p is True
    assert [cap.offset for cap in config.extended_capabilities] == [0x100, 0xFB4, 0x138, 0x148, 0x520, 0x950]


def test_amd_root_port_with_acs_all_off():
    config = parse_config_space(load_config("amd-gpp-root-port.1022-1483.root.hex"))
    assert (config.vendor_id, config.device_id, config.multifunction) == ("1022", "1483", True)
    assert (config.subsystem_vendor_id, config.subsystem_id) == ("1022", "1453")
    assert config.pcie.port_type == "root_port" and config.pcie.slot_implemented is True
    assert (config.pcie.link_speed_gts, config.pcie.link_width) == (16.0, 16)
    assert config.acs.offset == 0x2A0
    assert config.acs.capability == QEMU_ROOT_PORT_ACS_CAP
    assert config.acs.control == ACS_OFF
    assert config.acs.control.redirects_p2p is False


def test_qemu_ioh3420_and_switch_ports_have_no_acs():
    ioh = parse_config_space(load_config("q35-ioh3420-root-port.8086-3420.root.hex"))
    assert (ioh.pcie.port_type, ioh.pcie.max_link_speed_gts, ioh.pcie.max_link_width) == ("root_port", 2.5, 1)
    assert ioh.extended_readable is True and ioh.acs is None
    assert [cap.cap_id for cap in ioh.extended_capabilities] == [0x0001]
    assert (ioh.primary_bus, ioh.secondary_bus, ioh.subordinate_bus) == (0, 3, 5)

    downstream = parse_config_space(load_config("q35-xio3130-downstream.104c-8233.root.hex"))
    assert downstream.pcie == PcieInfo(
        offset=0x90, version=2, port_type="downstream_port", port_type_code=6, slot_implemented=True,
        max_link_speed_gts=None, max_link_width=None, link_speed_gts=2.5, link_width=1,
    )
    assert downstream.pcie.link_downgraded is None
    assert downstream.acs is None


def test_qemu_pcie_to_pci_bridge_and_endpoint():
    bridge = parse_config_space(load_config("q35-pcie-pci-bridge.1b36-000e.root.hex"))
    assert (bridge.pcie.port_type, bridge.pcie.port_type_code, bridge.pcie.offset) == ("pcie_to_pci_bridge", 7, 0x48)
    assert (bridge.secondary_bus, bridge.subordinate_bus) == (7, 7)

    nic = parse_config_space(load_config("q35-e1000e.8086-10d3.root.hex"))
    assert nic.pcie == PcieInfo(
        offset=0xE0, version=1, port_type="endpoint", port_type_code=0, slot_implemented=False,
        max_link_speed_gts=2.5, max_link_width=1, link_speed_gts=2.5, link_width=1,
    )
    assert [(cap.offset, cap.name) for cap in nic.extended_capabilities] == [
        (0x100, "Advanced Error Reporting"), (0x140, "Device Serial Number"),
    ]


@pytest.mark.parametrize(
    ("name", "vendor", "device", "model"),
    [
        ("q35-host-bridge.8086-29c0.root.hex", "8086", "29c0", "q35 (ICH9 MCH, emulated by QEMU)"),
        ("i440fx-host-bridge.8086-1237.root.hex", "8086", "1237", "i440fx (emulated by QEMU; no PCI Express)"),
    ],
)
def test_emulated_host_bridges(name, vendor, device, model):
    config = parse_config_space(load_config(name))
    assert (config.size, config.vendor_id, config.device_id, config.class_code) == (256, vendor, device, "060000")
    assert (config.subsystem_vendor_id, config.subsystem_id) == ("1af4", "1100")
    assert config.capabilities == [] and config.capabilities_readable is True
    assert (config.pcie, config.extended_readable) == (None, False)
    assert describe_pci_id(config.vendor_id, config.device_id) == model


def test_firecracker_virtio_net_is_conventional_pci():
    config = parse_config_space(load_config("firecracker-virtio-net.1af4-1041.root.hex"))
    assert (config.vendor_id, config.device_id, config.class_code, config.size) == ("1af4", "1041", "020000", 256)
    assert [(cap.offset, cap.cap_id) for cap in config.capabilities] == [
        (0x40, 9), (0x50, 9), (0x60, 9), (0x70, 9), (0x84, 9), (0x98, 0x11),
    ]
    assert config.pcie is None and config.extended_readable is False
    assert describe_pci_id(config.vendor_id, config.device_id) == "virtio network device"


@pytest.mark.parametrize(
    ("config_name", "lspci_name", "bdf"),
    [
        ("q35-pcie-root-port.1b36-000c.root.hex", "q35-guest.lspci-3.14.0.vvv-nn-D.root.txt", "0000:00:10.0"),
        ("q35-ioh3420-root-port.8086-3420.root.hex", "q35-guest.lspci-3.9.0.vvv-nn-D.root.txt", "0000:00:12.0"),
        ("q35-xio3130-downstream.104c-8233.root.hex", "q35-guest.lspci-3.7.0.vvv-nn-D.root.txt", "0000:04:00.0"),
        ("q35-pcie-pci-bridge.1b36-000e.root.hex", "q35-guest.lspci-3.5.6.vvv-nn-D.root.txt", "0000:06:00.0"),
        ("q35-e1000e.8086-10d3.root.hex", "q35-guest.lspci-3.9.0.vvv-nn-D.root.txt", "0000:02:00.0"),
        ("rtx4090.10de-2684.root.hex", "host.lspci-3.14.0.vvv-nn-D.root.txt", "0000:43:00.0"),
        ("rtx4090.10de-2684.root.hex", "host.lspci-3.7.0.vvv-nn-D.root.txt", "0000:43:00.0"),
        ("plx-pex8747-downstream.10b5-8747.root.hex", "host.lspci-3.5.6.vvv-nn-D.root.txt", "0000:42:08.0"),
        ("amd-gpp-root-port.1022-1483.root.hex", "host.lspci-3.14.0.vvv-nn-D.root.txt", "0000:40:03.1"),
    ],
)
def test_config_space_and_lspci_agree(config_name, lspci_name, bdf):
    """lspci decoded the same bytes; both parsers must reach the same facts."""
    config = parse_config_space(load_config(config_name))
    device = parse_lspci_vvv(load_lspci(lspci_name))[bdf]
    assert (device.vendor_id, device.device_id, device.class_code) == (config.vendor_id, config.device_id,
                                                                       config.class_code)
    assert device.pcie == config.pcie
    assert device.acs == config.acs
    if "3.5.6" not in lspci_name:
        assert device.resizable_bars == config.resizable_bars
    assert [cap.offset for cap in device.capabilities] == [
        cap.offset for cap in config.capabilities + config.extended_capabilities
    ]
    named = [cap.cap_id for cap in device.capabilities if cap.cap_id is not None]
    assert named == [
        cap.cap_id for cap in config.capabilities + config.extended_capabilities
        if cap.cap_id in {cap.cap_id for cap in device.capabilities}
    ]


# ---------------------------------------------------------------------------
# Config space: damaged lists, built from field values


class ConfigBuilder:
    """A config space assembled register by register."""

    def __init__(self, size: int = 4096, vendor: int = 0x10DE, device: int = 0x2BB1, header_type: int = 0) -> None:
        self.data = bytearray(size)
        struct.pack_into("<HHHH", self.data, 0, vendor, device, 0x0406, 0x0010)
        self.data[0x0B], self.data[0x0E] = 0x03, header_type

    def cap(self, offset: int, cap_id: int, next_offset: int, flags: int = 0) -> ConfigBuilder:
        struct.pack_into("<BBH", self.data, offset, cap_id, next_offset, flags)
        return self

    def first(self, offset: int) -> ConfigBuilder:
        self.data[0x34] = offset
        return self

    def ecap(self, offset: int, cap_id: int, next_offset: int, version: int = 1) -> ConfigBuilder:
        struct.pack_into("<I", self.data, offset, cap_id | (version << 16) | (next_offset << 20))
        return self

    def u16(self, offset: int, value: int) -> ConfigBuilder:
        struct.pack_into("<H", self.data, offset, value)
        return self

    def u32(self, offset: int, value: int) -> ConfigBuilder:
        struct.pack_into("<I", self.data, offset, value)
        return self

    def bytes(self) -> bytes:
        return bytes(self.data)


def test_capability_loop_is_a_warning():
    data = ConfigBuilder().first(0x40).cap(0x40, 0x01, 0x50).cap(0x50, 0x05, 0x40).bytes()
    config = parse_config_space(data)
    assert [cap.offset for cap in config.capabilities] == [0x40, 0x50]
    assert config.warnings == ["capability list loops back to 0x40; walk stopped there"]


def test_capability_pointing_at_itself():
    config = parse_config_space(ConfigBuilder().first(0x44).cap(0x44, 0x10, 0x44, 0x0002).bytes())
    assert [cap.offset for cap in config.capabilities] == [0x44]
    assert config.pcie is not None and config.pcie.port_type == "endpoint"
    assert "loops back to 0x44" in config.warnings[0]


@pytest.mark.parametrize("pointer", [0x04, 0x10, 0x3C])
def test_capability_pointer_out_of_range_is_a_warning(pointer):
    data = ConfigBuilder().first(0x40).cap(0x40, 0x01, pointer).bytes()
    config = parse_config_space(data)
    assert [cap.offset for cap in config.capabilities] == [0x40]
    assert len(config.warnings) == 1 and "outside 0x40..0xfc" in config.warnings[0]


def test_capability_reading_all_ones_stops_the_walk():
    config = parse_config_space(ConfigBuilder().first(0x40).cap(0x40, 0xFF, 0xFF).bytes())
    assert config.capabilities == []
    assert "reads as ff" in config.warnings[0]


def test_status_without_capability_list_ignores_the_pointer():
    builder = ConfigBuilder().first(0x40).cap(0x40, 0x10, 0x00)
    builder.u16(6, 0x0000)
    config = parse_config_space(builder.bytes())
    assert (config.capabilities, config.pcie, config.capabilities_readable) == ([], None, True)


def test_extended_capability_loop_is_a_warning():
    data = (
        ConfigBuilder().first(0)
        .ecap(0x100, EXT_CAP_ACS, 0x200).u16(0x104, 0x007F).u16(0x106, 0x0004)
        .ecap(0x200, 0x0001, 0x100)
        .bytes()
    )
    config = parse_config_space(data)
    assert [cap.offset for cap in config.extended_capabilities] == [0x100, 0x200]
    assert config.acs.control.req_redir is True and config.acs.control.cmplt_redir is False
    assert config.warnings == ["extended capability list loops back to 0x100; walk stopped"]


def test_extended_capability_pointing_below_0x100():
    config = parse_config_space(ConfigBuilder().first(0).ecap(0x100, 0x0001, 0x0F0).bytes())
    assert [cap.offset for cap in config.extended_capabilities] == [0x100]
    assert "below 0x100" in config.warnings[0]


def test_extended_space_of_all_ones_is_unreadable():
    builder = ConfigBuilder().first(0)
    builder.data[0x100:] = b"\xff" * (4096 - 0x100)
    config = parse_config_space(builder.bytes())
    assert config.extended_readable is False and config.acs is None
    assert "all ones" in config.warnings[0]


def test_extended_list_cut_by_a_short_read():
    data = ConfigBuilder().first(0).ecap(0x100, 0x0001, 0x800).bytes()[:0x200]
    config = parse_config_space(data)
    assert [cap.offset for cap in config.extended_capabilities] == [0x100]
    assert "beyond the 512 bytes read" in config.warnings[0]


def test_resizable_bar_with_extended_sizes_and_bad_count():
    # One BAR, 1MB..2MB in the capability register, 256TB from the control register.
    builder = ConfigBuilder().first(0).ecap(0x100, EXT_CAP_REBAR, 0x000)
    builder.u32(0x104, 0x3 << 4).u32(0x108, (1 << 16) | (1 << 5) | (1 << 8) | 1)
    config = parse_config_space(builder.bytes())
    assert config.resizable_bars == [ResizableBar(index=1, current_size=2 * MB, supported_sizes=[MB, 2 * MB, MB << 28])]

    builder.u32(0x108, 7 << 5)
    config = parse_config_space(builder.bytes())
    assert config.resizable_bars == []
    assert "claims 7 BARs" in config.warnings[0]


def test_second_acs_capability_is_ignored_with_a_warning():
    data = (
        ConfigBuilder().first(0)
        .ecap(0x100, EXT_CAP_ACS, 0x110).u16(0x106, 0x0001)
        .ecap(0x110, EXT_CAP_ACS, 0x000).u16(0x116, 0x0004)
        .bytes()
    )
    config = parse_config_space(data)
    assert config.acs.offset == 0x100 and config.acs.control.src_valid is True
    assert "second ACS" in config.warnings[0]


def test_root_complex_integrated_endpoint_has_no_link():
    builder = ConfigBuilder().first(0x40).cap(0x40, 0x10, 0x00, 0x0092)
    builder.u32(0x4C, 0x00000104).u16(0x52, 0x0011)
    config = parse_config_space(builder.bytes())
    assert config.pcie.port_type == "rc_integrated_endpoint"
    assert (config.pcie.max_link_speed_gts, config.pcie.link_speed_gts, config.pcie.link_width) == (None, None, None)


def test_unknown_header_type_is_a_warning():
    config = parse_config_space(ConfigBuilder(size=256, header_type=0x7F).bytes())
    assert config.header_type == 0x7F and config.capabilities == []
    assert "header type 0x7f" in config.warnings[0]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", "found 0 bytes"),
        (b"\xde\x10" * 31, "found 62 bytes"),
        (b"\xff" * 256, "found ffff"),
        (b"\x00" * 4096, "found 0000"),
    ],
)
def test_config_space_errors_say_what_was_found(data, expected):
    with pytest.raises(PciParseError, match=expected) as info:
        parse_config_space(data)
    assert isinstance(info.value, ValueError)


def test_config_space_rejects_text():
    with pytest.raises(PciParseError, match="bytes"):
        parse_config_space("10de")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# lspci -vvv


Q35_ROOT_OUTPUTS = [
    "q35-guest.lspci-3.5.6.vvv-nn-D.root.txt",
    "q35-guest.lspci-3.7.0.vvv-nn-D.root.txt",
    "q35-guest.lspci-3.9.0.vvv-nn-D.root.txt",
    "q35-guest.lspci-3.14.0.vvv-nn-D.root.txt",
]
Q35_BDFS = [
    "0000:00:00.0", "0000:00:01.0", "0000:00:10.0", "0000:00:11.0", "0000:00:12.0", "0000:00:13.0",
    "0000:00:1f.0", "0000:00:1f.2", "0000:00:1f.3", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0",
    "0000:04:00.0", "0000:05:00.0", "0000:06:00.0",
]


def test_q35_guest_as_root():
    devices = parse_lspci_vvv(load_lspci("q35-guest.lspci-3.9.0.vvv-nn-D.root.txt"))
    assert list(devices) == Q35_BDFS
    host = devices["0000:00:00.0"]
    assert (host.class_name, host.class_code, host.vendor_id, host.device_id) == ("Host bridge", "060000", "8086",
                                                                                  "29c0")
    assert host.description == "Intel Corporation 82G33/G31/P35/P31 Express DRAM Controller"
    assert (host.subsystem_vendor_id, host.subsystem_id, host.iommu_group, host.pcie) == ("1af4", "1100", 0, None)
    assert describe_pci_id(host.vendor_id, host.device_id) == HOST_BRIDGE_MODELS[("8086", "29c0")]

    port = devices["0000:00:10.0"]
    assert (port.class_name, port.class_code, port.revision, port.iommu_group) == ("PCI bridge", "060400", None, 2)
    assert (port.driver, port.modules, port.capabilities_access_denied) == ("pcieport", [], False)
    assert port.pcie == PcieInfo(
        offset=0x54, version=2, port_type="root_port", port_type_code=4, slot_implemented=True,
        max_link_speed_gts=16.0, max_link_width=32, link_speed_gts=2.5, link_width=1,
    )
    assert port.acs == Acs(offset=0x148, capability=QEMU_ROOT_PORT_ACS_CAP, control=ACS_LINUX_DEFAULT)
    assert [(cap.offset, cap.cap_id, cap.version, cap.extended) for cap in port.capabilities] == [
        (0x54, 0x10, None, False), (0x48, 0x11, None, False), (0x40, 0x0D, None, False),
        (0x100, 0x0001, 2, True), (0x148, 0x000D, 1, True),
    ]
    assert describe_pci_id(port.vendor_id, port.device_id) == "QEMU PCIe root port (pcie-root-port)"

    nvme = devices["0000:01:00.0"]
    assert (nvme.class_code, nvme.revision, nvme.iommu_group, nvme.driver) == ("010802", 2, 7, None)
    assert nvme.pcie.port_type == "endpoint"

    switch_down = devices["0000:04:00.0"]
    assert (switch_down.pcie.max_link_speed_gts, switch_down.pcie.max_link_width) == (None, None)
    assert (switch_down.pcie.link_speed_gts, switch_down.pcie.link_width) == (2.5, 1)
    assert switch_down.acs is None and switch_down.iommu_group == 4
    # The whole emulated switch shares the ioh3420's group: no ACS anywhere below it.
    assert {devices[bdf].iommu_group for bdf in ("0000:00:12.0", "0000:03:00.0", "0000:05:00.0")} == {4}
    assert all(device.warnings == [] for device in devices.values())


@pytest.mark.parametrize("name", Q35_ROOT_OUTPUTS)
def test_q35_guest_every_lspci_version_gives_the_same_facts(name):
    reference = parse_lspci_vvv(load_lspci("q35-guest.lspci-3.9.0.vvv-nn-D.root.txt"))
    devices = parse_lspci_vvv(load_lspci(name))
    assert list(devices) == Q35_BDFS
    for bdf, device in devices.items():
        expected = reference[bdf]
        assert device.pcie == expected.pcie, bdf
        assert device.acs == expected.acs, bdf
        assert (device.vendor_id, device.device_id, device.class_code, device.driver) == (
            expected.vendor_id, expected.device_id, expected.class_code, expected.driver), bdf
        # IOMMU groups are printed from lspci 3.7.0 on.
        assert device.iommu_group == (None if "3.5.6" in name else expected.iommu_group), bdf


def test_q35_guest_express_line_formats():
    old = load_lspci("q35-guest.lspci-3.9.0.vvv-nn-D.root.txt")
    new = load_lspci("q35-guest.lspci-3.14.0.vvv-nn-D.root.txt")
    assert "Root Port (Slot+), MSI 00" in old and "Root Port (Slot+), IntMsgNum 0" in new
    assert "LnkSta:\tSpeed 2.5GT/s, Width x1, TrErr-" in load_lspci("q35-guest.lspci-3.5.6.vvv-nn-D.root.txt")
    assert "Speed 2.5GT/s (ok), Width x1 (ok)" in load_lspci("q35-guest.lspci-3.7.0.vvv-nn-D.root.txt")
    assert "Speed 2.5GT/s (overdriven), Width x1 (overdriven)" in new


@pytest.mark.parametrize(
    "name", ["q35-guest.lspci-3.9.0.vvv-nn-D.user.txt", "q35-guest.lspci-3.14.0.vvv-nn-D.user.txt"]
)
def test_q35_guest_without_root(name):
    devices = parse_lspci_vvv(load_lspci(name))
    assert list(devices) == Q35_BDFS
    denied = {bdf for bdf, device in devices.items() if device.capabilities_access_denied}
    # Functions without a capability list print nothing to deny.
    assert denied == set(Q35_BDFS) - {"0000:00:00.0", "0000:00:01.0", "0000:00:1f.0", "0000:00:1f.3"}
    assert all(device.pcie is None and device.acs is None for device in devices.values())
    port = devices["0000:00:10.0"]
    assert (port.driver, port.iommu_group, port.vendor_id) == ("pcieport", 2, "1b36")


def test_q35_guest_without_ids_or_domain():
    devices = parse_lspci_vvv(load_lspci("q35-guest.lspci-3.9.0.vvv.root.txt"))
    assert list(devices) == Q35_BDFS
    port = devices["0000:00:10.0"]
    assert (port.class_name, port.class_code, port.vendor_id, port.device_id) == ("PCI bridge", None, None, None)
    assert port.description == "Red Hat, Inc. QEMU PCIe Root port"
    assert port.pcie.port_type == "root_port" and port.acs.control == ACS_LINUX_DEFAULT


def test_i440fx_guest_has_no_pci_express():
    devices = parse_lspci_vvv(load_lspci("i440fx-guest.lspci-3.9.0.vvv-nn-D.root.txt"))
    assert list(devices) == ["0000:00:00.0", "0000:00:01.0", "0000:00:01.1", "0000:00:01.3", "0000:00:02.0",
                             "0000:00:03.0"]
    assert all(device.pcie is None for device in devices.values())
    host = devices["0000:00:00.0"]
    assert (host.vendor_id, host.device_id, host.revision) == ("8086", "1237", 2)
    assert describe_pci_id("8086", "7000") == "PIIX3 ISA bridge (i440fx machine)"
    assert devices["0000:00:01.1"].class_code == "010180"


@pytest.mark.parametrize("version", ["3.5.6", "3.7.0", "3.14.0"])
def test_bare_metal_host_in_each_lspci_format(version):
    devices = parse_lspci_vvv(load_lspci(f"host.lspci-{version}.vvv-nn-D.root.txt"))
    assert list(devices) == ["0000:40:03.1", "0000:42:08.0", "0000:43:00.0"]
    root_port, switch_port, gpu = devices.values()
    assert root_port.acs.control == ACS_OFF and root_port.driver == "pcieport"
    assert switch_port.acs.control.redirects_p2p is True
    assert (switch_port.pcie.port_type, switch_port.pcie.link_speed_gts) == ("downstream_port", 8.0)
    assert (gpu.vendor_id, gpu.device_id, gpu.revision, gpu.class_code) == ("10de", "2684", 0xA1, "030000")
    assert gpu.description == "NVIDIA Corporation AD102 [GeForce RTX 4090]"
    assert (gpu.driver, gpu.modules) == ("nvidia", ["nvidiafb", "nouveau", "nvidia_drm", "nvidia"])
    assert (gpu.pcie.link_speed_gts, gpu.pcie.link_width, gpu.pcie.link_downgraded) == (2.5, 16, True)
    if version == "3.5.6":
        # Too old to decode Resizable BAR: the capability is there, the sizes are not.
        assert gpu.resizable_bars == []
        assert [cap.cap_id for cap in gpu.capabilities if cap.offset == 0xBB0] == [EXT_CAP_REBAR]
    else:
        assert gpu.resizable_bars == RTX4090_REBAR


def test_bare_metal_host_without_root():
    devices = parse_lspci_vvv(load_lspci("host.lspci-3.14.0.vvv-nn-D.user.txt"))
    gpu = devices["0000:43:00.0"]
    assert gpu.capabilities_access_denied is True
    assert (gpu.pcie, gpu.acs, gpu.resizable_bars) == (None, None, [])
    assert (gpu.driver, gpu.vendor_id, gpu.subsystem_id) == ("nvidia", "10de", "167c")
    assert all(device.capabilities_access_denied for device in devices.values())


def test_lspci_copied_with_spaces_and_crlf():
    text = load_lspci("host.lspci-3.7.0.vvv-nn-D.root.txt")
    pasted = text.replace("\t", "    ").replace("\n", "\r\n")
    assert parse_lspci_vvv(pasted) == parse_lspci_vvv(text)


@pytest.mark.parametrize(
    ("line", "fields"),
    [
        (
            "0000:41:00.0 VGA compatible controller [0300]: NVIDIA Corporation Device [10de:2bb1] (rev a1)",
            ("0000:41:00.0", "VGA compatible controller", "030000", "10de", "2bb1", 0xA1, "NVIDIA Corporation Device"),
        ),
        (
            "41:00.1 Audio device [0403]: NVIDIA Corporation Device [10de:22e8] (rev a1)",
            ("0000:41:00.1", "Audio device", "040300", "10de", "22e8", 0xA1, "NVIDIA Corporation Device"),
        ),
        (
            "da:00.0 3D controller [0302]: NVIDIA Corporation GA100 [A100 SXM4 40GB] [10de:20b0] (rev a1)",
            ("0000:da:00.0", "3D controller", "030200", "10de", "20b0", 0xA1,
             "NVIDIA Corporation GA100 [A100 SXM4 40GB]"),
        ),
        (
            "41:00.0 0300: 10de:2bb1 (rev a1) (prog-if 00 [VGA controller])",
            ("0000:41:00.0", None, "030000", "10de", "2bb1", 0xA1, ""),
        ),
        (
            "00000000:41:00.0 VGA compatible controller: NVIDIA Corporation Device 2bb1 (rev a1)",
            ("0000:41:00.0", "VGA compatible controller", None, None, None, 0xA1, "NVIDIA Corporation Device 2bb1"),
        ),
    ],
)
def test_lspci_device_lines(line, fields):
    (device,) = parse_lspci_vvv(line + "\n").values()
    assert (device.bdf, device.class_name, device.class_code, device.vendor_id, device.device_id, device.revision,
            device.description) == fields


def test_lspci_express_variants_and_numa():
    text = "\n".join([
        "0000:c1:00.0 3D controller [0302]: NVIDIA Corporation Device [10de:2335] (rev a1)",
        "\tNUMA node: 1",
        "\tIOMMU group: 41",
        "\tCapabilities: [60] Express (v2) Root Complex Integrated Endpoint, IntMsgNum 0, FLIT Mode Supported",
        "\tCapabilities: [70] Express Unknown type 3, MSI 00",
        "0000:c2:00.0 PCI bridge [0604]: Vendor [abcd:0001]",
        "\tCapabilities: [68] Express (v2) PCI/PCI-X to PCI-Express Bridge (Slot-), MSI 00",
        "\t\tLnkCap:\tPort #1, Speed 64GT/s, Width x8, ASPM not supported",
        "\t\tLnkSta:\tSpeed 32GT/s (downgraded), Width x8",
        "\t\tLnkCap2: Supported Link Speeds: 2.5-64GT/s, Crosslink- Retimer+ 2Retimers+ DRS-",
        "\t\tLnkSta2: Current De-emphasis Level: -6dB",
    ])
    first, second = parse_lspci_vvv(text).values()
    assert (first.numa_node, first.iommu_group) == (1, 41)
    assert (first.pcie.port_type, first.pcie.version, first.pcie.slot_implemented) == ("rc_integrated_endpoint", 2,
                                                                                       False)
    assert second.pcie == PcieInfo(
        offset=0x68, version=2, port_type="pci_to_pcie_bridge", port_type_code=8, slot_implemented=False,
        max_link_speed_gts=64.0, max_link_width=8, link_speed_gts=32.0, link_width=8,
    )
    assert link_gen(second.pcie.max_link_speed_gts) == 6


def test_lspci_oddities_become_warnings():
    text = "\n".join([
        "0000:01:00.0 Bridge [0680]: NVIDIA Corporation Device [10de:22a3] (rev a1)",
        "\tIOMMU group: many",
        "\tCapabilities: [100 v1] Access Control Services",
        "\t\tACSCap:\tSrcValid+ TransBlk+",
        "\t\tACSCtl:\tnothing here",
        "0000:01:00.0 Bridge [0680]: NVIDIA Corporation Device [10de:22a3] (rev a1)",
    ])
    device = parse_lspci_vvv(text)["0000:01:00.0"]
    assert device_kind(device.vendor_id, device.class_code) == "nvswitch"
    assert "appears more than once" in device.warnings[0]
    devices = parse_lspci_vvv(text.rsplit("\n", 1)[0])
    acs = devices["0000:01:00.0"].acs
    assert acs.capability == AcsFlags(True, True, False, False, False, False, False) and acs.control is None
    warnings = devices["0000:01:00.0"].warnings
    assert any("IOMMU group 'many'" in warning for warning in warnings)
    assert any("lacks ReqRedir" in warning for warning in warnings)
    assert any("ACS line without flags" in warning for warning in warnings)


@pytest.mark.parametrize("text", ["", "\n\n", "   \n"])
def test_lspci_empty_output_is_no_devices(text):
    assert parse_lspci_vvv(text) == {}


@pytest.mark.parametrize(
    "text",
    ["lspci: Unable to load libkmod resources: error -2\n", "pcilib: Cannot open /proc/bus/pci\nhello\n"],
)
def test_lspci_output_without_devices_is_an_error(text):
    with pytest.raises(PciParseError, match="found none; first line"):
        parse_lspci_vvv(text)


def test_lspci_ignores_stderr_lines_between_devices():
    text = load_lspci("i440fx-guest.lspci-3.9.0.vvv-nn-D.root.txt")
    noisy = "lspci: Unable to load libkmod resources: error -2\n" + text
    assert parse_lspci_vvv(noisy) == parse_lspci_vvv(text)


# ---------------------------------------------------------------------------
# sysfs resource


def test_resource_of_a_bridge_with_sriov_kernel():
    bars = parse_resource(load_sysfs("q35-pcie-root-port.resource"))
    assert [(bar.index, bar.kind, bar.start, bar.size) for bar in bars] == [
        (0, "bar", 0xFEA11000, 4096),
        (13, "bridge_window", 0x1000, 4096),
        (14, "bridge_window", 0xFE800000, 2 * MB),
        (15, "bridge_window", 0xFD600000, 2 * MB),
    ]
    assert [(bar.io, bar.mem, bar.prefetchable, bar.mem64) for bar in bars] == [
        (False, True, False, False), (True, False, False, False), (False, True, False, False),
        (False, True, True, True),
    ]


def test_resource_of_an_endpoint_with_rom():
    bars = parse_resource(load_sysfs("q35-e1000e.resource"))
    assert [(bar.index, bar.kind, bar.size, bar.io, bar.prefetchable) for bar in bars] == [
        (0, "bar", 128 * 1024, False, False),
        (1, "bar", 128 * 1024, False, False),
        (2, "bar", 32, True, False),
        (3, "bar", 16 * 1024, False, False),
        (6, "rom", 256 * 1024, False, True),
    ]
    assert bars[-1].flags == 0x46200


def test_resource_from_a_kernel_without_sriov():
    (bar,) = parse_resource(load_sysfs("firecracker-virtio-net.resource"))
    assert bar == Bar(
        index=0, kind="bar", start=0x4000100000, end=0x400017FFFF, size=512 * 1024, flags=0x140204,
        io=False, mem=True, prefetchable=False, mem64=True, disabled=False, unset=False,
    )


def test_resource_of_a_gpu_with_small_bar1_and_vf_bars():
    bars = {bar.index: bar for bar in parse_resource(load_sysfs("rtx5090-sriov.resource"))}
    assert sorted(bars) == [0, 1, 3, 5, 6, 7, 9, 11]
    assert (bars[0].size, bars[1].size, bars[3].size, bars[5].size) == (64 * MB, 256 * MB, 32 * MB, 128)
    assert bars[1].mem64 and bars[1].prefetchable and not bars[0].prefetchable
    assert bars[5].io and bars[6].kind == "rom"
    assert [bars[index].kind for index in (7, 9, 11)] == ["sriov_bar"] * 3
    assert bars[9].size == 256 * MB


def test_resource_bridge_windows_without_sriov():
    lines = ["0x0000000000000000 0x0000000000000000 0x0000000000000000"] * 11
    lines[7] = "0x0000000000001000 0x0000000000001fff 0x0000000000000101"
    lines[9] = "0x0000000000000000 0x00000000000fffff 0x0000000020002200"
    bars = parse_resource("\n".join(lines) + "\n")
    assert [(bar.index, bar.kind) for bar in bars] == [(7, "bridge_window"), (9, "bridge_window")]
    assert bars[1].unset and bars[1].size == MB


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "found nothing"),
        ("0x1000 0x0fff 0x200\n", "expected end >= start"),
        ("0x1000 0x1fff\n", "three 0x-prefixed hex numbers on resource line 0"),
        ("0x1000 0x1fff 0x200\n1000 1fff 200\n", "resource line 1"),
    ],
)
def test_resource_errors(text, expected):
    with pytest.raises(PciParseError, match=expected):
        parse_resource(text)


# ---------------------------------------------------------------------------
# sysfs link attributes


@pytest.mark.parametrize(
    ("text", "speed", "generation"),
    [
        ("2.5 GT/s PCIe\n", 2.5, 1),  # current_link_speed of the q35 root port
        ("16.0 GT/s PCIe", 16.0, 4),  # its max_link_speed
        ("5.0 GT/s PCIe", 5.0, 2),
        ("8.0 GT/s PCIe", 8.0, 3),
        ("32.0 GT/s PCIe", 32.0, 5),
        ("64.0 GT/s PCIe", 64.0, 6),
        ("16 GT/s", 16.0, 4),  # kernels before 5.x
        ("2.5 GT/s", 2.5, 1),
        ("8GT/s", 8.0, 3),
        ("Unknown", None, None),
        ("Unknown speed\n", None, None),
        ("Unknown (reserved value)", None, None),
        ("0 GT/s", None, None),
    ],
)
def test_link_speed(text, speed, generation):
    assert parse_link_speed(text) == speed
    assert link_gen(speed) == generation


@pytest.mark.parametrize("value", [3.0, 128.0, -2.5, True, "16"])
def test_link_gen_of_non_rates(value):
    assert link_gen(value) is None


@pytest.mark.parametrize("text", ["fast", "GT/s", "16 Gb/s", "1e1 GT/s", ""])
def test_link_speed_errors(text):
    with pytest.raises(PciParseError, match="expected a link speed"):
        parse_link_speed(text)


@pytest.mark.parametrize(
    ("text", "width"),
    [("16\n", 16), ("x16", 16), ("1", 1), ("32", 32), ("12", 12), ("0", None), ("255", None), ("3", None)],
)
def test_link_width(text, width):
    assert parse_link_width(text) == width


@pytest.mark.parametrize("text", ["sixteen", "-1", "", "x", "1.5", "\u00b2"])
def test_link_width_errors(text):
    with pytest.raises(PciParseError, match="expected a link width"):
        parse_link_width(text)


# ---------------------------------------------------------------------------
# Addresses and identifiers


@pytest.mark.parametrize(
    ("text", "bdf"),
    [
        ("0000:41:00.0", "0000:41:00.0"),
        ("41:00.0", "0000:41:00.0"),
        ("00000000:41:00.0", "0000:41:00.0"),
        ("00000000:4F:00.0\n", "0000:4f:00.0"),
        ("0001:C1:1f.7", "0001:c1:1f.7"),
        ("10000:e1:00.0", "10000:e1:00.0"),
    ],
)
def test_parse_bdf(text, bdf):
    assert parse_bdf(text) == bdf


@pytest.mark.parametrize("text", ["", "41:00", "41:00.8", "41:20.0", "gpu0", "0000:41:00.0.1", "1:2:3:4.0"])
def test_parse_bdf_errors(text):
    with pytest.raises(PciParseError, match="expected"):
        parse_bdf(text)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("0000:41:00.0", "41:00.1", True),
        ("00000000:41:00.0", "0000:41:00.3", True),
        ("0000:41:00.0", "0000:42:00.0", False),
        ("0000:41:00.0", "0001:41:00.0", False),
        ("0000:41:00.0", "0000:41:01.0", False),
    ],
)
def test_same_slot(a, b, same):
    assert same_slot(a, b) is same


@pytest.mark.parametrize(
    ("vendor", "class_code", "kind"),
    [
        ("10de", "030000", "gpu"),
        ("0x10de", "0x030200", "gpu"),
        (0x10DE, 0x030200, "gpu"),
        ("10DE", "0302", "gpu"),
        ("10de", "038000", "gpu"),
        ("10de", "040300", "audio"),
        ("10de", "0403", "audio"),
        ("10de", "068000", "nvswitch"),
        ("10de", "0c0330", "usb"),
        ("10de", "0c8000", "serial"),
        ("10de", "060400", "other"),
        ("1002", "030000", "other"),
        ("1af4", "020000", "other"),
    ],
)
def test_device_kind(vendor, class_code, kind):
    assert device_kind(vendor, class_code) == kind


@pytest.mark.parametrize(("vendor", "class_code"), [("nvidia", "030000"), ("10de", "03zz00"), ("10de", 1 << 24),
                                                     ("10de", "0300000"), (None, "030000"), ("10de", True)])
def test_device_kind_errors(vendor, class_code):
    with pytest.raises(PciParseError, match="expected"):
        device_kind(vendor, class_code)


@pytest.mark.parametrize(
    ("vendor", "device", "text"),
    [
        ("8086", "29c0", "q35 (ICH9 MCH, emulated by QEMU)"),
        ("0x8086", "0x1237", "i440fx (emulated by QEMU; no PCI Express)"),
        (0x1B36, 0x000C, "QEMU PCIe root port (pcie-root-port)"),
        ("1b36", "000e", "QEMU PCIe-to-PCI bridge (pcie-pci-bridge)"),
        ("1b36", "0008", "QEMU generic PCIe host bridge (virt machines)"),
        ("8086", "0d57", "virtual PCIe host of rust-vmm hypervisors (cloud-hypervisor, Firecracker)"),
        ("1af4", "1041", "virtio network device"),
        ("1af4", "1000", "virtio network device"),
        ("1af4", "1042", "virtio block device"),
        ("1af4", "1045", "virtio memory balloon device"),
        ("1af4", "1050", "virtio GPU device"),
        ("1af4", "107f", "virtio type 63 device"),
        ("1af4", "1100", "virtio (Red Hat / QEMU) virtual device"),
        ("15ad", "07a0", "VMware PCI Express root port"),
        ("15ad", "0740", "VMware virtual device"),
        ("1414", "008e", "Microsoft Basic Render Driver (GPU paravirtualization, WSL2 / Hyper-V)"),
        ("1414", "c030", "Microsoft (Hyper-V) virtual device"),
        ("104c", "8233", "TI XIO3130 switch downstream port; QEMU's xio3130-downstream emulates it, without ACS"),
        ("10de", "2684", None),
        ("10b5", "8747", None),
        ("8086", "3421", None),
    ],
)
def test_describe_pci_id(vendor, device, text):
    assert describe_pci_id(vendor, device) == text


def test_host_bridge_models_are_normalized_ids():
    for vendor, device in HOST_BRIDGE_MODELS:
        assert (format_id(vendor), format_id(device)) == (vendor, device)


@pytest.mark.parametrize("value", ["", "0x", "12345", "10dg", -1, 0x10000, 1.5, b"10de"])
def test_format_id_errors(value):
    with pytest.raises(PciParseError, match="expected"):
        format_id(value)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Properties: no input makes a parser raise anything but PciParseError

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROOT_DUMPS = {name: load_config(name) for name in CONFIG_FIXTURES}
LSPCI_LINES = sorted({line for name in LSPCI_FIXTURES for line in load_lspci(name).splitlines()})


def _check_invariants(config, data: bytes) -> None:
    assert config.size == len(data)
    assert all(isinstance(warning, str) and warning for warning in config.warnings)
    assert all(0x40 <= cap.offset <= 0xFC for cap in config.capabilities)
    assert len({cap.offset for cap in config.capabilities}) == len(config.capabilities)
    assert all(0x100 <= cap.offset <= 0xFFC for cap in config.extended_capabilities)
    assert len({cap.offset for cap in config.extended_capabilities}) == len(config.extended_capabilities)
    assert config.extended_readable or not config.extended_capabilities
    if len(data) <= 0x100:
        assert config.extended_readable is False and config.acs is None
    for bar in config.resizable_bars:
        assert all(size & (size - 1) == 0 and size >= MB for size in bar.supported_sizes)
    if config.pcie is not None:
        assert config.pcie.link_width in (None, 1, 2, 4, 8, 12, 16, 32)
        assert config.pcie.link_speed_gts in (None, 2.5, 5.0, 8.0, 16.0, 32.0, 64.0)


def _parse_or_clear_error(data: bytes):
    try:
        config = parse_config_space(data)
    except PciParseError as error:
        assert str(error).startswith("expected")
        return None
    _check_invariants(config, data)
    return config


@PROPERTY
@given(st.binary(min_size=0, max_size=4096))
def test_config_space_random_bytes(data):
    _parse_or_clear_error(data)


@PROPERTY
@given(st.sampled_from([64, 128, 256, 257, 260, 1024, 4096]).flatmap(lambda n: st.binary(min_size=n, max_size=n)))
def test_config_space_random_bytes_of_real_sizes(data):
    _parse_or_clear_error(data)


@PROPERTY
@given(
    st.integers(min_value=64, max_value=4096).flatmap(lambda n: st.binary(min_size=n, max_size=n)),
    st.integers(min_value=0, max_value=0xFF),
)
def test_config_space_random_bytes_with_a_capability_list(data, pointer):
    """Random content behind a valid header, so the walkers run on every example."""
    data = bytearray(data)
    struct.pack_into("<HHH", data, 0, 0x10DE, 0x2BB1, 0x0010)
    data[0x0E] &= 0x81
    data[0x34] = pointer
    _parse_or_clear_error(bytes(data))


@PROPERTY
@given(st.sampled_from(CONFIG_FIXTURES), st.data())
def test_config_space_truncated_fixtures(name, draw):
    full_data = ROOT_DUMPS[name]
    cut = draw.draw(st.integers(min_value=0, max_value=len(full_data)))
    full = parse_config_space(full_data)
    config = _parse_or_clear_error(full_data[:cut])
    if cut < 64:
        assert config is None
        return
    assert config is not None
    # A shorter read never invents what the full one does not have.
    assert config.capabilities == full.capabilities[: len(config.capabilities)]
    assert config.extended_capabilities == full.extended_capabilities[: len(config.extended_capabilities)]
    if config.capabilities_readable and full.pcie is not None and cut >= full.pcie.offset + 0x14:
        assert config.pcie == full.pcie


@PROPERTY
@given(st.sampled_from(CONFIG_FIXTURES), st.lists(st.tuples(st.integers(0, 4095), st.integers(0, 255)), max_size=24))
def test_config_space_mutated_fixtures(name, flips):
    data = bytearray(ROOT_DUMPS[name])
    for offset, value in flips:
        if offset < len(data):
            data[offset] = value
    _parse_or_clear_error(bytes(data))


@PROPERTY
@given(
    st.lists(st.integers(min_value=0x10, max_value=0x3F), min_size=1, max_size=12, unique=True),
    st.integers(min_value=0, max_value=11),
)
def test_config_space_capability_loops(slots, back):
    """A chain of capabilities whose last one points back into the chain."""
    offsets = [slot * 4 for slot in slots]
    builder = ConfigBuilder().first(offsets[0])
    target = offsets[back % len(offsets)]
    for offset, following in zip(offsets, [*offsets[1:], target], strict=True):
        builder.cap(offset, 0x09, following)
    config = parse_config_space(builder.bytes())
    assert [cap.offset for cap in config.capabilities] == offsets
    assert config.warnings == [f"capability list loops back to {target:#04x}; walk stopped there"]


@PROPERTY
@given(
    st.lists(st.integers(min_value=0x40, max_value=0x3FF), min_size=1, max_size=30, unique=True),
    st.integers(min_value=0, max_value=29),
)
def test_config_space_extended_capability_loops(slots, back):
    offsets = [slot * 4 for slot in slots]
    assume(offsets[0] == 0x100 or 0x100 not in offsets)
    offsets = [0x100, *[offset for offset in offsets if offset != 0x100]]
    builder = ConfigBuilder().first(0)
    target = offsets[back % len(offsets)]
    for offset, following in zip(offsets, [*offsets[1:], target], strict=True):
        builder.ecap(offset, 0x000B, following)
    config = parse_config_space(builder.bytes())
    assert [cap.offset for cap in config.extended_capabilities] == offsets
    assert config.warnings == [f"extended capability list loops back to {target:#05x}; walk stopped"]


def _lspci_or_clear_error(text: str):
    try:
        devices = parse_lspci_vvv(text)
    except PciParseError as error:
        assert str(error).startswith("expected")
        return None
    for bdf, device in devices.items():
        assert bdf == device.bdf == parse_bdf(bdf)
        assert all(isinstance(warning, str) for warning in device.warnings)
    return devices


@PROPERTY
@given(st.text(max_size=2000))
def test_lspci_random_text(text):
    _lspci_or_clear_error(text)


@PROPERTY
@given(st.lists(st.sampled_from(LSPCI_LINES), max_size=80))
def test_lspci_real_lines_in_random_order(lines):
    _lspci_or_clear_error("\n".join(lines))


@PROPERTY
@given(st.sampled_from(LSPCI_FIXTURES), st.data())
def test_lspci_truncated_fixtures(name, draw):
    text = load_lspci(name)
    cut = draw.draw(st.integers(min_value=0, max_value=len(text)))
    devices = _lspci_or_clear_error(text[:cut])
    full = parse_lspci_vvv(text)
    if devices is not None:
        assert set(devices) <= set(full)


@PROPERTY
@given(st.sampled_from(LSPCI_FIXTURES), st.data())
def test_lspci_fixtures_with_garbled_lines(name, draw):
    lines = load_lspci(name).splitlines()
    index = draw.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    lines[index] = draw.draw(st.text(max_size=200))
    _lspci_or_clear_error("\n".join(lines))


@PROPERTY
@given(st.text(max_size=500))
def test_resource_random_text(text):
    try:
        bars = parse_resource(text)
    except PciParseError as error:
        assert str(error).startswith("expected")
    else:
        assert all(bar.size == bar.end - bar.start + 1 > 0 for bar in bars)


@PROPERTY
@given(st.lists(st.tuples(st.integers(1, 2**48), st.integers(0, 2**40), st.integers(0, 2**32 - 1)), max_size=17))
def test_resource_generated_lines(entries):
    text = "".join(f"0x{start:016x} 0x{start + length:016x} 0x{flags:016x}\n" for start, length, flags in entries)
    bars = parse_resource(text) if entries else []
    assert [bar.index for bar in bars] == list(range(len(entries)))
    assert [bar.size for bar in bars] == [length + 1 for _start, length, _flags in entries]
    assert [bar.mem64 for bar in bars] == [bool(flags & 0x100000) for _start, _length, flags in entries]


@PROPERTY
@given(st.text(max_size=100))
def test_link_attributes_random_text(text):
    for parser in (parse_link_speed, parse_link_width):
        try:
            parser(text)
        except PciParseError as error:
            assert str(error).startswith("expected")


@PROPERTY
@given(st.sampled_from([2.5, 5.0, 8.0, 16.0, 32.0, 64.0]), st.sampled_from(["{:.1f} GT/s PCIe", "{:g} GT/s"]),
       st.sampled_from([1, 2, 4, 8, 16, 32]))
def test_link_attributes_round_trip(speed, template, width):
    assert parse_link_speed(template.format(speed)) == speed
    assert link_gen(speed) == [2.5, 5.0, 8.0, 16.0, 32.0, 64.0].index(speed) + 1
    assert parse_link_width(str(width)) == parse_link_width(f"x{width}\n") == width


@PROPERTY
@given(st.text(max_size=40))
def test_bdf_random_text(text):
    try:
        bdf = parse_bdf(text)
    except PciParseError as error:
        assert str(error).startswith("expected")
    else:
        assert parse_bdf(bdf) == bdf and same_slot(bdf, bdf)


@PROPERTY
@given(st.integers(0, 0xFFFF), st.integers(0, 0xFF), st.integers(0, 0x1F), st.integers(0, 7),
       st.sampled_from(["{d:04x}:{b:02x}:{s:02x}.{f}", "{d:08X}:{b:02X}:{s:02X}.{f}", "{b:02x}:{s:02x}.{f}"]))
def test_bdf_round_trip(domain, bus, slot, function, template):
    text = template.format(d=domain, b=bus, s=slot, f=function)
    expected_domain = 0 if text.count(":") == 1 else domain
    assert parse_bdf(text) == f"{expected_domain:04x}:{bus:02x}:{slot:02x}.{function}"


@PROPERTY
@given(st.one_of(st.text(max_size=10), st.integers(-5, 2**33), st.none(), st.booleans()),
       st.one_of(st.text(max_size=10), st.integers(-5, 2**33), st.none()))
def test_identifier_helpers_random_input(first, second):
    for call in (lambda: device_kind(first, second), lambda: describe_pci_id(first, second),
                 lambda: format_id(first)):
        try:
            call()
        except PciParseError as error:
            assert str(error).startswith("expected")
