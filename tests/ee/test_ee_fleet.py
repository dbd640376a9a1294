"""The capture fleet inside the execution environment (EE), run the way AWX runs it: ansible-navigator
starts execution-environment.yml's image with podman, and ansible-runner runs the playbook in it.

Two runs: site.yml's audit, bench and gate phases in check mode, judged by the very checks of
tests/fleet/test_site_fleet.py (same verdicts as outside the EE), and playbooks/audit.yml for real,
its reports written to a temporary directory mounted into the EE, which must find them on the host.
The image comes from scripts/ee-build.sh, which rebuilds it only when its recipe or pins changed.
Skipped only when podman cannot run containers here.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fleet import test_site_fleet as site_fleet

ROOT = site_fleet.ROOT
INVENTORY = site_fleet.INVENTORY
# ansible-runner marks each event in the output it relays with an escape sequence around a base64
# payload ("ESC[K<base64>ESC[<n>D"); with the colours these are all that is not the playbook's own output.
RUNNER_EVENT = re.compile(r"\x1b\[K[A-Za-z0-9+/=]+\x1b\[\d+D")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# The checks of the fleet test that read the check-mode run alone: every test function taking `fleet`.
VERDICT_CHECKS = [test for name, test in inspect.getmembers(site_fleet, inspect.isfunction)
                  if name.startswith("test_") and list(inspect.signature(test).parameters) == ["fleet"]]


def env() -> dict[str, str]:
    return {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
            "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(ROOT / "molecule" / "containers.conf"))}


def podman_problem() -> str | None:
    """Why podman cannot run containers here, or None."""
    if not shutil.which("podman"):
        return "podman is not installed (make system-deps installs it)"
    info = subprocess.run(["podman", "info", "--format", "{{ .Host.OCIRuntime.Name }}"], env=env(),
                          capture_output=True, text=True, timeout=120)
    if info.returncode != 0:
        return f"podman cannot run here: `podman info` failed: {info.stderr.strip()[-500:]}"
    return None


def tool(name: str) -> str:
    found = shutil.which(name, path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if not found:
        pytest.fail(f"{name} not found next to this Python or on PATH: run `make venv` first")
    return found


@pytest.fixture(scope="module")
def image() -> str:
    problem = podman_problem()
    if problem:
        pytest.skip(problem)
    if not Path("/dev/mqueue").is_dir():
        pytest.fail("ansible-navigator runs podman EEs only where /dev/mqueue exists: run `make system-deps` as "
                    "root (or `mkdir /dev/mqueue`)")
    build = subprocess.run([str(ROOT / "scripts" / "ee-build.sh")], cwd=ROOT, env=env(), capture_output=True,
                           text=True, timeout=1800)
    assert build.returncode == 0, f"scripts/ee-build.sh failed:\n{build.stderr[-4000:]}"
    return build.stdout.strip().splitlines()[-1]


def navigator(image: str, work: Path, playbook: str, *args: str, inventory: str = str(INVENTORY),
              cwd: Path = ROOT) -> tuple[dict[str, Any], str]:
    """Runs the playbook (a path in the checkout, or a name the EE's installed collection resolves) in the EE with
    the reports directory work/reports mounted; its JSON output and ansible-navigator's log. No artifact or log
    file is left outside work."""
    reports = work / "reports"
    reports.mkdir()
    log = work / "navigator.log"
    target = playbook if "/" not in playbook and not playbook.endswith(".yml") else str(ROOT / playbook)
    command = [tool("ansible-navigator"), "run", target, "-i", inventory,
               "--execution-environment-image", image, "--mode", "stdout", "--container-engine", "podman",
               "--pull-policy", "never", "--playbook-artifact-enable", "false",
               "--log-file", str(log), "--log-level", "debug", "--ansible-runner-artifact-dir", str(work / "runner"),
               "--execution-environment-volume-mounts", f"{reports}:{reports}",
               "--set-environment-variable", "ANSIBLE_STDOUT_CALLBACK=ansible.posix.json",
               "--set-environment-variable", "ANSIBLE_NOCOLOR=1",
               "-e", f"gpuhost_report_dir={reports}", *args]
    run = subprocess.run(command, cwd=cwd, env=env(), capture_output=True, text=True, timeout=900)
    text = ANSI.sub("", RUNNER_EVENT.sub("", run.stdout)).replace("\r", "")
    assert run.returncode == 0, f"ansible-navigator failed:\n{text[-6000:]}\n{run.stderr[-3000:]}"
    start = re.search(r"^\{", text, re.MULTILINE)
    assert start, f"no JSON in ansible-navigator's output:\n{text[-3000:]}"
    output, _ = json.JSONDecoder().raw_decode(text[start.start():])
    return output, log.read_text()


@pytest.fixture(scope="module")
def ee_fleet(image: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("ee-check")
    output, log = navigator(image, work, "site.yml", "--tags", "audit,bench,gate", "--check")
    return {"output": output, "reports": work / "reports", "log": log}


@pytest.fixture(scope="module")
def ee_audit(image: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("ee-audit")
    output, log = navigator(image, work, "playbooks/audit.yml")
    return {"output": output, "reports": work / "reports", "log": log}


@pytest.fixture(scope="module")
def ee_installed(image: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The audit by its collection name from a directory outside the checkout: only the EE's installed copy of
    gpuhost.gpu can run it (no ansible.cfg, no collections/ link there)."""
    work = tmp_path_factory.mktemp("ee-installed")
    output, log = navigator(image, work, "gpuhost.gpu.audit", "-c", "local", inventory="localhost,", cwd=work)
    return {"output": output, "reports": work / "reports", "log": log}


def test_the_fleet_tests_verdict_checks_are_all_here():
    assert len(VERDICT_CHECKS) >= 10


def test_the_runs_went_through_the_image(image, ee_fleet, ee_audit, ee_installed):
    for run in (ee_fleet, ee_audit, ee_installed):
        assert f"Runner arg: container_image:{image}" in run["log"]


@pytest.mark.parametrize("check", VERDICT_CHECKS, ids=[check.__name__ for check in VERDICT_CHECKS])
def test_the_ee_gives_the_fleet_tests_verdicts(ee_fleet, check):
    check(ee_fleet)


def test_the_audit_in_the_ee_writes_its_reports_to_the_mounted_directory(ee_audit):
    recap = ee_audit["output"]["stats"]
    assert set(recap) == site_fleet.FLEET
    reports = ee_audit["reports"]
    for host in site_fleet.FLEET:
        report = json.loads((reports / f"{host}.json").read_text())
        assert report["host"] == host
        assert (reports / f"{host}.md").is_file()
    rows = site_fleet.fleet_rows(reports)
    assert set(rows) == site_fleet.FLEET
    assert all("| this run |" in rows[host] for host in site_fleet.FLEET)
    assert "critical: no_nvidia_gpu" in rows["microvm-no-gpu"]
    assert "| pve-no-clique | this run | unfit | hypervisor |" in rows["pve-no-clique"]


def test_the_ees_installed_collection_runs_the_audit_by_name(ee_installed):
    assert set(ee_installed["output"]["stats"]) == {"localhost"}
    assert ee_installed["output"]["stats"]["localhost"]["failures"] == 0
    report = json.loads((ee_installed["reports"] / "localhost.json").read_text())
    # The EE's container has no GPU: the one verdict says so, from the collection installed in the image.
    assert report["summary"]["verdict"] == "unfit"
    assert "no_nvidia_gpu" in {finding["id"] for finding in report["findings"]}
