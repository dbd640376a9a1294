"""Reports: deterministic content, written only when it changes, check mode honoured."""

from __future__ import annotations

import json
import os
from pathlib import Path

import gpu_audit_report
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.report import render as report

from tests.unit.modules import run_module

FACTS = {
    "schema_version": 3,
    "virtualization": {"type": "vm", "summary": "KVM virtual machine (machine q35)",
                       "evidence": [{"signal": "DMI", "value": "QEMU | q35", "says": "kvm", "weight": "strong"}]},
    "gpus": {"source": "nvml", "driver_version": "580.95.05", "cuda_driver_version": "13.0",
             "devices": [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                          "pci_bus_id": f"0000:0{i + 1}:00.0", "compute_capability": "12.0",
                          "memory_total_mib": 97887, "bar1_total_mib": 131072,
                          "pcie": {"gen_current": 1, "gen_max": 5, "width_current": 16, "width_max": 16},
                          "persistence_mode": True, "ecc": False, "mig": None} for i in range(2)]},
    "p2p": {"read": [["X", "NS"], ["NS", "X"]]},
    "topology": {"gpus": ["GPU0", "GPU1"], "matrix": [["X", "PHB"], ["PHB", "X"]],
                 "cpu_affinity": ["0-31", "0-31"], "numa_affinity": [None, None]},
    "findings": [Finding("p2p_not_supported", "critical", "No P2P | here", {"pairs": 2},
                         "args: -set device.hostpci0.x-nv-gpudirect-clique=0", "drain").as_dict()],
    "problems": [],
    "summary": {"verdict": "unfit", "virtualization": "KVM virtual machine (machine q35)", "gpu_count": 2,
                "gpu_models": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"], "p2p": "none",
                "worst_finding": {"id": "p2p_not_supported", "severity": "critical"},
                "counts": {"critical": 1, "warning": 0, "info": 0}, "action": "drain"},
}


def test_host_markdown_carries_verdict_matrix_and_remedy() -> None:
    text = report.host_markdown("gpu-vm-1", FACTS)
    assert "**Verdict: unfit** (1 critical, 0 warning, 0 info)" in text
    assert "| GPU0 | X | NS |" in text
    assert "-set device.hostpci0.x-nv-gpudirect-clique=0" in text
    assert "No P2P | here" in text  # prose is kept as written outside tables
    assert "| GPUs | 2 x NVIDIA RTX PRO 6000 Blackwell Server Edition (driver 580.95.05, CUDA 13.0) |" in text


def test_table_cells_escape_pipes() -> None:
    assert report.table(["a"], [["x|y"]])[2] == "| x\\|y |"


def test_fleet_markdown_counts_verdicts() -> None:
    fit = json.loads(json.dumps(FACTS))
    fit["summary"].update(verdict="fit", worst_finding=None)
    text = report.fleet_markdown({"b-host": FACTS, "a-host": fit})
    assert "2 host(s): 1 fit, 0 fit with warnings, 1 unfit." in text
    assert text.index("a-host") < text.index("b-host")
    assert "| b-host | this run | unfit |" in text and "critical: p2p_not_supported" in text
    assert "Not audited in this run" not in text


def test_fleet_markdown_keeps_unreachable_and_failed_hosts_with_their_last_report() -> None:
    absent = {
        "gone": {"status": "unreachable", "msg": "ssh: connect to host 10.0.0.9 port 22: No route to host",
                 "report": FACTS, "report_date": "2026-01-02 03:04 UTC"},
        "broken": {"status": "failed", "msg": "cannot read the capture /x.json", "report": None,
                   "report_date": None},
        "later": {"status": "not audited", "msg": None, "report": FACTS, "report_date": "2026-02-01 00:00 UTC"},
    }
    text = report.fleet_markdown({"here": FACTS}, absent)
    # Every host has its row, sorted; the verdicts counted are this run's only.
    assert "4 host(s): 0 fit, 0 fit with warnings, 1 unfit; 1 unreachable, 1 failed, 1 not audited in this run" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| Host")]
    assert [row.split(" | ")[0][2:] for row in rows] == ["broken", "gone", "here", "later"]
    # The last report's verdict, marked with its status and date; a host never audited has empty cells.
    assert "| gone | unreachable, last report 2026-01-02 03:04 UTC | unfit | TP over 2 GPUs | 2 x NVIDIA RTX PRO 6000" \
        in text
    assert "| broken | failed, no report yet | - | - | - | - | - | - |" in text
    assert "| later | not audited, last report 2026-02-01 00:00 UTC | unfit |" in text
    # Why, below the table: "|" in a reason cannot break it.
    assert "- gone: unreachable: ssh: connect to host 10.0.0.9 port 22: No route to host" in text
    assert "- broken: failed: cannot read the capture /x.json" in text
    assert "- later:" not in text


