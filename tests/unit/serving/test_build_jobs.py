"""CUDA extension builds: the MAX_JOBS rule, the host reading under it, the module, and the role's build
wrapper and probe (roles/cuda_extension/files), which run on hosts with only the standard library."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import cuda_build_jobs
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.build_jobs import (
    GIB,
    JobsError,
    Resources,
    count_targets,
    parse_cfs,
    parse_cpu_max,
    parse_limit_bytes,
    parse_meminfo,
    parse_memory_stat,
    parse_proc_cgroup,
    plan_jobs,
    read_resources,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.paths import ROOT
from tests.unit.modules import run_module

FILES = ROOT / "roles" / "cuda_extension" / "files"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"cuda_extension_{name}", FILES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_wheel = load("build_wheel")
probe = load("probe")


# --------------------------------------------------------------------------------------------------
# The rule over host sizes: threads = max(1, min(4, targets)); headroom = max(4 GiB, 15 % of total);
# mem_jobs = floor((available - headroom) / (GiB per thread x threads)); cpu_jobs = max(1, cpus // threads);
# MAX_JOBS = min(cpu_jobs, mem_jobs, 32).

HOSTS = [
    # cpus, total GiB, available GiB, archs, GiB per thread, NVCC_THREADS, MAX_JOBS, limited by, why
    (2, 24, 22, ["12.0"], 5, 1, 2, "CPUs",
     "our CI machine, flash-attention: (22 - 4) / 5 = 3 jobs would fit, 2 cores run 2"),
    (16, 64, 58, ["12.0"], 5, 1, 9, "memory",
     "a workstation: headroom 9.6 GiB (15 %), (58 - 9.6) / 5 = 9.68 -> 9 jobs, below 16 cores"),
    (32, 128, 120, ["9.0a", "12.0"], 4, 2, 12, "memory",
     "two archs: 2 nvcc threads per job, (120 - 19.2) / (4 x 2) = 12.6 -> 12 jobs; 32 // 2 = 16 by CPUs"),
    (96, 512, 480, ["12.0"], 5, 1, 32, "the cap",
     "the 8x RTX PRO 6000 server: 80 jobs fit in memory and 96 by CPUs, the cap keeps 32"),
    (96, 512, 480, ["9.0a", "10.0a", "12.0"], 4, 3, 32, "CPUs and the cap",
     "sgl-kernel for three archs on it: 3 threads, 96 // 3 = 32 by CPUs, (480 - 76.8) / 12 = 33 by memory"),
    (128, 1536, 1400, ["8.0", "8.6", "9.0", "12.0+PTX"], 5, 4, 32, "CPUs and the cap",
     "128 cores / 1.5 TB, five targets: threads capped at 4, 128 // 4 = 32, (1400 - 230.4) / 20 = 58"),
    (128, 1536, 300, ["12.0"], 5, 1, 13, "memory",
     "the same host, busy: (300 - 230.4) / 5 = 13.9 -> 13 jobs, whatever the 128 cores say"),
    (8, 16, 15, ["12.0"], 5, 1, 2, "memory",
     "a small VM or container: (15 - 4) / 5 = 2.2 -> 2 jobs of 8 CPUs"),
    (2, 24, 22, ["9.0a", "10.0a", "12.0"], 1, 3, 1, "CPUs",
     "three archs on 2 cores: 3 threads per nvcc, 2 // 3 = 0 -> at least 1 job"),
]


@pytest.mark.parametrize(("cpus", "total", "available", "archs", "per_thread", "threads", "jobs", "bound", "why"),
                         HOSTS, ids=[f"{row[0]}cpu-{row[1]}GiB-{len(row[3])}arch-{row[4]}GiB" for row in HOSTS])
def test_rule_over_host_sizes(cpus: int, total: float, available: float, archs: list[str], per_thread: float,
                              threads: int, jobs: int, bound: str, why: str) -> None:
    plan = plan_jobs(cpus=cpus, mem_total_gib=total, mem_available_gib=available, targets=count_targets(archs),
                     mem_per_thread_gib=per_thread)
    assert (plan.nvcc_threads, plan.max_jobs) == (threads, jobs), why
    assert plan.explanation.startswith(f"MAX_JOBS={jobs}, NVCC_THREADS={threads}: ")
    assert plan.explanation.endswith(f"limited by {bound}")
    assert not plan.forced
    # Whatever limited it, the plan fits: the jobs' threads in the CPUs and their memory beside the headroom.
    assert plan.max_jobs * per_thread * threads <= available - max(4, 0.15 * total)


def test_targets_count_ptx_as_one_more() -> None:
    assert count_targets(["12.0"]) == 1
    assert count_targets(["9.0a", "12.0+PTX"]) == 3
    assert count_targets(["", " "]) == 0


def test_threads_follow_the_archs_up_to_the_cap() -> None:
    base = {"cpus": 64, "mem_total_gib": 512, "mem_available_gib": 500, "mem_per_thread_gib": 1}
    assert [plan_jobs(targets=n, **base).nvcc_threads for n in range(7)] == [1, 1, 2, 3, 4, 4, 4]
    assert plan_jobs(targets=6, nvcc_threads_cap=8, **base).nvcc_threads == 6


def test_headroom_is_the_larger_of_floor_and_fraction() -> None:
    small = plan_jobs(cpus=64, mem_total_gib=16, mem_available_gib=16, targets=1, mem_per_thread_gib=1)
    large = plan_jobs(cpus=64, mem_total_gib=400, mem_available_gib=400, targets=1, mem_per_thread_gib=1)
    assert small.headroom_gib == 4  # 15 % of 16 GiB is 2.4: the floor wins
    assert large.headroom_gib == pytest.approx(60)
    assert (small.mem_jobs, large.mem_jobs) == (12, 340)


@pytest.mark.parametrize(("cpus", "total", "available", "per_thread", "needed", "found"), [
    (2, 8, 6, 5, "9.0", "6.0"),  # 5 GiB for the job + 4 GiB headroom
    (128, 1536, 200, 5, "235.4", "200.0"),  # available below the 15 % headroom of 1.5 TB
])
def test_too_little_memory_says_what_it_needs_and_found(cpus: int, total: float, available: float,
                                                        per_thread: float, needed: str, found: str) -> None:
    with pytest.raises(JobsError) as caught:
        plan_jobs(cpus=cpus, mem_total_gib=total, mem_available_gib=available, targets=1,
                  mem_per_thread_gib=per_thread)
    message = str(caught.value)
    assert f"one job needs {needed} GiB available" in message
    assert f"found {found} GiB available" in message
    assert "allow low memory" in message


def test_allow_low_memory_forces_one_job() -> None:
    plan = plan_jobs(cpus=2, mem_total_gib=8, mem_available_gib=6, targets=1, mem_per_thread_gib=5,
                     allow_low_memory=True)
    assert (plan.max_jobs, plan.nvcc_threads, plan.mem_jobs, plan.forced) == (1, 1, 0, True)
    assert "forced" in plan.explanation


@pytest.mark.parametrize(("field", "value"), [
    ("cpus", 0), ("cpus", 2.5), ("cpus", True), ("mem_total_gib", -1.0), ("mem_available_gib", math.nan),
    ("targets", -1), ("mem_per_thread_gib", 0), ("headroom_fraction", 1.0), ("nvcc_threads_cap", 0),
    ("max_jobs_cap", 0), ("mem_total_gib", "64"),
])
def test_inputs_are_checked(field: str, value: object) -> None:
    args = {"cpus": 8, "mem_total_gib": 64.0, "mem_available_gib": 60.0, "targets": 1, "mem_per_thread_gib": 4.0,
            field: value}
    with pytest.raises(JobsError, match=field):
        plan_jobs(**args)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(cpus=st.integers(1, 512), total=st.floats(0.25, 4096), share=st.floats(0, 1), targets=st.integers(0, 10),
       per_thread=st.floats(0.01, 64), headroom_min=st.floats(0, 64), headroom_fraction=st.floats(0, 0.95),
       threads_cap=st.integers(1, 16), jobs_cap=st.integers(1, 128))
def test_plan_properties(cpus: int, total: float, share: float, targets: int, per_thread: float,
                         headroom_min: float, headroom_fraction: float, threads_cap: int, jobs_cap: int) -> None:
    available = total * share
    headroom = max(headroom_min, headroom_fraction * total)
    threads = max(1, min(threads_cap, targets))
    try:
        plan = plan_jobs(cpus=cpus, mem_total_gib=total, mem_available_gib=available, targets=targets,
                         mem_per_thread_gib=per_thread, headroom_min_gib=headroom_min,
                         headroom_fraction=headroom_fraction, nvcc_threads_cap=threads_cap, max_jobs_cap=jobs_cap)
    except JobsError as err:
        # Only when not even one job fits, and the message says so in GiB.
        assert available - headroom < per_thread * threads * (1 + 1e-9)
        assert "GiB" in str(err)
        return
    assert 1 <= plan.max_jobs <= cpus
    assert plan.max_jobs <= jobs_cap
    assert 1 <= plan.nvcc_threads <= threads_cap
    if plan.nvcc_threads <= cpus:
        assert plan.max_jobs * plan.nvcc_threads <= cpus
    # Never more memory than what is left above the headroom.
    assert plan.max_jobs * plan.gib_per_job <= available - headroom
    assert plan.usable_gib == available - headroom


# --------------------------------------------------------------------------------------------------
# Reading the host: /proc/meminfo, affinity, cgroup v2 and v1 limits, from fake trees.

MEMINFO = "MemTotal:       65536000 kB\nMemFree:         1000000 kB\nMemAvailable:   60000000 kB\nBuffers: 1 kB\n"
TOTAL_GIB = 65536000 * 1024 / GIB
AVAILABLE_GIB = 60000000 * 1024 / GIB


def tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def resources(root: Path, cpus: int = 16) -> Resources:
    return read_resources(root, affinity=lambda: cpus)


def test_plain_host_reads_meminfo_and_affinity(tmp_path: Path) -> None:
    found = resources(tree(tmp_path, {"proc/meminfo": MEMINFO}), cpus=12)
    assert (found.cpus, found.mem_total_gib, found.mem_available_gib) == (12, TOTAL_GIB, AVAILABLE_GIB)
    assert found.limits == ("/proc/meminfo: 62.5 GiB total, 57.2 GiB available", "CPU affinity: 12 CPUs")


def test_cgroup_v2_container_limits_memory_and_cpu(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "proc/meminfo": MEMINFO,
        "proc/self/cgroup": "0::/\n",
        "sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n",
        "sys/fs/cgroup/memory.max": f"{8 * GIB}\n",
        "sys/fs/cgroup/memory.current": f"{3 * GIB}\n",
        # The inactive page cache is reclaimed before the OOM killer runs: it does not count as used.
        "sys/fs/cgroup/memory.stat": f"anon {2 * GIB}\nfile {GIB}\ninactive_file {GIB}\n",
        "sys/fs/cgroup/cpu.max": "150000 100000\n",
    })
    found = resources(root)
    assert found.cpus == 1  # a quota of 1.5 CPUs sustains one compiler
    assert found.mem_total_gib == 8
    assert found.mem_available_gib == 6
    assert "cgroup v2 memory.max at /sys/fs/cgroup: limit 8.0 GiB, 6.0 GiB free" in found.limits
    assert "cgroup v2 cpu.max at /sys/fs/cgroup: 1.5 CPUs" in found.limits


def test_cgroup_v2_slice_above_the_service_limits_it(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "proc/meminfo": MEMINFO,
        "proc/self/cgroup": "0::/build.slice/flash-attn.service\n",
        "sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
        "sys/fs/cgroup/build.slice/memory.max": f"{16 * GIB}\n",
        "sys/fs/cgroup/build.slice/memory.current": f"{4 * GIB}\n",
        "sys/fs/cgroup/build.slice/cpu.max": "800000 100000\n",
        "sys/fs/cgroup/build.slice/flash-attn.service/memory.max": "max\n",
        "sys/fs/cgroup/build.slice/flash-attn.service/memory.current": f"{GIB}\n",
        "sys/fs/cgroup/build.slice/flash-attn.service/cpu.max": "max 100000\n",
    })
    found = resources(root, cpus=64)
    assert (found.cpus, found.mem_total_gib, found.mem_available_gib) == (8, 16, 12)


def test_cgroup_v2_path_of_the_host_not_under_the_mount(tmp_path: Path) -> None:
    # In a container the mount is the container's own cgroup, /proc/self/cgroup names the host's path.
    root = tree(tmp_path, {
        "proc/meminfo": MEMINFO,
        "proc/self/cgroup": "0::/machine.slice/libpod-4f2a.scope/container\n",
        "sys/fs/cgroup/cgroup.controllers": "memory\n",
        "sys/fs/cgroup/memory.max": f"{4 * GIB}\n",
        "sys/fs/cgroup/memory.current": "0\n",
    })
    assert resources(root).mem_total_gib == 4


def test_cgroup_v1_docker_limits_memory_and_cpu(tmp_path: Path) -> None:
    unlimited = "9223372036854771712\n"  # what cgroup v1 writes for no limit
    root = tree(tmp_path, {
        "proc/meminfo": MEMINFO,
        "proc/self/cgroup": "12:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n",
        "sys/fs/cgroup/memory/memory.limit_in_bytes": unlimited,
        "sys/fs/cgroup/memory/memory.usage_in_bytes": f"{40 * GIB}\n",
        "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": f"{10 * GIB}\n",
        "sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": f"{3 * GIB}\n",
        "sys/fs/cgroup/memory/docker/abc/memory.stat": f"cache {2 * GIB}\ntotal_inactive_file {GIB}\n",
        "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "400000\n",
        "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
    })
    found = resources(root)
    assert (found.cpus, found.mem_total_gib, found.mem_available_gib) == (4, 10, 8)


def test_cgroup_v1_without_limits_is_the_plain_host(tmp_path: Path) -> None:
    # What our CI machines show: a v1 memory cgroup with "no limit", an empty unified hierarchy (hybrid).
    root = tree(tmp_path, {
        "proc/meminfo": MEMINFO,
        "proc/self/cgroup": "4:memory:/process_api/ddda\n1:cpu:/\n0::/\n",
        "sys/fs/cgroup/unified/cgroup.controllers": "",
        "sys/fs/cgroup/memory/process_api/ddda/memory.limit_in_bytes": "9223372036854771712\n",
        "sys/fs/cgroup/memory/process_api/ddda/memory.usage_in_bytes": "14409728\n",
        "sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n",
        "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
    })
    found = resources(root, cpus=2)
    assert (found.cpus, found.mem_total_gib, found.mem_available_gib) == (2, TOTAL_GIB, AVAILABLE_GIB)


def test_this_machine_reads_cleanly() -> None:
    found = read_resources()
    assert found.cpus >= 1
    assert 0 < found.mem_available_gib <= found.mem_total_gib


@pytest.mark.parametrize(("files", "expected"), [
    ({"proc/meminfo": "MemTotal: 1000 kB\nMemFree: 10 kB\n"}, "proc/meminfo: expected lines 'MemTotal"),
    ({"proc/meminfo": "MemTotal: lots\nMemAvailable: 1 kB\n"}, "found no MemTotal"),
    ({"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/cgroup.controllers": "memory", "sys/fs/cgroup/memory.max": "lots",
      "sys/fs/cgroup/memory.current": "1"}, "/sys/fs/cgroup/memory.max: expected a number of bytes or 'max'"),
    ({"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/cgroup.controllers": "memory", "sys/fs/cgroup/memory.max": "10",
      "sys/fs/cgroup/memory.current": "-3"}, "/sys/fs/cgroup/memory.current: expected a number of bytes"),
    ({"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/cgroup.controllers": "memory", "sys/fs/cgroup/memory.max": "10",
      "sys/fs/cgroup/memory.current": "1", "sys/fs/cgroup/memory.stat": "inactive_file one\n"},
     "/sys/fs/cgroup/memory.stat: expected lines '<name> <number>'"),
    ({"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/cgroup.controllers": "cpu", "sys/fs/cgroup/cpu.max": "fast"},
     "/sys/fs/cgroup/cpu.max: expected '<quota> <period>'"),
    ({"proc/self/cgroup": "1:cpu:/\n", "sys/fs/cgroup/cpu/cpu.cfs_quota_us": "x",
      "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000"}, "cpu.cfs_quota_us: expected cpu.cfs_quota_us as a number"),
])
def test_garbled_files_name_the_file_and_the_expectation(tmp_path: Path, files: dict[str, str],
                                                        expected: str) -> None:
    root = tree(tmp_path, {"proc/meminfo": MEMINFO, **files})
    with pytest.raises(JobsError, match="expected") as caught:
        resources(root)
    assert expected in str(caught.value)


def test_no_meminfo_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(JobsError, match="proc/meminfo to read the host's memory; found no such file"):
        resources(tmp_path)


@given(st.text())
def test_parsers_raise_only_their_own_error(text: str) -> None:
    for parse in (lambda t: parse_meminfo(t), lambda t: parse_limit_bytes(t, "f"), lambda t: parse_cpu_max(t, "f"),
                  lambda t: parse_memory_stat(t, "f"), lambda t: parse_cfs(t, t, "f"), parse_proc_cgroup):
        with contextlib.suppress(JobsError):
            parse(text)


@pytest.mark.parametrize("text", ["\u00b2", "1\u00b2 100000", "max \u0663", "\u0663\u0663"])
def test_digits_of_other_scripts_are_garbled(text: str) -> None:
    # str.isdigit() accepts them and int() fails on some: the kernel writes ASCII only.
    for parse in (lambda t: parse_limit_bytes(t, "f"), lambda t: parse_cpu_max(t, "f")):
        with pytest.raises(JobsError):
            parse(text)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(maximum=st.text(max_size=30), current=st.text(max_size=30), cpu_max=st.text(max_size=30),
       cgroup=st.text(max_size=60))
def test_any_cgroup_content_reads_or_raises_its_own_error(maximum: str, current: str, cpu_max: str,
                                                           cgroup: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = tree(Path(tmp), {"proc/meminfo": MEMINFO, "proc/self/cgroup": cgroup,
                                "sys/fs/cgroup/cgroup.controllers": "cpu memory",
                                "sys/fs/cgroup/memory.max": maximum, "sys/fs/cgroup/memory.current": current,
                                "sys/fs/cgroup/cpu.max": cpu_max})
        try:
            found = resources(root)
        except JobsError:
            return
        assert found.cpus >= 1
        assert found.mem_available_gib >= 0


# --------------------------------------------------------------------------------------------------
# The module


@pytest.fixture
def ci_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_build_jobs, "read_resources",
                        lambda: Resources(2, 23.5, 22.0, ("/proc/meminfo: 23.5 GiB total, 22.0 GiB available",)))


@pytest.fixture
def tiny_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_build_jobs, "read_resources", lambda: Resources(2, 8.0, 6.0, ()))


@pytest.mark.parametrize("check_mode", [False, True])
def test_module_plans_and_changes_nothing(ci_host: None, capsys: pytest.CaptureFixture[str],
                                          check_mode: bool) -> None:
    result = run_module(cuda_build_jobs.main, {"archs": ["12.0"], "mem_per_thread_gib": 5}, capsys,
                        check_mode=check_mode)
    assert result["changed"] is False
    assert (result["max_jobs"], result["nvcc_threads"], result["computed_max_jobs"]) == (2, 1, 2)
    assert result["overridden"] is False
    assert result["inputs"]["cpus"] == 2
    assert result["inputs"]["targets"] == 1
    assert result["plan"]["mem_jobs"] == 3
    assert result["explanation"].startswith("MAX_JOBS=2, NVCC_THREADS=1")


def test_module_override_wins_and_the_rule_is_still_reported(ci_host: None,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(cuda_build_jobs.main, {"archs": ["9.0a", "12.0"], "mem_per_thread_gib": 4, "max_jobs": 6},
                        capsys)
    assert (result["max_jobs"], result["nvcc_threads"], result["computed_max_jobs"]) == (6, 2, 1)
    assert result["overridden"] is True
    assert "set explicitly; the rule gives 1" in result["explanation"]


def test_module_fails_on_a_host_too_small(tiny_host: None, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(cuda_build_jobs.main, {"archs": ["12.0"], "mem_per_thread_gib": 5}, capsys)
    assert result["failed"] is True
    assert "one job needs 9.0 GiB available" in result["msg"]
    assert "found 6.0 GiB available" in result["msg"]
    assert result["inputs"]["mem_available_gib"] == 6.0


def test_module_override_on_a_host_too_small_reports_the_refusal(tiny_host: None,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(cuda_build_jobs.main, {"archs": ["12.0"], "mem_per_thread_gib": 5, "max_jobs": 1}, capsys)
    assert "failed" not in result
    assert (result["max_jobs"], result["computed_max_jobs"], result["plan"]) == (1, None, None)
    assert "the rule would refuse: not enough memory" in result["explanation"]


def test_module_allow_low_memory(tiny_host: None, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(cuda_build_jobs.main, {"archs": ["12.0"], "mem_per_thread_gib": 5, "allow_low_memory": True},
                        capsys)
    assert (result["max_jobs"], result["forced"]) == (1, True)


@pytest.mark.parametrize(("args", "expected"), [
    ({"archs": [], "mem_per_thread_gib": 5}, "expected at least one architecture"),
    ({"archs": ["12.0"], "mem_per_thread_gib": 5, "max_jobs": -2}, "expected max_jobs of 0"),
    ({"archs": ["12.0"], "mem_per_thread_gib": 0}, "mem_per_thread_gib: expected a finite value"),
])
def test_module_refuses_bad_options(ci_host: None, capsys: pytest.CaptureFixture[str], args: dict,
                                    expected: str) -> None:
    result = run_module(cuda_build_jobs.main, args, capsys)
    assert result["failed"] is True
    assert expected in result["msg"]


def test_module_reads_this_machine(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(cuda_build_jobs.main, {"archs": ["12.0"], "mem_per_thread_gib": 0.5}, capsys)
    assert result["max_jobs"] >= 1
    assert result["inputs"]["limits"][0].startswith("/proc/meminfo: ")


# --------------------------------------------------------------------------------------------------
# The build wrapper: what a build directory says, and real builds with a stand-in for pip.

FAKE_PIP = '''
import json, os, pathlib, subprocess, sys, time
args = sys.argv[1:]
wheel_dir = pathlib.Path(args[args.index("--wheel-dir") + 1])
print("fake pip", " ".join(args))
print("MAX_JOBS=" + os.environ.get("MAX_JOBS", ""), "PATH=" + os.environ["PATH"], "cwd=" + os.getcwd(), flush=True)
if os.environ.get("FAKE_PIP_ECHO"):
    print("echo:", os.environ["FAKE_PIP_ECHO"], flush=True)
if os.environ.get("FAKE_PIP_ENV_OUT"):
    pathlib.Path(os.environ["FAKE_PIP_ENV_OUT"]).write_text(json.dumps(dict(os.environ)))
mode = os.environ["FAKE_PIP_MODE"]
if mode == "slow":
    time.sleep(float(os.environ.get("FAKE_PIP_SLEEP", "3")))
if mode in ("ok", "slow"):
    (wheel_dir / "demo-1.0-cp311-cp311-linux_x86_64.whl").write_bytes(b"PK")
elif mode == "oom":
    print("c++: fatal error: Killed signal terminated program cc1plus")
    print("error: command '/usr/local/cuda/bin/nvcc' failed with exit code 1")
    sys.exit(1)
elif mode == "hang":
    child = subprocess.Popen(["sleep", "300"])
    pathlib.Path(os.environ["FAKE_PIP_CHILD"]).write_text(str(child.pid))
    time.sleep(300)
'''


def record(pid: int, **extra: object) -> dict:
    return {"pid": pid, "pgid": pid, "boot_id": build_wheel.boot_id(), "start_ticks": build_wheel.start_ticks(pid),
            "started": time.time() - 65, "max_jobs": 4, "nvcc_threads": 1, **extra}


def write(path: Path, data: object) -> None:
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_state_of_an_empty_directory_is_idle(tmp_path: Path) -> None:
    state = build_wheel.read_state(tmp_path)
    assert (state["state"], state["tail"], state["errors"], state["log_exists"]) == ("idle", [], [], False)


def test_state_of_a_live_build_is_running_with_its_tail(tmp_path: Path) -> None:
    write(tmp_path / "build.pid", record(os.getpid()))
    write(tmp_path / "build.log", "".join(f"line {n}\n" for n in range(30)))
    state = build_wheel.read_state(tmp_path, tail=5)
    assert state["state"] == "running"
    assert 64 <= state["elapsed_s"] <= 70
    assert state["tail"] == [f"line {n}" for n in range(25, 30)]
    assert len(state["tail_long"]) == 20
    assert (state["max_jobs"], state["nvcc_threads"]) == (4, 1)


@pytest.mark.parametrize("change", [
    {"pid": "dead"},  # the process is gone
    {"start_ticks": "1"},  # the pid was reused by a later process
    {"boot_id": "another-boot"},  # the host rebooted since
])
def test_state_of_a_build_whose_process_is_gone_is_interrupted(tmp_path: Path, change: dict) -> None:
    data = record(os.getpid())
    data.update({"pid": dead_pid()} if change.get("pid") == "dead" else change)
    write(tmp_path / "build.pid", data)
    state = build_wheel.read_state(tmp_path)
    assert state["state"] == "interrupted"
    assert f"build.pid names process {data['pid']}, which is gone" in state["why"]


def test_leftover_temporary_directory_is_an_interrupted_build(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    state = build_wheel.read_state(tmp_path)
    assert state["state"] == "interrupted"
    assert "is left over and no build is running" in state["why"]


def test_finished_builds(tmp_path: Path) -> None:
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "demo-1.0.whl").write_bytes(b"PK")
    write(tmp_path / "build.status", {"rc": 0, "wheel": "demo-1.0.whl", "seconds": 12.5, "started": 1.0,
                                      "max_jobs": 2, "nvcc_threads": 1})
    state = build_wheel.read_state(tmp_path)
    assert (state["state"], state["wheel"], state["elapsed_s"], state["max_jobs"]) == ("succeeded", "demo-1.0.whl",
                                                                                     12.5, 2)
    (tmp_path / "dist" / "demo-1.0.whl").unlink()
    assert build_wheel.read_state(tmp_path)["state"] == "idle"  # the wheel is gone: nothing to install


@pytest.mark.parametrize(("rc", "log", "killed"), [
    (1, "c++: fatal error: Killed signal terminated program cc1plus\n", True),
    (1, "nvcc error   : 'cicc' died due to signal 9 (Kill signal)\n", True),
    (1, "error: command '/usr/local/cuda/bin/nvcc' failed with exit code 137\n", True),
    (-9, "compiling\n", True),
    (1, "kernel.cu(3): error: identifier \"x\" is undefined\n", False),
])
def test_failed_builds_and_the_oom_killer(tmp_path: Path, rc: int, log: str, killed: bool) -> None:
    write(tmp_path / "build.status", {"rc": rc, "wheel": None, "seconds": 3.0, "started": 1.0})
    write(tmp_path / "build.log", "building\n" + log + "pip: done\n")
    state = build_wheel.read_state(tmp_path)
    assert state["state"] == "failed"
    assert state["killed"] is killed
    assert state["errors"] == ([log.strip()] if "rror" in log or "Killed" in log else [])


def test_clean_keeps_the_log_of_an_interrupted_build(tmp_path: Path) -> None:
    write(tmp_path / "build.pid", record(dead_pid()))
    write(tmp_path / "build.log", "nvcc -c kernel.cu\n")
    (tmp_path / "tmp").mkdir()
    (tmp_path / "dist").mkdir()
    cleaned = build_wheel.clean(tmp_path)
    assert cleaned["was"] == "interrupted"
    assert cleaned["removed"] == ["build.log (kept as build.log.interrupted)", "build.pid", "tmp/"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["build.log.interrupted", "dist"]
    assert build_wheel.read_state(tmp_path)["state"] == "idle"


def test_clean_refuses_a_running_build(tmp_path: Path) -> None:
    write(tmp_path / "build.pid", record(os.getpid()))
    with pytest.raises(build_wheel.BuildError, match="a build is running"):
        build_wheel.clean(tmp_path)


def env_file(path: Path, env: dict, mode: int = 0o600) -> Path:
    """The build's environment as the role hands it over: a file only its owner reads."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as handle:
        json.dump(env, handle)
    os.chmod(path, mode)
    return path


