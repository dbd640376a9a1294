"""Drift through gpu_audit_report: the same facts twice change nothing; a change shows as findings, a
"Changed since" section, a line in fleet.md and the module's drift return."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import gpu_audit_report
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.drift_md import drift_section

from tests.unit.captures import PRO6000, audit, audited, capture
from tests.unit.modules import run_module
from tests.unit.schemas import validator

# A report's date is its file's modification time: set to a known one, so that "since" can be asserted.
THEN = 1767600000  # 2026-01-05 08:00 UTC
BENCH = {"probe": {"source": "probe", "tool": "torch", "status": "ok", "devices": [], "access": None, "proof": None,
                   "matrices": [], "hung_at": None, "findings": [], "changed": False},
         "nccl": None}


def upgraded() -> dict[str, Any]:
    data = capture(PRO6000)
    data["nvml"]["driver_version"] = "590.44.01"
    return audit(data)


def report(dest: Path, host: str = "h") -> dict[str, Any]:
    return json.loads((dest / f"{host}.json").read_text(encoding="utf-8"))


def run(dest: Path, facts: dict[str, Any], capsys: pytest.CaptureFixture[str], **args: Any) -> dict[str, Any]:
    return run_module(gpu_audit_report.main, {"dest": str(dest), "hosts": {"h": facts}, **args}, capsys)


def age(dest: Path) -> None:
    os.utime(dest / "h.json", (THEN, THEN))


def test_the_same_facts_twice_change_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = run(tmp_path, audited(PRO6000), capsys)
    assert first["changed"] and first["drift"] == {"h": {"items": [], "proof_stale": False}}
    age(tmp_path)
    second = run(tmp_path, audited(PRO6000), capsys)
    assert (second["changed"], second["written"]) == (False, [])
    assert "drift" not in report(tmp_path) and "Changed since" not in (tmp_path / "h.md").read_text()


def test_a_driver_change_is_recorded_then_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(tmp_path, audited(PRO6000), capsys, bench={"h": BENCH})
    proof = report(tmp_path)["proof"]
    assert isinstance(proof["measured_at"], int) and proof["basis"]["driver"] == "580.95.05"
    age(tmp_path)
    changed = run(tmp_path, upgraded(), capsys)
    written = report(tmp_path)
    assert written["drift"] == {"since": "2026-01-05 08:00 UTC", "changes": [
        {"item": "driver", "subject": None, "before": "580.95.05", "after": "590.44.01", "invalidates_proof": True,
         "since": "2026-01-05 08:00 UTC"}]}
    assert changed["drift"] == {"h": {"items": ["driver"], "proof_stale": True}}
    stale = [f for f in written["findings"] if f["id"] == "p2p_proof_stale"]
    assert len(stale) == 1 and "driver 580.95.05 -> 590.44.01" in stale[0]["summary"]
    assert "playbooks/bench.yml" in stale[0]["remedy"]
    markdown = (tmp_path / "h.md").read_text()
    assert "## Changed since 2026-01-05 08:00 UTC" in markdown and "driver 580.95.05 -> 590.44.01" in markdown
    assert "- h: driver (since 2026-01-05 08:00 UTC)" in (tmp_path / "fleet.md").read_text()
    assert list(validator("report").iter_errors(written)) == []
    # The same facts again: the record, the proof and its staleness stay, and no file changes.
    again = run(tmp_path, upgraded(), capsys)
    assert (again["changed"], again["drift"]) == (False, changed["drift"])
    # A new benchmark proves again on the new driver: no longer stale, the record of the change stays.
    proven = run(tmp_path, upgraded(), capsys, bench={"h": BENCH})
    assert proven["drift"] == {"h": {"items": ["driver"], "proof_stale": False}}
    assert report(tmp_path)["proof"]["basis"]["driver"] == "590.44.01"


def test_a_benchmark_read_from_a_log_has_no_measuring_time(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    run(tmp_path, audited(PRO6000), capsys, bench={"h": {**BENCH, "probe": {**BENCH["probe"], "source": "log"}}})
    assert report(tmp_path)["proof"]["measured_at"] is None
    assert run(tmp_path, audited(PRO6000), capsys, bench={"h": {**BENCH, "probe": {**BENCH["probe"],
                                                                                    "source": "log"}}})[
        "changed"] is False


def test_an_older_report_with_a_benchmark_gets_a_proof_of_unknown_time(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    run(tmp_path, audited(PRO6000), capsys, bench={"h": BENCH})
    old = report(tmp_path)
    old.pop("proof")
    (tmp_path / "h.json").write_text(json.dumps(old), encoding="utf-8")
    result = run(tmp_path, upgraded(), capsys)
    assert report(tmp_path)["proof"]["measured_at"] is None and result["drift"]["h"]["proof_stale"] is True


def test_no_record_no_section() -> None:
    assert drift_section(None) == [] and drift_section({"since": None, "changes": []}) == []


def test_the_line_and_the_findings_returned_are_the_reports(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The line the role prints and the findings gpu_audit_fail_on reads carry what drift adds, not only the
    audit's own findings."""
    run(tmp_path, audited(PRO6000), capsys, bench={"h": BENCH})
    age(tmp_path)
    audit_alone = upgraded()["summary"]
    result = run(tmp_path, upgraded(), capsys)
    written = report(tmp_path)
    assert audit_alone["verdict"] != written["summary"]["verdict"]
    assert result["lines"]["h"].startswith(f"h: {written['summary']['verdict']} (")
    assert {"id": "p2p_proof_stale", "severity": "warning"} in result["findings"]["h"]
    assert result["findings"]["h"] == [{"id": f["id"], "severity": f["severity"]} for f in written["findings"]]
    assert result["stats"]["hosts"]["h"]["verdict"] == written["summary"]["verdict"]


def test_a_call_for_some_hosts_keeps_the_others_rows_as_their_reports_say(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The audit writes every host's report; the benchmark's call then writes one host's and passes the others'
    facts as fleet_hosts: fleet.md must not change, nor change back on the next audit (found by molecule's
    idempotence test of proxmox_fix)."""
    both = {"h": audited(PRO6000), "g": audited(PRO6000)}
    run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": both}, capsys)
    age(tmp_path)
    both["h"] = upgraded()
    run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": both}, capsys)
    fleet = (tmp_path / "fleet.md").read_text()
    assert "- h: driver (since 2026-01-05 08:00 UTC)" in fleet
    bench_call = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"g": both["g"]},
                                                    "fleet_hosts": {"h": {"ansible_facts": {"gpu_host": both["h"]}}}},
                            capsys)
    assert bench_call["written"] == [] and (tmp_path / "fleet.md").read_text() == fleet
