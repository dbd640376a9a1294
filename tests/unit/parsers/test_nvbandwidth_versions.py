"""nvbandwidth's text across versions, as users pasted it (tests/fixtures/p2p/SOURCES.md): v0.2's device lines
without a bus id and a paste cut mid-row, v0.7 stopping on an ASSERT before any matrix, and ``> Running`` lines
quoted by Markdown over unindented column headers."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.kinds import detect_kind
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvbandwidth import parse_nvbandwidth_text
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_common import P2PToolParseError
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.paths import FIXTURES

P2P = FIXTURES / "p2p"
V02 = "nvbandwidth_v0.2_8xRTX4090_h2d-d2h-ce_cut-mid-row_excerpt.txt"
V07 = "nvbandwidth_v0.7_8xA100_pattern-assert-after-running.txt"
QUOTED = "nvbandwidth_8xH100_host-sm-matrices_quoted-no-banner.txt"  # version not shown
V010 = "nvbandwidth_v0.10_2gpu_h2d-d2h-read-ce_coefficient-of-variation_no-banner.txt"


def test_v02_device_lines_without_a_bus_id_name_the_gpus() -> None:
    parsed = parse_nvbandwidth_text((P2P / V02).read_text())
    assert parsed["version"] == "v0.2" and parsed["driver_version"] == "545.29.06"
    assert [(d["index"], d["name"], d["pci_bus_id"]) for d in parsed["devices"]] == \
        [(i, "NVIDIA GeForce RTX 4090", None) for i in range(8)]


def test_a_paste_cut_mid_row_keeps_what_it_printed_and_no_cut_figure() -> None:
    parsed = parse_nvbandwidth_text((P2P / V02).read_text())
    names = [m["name"] for m in parsed["matrices"]]
    assert names == ["host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "host_to_device_bidirectional_memcpy_ce"]
    assert parsed["matrices"][0]["sum"] == 205.04
    # "16." was cut: it could be 16.xx; it and the cells never printed are None.
    assert parsed["matrices"][2]["values"] == [[11.24, 14.42, None, None, None, None, None, None]]
    assert "cut" in parsed["warning"] and "host_to_device_bidirectional_memcpy_ce" in parsed["warning"]


def test_a_run_that_stopped_on_an_assert_says_where_and_why() -> None:
    with pytest.raises(P2PToolParseError) as raised:
        parse_nvbandwidth_text((P2P / V07).read_text())
    message = str(raised.value)
    assert "device_to_device_memcpy_read_ce" in message and "ASSERT in expression h_errorFlag == 0" in message


def test_quoted_running_lines_over_unindented_headers_are_read() -> None:
    parsed = parse_nvbandwidth_text((P2P / QUOTED).read_text())
    assert [m["name"] for m in parsed["matrices"]] == ["host_to_device_memcpy_sm", "device_to_host_memcpy_sm"]
    assert parsed["matrices"][1]["values"][0][3] == 52.78


def test_v010_coefficient_of_variation_lines_are_no_matrix_and_the_version_is_not_guessed() -> None:
    text = (P2P / V010).read_text()
    assert detect_kind(text) == "nvbandwidth"
    parsed = parse_nvbandwidth_text(text)
    assert parsed["version"] is None and parsed["devices"] == []  # the paste has no banner: nothing says them
    assert [(m["name"], m["sum"]) for m in parsed["matrices"]] == [
        ("host_to_device_memcpy_ce", 51.97), ("device_to_host_memcpy_ce", 51.97),
        ("device_to_device_memcpy_read_ce", 552.26)]
    assert parsed["matrices"][2]["values"] == [[None, 276.07], [276.19, None]]
    assert parsed["error"] is None and parsed["warning"] is None


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([V02, QUOTED, V010, "nvbandwidth_v0.8_6xA6000-read-ce.txt"]), st.data())
def test_a_cut_anywhere_gives_a_prefixs_reading_or_a_clear_error(name, data) -> None:
    text = (P2P / name).read_text()
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    try:
        parsed = parse_nvbandwidth_text(text[:cut])
    except P2PToolParseError:
        return
    whole = parse_nvbandwidth_text(text)
    for part, full in zip(parsed["matrices"], whole["matrices"], strict=False):
        for row, full_row in zip(part["values"], full["values"], strict=False):
            # Every value read from a prefix is the whole output's value, or None (not printed yet, or cut).
            assert all(value is None or value == full_value for value, full_value in zip(row, full_row, strict=False))


LOCALIZED = "nvbandwidth_v0.8_6xA6000-read-ce_decimal-comma_constructed.txt"


def test_decimal_commas_of_a_localized_paste_read_as_the_same_figures() -> None:
    localized = parse_nvbandwidth_text((P2P / LOCALIZED).read_text())
    plain = parse_nvbandwidth_text((P2P / "nvbandwidth_v0.8_6xA6000-read-ce.txt").read_text())
    assert localized["matrices"][0]["values"] == plain["matrices"][0]["values"]
    assert localized["matrices"][0]["sum"] == 715.53 and localized["warning"] is None


@pytest.mark.parametrize(("cell", "value"), [
    ("12,34", 12.34), ("1.234,56", 1234.56), ("1,234.56", 1234.56), ("26.34", 26.34), ("1,234", None),
])
def test_a_comma_is_read_where_its_form_tells_and_null_with_a_reason_where_not(cell, value) -> None:
    # Two decimals always (%.2f): ",dd" is a decimal comma, ",ddd." groups thousands, a bare ",ddd" is either.
    text = f"memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n  0  1\n 0  N/A  {cell}\n 1  {cell}  N/A\n"
    parsed = parse_nvbandwidth_text(text)
    assert parsed["matrices"][0]["values"] == [[None, value], [value, None]]
    assert (parsed["warning"] is not None) == (value is None)
    if value is None:
        assert "thousands separator or a decimal comma cannot be told apart" in parsed["warning"]


def test_a_reader_with_no_warning_refuses_an_ambiguous_figure_with_a_reason() -> None:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_common import number
    with pytest.raises(P2PToolParseError, match="LC_ALL=C"):
        number("1,234", "line 3")
    assert number("1,234", "line 3", []) is None and number("12,34", "line 3") == 12.34