def wrapper_argv(workdir: Path, source: Path, mode: str, *extra: str, subdir: str = "",
                 env: dict | None = None, name: str = "build.env.json") -> list[str]:
    fake_pip = workdir.parent / "fake_pip.py"
    fake_pip.write_text(FAKE_PIP)
    env_path = env_file(workdir.parent / name, {"FAKE_PIP_MODE": mode, "MAX_JOBS": "3", **(env or {})})
    return [sys.executable, str(FILES / "build_wheel.py"), "build", "--workdir", str(workdir), "--source",
            str(source), "--subdir", subdir, "--pip", json.dumps([sys.executable, str(fake_pip)]),
            "--env-file", str(env_path), "--prepend-path", "/opt/cuda/bin", "--max-jobs", "3", "--nvcc-threads", "1",
            *extra]


def run_wrapper(workdir: Path, source: Path, mode: str, *extra: str, subdir: str = "",
                env: dict | None = None) -> subprocess.CompletedProcess:
    argv = wrapper_argv(workdir, source, mode, *extra, subdir=subdir, env=env)
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    # An unpacked archive: one top directory, the extension in a subdirectory of it.
    extension = tmp_path / "src" / "repo-1.0" / "kernels"
    extension.mkdir(parents=True)
    (extension / "setup.py").write_text("")
    return tmp_path / "src"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def test_build_moves_the_wheel_into_place(workdir: Path, source: Path) -> None:
    proc = run_wrapper(workdir, source, "ok", "--", "--cert", "/etc/ca.pem", subdir="kernels")
    assert proc.returncode == 0, proc.stderr
    assert sorted(path.name for path in workdir.iterdir()) == ["build.log", "build.status", "dist"]
    assert [path.name for path in (workdir / "dist").iterdir()] == ["demo-1.0-cp311-cp311-linux_x86_64.whl"]
    status = json.loads((workdir / "build.status").read_text())
    assert (status["rc"], status["wheel"], status["timed_out"], status["max_jobs"]) == (
        0, "demo-1.0-cp311-cp311-linux_x86_64.whl", False, 3)
    log = (workdir / "build.log").read_text()
    assert "wheel --no-deps --no-build-isolation --verbose --wheel-dir" in log
    assert f"--cert /etc/ca.pem {source / 'repo-1.0' / 'kernels'}" in log
    assert "MAX_JOBS=3 PATH=/opt/cuda/bin:" in log
    assert f"cwd={source / 'repo-1.0' / 'kernels'}" in log
    state = build_wheel.read_state(workdir)
    assert (state["state"], state["wheel"]) == ("succeeded", "demo-1.0-cp311-cp311-linux_x86_64.whl")


