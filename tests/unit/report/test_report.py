"""Reports: deterministic content, written only when it changes, check mode honoured."""

from __future__ import annotations

import json
from pathlib import Path

import gpu_audit_report
import pytest

from ansible.module_utils.gpuhost.report import render as report
from ansible.module_utils.gpuhost.rules.finding import Finding
from tests.unit.modules import run_module

FACTS = {
    "schema_version": 1,
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
                         "args: -set device.hostpci0.x-nv-gpudirect-clique=0").as_dict()],
    "problems": [],
    "summary": {"verdict": "unfit", "virtualization": "KVM virtual machine (machine q35)", "gpu_count": 2,
                "gpu_models": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"], "p2p": "none",
                "worst_finding": {"id": "p2p_not_supported", "severity": "critical"},
                "counts": {"critical": 1, "warning": 0, "info": 0}},
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
    assert "| b-host | unfit |" in text and "critical: p2p_not_supported" in text


def test_module_writes_once_then_reports_no_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = {"dest": str(tmp_path / "reports"), "hosts": {"gpu-vm-1": FACTS}}
    first = run_module(gpu_audit_report.main, args, capsys)
    assert first["changed"] is True
    assert sorted(Path(p).name for p in first["written"]) == ["fleet.md", "gpu-vm-1.json", "gpu-vm-1.md"]
    saved = json.loads((tmp_path / "reports" / "gpu-vm-1.json").read_text())
    assert saved["host"] == "gpu-vm-1" and saved["summary"]["verdict"] == "unfit"
    second = run_module(gpu_audit_report.main, args, capsys)
    assert (second["changed"], second["written"]) == (False, [])


def test_module_check_mode_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path / "r"), "hosts": {"h": FACTS}}, capsys,
                        check_mode=True, diff=True)
    assert result["changed"] is True and len(result["diff"]) == 3
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
             "comm_floor": {"summary": "all-reduce alone limits single-stream decode to 457 tok/s on this host"}},
}


def test_bench_is_folded_into_findings_and_summary() -> None:
    fit = json.loads(json.dumps(FACTS))
    fit["findings"] = []
    merged = report.merge_bench(fit, BENCH)
    assert [f["id"] for f in merged["findings"]] == ["nccl_small_message_latency", "bench_probe_not_run"]
    assert merged["summary"]["verdict"] == "unfit"
    assert merged["summary"]["counts"] == {"critical": 1, "warning": 1, "info": 0}
    assert merged["summary"]["comm_floor"].endswith("457 tok/s on this host")
    text = report.host_markdown("h", merged)
    assert "| 16384 | 14.0 |" in text and "**All-reduce alone limits single-stream decode to 457 tok/s" in text


def test_sweep_svg_is_well_formed_and_plots_every_run() -> None:
    import xml.etree.ElementTree as ET

    from ansible.module_utils.gpuhost.report.plot import sweep_svg

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
