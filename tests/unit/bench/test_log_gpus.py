"""An nccl-tests log judged for a host whose GPUs it did not run on is warned about (issue 29).

Support material mixes files: a log pasted into a ticket may come from another machine. The rank lines of real
nccl-tests outputs (tests/fixtures/nccl, sources in its SOURCES.md) name each rank's GPU; the parser keeps them and
the judge warns, in its result's notes and through warn, when none of the host's GPUs is one of them.
"""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.from_logs import nccl_from_log
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.log_gpus import gpu_name_mismatch
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests_text import parse_nccl_tests
from hypothesis import given
from hypothesis import strategies as st

from tests import paths

NCCL = paths.FIXTURES / "nccl"
A100_2_0_ERA = NCCL / "all_gather_perf_2.0-era_c0-N-A_8xA100.txt"
RTX2080TI = NCCL / "all_reduce_perf_2.15-2.16_2x2080Ti-no-p2p.txt"


def test_the_parser_keeps_each_ranks_gpu_name_old_and_new_layouts() -> None:
    assert parse_nccl_tests(A100_2_0_ERA.read_text()).device_names == ["A100-SXM4-40GB"] * 8
    assert parse_nccl_tests(RTX2080TI.read_text()).device_names == ["NVIDIA GeForce RTX 2080 Ti"] * 2


def test_a_log_of_other_gpus_is_warned_about_in_the_result_and_through_warn() -> None:
    warned: list[str] = []
    result = nccl_from_log(str(RTX2080TI), ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 2, warn=warned.append)
    assert not result.get("failed")
    said = [w for w in warned if "the nccl-tests log ran on NVIDIA GeForce RTX 2080 Ti" in w]
    assert len(said) == 1 and "NVIDIA RTX PRO 6000 Blackwell Server Edition" in said[0]
    assert said[0] in result["notes"]


def test_the_same_gpus_without_the_nvidia_prefix_are_no_mismatch() -> None:
    assert gpu_name_mismatch(["A100-SXM4-40GB"], ["NVIDIA A100-SXM4-40GB"], "log") is None
    warned: list[str] = []
    result = nccl_from_log(str(RTX2080TI), ["NVIDIA GeForce RTX 2080 Ti"] * 2, warn=warned.append)
    assert not [w for w in warned if "ran on" in w] and not any("ran on" in n for n in result.get("notes", []))


def test_without_names_on_either_side_nothing_is_said() -> None:
    assert gpu_name_mismatch([], ["NVIDIA H100 80GB HBM3"], "log") is None
    assert gpu_name_mismatch(["NVIDIA H100 80GB HBM3"], [], "log") is None


@given(st.lists(st.text(max_size=40), max_size=8), st.lists(st.text(max_size=40), max_size=8))
def test_any_names_give_a_warning_or_none_and_never_raise(log: list[str], host: list[str]) -> None:
    said = gpu_name_mismatch(log, host, "log")
    assert said is None or said.startswith("log: the nccl-tests log ran on ")
