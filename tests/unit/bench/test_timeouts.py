"""Deadlines that hold: every wait for a benchmark process ends within its timeout plus a short grace.

A process killed at its deadline can leave its output pipe open: a grandchild that left the process
group (setsid) keeps it, and a process stuck in the driver in uninterruptible sleep (a wedged GPU, the
case the timeout exists for) does not die on SIGKILL. Both are real processes here; the second is
imitated by a kill that does nothing. The bounds are generous (the machine running the tests may be
loaded) but far below what an unbounded wait takes (the children sleep 60 s).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import collective_harness, harness_runner, p2p_harness

from tests.unit.stray_processes import SETSID_GRANDCHILD, SLACK_S, kill_quietly


def printed_pids(text: str) -> list[int]:
    return [int(line) for line in text.split() if line.isdigit()]


def test_a_grandchild_holding_the_pipe_does_not_stretch_the_timeout():
    started = time.monotonic()
    result = harness_runner.run_process([sys.executable, "-c", SETSID_GRANDCHILD], 2.0)
    elapsed = time.monotonic() - started
    for pid in printed_pids(result.stdout):
        kill_quietly(pid)

    assert elapsed < 2.0 + SLACK_S, f"a 2 s timeout returned after {elapsed:.1f} s"
    assert result.timed_out is True
    assert printed_pids(result.stdout), "what the process printed before the deadline is kept"
    assert "still held its output" in (result.note or "")


@pytest.fixture
def unkillable(monkeypatch):
    """Kills that do nothing, as for a process in uninterruptible sleep; the children are killed after."""
    started: list[int] = []
    real_popen = subprocess.Popen

    class Recording(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self.pid)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    monkeypatch.setattr(os, "kill", lambda pid, sig: None)
    monkeypatch.setattr(os, "killpg", lambda pgid, sig: None)
    yield started
    for pid in started:
        kill_quietly(pid)


def test_a_process_that_does_not_die_on_kill_is_left_behind_not_waited_for(unkillable):
    started = time.monotonic()
    result = harness_runner.run_process([sys.executable, "-c", "import time; time.sleep(60)"], 1.0)
    elapsed = time.monotonic() - started

    assert elapsed < 1.0 + SLACK_S, f"a 1 s timeout returned after {elapsed:.1f} s"
    assert result.timed_out is True
    assert result.rc is None  # never reaped
    assert "did not exit after SIGKILL" in (result.note or "")


def test_a_process_that_finishes_in_time_is_read_whole():
    script = "import sys; sys.stdout.write('x' * 200000); sys.stderr.write('done')"
    result = harness_runner.run_process([sys.executable, "-c", script], 30.0)
    assert (result.rc, result.timed_out, len(result.stdout), result.stderr) == (0, False, 200000, "done")
    assert result.note is None


def test_a_missing_executable_is_an_error_not_a_timeout(tmp_path):
    result = harness_runner.run_process([str(tmp_path / "absent")], 5.0)
    assert result.rc is None and result.timed_out is False
    assert "absent" in (result.error or "")


# ---------------------------------------------------------------------------
# The harnesses' own waits for the processes they start


class StuckRank:
    """A rank that outlives SIGKILL (uninterruptible sleep in the driver)."""

    pid = 0
    returncode = None

    def poll(self):
        return None

    def wait(self, timeout: float) -> int:
        raise subprocess.TimeoutExpired("rank", timeout)

    def signal(self, signum: int) -> None:
        pass


def test_the_collective_harness_stops_ranks_it_cannot_kill_without_raising():
    collective_harness.stop([StuckRank(), StuckRank()])


class StuckWorker:
    """p2p_harness's worker stuck in CUDA: it neither exits nor dies when killed."""

    returncode = None

    def __init__(self, *args, **kwargs):
        pass

    def poll(self):
        return None

    def terminate(self):
        pass

    def kill(self):
        pass

    def wait(self, timeout=None):
        if timeout is None:
            raise AssertionError("an unbounded wait for a worker that cannot die")
        raise subprocess.TimeoutExpired("worker", timeout)


def test_the_p2p_harness_reports_the_timeout_when_its_worker_cannot_be_killed(monkeypatch):
    monkeypatch.setattr(p2p_harness.subprocess, "Popen", StuckWorker)
    out = io.StringIO()
    started = time.monotonic()
    code = p2p_harness.run({"timeout_s": 0.2}, out=out)

    assert time.monotonic() - started < 0.2 + SLACK_S
    summary = json.loads(out.getvalue().splitlines()[-1])
    assert (code, summary["status"], summary["hung_at"]) == (124, "timeout", {"phase": "start-up"})
    assert "did not exit" in summary["stderr_tail"]
