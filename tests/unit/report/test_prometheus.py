"""report/prometheus.py: each capture's report as textfile metrics, with the values the report holds.

The output is read back with tests/unit/report/exposition.py (the format's rules) and, where Debian's
``prometheus`` package is installed, checked with ``promtool check metrics``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import gpu_audit_report
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import SEVERITIES, VERDICTS
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.prom_text import (
    ExpositionError,
    Family,
    render,
    same_except,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.prometheus import CAPABILITIES, HEARTBEAT, textfile
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import report_json
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.drift_basis import ITEMS
from hypothesis import given
from hypothesis import strategies as st

from tests.unit import captures
from tests.unit.modules import run_module
from tests.unit.report.exposition import parse, series, value
from tests.unit.report.test_report import FACTS

NOW = 1767323045


def report_of(name: str, **extra: Any) -> dict[str, Any]:
    """A capture's report as report_json writes it (and as the metrics task reads it)."""
    return json.loads(report_json(name, {**captures.audited(name), **extra}))


@pytest.mark.parametrize("name", captures.ALL)
def test_every_capture_gives_the_values_its_report_holds(name: str) -> None:
    report = report_of(name)
    text = textfile(report, NOW)
    samples, helps, types = parse(text)
    summary = report["summary"]
    assert {v: value(samples, "gpuhost_verdict", verdict=v) for v in VERDICTS} == \
        {v: float(v == summary["verdict"]) for v in VERDICTS}
    assert {s: value(samples, "gpuhost_findings", severity=s) for s in SEVERITIES} == \
        {s: float(summary["counts"][s]) for s in SEVERITIES}
    assert {dict(labels)["id"] for labels in series(samples, "gpuhost_finding")} == \
        {f["id"] for f in report["findings"]}
    assert value(samples, "gpuhost_gpus") == summary["gpu_count"]
    assert value(samples, HEARTBEAT) == NOW
    gpus = report.get("gpus") or {}
    info = dict(next(iter(series(samples, "gpuhost_info"))))
    assert info["driver_version"] == (gpus.get("driver_version") or "")
    assert info["cuda_driver_version"] == (gpus.get("cuda_driver_version") or "")
    assert info["virtualization"] == (summary.get("virtualization") or "")
    links = {d["bdf"]: d.get("link") or {} for d in report.get("pci", {}).get("nvidia_devices", [])
             if d.get("kind") == "gpu"}
    for device in gpus.get("devices") or []:
        labels = {"gpu": device["index"], "bus_id": device["pci_bus_id"].lower()}
        link = links.get(device["pci_bus_id"].lower()) or {}
        if link.get("width_current"):
            assert value(samples, "gpuhost_gpu_pcie_link_width", **labels) == link["width_current"]
            assert value(samples, "gpuhost_gpu_pcie_link_max_speed_transfers_per_second", **labels) == \
                link["speed_max_gts"] * 1e9
        gpu_info = {dict(k)["bus_id"]: dict(k) for k in series(samples, "gpuhost_gpu_info")}
        assert gpu_info[labels["bus_id"]]["name"] == (device.get("name") or "")
    for capability in CAPABILITIES:
        matrix = (report.get("p2p") or {}).get(capability) or []
        for a in range(len(matrix)):
            for b in range(a + 1, len(matrix)):
                got = value(samples, "gpuhost_p2p_status", gpu_a=a, gpu_b=b, capability=capability)
                if matrix[a][b] == matrix[b][a] == "OK":
                    assert got == 1
                elif {matrix[a][b], matrix[b][a]} & {"NS", "CNS", "GNS", "TNS", "DR"}:
                    assert got == 0
                else:
                    assert got is None
    # One HELP and TYPE per family, every family a gauge, no host or instance label: Prometheus adds instance.
    assert set(helps) == set(types) == {n for n, _ in samples}
    assert set(types.values()) == {"gauge"}
    assert not any(k in ("host", "instance", "job") for _, labels in samples for k, _ in labels)
    # The bytes are a function of the report and the time alone.
    assert textfile(json.loads(json.dumps(report)), NOW) == text


def test_p2p_pairs_of_the_incident_and_of_bare_metal() -> None:
    incident, _, _ = parse(textfile(report_of(captures.INCIDENT), NOW))
    read = series(incident, "gpuhost_p2p_status")
    assert len([k for k in read if dict(k)["capability"] == "read"]) == 28  # 8 GPUs: every pair once
    assert {v for k, v in read.items() if dict(k)["capability"] == "read"} == {0}
    bare, _, _ = parse(textfile(report_of(captures.PRO6000), NOW))
    assert value(bare, "gpuhost_p2p_status", gpu_a=0, gpu_b=7, capability="read") == 1
    assert value(bare, "gpuhost_p2p_status", gpu_a=0, gpu_b=7, capability="nvlink") == 0
    assert value(bare, "gpuhost_tensor_parallel_size") == 8
    assert value(incident, "gpuhost_tensor_parallel_size") == 8  # the group p2p_not_supported names


