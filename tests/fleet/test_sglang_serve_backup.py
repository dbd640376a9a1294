"""roles/sglang_serve/tasks/backup.yml, run for real on this machine: it removes only the copies it makes.

sglang_serve_backup_dir may be a directory the role did not create. Before, with nothing in service, the role
deleted it recursively, with whatever else it held; now it removes its own copies by name, and a re-run with
nothing in service changes nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.fleet.test_site_fleet import ROOT, ansible_playbook


def backup(tmp_path: Path, in_service: list[str]) -> subprocess.CompletedProcess[str]:
    live = tmp_path / "live"
    settings = {
        "sglang_serve_backup_dir": str(tmp_path / "backups"),
        "__sglang_serve_files": [{"name": name, "path": str(live / file)} for name, file in
                                 (("unit", "sglang-x.service"), ("env", "x.env"), ("secret", "x.yaml"))],
        "__sglang_serve_in_service": in_service,
    }
    (tmp_path / "settings.json").write_text(json.dumps(settings))
    (tmp_path / "play.yml").write_text(
        # The controller's own interpreter, as every other local play of these tests: interpreter discovery may
        # pick a pyenv shim with no version selected, which fails.
        "- hosts: localhost\n  gather_facts: false\n"
        "  vars: {ansible_python_interpreter: '{{ ansible_playbook_python }}'}\n  tasks:\n"
        f"    - ansible.builtin.include_tasks: {ROOT / 'roles' / 'sglang_serve' / 'tasks' / 'backup.yml'}\n")
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run([ansible_playbook(), "-i", "localhost,", "-c", "local", str(tmp_path / "play.yml"),
                           "-e", f"@{tmp_path / 'settings.json'}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def changed(run: subprocess.CompletedProcess[str]) -> int:
    recap: Any = re.search(r"changed=(\d+)", run.stdout)
    return int(recap.group(1))


def test_nothing_in_service_removes_only_the_roles_own_copies(tmp_path: Path) -> None:
    backups = tmp_path / "backups"
    backups.mkdir()
    (backups / "notes.txt").write_text("the operator's own file\n")
    (backups / "sglang-x.service").write_text("[Unit]\n")  # a stale copy of an earlier deployment
    run = backup(tmp_path, [])
    assert run.returncode == 0, f"{run.stdout[-3000:]}\n{run.stderr[-2000:]}"
    assert sorted(p.name for p in backups.iterdir()) == ["notes.txt"]
    again = backup(tmp_path, [])
    assert again.returncode == 0 and changed(again) == 0, again.stdout[-3000:]


def test_files_in_service_are_copied_and_stale_copies_dropped(tmp_path: Path) -> None:
    live, backups = tmp_path / "live", tmp_path / "backups"
    live.mkdir()
    backups.mkdir()
    (live / "sglang-x.service").write_text("[Unit]\nDescription=new\n")
    (backups / "x.env").write_text("OLD=1\n")  # the deployment before had an env file; this one has none
    (backups / "notes.txt").write_text("kept\n")
    run = backup(tmp_path, [str(live / "sglang-x.service")])
    assert run.returncode == 0, f"{run.stdout[-3000:]}\n{run.stderr[-2000:]}"
    assert sorted(p.name for p in backups.iterdir()) == ["notes.txt", "sglang-x.service"]
    assert (backups / "sglang-x.service").read_text() == "[Unit]\nDescription=new\n"


def test_a_copy_left_as_a_link_is_replaced_not_written_through(tmp_path: Path) -> None:
    """The copy of a unit that was masked (a link to /dev/null, kept as a link) and a unit in service now that is a
    file again: the new copy replaces the link. cp wrote through it instead, into /dev/null, and the rollback of
    the next failed deployment put the masked unit back in place of the one in service."""
    live, backups = tmp_path / "live", tmp_path / "backups"
    live.mkdir()
    backups.mkdir()
    (live / "sglang-x.service").write_text("[Unit]\nDescription=unmasked\n")
    (backups / "sglang-x.service").symlink_to(os.devnull)
    run = backup(tmp_path, [str(live / "sglang-x.service")])
    assert run.returncode == 0, f"{run.stdout[-3000:]}\n{run.stderr[-2000:]}"
    copy = backups / "sglang-x.service"
    assert not copy.is_symlink() and copy.read_text() == "[Unit]\nDescription=unmasked\n"
