"""scripts/test-all.sh (`make test`): each step's verdict and time, the last line naming the slowest step, a
failed setup step stopping the run; and `make -n test`, which must print commands and claim nothing.

A stand-in `make` records the steps it is asked for, sleeps where told and fails where told."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.paths import ROOT

SCRIPT = ROOT / "scripts/test-all.sh"

# Stand-in for `make --no-print-directory STEP`: $SLEEP_<step> seconds, exit $FAIL_<step> (0 when unset).
STANDIN = """#!/bin/bash
step="${@: -1}"
var="${step//-/_}"
echo "$step" >> "$RECORD"
echo "output of $step"
sleep "$(eval "echo \\${SLEEP_$var:-0}")"
exit "$(eval "echo \\${FAIL_$var:-0}")"
"""


def run(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    standin = tmp_path / "make"
    standin.write_text(STANDIN)
    standin.chmod(0o755)
    full_env = {**os.environ, "MAKE": str(standin), "RECORD": str(tmp_path / "record"),
                "TEST_LOGS": str(tmp_path / "logs"), **env}
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=full_env, timeout=60,
                          check=False)


def test_every_step_says_its_time_and_the_last_line_names_the_slowest(tmp_path):
    result = run(tmp_path, {"FAIL_fleet": "3", "SLEEP_molecule": "2"})
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "=== make fleet: FAILED (exit 3) after 0 s" in out
    assert re.search(r"^=== make lint: passed in \d+ s$", out, re.MULTILINE)
    assert re.search(r"^=== make unit: passed in \d+ s$", out, re.MULTILINE)
    assert "output of unit" in out  # the unit log, printed whole
    last = out.strip().splitlines()[-1]
    assert last.startswith("make test: passed: venv torch-venv system-deps image lint alerts docs-test"), last
    assert "failed: fleet;" in last
    # Whole seconds, as bash's SECONDS counts them: a step of 2.1 s that begins late in a second reads 3 s.
    assert re.search(r"; \d+ s in all, the slowest step: molecule \([23] s\)$", last), last
    assert "output of molecule" in out
    steps = (tmp_path / "record").read_text().split()
    assert steps[:4] == ["venv", "torch-venv", "system-deps", "image"]
    assert steps.index("unit") < steps.index("molecule")


def test_molecule_runs_beside_the_tests_once_unit_has_ended(tmp_path):
    # lint takes 3 s: unit and then molecule start beside it, before the next test step.
    result = run(tmp_path, {"SLEEP_lint": "3"})
    assert result.returncode == 0, result.stdout + result.stderr
    steps = (tmp_path / "record").read_text().split()
    assert steps.index("unit") < steps.index("molecule") < steps.index("alerts"), steps
    # The steps beside are reported after the tests line, unit first, each with its output.
    out = result.stdout
    assert out.index("=== make sanity: passed") < out.index("=== make unit: passed") < out.index(
        "=== make molecule: passed"), out
    assert "output of unit" in out and "output of molecule" in out


def test_a_step_beside_that_fails_is_reported_failed(tmp_path):
    result = run(tmp_path, {"FAIL_molecule": "4"})
    assert result.returncode == 1
    assert "=== make molecule: FAILED (exit 4)" in result.stdout
    assert "failed: molecule;" in result.stdout.strip().splitlines()[-1]


def test_a_failed_setup_step_stops_before_any_test(tmp_path):
    result = run(tmp_path, {"FAIL_image": "2"})
    assert result.returncode == 1
    assert "setup step 'image' failed" in result.stderr
    assert "nothing was tested" in result.stderr
    assert (tmp_path / "record").read_text().split() == ["venv", "torch-venv", "system-deps", "image"]


@pytest.mark.parametrize("flag", ["-n", "--dry-run", "-nk"])
def test_make_dry_run_claims_nothing(flag):
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    result = subprocess.run([make, "-C", str(ROOT), flag, "test"], capture_output=True, text=True, timeout=120,
                            check=False)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "passed" not in out.replace("nothing passed", "")
    assert not re.search(r"\d+ s\b", out), out
    assert "=== make molecule" in out and "molecule_all.py" in out  # what it would run
