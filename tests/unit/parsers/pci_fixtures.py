"""Fixtures the PCI parser tests share (tests/fixtures/pci/SOURCES.md): loaders and expected values."""

from __future__ import annotations

import re

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import AcsFlags, ResizableBar
from hypothesis import HealthCheck, settings

from tests import paths

FIXTURES = paths.FIXTURES / "pci"
MB = 1 << 20
GB = 1 << 30

_HEX_LINE = re.compile(r"^(?P<offset>[0-9a-f]+): (?P<bytes>[0-9a-f]{2}(?: [0-9a-f]{2})*)$")


def load_config(name: str) -> bytes:
    """A config/*.hex fixture (lspci -xxxx layout) as the bytes sysfs would give."""
    data = bytearray()
    for line in (FIXTURES / "config" / name).read_text().splitlines():
        match = _HEX_LINE.match(line.strip())
        if match is None:
            continue
        offset, chunk = int(match["offset"], 16), bytes.fromhex(match["bytes"])
        assert offset == len(data), f"{name}: gap or overlap at {offset:#x}"
        data += chunk
    return bytes(data)


def load_lspci(name: str) -> str:
    return (FIXTURES / "lspci" / name).read_text()


def load_sysfs(name: str) -> str:
    return (FIXTURES / "sysfs" / name).read_text()


CONFIG_FIXTURES = sorted(path.name for path in (FIXTURES / "config").glob("*.hex"))
LSPCI_FIXTURES = sorted(path.name for path in (FIXTURES / "lspci").glob("*.txt"))

ACS_LINUX_DEFAULT = AcsFlags(
    src_valid=True, trans_blk=False, req_redir=True, cmplt_redir=True,
    upstream_fwd=True, egress_ctrl=False, direct_trans=False,
)
ACS_OFF = AcsFlags(
    src_valid=False, trans_blk=False, req_redir=False, cmplt_redir=False,
    upstream_fwd=False, egress_ctrl=False, direct_trans=False,
)
QEMU_ROOT_PORT_ACS_CAP = AcsFlags(
    src_valid=True, trans_blk=True, req_redir=True, cmplt_redir=True,
    upstream_fwd=True, egress_ctrl=False, direct_trans=True,
)
RTX4090_REBAR = [
    ResizableBar(index=0, current_size=16 * MB, supported_sizes=[16 * MB]),
    ResizableBar(index=1, current_size=32 * GB, supported_sizes=[(64 * MB) << shift for shift in range(10)]),
    ResizableBar(index=3, current_size=32 * MB, supported_sizes=[32 * MB]),
]


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
