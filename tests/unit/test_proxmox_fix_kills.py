"""The Proxmox P2P fix killed at every step, and under every failure the `qm` stand-in plays: after the next run
the VM runs its original config (byte for byte) or the fix, proven, and the fix report says which.

The runs are the playbook's sequence of module calls (tests/unit/fix_runs.py); the record of the fix on the node
(``<backup_dir>/<vmid>.p2p-fix.json``) is what lets the next run carry on or roll back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.unit.fix_runs import PROBE_FAILED, VMID, Killed, Node, fix_run, vm_gpu, watched


@dataclass(frozen=True)
class Scenario:
    name: str
    restart_ok: tuple[bool, ...]  # one run each: the two-step flow is (False, True)
    probe_passes: bool
    ends: str  # proven or rolled_back
    faults: dict[str, str] = field(default_factory=dict)  # qm command -> the failure the stand-in plays


SCENARIOS = [
    Scenario("restart allowed, the probe passes", (True,), True, "proven"),
    Scenario("restart allowed, data does not arrive", (True,), False, "rolled_back"),
    Scenario("two-step, the probe passes", (False, True), True, "proven"),
    Scenario("two-step, data does not arrive", (False, True), False, "rolled_back"),
    Scenario("qm start refuses the new config", (True,), True, "rolled_back", {"start": "refuse-p2p"}),
    Scenario("qm shutdown times out", (True,), True, "proven", {"shutdown": "timeout"}),
]


def started(root: Path, scenario: Scenario) -> tuple[Node, bytes]:
    """A node whose VM runs (its [PENDING] folded in by the start, as Proxmox does), and its config then."""
    root.mkdir()
    node = Node(root)
    node.qm("start", str(VMID))
    for command, mode in scenario.faults.items():
        node.fault(command, mode)
    return node, node.conf.read_bytes()


def ending(node: Node, original: bytes, expected: str) -> str:
    """What the node and the report show, in words; 'ok' when it is the expected end."""
    record, report = node.record() or {}, node.report() or {}
    text = node.conf.read_text()
    if expected == "proven":
        good = ("x-nv-gpudirect-clique=0" in text and "[PENDING]" not in text and "hidden=1" not in text
                and record.get("state") == "proven" and report.get("verdict") == "fixed")
    else:
        good = node.conf.read_bytes() == original and record.get("state") == "rolled_back" \
            and report.get("verdict") == "restored"
    good = good and node.running()
    config = "original config" if node.conf.read_bytes() == original else "fix" if "clique" in text else "other"
    seen = (f"{config}, {'running' if node.running() else 'STOPPED'}, record {record.get('state')}, "
            f"report {report.get('verdict')}")
    return "ok" if good else seen


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_killed_after_every_step_the_next_run_ends_it(scenario: Scenario, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    node, original = started(tmp_path / "clean", scenario)
    with watched(node, monkeypatch):
        outcomes = [fix_run(capsys, node, restart_ok, scenario.probe_passes) for restart_ok in scenario.restart_ok]
    assert outcomes[-1] == scenario.ends, outcomes
    assert ending(node, original, scenario.ends) == "ok"
    steps = list(node.steps)
    assert len(steps) >= 8, steps

    matrix = []
    for kill_after in range(len(steps) + 1):  # 0: killed before the first step
        node, original = started(tmp_path / f"kill-{kill_after}", scenario)
        node.kill_after = kill_after or None
        with watched(node, monkeypatch):
            try:
                if kill_after == 0:
                    raise Killed("before the first step")
                for restart_ok in scenario.restart_ok:
                    fix_run(capsys, node, restart_ok, scenario.probe_passes)
            except Killed:
                pass
            else:
                pytest.fail(f"no kill after step {kill_after} of {steps}")
            capsys.readouterr()
            node.kill_after = None
            next_run = fix_run(capsys, node, True, scenario.probe_passes)
        where = steps[kill_after - 1] if kill_after else "nothing"
        matrix.append((kill_after, where, next_run, ending(node, original, scenario.ends)))
    # Killed after the last step, the fix has ended: the next run finds nothing to do.
    wrong = [row for row in matrix if row[3] != "ok" or row[2] not in (scenario.ends, "none")]
    assert not list(tmp_path.glob("*/backups/.*.tmp"))  # no record half written, none left behind
    assert not wrong, "\n".join(f"killed after step {n} ({where}): next run {run}; {seen}"
                                for n, where, run, seen in wrong)


def test_two_step_then_a_failing_probe_restores_the_config_of_the_first_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41's first reproduction: the change made by a run that could not restart, rolled back by the next."""
    node, original = started(tmp_path / "node", SCENARIOS[0])
    with watched(node, monkeypatch):
        first = vm_gpu(capsys, node)
        assert first["changed"] and first["next"] == "restart" and first["fix"]["state"] == "applied"
        second = vm_gpu(capsys, node)
        # The second run finds the target in place, and still the backup of the config before the fix.
        assert not second["changed"] and second["backup"] == first["backup"] and second["next"] == "restart"
        assert fix_run(capsys, node, True, probe_passes=False) == "rolled_back"
    assert node.conf.read_bytes() == original and node.running()
    report = node.report() or {}
    assert report["verdict"] == "restored" and report["restored"]["backup"] == first["backup"]
    assert (node.record() or {})["state"] == "rolled_back"


