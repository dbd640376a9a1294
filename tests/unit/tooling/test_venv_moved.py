"""scripts/venv.sh rebuilds a venv that was built in another directory (a moved or copied checkout, whose
scripts' `#!` lines name the old place) and says so in one line; a venv in its place is left alone.

The checkout is a copy of venv.sh beside a requirements-audit.txt with no requirements, so the venv is real
(made by the running Python's venv module, with pip) and nothing is downloaded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT


def checkout(path: Path) -> Path:
    (path / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "venv.sh", path / "scripts" / "venv.sh")
    (path / "requirements-audit.txt").write_text("# nothing to install\n")
    return path


def venv_sh(path: Path, *, as_make_runs_it: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("VENV", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV", "PYTHON")}
    if as_make_runs_it:
        # The Makefile puts .venv/bin first on PATH: the stale venv's own python3 is the first one found there,
        # and must not be what the new venv is made from (it is deleted first).
        env["PATH"] = f"{path}/.venv/bin:{env['PATH']}"
    else:
        env["PYTHON"] = sys.executable
    return subprocess.run(["bash", str(path / "scripts" / "venv.sh"), "audit"], capture_output=True, text=True,
                          env=env, timeout=300, check=False)


def shebang(path: Path) -> str:
    return (path / ".venv" / "bin" / "pip").read_text().splitlines()[0]


def test_a_moved_checkout_gets_its_venv_rebuilt(tmp_path):
    old = checkout(tmp_path / "old")
    first = venv_sh(old)
    assert first.returncode == 0, first.stderr
    assert shebang(old).startswith(f"#!{old}/.venv/bin/python")

    again = venv_sh(old)
    assert again.returncode == 0 and again.stderr == "", again.stderr

    new = tmp_path / "moved"
    old.rename(new)
    moved = venv_sh(new, as_make_runs_it=True)
    assert moved.returncode == 0, moved.stderr
    told = [line for line in moved.stderr.splitlines() if "moved or copied" in line]
    assert told == [f"venv: {new}/.venv was built as {old}/.venv (a moved or copied checkout): its scripts point "
                    "there; rebuilding it here"], moved.stderr
    assert shebang(new).startswith(f"#!{new}/.venv/bin/python")
    assert subprocess.run([str(new / ".venv" / "bin" / "pip"), "--version"], capture_output=True,
                          check=False).returncode == 0