def test_fleet_markdown_prefers_this_runs_facts_over_an_absent_row() -> None:
    text = report.fleet_markdown({"h": FACTS}, {"h": {"status": "unreachable", "msg": "x", "report": None,
                                                       "report_date": None}})
    assert "1 host(s): 0 fit, 0 fit with warnings, 1 unfit." in text and "unreachable" not in text


def test_verdict_line_names_the_vm_and_the_report() -> None:
    link = {"proxmox_host": "pve-1", "vmid": "120"}
    assert report.verdict_line("g", FACTS, link, "reports/g.md") == (
        "g: unfit (KVM virtual machine (machine q35); 2 GPU(s); P2P none) - critical: p2p_not_supported. "
        "Runs as VM 120 on pve-1, which holds the fix (see the report). Report: reports/g.md")
    fit = json.loads(json.dumps(FACTS))
    fit["summary"].update(verdict="fit", worst_finding=None)
    fit["findings"] = []
    assert report.verdict_line("h", fit, None, "r/h.md").endswith(") - no findings. Report: r/h.md")


def _finding(identifier: str, severity: str) -> dict:
    return {"id": identifier, "severity": severity, "summary": "", "evidence": {}, "remedy": ""}


def test_verdict_line_names_every_critical_and_warning_finding() -> None:
    """A paste dropped for lack of a probe (bench_probe_not_run) is named beside audit_not_judged: the line
    showed only the worst before."""
    facts = json.loads(json.dumps(FACTS))
    facts["findings"] = [_finding("audit_not_judged", "warning"), _finding("bench_probe_not_run", "warning"),
                         _finding("material_context", "info")]
    facts["summary"].update(verdict="not judged", worst_finding={"id": "audit_not_judged", "severity": "warning"})
    assert " - warning: audit_not_judged, bench_probe_not_run. Report: r/h.md" in report.verdict_line(
        "h", facts, None, "r/h.md")
    facts["findings"].insert(0, _finding("p2p_not_supported", "critical"))
    assert " - critical: p2p_not_supported; warning: audit_not_judged, bench_probe_not_run. " in report.verdict_line(
        "h", facts, None, "r/h.md")
    facts["findings"] = [_finding("material_context", "info")]
    assert " - info: material_context. " in report.verdict_line("h", facts, None, "r/h.md")


def test_verdict_line_with_many_findings_gives_their_counts_and_the_worst() -> None:
    facts = json.loads(json.dumps(FACTS))
    facts["findings"] = ([_finding(f"c{n}", "critical") for n in range(2)]
                         + [_finding(f"w{n}", "warning") for n in range(5)])
    assert (" - 2 critical and 5 warning findings, the worst critical: c0 (all in the report). "
            in report.verdict_line("h", facts, None, "r/h.md"))


def test_module_writes_once_then_reports_no_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = {"dest": str(tmp_path / "reports"), "hosts": {"gpu-vm-1": FACTS}}
    first = run_module(gpu_audit_report.main, args, capsys)
    assert first["changed"] is True
    assert sorted(Path(p).name for p in first["written"]) == ["fleet.json", "fleet.md", "gpu-vm-1-p2p.svg",
                                                              "gpu-vm-1.json", "gpu-vm-1.md"]
    saved = json.loads((tmp_path / "reports" / "gpu-vm-1.json").read_text())
    assert saved["host"] == "gpu-vm-1" and saved["summary"]["verdict"] == "unfit"
    second = run_module(gpu_audit_report.main, args, capsys)
    assert (second["changed"], second["written"]) == (False, [])


def test_module_check_mode_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path / "r"), "hosts": {"h": FACTS}}, capsys,
                        check_mode=True, diff=True)
    assert result["changed"] is True and len(result["diff"]) == 5  # h.json, h.md, h-p2p.svg, fleet.md, fleet.json
    assert not (tmp_path / "r").exists()


def test_module_refuses_hosts_without_audit_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": None}}, capsys)
    assert result["failed"] is True and "run the audit on those hosts first" in result["msg"]


def test_module_writes_captures_beside_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = {"format": "gpuhost-capture/1", "files": {"/proc/cmdline": "quiet\n"}}
    args = {"dest": str(tmp_path / "r"), "hosts": {"h": FACTS}, "captures": {"h": capture},
            "captures_dest": str(tmp_path / "c")}
    result = run_module(gpu_audit_report.main, args, capsys)
    assert str(tmp_path / "c" / "h.json") in result["written"]
    assert json.loads((tmp_path / "c" / "h.json").read_text()) == capture


