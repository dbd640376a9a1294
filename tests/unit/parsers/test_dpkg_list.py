"""dpkg -l as pasted, and the audit's dpkg-query -W (parsers/dpkg_list.py)."""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.dpkg_list import parse_dpkg_list
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES

PACKAGES = FIXTURES / "packages"


def test_a_pasted_dpkg_l_gives_each_package_its_hold_and_state() -> None:
    pasted = (PACKAGES / "dpkg-l_grep_nvidia-cuda_510-partly-held.txt").read_text()
    listed = {p.name: p for p in parse_dpkg_list(pasted)}
    assert len(listed) == 37
    driver = listed["nvidia-driver-510"]
    assert (driver.version, driver.held, driver.installed) == ("510.108.03-0ubuntu1", True, True)
    i386 = listed["libnvidia-compute-510:i386"]
    assert (i386.base, i386.held, i386.installed) == ("libnvidia-compute-510", False, True)
    removed = listed["nvidia-dkms-515"]
    assert (removed.held, removed.installed) == (False, False)  # rc: config files only


def test_the_audits_dpkg_query_lines_read_the_same() -> None:
    listed = parse_dpkg_list((PACKAGES / "dpkg-query-W_510-partly-held_constructed.txt").read_text())
    by_name = {p.name: p for p in listed}
    assert by_name["nvidia-driver-510"].held and not by_name["libnvidia-gl-510:i386"].held
    assert by_name["unattended-upgrades"].installed


def test_header_noise_and_crlf_are_skipped() -> None:
    text = ("Desired=Unknown/Install/Remove/Purge/Hold\r\n||/ Name Version Architecture Description\r\n"
            "+++-====-====\r\nhi  libnccl2  2.21.5-1+cuda12.4  amd64  NVIDIA Collective Communication Library\r\n"
            "dpkg-query: no packages found matching libcuda*\r\n")
    assert [(p.name, p.version, p.held) for p in parse_dpkg_list(text)] == [("libnccl2", "2.21.5-1+cuda12.4", True)]


@given(st.text(max_size=300))
def test_any_text_gives_packages_or_nothing(text: str) -> None:
    for package in parse_dpkg_list(text):
        assert package.want in "uihrp" and package.name and package.version


def test_a_real_dpkg_query_run_skips_names_known_but_not_installed() -> None:
    listed = parse_dpkg_list((PACKAGES / "dpkg-query-W_debian12_no-nvidia.txt").read_text())
    assert [(p.name, p.installed, p.held) for p in listed][:2] == [("libc6:amd64", True, False),
                                                                   ("python3.11", True, False)]
    assert all(p.installed for p in listed) and len(listed) == 5
