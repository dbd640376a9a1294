"""NCCL releases that give every AMD CPU link 16 GB/s (rules/nccl_amd_topology.py), judged where the audit's
facts and the benchmark meet: report/render.py merge_bench, the record every view renders.

The NCCL version comes from a real nccl-tests log (2.29.7, tests/fixtures/nccl/SOURCES.md) read by the
project's parser, as the benchmark reads it; the host is the 8x RTX PRO 6000 EPYC capture, whose GPUs all sit
on NUMA node 0 as recorded, and on nodes 0 and 1 when the test moves four of them, as on the dual EPYC 9575F
host of NVIDIA/nccl#2036 (constructed from the capture)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests_text import parse_nccl_tests
from ansible_collections.gpuhost.gpu.plugins.module_utils.report import render
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.nccl_amd_topology import fixed_amd_bandwidth
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES
from tests.unit import captures

LOG = FIXTURES / "nccl" / "all_gather_perf_2.18.0_nccl2.29.7_mpirun-tagged.txt"
ID = "nccl_amd_inter_cpu_bandwidth"


def bench(version: str | None, torch_version: str | None = None) -> dict[str, Any]:
    nccl: dict[str, Any] = {"engine": "nccl-tests", "nranks": 8, "nccl_version": version, "results": [],
                            "findings": []}
    if torch_version is not None:
        nccl["versions"] = {"torch_nccl_version": torch_version}
    return {"nccl": nccl}


def facts_on_nodes(name: str, second_node: bool) -> dict[str, Any]:
    facts = copy.deepcopy(captures.audited(name))
    if second_node:
        gpus = [d for d in facts["pci"]["nvidia_devices"] if d.get("kind") == "gpu"]
        for device in gpus[len(gpus) // 2:]:
            device["numa_node"] = 1
    return facts


def found(facts: dict[str, Any], measured: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in render.merge_bench(facts, measured)["findings"] if f["id"] == ID}


def test_the_version_a_real_log_prints_is_one_with_the_fixed_bandwidth() -> None:
    assert parse_nccl_tests(LOG.read_text()).nccl_version == "2.29.7"
    assert fixed_amd_bandwidth("2.29.7") is True


def test_amd_host_with_gpus_on_two_numa_nodes_gets_the_warning_in_the_merged_record() -> None:
    version = parse_nccl_tests(LOG.read_text()).nccl_version
    merged = render.merge_bench(facts_on_nodes(captures.PRO6000, second_node=True), bench(version))
    finding = next(f for f in merged["findings"] if f["id"] == ID)
    assert (finding["severity"], finding["action"]) == ("warning", "none")
    assert finding["evidence"]["nccl_versions"] == {"ran": "2.29.7"}
    assert finding["evidence"]["gpu_numa_nodes"] == [0, 1]
    assert "NCCL_GRAPH_FILE" in finding["remedy"] and "NCCL_MIN_NCHANNELS" in finding["remedy"]
    assert merged["summary"]["counts"]["warning"] >= 1
    # Every view renders the one record: the Markdown names it.
    assert ID in render.host_markdown("h", merged)


def test_torch_nccl_is_judged_too() -> None:
    findings = found(facts_on_nodes(captures.PRO6000, second_node=True), bench(None, torch_version="2.27.5"))
    assert findings[ID]["evidence"]["nccl_versions"] == {"torch": "2.27.5"}


def test_one_numa_node_is_silent() -> None:
    assert found(facts_on_nodes(captures.PRO6000, second_node=False), bench("2.29.7")) == {}


@pytest.mark.parametrize("version", ["2.18.6", "2.31.2", "2.30.5", None, "not a version"])
def test_a_release_without_the_constant_or_one_not_read_is_silent(version: str | None) -> None:
    # 2.30.5 is no release tag: #2441's library of that number behaved like the per-generation change.
    assert found(facts_on_nodes(captures.PRO6000, second_node=True), bench(version)) == {}


@pytest.mark.parametrize("name", [captures.H100, captures.RTX4090])
def test_other_gpus_or_an_intel_cpu_are_silent(name: str) -> None:
    # The H100 and RTX 4090 captures: not PCIe Blackwell, and Intel CPUs.
    assert found(facts_on_nodes(name, second_node=True), bench("2.29.7")) == {}


def test_numa_nodes_not_read_give_an_info_finding() -> None:
    facts = facts_on_nodes(captures.PRO6000, second_node=False)
    for device in facts["pci"]["nvidia_devices"]:
        device["numa_node"] = None
    finding = found(facts, bench("2.29.7"))[ID]
    assert finding["severity"] == "info" and finding["evidence"]["gpu_numa_nodes"] is None


@pytest.mark.parametrize(("version", "expected"), [("2.16.2", True), ("2.16.5", False), ("2.19.1", True),
                                                  ("2.30.7", True), ("2.27.5+cuda12.9", True), ("2.31.2", None)])
def test_release_table(version: str, expected: bool | None) -> None:
    assert fixed_amd_bandwidth(version) is expected


@given(st.one_of(st.none(), st.text(max_size=20), st.integers()))
def test_any_version_value_is_true_false_or_unknown(value: Any) -> None:
    assert fixed_amd_bandwidth(value) in (True, False, None)