def test_module_needs_a_place_for_captures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": {"h": FACTS},
                                                "captures": {"h": {"format": "x"}}}, capsys)
    assert result["failed"] is True and "captures_dest" in result["msg"]


BENCH = {
    "probe": {"failed": True, "msg": "no CUDA device visible to /opt/venv/bin/python"},
    "nccl": {"engine": "nccl-tests", "nranks": 8, "nccl_version": "2.27.3",
             "results": [{"size_bytes": s, "out_of_place": {"time_us": t, "algbw_gbps": s / t / 1e3,
                                                           "busbw_gbps": 1.75 * s / t / 1e3, "wrong": 0}}
                         for s, t in ((4096, 12.0), (16384, 14.0), (1 << 20, 80.0))],
             "findings": [{"id": "nccl_small_message_latency", "severity": "critical", "summary": "slow",
                           "evidence": {}, "remedy": "fix P2P"}],
             "communication_ceiling": {
                 "summary": "all-reduce alone limits single-stream decode to 457 tok/s on this host"}},
}


def test_bench_is_folded_into_findings_and_summary() -> None:
    fit = json.loads(json.dumps(FACTS))
    fit["findings"] = []
    merged = report.merge_bench(fit, BENCH)
    assert [f["id"] for f in merged["findings"]] == ["nccl_small_message_latency", "bench_probe_not_run"]
    assert merged["summary"]["verdict"] == "unfit"
    assert merged["summary"]["counts"] == {"critical": 1, "warning": 1, "info": 0}
    assert merged["summary"]["communication_ceiling"].endswith("457 tok/s on this host")
    text = report.host_markdown("h", merged)
    assert "| 16384 | 14.0 |" in text and "**All-reduce alone limits single-stream decode to 457 tok/s" in text


def test_sweep_svg_is_well_formed_and_plots_every_run() -> None:
    import xml.etree.ElementTree as ET

    from ansible_collections.gpuhost.gpu.plugins.module_utils.report.plot import sweep_svg

    svg = sweep_svg("h: all-reduce <8 GPUs>", {"as run": BENCH["nccl"]["results"], "p2p-disabled": []})
    root = ET.fromstring(svg)
    lines = [el for el in root.iter() if el.tag.endswith("polyline")]
    assert len(lines) == 2  # latency and busbw of the one run that has points
    assert len(lines[0].get("points").split()) == 3


def test_an_audit_run_keeps_the_last_benchmark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = str(tmp_path / "r")
    run_module(gpu_audit_report.main, {"dest": dest, "hosts": {"h": FACTS}, "bench": {"h": BENCH}}, capsys)
    assert (tmp_path / "r" / "h-nccl.svg").exists()
    again = run_module(gpu_audit_report.main, {"dest": dest, "hosts": {"h": FACTS}}, capsys)
    assert again["changed"] is False
    assert json.loads((tmp_path / "r" / "h.json").read_text())["bench"]["nccl"]["nranks"] == 8


