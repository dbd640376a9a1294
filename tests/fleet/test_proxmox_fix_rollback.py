"""playbooks/proxmox_fix.yml run for real on this machine, without containers, against the `qm` stand-in: the
rollbacks of issue 41.

Both hosts are local connections. The node `pve` is this machine audited live (it holds no Proxmox VE) with the
stand-in's qm on the PATH and VM 120, the incident's config from its node's capture, in a temporary conf dir;
the guest's hardware is what the stand-in's `qm start` shows it (QM_STANDIN_GUEST_DIR, the views of
tests/proxmox_standin/guest_views.py), replayed by its audit and benchmark. The live audit of this machine finds
no VM, so the guest is linked to its VM the way the playbook links a guest whose P2P already works: by the last
report of its fix (node and vmid), written here before the first run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.fleet.test_site_fleet import ROOT, ansible_playbook

STANDIN = ROOT / "tests" / "proxmox_standin"
NODE_CAPTURE = ROOT / "tests" / "captures" / "proxmox-host-8xRTXPRO6000-vm-no-clique.json"
GPUS = [f"hostpci{n}" for n in range(8)]


class Site:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf_dir, self.run_dir, self.guest = root / "conf", root / "run", root / "guest"
        self.views, self.backups, self.reports = root / "views", root / "backups", root / "reports"
        for directory in (self.conf_dir, self.run_dir, self.reports):
            directory.mkdir()
        self.conf.write_text(json.loads(NODE_CAPTURE.read_text())["files"]["/etc/pve/qemu-server/120.conf"])
        subprocess.run([sys.executable, str(STANDIN / "guest_views.py"), str(self.views)], check=True)
        (self.reports / "guest-p2p-fix.json").write_text(json.dumps({"node": "pve", "vmid": 120}))
        guest = {"gpu_audit_capture": f"{self.guest}/capture.json", "gpu_bench_probe_log": f"{self.guest}/probe.jsonl",
                 "gpu_bench_nccl_log": f"{self.guest}/nccl.txt", "proxmox_fix_booted_marker": f"{self.guest}/booted",
                 "proxmox_fix_boot_timeout": 5}
        node = {"proxmox_vm_gpu_gpus": GPUS, "proxmox_vm_gpu_conf_dir": str(self.conf_dir),
                "proxmox_vm_gpu_backup_dir": str(self.backups), "proxmox_vm_gpu_shutdown_timeout": 5,
                "proxmox_vm_gpu_start_timeout": 5}
        inventory = {"all": {"vars": {"ansible_connection": "local",
                                      "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                                      "gpuhost_report_dir": str(self.reports)},
                             "children": {"gpu_hosts": {"hosts": {"guest": guest}},
                                          "proxmox_hosts": {"hosts": {"pve": node}}}}}
        (root / "hosts.yml").write_text(yaml.safe_dump(inventory))
        self.env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
                    "PATH": f"{STANDIN}{os.pathsep}{os.environ['PATH']}", "QM_STANDIN_CONF_DIR": str(self.conf_dir),
                    "QM_STANDIN_RUN_DIR": str(self.run_dir), "QM_STANDIN_GUEST_DIR": str(self.guest),
                    "QM_STANDIN_GUEST_VIEWS": str(self.views), "QM_STANDIN_GUEST_VMID": "120"}
        self.qm("start")

    @property
    def conf(self) -> Path:
        return self.conf_dir / "120.conf"

    def qm(self, command: str) -> str:
        return subprocess.run([str(STANDIN / "qm"), command, "120"], check=True, capture_output=True, text=True,
                              env=self.env).stdout.strip()

    def fix(self, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([ansible_playbook(), "-i", str(self.root / "hosts.yml"),
                               str(ROOT / "playbooks" / "proxmox_fix.yml"), "-e", "proxmox_fix_guest=guest", *extra],
                              cwd=self.root, env=self.env, capture_output=True, text=True, timeout=400)

    def report(self) -> dict:
        return json.loads((self.reports / "guest-p2p-fix.json").read_text())

    def record(self) -> dict:
        return json.loads((self.backups / "120.p2p-fix.json").read_text())


def said(run: subprocess.CompletedProcess[str]) -> str:
    return " ".join((run.stdout + run.stderr).split())  # the callback wraps long lines


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path)


def test_the_two_step_flow_rolls_back_the_change_of_its_first_run(site: Site) -> None:
    """Issue 41, reproduction 1: the change made with the restart not allowed, the restart in a second run, and a
    probe whose data does not arrive: the second run restores the config the first run backed up."""
    original = site.conf.read_bytes()
    first = site.fix()
    assert first.returncode == 0, said(first)[-3000:]
    assert site.report()["verdict"] == "pending"
    (site.views / "data-wrong").touch()
    second = site.fix("-e", "proxmox_vm_gpu_restart_ok=true")
    printed = said(second)
    assert second.returncode != 0, printed[-3000:]
    assert "nothing changed, nothing restarted" not in printed and "NoneType" not in printed, printed[-3000:]
    assert site.conf.read_bytes() == original and site.qm("status") == "status: running"
    assert "after the change the P2P probe found p2p_write_not_arriving" in printed
    report = site.report()
    assert report["verdict"] == "restored" and report["restored"]["backup"] == site.record()["backup"]
    assert site.record()["state"] == "rolled_back"
    assert (site.guest / "booted").read_text().strip() == "p2p-ns"  # the guest runs its old config again


def test_a_vm_that_does_not_start_with_the_change_runs_its_old_config_and_is_reported(site: Site) -> None:
    """Issue 41, reproduction 2: qm set, qm shutdown, then qm start fails (vfio refusing the new config)."""
    original = site.conf.read_bytes()
    (site.run_dir / "qm-standin-start").write_text("refuse-p2p\n")
    run = site.fix("-e", "proxmox_vm_gpu_restart_ok=true")
    printed = said(run)
    assert run.returncode != 0, printed[-3000:]
    assert site.conf.read_bytes() == original and site.qm("status") == "status: running"
    assert "VM 120 did not start with the new config: qm start 120 exited 255" in printed
    report = site.report()
    assert report["verdict"] == "restored" and "did not start with the new config" in report["restored"]["reason"]
    assert report["after"] is None and site.record()["state"] == "rolled_back"
