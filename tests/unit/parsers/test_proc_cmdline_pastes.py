"""Real /proc/cmdline pastes (tests/fixtures/proc-cmdline, provenance in its SOURCES.md): each is one kind, its
IOMMU parameters read as the kernel reads them, and the capture built from it holds the parameters alone
(never the shell line pasted above them)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_format import decode_bytes
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import build_capture
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.kinds import detect_kind, pasted_command
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.reads import CMDLINE_FILE
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.kernel_cmdline import params

from tests.paths import FIXTURES

CMDLINES = FIXTURES / "proc-cmdline"

# Each fixture's IOMMU parameters: None where the line has none (the kernel's default then decides).
EXPECTED = {
    "proc-cmdline_ubuntu-6.3-acs-override_amd-renoir_no-iommu-flag.txt": {
        "intel_iommu": None, "amd_iommu": None, "iommu": None, "pcie_acs_override": ["downstream", "multifunction"],
    },
    "proc-cmdline_centos8-5.12-grub2-device-path_xeon-spr-kvm-host_intel-iommu-sm-on.txt": {
        "intel_iommu": ["on", "sm_on"], "amd_iommu": None, "iommu": ["on"], "pcie_acs_override": None,
    },
    "proc-cmdline_centos8-5.12-serial-console_kvm-guest_iommu-pt.txt": {
        "intel_iommu": ["on", "sm_on"], "amd_iommu": None, "iommu": ["pt"], "pcie_acs_override": None,
    },
    "proc-cmdline_ubuntu-5.15-vfio-pci-ids_arc-a310-passthrough-host_from-dmesg.txt": {
        "intel_iommu": ["on"], "amd_iommu": None, "iommu": ["pt"], "pcie_acs_override": None,
        "vfio-pci.ids": ["8086:56a6", "8086:4f92"],
    },
}


def test_every_fixture_has_its_expected_values() -> None:
    assert sorted(EXPECTED) == sorted(path.name for path in CMDLINES.glob("*.txt"))


def parameter_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.strip() and not pasted_command(line))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_iommu_parameters_of_a_real_cmdline(name) -> None:
    text = (CMDLINES / name).read_text(encoding="utf-8")
    assert detect_kind(text) == "proc-cmdline"
    found = params(parameter_line(text))
    for key, options in EXPECTED[name].items():
        assert found.get(key) == options, key
    assert found["BOOT_IMAGE"], "the boot image is the first word of every one of them"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_capture_holds_the_parameters_without_the_shell_line(name) -> None:
    data = (CMDLINES / name).read_bytes()
    capture = build_capture([(name, data)])
    held = decode_bytes(capture["files"][CMDLINE_FILE]).decode("utf-8")
    assert held.strip() == parameter_line(data.decode("utf-8")).strip()
    assert "cat /proc/cmdline" not in held
