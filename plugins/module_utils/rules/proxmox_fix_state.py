"""The P2P fix of a Proxmox VM as a state machine: where a fix stands, and what the next run does from there.

The module proxmox_vm_gpu records the fix's state in a small JSON file beside the backup of the VM's
config, on the node (``<backup_dir>/<vmid>.p2p-fix.json``), written atomically before each step, so that
a run killed at any point, or the second run of the two-step flow (change now, restart later), finds
the backup of the config the VM had before the fix and either carries the fix on or rolls it back.
Pure: the module reads and writes the file and runs ``qm``; this file says what the record means.

The states (``STATES``), in the order a fix passes them:

- ``planned``: the change is computed and the backup is about to be written; the config is untouched.
- ``backed_up``: the backup holds the config as it was; ``qm set`` is about to run (or ran and was cut).
- ``applied``: the config holds the target; QEMU may still run the old one ([PENDING]) or the VM is stopped.
- ``restarting``: the fix is stopping and starting the VM: it may be down because of the fix.
- ``restarted``: the VM runs the new config; the guest is to be measured.
- ``proven``: the guest was measured with the change, and the change kept (``verdict``, the report's). Final.
- ``rolling_back``: the backup is being put back (``reason`` says why).
- ``rolled_back``: the VM has its old config again, running as it was before the fix. Final.

A final state, or ``planned`` (nothing was changed), leaves no fix open: the next run starts afresh from
the config as it finds it. Any other state is an open fix: its backup is the config before the fix.

Record schema (``FORMAT``): ``format``, ``vmid``, ``state``, ``backup`` (path, null until written),
``was_running`` (whether the VM ran when the fix began; null when qm could not tell), ``reason`` (why it
was rolled back, or null), ``verdict`` (the report's verdict when proven, or null), ``history`` (a list
of ``{"state", "at"}``, oldest first).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

FORMAT = "gpuhost-p2p-fix-state/1"

PLANNED = "planned"
BACKED_UP = "backed_up"
APPLIED = "applied"
RESTARTING = "restarting"
RESTARTED = "restarted"
PROVEN = "proven"
ROLLING_BACK = "rolling_back"
ROLLED_BACK = "rolled_back"
STATES = (PLANNED, BACKED_UP, APPLIED, RESTARTING, RESTARTED, PROVEN, ROLLING_BACK, ROLLED_BACK)
FINAL = (PROVEN, ROLLED_BACK)
# Open: the config may differ from the backup, so the backup is the VM's config before the fix.
OPEN = (BACKED_UP, APPLIED, RESTARTING, RESTARTED)

# Where each state may go. A fresh fix (planned) may begin after a final one or after a plan that never
# changed anything; applied again after any open state (the config was changed behind the fix's back, or
# qm set was cut); a rollback may begin from any open state and be taken up again after a kill, or from a
# proven fix on request (the restore step).
TRANSITIONS: dict[str | None, frozenset[str]] = {
    None: frozenset({PLANNED}),
    PLANNED: frozenset({PLANNED, BACKED_UP}),
    BACKED_UP: frozenset({APPLIED, ROLLING_BACK}),
    APPLIED: frozenset({APPLIED, RESTARTING, RESTARTED, ROLLING_BACK}),
    RESTARTING: frozenset({APPLIED, RESTARTING, RESTARTED, ROLLING_BACK}),
    RESTARTED: frozenset({APPLIED, RESTARTING, PROVEN, ROLLING_BACK}),
    ROLLING_BACK: frozenset({ROLLING_BACK, ROLLED_BACK}),
    PROVEN: frozenset({PLANNED, ROLLING_BACK}),
    ROLLED_BACK: frozenset({PLANNED}),
}

# What a run does next, after the apply step (the module's ``next``):
NEXT_NONE = "none"  # nothing: no change needed, or the fix is proven
NEXT_RESTART = "restart"  # the VM runs the old QEMU, the change waits in [PENDING]: restart it (when allowed)
NEXT_START = "start"  # the fix stopped the VM and was cut before starting it: start it
NEXT_WAIT_START = "wait_start"  # the VM is stopped, not by the fix: the change takes effect at its next start
NEXT_MEASURE = "measure"  # the VM runs the new config and the fix is not proven: measure the guest
NEXT_REPORT_ROLLED_BACK = "report_rolled_back"  # this run rolled the fix back: report it and fail
NEXTS = (NEXT_NONE, NEXT_RESTART, NEXT_START, NEXT_WAIT_START, NEXT_MEASURE, NEXT_REPORT_ROLLED_BACK)

# How a run opens, from the record it finds and whether the config already holds the target:
OPEN_NONE = "none"  # no open fix and the config holds the target: nothing to change
OPEN_FRESH = "fresh"  # no open fix and the config differs: a new fix, a new backup
OPEN_CONTINUE = "continue"  # an open fix: keep its backup, apply again when needed
OPEN_FINISH_ROLLBACK = "finish_rollback"  # a rollback was cut: finish it before anything else


class FixStateError(ValueError):
    """A state file that cannot be read as a fix record, or a step the record does not allow."""


@dataclass(frozen=True)
class FixRecord:
    vmid: int
    state: str
    backup: str | None = None
    was_running: bool | None = None
    reason: str | None = None
    verdict: str | None = None
    history: tuple[tuple[str, str], ...] = ()

    @property
    def is_open(self) -> bool:
        return self.state in OPEN

    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "vmid": self.vmid, "state": self.state, "backup": self.backup,
                "was_running": self.was_running, "reason": self.reason, "verdict": self.verdict,
                "history": [{"state": state, "at": at} for state, at in self.history]}


@dataclass(frozen=True)
class Observed:
    """What the module sees on the node: whether the config (its pending changes applied) holds the target,
    whether the VM runs (null: qm could not tell), whether some of the target waits in [PENDING]."""

    has_target: bool
    running: bool | None
    pending: bool


def state_file_name(vmid: int) -> str:
    return f"{vmid}.p2p-fix.json"


def render_record(record: FixRecord) -> str:
    return json.dumps(record.as_dict(), indent=1, sort_keys=True) + "\n"


def parse_record(text: str, vmid: int) -> FixRecord:
    """The record in a state file's text; FixStateError when it is not one, or is another VM's."""
    try:
        data = json.loads(text)
    except ValueError as err:
        raise FixStateError(f"expected JSON; found {err}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise FixStateError(f"expected a record of format {FORMAT}; found {found!r}")
    if data.get("vmid") != vmid:
        raise FixStateError(f"expected the record of VM {vmid}; found VM {data.get('vmid')!r}")
    state = data.get("state")
    if state not in STATES:
        raise FixStateError(f"expected a state among {', '.join(STATES)}; found {state!r}")
    backup = data.get("backup")
    if state in (*OPEN, ROLLING_BACK) and not (isinstance(backup, str) and backup):
        raise FixStateError(f"expected the path of the backup in a record in state {state}; found {backup!r}")
    history = data.get("history")
    if not isinstance(history, list):
        raise FixStateError(f"expected history to be a list; found {type(history).__name__}")
    steps = tuple((str(step.get("state")), str(step.get("at"))) for step in history if isinstance(step, dict))
    was_running = data.get("was_running")
    return FixRecord(vmid=vmid, state=state, backup=backup if isinstance(backup, str) else None,
                     was_running=was_running if isinstance(was_running, bool) else None,
                     reason=_text(data.get("reason")), verdict=_text(data.get("verdict")), history=steps)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def begin(vmid: int, backup: str, was_running: bool | None, at: str, previous: FixRecord | None = None) -> FixRecord:
    """A fresh fix, planned: the backup it is about to write, and whether the VM ran."""
    _check(previous.state if previous is not None else None, PLANNED)
    return FixRecord(vmid=vmid, state=PLANNED, backup=backup, was_running=was_running, history=((PLANNED, at),))


def advance(record: FixRecord, state: str, at: str, **changes: Any) -> FixRecord:
    """The record in its next state; FixStateError for a step the current state does not allow."""
    _check(record.state, state)
    return replace(record, state=state, history=(*record.history, (state, at)), **changes)


def _check(current: str | None, state: str) -> None:
    if state not in TRANSITIONS.get(current, frozenset()):
        allowed = ", ".join(sorted(TRANSITIONS.get(current, frozenset()))) or "none"
        raise FixStateError(f"a fix in state {current or 'none'} cannot go to {state} (it may go to {allowed})")


def opening(record: FixRecord | None, has_target: bool) -> str:
    """How a run that finds this record (None: no state file) opens."""
    if record is not None and record.state == ROLLING_BACK:
        return OPEN_FINISH_ROLLBACK
    if record is not None and record.is_open:
        return OPEN_CONTINUE
    return OPEN_NONE if has_target else OPEN_FRESH


def settled(record: FixRecord, seen: Observed) -> str | None:
    """The state an open fix is in by what the node shows, when that is further than the record says (a run
    cut after the step but before recording it, or a VM started by hand after the two-step flow); None when
    the record is right. The config is read after apply, so it holds the target."""
    if record.state == BACKED_UP and seen.has_target:
        return APPLIED
    if record.state in (APPLIED, RESTARTING) and seen.has_target and seen.running is True and not seen.pending:
        return RESTARTED
    return None


def next_step(record: FixRecord | None, seen: Observed) -> str:
    """What the run does after the apply step, from the record (as settled) and what the node shows."""
    if record is None or not record.is_open:
        return NEXT_NONE
    if seen.running is True:
        return NEXT_RESTART if seen.pending else NEXT_MEASURE
    # Stopped, or qm could not tell: a VM the fix took down is the fix's to start.
    return NEXT_START if record.state == RESTARTING else NEXT_WAIT_START


def restart_plan(record: FixRecord, running: bool | None, pending: bool) -> tuple[bool, bool]:
    """For the restart step: (stop it first, start it). A VM that runs its old QEMU is stopped then started;
    a stopped one is started; one that already runs the new config is left as it is."""
    if not record.is_open:
        raise FixStateError(f"a fix in state {record.state} has nothing to restart")
    if running is True:
        return (True, True) if pending else (False, False)
    return False, True


def start_after_rollback(record: FixRecord) -> bool:
    """Whether the VM runs again after its config is put back: as it was when the fix began (when qm could
    not tell, it runs: a fix is only restarted on a VM that ran)."""
    return record.was_running is not False
