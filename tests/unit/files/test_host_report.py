"""host_report: a host's report files (the gate's) by the same rules as the audit's reports."""

from __future__ import annotations

import json
from pathlib import Path

import host_report
import pytest

from tests.unit.modules import run_module

FILES = {"-gate.json": json.dumps({"verdict": "pass"}) + "\n", "-gate.md": "# pass\n"}


def test_writes_once_then_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = {"dest": str(tmp_path / "reports"), "host": "gpu-1", "files": FILES}
    first = run_module(host_report.main, args, capsys)
    assert first["changed"] is True
    reports = tmp_path / "reports"
    assert first["written"] == [str(reports / "gpu-1-gate.json"), str(reports / "gpu-1-gate.md")]
    assert (tmp_path / "reports" / "gpu-1-gate.md").read_text() == "# pass\n"
    assert (tmp_path / "reports" / "gpu-1-gate.json").stat().st_mode & 0o777 == 0o600
    again = run_module(host_report.main, args, capsys)
    assert (again["changed"], again["written"]) == (False, [])


def test_check_mode_writes_nothing_and_shows_the_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "h-gate.md").write_bytes(b"\xff old\n")
    result = run_module(host_report.main, {"dest": str(tmp_path), "host": "h", "files": FILES}, capsys,
                        check_mode=True, diff=True)
    assert result["changed"] is True and len(result["diff"]) == 2
    assert "not UTF-8 text" in next(d["before"] for d in result["diff"] if d["before_header"].endswith(".md"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h-gate.md"]


@pytest.mark.parametrize("host", ["../escaped", "/etc/x", "a/b", "tab\t", "line\n", ".", "..", ""])
def test_host_names_that_are_not_file_names_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        host: str) -> None:
    dest = tmp_path / "deep" / "reports"
    result = run_module(host_report.main, {"dest": str(dest), "host": host, "files": FILES}, capsys)
    assert result["failed"] is True and "refused as a report file name" in result["msg"] and repr(host) in result["msg"]
    assert list(tmp_path.rglob("*")) == []


@pytest.mark.parametrize(("files", "why"), [({"/x.json": "{}"}, "expected a file name ending"),
                                            ({"": "{}"}, "expected a file name ending"),
                                            ({"-gate.json": {"verdict": "pass"}}, "expected the file's text")])
def test_suffixes_and_contents_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict,
                                           why: str) -> None:
    result = run_module(host_report.main, {"dest": str(tmp_path), "host": "h", "files": files}, capsys)
    assert result["failed"] is True and why in result["msg"]
    assert list(tmp_path.iterdir()) == []


def test_a_directory_in_the_way_fails_in_check_mode_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "h-gate.json").mkdir()
    result = run_module(host_report.main, {"dest": str(tmp_path), "host": "h", "files": FILES}, capsys,
                        check_mode=True)
    assert result["failed"] is True and "is a directory" in result["msg"] and "remove or rename it" in result["msg"]
