"""Host settings of PCIe Blackwell hosts (rules/pcie_blackwell.py) through the whole audit, on the captures.

The 8x RTX PRO 6000 capture is the healthy host: pcie_aspm=off on its command line, and the uvm_disable_hmm
file is what a test gives it (the capture predates the read, so as recorded the setting is unknown)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.host_settings import UVM_DISABLE_HMM, parse_module_bool
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.kernel_cmdline import CmdlineError
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.pcie_blackwell import aspm_setting
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES
from tests.unit import captures

HMM_ON = (FIXTURES / "host-settings" / "uvm_disable_hmm_N_constructed.txt").read_text()
HMM_OFF = (FIXTURES / "host-settings" / "uvm_disable_hmm_Y.txt").read_text()
TUNED = "BOOT_IMAGE=/vmlinuz-6.8.0-85-generic root=UUID=0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f ro iommu=pt pcie_aspm=off"


def ids(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in found["findings"] if f["id"] in ("uvm_hmm_enabled", "pcie_aspm_not_off")}


def audit_with(name: str, uvm: str | None = None, cmdline: str | None = None) -> dict[str, Any]:
    data = captures.capture(name)
    if uvm is not None:
        data["files"][UVM_DISABLE_HMM] = uvm
    if cmdline is not None:
        data["files"]["/proc/cmdline"] = cmdline + "\n"
    return captures.audit(data)


def test_the_healthy_pcie_blackwell_host_is_silent() -> None:
    found = audit_with(captures.PRO6000, uvm=HMM_OFF)
    assert found["host_settings"] == {"cpu_vendor": "amd", "uvm_disable_hmm": True}
    assert ids(found) == {}
    assert found["findings"] == []


def test_a_capture_made_before_the_read_leaves_hmm_unknown_and_silent() -> None:
    found = captures.audited(captures.PRO6000)
    assert found["host_settings"]["uvm_disable_hmm"] is None
    assert ids(found) == {}


def test_hmm_allowed_on_pcie_blackwell_is_a_warning_with_the_modprobe_remedy() -> None:
    found = audit_with(captures.PRO6000, uvm=HMM_ON)
    assert found["host_settings"]["uvm_disable_hmm"] is False
    finding = ids(found)["uvm_hmm_enabled"]
    assert (finding["severity"], finding["action"]) == ("warning", "none")
    assert len(finding["evidence"]["gpus"]) == 8
    assert "options nvidia_uvm uvm_disable_hmm=1" in finding["remedy"]
    assert "#1223" in finding["remedy"] and "#901" in finding["remedy"]
    assert found["summary"]["verdict"] == "fit, with warnings"


@pytest.mark.parametrize("name", [captures.H100, captures.RTX4090])
def test_hmm_allowed_on_other_gpus_is_not_judged_here(name: str) -> None:
    found = audit_with(name, uvm=HMM_ON)
    assert found["host_settings"]["uvm_disable_hmm"] is False
    assert ids(found) == {}


@pytest.mark.parametrize(("cmdline", "setting"), [
    ("BOOT_IMAGE=/vmlinuz-6.8.0-85-generic ro iommu=pt", None),
    ("BOOT_IMAGE=/vmlinuz-6.8.0-85-generic ro pcie_aspm=force", "force"),
    # The kernel calls its handler once per occurrence: the last one stands.
    ("BOOT_IMAGE=/vmlinuz-6.8.0-85-generic ro pcie_aspm=off pcie_aspm=force", "force"),
])
def test_aspm_left_on_is_an_info_finding(cmdline: str, setting: str | None) -> None:
    found = audit_with(captures.PRO6000, uvm=HMM_OFF, cmdline=cmdline)
    finding = ids(found)["pcie_aspm_not_off"]
    assert (finding["severity"], finding["action"], finding["evidence"]["pcie_aspm"]) == ("info", "none", setting)
    assert found["summary"]["verdict"] == "fit"  # info: context, not a fault


def test_aspm_off_after_force_is_off() -> None:
    cmdline = TUNED.replace("pcie_aspm=off", "pcie_aspm=force pcie_aspm=off")
    found = audit_with(captures.PRO6000, uvm=HMM_OFF, cmdline=cmdline)
    assert ids(found) == {}


@pytest.mark.parametrize("name", [captures.H100, captures.RTX4090, captures.INCIDENT])
def test_aspm_is_not_judged_on_other_gpus_or_in_a_guest(name: str) -> None:
    # The incident guest has PCIe Blackwell GPUs, but its ports are QEMU's: the hypervisor owns the links.
    found = audit_with(name, cmdline="BOOT_IMAGE=/vmlinuz ro quiet")
    assert "pcie_aspm_not_off" not in ids(found)


@given(st.text(max_size=40))
def test_a_module_bool_is_true_false_or_unknown(value: str) -> None:
    assert parse_module_bool(value) in (True, False, None)


@pytest.mark.parametrize(("value", "expected"), [("Y\n", True), ("N\n", False), ("1", True), ("0", False),
                                                 ("", None), ("maybe", None)])
def test_module_bool_words(value: str, expected: bool | None) -> None:
    assert parse_module_bool(value) is expected


@given(st.text(alphabet=st.sampled_from(list('pcie_asm=offrc "-, \t')), max_size=60))
def test_aspm_setting_raises_nothing_but_its_own_error(line: str) -> None:
    try:
        setting = aspm_setting(line)
    except CmdlineError:
        return
    assert setting is None or isinstance(setting, str)