def test_module_keeps_the_hosts_it_did_not_reach_in_fleet_md(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "r"
    run_module(gpu_audit_report.main, {"dest": str(dest), "hosts": {"gone": FACTS}}, capsys)
    old = dest / "gone.json"
    os.utime(old, (1767323045, 1767323045))  # 2026-01-02 03:04:05 UTC
    before = old.read_bytes()
    args = {"dest": str(dest), "hosts": {"here": json.dumps(FACTS)},  # facts_json, as the role passes them
            "fleet_hosts": {"gone": {"unreachable": True, "msg": "ssh: connection refused"},
                            "broken": {"failed": True, "msg": "cannot read the capture"}, "limited": {}}}
    result = run_module(gpu_audit_report.main, args, capsys)
    fleet = (dest / "fleet.md").read_text()
    assert "| gone | unreachable, last report 2026-01-02 03:04 UTC | unfit |" in fleet
    assert "| broken | failed, no report yet |" in fleet and "| limited | not audited, no report yet |" in fleet
    assert "- gone: unreachable: ssh: connection refused" in fleet
    assert result["fleet"]["gone"] == {"audit": "unreachable", "report_date": "2026-01-02 03:04 UTC",
                                       "msg": "ssh: connection refused"}
    assert result["fleet"]["here"] == {"audit": "this run"}
    assert result["lines"]["here"].startswith("here: unfit (")
    # The absent host's report is left as it was, so its date stays; a second run changes nothing.
    assert old.read_bytes() == before and old.stat().st_mtime == 1767323045
    assert str(dest / "gone.json") not in result["written"]
    again = run_module(gpu_audit_report.main, args, capsys)
    assert (again["changed"], again["written"]) == (False, [])


def test_module_shows_a_host_audited_in_this_run_from_its_registered_facts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = {"dest": str(tmp_path), "hosts": {"gpu": FACTS},
            "fleet_hosts": {"pve": {"ansible_facts": {"gpu_host": FACTS}}, "other": {"facts_json": json.dumps(FACTS)}}}
    result = run_module(gpu_audit_report.main, args, capsys)
    assert result["fleet"] == {"gpu": {"audit": "this run"}, "other": {"audit": "this run"},
                               "pve": {"audit": "this run"}}
    # Only the hosts given get reports; the others are rows of fleet.md.
    assert sorted(Path(p).name for p in result["written"]) == ["fleet.json", "fleet.md", "gpu-p2p.svg", "gpu.json",
                                                               "gpu.md"]
    assert "3 host(s): 0 fit, 0 fit with warnings, 3 unfit." in (tmp_path / "fleet.md").read_text()


def test_module_fleet_keep_never_shrinks_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = str(tmp_path)
    run_module(gpu_audit_report.main, {"dest": dest, "hosts": {"a": FACTS, "b|odd": FACTS, "c": FACTS}}, capsys)
    result = run_module(gpu_audit_report.main, {"dest": dest, "hosts": {"a": FACTS}, "fleet_keep": True}, capsys)
    assert result["fleet"]["b|odd"]["audit"] == result["fleet"]["c"]["audit"] == "not audited"
    fleet = (tmp_path / "fleet.md").read_text()
    assert "3 host(s): 0 fit, 0 fit with warnings, 1 unfit; 2 not audited in this run" in fleet
    assert "| b\\|odd | not audited, last report " in fleet
    # Without fleet_keep the table is this run's hosts only.
    run_module(gpu_audit_report.main, {"dest": dest, "hosts": {"a": FACTS}}, capsys)
    assert "1 host(s):" in (tmp_path / "fleet.md").read_text()


def test_module_check_mode_writes_no_fleet_row_either(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path / "r"), "hosts": {"h": FACTS},
                                                "fleet_hosts": {"gone": {"unreachable": True, "msg": "x"}}},
                        capsys, check_mode=True)
    assert result["changed"] is True and result["fleet"]["gone"]["audit"] == "unreachable"
    assert not (tmp_path / "r").exists()


def test_a_benchmark_that_could_not_run_says_why_in_the_markdown() -> None:
    bench = {"probe": {"failed": True, "msg": "cannot import torch with /venv/bin/python"},
             "nccl": {"failed": True, "msg": "no benchmark engine can run here: no all_reduce_perf in PATH"}}
    fit = json.loads(json.dumps(FACTS))
    fit["findings"] = []
    text = report.host_markdown("h", report.merge_bench(fit, bench))
    assert "**Verdict: fit, with warnings** (0 critical, 2 warning, 0 info)" in text
    assert "### warning: bench_probe_not_run" in text and "### warning: bench_nccl_not_run" in text
    assert "The NCCL benchmark could not run: no benchmark engine can run here: no all_reduce_perf in PATH" in text
    assert "The P2P probe could not run: cannot import torch with /venv/bin/python" in text


@pytest.mark.parametrize(("devices", "said"), [
    ([], "model not stated in the material"),
    ([{"bdf": "0000:01:00.0", "kind": "gpu", "driver": None}], "model unknown: no driver"),
    ([{"bdf": "0000:01:00.0", "kind": "gpu", "driver": "vfio-pci"}],
     "model unknown: bound to vfio-pci, not to the nvidia driver"),
    ([{"bdf": "0000:01:00.0", "kind": "gpu", "driver": "nvidia"}],
     "model unknown: the nvidia driver is loaded but NVML and nvidia-smi cannot read the GPUs"),
    # An audio function without a driver is no evidence about the GPU.
    ([{"bdf": "0000:01:00.1", "kind": "audio", "driver": None}], "model not stated in the material"),
])
def test_gpu_line_says_why_no_model_is_known_from_the_evidence(devices, said) -> None:
    facts = json.loads(json.dumps(FACTS))
    facts["summary"].update(gpu_count=1, gpu_models=[])
    facts["gpus"] = {}
    facts["pci"] = {"nvidia_devices": devices}
    assert f"| GPUs | 1 x NVIDIA GPU ({said}) |" in report.host_markdown("h", facts)
