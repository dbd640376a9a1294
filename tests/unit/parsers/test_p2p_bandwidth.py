"""parsers/p2p_bandwidth.py on hostile input; its formats are tested with the probe (tests/unit/bench)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_bandwidth import (
    P2PToolParseError,
    parse_p2p_log,
)

from tests.cpu_limit import within


def test_blank_lines_are_told_in_linear_time() -> None:
    # 25,000 blank lines: each line start's \s* ran over every blank line below it (half a minute).
    with pytest.raises(P2PToolParseError):
        within(1.0, lambda: parse_p2p_log("\n" * 25000))


def test_a_matrix_after_many_blank_lines_is_still_found() -> None:
    assert parse_p2p_log("\n" * 1000 + "   D\\D     0      1\n     0   0.00  12.00\n     1  12.00   0.00\n")
