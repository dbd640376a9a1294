"""pveversion's output, short and -v (tests/fixtures/pveversion, sources in its SOURCES.md): version, build and
running kernel, null where the output does not state one."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pveversion import (
    looks_like_pveversion,
    parse_pveversion,
)
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES

PVEVERSION = FIXTURES / "pveversion"


@pytest.mark.parametrize(("name", "expected"), [
    ("pveversion_pve8.3.5_kernel-6.8.12-8-pve_prompt.txt",
     {"version": "8.3.5", "build": "dac3aa88bac3f300", "kernel": "6.8.12-8-pve"}),
    ("pveversion_pve8.0.3_kernel-6.2.16-3-pve.txt",
     {"version": "8.0.3", "build": "bbf3993334bfa916", "kernel": "6.2.16-3-pve"}),
    ("pveversion_pve7.4-14_kernel-5.15.107-2-pve.txt",
     {"version": "7.4-14", "build": "81b856fa", "kernel": "5.15.107-2-pve"}),
    # -v through grep: proxmox-ve's line tells the kernel; without pve-manager's line nothing tells the version.
    ("pveversion-v_pve9.1_grep-kernel_prompt.txt", {"version": None, "build": None, "kernel": "6.17.13-4-pve"}),
])
def test_each_real_output_reads_as_printed(name: str, expected: dict) -> None:
    text = (PVEVERSION / name).read_text()
    assert parse_pveversion(text) == expected
    assert parse_pveversion(text.replace("\n", "\r\n")) == expected
    assert looks_like_pveversion(text)


def test_verbose_output_gives_the_running_manager_and_kernel() -> None:
    # The first lines of `pveversion -v` as pve-manager's bin/pveversion prints them (PVE 8.3).
    verbose = ("proxmox-ve: 8.3.0 (running kernel: 6.8.12-5-pve)\n"
               "pve-manager: 8.3.2 (running version: 8.3.2/3e76eec2)\n"
               "proxmox-kernel-helper: 8.1.0\n"
               "qemu-server: 8.3.3\n")
    assert parse_pveversion(verbose) == {"version": "8.3.2", "build": "3e76eec2", "kernel": "6.8.12-5-pve"}
    # A pve-manager line without its running version: the installed version, no build.
    assert parse_pveversion("pve-manager: 8.3.2\nqemu-server: 8.3.3\n") == {"version": "8.3.2", "build": None,
                                                                           "kernel": None}


@pytest.mark.parametrize("text", [
    "bash: pveversion: command not found",
    "qemu-server: 8.3.3\n",  # one package line: any dpkg listing has them
    "the node runs pve-manager/8.3.2 says the ticket\n",  # prose that names it, no build, no kernel
    "hostpci0: 0000:01:00.0,pcie=1\nmachine: q35\n",
])
def test_other_text_is_no_pveversion(text: str) -> None:
    assert not looks_like_pveversion(text)
    assert parse_pveversion(text)["kernel"] is None


@given(st.text(max_size=300))
def test_no_text_makes_it_raise(text: str) -> None:
    assert set(parse_pveversion(text)) == {"version", "build", "kernel"}
    assert isinstance(looks_like_pveversion(text), bool)
