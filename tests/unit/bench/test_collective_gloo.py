"""The collective harness for real: torch.distributed gloo, real rank processes, through the module.

No GPU is needed: the gloo backend runs the same harness (process per rank, timed sweep, value
check, deadline) on the CPU, with the torch venv's interpreter as the module's ``python``.
Kept small (8 B to 1 MiB, few iterations) so the whole file runs in well under 30 s on 2 cores.
"""

from __future__ import annotations

import math
import os
import time
import uuid
from pathlib import Path

import nccl_bench
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.collective_harness import FAULT_ENV
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests import bus_bandwidth_factor

from tests.unit.modules import run_module
from tests.unit.torch_venv import torch_python

SWEEP = {"engine": "torch-gloo", "min_bytes": 8, "max_bytes": 1 << 20, "iters": 5, "warmup": 1, "timeout": 60}
SIZES = [8 << i for i in range(18)]  # 8 B .. 1 MiB
MARKER_ENV = "GPUHOST_TEST_MARKER"


@pytest.fixture(scope="module")
def python() -> str:
    return torch_python()


@pytest.fixture(autouse=True)
def marker(monkeypatch) -> str:
    """A token in the environment that the harness and every rank inherit, to find them afterwards."""
    token = f"test-{uuid.uuid4().hex}"
    monkeypatch.setenv(MARKER_ENV, token)
    return token


def processes_with(token: str) -> list[str]:
    """Command lines of processes (other than this one) that carry the token: orphans of our runs."""
    needle = f"{MARKER_ENV}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes():
                continue
            found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace"))
        except OSError:
            continue
    return found


@pytest.mark.slow
@pytest.mark.parametrize("nranks", [2, 4])
def test_sweep_bus_bandwidth_and_values(nranks, python, capsys, record_property, marker):
    started = time.monotonic()
    result = run_module(nccl_bench.main, {**SWEEP, "python": python, "nranks": nranks}, capsys)
    record_property(f"gloo_sweep_{nranks}_ranks_s", round(time.monotonic() - started, 2))

    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is False
    assert result["status"] == "ok"
    assert (result["engine"], result["nranks"], result["collective"]) == ("torch-gloo", nranks, "all_reduce")
    assert [row["size_bytes"] for row in result["results"]] == SIZES
    factor = 2 * (nranks - 1) / nranks
    assert factor == bus_bandwidth_factor("all_reduce", nranks)
    for row in result["results"]:
        assert row["count"] == row["size_bytes"] // 4
        assert (row["type"], row["redop"]) == ("float", "sum")
        assert row["out_of_place"] is None  # torch's all_reduce is in place only
        measured = row["in_place"]
        assert measured["wrong"] == 0
        assert measured["time_us"] > 0
        assert math.isclose(measured["algbw_gbps"], row["size_bytes"] / measured["time_us"] / 1e3, rel_tol=1e-5)
        assert math.isclose(measured["busbw_gbps"], measured["algbw_gbps"] * factor, rel_tol=1e-5)
    assert result["per_collective"]["all_reduce"]["out_of_bounds"] == 0
    # No default thresholds for gloo: it measures loopback TCP, not GPUs.
    assert result["thresholds"] == [] and result["violations"] == []
    assert result["findings"] == []
    assert result["recommended_env"] == {}
    assert processes_with(marker) == []


@pytest.mark.slow
def test_injected_wrong_values_become_a_finding(python, capsys, monkeypatch):
    monkeypatch.setenv(FAULT_ENV, "wrong:1")
    args = {**SWEEP, "python": python, "nranks": 2, "max_bytes": 1024, "iters": 2, "warmup": 0,
            "collectives": ["all_reduce", "reduce_scatter"]}
    result = run_module(nccl_bench.main, args, capsys)

    assert result["status"] == "ok"
    # Rank 1 corrupts element 0 of its input: element 0 of the sum is wrong on both ranks.
    assert all(row["in_place"]["wrong"] == 2 for row in result["results"])
    # reduce_scatter: element 0 belongs to rank 0's share only.
    scatter = result["per_collective"]["reduce_scatter"]["results"]
    assert all(row[p]["wrong"] == 1 for row in scatter for p in ("out_of_place", "in_place"))
    finding = result["findings"][0]
    assert (finding["id"], finding["severity"]) == ("nccl_wrong_values", "critical")
    assert finding["evidence"]["wrong"][0] == {"collective": "all_reduce", "size_bytes": 8, "in_place": 2}
    assert result["recommended_env"] is None


@pytest.mark.slow
def test_hang_is_killed_at_the_deadline_and_named(python, capsys, monkeypatch, marker):
    monkeypatch.setenv(FAULT_ENV, "hang:1:1024")
    timeout = 3.0  # the sweep's own clock: start-up (torch import, rendezvous) is not counted
    started = time.monotonic()
    result = run_module(nccl_bench.main, {**SWEEP, "python": python, "nranks": 2, "timeout": timeout}, capsys)
    elapsed = time.monotonic() - started

    assert result["status"] == "timeout"
    assert result["hung_at"] == {"collective": "all_reduce", "size_bytes": 1024}
    assert [row["size_bytes"] for row in result["results"]] == [8, 16, 32, 64, 128, 256, 512]
    finding = result["findings"][0]
    assert (finding["id"], finding["severity"]) == ("nccl_timeout", "critical")
    assert "all_reduce 1 KiB" in finding["summary"]
    assert finding["evidence"]["ranks_alive_at_deadline"] == [0, 1]
    # Killed on time: the sweep's clock ran from the end of start-up to the kill.
    assert result["elapsed_s"] - result["startup_s"] < timeout + 3
    assert elapsed < result["elapsed_s"] + 5
    assert processes_with(marker) == []


def test_nccl_backend_without_cuda_fails_clearly(python, capsys):
    result = run_module(nccl_bench.main, {"engine": "torch-nccl", "python": python}, capsys)

    assert result["failed"] is True
    assert result["msg"].startswith(f"no CUDA device visible to {python}: torch 2.13.0+cpu")
    assert "Traceback" not in result["msg"]


def test_auto_without_gpu_or_nccl_tests_names_what_is_missing(python, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    result = run_module(nccl_bench.main, {"python": python}, capsys)

    assert result["failed"] is True
    assert "no all_reduce_perf in PATH" in result["msg"]
    assert "sees no CUDA device" in result["msg"]
    assert "torch-gloo" in result["msg"]


def test_python_without_torch_fails_clearly(capsys, tmp_path):
    import sys

    result = run_module(nccl_bench.main, {"engine": "torch-nccl", "python": sys.executable}, capsys)

    assert result["failed"] is True
    assert f"{sys.executable} has no usable torch" in result["msg"]
    assert "serving model" in result["msg"] or "serves the model" in result["msg"]