def test_failed_build_writes_its_status_and_no_wheel(workdir: Path, source: Path) -> None:
    proc = run_wrapper(workdir, source, "oom", subdir="kernels")
    assert proc.returncode == 1
    state = build_wheel.read_state(workdir)
    assert (state["state"], state["killed"], state["status"]["rc"]) == ("failed", True, 1)
    assert "c++: fatal error: Killed signal terminated program cc1plus" in state["errors"]
    assert not (workdir / "dist").exists()
    assert not (workdir / "tmp").exists()


def test_build_without_a_setup_file_says_where_it_looked(workdir: Path, source: Path) -> None:
    proc = run_wrapper(workdir, source, "ok", subdir="nowhere")
    assert proc.returncode == 1
    state = build_wheel.read_state(workdir)
    assert state["status"]["rc"] == 2
    assert any("expected setup.py or pyproject.toml in" in line for line in state["errors"])


def test_build_past_its_timeout_is_stopped_with_its_children(workdir: Path, source: Path) -> None:
    child_file = workdir.parent / "child.pid"
    started = time.monotonic()
    proc = run_wrapper(workdir, source, "hang", "--timeout", "2", subdir="kernels",
                       env={"FAKE_PIP_CHILD": str(child_file)})
    assert time.monotonic() - started < 60
    assert proc.returncode == 1
    status = json.loads((workdir / "build.status").read_text())
    assert status["timed_out"] is True and status["rc"] != 0
    child = int(child_file.read_text())
    for _ in range(50):  # the killed child may take a moment to be reaped by init
        if not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split(")")[-1][:3]:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the compiler stand-in (pid {child}) outlived the timeout")
    assert "no end after 2 s; stopping the build" in (workdir / "build.log").read_text()


