"""Temporary files of a run killed while staging are removed by the next run that writes the same directory, and
those of a run still writing never are (files/writer.py, stale_temp_files)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import (
    STALE_AGE_S,
    plan_files,
    staging_prefix,
    stale_temp_files,
    write_atomically,
)

from tests.paths import ROOT

# A run that stages its files and then hangs where it would rename them: it is in the middle of staging when the
# test kills it, as an operator's kill -9 or a lost controller catches a run.
STAGE_AND_HANG = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import plan_files
def hang(*args):
    open(sys.argv[3], "w").close()
    time.sleep(600)
os.replace = hang
plan_files({os.path.join(sys.argv[2], "a.md"): "a\\n", os.path.join(sys.argv[2], "b.json"): "{}\\n"}).commit()
"""


def temp_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".gpuhost-") and p.name.endswith(".tmp"))


def staging_run(directory: Path, tmp_path: Path) -> subprocess.Popen:
    """A run that has staged its two files and waits before renaming them."""
    ready = tmp_path / f"staged-{len(list(tmp_path.glob('staged-*')))}"
    child = subprocess.Popen([sys.executable, "-c", STAGE_AND_HANG, str(ROOT / "collections"), str(directory),
                              str(ready)])
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert child.poll() is None, "the staging run ended before it staged its files"
        assert time.monotonic() < deadline, "the staging run did not stage its files within 60 s"
        time.sleep(0.05)
    return child


def kill(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)


def test_the_next_run_removes_what_a_run_killed_while_staging_left(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    child = staging_run(reports, tmp_path)
    assert len(temp_files(reports)) == 2
    kill(child)
    assert len(temp_files(reports)) == 2  # kill -9: nothing of the run cleans up after it
    plan_files({str(reports / "c.md"): "c\n"}).commit()
    assert temp_files(reports) == []
    assert sorted(p.name for p in reports.iterdir()) == ["c.md"]


def test_a_rerun_that_changes_nothing_cleans_up_too_and_check_mode_never(tmp_path: Path) -> None:
    (tmp_path / "c.md").write_text("c\n")
    child = staging_run(tmp_path, tmp_path)
    kill(child)
    left = temp_files(tmp_path)
    assert plan_files({str(tmp_path / "c.md"): "c\n"}).commit(check_mode=True) == []
    assert temp_files(tmp_path) == left
    assert plan_files({str(tmp_path / "c.md"): "c\n"}).commit() == []
    assert temp_files(tmp_path) == []


def test_a_single_file_write_cleans_its_directory(tmp_path: Path) -> None:
    kill(staging_run(tmp_path, tmp_path))
    write_atomically(str(tmp_path / "one.json"), b"{}\n")
    assert temp_files(tmp_path) == []


def test_a_run_still_staging_keeps_its_files_while_another_writes_the_directory(tmp_path: Path) -> None:
    child = staging_run(tmp_path, tmp_path)
    try:
        staged = temp_files(tmp_path)
        plan_files({str(tmp_path / "c.md"): "c\n"}).commit()
        write_atomically(str(tmp_path / "d.md"), b"d\n")
        assert temp_files(tmp_path) == staged
    finally:
        kill(child)


def test_a_staged_file_names_its_machine_and_process() -> None:
    prefix = staging_prefix()
    assert prefix.startswith(".gpuhost-") and prefix.endswith(f"-{os.getpid()}-")
    assert "/" not in prefix and prefix.count("-") == 3


@pytest.mark.parametrize(("name", "age", "stale"), [
    # This machine: a dead pid is stale at once, a live one is not until it is older than any run writes.
    (".gpuhost-here-111-abc_12.tmp", 1, True),
    (".gpuhost-here-222-abc_12.tmp", 1, False),
    (".gpuhost-here-222-abc_12.tmp", STALE_AGE_S + 1, True),
    # Another machine (a shared directory): its pids mean nothing here, only the age tells.
    (".gpuhost-there-111-abc_12.tmp", 1, False),
    (".gpuhost-there-111-abc_12.tmp", STALE_AGE_S + 1, True),
    # An earlier version's name, which carries no pid: the age.
    (".gpuhost-k2j3h4g5.tmp", 60, False),
    (".gpuhost-k2j3h4g5.tmp", STALE_AGE_S + 1, True),
    # Not the writer's: never.
    (".gpuhost-here-111-abc_12.json", STALE_AGE_S + 1, False),
    ("gpuhost-here-111-abc_12.tmp", STALE_AGE_S + 1, False),
    ("host.md", STALE_AGE_S + 1, False),
])
def test_which_temporary_files_are_stale(name: str, age: float, stale: bool) -> None:
    found = stale_temp_files([name], {name: age}, machine="here", alive=lambda pid: pid == 222)
    assert found == ([name] if stale else [])
