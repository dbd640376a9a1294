"""The sysfs AER counter files (aer_dev_correctable, aer_dev_nonfatal, aer_dev_fatal) of several kernels."""

from __future__ import annotations

import contextlib

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_aer import parse_aer_counters
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import PciParseError
from hypothesis import given
from hypothesis import strategies as st

# drivers/pci/pcie/aer.c of Linux 6.8: every named bit, then the total.
CORRECTABLE_6_8 = ("RxErr 0\nBadTLP 181\nBadDLLP 57\nRollover 2\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\n"
                   "HeaderOF 0\nTOTAL_ERR_COR 240\n")
FATAL_6_8 = ("Undefined 0\nDLP 0\nSDES 1\nTLP 0\nFCP 0\nCmpltTO 0\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\n"
             "ECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\nAtomicOpBlocked 0\nTLPBlockedErr 0\n"
             "PoisonTLPBlocked 0\nTOTAL_ERR_FATAL 1\n")
# Linux 4.19-5.x: fewer names; a bit without a name printed with its array's name.
NONFATAL_4_19 = ("Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 3\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\n"
                 "ECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\nAtomicOpBlocked 0\n"
                 "dev_nonfatal_errs_bit[26] 1\nTOTAL_ERR_NONFATAL 4\n")


def test_correctable_counters() -> None:
    counters = parse_aer_counters(CORRECTABLE_6_8)
    assert counters.total == 240
    assert counters.nonzero() == {"BadTLP": 181, "BadDLLP": 57, "Rollover": 2}
    assert len(counters.counts) == 8


def test_fatal_and_nonfatal_counters_of_two_kernels() -> None:
    assert parse_aer_counters(FATAL_6_8).nonzero() == {"SDES": 1}
    old = parse_aer_counters(NONFATAL_4_19)
    assert old.total == 4 and old.nonzero() == {"CmpltTO": 3, "dev_nonfatal_errs_bit[26]": 1}


def test_a_file_without_a_total_line_sums_its_counts() -> None:
    assert parse_aer_counters("RxErr 1\nBadTLP 2\n").total == 3


@pytest.mark.parametrize("text", ["", "   \n", "RxErr\n", "RxErr -1\n", "TOTAL_ERR_COR many\n", "0x10 3\n",
                                  "<html>oops</html>"])
def test_garbage_is_refused_with_what_was_expected(text: str) -> None:
    with pytest.raises(PciParseError, match="aer_dev"):
        parse_aer_counters(text)


@given(st.dictionaries(st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,15}", fullmatch=True).filter(
    lambda n: not n.startswith("TOTAL_ERR_")), st.integers(0, 2**40), max_size=20))
def test_written_counters_read_back(counts: dict[str, int]) -> None:
    text = "".join(f"{name} {count}\n" for name, count in counts.items()) + f"TOTAL_ERR_COR {sum(counts.values())}\n"
    counters = parse_aer_counters(text)
    assert counters.counts == counts and counters.total == sum(counts.values())


@given(st.text(max_size=200))
def test_any_text_is_read_or_refused_cleanly(text: str) -> None:
    with contextlib.suppress(PciParseError):
        parse_aer_counters(text)
