"""playbooks/analyze.yml for real, from a directory outside the repository with relative paths: a bug report,
a directory of the incident's pasted outputs and a capture give three reports and their index analysis.md, and one
line each.
Then check mode, which writes nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.fleet.test_site_fleet import ROOT, ansible_playbook
from tests.paths import CAPTURES, FIXTURES
from tests.unit.material.test_capture import TOPO_M

BUG_REPORT = FIXTURES / "bug-reports" / "nvidia-bug-report_580_2xRTX-PRO-6000_kvm-guest_constructed.log"


def analyze(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # A shell started in cwd has PWD=cwd; the playbook resolves relative inputs against it.
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1", "PWD": str(cwd)}
    return subprocess.run([ansible_playbook(), str(ROOT / "playbooks" / "analyze.yml"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_three_kinds_of_input_give_three_reports(tmp_path: Path) -> None:
    support = tmp_path / "ticket-4711"
    pastes = support / "glm5-vm"
    pastes.mkdir(parents=True)
    (pastes / "p2p.txt").write_text("$ nvidia-smi topo -p2p r\n"
                                    + (FIXTURES / "nvidia-smi" / "topo-p2p-r_8gpu-vm-NS.txt").read_text())
    (pastes / "topo-m.txt").write_bytes(TOPO_M)
    shutil.copy(FIXTURES / "nccl" / ("transfer-test-in-all_reduce_perf-layout_incident-reconstructed_"
                                     "8xRTXPRO6000-vm-no-p2p.txt"), pastes / "all_reduce.log")
    shutil.copy(BUG_REPORT, support / "nvidia-bug-report.log")
    shutil.copy(CAPTURES / "baremetal-8xH100-SXM.json", support / "gpu-node-1.json")
    inputs = "ticket-4711/nvidia-bug-report.log ticket-4711/glm5-vm ticket-4711/gpu-node-1.json"

    checked = analyze(tmp_path, "--check", "-e", json.dumps({"gpu_analyze_inputs": inputs}))
    assert checked.returncode == 0, f"{checked.stdout[-4000:]}\n{checked.stderr[-2000:]}"
    assert not (tmp_path / "reports").exists()
    assert f"Would write: {tmp_path}/reports/glm5-vm.analysis.md" in " ".join(checked.stdout.split())

    run = analyze(tmp_path, "-e", json.dumps({"gpu_analyze_inputs": inputs}))
    assert run.returncode == 0, f"{run.stdout[-4000:]}\n{run.stderr[-2000:]}"
    reports = tmp_path / "reports"
    assert sorted(p.name for p in reports.glob("*.json")) == ["glm5-vm.analysis.json", "gpu-node-1.analysis.json",
                                                                "nvidia-bug-report.analysis.json"]
    assert {"analysis.md", "glm5-vm.analysis.md", "gpu-node-1.analysis.md",
            "nvidia-bug-report.analysis.md"} <= {p.name for p in reports.iterdir()}
    glm5 = json.loads((reports / "glm5-vm.analysis.json").read_text())
    assert glm5["summary"]["worst_finding"] == {"id": "p2p_not_supported", "severity": "critical"}
    assert glm5["bench"]["nccl"]["results"][0]["size_bytes"] == 12288
    printed = " ".join(run.stdout.split())  # the callback wraps long lines
    for line in ("ticket-4711/glm5-vm -> glm5-vm.analysis: unfit", f"Report: {reports}/gpu-node-1.analysis.md",
                 f"Report: {reports}/nvidia-bug-report.analysis.md"):
        assert line in printed


def test_an_input_that_cannot_be_read_fails_the_play_after_the_others_reports(tmp_path: Path) -> None:
    shutil.copy(CAPTURES / "baremetal-8xH100-SXM.json", tmp_path / "node.json")
    run = analyze(tmp_path, "-e", json.dumps({"gpu_analyze_inputs": ["node.json", "nothing-here"],
                                              "gpuhost_report_dir": "out"}))
    assert run.returncode != 0
    assert (tmp_path / "out" / "node.analysis.json").is_file()
    printed = " ".join(run.stdout.split())  # the callback wraps long lines
    assert f"nothing-here: NOT READ: {tmp_path}/nothing-here does not exist" in printed
    assert "1 of 2 input(s) could not be read: nothing-here" in printed


def test_the_former_gpu_analyze_model_profile_is_still_read_and_warned_about(tmp_path: Path) -> None:
    pastes = tmp_path / "glm5-vm"
    pastes.mkdir()
    shutil.copy(FIXTURES / "nccl" / ("transfer-test-in-all_reduce_perf-layout_incident-reconstructed_"
                                     "8xRTXPRO6000-vm-no-p2p.txt"), pastes / "all_reduce.log")
    (pastes / "topo-m.txt").write_bytes(TOPO_M)
    run = analyze(tmp_path, "-e", json.dumps({"gpu_analyze_inputs": "glm5-vm",
                                              "gpu_analyze_model_profile": "llama-3-70b"}))
    assert run.returncode == 0, f"{run.stdout[-4000:]}\n{run.stderr[-2000:]}"
    report = json.loads((tmp_path / "reports" / "glm5-vm.analysis.json").read_text())
    assert report["bench"]["nccl"]["communication_ceiling"]["batch_1"]["model"] == "Llama-3-70B"
    said = " ".join((run.stdout + run.stderr).split())  # the display wraps long lines
    assert said.count("gpu_analyze_model_profile is renamed gpu_analyze_model: this run reads "
                      "gpu_analyze_model_profile") == 1
