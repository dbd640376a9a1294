"""The fleet table's rows by real host name (fleet.json), merged under a lock by runs that write one directory at
once, and the reason recorded for a host lost kept while it stays lost that way (files/fleet_table.py, through
gpu_audit_report)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import gpu_audit_report
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.fleet_table import (
    LOCK,
    fleet_json,
    fleet_lock,
    recorded_rows,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.report_files import ReportFileError

from ansible.module_utils.common import warnings as module_warnings
from tests.paths import ROOT
from tests.unit.modules import run_module
from tests.unit.report.test_report import FACTS


@pytest.fixture(autouse=True)
def fresh_warnings() -> None:
    module_warnings._global_warnings.clear()


def table(dest: Path) -> dict[str, dict]:
    return json.loads((dest / "fleet.json").read_text())["hosts"]


# Names that Markdown escapes in fleet.md (or that an escape could be read into): each came back from fleet.md as
# another name, a new "not audited" row on every fleet_keep run.
ESCAPED = ["tick`host", "back\\slash", "pipe|host", "amp&host", "lt<host", "bracket[host]", "star*host", "us_host_"]


def test_hosts_whose_names_markdown_escapes_keep_one_row_each_run_after_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = str(tmp_path)
    run_module(gpu_audit_report.main, {"dest": dest, "hosts": dict.fromkeys(ESCAPED, FACTS)}, capsys)
    for _ in range(3):
        result = run_module(gpu_audit_report.main, {"dest": dest, "hosts": {"plain": FACTS}, "fleet_keep": True},
                            capsys)
        assert sorted(result["fleet"]) == sorted([*ESCAPED, "plain"])
        assert sorted(table(tmp_path)) == sorted([*ESCAPED, "plain"])
        assert f"{len(ESCAPED) + 1} host(s):" in (tmp_path / "fleet.md").read_text()
    # The third keeping run found the table as the second left it.
    assert result["changed"] is False


# One slice of a sliced job: its module runs in a process of its own, imported and waiting, and starts with the
# others when the go file appears, so that the slices read and write the table at the same time.
SLICE = """
import json, os, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import gpu_audit_report
args, go = sys.argv[3], sys.argv[4]
while not os.path.exists(go):
    time.sleep(0.005)
