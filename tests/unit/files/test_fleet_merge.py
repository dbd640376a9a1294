"""gpu_fleet_sources and gpu_fleet_merge: fleet.md rebuilt from report directories (AWX job slices), and the
compact verdicts set_stats publishes (report/fleet_stats.py)."""

from __future__ import annotations

import json
from pathlib import Path

import gpu_audit_report
import gpu_fleet_merge
import gpu_fleet_sources
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.fleet_stats import fleet_stats, host_verdicts

from tests.unit.modules import run_module
from tests.unit.report.test_report import FACTS

LOST = {"audit": "unreachable", "report_date": None, "msg": "ssh: connect to host: Connection refused"}


def audit(dest: Path, hosts: list[str], lost: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    """One run as the gpu_audit role makes it: the reports, then where each row comes from."""
    result = run_module(gpu_audit_report.main, {"dest": str(dest), "hosts": dict.fromkeys(hosts, FACTS),
                                                "fleet_hosts": {h: {"unreachable": True, "msg": LOST["msg"]}
                                                                for h in lost}}, capsys)
    run_module(gpu_fleet_sources.main, {"dest": str(dest), "sources": result["fleet"], "hosts": [*hosts, *lost]},
               capsys)
    return result


def test_stats_count_verdicts_and_lost_hosts_and_leave_kept_rows_out() -> None:
    fit = {"summary": {"verdict": "fit", "worst_finding": None, "action": "none"}}
    verdicts = host_verdicts({"a": FACTS, "b": fit})
    stats = fleet_stats(verdicts, {"c": LOST, "d": {"audit": "not audited"}}, {"a": "r/a.md"})
    assert stats["hosts"] == {
        "a": {"audit": "this run", "verdict": "unfit", "worst_finding": "critical: p2p_not_supported",
              "action": "drain", "report": "r/a.md"},
        "b": {"audit": "this run", "verdict": "fit", "worst_finding": None, "action": "none", "report": None},
        "c": {"audit": "unreachable", "verdict": None, "worst_finding": None, "action": None, "report": None,
              "msg": LOST["msg"]}}
    assert stats["counts"] == {"fit": 1, "unfit": 1, "unreachable": 1}


def test_the_report_module_returns_the_stats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = audit(tmp_path, ["gpu-1"], ["gone"], capsys)
    assert result["stats"]["hosts"]["gpu-1"]["report"] == str(tmp_path / "gpu-1.md")
    assert result["stats"]["counts"] == {"unfit": 1, "unreachable": 1}


def test_sources_record_the_play_only_and_change_nothing_the_second_time(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = {"dest": str(tmp_path), "hosts": ["a", "c"],
            "sources": {"a": {"audit": "this run"}, "b": {"audit": "this run"}, "c": LOST,
                        "kept": {"audit": "not audited", "report_date": None, "msg": None}}}
    check = run_module(gpu_fleet_sources.main, args, capsys, check_mode=True, diff=True)
    assert check["changed"] and check["diff"] and not (tmp_path / "fleet.d").exists()
    first = run_module(gpu_fleet_sources.main, args, capsys)
    assert first["written"] == [str(tmp_path / "fleet.d" / "a.json"), str(tmp_path / "fleet.d" / "c.json")]
    assert json.loads((tmp_path / "fleet.d" / "c.json").read_text()) == {"audit": "unreachable", "msg": LOST["msg"]}
    assert run_module(gpu_fleet_sources.main, args, capsys)["changed"] is False


def test_merge_of_two_directories_gives_the_fleet_md_of_one_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    audit(tmp_path / "whole", ["a", "b", "c"], ["gone"], capsys)
    audit(tmp_path / "one", ["a", "b"], [], capsys)
    audit(tmp_path / "two", ["c"], ["gone"], capsys)
    args = {"dirs": [str(tmp_path / "one"), str(tmp_path / "two")], "dest": str(tmp_path / "merged")}
    check = run_module(gpu_fleet_merge.main, args, capsys, check_mode=True)
    assert check["changed"] and not (tmp_path / "merged").exists()
    merged = run_module(gpu_fleet_merge.main, args, capsys)
    assert (tmp_path / "merged" / "fleet.md").read_text() == (tmp_path / "whole" / "fleet.md").read_text()
    # Its rows by host name too, which a later run with fleet_keep into that directory keeps.
    assert (tmp_path / "merged" / "fleet.json").read_text() == (tmp_path / "whole" / "fleet.json").read_text()
    assert merged["hosts"] == {"a": args["dirs"][0], "b": args["dirs"][0], "c": args["dirs"][1],
                               "gone": args["dirs"][1]}
    assert merged["stats"]["counts"] == {"unfit": 3, "unreachable": 1}
    assert run_module(gpu_fleet_merge.main, args, capsys)["changed"] is False


def test_merge_takes_a_host_from_the_first_directory_and_says_what_it_cannot_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    audit(tmp_path / "one", ["a"], [], capsys)
    audit(tmp_path / "two", ["a", "b"], [], capsys)
    (tmp_path / "two" / "b.json").unlink()
    (tmp_path / "two" / "fleet.d" / "junk.json").write_text("[1]")
    result = run_module(gpu_fleet_merge.main, {"dirs": [str(tmp_path / "one"), str(tmp_path / "two")]}, capsys)
    said = json.dumps(result["warnings"])
    assert "a has reports in " in said and "junk.json: expected a JSON object" in said
    assert "b: " in said and "shown as not audited" in said
    assert "| b | not audited, no report yet |" in (tmp_path / "one" / "fleet.md").read_text()


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_merge_without_audit_rows_says_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  make: str) -> None:
    if make == "empty":
        (tmp_path / "reports").mkdir()
    result = run_module(gpu_fleet_merge.main, {"dirs": [str(tmp_path / "reports")]}, capsys)
    assert result["failed"] is True
    expected = "not a directory" if make == "missing" else "Run playbooks/audit.yml into them first"
    assert expected in result["msg"] and "Traceback" not in result["msg"]
