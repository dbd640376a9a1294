"""Driver, CUDA and NCCL packages unattended-upgrades may move (audit/packages.py, rules/package_drift.py),
through the whole audit of the 8x RTX PRO 6000 capture given the package reads of tests/fixtures/packages."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import DPKG_GPU_PACKAGES
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.packages import APT_CONF_DIR

from tests.paths import FIXTURES
from tests.unit import captures

PACKAGES = FIXTURES / "packages"
PARTLY_HELD = (PACKAGES / "dpkg-query-W_510-partly-held_constructed.txt").read_text()
ALL_HELD = (PACKAGES / "dpkg-query-W_510-all-held_constructed.txt").read_text()
ON = (PACKAGES / "20auto-upgrades_on.txt").read_text()
OFF = (PACKAGES / "20auto-upgrades_off_constructed.txt").read_text()
BLACKLIST = (PACKAGES / "50unattended-upgrades_blacklist-nvidia_constructed.txt").read_text()
ID = "gpu_packages_not_held"


def audit_with(dpkg: str | None, apt_files: dict[str, str] | None, rc: int = 0) -> dict[str, Any]:
    data = captures.capture(captures.PRO6000)
    if dpkg is not None:
        data["commands"][DPKG_GPU_PACKAGES.key] = {"rc": rc, "stdout": dpkg, "stderr": ""}
    if apt_files is not None:
        data["dirs"][APT_CONF_DIR] = sorted(apt_files)
        for name, text in apt_files.items():
            data["files"][f"{APT_CONF_DIR}/{name}"] = text
    return captures.audit(data)


def finding(found: dict[str, Any]) -> dict[str, Any] | None:
    return next((f for f in found["findings"] if f["id"] == ID), None)


def test_unheld_driver_packages_with_unattended_upgrades_on_are_a_warning_naming_them() -> None:
    found = audit_with(PARTLY_HELD, {"20auto-upgrades": ON})
    assert found["packages"]["unattended_upgrades"] == {"installed": True, "enabled": True, "blacklist": []}
    hit = finding(found)
    assert hit is not None and (hit["severity"], hit["action"]) == ("warning", "none")
    # The i386 libraries were left unheld in the real paste; the held amd64 ones, nvidia-settings, nvidia-prime
    # and the removed 515 packages are not named.
    assert hit["evidence"]["packages"] == [
        "libnvidia-compute-510:i386=510.108.03-0ubuntu1", "libnvidia-decode-510:i386=510.108.03-0ubuntu1",
        "libnvidia-encode-510:i386=510.108.03-0ubuntu1", "libnvidia-fbc1-510:i386=510.108.03-0ubuntu1",
        "libnvidia-gl-510:i386=510.108.03-0ubuntu1"]
    assert "apt-mark hold libnvidia-compute-510 libnvidia-decode-510" in hit["remedy"]
    assert found["summary"]["verdict"] == "fit, with warnings"


@pytest.mark.parametrize(("dpkg", "apt_files"), [
    (ALL_HELD, {"20auto-upgrades": ON}),  # every package held
    (PARTLY_HELD, {"20auto-upgrades": OFF}),  # unattended-upgrades' periodic run off
    (PARTLY_HELD, {}),  # nothing sets it: apt's default, off
    (PARTLY_HELD, {"20auto-upgrades": ON, "50unattended-upgrades": BLACKLIST}),  # blacklisted
    (PARTLY_HELD, {"20auto-upgrades": ON, "99off": OFF}),  # a later file turns it off
])
def test_held_blacklisted_or_off_is_silent(dpkg: str, apt_files: dict[str, str]) -> None:
    assert finding(audit_with(dpkg, apt_files)) is None


def test_unattended_upgrades_not_installed_is_silent() -> None:
    without = "".join(line + "\n" for line in PARTLY_HELD.splitlines() if "unattended-upgrades" not in line)
    found = audit_with(without, {"20auto-upgrades": ON})
    assert found["packages"]["unattended_upgrades"]["installed"] is False
    assert finding(found) is None


def test_a_host_that_cannot_tell_is_unknown_and_silent() -> None:
    # The capture as recorded predates these reads; a host without dpkg-query answers rc None.
    recorded = captures.audited(captures.PRO6000)
    assert recorded["packages"] == {"unattended_upgrades": {"installed": None, "enabled": None, "blacklist": None},
                                    "packages": None}
    assert finding(recorded) is None
    no_dpkg = audit_with(None, {"20auto-upgrades": ON})
    assert no_dpkg["packages"]["packages"] is None and finding(no_dpkg) is None


def test_patterns_that_matched_nothing_still_list_the_others() -> None:
    # dpkg-query exits 1 when one pattern (libcuda*, say) matches no package; what it printed stands.
    assert finding(audit_with(PARTLY_HELD, {"20auto-upgrades": ON}, rc=1)) is not None