def test_second_build_refused_while_one_runs(workdir: Path, source: Path) -> None:
    write(workdir / "build.pid", record(os.getpid()))
    proc = run_wrapper(workdir, source, "ok", subdir="kernels")
    assert proc.returncode == build_wheel.EXIT_RUNNING
    assert "a build is already running" in proc.stderr


# Secrets of the build's environment: proxies and index URLs with credentials, tokens.
SECRETS = {
    "PIP_INDEX_URL": "https://builder:idx-s3cret@pypi.example.com/simple",
    "HTTPS_PROXY": "http://proxyuser:proxy-s3cret@proxy.example.com:3128",
    "HF_TOKEN": "hf_tok3n-s3cret",
    "PIP_EXTRA_INDEX_URL": "https://pypi.example.com/simple?token=query-s3cret&x=1",
    "NETRC_PASSWORD": "pw-s3cret",
}
SECRET_VALUES = ("idx-s3cret", "proxy-s3cret", "hf_tok3n-s3cret", "query-s3cret", "pw-s3cret", "arg-s3cret")


def test_secrets_reach_pip_but_no_file_or_output(workdir: Path, source: Path, tmp_path: Path) -> None:
    seen = tmp_path / "pip-env.json"
    echo = "token hf_tok3n-s3cret from https://builder:idx-s3cret@pypi.example.com/simple"
    proc = run_wrapper(workdir, source, "ok", "--", "--extra-index-url=https://u:arg-s3cret@mirror.example.com/simple",
                       subdir="kernels", env={**SECRETS, "FAKE_PIP_ECHO": echo, "FAKE_PIP_ENV_OUT": str(seen)})
    assert proc.returncode == 0, proc.stderr
    # pip got every value as given: masking is for what is written and shown, not for the build.
    assert {key: json.loads(seen.read_text())[key] for key in SECRETS} == SECRETS
    log = (workdir / "build.log").read_text()
    state = subprocess.run([sys.executable, str(FILES / "build_wheel.py"), "state", "--workdir", str(workdir),
                            "--tail", "50"], capture_output=True, text=True, check=True).stdout
    for shown in (log, state, proc.stdout, proc.stderr, (workdir / "build.status").read_text()):
        assert not [value for value in SECRET_VALUES if value in shown], shown
    # What is not secret stays readable: the index's host, the proxy's address, the variable names.
    assert "https://***@pypi.example.com/simple" in log and "http://***@proxy.example.com:3128" in log
    assert "?token=***&x=1" in log and '"HF_TOKEN": "***"' in log and "echo: token *** from https://***@" in log
    assert "--extra-index-url=https://***@mirror.example.com/simple" in log
    assert not (tmp_path / "build.env.json").exists()  # read once, then removed: no secret left at rest


