"""`make analyze` into the reports an audit wrote leaves the audit's fleet.md as it was.

The reproduction of issue 29: the fleet of captures audited into reports/ of a directory (the audit's default), then
`make analyze` from that directory with no REPORTS (the same reports/). The analysis wrote fleet.md with its inputs
only, cutting the audit's table from a row per host to one; the benchmark phase then kept the input's row as a host
of the fleet. Now it writes its own index, analysis.md, and fleet.md keeps every byte. The same for a host's own
report: material named after an audited host (its capture saved as h100-baremetal.json) wrote reports/h100-baremetal.md
and .json over the audit's; an analysis report's name now ends in .analysis.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.fleet.test_site_fleet import FLEET, INVENTORY, ROOT, ansible_playbook
from tests.paths import CAPTURES


def rows(table: str) -> list[str]:
    """The host of each row of a fleet table."""
    return [host for host in re.findall(r"^\| ([^|]+?) \| ", table.split("| Host |", 1)[1], re.MULTILINE)
            if not host.startswith("---")]


def test_make_analyze_after_an_audit_keeps_fleet_md_and_writes_its_own_index(tmp_path: Path) -> None:
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1", "PWD": str(tmp_path)}
    audit = subprocess.run([ansible_playbook(), "-i", str(INVENTORY), str(ROOT / "playbooks" / "audit.yml")],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert audit.returncode == 0, f"{audit.stdout[-4000:]}\n{audit.stderr[-2000:]}"
    fleet_md = tmp_path / "reports" / "fleet.md"
    audited = fleet_md.read_bytes()
    assert sorted(rows(audited.decode())) == sorted(FLEET)

    audited_host = {suffix: (tmp_path / "reports" / f"h100-baremetal{suffix}").read_bytes()
                    for suffix in (".md", ".json")}

    shutil.copy(CAPTURES / "baremetal-8xH100-SXM.json", tmp_path / "customer-node.json")
    shutil.copy(CAPTURES / "baremetal-8xH100-SXM.json", tmp_path / "h100-baremetal.json")
    analysis = subprocess.run(["make", "-C", str(ROOT), "analyze", "INPUT=customer-node.json h100-baremetal.json"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert analysis.returncode == 0, f"{analysis.stdout[-4000:]}\n{analysis.stderr[-2000:]}"

    assert fleet_md.read_bytes() == audited
    index = (tmp_path / "reports" / "analysis.md").read_text()
    assert index.startswith("# Offline analysis of material\n")
    assert rows(index) == ["customer-node.analysis", "h100-baremetal.analysis"]
    assert (tmp_path / "reports" / "customer-node.analysis.md").is_file()
    assert (tmp_path / "reports" / "h100-baremetal.analysis.md").is_file()
    for suffix, content in audited_host.items():
        assert (tmp_path / "reports" / f"h100-baremetal{suffix}").read_bytes() == content, suffix
