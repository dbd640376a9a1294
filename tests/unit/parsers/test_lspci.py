"""Tests of the lspci -vvv parser over captured outputs of several lspci versions (tests/fixtures/pci/SOURCES.md)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.lspci import parse_lspci_vvv
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import (
    HOST_BRIDGE_MODELS,
    Acs,
    AcsFlags,
    PcieInfo,
    PciParseError,
    describe_pci_id,
    device_kind,
    parse_bdf,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_config_space import (
    EXT_CAP_REBAR,
    parse_config_space,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.sysfs_pci import link_gen
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.parsers.pci_fixtures import (
    ACS_LINUX_DEFAULT,
    ACS_OFF,
    LSPCI_FIXTURES,
    PROPERTY,
    QEMU_ROOT_PORT_ACS_CAP,
    RTX4090_REBAR,
    load_config,
    load_lspci,
)

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
# lspci and config space: the same device, both parsers


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
# Properties: no input makes a parser raise anything but PciParseError

LSPCI_LINES = sorted({line for name in LSPCI_FIXTURES for line in load_lspci(name).splitlines()})


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


def test_a_device_line_padded_with_blanks_is_read_in_linear_time() -> None:
    # From each blank of the run, the (rev ..) / (prog-if ..) / [vendor:device] patterns' \s* ran to its end.
    from tests.cpu_limit import within

    text = "0000:01:00.0 3D controller: NVIDIA Corporation Device 2330" + " " * 65536 + "x (rev a1)\n"
    assert within(1.0, lambda: parse_lspci_vvv(text))


def test_a_real_nvidia_lspci_cut_in_its_express_capability() -> None:
    # cloud-hypervisor/cloud-hypervisor#4353: `lspci -vvv -s 0000:65:00` of a host's Quadro RTX 4000 (no -nn), cut
    # inside DevCtl. Without -nn no ids are read (never guessed from the name); the link lines lie beyond the cut.
    [(bdf, gpu)] = parse_lspci_vvv(load_lspci("quadro-rtx4000-host.lspci-vvv-s_cut-in-devctl_excerpt.txt")).items()
    assert bdf == "0000:65:00.0"
    assert (gpu.description, gpu.class_name, gpu.revision) == (
        "NVIDIA Corporation TU104GL [Quadro RTX 4000]", "VGA compatible controller", 0xa1)
    assert (gpu.vendor_id, gpu.device_id, gpu.numa_node, gpu.driver) == (None, None, 0, None)
    assert [(cap.offset, cap.cap_id) for cap in gpu.capabilities] == [(0x60, 1), (0x68, 5), (0x78, 0x10)]
    assert (gpu.pcie.version, gpu.pcie.port_type) == (2, "legacy_endpoint")
    assert (gpu.pcie.link_speed_gts, gpu.pcie.link_width, gpu.pcie.max_link_speed_gts) == (None, None, None)
    assert gpu.warnings == []
