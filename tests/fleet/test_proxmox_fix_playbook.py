"""playbooks/proxmox_fix.yml in check mode over the capture fleet: the incident guest's VM is planned on its
replayed node from the VM config in that node's capture; the diff is shown and nothing is written anywhere."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.fleet.test_site_fleet import ROOT, ansible_playbook

CLIQUES = " ".join(f"-set device.hostpci{n}.x-nv-gpudirect-clique=0" for n in range(8))


def proxmox_fix(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1", "PWD": str(cwd)}
    return subprocess.run([ansible_playbook(), "-i", str(ROOT / "tests" / "fleet" / "hosts.yml"),
                           str(ROOT / "playbooks" / "proxmox_fix.yml"), *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_check_mode_shows_the_config_diff_on_the_replayed_node(tmp_path: Path) -> None:
    run = proxmox_fix(tmp_path, "--check", "--diff", "-e", "proxmox_fix_guest=incident-guest")
    assert run.returncode == 0, f"{run.stdout[-4000:]}\n{run.stderr[-2000:]}"
    diff = run.stdout[run.stdout.index("--- before: /etc/pve/qemu-server/120.conf"):]
    diff = diff[:diff.index("changed: [pve-no-clique]")]
    assert "-cpu: host,hidden=1\n+cpu: host\n" in diff and f"+args: {CLIQUES}\n" in diff and "+balloon: 0\n" in diff
    printed = " ".join(run.stdout.split())  # the callback wraps long lines
    assert "incident-guest: check mode: VM 120: would run qm set 120 --cpu host" in printed
    assert "nothing was changed, the guest is not measured again" in printed
    assert list(tmp_path.iterdir()) == []  # no report, no backup, no capture


def test_the_guest_must_be_named(tmp_path: Path) -> None:
    run = proxmox_fix(tmp_path, "--check")
    assert run.returncode != 0 and "expected -e proxmox_fix_guest=" in " ".join((run.stdout + run.stderr).split())
