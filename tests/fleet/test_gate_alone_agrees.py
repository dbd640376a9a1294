"""gate.yml alone decides what site.yml decided for the same host (issue 29).

h100-baremetal's probe log proves P2P over NVLink in site.yml's bench phase, and the gate turns SGLang's custom
all-reduce on. gate.yml run afterwards on its own had no benchmark in its play: it left custom all-reduce to SGLang's
own P2P check, another launch for the same host and the same facts. It now takes the benchmark the bench phase folded
into the host's report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.test_site_fleet import INVENTORY, ROOT, ansible_playbook, task_results

HOST = "h100-baremetal"


def play(playbook: str, reports: Path, *extra: str) -> dict[str, Any]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
           "ANSIBLE_NOCOLOR": "1"}
    run = subprocess.run([ansible_playbook(), "-i", str(INVENTORY), str(ROOT / playbook), "--limit", HOST,
                          "-e", f"gpuhost_report_dir={reports}", *extra],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"{run.stdout[-4000:]}\n{run.stderr[-2000:]}"
    return json.loads(run.stdout)


def launch(output: dict[str, Any]) -> dict[str, Any]:
    result = task_results({"output": output}, "Keep the verdict for the deployment")[HOST]
    gate = result["ansible_facts"]["deployment_gate_result"]
    return {"verdict": gate["verdict"], "args": gate["launch"]["args"],
            "custom_all_reduce": gate["launch"]["custom_all_reduce"],
            "all_reduce": gate["launch"]["all_reduce"]["path"], "p2p": gate["launch"]["p2p"]["state"]}


@pytest.mark.slow
def test_gate_yml_after_site_yml_launches_as_site_yml_did(tmp_path: Path, site_live: dict[str, Any]) -> None:
    # site.yml's run is the walkthrough's over the whole fleet (tests/fleet/conftest.py), which decides for this
    # host as a run limited to it would; gate.yml runs on a copy of its report directory, which other tests read.
    assert site_live["rc"] == 0, site_live["output"]["stats"]
    site = launch(site_live["output"])
    assert site["custom_all_reduce"] is True and site["p2p"] == "proven"

    reports = tmp_path / "reports"
    shutil.copytree(site_live["reports"], reports)
    alone = play("playbooks/gate.yml", reports)
    assert launch(alone) == site
    said = task_results({"output": alone}, "Say that the benchmark comes from the host's report")[HOST]["msg"]
    assert f"{reports}/{HOST}.json" in said and "P2P probe" in said
