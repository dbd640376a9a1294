"""The P2P fix's state machine (rules/proxmox_fix_state.py): its record, its steps, what a run does from each state."""

from __future__ import annotations

import contextlib
import json

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules import proxmox_fix_state as fix
from hypothesis import given
from hypothesis import strategies as st

AT = "2026-01-01T00:00:00.000000Z"
BACKUP = "/root/gpuhost-vm-backups/120.conf.20260101T000000.000000Z"


def record(state: str, **extra: object) -> fix.FixRecord:
    return fix.FixRecord(vmid=120, state=state, backup=BACKUP, was_running=True, **extra)


def test_a_fix_round_trips_through_its_file_and_keeps_its_history() -> None:
    planned = fix.begin(120, BACKUP, True, AT)
    steps = [fix.BACKED_UP, fix.APPLIED, fix.RESTARTING, fix.RESTARTED]
    current = planned
    for state in steps:
        current = fix.advance(current, state, AT)
    proven = fix.advance(current, fix.PROVEN, AT, verdict="fixed")
    text = fix.render_record(proven)
    assert json.loads(text)["format"] == fix.FORMAT
    again = fix.parse_record(text, 120)
    assert again == proven and again.verdict == "fixed"
    assert [state for state, _at in again.history] == [fix.PLANNED, *steps, fix.PROVEN]


@pytest.mark.parametrize(("current", "state"), [
    (fix.PLANNED, fix.APPLIED),  # qm set only after the backup is recorded
    (fix.BACKED_UP, fix.RESTARTING),
    (fix.APPLIED, fix.PROVEN),  # proven only once the guest ran the new config
    (fix.ROLLED_BACK, fix.APPLIED),
    (fix.ROLLING_BACK, fix.APPLIED),  # a rollback, once begun, is finished
    (fix.PROVEN, fix.RESTARTING),
])
def test_steps_out_of_order_are_refused(current: str, state: str) -> None:
    with pytest.raises(fix.FixStateError, match=f"in state {current} cannot go to {state}"):
        fix.advance(record(current), state, AT)


def test_a_fresh_fix_begins_only_where_none_is_open() -> None:
    for state in (fix.PLANNED, fix.PROVEN, fix.ROLLED_BACK):
        assert fix.begin(120, BACKUP, False, AT, record(state)).state == fix.PLANNED
    for state in (*fix.OPEN, fix.ROLLING_BACK):
        with pytest.raises(fix.FixStateError):
            fix.begin(120, BACKUP, False, AT, record(state))


@pytest.mark.parametrize(("state", "has_target", "expected"), [
    (None, True, fix.OPEN_NONE),
    (None, False, fix.OPEN_FRESH),
    (fix.PLANNED, False, fix.OPEN_FRESH),  # killed before qm set: nothing changed, start again
    (fix.PROVEN, True, fix.OPEN_NONE),  # idempotence
    (fix.PROVEN, False, fix.OPEN_FRESH),  # the config was changed back since
    (fix.ROLLED_BACK, False, fix.OPEN_FRESH),
    (fix.BACKED_UP, False, fix.OPEN_CONTINUE),  # killed in qm set: keep the first backup
    (fix.APPLIED, True, fix.OPEN_CONTINUE),  # the two-step flow's second run
    (fix.RESTARTING, True, fix.OPEN_CONTINUE),
    (fix.RESTARTED, True, fix.OPEN_CONTINUE),
    (fix.ROLLING_BACK, True, fix.OPEN_FINISH_ROLLBACK),
    (fix.ROLLING_BACK, False, fix.OPEN_FINISH_ROLLBACK),
])
def test_how_a_run_opens(state: str | None, has_target: bool, expected: str) -> None:
    assert fix.opening(record(state) if state else None, has_target) == expected


