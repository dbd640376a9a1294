"""LiveSource's commands answer within COMMAND_TIMEOUT_S plus a short grace, whatever the command does.

A wedged GPU makes nvidia-smi hang in the driver, in uninterruptible sleep, where SIGKILL does not
reach it; a command may also leave a process behind that keeps its output open. Both are real
processes here, the first imitated by a kill that does nothing. The bounds are generous (the machine
running the tests may be loaded) but far below what an unbounded wait takes (the children sleep 60 s).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import source as source_module
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import LiveSource

from tests.unit.stray_processes import SETSID_GRANDCHILD, SLACK_S, kill_quietly


@pytest.fixture
def short_timeout(monkeypatch):
    monkeypatch.setattr(source_module, "COMMAND_TIMEOUT_S", 2)


def test_a_grandchild_holding_the_pipe_does_not_stretch_the_timeout(short_timeout, tmp_path):
    pids = tmp_path / "pids"
    script = SETSID_GRANDCHILD.replace("print(pid, flush=True)", f"open({str(pids)!r}, 'w').write(str(pid))")
    source = LiveSource()
    started = time.monotonic()
    result = source.run([sys.executable, "-c", script])
    elapsed = time.monotonic() - started
    if pids.exists():
        kill_quietly(int(pids.read_text()))

    assert elapsed < 2 + SLACK_S, f"a 2 s timeout returned after {elapsed:.1f} s"
    assert result.rc == 124 and result.stdout == ""
    assert "no answer within 2 s" in result.stderr
    assert source.problems and source.problems[0]["error"] == result.stderr


def test_a_command_that_does_not_die_on_kill_is_left_behind(short_timeout, monkeypatch):
    started_pids: list[int] = []
    real_popen = subprocess.Popen

    class Recording(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started_pids.append(self.pid)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    monkeypatch.setattr(os, "kill", lambda pid, sig: None)
    monkeypatch.setattr(os, "killpg", lambda pgid, sig: None)
    try:
        started = time.monotonic()
        result = LiveSource().run([sys.executable, "-c", "import time; time.sleep(60)"])
        elapsed = time.monotonic() - started
    finally:
        for pid in started_pids:
            kill_quietly(pid)

    assert elapsed < 2 + SLACK_S, f"a 2 s timeout returned after {elapsed:.1f} s"
    assert result.rc == 124
    assert "did not exit after SIGKILL" in result.stderr


def test_a_quick_command_is_read_as_before(tmp_path):
    result = LiveSource(record=True).run([sys.executable, "-c", "print('hello')"])
    assert (result.rc, result.stdout.strip(), result.stderr) == (0, "hello", "")
    assert LiveSource().run([str(tmp_path / "absent")]).rc is None
