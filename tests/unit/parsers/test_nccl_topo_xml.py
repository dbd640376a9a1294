"""NCCL's topology dump (NCCL_TOPO_DUMP_FILE), over real dumps of a bare-metal H200 host and an H200 guest, and
one constructed from xml.cc for a flat emulated bus (tests/fixtures/nccl/SOURCES.md): placement, links, NUMA,
the signs of an emulated topology; unsafe XML refused; nothing raises but the parser's own error."""

from __future__ import annotations

import contextlib

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.kinds import detect_kind
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_topo_xml import (
    NcclTopoParseError,
    emulated_signs,
    parse_nccl_topo_xml,
)
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES

NCCL = FIXTURES / "nccl"
BARE_METAL = "nccl-topo-dump_2.2x_8xH200-baremetal-switch-nic_excerpt.xml"
GUEST = "nccl-topo-dump_2.2x_H200-vm-numaid-minus1_excerpt.xml"
FLAT = "nccl-topo-dump_2xRTXPRO6000-q35-flat-bus-vm_constructed.xml"
FLAT_REAL = "nccl-topo-dump_4xA800-vm-gpus-on-bus-00_no-link-speed.xml"


def read(name: str) -> str:
    return (NCCL / name).read_text(encoding="utf-8")


def test_a_bare_metal_dump_gives_placement_behind_its_switch_link_numa_and_nic() -> None:
    topology = parse_nccl_topo_xml(read(BARE_METAL))  # after a shell prompt, cut inside the next switch
    assert topology["version"] == 1 and topology["complete"] is False
    assert topology["cpus"] == [{"numaid": 0, "numa_unknown": False, "arch": "x86_64", "vendor": "GenuineIntel",
                                 "familyid": 6, "modelid": 207}]
    [gpu] = topology["gpus"]
    assert (gpu["dev"], gpu["rank"], gpu["sm"], gpu["gdr"]) == (0, 0, 90, True)
    assert (gpu["pci_bus_id"], gpu["numaid"], gpu["switches"]) == ("0000:18:00.0", 0, ["0000:16:00.0"])
    assert (gpu["link_speed"], gpu["link_speed_gts"], gpu["link_width"]) == ("32.0 GT/s PCIe", 32.0, 16)
    assert [link["count"] for link in gpu["nvlinks"]] == [5, 5, 4, 4]
    assert topology["nics"] == [{"name": "mlx5_0", "dev": 0, "pci_bus_id": "0000:19:00.0", "speed_mbps": 400000,
                                 "gdr": True}]
    assert emulated_signs(topology) == {"gpus_on_root_bus": False, "no_link_speed": False, "numa_unknown": False,
                                        "gpus": ["GPU 0 at 0000:18:00.0"]}


def test_the_guest_dump_shows_an_unknown_numa_node_and_its_gpu_straight_under_the_cpu() -> None:
    topology = parse_nccl_topo_xml(read(GUEST))
    [gpu] = topology["gpus"]
    assert (gpu["pci_bus_id"], gpu["numaid"], gpu["switches"], gpu["link_speed_gts"]) == ("0000:05:00.0", None, [],
                                                                                          16.0)
    assert gpu["nvlinks"] == [{"target": "fffffff:ff:ff.0", "count": 18}]
    signs = emulated_signs(topology)
    assert (signs["gpus_on_root_bus"], signs["no_link_speed"], signs["numa_unknown"]) == (False, False, True)


def test_a_flat_emulated_bus_shows_every_sign() -> None:
    topology = parse_nccl_topo_xml(read(FLAT))
    assert topology["complete"] is True
    assert [(g["pci_bus_id"], g["link_speed"], g["link_width"]) for g in topology["gpus"]] == [
        ("0000:00:10.0", None, None), ("0000:00:11.0", None, None)]
    signs = emulated_signs(topology)
    assert (signs["gpus_on_root_bus"], signs["no_link_speed"], signs["numa_unknown"]) == (True, True, True)


def test_a_real_guests_flat_bus_dump_shows_every_sign() -> None:
    # NVIDIA/nccl#1329: four A800 of an eight-GPU host in a VM, each on bus 00 with no link, one virtio-less NIC.
    topology = parse_nccl_topo_xml(read(FLAT_REAL))
    assert topology["complete"] is True
    assert [(g["dev"], g["rank"], g["sm"], g["pci_bus_id"], g["link_speed"], g["link_width"], g["numaid"])
            for g in topology["gpus"]] == [(0, 0, 80, "0000:00:09.0", None, None, None),
                                           (1, 1, 80, "0000:00:0a.0", None, None, None),
                                           (2, 2, 80, "0000:00:0b.0", None, None, None),
                                           (3, 3, 80, "0000:00:0c.0", None, None, None)]
    assert [(nic["name"], nic["pci_bus_id"], nic["speed_mbps"], nic["gdr"]) for nic in topology["nics"]] == [
        ("ens4", None, 10000, False)]
    assert topology["pci_ids"] == [{"pci_bus_id": f"0000:00:0{slot}.0", "vendor": "0x10de", "device": "0x20f5"}
                                   for slot in "9abc"]
    signs = emulated_signs(topology)
    assert (signs["gpus_on_root_bus"], signs["no_link_speed"], signs["numa_unknown"]) == (True, True, True)


