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

from typing import Any

import pytest

from tests.fleet.test_site_fleet import FLEET, task_results


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
def runs(site_live: dict[str, Any], site_check: dict[str, Any]) -> dict[str, Any]:
    """The walkthrough's two runs (tests/fleet/conftest.py)."""
    return {"real": site_live["output"], "real_rc": site_live["rc"], "check": site_check["output"],
            "torch_imported": site_live["torch_imported"]}


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