def test_the_build_log_is_created_private(workdir: Path, source: Path) -> None:
    old = workdir / "build.log"
    old.write_text("an older build's log, world-readable\n")
    old.chmod(0o644)
    proc = run_wrapper(workdir, source, "ok", subdir="kernels")
    assert proc.returncode == 0, proc.stderr
    assert (workdir / "build.log").stat().st_mode & 0o777 == 0o600
    assert "an older build's log" not in (workdir / "build.log").read_text()


def test_the_log_is_never_readable_by_others_while_it_is_written(workdir: Path, source: Path) -> None:
    """Created 0600 whatever the umask, not made private after: read its mode while pip runs."""
    argv = wrapper_argv(workdir, source, "slow", subdir="kernels", env={"FAKE_PIP_SLEEP": "2"})
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: os.umask(0))
    modes = set()
    while proc.poll() is None:
        with contextlib.suppress(FileNotFoundError):
            modes.add((workdir / "build.log").stat().st_mode & 0o777)
        time.sleep(0.01)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert modes == {0o600}


def test_an_environment_file_others_can_read_is_refused(workdir: Path, source: Path, tmp_path: Path) -> None:
    argv = wrapper_argv(workdir, source, "ok", subdir="kernels", env=SECRETS)
    (tmp_path / "build.env.json").chmod(0o644)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1
    state = build_wheel.read_state(workdir)
    assert state["state"] == "failed" and state["status"]["rc"] == 2
    assert any("expected the environment file" in line and "mode 0600" in line and "found mode 0644" in line
               for line in state["errors"]), state["errors"]
    assert not [value for value in SECRET_VALUES if value in (workdir / "build.log").read_text()]


