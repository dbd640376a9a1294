"""The README's walkthrough as written: site.yml --tags audit,bench,gate over the fleet of captures, without --check.

Every host of tests/fleet/hosts.yml replays a capture on this machine. Before the replay rule of the gpu_bench role,
this run probed and benchmarked the controller for each host without a saved output: the P2P harness and the NCCL
engine search imported torch with the controller's interpreter, their failures were ignored (one per step and host),
and on a controller with torch or a GPU they measured it under the replayed hosts' names. Here a `torch` that only
records its import stands first on the interpreters' path: any live workload would import it.

The run must fail no task on any host, import no torch, and reach the verdicts and launch settings of the same run in
check mode.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.test_site_fleet import FLEET, INVENTORY, ROOT, ansible_playbook, task_results

TRAP = '''import os
with open(os.environ["GPUHOST_TORCH_TRAP"], "a") as marker:
    marker.write(str(os.getpid()) + "\\n")
raise ImportError("this torch only records that a live workload started")
'''


def walkthrough(tmp: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    trap_dir, marker = tmp / "trap", tmp / "torch-imported"
    (trap_dir / "torch").mkdir(parents=True)
    (trap_dir / "torch" / "__init__.py").write_text(TRAP)
    reports = tmp / "reports"
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
           "ANSIBLE_NOCOLOR": "1", "GPUHOST_TORCH_TRAP": str(marker),
           "PYTHONPATH": os.pathsep.join([str(trap_dir), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    # The README's command; the reports go to this test's directory.
    command = [ansible_playbook(), "-i", str(INVENTORY), str(ROOT / "site.yml"), "--tags", "audit,bench,gate"]
    run = subprocess.run([*command, "-e", f"gpuhost_report_dir={reports}", *extra],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return run, marker


def judged(output: dict[str, Any]) -> dict[str, Any]:
    """Per host: the audit's verdict and worst finding, the gate's verdict, reasons and launch arguments."""
    facts = task_results({"output": output}, "Audit the GPU host")
    gates = task_results({"output": output}, "Keep the verdict for the deployment")
    seen = {}
    for host in FLEET:
        summary = facts[host]["ansible_facts"]["gpu_host"]["summary"]
        gate = (gates.get(host) or {}).get("ansible_facts", {}).get("deployment_gate_result") or {}
        seen[host] = {"audit": (summary["verdict"], summary.get("worst_finding")),
                      "gate": (gate.get("verdict"), sorted(r["id"] for r in gate.get("reasons", [])),
                               (gate.get("launch") or {}).get("args"))}
    return seen


def failed_tasks(output: dict[str, Any]) -> list[str]:
    """Every task result that failed, ignored or not."""
    return [f"{task['task']['name']} on {host}: {str(result.get('msg'))[:300]}"
            for play in output["plays"] for task in play["tasks"] for host, result in task["hosts"].items()
            if result.get("failed")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    real, real_marker = walkthrough(tmp_path_factory.mktemp("real"))
    check, _ = walkthrough(tmp_path_factory.mktemp("check"), "--check")
    for name, run in (("without --check", real), ("--check", check)):
        assert run.stdout.startswith("{"), f"site.yml {name}:\n{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
    return {"real": json.loads(real.stdout), "real_rc": real.returncode, "check": json.loads(check.stdout),
            "torch_imported": real_marker.exists()}


@pytest.mark.slow
def test_the_walkthrough_fails_no_host_and_no_task(runs):
    assert runs["real_rc"] == 0
    recap = runs["real"]["stats"]
    assert set(recap) == FLEET
    assert all(stats["failures"] == 0 and stats["unreachable"] == 0 and stats["ignored"] == 0
               for stats in recap.values()), recap
    assert failed_tasks(runs["real"]) == []


@pytest.mark.slow
def test_the_walkthrough_runs_no_live_workload_on_the_controller(runs):
    assert not runs["torch_imported"], "a probe or an NCCL benchmark imported torch on the controller"
    # What the bench phase judged came from the hosts' saved outputs, never from a run here.
    for step in ("Prove P2P between every GPU pair", "Benchmark NCCL all-reduce per message size"):
        for host, result in task_results({"output": runs["real"]}, step).items():
            assert result.get("skipped") or result.get("source") in {"log", "probe-log"}, (step, host, result)


@pytest.mark.slow
def test_the_walkthrough_reaches_the_verdicts_of_check_mode(runs):
    assert judged(runs["real"]) == judged(runs["check"])
