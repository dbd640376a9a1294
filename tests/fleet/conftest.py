"""The two runs of the README's walkthrough that several fleet tests read, made once per test session.

`ansible-playbook -i tests/fleet/hosts.yml site.yml --tags audit,bench,gate`, once with --check and once for real
(reports written), each into a report directory of its own. Each run takes most of a minute on two cores; the
tests that judge the verdicts (test_site_fleet), the run's own health (test_walkthrough_live), the agreement of
the views it writes (test_views_agree), gate.yml run alone after it (test_gate_alone_agrees, on a copy of the
reports) and a right inventory path (test_inventory_path) read the same two runs instead of making their own.

A `torch` that only records its import stands first on the interpreters' path in both runs: any live workload (a
probe or an NCCL benchmark run on the controller for a replayed host) would import it, and test_walkthrough_live
asserts none did.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.test_site_fleet import INVENTORY, ROOT, ansible_playbook

# Every ansible-playbook these tests start, and every module it runs, keeps the bytecode of what it imports from
# AnsiballZ payloads (tests/zipcache/gpuhost_zipcache.py): about a fifth of a fleet run's CPU.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tests" / "zipcache"),
                                                        os.environ.get("PYTHONPATH")]))

TRAP = '''import os
with open(os.environ["GPUHOST_TORCH_TRAP"], "a") as marker:
    marker.write(str(os.getpid()) + "\\n")
raise ImportError("this torch only records that a live workload started")
'''


def walkthrough(tmp: Path, *extra: str) -> dict[str, Any]:
    """The README's command with the report directory in ``tmp``; its JSON output, exit code, report directory,
    and whether torch was imported."""
    trap_dir, marker = tmp / "trap", tmp / "torch-imported"
    (trap_dir / "torch").mkdir(parents=True)
    (trap_dir / "torch" / "__init__.py").write_text(TRAP)
    reports = tmp / "reports"
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
           "ANSIBLE_NOCOLOR": "1", "GPUHOST_TORCH_TRAP": str(marker),
           "PYTHONPATH": os.pathsep.join([str(trap_dir), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    command = [ansible_playbook(), "-i", str(INVENTORY), str(ROOT / "site.yml"), "--tags", "audit,bench,gate"]
    run = subprocess.run([*command, "-e", f"gpuhost_report_dir={reports}", *extra],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.stdout.startswith("{"), f"site.yml {' '.join(extra)}:\n{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
    return {"output": json.loads(run.stdout), "rc": run.returncode, "reports": reports,
            "torch_imported": marker.exists()}


@pytest.fixture(scope="session")
def site_check(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The walkthrough in check mode."""
    return walkthrough(tmp_path_factory.mktemp("site-check"), "--check")


@pytest.fixture(scope="session")
def site_live(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The walkthrough for real, its reports written."""
    return walkthrough(tmp_path_factory.mktemp("site-live"))