def test_the_environment_is_never_on_the_command_line(workdir: Path, source: Path) -> None:
    argv = [sys.executable, str(FILES / "build_wheel.py"), "build", "--workdir", str(workdir), "--source",
            str(source), "--pip", "[]", "--env", json.dumps(SECRETS)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "--env-file" in proc.stderr
    assert not (workdir / "build.log").exists()


def test_the_role_hands_the_environment_over_in_a_private_file() -> None:
    tasks = (ROOT / "roles" / "cuda_extension" / "tasks" / "build.yml").read_text()
    assert "'--env'," not in tasks and "'--env-file'," in tasks
    import yaml

    listed = [inner for task in yaml.safe_load(tasks) for inner in [task, *task.get("block", [])]]
    handed = next(task for task in listed if task.get("name", "").startswith("Hand the build its environment"))
    assert handed["no_log"] is True and handed["ansible.builtin.copy"]["mode"] == "0600"


def test_a_start_while_another_holds_the_directory_is_refused(workdir: Path, source: Path) -> None:
    """The moment between a build's start and its pid file: the lock, not the pid file, keeps the second out."""
    import fcntl

    held = os.open(workdir, os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        proc = run_wrapper(workdir, source, "ok", subdir="kernels")
        assert proc.returncode == build_wheel.EXIT_RUNNING, proc.stderr
        assert f"another build is starting or running in {workdir}" in proc.stderr
        with pytest.raises(build_wheel.BuildError, match="another build is starting or running"):
            build_wheel.clean(workdir)
    finally:
        os.close(held)
    assert sorted(p.name for p in workdir.iterdir()) == []


def test_two_builds_started_at_once_build_once(workdir: Path, source: Path) -> None:
    first = wrapper_argv(workdir, source, "slow", subdir="kernels", env={"FAKE_PIP_SLEEP": "2"}, name="a.json")
    second = wrapper_argv(workdir, source, "slow", subdir="kernels", env={"FAKE_PIP_SLEEP": "2"}, name="b.json")
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for argv in (first, second)]
    results = sorted((proc.wait(timeout=120), proc.stderr.read()) for proc in procs)
    assert [rc for rc, _ in results] == [0, build_wheel.EXIT_RUNNING], results
    assert "another build is starting or running" in results[1][1] or "already running" in results[1][1]
    assert build_wheel.read_state(workdir)["state"] == "succeeded"


# --------------------------------------------------------------------------------------------------
# The probe: the cache key and the CUDA release it names


@pytest.mark.parametrize(("arch", "tag"), [("12.0", "120"), ("9.0a", "90a"), ("8.6+PTX", "86ptx"),
                                           ("10.0f", "100f")])
def test_arch_tags(arch: str, tag: str) -> None:
    assert probe.arch_tag(arch) == tag


def test_key_directory_names() -> None:
    assert probe.key_dir({"package": "gpuhost-cuda-ext", "version": "0.1.0", "torch": "none", "cuda": "13.1",
                          "python": "cp311", "archs": ["12.0"]}) == \
        "gpuhost-cuda-ext-0.1.0-torchnone-cu13.1-cp311-sm120"
    assert probe.key_dir({"package": "flash-attn", "version": "2.8.3", "torch": "2.9.1+cu128", "cuda": "12.8",
                          "python": "cp312", "archs": ["9.0a", "12.0"]}) == \
        "flash-attn-2.8.3-torch2.9.1+cu128-cu12.8-cp312-sm90a_120"
    assert probe.key_dir({"package": "x", "version": "1/../2", "torch": "none", "cuda": "12.8", "python": "cp311",
                          "archs": ["12.0"]}) == "x-1_.._2-torchnone-cu12.8-cp311-sm120"
    assert probe.normalize("Flash_Attn") == "flash-attn"


@pytest.mark.parametrize(("text", "cuda"), [
    ("__version__ = '2.9.1+cu128'\ndebug = False\ncuda: Optional[str] = '12.8'\ngit_version = 'abc'\n", "12.8"),
    ("__version__ = '2.4.0'\ncuda = '12.1'\n", "12.1"),
    ("__version__ = '2.9.1+cpu'\ncuda: Optional[str] = None\n", None),
    ("__version__ = '1'\n", None),
])
def test_torch_cuda_from_version_py(text: str, cuda: str | None) -> None:
    assert probe.torch_cuda(text) == cuda


@pytest.mark.parametrize(("nvcc", "configured", "torch", "home", "release", "source"), [
    ({"path": "/c/bin/nvcc", "release": "12.8"}, "", {"version": "2.9.1", "cuda": "12.9"}, "/c", "12.8", "nvcc"),
    (None, "13.1", {"version": "2.9.1", "cuda": "12.8"}, "/usr/local/cuda-12.8", "13.1", "cuda_extension"),
    (None, "", {"version": "2.9.1", "cuda": "12.8"}, "/usr/local/cuda-13.1", "12.8", "torch 2.9.1"),
    (None, "", None, "/usr/local/cuda-13.1/", "13.1", "the name of"),
    (None, "", None, "/usr/local/cuda", None, ""),
])
def test_cuda_release_sources(nvcc: dict | None, configured: str, torch: dict | None, home: str,
                              release: str | None, source: str) -> None:
    found, why = probe.cuda_release(nvcc, configured, torch, home)
    assert found == release
    assert why.startswith(source)


def fake_nvcc(root: Path, release: str) -> Path:
    home = root / f"cuda-{release}"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                    f"echo 'Cuda compilation tools, release {release}, V{release}.93'\n")
    nvcc.chmod(0o755)
    return home


