"""The misspellings a new user made, run the way a user runs them: each is caught, none passes silently.

- ``deploy_model: {weight_gib: 140, ...}`` (for weights_gib) blocks the gate at TP8, naming the key;
- ``deploy_model`` as a string blocks, naming deploy_model (not the role's deployment_gate_model);
- ``gpu_audit_tensor_parallel_gpus: [0, 1, 2, 9]`` on an 8-GPU host is a critical finding naming its GPUs;
- ``gpu_audit_captur`` (for gpu_audit_capture) warns before the audit runs, naming gpu_audit_capture.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.test_site_fleet import ROOT, ansible_playbook, task_results

H100 = str(ROOT / "tests" / "captures" / "baremetal-8xH100-SXM.json")
LLAMA70 = {"name": "Llama-3-70B-Instruct", "family": "llama-3-70b", "path": "/models/Llama-3.3-70B-Instruct",
           "tensor_parallel_size": 8, "attention_heads": 64}
LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}


def play(tmp: Path, playbook: str, hosts: dict[str, Any], *args: str) -> dict[str, Any]:
    inventory = tmp / f"{Path(playbook).stem}-hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"gpu_hosts": {"hosts": hosts}}}}))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
           "ANSIBLE_NOCOLOR": "1"}
    run = subprocess.run([ansible_playbook(), str(ROOT / playbook), "-i", str(inventory), "--check",
                          "-e", f"gpuhost_report_dir={tmp}", *args],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{playbook} failed:\n{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
    return {"output": json.loads(run.stdout), "stderr": run.stderr}


def warnings(result: dict[str, Any]) -> list[str]:
    return [w["event"]["msg"] if isinstance(w, dict) else w for w in result.get("warnings", [])]


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    hosts = {
        "weight-typo": {**LOCAL, "gpu_audit_capture": H100, "deploy_model": {**LLAMA70, "weight_gib": 140}},
        "model-as-text": {**LOCAL, "gpu_audit_capture": H100, "deploy_model": "Llama-3-70B-Instruct"},
    }
    return play(tmp_path_factory.mktemp("gate"), "playbooks/gate.yml", hosts)


def verdict(gated: dict[str, Any], host: str) -> dict[str, Any]:
    return task_results(gated, "Keep the verdict for the deployment")[host]["ansible_facts"]["deployment_gate_result"]


def test_weight_gib_blocks_the_gate_at_tp8_naming_weights_gib(gated):
    result = verdict(gated, "weight-typo")
    assert result["verdict"] == "block"
    assert [r["summary"] for r in result["reasons"]] == ["deploy_model.weight_gib: unknown key; did you mean "
                                                        "weights_gib?"]
    said = task_results(gated, "Say the verdict")["weight-typo"]["msg"]
    assert "did you mean weights_gib?" in said and "weights_gib?." not in said


def test_a_string_deploy_model_is_named_deploy_model(gated):
    result = verdict(gated, "model-as-text")
    assert result["verdict"] == "block"
    assert [r["summary"] for r in result["reasons"]] == [
        "deploy_model: expected a mapping (name, weights_gib, tensor_parallel_size, ...); found str"]
    said = task_results(gated, "Say the verdict")["model-as-text"]["msg"]
    assert "Blocked by: deploy_model: expected a mapping" in said and "deployment_gate_model" not in said


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One audit.yml run for both audit misspellings: each host's typo is its own, and a run per host would only
    repeat the play around it."""
    hosts = {
        "tp-typo": {**LOCAL, "gpu_audit_capture": H100, "gpu_audit_tensor_parallel_gpus": [0, 1, 2, 9]},
        # As the user wrote it: no gpu_audit_capture, so the audit reads this machine (read-only, in check mode).
        "customer-node-7": {**LOCAL, "gpu_audit_captur": H100},
    }
    return play(tmp_path_factory.mktemp("audit"), "playbooks/audit.yml", hosts)


def test_tensor_parallel_gpus_the_host_lacks_are_a_critical_finding(audited):
    facts = task_results(audited, "Audit the GPU host")["tp-typo"]["ansible_facts"]["gpu_host"]
    [finding] = [f for f in facts["findings"] if f["id"] == "tensor_parallel_gpus_not_on_host"]
    assert finding["severity"] == "critical"
    assert "names GPU 9, which this host does not have (it has GPUs 0-7)" in finding["summary"]
    # One message for the play (run_once), a line per host: tp-typo's is the one that names it.
    [printed] = task_results(audited, "Print every host's verdict").values()
    [line] = [line for line in printed["msg"] if line.startswith("tp-typo: ")]
    assert "critical: tensor_parallel_gpus_not_on_host" in line


def test_gpu_audit_captur_warns_before_the_audit_runs(audited):
    tasks = [task["task"]["name"].split(" : ")[-1] for task in audited["output"]["plays"][0]["tasks"]]
    assert tasks.index("Check the play's gpu_audit variable names") < tasks.index("Audit the GPU host")
    [check] = task_results(audited, "Check the play's gpu_audit variable names").values()
    assert warnings(check) == ["gpu_audit_captur is not a variable of role gpu_audit; did you mean "
                               "gpu_audit_capture?"]
