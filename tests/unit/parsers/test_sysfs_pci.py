"""Tests of the sysfs PCI attribute parsers: resource, link speed and width (tests/fixtures/pci/SOURCES.md)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import PciParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.sysfs_pci import (
    Bar,
    link_gen,
    parse_link_speed,
    parse_link_width,
    parse_resource,
)
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.parsers.pci_fixtures import (
    MB,
    PROPERTY,
    load_sysfs,
)

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
# Properties: no input makes a parser raise anything but PciParseError


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
