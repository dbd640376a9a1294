"""Runs of the Proxmox P2P fix at the module level, as playbooks/proxmox_fix.yml makes them, against the `qm`
stand-in (tests/proxmox_standin/qm), with a kill after any step that changes something.

A run is the playbook's sequence of module calls: proxmox_vm_gpu's apply step, its restart step when the
result's ``next`` asks for it (``restart`` with the restart allowed, ``start`` always), the guest measured
(the probe's outcome given: passes, or finds data that did not arrive), then the step ``proven`` or
``restore``, and proxmox_fix_report writing the report in between, as the playbook does. A kill is a
``Killed`` raised right after the Nth step that changes the node (a record written, the backup, a ``qm``
command other than ``status``, the backup put back): the run ends there, as under kill -9, with nothing
after it run.

The stand-in runs in this process (its ``main``, with its output and exit code caught) rather than as one Python
process per ``qm`` call: a kill matrix makes about a thousand calls, and each process start cost about 0.1 s of CPU
for nothing the matrix judges. The module's own ``run_qm`` (a bounded subprocess) is run for real by the playbook
tests (tests/fleet/test_proxmox_fix_rollback.py) and molecule/proxmox_fix.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import io
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import proxmox_fix_report
import proxmox_vm_gpu
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.process import Finished

from tests import paths
from tests.unit.modules import run_module

STANDIN = paths.ROOT / "tests" / "proxmox_standin"
VMID = 210
CONFIG = paths.FIXTURES / "proxmox" / "q35-4gpu-hidden-short-form_pve7.4.conf"  # 4 GPUs, hidden, no clique
GPUS = ["hostpci0", "hostpci1", "hostpci2", "hostpci3"]
# What the guest's audit and probe show, before and after: P2P not supported, then granted and proven (or not).
NS = {"summary": {"verdict": "unfit"}, "p2p": {"read": [["X", "NS"], ["NS", "X"]]}, "findings": []}
OK = {"summary": {"verdict": "fit"}, "p2p": {"read": [["X", "OK"], ["OK", "X"]]}, "findings": []}
PROOF = [[None, {"peer_access": True, "ce_wrong": 0, "sm_wrong": 0}],
         [{"peer_access": True, "ce_wrong": 0, "sm_wrong": 0}, None]]
WRONG = [[None, {"peer_access": True, "ce_wrong": 4, "sm_wrong": 4}],
         [{"peer_access": True, "ce_wrong": 0, "sm_wrong": 0}, None]]
PROBE_FAILED = "after the change the P2P probe found p2p_write_not_arriving"


def _load_standin() -> Any:
    loader = importlib.machinery.SourceFileLoader("qm_standin", str(STANDIN / "qm"))
    spec = importlib.util.spec_from_loader("qm_standin", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


QM_STANDIN = _load_standin()


def standin_qm(argv: list[str], _timeout_s: float) -> Finished:
    """``qm`` as the module's run_qm gives it, played by the stand-in's main in this process."""
    out, err, rc = io.StringIO(), io.StringIO(), 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            QM_STANDIN.main(argv[1:])
        except SystemExit as exit_:
            rc = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return Finished(rc=rc, stdout=out.getvalue().encode(), stderr=err.getvalue().encode(), timed_out=False)


class Killed(BaseException):
    """The run is killed here (not an Exception: nothing in the module may catch it)."""


@dataclass
class Node:
    """A Proxmox node played by the stand-in: VM 210 running from a real config, a backup dir, a report dir."""

    root: Path
    steps: list[str] = field(default_factory=list)  # every step that changed the node, in order
    kill_after: int | None = None

    def __post_init__(self) -> None:
        self.conf_dir, self.run_dir = self.root / "conf", self.root / "run"
        self.backups, self.reports = self.root / "backups", self.root / "reports"
        self.conf_dir.mkdir()
        self.run_dir.mkdir()
        self.conf.write_bytes(CONFIG.read_bytes())
        self.env = {"QM_STANDIN_CONF_DIR": str(self.conf_dir), "QM_STANDIN_RUN_DIR": str(self.run_dir),
                    "PATH": f"{STANDIN}{os.pathsep}{os.environ['PATH']}"}

    @property
    def conf(self) -> Path:
        return self.conf_dir / f"{VMID}.conf"

    def qm(self, *words: str) -> str:
        return subprocess.run([str(STANDIN / "qm"), *words], check=True, capture_output=True, text=True,
                              env={**os.environ, **self.env}).stdout

    def running(self) -> bool:
        return (self.run_dir / f"{VMID}.pid").exists()

    def fault(self, command: str, mode: str | None) -> None:
        """The failure the stand-in plays for qm <command> (its file in the run dir), or none."""
        path = self.run_dir / f"qm-standin-{command}"
        if mode:
            path.write_text(mode + "\n")
        else:
            path.unlink(missing_ok=True)

    def record(self) -> dict[str, Any] | None:
        path = self.backups / f"{VMID}.p2p-fix.json"
        return json.loads(path.read_text()) if path.exists() else None

    def report(self) -> dict[str, Any] | None:
        path = self.reports / "guest-p2p-fix.json"
        return json.loads(path.read_text()) if path.exists() else None

    def step(self, name: str) -> None:
        self.steps.append(name)
        if self.kill_after is not None and len(self.steps) == self.kill_after:
            raise Killed(name)


@contextmanager
def watched(node: Node, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    """Every step of proxmox_vm_gpu that changes the node goes through node.step (and may be killed there)."""

    def after(name: Callable[..., str], function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            result = function(*args, **kwargs)
            node.step(name(*args, **kwargs))
            return result
        return wrapped

    def qm_step(argv: list[str], *_rest: Any) -> str:
        return f"qm {argv[1]}"

    real_run_qm = standin_qm

    def run_qm(argv: list[str], timeout_s: float) -> Any:
        if argv[1] == "status":  # reads only: a kill after it is a kill before the next step
            return real_run_qm(argv, timeout_s)
        return after(qm_step, real_run_qm)(argv, timeout_s)

    monkeypatch.setattr(proxmox_vm_gpu, "run_qm", run_qm)
    monkeypatch.setattr(proxmox_vm_gpu, "write_atomically",
                        after(lambda _p, text: f"record {json.loads(text)['state']}", proxmox_vm_gpu.write_atomically))
    monkeypatch.setattr(proxmox_vm_gpu, "write_backup", after(lambda *_a: "backup", proxmox_vm_gpu.write_backup))
    monkeypatch.setattr(proxmox_vm_gpu, "put_back", after(lambda *_a: "put back", proxmox_vm_gpu.put_back))
    monkeypatch.setattr(proxmox_vm_gpu, "POLL_S", 0.05)
    for key, value in node.env.items():
        monkeypatch.setenv(key, value)
    yield node


def vm_gpu(capsys: pytest.CaptureFixture[str], node: Node, **args: Any) -> dict[str, Any]:
    return run_module(proxmox_vm_gpu.main, {"vmid": VMID, "gpus": GPUS, "conf_dir": str(node.conf_dir),
                                            "backup_dir": str(node.backups), "shutdown_timeout": 5,
                                            "start_timeout": 5, **args}, capsys)


def report(capsys: pytest.CaptureFixture[str], node: Node, change: dict[str, Any], after: dict[str, Any] | None,
           restored: dict[str, Any] | None) -> str:
    kept = {key: value for key, value in change.items() if key not in ("warnings", "deprecations")}  # as registered
    args = {"dest": str(node.reports), "guest": "guest", "node": "pve", "vmid": VMID,
            "before": {"facts": NS, "bench": {}}, "change": kept}
    if after is not None:
        args["after"] = after
    if restored is not None:
        args["restored"] = restored
    return run_module(proxmox_fix_report.main, args, capsys)["verdict"]


def fix_run(capsys: pytest.CaptureFixture[str], node: Node, restart_ok: bool, probe_passes: bool) -> str:
    """One run of the playbook's sequence; what it ended with: proven, rolled_back, pending, none, or failed."""
    change = vm_gpu(capsys, node)
    if not change.get("failed") and (change["next"] == "start" or (change["next"] == "restart" and restart_ok)):
        change = {**change, **vm_gpu(capsys, node, step="restart")}
    if change.get("failed"):
        return "failed: " + change["msg"]
    if change["next"] == "report_rolled_back":
        report(capsys, node, change, None, {"reason": change["reason"], "backup": change["backup"]})
        return "rolled_back"
    if change["next"] in ("restart", "wait_start"):
        if change["changed"]:
            report(capsys, node, change, None, None)
        return "pending"
    if change["next"] != "measure":
        return change["next"]
    if not probe_passes:
        restored = vm_gpu(capsys, node, step="restore", reason=PROBE_FAILED)
        if restored.get("failed"):
            return "failed: " + restored["msg"]
        report(capsys, node, change, {"facts": OK, "bench": {"probe": {"proof": WRONG}}},
               {"reason": PROBE_FAILED, "backup": restored["backup"]})
        return "rolled_back"
    verdict = report(capsys, node, change, {"facts": OK, "bench": {"probe": {"proof": PROOF}}}, None)
    proven = vm_gpu(capsys, node, step="proven", verdict=verdict)
    return "failed: " + proven["msg"] if proven.get("failed") else "proven"
