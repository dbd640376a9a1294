"""playbooks/schedule.yml's check of its settings, run for real in check mode on this machine.

A value that ends in a line break used to pass the check (``$`` matches before a final newline): an extra
argument ``-v`` + newline followed by ``ExecStartPre=+...`` put an ExecStartPre line, run as root, into the service
that ``systemd-analyze verify`` then read. Every setting that reaches a unit must be refused before any unit is
written, and good settings must still pass.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.test_site_fleet import ROOT, ansible_playbook

GOOD = {"gpu_schedule_inventory": "inventories/prod/hosts.yml", "gpu_schedule_user": "root"}
CHECK_TASK = "TASK [Check the schedule's settings]"


def schedule(tmp_path: Path, settings: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    extra = tmp_path / "settings.json"
    # JSON keeps the line breaks that -e key=value would not. The controller's own interpreter, as every other
    # local play of these tests: interpreter discovery may pick a pyenv shim with no version selected.
    extra.write_text(json.dumps({"ansible_python_interpreter": "{{ ansible_playbook_python }}", **settings}))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run([ansible_playbook(), "-i", "localhost,", "-c", "local", "--check",
                           str(ROOT / "playbooks" / "schedule.yml"), "-e", f"@{extra}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def refused_by_the_check(run: subprocess.CompletedProcess[str]) -> bool:
    after_check = run.stdout[run.stdout.index(CHECK_TASK):]
    printed = " ".join(after_check.split())
    return (run.returncode != 0 and "Expected gpu_schedule_inventory" in printed
            and "TASK [Verify the units]" not in after_check)


@pytest.mark.parametrize("settings", [
    {"gpu_schedule_extra_args": ["-v\n", "ExecStartPre=+/tmp/gpu-schedule-proof"]},
    {"gpu_schedule_inventory": "inventories/prod/hosts.yml\n"},
    {"gpu_schedule_user": "root\n"},
    {"gpu_schedule_name": "gpuhost-audit\n"},
    {"gpu_schedule_timeout": "2h\n"},
    {"gpu_schedule_interval": "daily\nExecStartPre=+/tmp/gpu-schedule-proof"},
], ids=["extra-args", "inventory", "user", "name", "timeout", "interval"])
def test_a_value_ending_a_units_line_is_refused_before_any_unit_is_written(tmp_path: Path,
                                                                            settings: dict[str, Any]) -> None:
    run = schedule(tmp_path, {**GOOD, **settings})
    assert refused_by_the_check(run), f"{run.stdout[-4000:]}\n{run.stderr[-2000:]}"


def test_good_settings_pass_the_check(tmp_path: Path) -> None:
    run = schedule(tmp_path, GOOD)
    after_check = run.stdout[run.stdout.index(CHECK_TASK):]
    assert "Expected gpu_schedule_inventory" not in " ".join(after_check.split()), run.stdout[-4000:]
    assert "TASK [Look for the checkout and its ansible-playbook]" in after_check
