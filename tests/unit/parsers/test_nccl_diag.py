"""NCCL's diagnostics report (NCCL_RUN_DIAGNOSTICS=1, NCCL 2.31 on), read conservatively.

The format is the one NCCL's documentation shows (docs.nvidia.com/deeplearning/nccl, Troubleshooting,
Diagnostics): lines prefixed ``NCCL DIAG`` (behind ``host:pid``), results tagged ``[OK]`` or
``[INFO]``, a P2P summary and a completion line. Only those shapes are read into fields; every
other ``NCCL DIAG`` line is kept as NCCL printed it.
"""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_diag import parse_nccl_diag
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DOCUMENTED_OK = """\
NCCL DIAG === NCCL Diagnostics ===
NCCL DIAG [OK]   p2p: verified P2P access in both directions between every GPU pair (56 peer accesses)
NCCL DIAG NCCL diagnostics completed in 245.3 ms across 8 ranks
"""
DOCUMENTED_PARTIAL = "NCCL DIAG [INFO] p2p: only 52/56 GPU-to-GPU peer accesses passed verification\n"
DOCUMENTED_NET = ("node0:24563 NCCL DIAG [OK] net bw: 376.1/391.5/398.2 Gbit/s min/median/max same-nic bw (across 8 "
                  "ranks) in comm 0x7a3f9b2c41d05e88\n")


def test_the_documented_passing_report():
    report = parse_nccl_diag(DOCUMENTED_OK)
    assert report["p2p"] == {"status": "ok", "passed": 56, "total": 56}
    assert report["completed"] == {"ms": 245.3, "ranks": 8}
    assert [(line["tag"], line["check"]) for line in report["lines"]] == [(None, None), ("OK", "p2p"), (None, None)]


def test_the_documented_partial_p2p_result():
    report = parse_nccl_diag("junk before\nh:1:2 [0] NCCL INFO other\nhost:77 " + DOCUMENTED_PARTIAL)
    assert report["p2p"] == {"status": "failed", "passed": 52, "total": 56}
    assert report["lines"] == [{"tag": "INFO", "check": "p2p",
                                "message": "only 52/56 GPU-to-GPU peer accesses passed verification",
                                "raw": "host:77 " + DOCUMENTED_PARTIAL.strip()}]


def test_a_p2p_line_of_unknown_shape_is_flagged_and_kept():
    report = parse_nccl_diag("NCCL DIAG [INFO] p2p: check could not be completed (timeout)\n")
    assert report["p2p"] == {"status": "flagged", "passed": None, "total": None}
    assert report["lines"][0]["message"] == "check could not be completed (timeout)"


def test_other_checks_are_named_and_unknown_lines_kept_raw():
    report = parse_nccl_diag(DOCUMENTED_NET + "NCCL DIAG something else entirely\n")
    assert report["p2p"] is None and report["completed"] is None
    assert [line["check"] for line in report["lines"]] == ["net bw", None]
    assert report["lines"][1]["message"] == "something else entirely"


def test_no_diag_lines_is_an_empty_report():
    assert parse_nccl_diag("h:1:2 [0] NCCL INFO NCCL version 2.31.2+cuda12.9\n") == {
        "lines": [], "p2p": None, "completed": None}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(), st.lists(st.sampled_from([
    "NCCL DIAG ", "[OK]", "[INFO]", "[", "]", " ", "\n", "\r", "p2p:", "net bw:", "only ", "52", "/", "56",
    " GPU-to-GPU peer accesses passed verification", "verified P2P access in both directions between every GPU "
    "pair (", " peer accesses)", "NCCL diagnostics completed in ", "245.3", " ms across ", " ranks", "x",
    "99999999999999999999999", "\x00"]), max_size=40).map("".join)))
def test_property_any_text_reads_without_error_and_keeps_every_diag_line(text):
    report = parse_nccl_diag(text)
    assert len(report["lines"]) == sum(1 for line in text.splitlines() if "NCCL DIAG" in line)
    p2p = report["p2p"]
    if p2p is not None and p2p["status"] == "failed":
        assert p2p["passed"] < p2p["total"]
