"""cuda-samples simpleP2P output, over real pastes (tests/fixtures/p2p/SOURCES.md): peer access per ordered
pair, the copy figure and the result line; cut pastes keep what they show; nothing raises but its own error."""

from __future__ import annotations

import contextlib

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_bandwidth import parse_p2p_log
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_common import P2PToolParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.simple_p2p import parse_simple_p2p
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES

P2P = FIXTURES / "p2p"


def read(name: str) -> str:
    return (P2P / name).read_text(encoding="utf-8")


def test_a_whole_run_on_two_gpus_gives_access_the_copy_figure_and_its_result() -> None:
    parsed = parse_simple_p2p(read("simpleP2P_2xL4_peer-yes_bandwidth_passed.txt"))
    assert parsed["tool"] == "simpleP2P"
    assert [d["name"] for d in parsed["devices"]] == ["NVIDIA L4", "NVIDIA L4"]
    assert parsed["access"] == [[None, True], [True, None]]
    assert parsed["memcpy_peer"] == {"pair": [0, 1], "gb_per_s": 19.87}
    assert parsed["passed"] is True and parsed["matrices"] == []


def test_the_old_capable_lines_and_a_paste_cut_in_the_pairs() -> None:
    """Four K40m, two peer pairs (0-1, 2-3); the paste ends after GPU3 -> GPU0, so GPU3's other pairs are None."""
    parsed = parse_simple_p2p(read("simpleP2P_4xK40m_old-capable-lines_pairs-only_excerpt.txt"))
    assert [d["name"] for d in parsed["devices"]] == ["Tesla K40m"] * 4
    assert parsed["access"] == [[None, True, False, False], [True, None, False, False],
                                [False, False, None, True], [False, None, None, None]]
    assert parsed["memcpy_peer"] is None and parsed["passed"] is None


def test_no_peer_access_anywhere_and_the_count_line_sizes_the_matrix() -> None:
    parsed = parse_simple_p2p(read("simpleP2P_6x2080Ti_no-peer-access_excerpt.txt"))
    assert len(parsed["access"]) == 6  # "CUDA-capable device count: 6", though GPU2..5 print no line here
    assert parsed["access"][0] == [None, False, False, False, False, False]
    assert parsed["access"][1] == [False, None, False, False, False, False]
    assert all(cell is None for row in parsed["access"][2:] for cell in row)


@pytest.mark.parametrize("name", ["simpleP2P_2xL4_peer-yes_bandwidth_passed.txt",
                                  "simpleP2P_4xK40m_old-capable-lines_pairs-only_excerpt.txt",
                                  "simpleP2P_6x2080Ti_no-peer-access_excerpt.txt"])
def test_the_log_reader_sends_simple_p2p_to_its_parser(name: str) -> None:
    assert parse_p2p_log(read(name)) == parse_simple_p2p(read(name))


def test_a_paste_that_ends_before_the_pairs_says_what_to_pass() -> None:
    with pytest.raises(P2PToolParseError, match="ends before the peer-access lines"):
        parse_simple_p2p("[./simpleP2P] - Starting...\nChecking for multiple GPUs...\nCUDA-capable device count: 2\n")
    with pytest.raises(P2PToolParseError, match="expected the text"):
        parse_simple_p2p(None)


@given(st.text(max_size=400))
def test_property_any_text_gives_a_result_or_its_own_error(text: str) -> None:
    with contextlib.suppress(P2PToolParseError):
        parse_simple_p2p(text)


@given(st.data())
def test_property_a_cut_paste_keeps_the_pairs_it_shows(data: st.DataObject) -> None:
    lines = read("simpleP2P_4xK40m_old-capable-lines_pairs-only_excerpt.txt").split("\n")
    start = lines.index("Checking GPU(s) for support of peer to peer memory access...")
    end = data.draw(st.integers(min_value=start + 2, max_value=len(lines)))
    parsed = parse_simple_p2p("\n".join(lines[:end]))
    whole = parse_simple_p2p("\n".join(lines))
    for i, row in enumerate(parsed["access"]):
        for j, cell in enumerate(row):
            assert cell is None or cell == whole["access"][i][j]


def test_a_line_of_many_arrows_is_read_in_linear_time() -> None:
    # Unbounded, the names' .*? tried the rest of the line from each "(GPUn) -> " of it.
    from tests.cpu_limit import within

    line = "Peer access from " + "NVIDIA H100 (GPU1) -> " * 6000 + "\n"
    with contextlib.suppress(P2PToolParseError):
        within(1.0, lambda: parse_simple_p2p(line))