def test_a_hypervisor_exports_its_vfio_gpus_links_without_an_index() -> None:
    samples, _, _ = parse(textfile(report_of(captures.HYPERVISOR), NOW))
    widths = series(samples, "gpuhost_gpu_pcie_link_width")
    assert widths and all(dict(k)["gpu"] == "" for k in widths)
    assert value(samples, "gpuhost_tensor_parallel_size") == 1
    assert not series(samples, "gpuhost_p2p_status")


def cell(peer: bool, wrong: int = 0) -> dict[str, Any]:
    return {"peer_access": peer, "ce_wrong": wrong, "sm_wrong": 0, "elements": 1024, "zeros_at_destination": 0}


def probe(*cells: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A two-GPU probe result: cells[0] is GPU0 -> GPU1, cells[1] GPU1 -> GPU0."""
    return {"status": "ok", "failed": False, "proof": [[None, cells[0]], [cells[1], None]], **extra}


@pytest.mark.parametrize(("result", "expected"), [
    (probe(cell(True), cell(True)), 1),
    (probe(cell(True), cell(False)), 0),  # no peer access one way: the copy went through host memory
    (probe(cell(True), cell(True, wrong=3)), 0),
    (probe(cell(True), cell(True), hung_at={"src": 0, "dst": 1}), 0),
    ({"failed": True, "msg": "no CUDA device visible"}, None),  # could not run: nothing proven or disproven
    (None, None),
])
def test_p2p_proven(result: Any, expected: int | None) -> None:
    report = report_of(captures.PRO6000, bench={"probe": result} if result is not None else {})
    samples, _, _ = parse(textfile(report, NOW))
    assert value(samples, "gpuhost_p2p_proven") == expected


def priced(basis: str, latency_basis: str, tp: int = 8) -> dict[str, Any]:
    return {"batch_1": {"allreduce_bytes": 12288, "allreduce_latency_us": 13.7, "basis": basis,
                        "latency_basis": latency_basis, "tensor_parallel_size": tp}}


@pytest.mark.parametrize(("ceiling", "source"), [
    (priced("measured_all_reduce", "measured"), "measured"),
    (priced("measured_all_reduce", "interpolated"), "measured"),
    (priced("estimated_from_pair_latency", "estimated"), "predicted_ceiling"),
    (priced("measured_all_reduce", "clamped"), None),  # outside the sweep: not the latency at that size
])
def test_allreduce_latency_at_the_models_message_size(ceiling: dict[str, Any], source: str | None) -> None:
    report = report_of(captures.INCIDENT, bench={"nccl": {"communication_ceiling": ceiling}})
    samples, _, _ = parse(textfile(report, NOW))
    latency = series(samples, "gpuhost_allreduce_latency_seconds")
    if source is None:
        assert not latency and value(samples, "gpuhost_allreduce_message_bytes") is None
    else:
        assert latency == {(("source", source),): pytest.approx(13.7e-6)}
        assert value(samples, "gpuhost_allreduce_message_bytes") == 12288


@pytest.mark.parametrize(("basis", "latency_basis", "label"), [
    ("measured_all_reduce", "measured", "measured"),
    ("estimated_from_pair_latency", "estimated", "predicted_ceiling"),
    ("measured_all_reduce", "clamped", None),
])
def test_the_communication_ceiling_is_the_reports(basis: str, latency_basis: str, label: str | None) -> None:
    ceiling = priced(basis, latency_basis)
    ceiling["batch_1"]["max_tokens_per_s_single_stream"] = 32.7
    report = report_of(captures.INCIDENT, bench={"nccl": {"communication_ceiling": ceiling}})
    samples, _, _ = parse(textfile(report, NOW))
    rate = series(samples, "gpuhost_communication_ceiling_tokens_per_second")
    assert rate == ({(("basis", label),): pytest.approx(32.7)} if label else {})


def test_tensor_parallel_size_is_the_benchmarked_models() -> None:
    report = report_of(captures.PRO6000,
                       bench={"nccl": {"communication_ceiling": priced("measured_all_reduce", "measured", 2)}})
    samples, _, _ = parse(textfile(report, NOW))
    assert value(samples, "gpuhost_tensor_parallel_size") == 2


def test_drift_proof_and_their_absence() -> None:
    plain, _, _ = parse(textfile(report_of(captures.PRO6000), NOW))
    assert not series(plain, "gpuhost_drift")
    assert value(plain, "gpuhost_proof_stale") is None and value(plain, "gpuhost_last_proof_timestamp_seconds") is None
    report = report_of(captures.PRO6000)
    report["drift"] = {"since": "2026-01-01 00:00 UTC", "changes": [
        {"item": "driver", "subject": None, "before": "570.1", "after": "580.95.05", "invalidates_proof": True}]}
    report["proof"] = {"measured_at": 1767000000, "basis": {}}
    report["findings"].append({"id": "p2p_proof_stale", "severity": "warning", "summary": "", "evidence": {}})
    samples, _, _ = parse(textfile(report, NOW))
    assert {dict(k)["item"]: v for k, v in series(samples, "gpuhost_drift").items()} == \
        {item: float(item == "driver") for item in ITEMS}
    assert value(samples, "gpuhost_proof_stale") == 1
    assert value(samples, "gpuhost_last_proof_timestamp_seconds") == 1767000000
    report["drift"]["changes"] = []
    report["findings"].pop()
    report["proof"]["measured_at"] = None  # read from a log: its time is not known
    samples, _, _ = parse(textfile(report, NOW))
    assert set(series(samples, "gpuhost_drift").values()) == {0}
    assert value(samples, "gpuhost_proof_stale") == 0
    assert value(samples, "gpuhost_last_proof_timestamp_seconds") is None


def test_a_report_that_does_not_say_gives_no_guess() -> None:
    samples, _, _ = parse(textfile({"host": "h"}, NOW))
    assert {name for name, _ in samples} == {HEARTBEAT, "gpuhost_info"}
    odd = report_of(captures.PRO6000)
    odd["summary"]["verdict"] = "great"
    odd["findings"].append({"id": "not_a_catalog_id", "severity": "warning"})
    samples, _, _ = parse(textfile(odd, NOW))
    assert not series(samples, "gpuhost_verdict")
    assert value(samples, "gpuhost_findings", severity="warning") == 1  # counted, but no series of its own
    assert not series(samples, "gpuhost_finding")


@given(st.text())
def test_any_label_value_reads_back_as_written(text: str) -> None:
    family = Family("gpuhost_test_info", "a help text with \\ and \n in it")
    family.add(1, {"name": text, "other": "x"})
    samples, helps, _ = parse(render([family]))
    expected = text.encode("utf-8", "replace").decode("utf-8")
    assert samples == {("gpuhost_test_info", (("name", expected), ("other", "x"))): 1}
    assert helps["gpuhost_test_info"] == "a help text with \\\\ and \\n in it"


@given(st.text(min_size=1), st.text())
def test_a_gpu_named_anything_gives_a_readable_textfile(name: str, vbios: str) -> None:
    report = report_of(captures.I440FX)
    report["gpus"]["devices"][0]["name"] = name
    report["gpus"]["devices"][0]["vbios_version"] = vbios
    report["gpus"]["driver_version"] = name
    samples, _, _ = parse(textfile(report, NOW))
    names = {dict(k)["name"] for k in series(samples, "gpuhost_gpu_info")}
    assert name.encode("utf-8", "replace").decode("utf-8") in names


def test_the_writer_refuses_what_would_be_a_wrong_textfile() -> None:
    with pytest.raises(ExpositionError, match="not match"):
        Family("gpuhost-bad", "x")
    family = Family("gpuhost_x", "x")
    family.add(1, {"a": "1"})
    with pytest.raises(ExpositionError, match="two samples"):
        family.add(2, {"a": "1"})
    with pytest.raises(ExpositionError, match="label name"):
        family.add(1, {"__name__": "y"})
    assert render([Family("gpuhost_empty", "nothing known")]) == ""
    nan = Family("gpuhost_nan", "x")
    nan.add(float("nan"))
    assert render([nan]) == ""


def test_same_except_sets_only_the_heartbeat_aside() -> None:
    report = report_of(captures.PRO6000)
    first, later = textfile(report, NOW), textfile(report, NOW + 3600)
    assert first != later and same_except(first, later, [HEARTBEAT])
    report["summary"]["verdict"] = "unfit"
    assert not same_except(first, textfile(report, NOW + 3600), [HEARTBEAT])


PROMTOOL = shutil.which("promtool")


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian's prometheus package; make system-deps "
                                             "installs it)")
@pytest.mark.parametrize("name", captures.ALL)
def test_promtool_accepts_every_capture(name: str, tmp_path: Path) -> None:
    report = report_of(name, bench={"probe": probe(cell(True), cell(True)),
                                    "nccl": {"communication_ceiling": priced("measured_all_reduce", "measured")}})
    report["gpus"].setdefault("devices", [{}])
    if report["gpus"]["devices"]:
        report["gpus"]["devices"][0]["name"] = 'a "quoted" \\ name\nover two lines'
    report["drift"] = {"since": None, "changes": [{"item": "link"}]}
    report["proof"] = {"measured_at": NOW - 60, "basis": {}}
    text = textfile(report, NOW)
    run = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"{run.stdout}{run.stderr}\n{text}"


def test_gpu_audit_report_returns_each_hosts_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = {"dest": str(tmp_path), "hosts": {"gpu-vm-1": FACTS}, "metrics": True}
    before = int(time.time())
    checked = run_module(gpu_audit_report.main, args, capsys, check_mode=True)
    assert not list(tmp_path.iterdir())  # check mode: the metrics of the report it would write, nothing written
    samples, _, _ = parse(checked["metrics"]["gpu-vm-1"])
    assert value(samples, "gpuhost_verdict", verdict="unfit") == 1
    assert before <= value(samples, HEARTBEAT) <= time.time()
    written = run_module(gpu_audit_report.main, args, capsys)
    again = run_module(gpu_audit_report.main, args, capsys)
    assert written["changed"] and not again["changed"]
    assert same_except(written["metrics"]["gpu-vm-1"], again["metrics"]["gpu-vm-1"], [HEARTBEAT])
    assert "metrics" not in run_module(gpu_audit_report.main, {**args, "metrics": False}, capsys)


def warnings_of(result: dict[str, Any]) -> list[str]:
    return [w["event"]["msg"] if isinstance(w, dict) else w for w in result.get("warnings") or []]


def _with_a_duplicated_gpu_row(facts: dict[str, Any]) -> dict[str, Any]:
    """The facts with GPU 0's row listed twice, as a capture whose GPU list was pasted twice gives."""
    duplicated = json.loads(json.dumps(facts))
    duplicated["gpus"]["devices"].append(dict(duplicated["gpus"]["devices"][0]))
    return duplicated


def test_a_gpu_listed_twice_is_exported_once_with_a_warning() -> None:
    report = json.loads(report_json("gpu-vm-1", _with_a_duplicated_gpu_row(FACTS)))
    warnings: list[str] = []
    samples, _, _ = parse(textfile(report, NOW, warnings.append))
    assert [dict(k)["bus_id"] for k in series(samples, "gpuhost_gpu_info")] == ["0000:01:00.0", "0000:02:00.0"]
    assert len(warnings) == 1 and "0000:01:00.0" in warnings[0] and "twice" in warnings[0]


def test_one_hosts_duplicated_gpu_row_costs_the_fleet_nothing(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    args = {"dest": str(tmp_path), "metrics": True,
            "hosts": {"gpu-vm-1": FACTS, "gpu-vm-2": _with_a_duplicated_gpu_row(FACTS)}}
    result = run_module(gpu_audit_report.main, args, capsys)
    assert not result.get("failed"), result.get("msg")
    assert set(result["metrics"]) == {"gpu-vm-1", "gpu-vm-2"} and set(result["lines"]) == {"gpu-vm-1", "gpu-vm-2"}
    assert any("gpu-vm-2" in w and "0000:01:00.0" in w for w in warnings_of(result))


def test_a_hosts_metrics_that_cannot_be_written_are_left_out_with_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(report: dict[str, Any], timestamp: float, warn: Any = None) -> str:
        if report["host"] == "gpu-vm-2":
            raise ExpositionError("gpuhost_gpu_info has two samples with the labels {}")
        return textfile(report, timestamp, warn)

    monkeypatch.setattr(gpu_audit_report, "textfile", refuse)
    args = {"dest": str(tmp_path), "metrics": True, "hosts": {"gpu-vm-1": FACTS, "gpu-vm-2": FACTS}}
    result = run_module(gpu_audit_report.main, args, capsys)
    assert not result.get("failed"), result.get("msg")
    assert set(result["metrics"]) == {"gpu-vm-1"} and set(result["stats"]) and set(result["lines"]) == {
        "gpu-vm-1", "gpu-vm-2"}
    assert any("gpu-vm-2" in w and "two samples" in w for w in warnings_of(result))
