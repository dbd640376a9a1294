"""What a blocked host does to gate.yml's exit status: the policy said on the host's line, and settable (issue 29).

By default the gate is a verdict: gate.yml exits 0 with the incident guest blocked, and the verdict's line names
deployment_gate_fail_on_block; set true, the blocked host fails the run.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.fleet.test_site_fleet import INVENTORY, ROOT, ansible_playbook


def gate(reports: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run([ansible_playbook(), "-i", str(INVENTORY), str(ROOT / "playbooks" / "gate.yml"), "--check",
                           "--limit", "incident-guest", "-e", f"gpuhost_report_dir={reports}", *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_by_default_a_blocked_host_is_reported_and_the_line_says_the_policy(tmp_path: Path) -> None:
    run = gate(tmp_path)
    assert run.returncode == 0, f"{run.stdout[-4000:]}\n{run.stderr[-2000:]}"
    said = " ".join(run.stdout.split())
    assert "incident-guest: block: GLM-5-NVFP4 must not be deployed here" in said
    assert "does not fail the run (deployment_gate_fail_on_block: false)" in said


@pytest.mark.slow
def test_deployment_gate_fail_on_block_fails_the_blocked_host(tmp_path: Path) -> None:
    run = gate(tmp_path, "-e", "deployment_gate_fail_on_block=true")
    assert run.returncode != 0
    said = " ".join(run.stdout.split())
    assert "This host fails the run (deployment_gate_fail_on_block: true)." in said
    assert "incident-guest: the deployment gate blocks GLM-5-NVFP4" in said
