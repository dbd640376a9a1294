"""The manifest's peer bandwidth floor (bandwidth.peer_min_gbps), judged where bandwidth is measured: on the real
p2pBandwidthLatencyTest of 4x A100 PCIe in NVLink pairs (275 GB/s on the pairs, 21.5-21.7 GB/s across them), on
nvbandwidth's real 6x A6000 output and on the probe's own log, through gpu_p2p_probe as gpu_bench runs it."""

from __future__ import annotations

import gpu_p2p_probe
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import p2p_judge
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_bandwidth import parse_p2p_log
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.manifest_format import ManifestError, load

from tests import paths
from tests.unit.modules import run_module

P2P = paths.FIXTURES / "p2p"
A100 = P2P / "p2pBandwidthLatencyTest_4xA100-PCIe-nvlink-pairs.txt"


def manifest(floor) -> dict:
    return {"format": "gpuhost-manifest/1", "class": "a100-pcie-nvlink-pairs", "gpus": {"count": 4},
            "bandwidth": {"peer_min_gbps": floor}}


def floor_findings(result: dict, floor: float | None) -> list[dict]:
    found = p2p_judge.findings(result, peer_min_gbps=floor, manifest_class="a100-pcie-nvlink-pairs")
    return [f for f in found if f["id"] == "manifest_peer_bandwidth_below"]


def test_the_pairs_across_the_nvlink_pairs_are_below_a_100_gbps_floor() -> None:
    result = parse_p2p_log(A100.read_text())
    assert p2p_judge.peer_bandwidth_matrix(result)["name"] == \
        "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)"
    [finding] = floor_findings(result, 100)
    assert (finding["severity"], finding["action"]) == ("warning", "none")
    assert set(finding["evidence"]["slow_pairs"]) == {f"GPU{i}->GPU{j}" for i in range(4) for j in range(4)
                                                       if i != j and {i, j} not in ({0, 1}, {2, 3})}
    assert "down to 21.46 GB/s (GPU2->GPU0" in finding["summary"]
    assert "class a100-pcie-nvlink-pairs expects 100 GB/s" in finding["remedy"]


def test_a_floor_the_host_reaches_and_no_floor_are_silent() -> None:
    result = parse_p2p_log(A100.read_text())
    assert floor_findings(result, 20) == [] and floor_findings(result, None) == []


def test_nvbandwidth_s_peer_matrix_is_judged() -> None:
    result = parse_p2p_log((P2P / "nvbandwidth_v0.8_6xA6000-read-ce.txt").read_text())
    matrix = p2p_judge.peer_bandwidth_matrix(result)
    assert matrix is not None and matrix["unit"] == "GB/s"
    values = [v for i, row in enumerate(matrix["values"]) for j, v in enumerate(row) if i != j and v is not None]
    assert floor_findings(result, min(values) - 0.01) == []
    assert floor_findings(result, max(values) + 1)[0]["evidence"]["slow_pairs"]


def test_a_result_without_a_bandwidth_matrix_judges_nothing() -> None:
    result = parse_p2p_log((P2P / "p2pBandwidthLatencyTest_4gpu_latency-matrices-only_line-numbered.txt").read_text())
    assert p2p_judge.peer_bandwidth_matrix(result) is None and floor_findings(result, 1000) == []


def test_the_probe_module_takes_the_class_manifest(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(gpu_p2p_probe.main, {"log": str(A100), "manifest": manifest(100)}, capsys)
    assert "manifest_peer_bandwidth_below" in {f["id"] for f in result["findings"]}
    result = run_module(gpu_p2p_probe.main, {"log": str(A100)}, capsys)
    assert "manifest_peer_bandwidth_below" not in {f["id"] for f in result["findings"]}


def test_the_probe_s_own_log_is_judged_at_its_largest_copy(capsys: pytest.CaptureFixture[str]) -> None:
    log = P2P / "p2p-probe_8xRTXPRO6000-baremetal-p2p_constructed.jsonl"
    result = run_module(gpu_p2p_probe.main, {"log": str(log), "manifest": manifest(10000 - 1)}, capsys)
    [finding] = [f for f in result["findings"] if f["id"] == "manifest_peer_bandwidth_below"]
    assert finding["evidence"]["matrix"].startswith("peer copy bandwidth")


@pytest.mark.parametrize("floor", [0, -1, "fast", True, 20000])
def test_a_floor_that_is_no_bandwidth_is_refused_naming_the_key(floor) -> None:
    with pytest.raises(ManifestError, match=r"bandwidth\.peer_min_gbps must be a number of GB/s"):
        load(manifest(floor))


def test_a_bad_manifest_fails_the_probe_module_with_the_key(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(gpu_p2p_probe.main, {"log": str(A100), "manifest": manifest("fast")}, capsys)
    assert result["failed"] and "peer_min_gbps" in result["msg"]
