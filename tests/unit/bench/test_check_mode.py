"""Check mode runs no GPU workload unless asked to (run_in_check_mode): it says it skipped and why.

A P2P probe or an NCCL sweep loads every GPU of the host for minutes, also on a host that already
serves; ``--check`` promises to change nothing and must not take the GPUs either. Replaying saved
outputs (``log``) does no GPU work and still runs in check mode.
"""

from __future__ import annotations

from pathlib import Path

import gpu_p2p_probe
import nccl_bench

from tests import paths
from tests.unit.modules import run_module

NCCL_LOG = paths.FIXTURES / "nccl" / "all_reduce_perf_2.15-2.16_2x2080Ti-no-p2p.txt"
PROBE_LOG = sorted((paths.FIXTURES / "p2p").glob("p2p-probe_*.jsonl"))[0]


def recording_executable(directory: Path, name: str) -> Path:
    """An executable that records that it ran, and prints nothing."""
    marker = directory / f"{name}.ran"
    path = directory / name
    path.write_text(f"#!/bin/sh\ntouch {marker}\n")
    path.chmod(0o755)
    return marker


def test_nccl_bench_in_check_mode_skips_the_sweep_and_says_why(capsys, tmp_path):
    marker = recording_executable(tmp_path, "all_reduce_perf")
    result = run_module(nccl_bench.main, {"nccl_tests_dir": str(tmp_path), "nranks": 2}, capsys, check_mode=True)

    assert result["skipped"] is True and result["changed"] is False
    assert "check mode" in result["msg"] and "run_in_check_mode" in result["msg"]
    assert not marker.exists()


def test_nccl_bench_runs_in_check_mode_when_asked_to(capsys, tmp_path):
    marker = recording_executable(tmp_path, "all_reduce_perf")
    result = run_module(nccl_bench.main, {"nccl_tests_dir": str(tmp_path), "nranks": 2, "run_in_check_mode": True},
                        capsys, check_mode=True)

    assert marker.exists()
    assert result.get("skipped") is not True


def test_nccl_bench_replays_a_log_in_check_mode(capsys):
    result = run_module(nccl_bench.main, {"log": str(NCCL_LOG)}, capsys, check_mode=True)
    assert result.get("skipped") is not True and result["source"] == "log" and result["results"]


def test_gpu_p2p_probe_in_check_mode_skips_the_probe_and_says_why(capsys, tmp_path):
    marker = recording_executable(tmp_path, "python")
    result = run_module(gpu_p2p_probe.main, {"python": str(tmp_path / "python")}, capsys, check_mode=True)

    assert result["skipped"] is True and result["changed"] is False
    assert "check mode" in result["msg"] and "run_in_check_mode" in result["msg"]
    assert not marker.exists()


def test_gpu_p2p_probe_runs_in_check_mode_when_asked_to(capsys, tmp_path):
    marker = recording_executable(tmp_path, "python")
    result = run_module(gpu_p2p_probe.main, {"python": str(tmp_path / "python"), "run_in_check_mode": True},
                        capsys, check_mode=True)

    assert marker.exists()
    assert result["failed"] is True  # the stand-in interpreter prints no probe output


def test_gpu_p2p_probe_replays_a_log_in_check_mode(capsys):
    result = run_module(gpu_p2p_probe.main, {"log": str(PROBE_LOG)}, capsys, check_mode=True)
    assert result.get("skipped") is not True and result["source"] == "probe-log"


def test_outside_check_mode_the_probe_runs_as_before(capsys, tmp_path):
    marker = recording_executable(tmp_path, "python")
    run_module(gpu_p2p_probe.main, {"python": str(tmp_path / "python"), "timeout": 30}, capsys)
    assert marker.exists()