def test_probe_of_this_venv(tmp_path: Path) -> None:
    home = fake_nvcc(tmp_path, "12.8")
    marker = tmp_path / "marker.json"
    write(marker, {"key": {"package": "pytest"}})
    report = probe.probe("pytest", "0", ["12.0"], str(home), "", str(marker))
    assert report["installed"] == pytest.__version__
    assert report["nvcc"]["release"] == "12.8"
    assert report["cuda_release"] == "12.8"
    assert report["python_tag"] == f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert report["marker"] == {"key": {"package": "pytest"}}
    assert report["key"]["cuda"] == "12.8"
    expected_problems = [] if report["torch"] is None or report["torch"]["cuda"] == "12.8" else report["problems"]
    assert report["problems"] == expected_problems


def test_probe_refuses_torch_of_another_cuda() -> None:
    report = {"nvcc": {"path": "/usr/local/cuda-13.1/bin/nvcc", "release": "13.1"},
              "torch": {"version": "2.9.1+cu128", "cuda": "12.8"}, "cuda_release": "13.1",
              "cuda_release_source": "nvcc at /usr/local/cuda-13.1/bin/nvcc"}
    (problem,) = probe.problems_of(report, "", "/usr/local/cuda-13.1")
    assert "torch 2.9.1+cu128 in the venv reports CUDA 12.8" in problem
    assert "built for CUDA 13.1" in problem
    cpu = {**report, "torch": {"version": "2.9.1+cpu", "cuda": None}}
    assert "CUDA none (a CPU build)" in probe.problems_of(cpu, "", "/usr/local/cuda-13.1")[0]


def test_probe_refuses_a_toolkit_of_another_release_than_asked() -> None:
    report = {"nvcc": {"path": "/usr/local/cuda/bin/nvcc", "release": "13.1"}, "torch": None,
              "cuda_release": "13.1", "cuda_release_source": "nvcc"}
    (problem,) = probe.problems_of(report, "12.8", "/usr/local/cuda")
    assert "cuda_extension_cuda_release is 12.8, but /usr/local/cuda/bin/nvcc is release 13.1" in problem


def test_probe_without_any_release_asks_for_one(tmp_path: Path) -> None:
    report = probe.probe("pytest", "0", ["12.0"], str(tmp_path / "cuda"), "", str(tmp_path / "none.json"))
    if report["torch"] is None:
        assert report["cuda_release"] is None
        assert report["key"]["cuda"] == "unknown"
        assert any("Set cuda_extension_cuda_release" in problem for problem in report["problems"])
