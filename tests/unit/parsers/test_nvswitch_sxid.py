"""NVSwitch SXid lines: real pastes read line by line, the driver's own severity word kept, nothing guessed."""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.kernel_log import parse_kernel_log
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvswitch_sxid import (
    parse_sxid_line,
    parse_sxid_log,
    summarize_sxids,
)
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES

LOGS = FIXTURES / "kernel-log"
NON_FATAL = LOGS / "dmesg_570_nvswitch-sxid-22013-non-fatal_cut.txt"
DATA_ONLY = LOGS / "dmesg-human_nvswitch-sxid-12028-data-only.txt"


def test_the_570_paste_holds_three_non_fatal_events_of_one_code_on_one_switch() -> None:
    lines = parse_sxid_log(NON_FATAL.read_text())
    assert len(lines) == 8 and {(x.switch, x.pci_bus_id, x.sxid) for x in lines} == {(3, "0000:04:00.0", 22013)}
    assert [x.fatal for x in lines if not x.detail] == [False, False, False]
    assert [x.message for x in lines if x.fatal is not None] == [
        "Link 44 Minion Link DLREQ interrupt", "Link 45 Minion Link DLREQ interrupt",
        "Link 46 Minion Link DLREQ interrupt"]
    assert lines[1].uptime_s == 38.17872
    assert summarize_sxids(lines) == [{
        "sxid": 22013, "switch": 3, "pci_bus_id": "0000:04:00.0", "count": 3, "fatal": False,
        "message": "Link 44 Minion Link DLREQ interrupt", "first_uptime_s": 38.175561, "first_time": None}]
    # The Xid parser leaves them alone, and the NVRM line beside them is no SXid.
    assert parse_kernel_log(NON_FATAL.read_text()) == []


def test_a_data_line_alone_says_the_code_fired_but_not_how_badly() -> None:
    [entry] = summarize_sxids(parse_sxid_log(DATA_ONLY.read_text()))
    assert (entry["sxid"], entry["switch"], entry["pci_bus_id"], entry["count"], entry["fatal"], entry["message"]) == \
        (12028, 1, "0000:84:00.0", 1, None, None)


def test_the_fatal_word_and_paste_prefixes() -> None:
    line = parse_sxid_line("0: [Tue Mar  4 10:00:01 2025] nvidia-nvswitch0: SXid (PCI:0000:c1:00.0): 12028, Fatal, "
                           "Link 32 egress non-posted PRIV error (First)\r")
    assert line is not None and (line.fatal, line.sxid, line.time) == (True, 12028, "Tue Mar  4 10:00:01 2025")
    assert line.message == "Link 32 egress non-posted PRIV error (First)"
    assert parse_sxid_line("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.") is None
    assert parse_sxid_line("SXid mentioned in prose, no switch") is None


@given(st.text())
def test_no_text_makes_it_raise(text: str) -> None:
    summarize_sxids(parse_sxid_log(text))


@given(st.lists(st.sampled_from([
    "nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44",
    "nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Data {0x1}",
    "nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Fatal, Link 1",
    "[ 1.0] unrelated", "", "nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Severity 0 Engine",
])))
def test_counts_and_fatality_follow_the_lines(lines: list[str]) -> None:
    summary = {e["sxid"]: e for e in summarize_sxids(parse_sxid_log("\n".join(lines)))}
    for code, marker, fatal in ((22013, "Non-fatal", False), (12028, "Fatal", True)):
        said = sum(1 for line in lines if f"{code}, {marker}" in line)
        if code in summary:
            assert summary[code]["count"] == max(said, 1)
            assert summary[code]["fatal"] == (fatal if said else None)
