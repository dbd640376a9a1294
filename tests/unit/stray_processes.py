"""Processes that outlive a deadline, for the timeout tests of the audit and the benchmark.

A grandchild that leaves the process group (setsid) keeps its parent's output pipe open after the parent
is killed: the case where an unbounded read of the output would wait for it.
"""

from __future__ import annotations

import contextlib
import os
import signal

# What the tests allow beyond a timeout: the drain grace, process start-up, a loaded machine.
SLACK_S = 15.0
# os.kill as it was before any test replaced it (tests imitate an unkillable process with a kill that does nothing).
REAL_KILL = os.kill

# Prints the pid of a grandchild that left the process group and keeps stdout open, then sleeps.
SETSID_GRANDCHILD = """
import os, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    time.sleep(60)
    os._exit(0)
print(pid, flush=True)
time.sleep(60)
"""


def kill_quietly(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        REAL_KILL(pid, signal.SIGKILL)
