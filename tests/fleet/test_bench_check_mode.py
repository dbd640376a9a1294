"""No GPU workload where it would measure the wrong machine or disturb a serving one.

site.yml --check runs no GPU workload in the bench phase unless gpu_bench_in_check_mode says so, and a host
that replays a capture never runs one, in check mode or not: its audit came from a file, so a live probe
would run on the machine the module runs on and report its GPUs under the replayed host's name.

The hosts: one whose audit facts were read before the role (as a live audit leaves them) and that would
probe and benchmark live with an interpreter that only records that it was started; one replaying the same
capture with the same interpreter and no saved outputs; one replaying it with saved outputs to judge.
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


def inventory(tmp: Path, pythons: dict[str, Path]) -> Path:
    path = tmp / "hosts.yml"
    path.write_text(json.dumps({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                 "gpu_bench_tune": False, "gpu_bench_timeout": 30},
        "children": {"gpu_hosts": {"hosts": {
            "live-host": {"gpu_bench_python": str(pythons["live-host"])},
            "replay-host": {"gpu_audit_capture": str(CAPTURE), "gpu_bench_python": str(pythons["replay-host"])},
            "log-host": {"gpu_audit_capture": str(CAPTURE), "gpu_bench_nccl_log": str(NCCL_LOG),
                         "gpu_bench_probe_log": str(PROBE_LOG)},
        }}}}}))
    return path


def playbook(tmp: Path) -> Path:
    """The bench phase after an audit: live-host's facts are read from the capture by the play itself, as a live
    audit of a host with these GPUs would leave them, so the role sees a host with no capture to replay."""
    path = tmp / "bench.yml"
    path.write_text(json.dumps([{
        "name": "Bench after an audit", "hosts": "gpu_hosts", "gather_facts": False,
        "tasks": [
            {"name": "Read live-host's facts before the role", "gpuhost.gpu.gpu_host_facts": {"capture": str(CAPTURE)},
             "when": "inventory_hostname == 'live-host'"},
            {"name": "Benchmark", "ansible.builtin.include_role": {"name": "gpuhost.gpu.gpu_bench"}},
        ]}]))
    return path


def bench(tmp: Path, *extra: str) -> tuple[dict[str, Any], dict[str, Path]]:
    """The run's output, and per host that may start one the file its recording interpreter writes when started."""
    run, markers = bench_run(tmp, *extra)
    return json.loads(run.stdout), markers


def bench_run(tmp: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Path]]:
    pythons, markers = {}, {}
    for host in ("live-host", "replay-host"):
        markers[host] = tmp / f"{host}.ran"
        pythons[host] = tmp / f"{host}-python"
        pythons[host].write_text(f"#!/bin/sh\necho \"$@\" >> {markers[host]}\n")
        pythons[host].chmod(0o755)
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
           "ANSIBLE_NOCOLOR": "1"}
    run = subprocess.run([ansible_playbook(), str(playbook(tmp)), "-i", str(inventory(tmp, pythons)),
                          "-e", f"gpuhost_report_dir={tmp / 'reports'}", *extra],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
    return run, markers


def facts(output: dict[str, Any], host: str) -> dict[str, Any]:
    kept = task_results({"output": output}, "Keep the results as facts for the deployment gate")[host]
    return kept["ansible_facts"]["gpu_bench_results"]


def started(marker: Path) -> list[str]:
    """The arguments the recording interpreter was started with, one line per start."""
    return marker.read_text().splitlines() if marker.exists() else []


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict[str, Path]]:
    """The bench phase in check mode, the model named by its former variable gpu_bench_model_profile: one run
    for the two tests that read a check-mode run without gpu_bench_in_check_mode, since the model changes only
    the ceiling priced from the saved logs, not whether a GPU workload runs."""
    return bench_run(tmp_path_factory.mktemp("checked"), "--check", "-e", "gpu_bench_model_profile=llama-3-70b")


@pytest.mark.slow
def test_check_mode_runs_no_gpu_workload_and_says_why(checked):
    run, markers = checked
    output = json.loads(run.stdout)

    assert started(markers["live-host"]) == [], "check mode started the probe or the benchmark"
    said = task_results({"output": output}, "Say that check mode runs no GPU workload")
    assert "gpu_bench_in_check_mode: true" in said["live-host"]["msg"]
    assert facts(output, "live-host") == {"probe": None, "nccl": None}
    judged = facts(output, "log-host")
    assert judged["nccl"]["source"] == "log" and judged["probe"]["source"] == "probe-log"
    line = task_results({"output": output}, "Say what the benchmark found")["live-host"]["msg"]
    assert "NCCL benchmark skipped: check mode" in line and "P2P probe skipped: check mode" in line


# Before the replay rule, replay-host started the recording interpreter in both runs below: the probe and the
# NCCL benchmark ran on the controller under its name (the walkthrough of site.yml without --check did so for
# every fleet host without a saved output). The check-mode run is the one gpu_bench_in_check_mode asks for: that
# live-host started there is what shows the variable runs the probe and the benchmark in check mode.
@pytest.mark.slow
@pytest.mark.parametrize("mode", [[], ["--check", "-e", "gpu_bench_in_check_mode=true"]], ids=["real", "check"])
def test_a_host_replaying_a_capture_never_runs_a_live_workload(tmp_path, mode):
    output, markers = bench(tmp_path, *mode)

    assert started(markers["replay-host"]) == [], "a host replaying a capture started a live workload"
    # The same interpreter on a host audited live did run: only the replay stops it.
    assert started(markers["live-host"]), ("gpu_bench_in_check_mode: true did not run the probe and the benchmark"
                                           if mode else "the live host's probe and benchmark did not run")
    hosts_started = task_results({"output": output}, "Prove P2P between every GPU pair")
    assert hosts_started["replay-host"].get("skipped") is True
    assert task_results({"output": output}, "Benchmark NCCL all-reduce per message size")["replay-host"].get(
        "skipped") is True
    assert facts(output, "replay-host") == {"probe": None, "nccl": None}
    said = task_results({"output": output}, "Say that a host replaying a capture runs no live workload")
    assert {host for host, result in said.items() if not result.get("skipped")} == {"replay-host"}
    assert "the P2P probe and the NCCL benchmark not run live" in said["replay-host"]["msg"]
    line = task_results({"output": output}, "Say what the benchmark found")["replay-host"]["msg"]
    assert "NCCL benchmark not run live: the host replays a capture" in line
    assert "P2P probe not run live: the host replays a capture" in line
    # The saved outputs of a replayed host are judged all the same.
    judged = facts(output, "log-host")
    assert judged["nccl"]["source"] == "log" and judged["probe"]["source"] == "probe-log"


@pytest.mark.slow
def test_the_former_gpu_bench_model_profile_is_still_read_and_warned_about(checked):
    run, _ = checked
    ceiling = facts(json.loads(run.stdout), "log-host")["nccl"]["communication_ceiling"]
    assert ceiling["batch_1"]["model"] == "Llama-3-70B"  # not the role's default, glm-5
    # One message, the same for every host: Ansible's display shows it once for the run (this callback keeps it
    # in each host's result).
    said = {line.strip().strip('",') for line in run.stdout.splitlines() if " is renamed " in line}
    assert said == {"gpu_bench_model_profile is renamed gpu_bench_model: this run reads gpu_bench_model_profile, and "
                    "gpu_bench_model is left aside; set gpu_bench_model instead of gpu_bench_model_profile."}
