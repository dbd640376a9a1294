"""The qemu-server config parser: single options, the args line, and inputs that are not configs.

The whole-config fixtures (tests/fixtures/proxmox/, sources in its SOURCES.md) are parsed and joined
to host facts in tests/unit/audit/test_proxmox.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers import proxmox_config as proxmox
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import (
    ProxmoxParseError,
    clique_of,
    machine_type,
    normalize_pci_id,
    parse_args,
    parse_hostpci,
    parse_vm_config,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.paths import FIXTURES

# ---------------------------------------------------------------------------
# Single options


@pytest.mark.parametrize(("value", "expected"), [
    (None, "i440fx"), ("pc", "i440fx"), ("pc-i440fx-8.1", "i440fx"), ("q35", "q35"), ("pc-q35-8.1+pve0", "q35"),
    ("type=q35,viommu=intel", "q35"), ("virt", "virt"), ("", "i440fx"),
])
def test_machine_type(value: str | None, expected: str) -> None:
    assert machine_type(value) == expected


@pytest.mark.parametrize(("value", "ids", "options"), [
    ("0000:41:00.0,pcie=1", ["0000:41:00.0"], {"pcie": True}),
    ("host=41:00.0,pcie=on,x-vga=1", ["0000:41:00.0"], {"pcie": True, "x_vga": True}),
    ("41:00", ["0000:41:00"], {}),
    ("02:00.4;02:00.5", ["0000:02:00.4", "0000:02:00.5"], {}),
    ("0000:41:00.0,hidden=1", ["0000:41:00.0"], {"hidden": True, "unknown_options": ["hidden"]}),
    ("0000:41:00.0,rombar=0,romfile=vbios.rom", ["0000:41:00.0"], {"rombar": False, "romfile": "vbios.rom"}),
    ("mapping=gpu0,pcie=1", [], {"mapping": "gpu0"}),
    ("0000:41:00.0,mdev=nvidia-1097", ["0000:41:00.0"], {"mdev": "nvidia-1097"}),
])
def test_parse_hostpci(value: str, ids: list[str], options: dict[str, Any]) -> None:
    entry = parse_hostpci(3, value)
    assert entry.id == "hostpci3" and entry.host_ids == ids and entry.warnings == []
    for name, expected in options.items():
        assert getattr(entry, name) == expected, name


def test_parse_hostpci_keeps_garbage_as_warnings() -> None:
    entry = parse_hostpci(0, "zz:top,pcie")
    assert entry.host_ids == [] and entry.pcie is False
    # A bare `pcie` is a second value for the default key, as qemu-server reads it.
    assert entry.warnings == ["'host' given twice", "'pcie' is not a PCI id (bus:dev.func)",
                              "neither host nor mapping is set"]


def test_normalize_pci_id() -> None:
    assert normalize_pci_id("41:00.0") == "0000:41:00.0"
    assert normalize_pci_id("0000:C1:00.0") == "0000:c1:00.0"
    assert normalize_pci_id("41:00") == "0000:41:00"
    assert normalize_pci_id("41:00.9") is None and normalize_pci_id("gpu") is None


def test_parse_args_options() -> None:
    args = parse_args("-set device.hostpci0.x-nv-gpudirect-clique=3 --set device.hostpci1.x-nv-gpudirect-clique=0x2 "
                      "-global driver=vfio-pci,property=x-nv-gpudirect-clique,value=7 "
                      "-fw_cfg opt/ovmf/X-PciMmio64Mb,string=65536 -cpu 'host,kvm=off' -device foo")
    assert clique_of(args, "hostpci0") == (3, "-set device.hostpci0.x-nv-gpudirect-clique")
    assert clique_of(args, "hostpci1") == (2, "-set device.hostpci1.x-nv-gpudirect-clique")
    assert clique_of(args, "hostpci5") == (7, "-global vfio-pci.x-nv-gpudirect-clique")
    assert args.fw_cfg == {"opt/ovmf/X-PciMmio64Mb": "65536"} and args.cpu == "host,kvm=off"
    assert proxmox.args_hide_kvm(args)


def test_parse_args_refuses_what_qemu_refuses() -> None:
    bad = parse_args("-set device.hostpci0.x-nv-gpudirect-clique=16 -set nonsense -fw_cfg")
    assert clique_of(bad, "hostpci0")[0] is None and "invalid" in clique_of(bad, "hostpci0")[1]
    assert any("cannot parse" in w for w in bad.warnings) and any("has no value" in w for w in bad.warnings)
    unbalanced = parse_args("-set 'device.hostpci0.x-nv-gpudirect-clique=0")
    assert unbalanced.tokens == [] and "QEMU gets none of it" in unbalanced.warnings[0]


def test_non_text_is_a_parse_error() -> None:
    with pytest.raises(ProxmoxParseError, match="expected the text of a qemu-server config"):
        parse_vm_config(42)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Property tests: nothing but ProxmoxParseError, garbled lines become warnings


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_parse(raw: bytes) -> None:
    parse_vm_config(raw)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_any_args_or_hostpci_value_parses(text: str) -> None:
    parse_args(text)
    parse_hostpci(0, text)
    proxmox.parse_cpu(text)
    proxmox.parse_pci_mapping(text, None)


def test_a_real_config_as_posted_reads_whole() -> None:
    # isc30/ryzen-gpu-passthrough-proxmox#142 (PVE 9, QEMU 10.0): args first and a blank line after it, as posted;
    # two functions of one device passed through, a versioned q35, no bios line (SeaBIOS), kvm hidden in args.
    config = parse_vm_config((FIXTURES / "proxmox" / "q35-10.0_2dev-amd-igpu-audio_args-hide-kvm_pve9.conf")
                             .read_bytes())
    options = config.effective()
    assert config.warnings == []
    assert machine_type(options.get("machine")) == "q35" and "bios" not in options
    assert (options["cpu"], options["memory"], options["ostype"]) == ("host", "16384", "win10")
    entries = [parse_hostpci(int(key[7:]), value) for key, value in options.items() if key.startswith("hostpci")]
    assert [(e.id, e.host_ids, e.pcie, e.romfile) for e in entries] == [
        ("hostpci0", ["0000:01:00.0"], True, "vbios_7xxx.bin"), ("hostpci1", ["0000:01:00.1"], True, None)]
    assert proxmox.args_hide_kvm(parse_args(options["args"]))
    assert proxmox.passes_pci_through(config)
