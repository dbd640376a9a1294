"""site.yml over a fleet of captures: the audit, benchmark-from-logs and gate phases in check mode.

Every host of tests/fleet/hosts.yml replays a capture of tests/captures (and, where it has them,
NCCL and P2P probe logs of tests/fixtures); the verdicts and launch settings are asserted per host.
The playbook runs once for the whole module (about half a minute); its JSON output is the evidence.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "tests" / "fleet" / "hosts.yml"
INCIDENT_ARGS = ["--tp", "8", "--nsa-decode-backend", "trtllm", "--disable-custom-all-reduce"]


def ansible_playbook() -> str:
    found = shutil.which("ansible-playbook", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                                    os.environ.get("PATH", "")]))
    if not found:
        pytest.fail("ansible-playbook not found next to this Python or on PATH: run `make venv` first")
    return found


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    reports = tmp_path_factory.mktemp("reports")
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
           "ANSIBLE_NOCOLOR": "1"}
    run = subprocess.run(
        [ansible_playbook(), "-i", str(INVENTORY), str(ROOT / "site.yml"), "--check", "--tags", "audit,bench,gate",
         "-e", f"gpu_audit_report_dir={reports}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"site.yml failed on the fleet:\n{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
    return {"output": json.loads(run.stdout), "reports": reports}


def task_results(fleet: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    """Per host, the result of the task with this name (its last run)."""
    results: dict[str, dict[str, Any]] = {}
    for play in fleet["output"]["plays"]:
        for task in play["tasks"]:
            # Role tasks are named "<role> : <task>".
            if task["task"]["name"].split(" : ")[-1] == name:
                results.update(task["hosts"])
    return results


def gate(fleet: dict[str, Any], host: str) -> dict[str, Any]:
    return task_results(fleet, "Keep the verdict for the deployment")[host]["ansible_facts"]["deployment_gate_result"]


def audit(fleet: dict[str, Any], host: str) -> dict[str, Any]:
    return task_results(fleet, "Audit the GPU host")[host]["ansible_facts"]["gpu_host"]


def ids(items: list[dict[str, Any]]) -> set[str]:
    return {item["id"] for item in items}


def test_check_mode_writes_no_report_and_changes_no_host(fleet):
    assert list(fleet["reports"].iterdir()) == []
    recap = fleet["output"]["stats"]
    assert set(recap) == {"incident-guest", "incident-guest-accepted", "pro6000-baremetal", "h100-baremetal",
                          "h100-unproven", "rtx4090-workstation", "a6000-i440fx-guest", "microvm-no-gpu",
                          "pve-no-clique", "pve-clique-ok", "pve-vfio"}
    assert all(stats["failures"] == 0 and stats["unreachable"] == 0 for stats in recap.values())


def test_incident_guest_is_blocked_at_tp8_without_p2p(fleet):
    result = gate(fleet, "incident-guest")
    assert result["verdict"] == "block"
    assert "p2p_not_supported" in ids(result["reasons"])
    # Derived even when blocked: what it would take, and where the fix is.
    assert result["launch"]["args"] == INCIDENT_ARGS
    link = result["proxmox_link"]
    assert (link["proxmox_host"], link["vmid"]) == ("pve-no-clique", 120)
    assert "x-nv-gpudirect-clique" in link["remedies"]["p2p_not_supported"]


def test_incident_guest_passes_with_the_risk_accepted_and_p2p_off(fleet):
    result = gate(fleet, "incident-guest-accepted")
    assert result["verdict"] == "pass"
    assert "p2p_not_supported" in ids(result["accepted"])
    launch = result["launch"]
    assert launch["args"] == INCIDENT_ARGS
    assert launch["env"]["NCCL_P2P_DISABLE"] == "1"
    assert launch["custom_all_reduce"] is False
    # GLM-5 priced on the incident's all-reduce log: 78 layers x 2 all-reduces at ~13.7 us.
    assert 400 < launch["expected_comm_ceiling_tok_s"] < 550


def test_bare_metal_pro6000_keeps_custom_all_reduce_on_proven_p2p(fleet):
    launch = gate(fleet, "pro6000-baremetal")["launch"]
    assert gate(fleet, "pro6000-baremetal")["verdict"] == "pass"
    assert launch["p2p"]["state"] == "proven" and launch["custom_all_reduce"] is True
    assert launch["args"] == ["--tp", "8", "--nsa-decode-backend", "trtllm"]
    assert "NCCL_P2P_DISABLE" not in launch["env"]


def test_h100_passes_with_custom_all_reduce_on(fleet):
    result = gate(fleet, "h100-baremetal")
    assert result["verdict"] == "pass"
    assert result["launch"]["args"] == ["--tp", "4"]
    assert result["launch"]["gpus"] == [0, 1, 2, 3]
    assert result["launch"]["custom_all_reduce"] is True


def test_h100_without_a_probe_turns_custom_all_reduce_off(fleet):
    result = gate(fleet, "h100-unproven")
    assert result["verdict"] == "pass"
    assert result["launch"]["custom_all_reduce"] is False
    assert result["launch"]["args"] == ["--tp", "4", "--disable-custom-all-reduce"]


def test_consumer_gpus_without_p2p_serve_a_small_model_on_one_gpu(fleet):
    result = gate(fleet, "rtx4090-workstation")
    assert result["verdict"] == "pass"
    assert result["launch"]["tensor_parallel_size"] == 1
    # P2P findings do not matter at TP1.
    assert "p2p_not_supported" in ids(result["resolved"])


def test_i440fx_guest_is_blocked_with_the_machine_type(fleet):
    result = gate(fleet, "a6000-i440fx-guest")
    assert result["verdict"] == "block"
    assert {"p2p_not_supported", "qemu_machine_i440fx"} <= ids(result["reasons"])


def test_a_host_without_gpu_is_blocked(fleet):
    result = gate(fleet, "microvm-no-gpu")
    assert result["verdict"] == "block"
    assert "no_nvidia_gpu" in ids(result["reasons"])
    assert result["launch"]["tensor_parallel_size"] is None


def test_proxmox_hosts_are_audited_not_gated(fleet):
    assert not {"pve-no-clique", "pve-clique-ok", "pve-vfio"} & set(task_results(fleet, "Keep the verdict for the "
                                                                                      "deployment"))
    bad = ids(audit(fleet, "pve-no-clique")["findings"])
    assert {"proxmox_vm_no_clique", "proxmox_vm_hidden"} <= bad
    good = {f["id"] for f in audit(fleet, "pve-clique-ok")["findings"] if f["severity"] in ("critical", "warning")}
    assert not good & {"proxmox_vm_no_clique", "proxmox_vm_hidden", "proxmox_vm_not_q35", "proxmox_vm_no_pcie"}
