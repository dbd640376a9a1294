"""gpu_audit_report on what it finds on disk and in its arguments: clear failures or warnings, never a traceback.

Existing files that are not UTF-8, directories where a report goes, old reports whose benchmark section has
another shape or non-finite numbers, host names that are not file names, and writes that fail half-way.
"""

from __future__ import annotations

import errno
import json
import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import gpu_audit_report
import pytest

from ansible.module_utils.common import warnings as module_warnings
from tests.unit.modules import run_module
from tests.unit.report.test_report import BENCH, FACTS


def strict_json(text: str) -> Any:
    """JSON as other tools read it: NaN and Infinity are not JSON."""
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(autouse=True)
def fresh_warnings() -> None:
    """Modules run in-process here: a warning of an earlier run would otherwise come back with this one's."""
    module_warnings._global_warnings.clear()


def warnings_of(result: dict[str, Any]) -> list[str]:
    return [w["event"]["msg"] if isinstance(w, dict) else w for w in result.get("warnings") or []]


def leftovers(directory: Path) -> list[str]:
    """Hidden files a run left, but the fleet table's lock, which stays by design (files/fleet_table.py)."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".") and p.name != ".fleet.lock")


# --------------------------------------------------------------------------------------------------
# What is already on disk


def test_an_existing_report_that_is_not_utf8_is_replaced_with_a_warning(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "h.json").write_bytes(b'{"host": "h", "bench": \xff\xfe}')
    (tmp_path / "h.md").write_bytes(b"# old \xe9 report in latin-1\n")
    (tmp_path / "fleet.json").write_bytes(b'{"format": "gpuhost-fleet/1", "hosts": {"\xff": {"audit": "this run"}}}')
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": FACTS}, "fleet_keep": True},
                        capsys, diff=True)
    assert not result.get("failed"), result
    assert str(tmp_path / "h.json") in result["written"] and str(tmp_path / "h.md") in result["written"]
    assert strict_json((tmp_path / "h.json").read_text(encoding="utf-8"))["host"] == "h"
    assert any(f"{tmp_path / 'h.json'} is not UTF-8" in w for w in warnings_of(result)), warnings_of(result)
    assert any("not UTF-8 text" in d["before"] for d in result["diff"])
    assert any(f"{tmp_path / 'fleet.json'}: expected the fleet table's rows" in w for w in warnings_of(result))
    assert result["fleet"] == {"h": {"audit": "this run"}}  # no row for a name read through a broken byte


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_directory_where_a_report_goes_fails_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       check_mode: bool) -> None:
    (tmp_path / "h.md").mkdir()
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": FACTS}}, capsys,
                        check_mode=check_mode)
    assert result["failed"] is True
    assert f"{tmp_path / 'h.md'} is a directory" in result["msg"]
    assert "remove or rename it" in result["msg"]
    assert not (tmp_path / "h.json").exists()  # nothing written when one file cannot be


def test_a_dest_that_is_a_file_fails_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "reports").write_text("not a directory\n")
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path / "reports"), "hosts": {"h": FACTS}}, capsys)
    assert result["failed"] is True
    assert f"{tmp_path / 'reports'} is not a directory" in result["msg"], result["msg"]


# Benchmark sections of other shapes, as older versions or a hand edit leave them.
ODD_BENCHES = {
    "nccl is a list": {"probe": None, "nccl": [1, 2]},
    "bench is a list": [{"nccl": {}}],
    "results not a list": {"probe": None, "nccl": {"results": "none"}},
    "rows not mappings": {"probe": None, "nccl": {"results": [3, None, {"size_bytes": 8, "out_of_place": [1]}]}},
    "matrices a mapping": {"probe": {"matrices": {"name": "x"}}, "nccl": None},
    "matrix values a string": {"probe": {"matrices": [{"values": "1 2"}]}, "nccl": None},
    "tuning a list": {"probe": None, "nccl": {"results": BENCH["nccl"]["results"], "tuning": [1]}},
    "candidates not mappings": {"probe": None, "nccl": {"results": BENCH["nccl"]["results"],
                                                        "tuning": {"candidates": ["as-is"]}}},
    "transports a list": {"probe": None, "nccl": {"results": BENCH["nccl"]["results"], "transports": ["P2P"]}},
    "communication ceiling summary a number": {"probe": None, "nccl": {"communication_ceiling": {"summary": 457}}},
    "collective a number": {"probe": None, "nccl": {"collective": 3, "results": BENCH["nccl"]["results"]}},
    "finding without id": {"probe": None, "nccl": {"findings": [{"severity": "critical"}]}},
    "findings a string": {"probe": {"findings": "none"}, "nccl": None},
    "notes a string": {"probe": None, "nccl": {"notes": "one note", "results": BENCH["nccl"]["results"]}},
}


@pytest.mark.parametrize("bench", ODD_BENCHES.values(), ids=ODD_BENCHES.keys())
def test_an_old_report_whose_bench_has_another_shape_is_not_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 bench: Any) -> None:
    (tmp_path / "h.json").write_text(json.dumps({"host": "h", **FACTS, "bench": bench}))
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": FACTS}}, capsys)
    assert not result.get("failed"), result
    written = strict_json((tmp_path / "h.json").read_text())
    assert "bench" not in written
    assert any(f"{tmp_path / 'h.json'}" in w and "not kept" in w for w in warnings_of(result)), warnings_of(result)


@pytest.mark.parametrize("bench", ODD_BENCHES.values(), ids=ODD_BENCHES.keys())
def test_a_given_bench_of_another_shape_is_refused_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  bench: Any) -> None:
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": FACTS}, "bench": {"h": bench}},
                        capsys)
    assert not result.get("failed"), result
    assert any("h: the benchmark results given" in w for w in warnings_of(result)), warnings_of(result)


def test_an_old_report_with_odd_summary_still_gets_its_fleet_row(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "gone.json").write_text(json.dumps({"host": "gone", "summary": {"worst_finding": "p2p",
                                                                                "gpu_models": [1, None]},
                                                    "gpus": []}))
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": FACTS},
                                                "fleet_hosts": {"gone": {"unreachable": True, "msg": "down"}}}, capsys)
    assert not result.get("failed"), result
    assert "| gone | unreachable, last report " in (tmp_path / "fleet.md").read_text()


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_benchmark_values_are_written_as_null(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         value: float) -> None:
    bench = json.loads(json.dumps(BENCH))
    bench["nccl"]["results"][0]["out_of_place"]["time_us"] = value
    bench["nccl"]["results"][1]["out_of_place"]["busbw_gbps"] = value
    bench["nccl"]["results"][2]["size_bytes"] = value
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": FACTS}, "bench": {"h": bench}},
                        capsys)
    assert not result.get("failed"), result
    rows = strict_json((tmp_path / "h.json").read_text())["bench"]["nccl"]["results"]
    assert rows[0]["out_of_place"]["time_us"] is None and rows[1]["out_of_place"]["busbw_gbps"] is None
    assert rows[2]["size_bytes"] is None
    assert any("not a finite number" in w for w in warnings_of(result)), warnings_of(result)
    svg = ET.fromstring((tmp_path / "h-nccl.svg").read_text())
    points = " ".join(el.get("points") for el in svg.iter() if el.tag.endswith("polyline"))
    assert "nan" not in points and "inf" not in points


def test_a_previous_report_with_nan_is_read_and_rewritten_as_json(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    bench = json.loads(json.dumps(BENCH))
    report = json.dumps({"host": "h", **FACTS, "bench": bench}).replace('"time_us": 12.0', '"time_us": NaN')
    assert "NaN" in report
    (tmp_path / "h.json").write_text(report)
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": FACTS}}, capsys)
    assert not result.get("failed"), result
    assert strict_json((tmp_path / "h.json").read_text())["bench"]["nccl"]["results"][0]["out_of_place"][
        "time_us"] is None


# --------------------------------------------------------------------------------------------------
# Host names are file names


BAD_NAMES = ["../escaped", "/etc/cron.d/x", "a/b", "nul\0byte", "tab\there", "line\nbreak", "bell\x07", ".", "..",
             "", "fleet", "x" * 250]


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("where", ["hosts", "fleet_hosts", "captures"])
def test_host_names_that_are_not_file_names_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        name: str, where: str) -> None:
    dest = tmp_path / "deep" / "reports"
    args: dict[str, Any] = {"dest": str(dest), "hosts": {"ok": FACTS}, "captures_dest": str(tmp_path / "deep" / "c")}
    if where == "hosts":
        args["hosts"] = {name: FACTS}
    elif where == "fleet_hosts":
        args["fleet_hosts"] = {name: {}}
    else:
        args["captures"] = {name: {"format": "x"}}
    result = run_module(gpu_audit_report.main, args, capsys)
    assert result["failed"] is True
    assert repr(name) in result["msg"] and "refused" in result["msg"], result["msg"]
    assert "inventory" in result["msg"]  # what to do
    assert not dest.exists() and not (tmp_path / "escaped.json").exists()
    assert list(tmp_path.rglob("*")) == []


def test_odd_but_harmless_host_names_are_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = ["gpu-node-1.example.com", "b|odd", "with space", "ünïcode", "back\\slash", ".hidden-ish"]
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": dict.fromkeys(names, FACTS)}, capsys)
    assert not result.get("failed"), result
    assert {f"{n}.json" for n in names} <= {p.name for p in tmp_path.iterdir()}


# --------------------------------------------------------------------------------------------------
# Writes are atomic and leave nothing behind


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", disk_full)
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": FACTS}}, capsys)
    assert result["failed"] is True
    assert "No space left on device" in result["msg"] and str(tmp_path) in result["msg"]
    assert leftovers(tmp_path) == []
    assert not (tmp_path / "h.json").exists()


def test_a_rewrite_keeps_a_stricter_mode_and_drops_looser_bits(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": FACTS}}, capsys)
    assert (tmp_path / "h.json").stat().st_mode & 0o777 == 0o600  # reports are private by default
    os.chmod(tmp_path / "h.json", 0o400)
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": FACTS}}, capsys)
    assert (tmp_path / "h.json").stat().st_mode & 0o777 == 0o400  # someone made it stricter: it stays so
    os.chmod(tmp_path / "h.json", 0o644)
    os.chmod(tmp_path / "h.md", 0o640)
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": FACTS}}, capsys)
    # The content is the same: only the mode changes, and that is a change.
    assert sorted(result["written"]) == [str(tmp_path / "h.json"), str(tmp_path / "h.md")]
    assert (tmp_path / "h.json").stat().st_mode & 0o777 == 0o600 and (tmp_path / "h.md").stat().st_mode & 0o777 == 0o600
    shared = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": FACTS}, "mode": "0640"}, capsys)
    assert not shared["changed"]  # 0600 is within 0640: a stricter mode is kept
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("mode", ["rw-r--r--", "0800", "4755", "", True])
def test_a_mode_that_is_not_permission_bits_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       mode: object) -> None:
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": FACTS}, "mode": mode}, capsys)
    assert result["failed"] and "expected permission bits as an octal string" in result["msg"]
    assert list(tmp_path.iterdir()) == []


def test_fleet_and_captures_written_by_the_module_are_private(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    captures = tmp_path / "captures"
    run_module(gpu_audit_report.main, {"dest": str(tmp_path / "reports"), "hosts": {"h": FACTS},
                                       "captures": {"h": {"format": 1}}, "captures_dest": str(captures)}, capsys)
    written = [*(tmp_path / "reports").iterdir(), *captures.iterdir()]
    assert {p.name for p in written} >= {"h.json", "h.md", "fleet.md"}
    assert {p.name: p.stat().st_mode & 0o777 for p in written} == {p.name: 0o600 for p in written}
