"""Benchmark findings that the recorded logs do not trip: a sweep that failed, a step that could not run."""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_runner import Sweep, run_failed_finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.report import render


def test_a_sweep_that_failed_before_finishing_names_the_ranks_reason():
    sweep = Sweep(status="error", error="rank 3 exited with 1",
                  collectives={"all_reduce": [{"size_bytes": 8}, {"size_bytes": 16}]},
                  stderr_tails=[{"rank": 3, "tail": "NCCL WARN Cuda failure 'peer access is not supported'"}])
    finding = run_failed_finding("nccl-tests", "as-is", {"NCCL_DEBUG": "INFO"}, sweep).as_dict()
    assert finding["id"] == "nccl_run_failed" and finding["severity"] == "critical"
    assert finding["summary"] == ("The nccl-tests benchmark (as-is) failed before finishing its sweep: "
                                  "rank 3 exited with 1")
    assert finding["evidence"]["completed"] == {"all_reduce": [8, 16]}
    assert finding["evidence"]["ranks"][0]["rank"] == 3
    assert "NCCL_P2P_DISABLE=1" in finding["remedy"]


def test_a_benchmark_step_that_could_not_run_is_a_finding_of_its_own():
    bench = {"nccl": {"failed": True, "msg": "gpu_bench_python has no torch"},
             "probe": {"failed": True}}
    found = {f["id"]: f for f in render.bench_findings(bench)}
    assert found["bench_nccl_not_run"]["summary"] == "The NCCL benchmark could not run: gpu_bench_python has no torch"
    assert found["bench_probe_not_run"]["summary"] == "The P2P probe could not run: no reason given"
    assert {f["severity"] for f in found.values()} == {"warning"}
    assert found["bench_nccl_not_run"]["evidence"] == {"step": "nccl"}