def test_what_the_dump_cannot_tell_is_none() -> None:
    topology = parse_nccl_topo_xml('<system version="1"><cpu><pci busid="bogus"><gpu/></pci></cpu></system>')
    assert topology["cpus"][0]["numaid"] is None and topology["cpus"][0]["numa_unknown"] is False
    gpu = topology["gpus"][0]
    assert gpu["pci_bus_id"] is None and gpu["dev"] is None and gpu["link_speed"] is None
    assert emulated_signs(topology)["gpus_on_root_bus"] is None
    assert emulated_signs(parse_nccl_topo_xml('<system version="1"></system>')) == {
        "gpus_on_root_bus": None, "no_link_speed": None, "numa_unknown": None, "gpus": []}


@pytest.mark.parametrize(("text", "match"), [
    ('<!DOCTYPE system [<!ENTITY a "aaaa">]><system version="1">&a;</system>', "declares no entities"),
    ('<system version="1"><cpu numaid="0">', None),  # cut: kept, not refused
    ("nvidia-smi topo -m\n\tGPU0\n", r"expected <system version=\"1\">"),
    ("<system version=", "could not be read"),
    (b'<system version="1"><cpu numaid="3"/></system>', None),
])
def test_unsafe_or_foreign_text_is_refused_with_what_to_pass(text, match) -> None:
    if match is None:
        assert parse_nccl_topo_xml(text)["version"] == 1
        return
    with pytest.raises(NcclTopoParseError, match=match):
        parse_nccl_topo_xml(text)


@given(st.one_of(st.text(max_size=300), st.binary(max_size=200), st.none(), st.integers()))
def test_property_any_input_gives_a_topology_or_its_own_error(value) -> None:
    with contextlib.suppress(NcclTopoParseError):
        topology = parse_nccl_topo_xml(value)
        emulated_signs(topology)


@given(st.integers(min_value=0, max_value=2000))
def test_property_a_dump_cut_anywhere_keeps_a_prefix_of_its_gpus(cut: int) -> None:
    text = read(FLAT)
    with contextlib.suppress(NcclTopoParseError):
        piece = parse_nccl_topo_xml(text[:cut])
        whole = [gpu["pci_bus_id"] for gpu in parse_nccl_topo_xml(text)["gpus"]]
        buses = [gpu["pci_bus_id"] for gpu in piece["gpus"]]
        assert buses == whole[:len(buses)] or buses[-1] is None


MID_TREE = "nccl-topo-dump_2.1x_8xH100-nvlink-nic_starts-mid-tree_excerpt.xml"


def test_a_paste_that_starts_mid_tree_gives_its_gpus_and_nothing_above_them() -> None:
    """Before: refused for lacking <system>, and not even told as a dump; its two GPUs were lost."""
    text = read(MID_TREE)
    assert detect_kind(text) == "nccl-topo-xml"
    topology = parse_nccl_topo_xml(text)
    assert topology["complete"] is False and topology["version"] is None and topology["cpus"] == []
    assert [(g["dev"], g["rank"], g["sm"], g["pci_bus_id"], g["link_speed_gts"], g["link_width"], g["numaid"])
            for g in topology["gpus"]] == [(5, 5, 90, "0000:b8:00.0", 32.0, 16, None),
                                           (7, 7, 90, "0000:d9:00.0", 32.0, 16, None)]
    # The cut falls among GPU 7's NVLinks: none is read rather than a partial count.
    assert all(g["nvlinks"] == [] and g["switches"] == [] for g in topology["gpus"])
    signs = emulated_signs(topology)
    assert signs["gpus_on_root_bus"] is False and signs["numa_unknown"] is None


@given(name=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=12),
       speed=st.one_of(st.integers(min_value=0, max_value=10**7).map(str), st.just(""), st.just("x")))
def test_property_a_nic_without_a_pci_path_is_one_nic_with_no_bus_id(name: str, speed: str) -> None:
    dump = (f'<system version="1"><cpu numaid="-1" arch="x86_64"><nic><net name="{name}" dev="0" speed="{speed}"/>'
            f'</nic></cpu></system>')
    [nic] = parse_nccl_topo_xml(dump)["nics"]
    assert (nic["name"], nic["pci_bus_id"]) == (name, None)
    assert nic["speed_mbps"] == (int(speed) if speed.isdigit() else None)


def test_every_pci_node_gives_its_ids_switches_included() -> None:
    topology = parse_nccl_topo_xml(read(BARE_METAL))
    assert topology["pci_ids"][0] == {"pci_bus_id": "0000:16:00.0", "vendor": "0x1000", "device": "0xc030"}
    assert {"pci_bus_id": "0000:18:00.0", "vendor": "0x10de", "device": "0x2335"} in topology["pci_ids"]
    # Ids that are not four hex digits after 0x are not read.
    odd = parse_nccl_topo_xml('<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0" vendor="1b36" '
                              'device="0x000c"><gpu dev="0"/></pci></cpu></system>')
    assert odd["pci_ids"] == [] and len(odd["gpus"]) == 1