@pytest.mark.parametrize(("state", "running", "pending", "settled", "next_step"), [
    (fix.BACKED_UP, True, True, fix.APPLIED, fix.NEXT_RESTART),  # killed between qm set and its record
    (fix.APPLIED, True, True, None, fix.NEXT_RESTART),  # killed between qm set and qm shutdown
    (fix.APPLIED, False, False, None, fix.NEXT_WAIT_START),  # a stopped VM: its owner starts it
    (fix.APPLIED, True, False, fix.RESTARTED, fix.NEXT_MEASURE),  # started by hand after the two-step flow
    (fix.RESTARTING, False, True, None, fix.NEXT_START),  # killed between qm shutdown and qm start
    (fix.RESTARTING, None, True, None, fix.NEXT_START),
    (fix.RESTARTING, True, False, fix.RESTARTED, fix.NEXT_MEASURE),  # killed after qm start
    (fix.RESTARTED, True, False, None, fix.NEXT_MEASURE),  # killed before the measure's verdict
    (fix.PROVEN, True, False, None, fix.NEXT_NONE),
    (fix.ROLLED_BACK, True, False, None, fix.NEXT_NONE),
])
def test_what_a_run_does_next(state: str, running: bool | None, pending: bool, settled: str | None,
                              next_step: str) -> None:
    seen = fix.Observed(has_target=True, running=running, pending=pending)
    current = record(state)
    assert fix.settled(current, seen) == settled
    if settled:
        current = fix.advance(current, settled, AT)
    assert fix.next_step(current, seen) == next_step


def test_restart_stops_only_a_vm_that_runs_the_old_qemu() -> None:
    assert fix.restart_plan(record(fix.APPLIED), True, True) == (True, True)
    assert fix.restart_plan(record(fix.RESTARTING), False, True) == (False, True)
    assert fix.restart_plan(record(fix.RESTARTING), True, False) == (False, False)
    with pytest.raises(fix.FixStateError, match="nothing to restart"):
        fix.restart_plan(record(fix.PROVEN), True, False)


def test_a_rollback_runs_the_vm_as_it_was() -> None:
    assert fix.start_after_rollback(record(fix.ROLLING_BACK))
    assert not fix.start_after_rollback(fix.FixRecord(vmid=120, state=fix.ROLLING_BACK, backup=BACKUP,
                                                      was_running=False))
    assert fix.start_after_rollback(fix.FixRecord(vmid=120, state=fix.ROLLING_BACK, backup=BACKUP))


@pytest.mark.parametrize(("text", "message"), [
    ("", "expected JSON"),
    ("[]", "expected a record of format"),
    ('{"format": "gpuhost-p2p-fix-state/0"}', "expected a record of format"),
    (json.dumps({"format": fix.FORMAT, "vmid": 130, "state": "applied"}), "expected the record of VM 120"),
    (json.dumps({"format": fix.FORMAT, "vmid": 120, "state": "fixed", "history": []}), "expected a state among"),
    (json.dumps({"format": fix.FORMAT, "vmid": 120, "state": "applied", "history": []}), "the path of the backup"),
    (json.dumps({"format": fix.FORMAT, "vmid": 120, "state": "planned", "history": {}}), "history to be a list"),
])
def test_a_file_that_is_no_record_is_refused_saying_why(text: str, message: str) -> None:
    with pytest.raises(fix.FixStateError, match=message):
        fix.parse_record(text, 120)


@given(st.text(max_size=300))
def test_no_text_makes_the_reader_raise_anything_but_its_own_error(text: str) -> None:
    with contextlib.suppress(fix.FixStateError):
        fix.parse_record(text, 120)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20))
def test_no_json_makes_the_reader_raise_anything_but_its_own_error(value: object) -> None:
    data = {"format": fix.FORMAT, "vmid": 120, "state": "applied", "backup": BACKUP, "history": value}
    for text in (json.dumps(value), json.dumps(data)):
        with contextlib.suppress(fix.FixStateError):
            fix.parse_record(text, 120)
