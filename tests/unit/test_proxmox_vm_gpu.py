"""The proxmox_vm_gpu module against the `qm` stand-in (tests/proxmox_standin/qm) on PATH.

The stand-in edits a real-format config in a temporary conf dir, staging changes in [PENDING] while its
pid file says the VM runs, as qemu-server does. sysfs is a small tree under tmp_path.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import proxmox_vm_gpu
import pytest

from tests import paths
from tests.unit.modules import run_module
from tests.unit.stray_processes import SLACK_S

STANDIN = paths.ROOT / "tests" / "proxmox_standin"
FIXTURES = paths.FIXTURES / "proxmox"
VMID = 210
FOUR_GPUS = "q35-4gpu-hidden-short-form_pve7.4.conf"  # hostpci0..3 on 01:00, 41:00, 81:00.0, c1:00.0


class Host:
    def __init__(self, root: Path) -> None:
        self.conf_dir, self.run_dir, self.sysfs = root / "conf", root / "run", root / "sys"
        self.backups = root / "backups"
        self.conf_dir.mkdir()
        self.run_dir.mkdir()

    @property
    def conf(self) -> Path:
        return self.conf_dir / f"{VMID}.conf"

    def args(self, **extra: Any) -> dict[str, Any]:
        return {"vmid": VMID, "conf_dir": str(self.conf_dir), "backup_dir": str(self.backups),
                "sysfs_dir": str(self.sysfs), **extra}

    def qm(self, *words: str) -> str:
        return subprocess.run([str(STANDIN / "qm"), *words], check=True, capture_output=True, text=True).stdout

    def device(self, bdf: str, vendor: str, device_class: str) -> None:
        path = self.sysfs / "bus" / "pci" / "devices" / bdf
        path.mkdir(parents=True)
        (path / "vendor").write_text(vendor + "\n")
        (path / "class").write_text(device_class + "\n")

    def numa_nodes(self, count: int) -> None:
        for node in range(count):
            (self.sysfs / "devices" / "system" / "node" / f"node{node}").mkdir(parents=True)


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Host:
    made = Host(tmp_path)
    made.conf.write_bytes((FIXTURES / FOUR_GPUS).read_bytes())
    for bdf in ("0000:01:00.0", "0000:41:00.0", "0000:81:00.0", "0000:c1:00.0"):
        made.device(bdf, "0x10de", "0x030000")
    made.numa_nodes(2)
    monkeypatch.setenv("PATH", f"{STANDIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("QM_STANDIN_CONF_DIR", str(made.conf_dir))
    monkeypatch.setenv("QM_STANDIN_RUN_DIR", str(made.run_dir))
    return made


def warnings(result: dict[str, Any]) -> list[str]:
    return [w["event"]["msg"] if isinstance(w, dict) else w for w in result.get("warnings", [])]


def run(capsys: pytest.CaptureFixture[str], args: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return run_module(proxmox_vm_gpu.main, args, capsys, **kwargs)


def test_stopped_vm_is_fixed_once_with_a_backup(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    original = host.conf.read_bytes()
    result = run(capsys, host.args(), diff=True)
    assert result["changed"] and not result.get("failed"), result
    assert [g["hostpci"] for g in result["gpus"]] == ["hostpci0", "hostpci1", "hostpci2", "hostpci3"]
    assert Path(result["backup"]).read_bytes() == original and Path(result["backup"]).parent == host.backups
    assert result["command"][:3] == ["qm", "set", str(VMID)] and result["pending"] is False
    assert not result["restart_needed"] and result["restart_command"] is None
    assert "cpu: host,hidden=1,flags=+pdpe1gb\n" in result["diff"]["before"]
    assert "cpu: host,flags=+pdpe1gb\n" in result["diff"]["after"]
    text = host.conf.read_text()
    assert "hostpci0: 0000:01:00.0,pcie=1\n" in text and "balloon: 0\n" in text and "[PENDING]" not in text
    assert text.startswith("#Gaming-era template")  # the stand-in, like the module, leaves other lines alone

    # The fix stays open until the guest is measured: a second run changes nothing, takes no second backup and
    # still names the first, the config the VM had before the fix.
    again = run(capsys, host.args())
    assert not again["changed"] and again["command"] == [] and again["backup"] == result["backup"]
    assert again["fix"]["state"] == "applied" and again["next"] == "wait_start"  # stopped: its next start applies it
    assert sorted(p.name for p in host.backups.glob("*.conf.*")) == [Path(result["backup"]).name]


def test_running_vm_gets_pending_changes_and_the_restart(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    host.qm("start", str(VMID))
    current = host.conf.read_text()
    result = run(capsys, host.args())
    assert result["changed"] and result["pending"] is True and result["restart_needed"] is True
    assert result["restart_command"] == f"qm shutdown {VMID} && qm start {VMID}"
    assert "a reboot inside the guest keeps the old QEMU" in result["msg"]
    assert set(result["pending_keys"]) == {"hostpci0", "hostpci1", "cpu", "args", "balloon", "numa"}
    assert host.conf.read_text().startswith(current.rstrip("\n") + "\n\n[PENDING]\n")

    staged = run(capsys, host.args())
    assert not staged["changed"] and staged["pending"] is True and staged["restart_needed"] is True

    host.qm("shutdown", str(VMID))
    host.qm("start", str(VMID))
    started = run(capsys, host.args())
    assert not started["changed"] and started["pending"] is False and started["restart_command"] is None
    assert "kvm=off" not in host.qm("showcmd", str(VMID))


def test_check_mode_touches_nothing(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    original = host.conf.read_bytes()
    result = run(capsys, host.args(cliques=[["hostpci0", "hostpci1"], ["0000:81:00.0", "hostpci3"]]),
                 check_mode=True, diff=True)
    assert result["changed"] and result["backup"] is None and not host.backups.exists()
    assert host.conf.read_bytes() == original
    assert result["pending"] is False and result["restart_needed"] is False  # the stand-in says stopped
    assert "device.hostpci2.x-nv-gpudirect-clique=1" in result["command_line"]
    assert [g["clique"] for g in result["gpus"]] == [0, 0, 1, 1]
    assert "hostpci1: 0000:41:00.0,pcie=1\n" in result["diff"]["after"]


def test_default_gpus_are_the_nvidia_display_functions(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    (host.sysfs / "bus" / "pci" / "devices" / "0000:c1:00.0" / "vendor").write_text("0x1002\n")
    (host.sysfs / "bus" / "pci" / "devices" / "0000:81:00.0" / "vendor").unlink()
    result = run(capsys, host.args(), check_mode=True)
    assert [g["hostpci"] for g in result["gpus"]] == ["hostpci0", "hostpci1"]
    assert any("0000:81:00.0" in w and "name it in gpus" in w for w in warnings(result))


def test_numa_false_turns_it_off_and_true_on(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    host.conf.write_text("machine: q35\ncpu: host\nballoon: 0\nnuma: 1\nhostpci0: 0000:41:00.0,pcie=1\n"
                         "args: -set device.hostpci0.x-nv-gpudirect-clique=0\n")
    assert run(capsys, host.args(numa="false"), check_mode=True)["changes"] == [
        {"key": "numa", "old": "1", "new": "0"}]
    assert not run(capsys, host.args(numa=True))["changed"]


@pytest.mark.parametrize(("setup", "args", "message"), [
    ("no_qm", {}, "expected the qm command of Proxmox VE on the PATH"),
    ("qm_fails", {}, "exited 255"),
    ("qm_ignores", {}, "to hold the change"),
    ("no_conf", {}, "expected the config of VM 210"),
    ("no_gpu", {}, "expected NVIDIA GPUs among the hostpci lines"),
    ("", {"cliques": {"20": ["hostpci0"]}}, "clique ids 0..15"),
    ("", {"numa": "sometimes"}, "expected numa to be auto, true or false"),
    ("", {"vmid": 7}, "expected a VM id from 100"),
])
def test_failures_say_what_to_do(host: Host, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                 setup: str, args: dict[str, Any], message: str) -> None:
    original = host.conf.read_bytes()
    if setup == "no_qm":
        monkeypatch.setenv("PATH", str(host.run_dir))
    elif setup == "qm_fails":
        monkeypatch.setenv("QM_STANDIN_SET", "fail")
    elif setup == "qm_ignores":
        monkeypatch.setenv("QM_STANDIN_SET", "ignore")
    elif setup == "no_conf":
        host.conf.unlink()
    elif setup == "no_gpu":
        for vendor in (host.sysfs / "bus" / "pci" / "devices").glob("*/vendor"):
            vendor.write_text("0x8086\n")
    result = run(capsys, host.args(**args))
    assert result["failed"] and message in result["msg"], result["msg"]
    assert "Traceback" not in result["msg"]
    if setup in ("qm_fails", "qm_ignores"):
        assert Path(result["backup"]).read_bytes() == original and result["backup"] in result["msg"]
    elif host.conf.exists():
        assert host.conf.read_bytes() == original and not host.backups.exists()


@pytest.fixture
def hanging_qm(host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A qm that never answers, as on a node whose pmxcfs lost quorum, with 1 s limits."""
    bin_dir = tmp_path / "hanging-bin"
    bin_dir.mkdir()
    qm = bin_dir / "qm"
    qm.write_text("#!/bin/sh\nexec sleep 60\n")
    qm.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(proxmox_vm_gpu, "QM_STATUS_TIMEOUT_S", 1)
    monkeypatch.setattr(proxmox_vm_gpu, "QM_SET_TIMEOUT_S", 1)
    return qm


def test_check_mode_does_not_wait_for_a_qm_status_that_never_answers(
        host: Host, hanging_qm: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    result = run(capsys, host.args(), check_mode=True)
    assert time.monotonic() - started < 1 + SLACK_S
    assert result["changed"] and not result.get("failed") and result["pending"] is None
    assert any("qm status 210 gave no answer within 1 s" in w for w in warnings(result))


def test_a_qm_set_that_never_answers_fails_naming_the_backup(
        host: Host, hanging_qm: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original = host.conf.read_bytes()
    started = time.monotonic()
    result = run(capsys, host.args())
    assert time.monotonic() - started < 1 + SLACK_S
    assert result["failed"] and "gave no answer within 1 s" in result["msg"] and result["backup"] in result["msg"]
    assert Path(result["backup"]).read_bytes() == original