sys.argv = ["gpu_audit_report.py", args]
gpu_audit_report.main()
"""


def slices_at_once(dest: Path, tmp_path: Path, slices: list[list[str]], tag: str) -> list[dict]:
    go = tmp_path / f"go-{tag}"
    children = []
    for number, hosts in enumerate(slices):
        args = tmp_path / f"args-{tag}-{number}.json"
        args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"dest": str(dest), "hosts": dict.fromkeys(hosts, FACTS),
                                                            "fleet_keep": True}}))
        children.append(subprocess.Popen([sys.executable, "-c", SLICE, str(ROOT / "collections"),
                                          str(ROOT / "plugins" / "modules"), str(args), str(go)],
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    time.sleep(1.0)  # every slice imported and waiting
    go.touch()
    results = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, f"{out[-2000:]}\n{err[-2000:]}"
        results.append(json.loads(out))
    return results


def test_slices_writing_one_directory_at_once_lose_no_row(tmp_path: Path) -> None:
    dest = tmp_path / "reports"
    rounds = [[[f"r{r}-s{s}-h{h}" for h in range(2)] for s in range(6)] for r in range(2)]
    expected: set[str] = set()
    for number, slices in enumerate(rounds):  # from an empty directory, then over the table it left
        slices_at_once(dest, tmp_path, slices, str(number))
        expected |= {host for hosts in slices for host in hosts}
        assert set(table(dest)) == expected, f"round {number}: lost {sorted(expected - set(table(dest)))}"
        assert f"{len(expected)} host(s):" in (dest / "fleet.md").read_text()
    assert not [p.name for p in dest.iterdir() if p.name.endswith(".tmp")]


def test_a_host_lost_the_same_way_keeps_the_reason_recorded_so_a_rerun_changes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Ansible words one refused ssh connection two ways, by which of ssh and its own write to it ends first.
    refused = "Data could not be sent to remote host \"10.0.0.9\": ssh: connect to host 10.0.0.9 port 22: " \
              "Connection refused"
    broken = "Data could not be sent to remote host '10.0.0.9': [Errno 32] Broken pipe"
    args = {"dest": str(tmp_path), "hosts": {"a": FACTS}}
    first = run_module(gpu_audit_report.main, {**args, "fleet_hosts": {"gone": {"unreachable": True, "msg": refused}}},
                       capsys)
    assert first["fleet"]["gone"]["msg"] == refused
    again = run_module(gpu_audit_report.main, {**args, "fleet_hosts": {"gone": {"unreachable": True, "msg": broken}}},
                       capsys)
    assert (again["changed"], again["written"]) == (False, [])
    assert again["fleet"]["gone"]["msg"] == refused and "Connection refused" in (tmp_path / "fleet.md").read_text()
    assert table(tmp_path)["gone"] == {"audit": "unreachable", "msg": refused}
    # Lost another way, it says the new reason.
    failed = run_module(gpu_audit_report.main, {**args, "fleet_hosts": {"gone": {"failed": True, "msg": "no capture"}}},
                        capsys)
    assert failed["fleet"]["gone"]["msg"] == "no capture"
    assert "- gone: failed: no capture" in (tmp_path / "fleet.md").read_text()


def test_a_directory_of_an_earlier_version_keeps_the_hosts_its_fleet_d_records(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "fleet.d").mkdir()
    (tmp_path / "fleet.d" / "old|one.json").write_text('{"audit": "this run"}\n')
    (tmp_path / "fleet.d" / "lost.json").write_text('{"audit": "unreachable", "msg": "no route"}\n')
    (tmp_path / "fleet.md").write_text("# GPU fleet audit\n\n| Host |\n|---|\n| old\\|one |\n| phantom\\\\ |\n")
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"a": FACTS}, "fleet_keep": True},
                        capsys)
    assert sorted(result["fleet"]) == ["a", "lost", "old|one"]
    assert recorded_rows(str(tmp_path)) == {"a": {"audit": "this run", "msg": None},
                                            "lost": {"audit": "not audited", "msg": None},
                                            "old|one": {"audit": "not audited", "msg": None}}


def test_fleet_json_is_the_rows_by_host_name() -> None:
    text = fleet_json({"b": {"audit": "unreachable", "msg": "x", "report_date": None},
                       "a|b": {"audit": "this run"}, "c": {"audit": "not audited", "msg": None}})
    assert json.loads(text) == {"format": "gpuhost-fleet/1", "hosts": {
        "a|b": {"audit": "this run"}, "b": {"audit": "unreachable", "msg": "x"}, "c": {"audit": "not audited"}}}


def test_the_lock_is_exclusive_and_a_run_that_holds_it_too_long_is_named(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)\n",
                               str(tmp_path / LOCK)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ReportFileError, match=r"another run has held .*\.fleet\.lock for 0\.3 s"), \
                fleet_lock(str(tmp_path), wait_s=0.3):
            pass
    finally:
        holder.kill()
        holder.wait()
    with fleet_lock(str(tmp_path), wait_s=5):
        assert os.path.exists(tmp_path / LOCK)


def test_another_user_of_the_directory_takes_the_lock_read_only(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / LOCK).touch()
    opened = []
    real_open = os.open

    def as_another_user(path: str, flags: int, *args: int) -> int:
        if flags & os.O_RDWR:
            raise PermissionError(13, "Permission denied")
        opened.append(flags)
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", as_another_user)
    with fleet_lock(str(tmp_path), wait_s=5):
        assert opened and not opened[0] & (os.O_RDWR | os.O_WRONLY)
