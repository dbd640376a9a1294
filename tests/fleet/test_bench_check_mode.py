"""site.yml --check runs no GPU workload in the bench phase unless gpu_bench_in_check_mode says so.

Two hosts replay the bare-metal 8x RTX PRO 6000 capture: one would probe and benchmark live with an
interpreter that only records that it was started, the other has saved outputs to judge. In check
mode the first must not start it, and the role must say why; the logs are judged all the same. With
gpu_bench_in_check_mode: true the live run happens in check mode too.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.test_site_fleet import ROOT, ansible_playbook, task_results

CAPTURE = ROOT / "tests" / "captures" / "baremetal-8xRTXPRO6000-p2p-ok.json"
NCCL_LOG = ROOT / "tests" / "fixtures" / "nccl" / ("transfer-test-in-all_reduce_perf-layout_incident-reconstructed_"
                                                   "8xRTXPRO6000-vm-no-p2p.txt")
PROBE_LOG = ROOT / "tests" / "fixtures" / "p2p" / "p2p-probe_8xRTXPRO6000-baremetal-p2p_constructed.jsonl"


def inventory(tmp: Path, python: Path) -> Path:
    path = tmp / "hosts.yml"
    path.write_text(json.dumps({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                 "gpu_audit_capture": str(CAPTURE), "gpu_bench_tune": False, "gpu_bench_timeout": 30},
        "children": {"gpu_hosts": {"hosts": {
            "live-host": {"gpu_bench_python": str(python)},
            "log-host": {"gpu_bench_nccl_log": str(NCCL_LOG), "gpu_bench_probe_log": str(PROBE_LOG)},
        }}}}}))
    return path


def bench(tmp: Path, *extra: str) -> tuple[dict[str, Any], Path]:
    marker = tmp / "python.ran"
    python = tmp / "python"
    python.write_text(f"#!/bin/sh\necho \"$@\" >> {marker}\n")
    python.chmod(0o755)
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
           "ANSIBLE_NOCOLOR": "1"}
    run = subprocess.run([ansible_playbook(), str(ROOT / "site.yml"), "--tags", "audit,bench", "--check",
                          "-i", str(inventory(tmp, python)), "-e", f"gpu_audit_report_dir={tmp / 'reports'}", *extra],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
    return json.loads(run.stdout), marker


def facts(output: dict[str, Any], host: str) -> dict[str, Any]:
    kept = task_results({"output": output}, "Keep the results as facts for the deployment gate")[host]
    return kept["ansible_facts"]["gpu_bench_results"]


@pytest.mark.slow
def test_check_mode_runs_no_gpu_workload_and_says_why(tmp_path):
    output, marker = bench(tmp_path)

    assert not marker.exists(), "check mode started the probe or the benchmark"
    said = task_results({"output": output}, "Say that check mode runs no GPU workload")
    assert "gpu_bench_in_check_mode: true" in said["live-host"]["msg"]
    assert "the logs given are judged" in said["log-host"]["msg"]
    assert facts(output, "live-host") == {"probe": None, "nccl": None}
    judged = facts(output, "log-host")
    assert judged["nccl"]["source"] == "log" and judged["probe"]["source"] == "probe-log"
    line = task_results({"output": output}, "Say what the benchmark found")["live-host"]["msg"]
    assert "NCCL benchmark skipped: check mode" in line and "P2P probe skipped: check mode" in line


@pytest.mark.slow
def test_check_mode_runs_the_benchmark_when_asked_to(tmp_path):
    _, marker = bench(tmp_path, "-e", "gpu_bench_in_check_mode=true")
    assert marker.exists(), "gpu_bench_in_check_mode: true did not run the probe and the benchmark"