def test_a_vm_that_does_not_start_with_the_new_config_runs_its_old_one_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41's second reproduction: qm set, qm shutdown, then qm start fails."""
    node, original = started(tmp_path / "node", SCENARIOS[4])
    with watched(node, monkeypatch):
        vm_gpu(capsys, node)
        restart = vm_gpu(capsys, node, step="restart")
    assert not restart.get("failed") and restart["rolled_back"] and restart["next"] == "report_rolled_back"
    assert "did not start with the new config: qm start 210 exited 255" in restart["reason"]
    assert "QEMU exited with code 1" in restart["reason"]
    assert node.conf.read_bytes() == original and node.running()
    assert [s["state"] for s in restart["fix"]["history"]] == [
        "planned", "backed_up", "applied", "restarting", "rolling_back", "rolled_back"]
    assert node.steps == ["record planned", "backup", "record backed_up", "qm set", "record applied",
                          "record restarting", "qm shutdown", "qm start", "record rolling_back", "put back",
                          "qm start", "record rolled_back"]


@pytest.mark.parametrize("mode", ["fail", "ignore"])
def test_a_qm_set_that_fails_changes_nothing_and_the_next_run_carries_the_fix_on(
        mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    node, original = started(tmp_path / "node", SCENARIOS[0])
    node.fault("set", mode)
    with watched(node, monkeypatch):
        failed = fix_run(capsys, node, True, True)
        expected = "expected qm set 210" if mode == "fail" else "to hold the change after qm set 210"
        assert failed.startswith("failed: proxmox_vm_gpu: ") and expected in failed and node.running()
        assert node.conf.read_bytes() == original and (node.record() or {})["state"] == "backed_up"
        first_backup = (node.record() or {})["backup"]
        node.fault("set", None)
        assert fix_run(capsys, node, True, True) == "proven"
    assert ending(node, original, "proven") == "ok"
    assert (node.record() or {})["backup"] == first_backup  # one backup: the config before the fix
    assert len(list(node.backups.glob("*.conf.*"))) == 1


def test_a_vm_that_starts_with_no_config_is_left_with_its_old_config_and_a_clear_failure(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    node, original = started(tmp_path / "node", SCENARIOS[0])
    node.fault("start", "fail")
    with watched(node, monkeypatch):
        outcome = fix_run(capsys, node, True, True)
    assert outcome.startswith("failed: proxmox_vm_gpu: VM 210's config before the fix is back at")
    assert "but the VM does not run with it: qm start 210 exited 255" in outcome
    assert node.conf.read_bytes() == original and not node.running()
    assert (node.record() or {})["state"] == "rolling_back"  # the next run finishes it, once the VM can start


def test_a_second_run_after_a_proven_fix_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    node, _original = started(tmp_path / "node", SCENARIOS[0])
    with watched(node, monkeypatch):
        assert fix_run(capsys, node, True, True) == "proven"
        before, record = len(node.steps), node.record()
        again = vm_gpu(capsys, node)
        assert fix_run(capsys, node, True, True) == "none"
    assert not again["changed"] and again["backup"] is None and again["next"] == "none"
    assert again["fix"]["state"] == "proven" and node.record() == record and len(node.steps) == before


def test_check_mode_reads_the_record_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    node, original = started(tmp_path / "node", SCENARIOS[0])
    with watched(node, monkeypatch):
        planned = vm_gpu(capsys, node, _ansible_check_mode=True)
        assert planned["changed"] and planned["fix"] is None and node.steps == [] and not node.backups.exists()
        first = vm_gpu(capsys, node)
        steps = list(node.steps)
        for step in ("apply", "restart", "restore"):
            checked = vm_gpu(capsys, node, step=step, _ansible_check_mode=True)
            assert not checked.get("failed") and checked["fix"]["state"] == "applied", checked
        assert node.steps == steps and (node.record() or {})["state"] == "applied"
        assert vm_gpu(capsys, node, step="restore", reason=PROBE_FAILED)["backup"] == first["backup"]
    assert node.conf.read_bytes() == original


def test_a_record_that_is_no_record_stops_the_fix_saying_what_to_do(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    node, original = started(tmp_path / "node", SCENARIOS[0])
    node.backups.mkdir()
    (node.backups / f"{VMID}.p2p-fix.json").write_text('{"format": "something else"}')
    with watched(node, monkeypatch):
        result = vm_gpu(capsys, node)
    assert result["failed"] and "expected a record of format gpuhost-p2p-fix-state/1" in result["msg"]
    assert "move the file away to start afresh" in result["msg"] and node.conf.read_bytes() == original


def test_a_record_half_written_by_a_killed_run_is_removed_by_the_next(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    node, _original = started(tmp_path / "node", SCENARIOS[0])
    node.backups.mkdir()
    stale = node.backups / f".{VMID}.p2p-fix.json.k1ll3d.tmp"
    stale.write_text('{"format": "gpuhost-p2p-fix-st')
    with watched(node, monkeypatch):
        assert vm_gpu(capsys, node)["fix"]["state"] == "applied"
    assert not stale.exists() and [p.name for p in node.backups.glob(".*")] == []
