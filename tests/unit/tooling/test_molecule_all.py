"""scripts/molecule_all.py: scenario order, the job limit, whole logs and the failed list, with a stand-in
`molecule` on PATH that records when each scenario ran."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT

SCRIPT = ROOT / "scripts/molecule_all.py"

# Stand-in for `molecule test -s NAME`: records start and end in $RECORD, prints a line, sleeps, and exits
# with the code named in $FAIL_<NAME> (0 when unset).
STANDIN = """#!/bin/sh
name="$3"
echo "start $name" >> "$RECORD"
echo "output of $name"
sleep 0.6
echo "end $name" >> "$RECORD"
eval "code=\\${FAIL_$name:-0}"
exit "$code"
"""


def run(tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    standin = bindir / "molecule"
    standin.write_text(STANDIN)
    standin.chmod(0o755)
    full_env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "RECORD": str(tmp_path / "record"),
                **(env or {})}
    return subprocess.run([sys.executable, str(SCRIPT), "--log-dir", str(tmp_path / "logs"), *args],
                          capture_output=True, text=True, env=full_env, timeout=60, check=False)


def max_running(record: list[str]) -> int:
    running = peak = 0
    for line in record:
        running += 1 if line.startswith("start") else -1
        peak = max(peak, running)
    return peak


def test_longest_first_and_at_most_jobs_at_once(tmp_path):
    result = run(tmp_path, "--jobs", "2", "audit", "sglang_serve", "proxmox_fix", "cuda_apt")
    assert result.returncode == 0, result.stderr
    # The order the script started them in (two started in the same second may record their start either way).
    starts = [line.split()[2] for line in result.stdout.splitlines() if line.startswith("--- started")]
    assert starts == ["sglang_serve", "cuda_apt", "proxmox_fix", "audit"]
    assert max_running((tmp_path / "record").read_text().splitlines()) == 2
    assert "all 4 scenarios passed" in result.stdout


def test_one_job_runs_them_one_after_another(tmp_path):
    result = run(tmp_path, "--jobs", "1", "audit", "proxmox_fix")
    assert result.returncode == 0, result.stderr
    assert max_running((tmp_path / "record").read_text().splitlines()) == 1


def test_each_log_is_printed_whole_under_its_header(tmp_path):
    result = run(tmp_path, "audit", "proxmox_fix")
    for name in ("audit", "proxmox_fix"):
        header = result.stdout.index(f"=== molecule test -s {name}\n")
        assert result.stdout[header:].split("\n")[1] == f"output of {name}"
        assert f"=== {name} passed in" in result.stdout


def test_a_failed_scenario_fails_the_run_and_the_others_still_run(tmp_path):
    result = run(tmp_path, "audit", "proxmox_fix", "cuda_apt", env={"FAIL_proxmox_fix": "3"})
    assert result.returncode == 1
    assert "=== proxmox_fix FAILED (exit 3)" in result.stdout
    assert "molecule: failed: proxmox_fix" in result.stderr
    assert (tmp_path / "record").read_text().count("end ") == 3


def test_no_scenario_and_a_bad_job_count_are_refused(tmp_path):
    assert run(tmp_path).returncode == 1
    refused = run(tmp_path, "--jobs", "0", "audit")
    assert refused.returncode == 2 and "--jobs must be 1 or more" in refused.stderr
