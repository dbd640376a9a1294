"""The `qm` stand-in's guest (QM_STANDIN_GUEST_DIR): what `start` shows the guest, and `stop` takes away.

The molecule scenario proxmox_fix relies on it: the guest's audit replays the view the VM's config gives.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import paths

STANDIN = paths.ROOT / "tests" / "proxmox_standin"
CAPTURE = paths.ROOT / "tests" / "captures" / "proxmox-host-8xRTXPRO6000-vm-no-clique.json"
CLIQUES = " ".join(f"-set device.hostpci{n}.x-nv-gpudirect-clique=0" for n in range(8))


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    conf_dir, views = tmp_path / "conf", tmp_path / "views"
    conf_dir.mkdir()
    (conf_dir / "120.conf").write_text(json.loads(CAPTURE.read_text())["files"]["/etc/pve/qemu-server/120.conf"])
    subprocess.run([sys.executable, str(STANDIN / "guest_views.py"), str(views)], check=True)
    monkeypatch.setenv("QM_STANDIN_CONF_DIR", str(conf_dir))
    monkeypatch.setenv("QM_STANDIN_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("QM_STANDIN_GUEST_DIR", str(tmp_path / "guest"))
    monkeypatch.setenv("QM_STANDIN_GUEST_VIEWS", str(views))
    return tmp_path


def qm(*words: str) -> None:
    subprocess.run([str(STANDIN / "qm"), *words], check=True, capture_output=True, text=True)


def seen(node: Path) -> str | None:
    booted = node / "guest" / "booted"
    return booted.read_text().strip() if booted.exists() else None


def test_the_guest_sees_p2p_only_once_qemu_starts_with_the_clique(node: Path) -> None:
    qm("start", "120")
    assert seen(node) == "p2p-ns" and (node / "guest" / "nccl.txt").exists()
    qm("set", "120", "--args", CLIQUES, "--cpu", "host")
    assert seen(node) == "p2p-ns"  # staged in [PENDING]: the running QEMU keeps its old command line
    qm("shutdown", "120")
    assert sorted(p.name for p in (node / "guest").iterdir()) == []  # the guest is down
    qm("start", "120")
    assert seen(node) == "p2p-ok"
    capture = json.loads((node / "guest" / "capture.json").read_text())
    assert capture["nvml"]["p2p"]["read"][0][1] == 0 and not (node / "guest" / "nccl.txt").exists()


def test_hidden_kvm_keeps_p2p_off_and_markers_break_the_start(node: Path) -> None:
    qm("set", "120", "--args", CLIQUES)  # the [PENDING] cpu hidden=1 folds in: kvm=off
    qm("start", "120")
    assert seen(node) == "p2p-ns"
    qm("stop", "120")
    qm("set", "120", "--cpu", "host")
    (node / "views" / "data-wrong").touch()
    qm("start", "120")
    assert seen(node) == "p2p-data-wrong"
    probe = [json.loads(line) for line in (node / "guest" / "probe.jsonl").read_text().splitlines()]
    assert sum(1 for e in probe if e.get("event") == "proof" and e.get("ce_wrong")) == 1
    qm("stop", "120")
    (node / "views" / "no-boot").touch()
    qm("start", "120")
    assert seen(node) is None


def test_another_vm_leaves_the_guest_alone(node: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QM_STANDIN_GUEST_VMID", "130")
    qm("start", "120")
    assert not (node / "guest").exists()
