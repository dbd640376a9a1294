"""The failures the `qm` stand-in plays (QM_STANDIN_<COMMAND>, or <run dir>/qm-standin-<command>): what the
fix's kill tests and the molecule scenario proxmox_fix rely on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import paths

STANDIN = paths.ROOT / "tests" / "proxmox_standin"
CLIQUES = " ".join(f"-set device.hostpci{n}.x-nv-gpudirect-clique=0" for n in range(2))
CONFIG = "cpu: host\nhostpci0: 0000:41:00.0,pcie=1\nhostpci1: 0000:81:00.0,pcie=1\nmachine: q35\n"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "120.conf").write_text(CONFIG)
    return {**os.environ, "QM_STANDIN_CONF_DIR": str(tmp_path / "conf"), "QM_STANDIN_RUN_DIR": str(tmp_path / "run")}


def qm(env: dict[str, str], *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(STANDIN / "qm"), *words], capture_output=True, text=True, env=env)


def status(env: dict[str, str]) -> str:
    return qm(env, "status", "120").stdout.strip()


def test_a_start_refused_applies_pending_and_leaves_the_vm_stopped(env: dict[str, str], tmp_path: Path) -> None:
    qm(env, "start", "120")
    qm(env, "set", "120", "--args", CLIQUES)  # staged in [PENDING]
    qm(env, "stop", "120")
    (tmp_path / "run" / "qm-standin-start").write_text("refuse-p2p\n")
    refused = qm(env, "start", "120")
    assert refused.returncode == 255 and "start failed: QEMU exited with code 1" in refused.stderr
    assert status(env) == "status: stopped"
    assert "[PENDING]" not in (tmp_path / "conf" / "120.conf").read_text()  # applied before QEMU, as qemu-server does
    qm(env, "set", "120", "--delete", "args")  # the old config (no clique) starts
    assert qm(env, "start", "120").returncode == 0 and status(env) == "status: running"


def test_every_start_fails_and_a_shutdown_times_out_by_the_environment(env: dict[str, str]) -> None:
    failing = qm({**env, "QM_STANDIN_START": "fail"}, "start", "120")
    assert failing.returncode == 255 and status(env) == "status: stopped"
    qm(env, "start", "120")
    timeout = qm({**env, "QM_STANDIN_SHUTDOWN": "timeout"}, "shutdown", "120")
    assert timeout.returncode == 255 and "got timeout" in timeout.stderr and status(env) == "status: running"
    assert qm(env, "shutdown", "120").returncode == 0 and status(env) == "status: stopped"


def test_a_set_failure_from_the_run_dir_changes_nothing(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "qm-standin-set").write_text("fail\n")
    failed = qm(env, "set", "120", "--balloon", "0")
    assert failed.returncode != 0 and (tmp_path / "conf" / "120.conf").read_text() == CONFIG
