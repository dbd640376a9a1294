"""The proxmox_fix_report module, and proxmox_vm_gpu's replay of a captured config (config_text)."""

from __future__ import annotations

import json
from pathlib import Path

import proxmox_fix_report
import proxmox_vm_gpu
import pytest

from tests import paths
from tests.unit.modules import run_module

CAPTURE = paths.ROOT / "tests" / "captures" / "proxmox-host-8xRTXPRO6000-vm-no-clique.json"
GPUS = [f"hostpci{n}" for n in range(8)]
NS = {"summary": {"verdict": "unfit"}, "p2p": {"read": [["X", "NS"], ["NS", "X"]]}, "findings": []}
OK = {"summary": {"verdict": "fit"}, "p2p": {"read": [["X", "OK"], ["OK", "X"]]}, "findings": []}
PROOF = [[None, {"peer_access": True, "ce_wrong": 0, "sm_wrong": 0}],
         [{"peer_access": True, "ce_wrong": 0, "sm_wrong": 0}, None]]


def config_text() -> str:
    return json.loads(CAPTURE.read_text())["files"]["/etc/pve/qemu-server/120.conf"]


def test_report_written_once_and_not_in_check_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = {"dest": str(tmp_path / "reports"), "guest": "glm5-vm", "node": "pve1", "vmid": 120,
            "before": {"facts": NS, "bench": {}}, "after": {"facts": OK, "bench": {"probe": {"proof": PROOF}}},
            "change": {"changes": [], "restarted": True}}
    planned = run_module(proxmox_fix_report.main, args, capsys, check_mode=True)
    assert planned["changed"] and planned["verdict"] == "fixed" and not (tmp_path / "reports").exists()
    written = run_module(proxmox_fix_report.main, args, capsys)
    assert written["changed"] and json.loads(Path(written["paths"]["json"]).read_text())["verdict"] == "fixed"
    assert Path(written["paths"]["markdown"]).read_text().startswith("# glm5-vm: P2P fix of VM 120 on pve1")
    assert not run_module(proxmox_fix_report.main, args, capsys)["changed"]


def test_report_refuses_a_guest_name_that_is_no_file_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(proxmox_fix_report.main, {"dest": str(tmp_path), "guest": "../x", "before": {}}, capsys)
    assert result["failed"] and "proxmox_fix_report:" in result["msg"] and not list(tmp_path.iterdir())


def test_replayed_config_is_planned_in_check_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = {"vmid": 120, "gpus": GPUS, "config_text": config_text(), "conf_dir": str(tmp_path / "none"),
            "backup_dir": str(tmp_path / "backups")}
    result = run_module(proxmox_vm_gpu.main, args, capsys, check_mode=True, diff=True)
    assert result["changed"] and result["pending"] is None and result["backup"] is None, result
    assert "-set device.hostpci7.x-nv-gpudirect-clique=0" in result["diff"]["after"]
    assert "hidden=1" in result["diff"]["before"] and "hidden" not in result["diff"]["after"]
    assert not (tmp_path / "backups").exists()


def test_replayed_config_is_never_applied(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(proxmox_vm_gpu.main, {"vmid": 120, "gpus": GPUS, "config_text": config_text(),
                                              "backup_dir": str(tmp_path / "backups")}, capsys)
    assert result["failed"] and "expected check mode with config_text" in result["msg"]
    assert not (tmp_path / "backups").exists()
