"""Options that make no sense are refused up front, by name, with what was expected: nothing runs.

Each case would, before the check, have run a sweep that could not mean anything, failed with a
traceback, or made up a finding (a probe "hung after -5 s").
"""

from __future__ import annotations

import sys
from pathlib import Path

import gpu_p2p_probe
import nccl_bench
import pytest

from tests import paths
from tests.unit.modules import run_module

NCCL_LOG = paths.FIXTURES / "nccl" / "all_reduce_perf_2.15-2.16_2x2080Ti-no-p2p.txt"


def fake_nccl_tests(directory: Path) -> Path:
    """An all_reduce_perf that only records that it ran."""
    marker = directory / "ran"
    binary = directory / "all_reduce_perf"
    binary.write_text(f"#!/bin/sh\ntouch {marker}\n")
    binary.chmod(0o755)
    return marker


@pytest.mark.parametrize(("args", "option", "expected"), [
    ({"min_bytes": -8}, "min_bytes", "a whole number of 1 or more"),
    ({"min_bytes": 0}, "min_bytes", "a whole number of 1 or more"),
    ({"max_bytes": -1}, "max_bytes", "a whole number of 1 or more"),
    ({"min_bytes": 1024, "max_bytes": 8}, "max_bytes", "at least min_bytes"),
    ({"step_factor": 1}, "step_factor", "a whole number of 2 or more"),
    ({"step_factor": 0}, "step_factor", "a whole number of 2 or more"),
    ({"step_factor": -2}, "step_factor", "a whole number of 2 or more"),
    ({"timeout": "nan"}, "timeout", "a positive, finite number of seconds"),
    ({"timeout": "inf"}, "timeout", "a positive, finite number of seconds"),
    ({"timeout": 0}, "timeout", "a positive, finite number of seconds"),
    ({"timeout": -5}, "timeout", "a positive, finite number of seconds"),
    ({"startup_timeout": "-inf"}, "startup_timeout", "a positive, finite number of seconds"),
    ({"iters": 0}, "iters", "a whole number of 1 or more"),
    ({"warmup": -1}, "warmup", "a whole number of 0 or more"),
    ({"nranks": 0}, "nranks", "a whole number of 1 or more"),
    ({"concurrency": 0}, "concurrency", "a whole number of 1 or more"),
    ({"env": {"A=B": "1"}}, "env", "variable names of letters, digits and _"),
    ({"env": {"NCCL_PROTO\nX": "LL"}}, "env", "variable names of letters, digits and _"),
    ({"env": {"NCCL\x1b[0m": "1"}}, "env", "variable names of letters, digits and _"),
    ({"env": {"": "1"}}, "env", "variable names of letters, digits and _"),
    ({"env": {"1NCCL": "1"}}, "env", "variable names of letters, digits and _"),
    ({"env": {"NCCL_PROTO": "L\x00L"}}, "env.NCCL_PROTO", "without NUL"),
    ({"env": {"NCCL_P2P_DISABLE": True}}, "env.NCCL_P2P_DISABLE", "Quote the value"),
    ({"tune": True, "candidates": [{"name": "x", "env": {"NCCL X": "1"}}]}, "candidates[0].env",
     "variable names of letters"),
    ({"thresholds": [{"size_bytes": 16384, "max_time_us": "nan"}]}, "thresholds[0]", "finite"),
    ({"model": {"name": "m", "layers": 0}}, "model 'm'", "expected"),
])
def test_nccl_bench_refuses_absurd_options_before_running(capsys, tmp_path, args, option, expected):
    marker = fake_nccl_tests(tmp_path)
    result = run_module(nccl_bench.main, {"nccl_tests_dir": str(tmp_path), "nranks": 2, **args}, capsys)

    assert result.get("failed") is True, result
    assert option in result["msg"] and expected in result["msg"], result["msg"]
    assert "Traceback" not in result["msg"] and "exception" not in result
    assert not marker.exists(), "the benchmark ran with an option it should have refused"


def test_nccl_bench_checks_the_options_in_log_mode_too(capsys):
    result = run_module(nccl_bench.main, {"log": str(NCCL_LOG), "step_factor": 1}, capsys)
    assert result["failed"] is True and result["msg"].startswith("step_factor: expected")


@pytest.mark.parametrize(("args", "option", "expected"), [
    ({"timeout": -5}, "timeout", "a positive, finite number of seconds"),
    ({"timeout": 0}, "timeout", "a positive, finite number of seconds"),
    ({"timeout": "nan"}, "timeout", "a positive, finite number of seconds"),
    ({"timeout": "inf"}, "timeout", "a positive, finite number of seconds"),
    ({"max_small_latency_us": "nan"}, "max_small_latency_us", "a positive, finite number"),
    ({"max_small_latency_us": 0}, "max_small_latency_us", "a positive, finite number"),
    ({"proof_bytes": 0}, "proof_bytes", "a whole number of 4 or more"),
    ({"proof_bytes": -4096}, "proof_bytes", "a whole number of 4 or more"),
    ({"sizes": [4096, -1]}, "sizes[1]", "a whole number of 1 or more"),
    ({"sizes": [0]}, "sizes[0]", "a whole number of 1 or more"),
    ({"devices": [0, -1]}, "devices[1]", "a whole number of 0 or more"),
    ({"devices": [1, 1]}, "devices", "each GPU index once"),
])
def test_gpu_p2p_probe_refuses_absurd_options_without_inventing_findings(capsys, args, option, expected):
    result = run_module(gpu_p2p_probe.main, {"python": sys.executable, **args}, capsys)

    assert result.get("failed") is True, result
    assert option in result["msg"] and expected in result["msg"], result["msg"]
    assert "findings" not in result and "Traceback" not in result["msg"]
