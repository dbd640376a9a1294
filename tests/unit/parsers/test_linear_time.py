"""Readers in linear time on the shapes that made them quadratic, each found by auditing the regexes over input
(docs/development.md, "Regexes over input"): a line of 64 KiB of blanks inside a value, a word of many letters, a
line of many "(row)". Each took seconds to minutes before; here each must stay within a second of CPU."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import ParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.lspci import parse_lspci_vvv
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvbandwidth import parse_nvbandwidth_text
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_bug_report import parse_bug_report
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import parse_vm_config

from tests.cpu_limit import within

BLANKS = " " * 65536
DEVICE = "0000:01:00.0 3D controller [0302]: NVIDIA Corporation Device [10de:2330] (rev a1)\n"
BUG_REPORT = "Start of NVIDIA bug report log file.\nnvidia-bug-report.sh Version: 1\n"


@pytest.mark.parametrize(("read", "text"), [
    # qemu-server's key: value, the value padded inside: .+?\s*$ tried \s*$ from each blank.
    (parse_vm_config, f"cores: 4{BLANKS}x\nmemory: 4096\n"),
    # lspci: a class name padded before its [code], an Express line padded before (Slot), an ACS line of one word.
    (parse_lspci_vvv, f"0000:01:00.0 3D controller{BLANKS}x [0302]: NVIDIA Corporation Device [10de:2330]\n"),
    (parse_lspci_vvv, f"{DEVICE}\tCapabilities: [60] Express (v2) Endpoint{BLANKS}x, MSI 00\n"),
    (parse_lspci_vvv, f"{DEVICE}\tCapabilities: [148 v1] Access Control Services\n\t\tACSCap:\t{'Src' * 30000}\n"),
    # The bug report's values padded inside: \S.*?\s*$ as above.
    (parse_bug_report, f"{BUG_REPORT}Date: Mon{BLANKS}x\nuname: Linux{BLANKS}x\n*** /proc/x{BLANKS}y\n"),
    # nvbandwidth: a device name padded inside; a line of many "(row)" and no "(column)".
    (parse_nvbandwidth_text, f"nvbandwidth Version: v0.5\nDevice 0: NVIDIA{BLANKS}H100\n"),
    (parse_nvbandwidth_text, "nvbandwidth Version: v0.5\nx" + "(row)" * 40000 + "\n"),
])
def test_a_hostile_line_is_read_in_linear_time(read: Callable[[str], Any], text: str) -> None:
    with contextlib.suppress(ParseError):
        within(1.0, lambda: read(text))
