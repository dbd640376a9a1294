"""Which Python the controller venv takes, and which ansible-core it then gets.

requirements-runtime.txt pins ansible-core and the ansible bundle per Python version (environment markers):
every Python that scripts/venv.sh accepts must get exactly one of each, and the pair must belong together.
venv.sh's own refusals are run with a stand-in interpreter that reports a chosen version, with or without
its venv module, on a PATH without apt-get or pyenv, so that nothing is installed or downloaded.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

from tests.paths import ROOT

VENV_SH = ROOT / "scripts" / "venv.sh"
RUNTIME = ROOT / "requirements-runtime.txt"

# ansible bundle major -> the ansible-core minor it is built on (each bundle's Requires-Dist ansible-core~=).
BUNDLE_CORE = {12: "2.19", 13: "2.20", 14: "2.21"}


def pins(name: str, python: str) -> list[str]:
    """The versions pinned for `name` whose markers hold on `python` (X.Y)."""
    env = {**default_environment(), "python_version": python, "python_full_version": python + ".0"}
    found = []
    for line in RUNTIME.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        if req.name.lower() == name and (req.marker is None or req.marker.evaluate(env)):
            found.extend(spec.version for spec in req.specifier)
    return found


def venv_sh_floor() -> str:
    text = VENV_SH.read_text()
    major = re.search(r"^MIN_MAJOR=(\d+)$", text, re.MULTILINE)
    minor = re.search(r"^MIN_MINOR=(\d+)$", text, re.MULTILINE)
    assert major and minor, "scripts/venv.sh no longer sets MIN_MAJOR and MIN_MINOR"
    return f"{major[1]}.{minor[1]}"


@pytest.mark.parametrize("python", ["3.11", "3.12", "3.13", "3.14"])
def test_every_accepted_python_gets_one_matching_pair(python):
    cores, bundles = pins("ansible-core", python), pins("ansible", python)
    assert len(cores) == 1, f"Python {python}: ansible-core pins {cores}, expected exactly one"
    assert len(bundles) == 1, f"Python {python}: ansible pins {bundles}, expected exactly one"
    major = int(bundles[0].split(".")[0])
    assert cores[0].startswith(BUNDLE_CORE[major] + "."), (python, cores, bundles)


def test_python_311_gets_the_newest_core_that_runs_there():
    # ansible-core 2.20.0 and later declare Requires-Python >=3.12, 2.19.14 >=3.11 (their wheels' METADATA).
    assert pins("ansible-core", "3.11")[0].startswith("2.19.")
    assert pins("ansible-core", "3.12")[0].startswith("2.21.")


def test_venv_sh_floor_is_the_oldest_python_with_pins():
    floor = venv_sh_floor()
    assert floor == "3.11"
    below = f"3.{int(floor.split('.')[1]) - 1}"
    assert pins("ansible-core", floor) and not pins("ansible-core", below)


# Runs the real interpreter with the probe's code, after making sys.version_info the chosen version and,
# with NO_ENSUREPIP=1, `import ensurepip` fail as it does on Debian without python3-venv.
STANDIN = """#!/bin/sh
[ "$1" = -c ] || exit 2
exec "{python}" -c '
import os, sys
sys.version_info = tuple(int(p) for p in os.environ["FAKE_VERSION"].split(".")) + ("final", 0)
if os.environ.get("NO_ENSUREPIP") == "1":
    sys.modules["ensurepip"] = None
exec(compile(sys.argv[1], "<probe>", "exec"))
' "$2"
"""

# What venv.sh runs before it decides; apt-get and pyenv stay out of reach.
TOOLS = ["bash", "dirname", "sed", "cat", "sha256sum", "cut", "id", "sort", "tail", "basename", "rm"]


def run_venv_sh(tmp_path: Path, version: str, *, no_ensurepip: bool) -> subprocess.CompletedProcess:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, f"{tool} is not on PATH"
        (bindir / tool).symlink_to(found)
    standin = tmp_path / "python3"
    standin.write_text(STANDIN.format(python=sys.executable))
    standin.chmod(0o755)
    env = {"PATH": str(bindir), "HOME": str(tmp_path), "VENV": str(tmp_path / "venv"), "PYTHON": str(standin),
           "FAKE_VERSION": version, "NO_ENSUREPIP": "1" if no_ensurepip else "0"}
    return subprocess.run([str(bindir / "bash"), str(VENV_SH)], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def test_python_310_is_refused_with_what_to_install(tmp_path):
    result = run_venv_sh(tmp_path, "3.10.12", no_ensurepip=False)
    assert result.returncode == 1, result.stderr
    assert "no Python >= 3.11 found" in result.stderr
    assert "apt-get install -y python3 python3-venv" in result.stderr
    assert not (tmp_path / "venv").exists()


def test_python_311_without_its_venv_module_names_python3_venv(tmp_path):
    result = run_venv_sh(tmp_path, "3.11.2", no_ensurepip=True)
    assert result.returncode == 1, result.stderr
    assert "cannot create a virtual environment" in result.stderr
    assert "apt-get install -y python3-venv" in result.stderr
    assert not (tmp_path / "venv").exists()


def test_no_download_step_is_left():
    # Python builds fetched by uv come from GitHub, which air-gapped clusters cannot reach.
    text = VENV_SH.read_text()
    assert "uv python install" not in text and "uv_python" not in text
    assert os.access(VENV_SH, os.X_OK)


AUDIT = ROOT / "requirements-audit.txt"


def requirement_lines(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def test_the_audit_install_is_a_subset_of_the_run_time_pins():
    # `make audit` installs requirements-audit.txt, `make venv` requirements-controller.txt (which includes
    # requirements-runtime.txt) into the same venv: a pin of its own would fight the other install.
    runtime = set(requirement_lines(RUNTIME))
    assert [line for line in requirement_lines(AUDIT) if line not in runtime] == []


@pytest.mark.parametrize("python", ["3.11", "3.12", "3.13"])
def test_the_audit_install_has_ansible_core_without_the_bundle(python):
    env = {**default_environment(), "python_version": python, "python_full_version": python + ".0"}
    wanted = {}
    for line in requirement_lines(AUDIT):
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate(env):
            wanted[req.name.lower()] = str(req.specifier)
    assert wanted["ansible-core"] == "==" + pins("ansible-core", python)[0]
    assert "ansible" not in wanted and "nvidia-ml-py" in wanted
