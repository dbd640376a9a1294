"""The first hour of a new user: the playbooks run as documented, from any directory, with relative paths.

Each run is ansible-playbook as a user starts it: from a working directory outside the repository (which holds
the user's captures, logs and saved --help, named by relative paths), the repository's playbook named by its
path, and no ansible.cfg read (an empty one stands for "none", so that one in the home directory cannot mask a
problem). The host replays a capture, so every run takes seconds; only the capture playbook reads this machine,
since saving a capture needs a live host.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fleet.test_site_fleet import ROOT, ansible_playbook

CAPTURE = ROOT / "tests" / "captures" / "baremetal-8xRTXPRO6000-p2p-ok.json"
NCCL_LOG = ROOT / "tests" / "fixtures" / "nccl" / ("transfer-test-in-all_reduce_perf-layout_incident-reconstructed_"
                                                   "8xRTXPRO6000-vm-no-p2p.txt")
PROBE_LOG = ROOT / "tests" / "fixtures" / "p2p" / "p2p-probe_8xRTXPRO6000-baremetal-p2p_constructed.jsonl"
# An SGLang whose --help renamed the NSA options to --dsa-*: the gate translates the table's flag only if it read it.
SGLANG_HELP = (ROOT / "tests" / "fixtures" / "sglang"
               / "launch_server-help_dsa-options-nsa-deprecated_py3.13-layout_constructed.txt")
MODEL = {"name": "GLM-5-NVFP4", "family": "glm-5", "path": "/models/GLM-5-NVFP4", "weights_gib": 403,
         "tensor_parallel_size": "auto", "attention_heads": 64, "min_compute_capability": "12.0",
         "min_driver": "575", "min_cuda": "12.8"}
HOST = "replayed"


def workdir(base: Path, host_vars: dict | None = None) -> Path:
    """A user's working directory: the inputs under relative names, and an inventory that names them so."""
    base.mkdir(parents=True, exist_ok=True)
    for source, name in ((CAPTURE, "caps/host.json"), (NCCL_LOG, "logs/nccl.txt"), (PROBE_LOG, "logs/probe.jsonl"),
                         (SGLANG_HELP, "sglang-help.txt")):
        (base / name).parent.mkdir(exist_ok=True)
        shutil.copyfile(source, base / name)
    host = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
            "deploy_model": MODEL, "deployment_gate_sglang_version": "0.5.10.post1", **(host_vars or {})}
    (base / "hosts.yml").write_text(json.dumps({"all": {"children": {"gpu_hosts": {"hosts": {HOST: host}}}}}))
    return base


