"""IOMMU state from the kernel command line, sysfs groups and dmesg."""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import iommu
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import CAPTURE_FORMAT, ReplaySource
from hypothesis import given
from hypothesis import strategies as st


def test_cmdline_keeps_iommu_and_vfio_keys_and_stops_at_init_args() -> None:
    text = ("BOOT_IMAGE=/vmlinuz root=/dev/sda1 quiet amd_iommu=on iommu=pt vfio-pci.ids=10de:2bb5,10de:22e8 "
            "pcie_acs_override=downstream -- iommu=off")
    assert iommu.parse_cmdline(text) == {"amd_iommu": "on", "iommu": "pt", "vfio-pci.ids": "10de:2bb5,10de:22e8",
                                         "pcie_acs_override": "downstream"}
    assert iommu.cmdline_mode(iommu.parse_cmdline(text)) == "passthrough"


def test_mode_from_group_types() -> None:
    assert iommu.mode_from_group_types({"1": "identity", "2": "identity"}) == "passthrough"
    assert iommu.mode_from_group_types({"1": "DMA-FQ", "2": "DMA"}) == "translated"
    assert iommu.mode_from_group_types({"1": "DMA", "2": "identity"}) == "mixed"
    # vfio holds passed-through groups as "unmanaged"; they say nothing of the default.
    assert iommu.mode_from_group_types({"1": "unmanaged", "2": "identity"}) == "passthrough"
    assert iommu.mode_from_group_types({}) is None


def _source(groups: dict[str, list[str]], types: dict[str, str], hardware: list[str], cmdline: str = "",
            dmesg: str = "") -> ReplaySource:
    dirs = {"/sys/kernel/iommu_groups": list(groups), "/sys/class/iommu": hardware,
            "/sys/module": ["vfio", "vfio_pci", "vfio_iommu_type1", "kvm_amd"]}
    dirs.update({f"/sys/kernel/iommu_groups/{g}/devices": m for g, m in groups.items()})
    files = {f"/sys/kernel/iommu_groups/{g}/type": t + "\n" for g, t in types.items()}
    files["/proc/cmdline"] = cmdline
    return ReplaySource({"format": CAPTURE_FORMAT, "dirs": dirs, "files": files,
                         "commands": {"dmesg": {"rc": 0, "stdout": dmesg}}})


def test_gather_on_a_passthrough_host() -> None:
    groups = {"10": ["0000:00:00.0"], "2": ["0000:41:00.0", "0000:41:00.1"]}
    result = iommu.gather_iommu(_source(groups, {"10": "identity", "2": "identity"}, ["ivhd0"], "iommu=pt"))
    assert result.enabled and result.mode == "passthrough" and result.mode_source == "iommu group types"
    assert result.vendor == "amd"
    assert list(result.groups) == ["2", "10"]  # numeric order, not string order
    assert result.modules["vfio_pci"] and not result.modules["nvidia"]
    assert iommu.group_of(result, "0000:41:00.1") == "2"


def test_dmesg_default_domain_is_the_fallback_for_mode() -> None:
    result = iommu.gather_iommu(_source({"0": ["0000:00:00.0"]}, {}, ["dmar0"],
                                        dmesg="[0.3] iommu: Default domain type: Translated\n"))
    assert (result.vendor, result.mode, result.mode_source) == ("intel", "translated", "dmesg")


def test_no_iommu_means_off_even_if_dmesg_names_a_default() -> None:
    result = iommu.gather_iommu(_source({}, {}, [], dmesg="iommu: Default domain type: Translated\n"))
    assert (result.enabled, result.mode) == (False, None)


@given(st.text())
def test_cmdline_parser_never_raises(text: str) -> None:
    iommu.cmdline_mode(iommu.parse_cmdline(text))
