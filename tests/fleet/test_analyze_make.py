"""`make analyze` runs no shell and no Jinja from INPUT, REPORTS or the directory it is called from: the
reproductions of issue 27, each run for real with make from a directory outside the repository.

Before the fix the recipe spliced INPUT and the caller's directory into a shell string and into extra vars
that Ansible templates: a quote in INPUT ran ``touch``, and a ``{{ lookup('pipe', ...) }}`` in INPUT or in the
directory name ran a command. Each command here would create the marker file (``$GPU_ANALYZE_MARKER``, an
absolute path the test owns, so wherever it ran, the test sees it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fleet.test_site_fleet import ROOT
from tests.paths import CAPTURES

TOUCH = "touch $GPU_ANALYZE_MARKER"
# \u0027 is a quote once the old recipe's JSON was decoded: the lookup ran with the shell's quoting intact.
REPRODUCTIONS = {
    "a quote ending the shell's string": {"INPUT": "x' || " + TOUCH + "; echo ' node.json"},
    "Jinja in INPUT": {"INPUT": "{{ lookup('pipe', '" + TOUCH + "') }} node.json"},
    "Jinja in INPUT, quotes as JSON escapes": {"INPUT": "{{ lookup(\\u0027pipe\\u0027, \\u0027" + TOUCH
                                                        + "\\u0027) }} node.json"},
    # $$ is make's escape for $: the shell function would get $GPU_ANALYZE_MARKER.
    "make's own $(shell) in INPUT": {"INPUT": "node.json $(shell " + TOUCH.replace("$", "$$") + ")"},
    "make's own $(shell) in REPORTS": {"INPUT": "node.json", "REPORTS": "$(shell " + TOUCH.replace("$", "$$") + ")"},
    "make's own $(shell) in the caller's directory": {"INPUT": "node.json",
                                                      "dir": "$(shell " + TOUCH.replace("$", "$$") + ")"},
    "Jinja in REPORTS": {"INPUT": "node.json", "REPORTS": "{{ lookup('pipe', '" + TOUCH + "') }}"},
    "Jinja in the caller's directory": {"INPUT": "node.json", "dir": "{{ lookup('pipe', '" + TOUCH + "') }}"},
    "a quote in the caller's directory": {"INPUT": "node.json", "dir": "it's\" $(" + TOUCH + ") `" + TOUCH + "`"},
}


@pytest.mark.parametrize("case", REPRODUCTIONS, ids=list(REPRODUCTIONS))
def test_make_analyze_runs_nothing_from_its_values(tmp_path: Path, case: str) -> None:
    given = REPRODUCTIONS[case]
    caller = tmp_path / given.get("dir", "caller")
    caller.mkdir()
    shutil.copy(CAPTURES / "baremetal-8xH100-SXM.json", caller / "node.json")
    marker = tmp_path / "ran"
    variables = [f"{name}={value}" for name, value in given.items() if name != "dir"]
    env = {**os.environ, "PWD": str(caller), "GPU_ANALYZE_MARKER": str(marker), "ANSIBLE_NOCOLOR": "1"}
    run = subprocess.run(["make", "-C", str(ROOT), "analyze", *variables], cwd=caller, env=env,
                         capture_output=True, text=True, timeout=300)
    assert not marker.exists(), f"{case}: a command ran\n{run.stdout[-3000:]}\n{run.stderr[-2000:]}"
    # The values arrived as text: node.json was read, relative to the caller's directory, and its report written
    # under it (REPORTS, a module path, has its $VARIABLES expanded as every Ansible path is: data, not a command).
    assert [p.name for p in caller.rglob("node.analysis.md")] == ["node.analysis.md"], \
        f"{run.stdout[-3000:]}\n{run.stderr[-2000:]}"
    assert not (ROOT / "reports").exists() or not (ROOT / "reports" / "node.analysis.md").exists()


def test_make_analyze_without_input_says_what_to_give(tmp_path: Path) -> None:
    run = subprocess.run(["make", "-C", str(ROOT), "analyze", "INPUT=  "], cwd=tmp_path,
                         env={**os.environ, "PWD": str(tmp_path)}, capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    assert "analyze: give INPUT=\"path ...\"" in run.stderr
