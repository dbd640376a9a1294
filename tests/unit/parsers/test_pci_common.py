"""Tests of the PCI address and id helpers the PCI parsers share."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import (
    HOST_BRIDGE_MODELS,
    PciParseError,
    describe_pci_id,
    device_kind,
    format_id,
    parse_bdf,
    same_slot,
)
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.parsers.pci_fixtures import PROPERTY

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