def playbook(cwd: Path, name: str, *args: str, config: Path) -> subprocess.CompletedProcess[str]:
    """ansible-playbook <repo>/<name> -i hosts.yml ARGS, started from cwd as a shell would (PWD = cwd)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env.update({"PWD": str(cwd), "ANSIBLE_CONFIG": str(config), "ANSIBLE_NOCOLOR": "1"})
    return subprocess.run([ansible_playbook(), str(ROOT / name), "-i", "hosts.yml", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def no_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = tmp_path_factory.mktemp("config") / "ansible.cfg"
    config.write_text("")
    return config


def said(run: subprocess.CompletedProcess[str]) -> str:
    return f"{run.stdout}\n{run.stderr}"


@pytest.fixture(scope="module")
def check_run(tmp_path_factory: pytest.TempPathFactory, no_config: Path) -> dict:
    """site.yml --tags audit,bench,gate --check with every input a relative path of the inventory."""
    cwd = workdir(tmp_path_factory.mktemp("check"), {
        "gpu_audit_capture": "caps/host.json", "gpu_bench_nccl_log": "logs/nccl.txt",
        "gpu_bench_probe_log": "logs/probe.jsonl", "deployment_gate_sglang_help_file": "sglang-help.txt"})
    run = playbook(cwd, "site.yml", "--tags", "audit,bench,gate", "--check", config=no_config)
    assert run.returncode == 0, said(run)[-6000:]
    return {"cwd": cwd, "output": said(run)}


def test_playbooks_run_from_outside_the_repository_without_its_ansible_cfg(check_run):
    # Roles, modules and module_utils are found beside the playbooks, not through ansible.cfg.
    assert "was not found" not in check_run["output"]
    assert f"{HOST}: fit (bare metal; 8 GPU(s); P2P ok)" in check_run["output"]


def test_check_mode_says_it_would_write_the_reports_and_writes_none(check_run):
    reports = check_run["cwd"] / "reports"
    assert f"Check mode: would write {reports}/{HOST}.md" in check_run["output"]
    assert f"Check mode: would write {reports}/{HOST}-gate.md" in check_run["output"]
    assert "Report: " not in check_run["output"]
    assert not reports.exists()


def test_relative_benchmark_logs_are_read_from_the_working_directory(check_run):
    found = re.search(rf"{HOST}: all-reduce alone limits[^\n]*", check_run["output"])
    assert found, check_run["output"][-4000:]
    assert "did not run" not in found.group(0)


def test_a_relative_capture_and_report_dir_are_taken_from_the_working_directory(tmp_path, no_config):
    cwd = workdir(tmp_path / "work")
    run = playbook(cwd, "playbooks/audit.yml", "-e", "gpu_audit_capture=caps/host.json",
                   "-e", "gpuhost_report_dir=out/reports", config=no_config)
    assert run.returncode == 0, said(run)[-6000:]
    assert f"Report: {cwd}/out/reports/{HOST}.md" in said(run)
    # fleet.d/: where each row of fleet.md comes from, for playbooks/merge_reports.yml; fleet.json: the table's rows
    # by host name, and the lock under which runs into one directory take turns on it.
    assert {path.name for path in (cwd / "out" / "reports").iterdir()} == {f"{HOST}.md", f"{HOST}.json", "fleet.md",
                                                                          f"{HOST}-p2p.svg", "fleet.json",
                                                                          ".fleet.lock", "fleet.d"}
    assert not (ROOT / "playbooks" / "out").exists()


def test_a_missing_capture_is_named_by_the_path_tried(tmp_path, no_config):
    cwd = workdir(tmp_path / "work")
    run = playbook(cwd, "playbooks/audit.yml", "-e", "gpu_audit_capture=caps/missing.json", config=no_config)
    assert run.returncode != 0
    assert f"{cwd}/caps/missing.json" in said(run)


def test_the_gate_alone_on_a_fresh_checkout_creates_the_reports_directory(tmp_path, no_config):
    # gate.yml audits the host itself (no audit play ran): the capture and the --help are relative paths.
    cwd = workdir(tmp_path / "work", {"gpu_audit_capture": "caps/host.json",
                                      "deployment_gate_sglang_help_file": "sglang-help.txt"})
    run = playbook(cwd, "playbooks/gate.yml", config=no_config)
    assert run.returncode == 0, said(run)[-6000:]
    gate_md = cwd / "reports" / f"{HOST}-gate.md"
    assert f"Report: {gate_md}" in said(run)
    assert gate_md.is_file()
    # The --help was read and the launch checked against it (SGLang 0.5.10.post1 gets no backend flag from the
    # table on SM120: its own defaults are trtllm there, gate/known_good.py).
    verdict = json.loads((cwd / "reports" / f"{HOST}-gate.json").read_text())
    assert verdict["launch"]["flag_check"]["checked"] is True
    assert verdict["launch"]["flag_check"]["refused"] == []
    assert [e["id"] for e in verdict["launch"]["known_good_source"]] == ["sm120-glm5-dsa-trtllm-by-default"]


def test_the_capture_playbook_says_where_it_wrote(tmp_path, no_config):
    # Saving a capture needs a live host: this machine, read-only.
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}))
    run = playbook(cwd, "playbooks/capture.yml", "-e", "gpu_audit_capture_dir=saved", config=no_config)
    assert run.returncode == 0, said(run)[-6000:]
    assert f"localhost: {cwd}/saved/localhost.json" in said(run)
    assert json.loads((cwd / "saved" / "localhost.json").read_text())["about"]


def test_the_readme_points_to_the_offline_fleet_whose_page_says_to_activate_the_venv():
    readme = (ROOT / "README.md").read_text()
    quick_start = readme[readme.index("## Quick start"):readme.index("## Where to go next")]
    assert "docs/getting-started.md#a-fleet-without-hardware-the-captures" in quick_start
    page = (ROOT / "docs" / "getting-started.md").read_text()
    fleet = page[page.index("## A fleet without hardware"):]
    assert "source .venv/bin/activate" in fleet
    assert "ansible-playbook -i tests/fleet/hosts.yml playbooks/audit.yml" in fleet


def test_the_offline_fleet_audit_runs_from_the_repository_root_as_documented():
    # As documented, with the repository's ansible.cfg; --check so that the checkout's reports/ stays as it is.
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env.update({"PWD": str(ROOT), "ANSIBLE_NOCOLOR": "1"})
    run = subprocess.run([ansible_playbook(), "-i", "tests/fleet/hosts.yml", "playbooks/audit.yml", "--check"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, said(run)[-6000:]
    assert "incident-guest: " in run.stdout and "failed=0" in run.stdout


def test_the_benchmark_alone_audits_a_replayed_host_from_its_capture(tmp_path, no_config):
    # bench.yml without the audit play audits the host itself: from its relative capture, never this machine.
    cwd = workdir(tmp_path / "work", {"gpu_audit_capture": "caps/host.json", "gpu_bench_nccl_log": "logs/nccl.txt"})
    run = playbook(cwd, "playbooks/bench.yml", "--check", config=no_config)
    assert run.returncode == 0, said(run)[-6000:]
    assert re.search(rf"{HOST}: all-reduce alone limits", said(run)), said(run)[-4000:]
    assert "no GPU usable here" not in said(run)
