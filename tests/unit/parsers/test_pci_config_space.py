"""Tests of the config space parser over captured and synthesized devices (tests/fixtures/pci/SOURCES.md)."""

from __future__ import annotations

import struct

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import (
    Acs,
    AcsFlags,
    PcieInfo,
    PciParseError,
    ResizableBar,
    describe_pci_id,
    device_kind,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_config_space import (
    EXT_CAP_ACS,
    EXT_CAP_REBAR,
    parse_config_space,
)
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.unit.parsers.pci_fixtures import (
    ACS_LINUX_DEFAULT,
    ACS_OFF,
    CONFIG_FIXTURES,
    GB,
    MB,
    PROPERTY,
    QEMU_ROOT_PORT_ACS_CAP,
    RTX4090_REBAR,
    load_config,
)

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
# Properties: no input makes a parser raise anything but PciParseError

ROOT_DUMPS = {name: load_config(name) for name in CONFIG_FIXTURES}


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
