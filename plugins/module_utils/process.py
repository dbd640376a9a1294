"""Run a command under a deadline that holds end to end, whatever the command leaves behind.

``subprocess`` waits without a limit in two places once a command is killed at its deadline:
reading its output to the end (a process that left the process group with setsid, or any other
holder of the pipe, keeps it open) and reaping it (a process in uninterruptible sleep in the
driver, which is what a wedged GPU leaves, does not die on SIGKILL until the driver lets go).
Both are the cases a deadline exists for. Here the command runs in its own session; at the
deadline its whole process group is killed, what it printed is read for at most ``drain_s``
more, the pipes are closed and the process is reaped if it can be within that grace. What could
not be stopped is left behind and named in ``note``, never waited for.

Used by the audit's LiveSource and the benchmark runners; the callers decide what a timeout means.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass

# After the kill: how long to read what is left in the pipes and to wait for the process to go.
DRAIN_S = 2.0
_CHUNK = 65536


@dataclass(frozen=True)
class Finished:
    """What a command printed and how it ended."""

    rc: int | None  # None when it was still not reaped after the kill and the grace
    stdout: bytes
    stderr: bytes
    timed_out: bool
    note: str | None = None  # what was left behind after the kill, when something was


def run_bounded(argv: list[str], timeout_s: float, env: dict[str, str] | None = None, cwd: str | None = None,
                drain_s: float = DRAIN_S) -> Finished:
    """Run argv with no input; past ``timeout_s`` kill its process group. Returns within about
    ``timeout_s + 2 * drain_s``. Raises OSError when argv cannot be started."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=cwd, start_new_session=True)
    if proc.stdout is None or proc.stderr is None:  # narrows the type; an assert would vanish under python -O
        raise AssertionError("unreachable: proc.stdout is not None and proc.stderr is not None")
    stdout_fd, stderr_fd = proc.stdout.fileno(), proc.stderr.fileno()
    out: dict[int, list[bytes]] = {stdout_fd: [], stderr_fd: []}
    notes = []
    try:
        deadline = time.monotonic() + max(timeout_s, 0.0)
        still_open = _read(out, deadline)
        rc = None if still_open else _reap(proc, deadline)
        timed_out = bool(still_open) or rc is None
        if timed_out:
            kill_group(proc)
            grace_end = time.monotonic() + drain_s
            still_open = _read(out, grace_end, only=still_open)
            rc = _reap(proc, grace_end)
            if rc is None:
                notes.append(f"pid {proc.pid} did not exit after SIGKILL within {drain_s:g} s (a process stuck in "
                             "the kernel, as in a driver call on a wedged GPU, dies only when the call returns); it "
                             "was left behind")
            if still_open:
                notes.append("a process outside its process group (one that called setsid) or one stuck in the "
                             "kernel still held its output after the kill; it was left behind and its output cut")
    finally:
        proc.stdout.close()
        proc.stderr.close()
    return Finished(rc, b"".join(out[stdout_fd]), b"".join(out[stderr_fd]), timed_out, "; ".join(notes) or None)


def _read(out: dict[int, list[bytes]], until: float, only: set[int] | None = None) -> set[int]:
    """Read the pipes into ``out`` until every one is at end of file or ``until`` passes; the fds
    still open then."""
    pending = set(out) if only is None else set(only)
    if not pending:
        return pending
    with selectors.DefaultSelector() as selector:
        for fd in pending:
            selector.register(fd, selectors.EVENT_READ)
        while pending:
            left = until - time.monotonic()
            if left <= 0:
                break
            for key, _unused in selector.select(left):
                chunk = os.read(key.fd, _CHUNK)
                if chunk:
                    out[key.fd].append(chunk)
                else:
                    selector.unregister(key.fd)
                    pending.discard(key.fd)
    return pending


def _reap(proc: subprocess.Popen, until: float) -> int | None:
    """The exit status, waiting at most until ``until``; None while it is still running."""
    try:
        return proc.wait(timeout=max(0.0, until - time.monotonic()))
    except subprocess.TimeoutExpired:
        return None


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group the command leads (it was started in its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
