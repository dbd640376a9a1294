"""The collection as users get it: built from this checkout, installed into an empty path, used by name.

Runs `ansible-galaxy collection build` and `install` for real (offline: community.general, the one
dependency, comes with the controller venv's `ansible` bundle), then every module's documentation and the
audit playbook from the installed copy, in a directory outside the checkout with no ansible.cfg, so that
nothing of the checkout (its collections/ link, its ansible.cfg) can stand in for the install.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.paths import ROOT

BIN = Path(sys.executable).parent
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
FQCN = f"{GALAXY['namespace']}.{GALAXY['name']}"
MODULES = sorted(path.stem for path in (ROOT / "plugins" / "modules").glob("*.py"))


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    # PWD as a shell sets it: the roles write reports under the directory the user ran the playbook from.
    return subprocess.run(argv, cwd=cwd, env={**env, "PWD": str(cwd)}, capture_output=True, text=True, check=False,
                          timeout=900)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("build")
    env = {name: value for name, value in os.environ.items() if not name.startswith("ANSIBLE_")}
    result = run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(out), str(ROOT)], out, env)
    assert result.returncode == 0, result.stdout + result.stderr
    (tarball,) = out.glob("*.tar.gz")
    return tarball


@pytest.fixture(scope="module")
def installed(built: Path, tmp_path_factory) -> dict[str, str]:
    """The environment of a user whose only copy of the collection is the installed one."""
    home = tmp_path_factory.mktemp("user")
    path = home / "collections"
    env = {name: value for name, value in os.environ.items() if not name.startswith("ANSIBLE_")}
    env.update(HOME=str(home), ANSIBLE_COLLECTIONS_PATH=str(path), ANSIBLE_LOCAL_TEMP=str(home / "tmp"),
               PATH=f"{BIN}:{env.get('PATH', '')}")
    result = run([str(BIN / "ansible-galaxy"), "collection", "install", "-p", str(path), str(built)], home, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (path / "ansible_collections" / GALAXY["namespace"] / GALAXY["name"] / "MANIFEST.json").is_file()
    return env


def test_the_tarball_holds_the_collection_and_no_development_tree(built: Path) -> None:
    with tarfile.open(built) as tar:
        tops = {name.split("/")[0] for name in tar.getnames()}
        manifest = json.load(tar.extractfile("MANIFEST.json"))
    assert {"plugins", "roles", "playbooks", "meta", "MANIFEST.json", "README.md"} <= tops
    assert not tops & {"tests", "molecule", "collections", "scripts", ".venv", ".cache", "reports", ".git"}
    assert manifest["collection_info"]["version"] == GALAXY["version"]


def test_the_version_is_the_changelogs_newest_release() -> None:
    changelog = yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text())
    assert GALAXY["version"] in changelog["releases"]


def test_every_module_documents_itself_from_the_install(installed: dict[str, str], tmp_path: Path) -> None:
    result = run([str(BIN / "ansible-doc"), "--json", *(f"{FQCN}.{module}" for module in MODULES)], tmp_path,
                 installed)
    assert result.returncode == 0, result.stderr
    docs = json.loads(result.stdout)
    assert sorted(docs) == sorted(f"{FQCN}.{module}" for module in MODULES)
    for name, doc in docs.items():
        assert doc["doc"]["attributes"]["check_mode"]["support"] in {"full", "partial", "none"}, name


def test_the_audit_playbook_runs_from_the_install_in_check_mode(installed: dict[str, str], tmp_path: Path) -> None:
    result = run([str(BIN / "ansible-playbook"), f"{FQCN}.audit", "-i", "localhost,", "-c", "local", "--check",
                  "-e", f"ansible_python_interpreter={sys.executable}"], tmp_path, installed)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "failed=0" in result.stdout
    # The one verdict, and the report it would write where the user ran the playbook; check mode writes none.
    assert re.search(r"localhost: (fit|fit, with warnings|unfit|not judged) \(", result.stdout), result.stdout[-3000:]
    assert f"Check mode: would write {tmp_path}/reports/localhost.md" in result.stdout
    assert not (tmp_path / "reports").exists()


def test_roles_work_alone_by_name(installed: dict[str, str], tmp_path: Path) -> None:
    """A user's own playbook that names one role (its argument check and its modules come with it)."""
    playbook = tmp_path / "mine.yml"
    playbook.write_text(f"- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: {FQCN}.gpu_audit\n")
    result = run([str(BIN / "ansible-playbook"), str(playbook), "-i", "localhost,", "-c", "local", "--check",
                  "-e", f"ansible_python_interpreter={sys.executable}"], tmp_path, installed)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"Check mode: would write {tmp_path}/reports/localhost.md" in result.stdout
