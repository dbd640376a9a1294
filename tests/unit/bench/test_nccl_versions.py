"""The NCCL in use: its version recorded, known-bad versions named with the fix, NCCL's own diagnostics read.

The NCCL that the serving venv's torch bundles decides how the GPUs talk, and some versions have
known bugs on some GPUs (bench/nccl_known_issues.py, each entry with its public source). From 2.31
NCCL can check every GPU pair itself at communicator start (NCCL_RUN_DIAGNOSTICS=1): the benchmark
asks for it where it knows the version is new enough, and reports what it said. Rows that nccl-tests
printed as inf or nan are no measurement, and a curve with such rows is not called healthy.
"""

from __future__ import annotations

import nccl_bench
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import nccl_known_issues, nccl_tuning
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import nccl_runner as nccl_bench_run

from tests.unit.modules import run_module

PRO6000 = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
ISSUE_2418 = "https://github.com/NVIDIA/nccl/issues/2418"


def table(version: str | None, rows: list[str], names: tuple[str, ...] = (PRO6000, PRO6000)) -> str:
    lines = ["# nThread 1 nGpus 2 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 agg iters: "
             "1 validation: 1 graph: 0", "#", "# Using devices"]
    lines += [f"#  Rank  {i} Group  0 Pid 4242 on ws device  {i} [0000:0{i + 1}:00] {name}"
              for i, name in enumerate(names)]
    if version:
        lines.append(f"ws:4242:4242 [0] NCCL INFO NCCL version {version}+cuda12.2")
    lines += ["#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
              "   busbw #wrong", *rows, "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 10.5", "#"]
    return "\n".join(lines) + "\n"


def good(size: int, time_us: float = 10.0) -> str:
    bw = size / time_us / 1e3
    return (f"{size:>12} {size // 4:>13}     float     sum      -1  {time_us:>7.2f} {bw:>7.2f} {bw:>7.2f}      0"
            f"  {time_us:>7.2f} {bw:>7.2f} {bw:>7.2f}      0")


def zero_time(size: int) -> str:
    return (f"{size:>12} {size // 4:>13}     float     sum      -1     0.00     inf     inf      0"
            "     0.00     inf     inf      0")


def fake_binary(directory, text: str) -> None:
    (directory / "out.txt").write_text(text)
    binary = directory / "all_reduce_perf"
    binary.write_text(f"#!/bin/sh\ncat {directory / 'out.txt'}\n")
    binary.chmod(0o755)


# ---------------------------------------------------------------------------
# Rows that are no measurement


def test_a_curve_with_rows_that_are_no_measurement_is_not_healthy(capsys, tmp_path):
    fake_binary(tmp_path, table("2.29.7", [good(8), good(16384, 12.0), zero_time(524288), good(1 << 20, 40.0)]))
    result = run_module(nccl_bench.main, {"nccl_tests_dir": str(tmp_path), "nranks": 2, "max_bytes": 1 << 20,
                                          "thresholds": []}, capsys)

    assert result["status"] == "ok"
    row = next(r for r in result["results"] if r["size_bytes"] == 524288)
    assert row["not_measured"] == ["out_of_place", "in_place"] and row["in_place"]["time_us"] is None
    finding = next(f for f in result["findings"] if f["id"] == "nccl_results_not_measured")
    assert finding["evidence"]["sizes"] == [{"collective": "all_reduce", "size_bytes": 524288,
                                             "placements": ["out_of_place", "in_place"]}]
    assert result["recommended_env"] is None


def test_the_same_curve_without_such_rows_is_healthy(capsys, tmp_path):
    fake_binary(tmp_path, table("2.29.7", [good(8), good(16384, 12.0), good(524288, 30.0), good(1 << 20, 40.0)]))
    result = run_module(nccl_bench.main, {"nccl_tests_dir": str(tmp_path), "nranks": 2, "max_bytes": 1 << 20,
                                          "thresholds": []}, capsys)
    assert result["findings"] == [] and result["recommended_env"] == {}


def test_tuning_does_not_recommend_a_candidate_with_rows_not_measured():
    measured = {"time_us": 12.0, "algbw_gbps": 1.0, "busbw_gbps": 1.0, "wrong": 0}
    null = {"time_us": None, "algbw_gbps": None, "busbw_gbps": None, "wrong": 0}
    rows = [{"size_bytes": 16384, "count": 4096, "type": "float", "redop": "sum", "out_of_place": measured,
             "in_place": measured},
            {"size_bytes": 1 << 30, "count": 1 << 28, "type": "float", "redop": "sum", "out_of_place": null,
             "in_place": measured, "not_measured": ["out_of_place"]}]
    summary = nccl_tuning.summarize_candidate("as-is", {}, "ok", {"all_reduce": rows}, "all_reduce")
    assert summary["status"] == "not_measured"
    assert nccl_tuning.choose_best([summary], {})["recommended"] is None


# ---------------------------------------------------------------------------
# Known-bad NCCL versions


def test_every_known_issue_says_what_where_and_the_fix():
    for issue in nccl_known_issues.KNOWN_ISSUES:
        assert issue.affected and issue.gpus and issue.symptom and issue.conditions
        assert nccl_known_issues.parse_version(issue.fixed_in) is not None
        assert all(nccl_known_issues.parse_version(v) for v in issue.affected)
        assert all(source.startswith("https://github.com/") for source in issue.sources)


@pytest.mark.parametrize(("text", "version"), [
    ("2.26.2", (2, 26, 2)), ("2.26.2+cuda12.2", (2, 26, 2)), ("2.31.2-1", (2, 31, 2)), (" 2.9.6 ", (2, 9, 6)),
    ("2.26", None), ("", None), (None, None), ("two", None), ("2.26.2.1", None),
])
def test_parse_version(text, version):
    assert nccl_known_issues.parse_version(text) == version


def test_nccl_2_26_2_on_two_rtx_pro_6000_is_named_with_the_fix():
    findings = nccl_known_issues.known_issue_findings({"torch": "2.26.2"}, [PRO6000, PRO6000], 2)

    assert [(f.id, f.severity) for f in findings] == [("nccl_known_bad_version", "critical")]
    finding = findings[0]
    assert "2.26.2" in finding.summary and "2.31.2" in finding.remedy and ISSUE_2418 in finding.remedy
    assert finding.evidence["nccl_version"] == "2.26.2" and finding.evidence["which"] == "torch"
    assert finding.evidence["fixed_in"] == "2.31.2"


def test_the_same_nccl_on_more_ranks_than_reported_is_a_warning():
    findings = nccl_known_issues.known_issue_findings({"ran": "2.26.2"}, [PRO6000] * 8, 8)
    assert [(f.id, f.severity) for f in findings] == [("nccl_known_bad_version", "warning")]


@pytest.mark.parametrize(("versions", "names"), [
    ({"torch": "2.31.2"}, [PRO6000, PRO6000]),  # the fixed version
    ({"torch": "2.26.2"}, ["NVIDIA H100 80GB HBM3"] * 2),  # other GPUs
    ({"torch": None, "ran": None}, [PRO6000, PRO6000]),  # version unknown: no guess
    ({"torch": "2.26.2"}, []),  # GPUs unknown: no guess
])
def test_no_known_issue_without_a_match(versions, names):
    assert nccl_known_issues.known_issue_findings(versions, names, 2) == []


def test_one_finding_when_torch_and_the_run_use_the_same_nccl():
    findings = nccl_known_issues.known_issue_findings({"torch": "2.26.2", "ran": "2.26.2"}, [PRO6000] * 2, 2)
    assert len(findings) == 1 and findings[0].evidence["which"] == "torch, ran"


def test_a_run_with_a_known_bad_nccl_says_so(capsys, tmp_path):
    fake_binary(tmp_path, table("2.26.2", [good(8), good(16384, 12.0)]))
    result = run_module(nccl_bench.main, {"nccl_tests_dir": str(tmp_path), "nranks": 2, "max_bytes": 16384,
                                          "thresholds": [], "gpu_names": [PRO6000, PRO6000]}, capsys)

    assert result["nccl_version"] == "2.26.2"
    finding = next(f for f in result["findings"] if f["id"] == "nccl_known_bad_version")
    assert finding["severity"] == "critical" and "2.31.2" in finding["remedy"]
    assert result["recommended_env"] is None


def test_a_log_with_a_known_bad_nccl_says_so(capsys, tmp_path):
    path = tmp_path / "all_reduce_perf.log"
    path.write_text("$ ./build/all_reduce_perf -b 8 -e 16K -f 2 -g 2\n" + table("2.26.2", [good(8), good(16384)]))
    result = run_module(nccl_bench.main, {"log": str(path), "gpu_names": [PRO6000, PRO6000]}, capsys)
    assert "nccl_known_bad_version" in [f["id"] for f in result["findings"]]


# ---------------------------------------------------------------------------
# torch's NCCL and NCCL's own diagnostics

DIAG_FAILED = "\n".join([
    "ws:4242:4242 NCCL DIAG === NCCL Diagnostics ===",
    "ws:4242:4242 NCCL DIAG [INFO] p2p: only 52/56 GPU-to-GPU peer accesses passed verification",
    "ws:4242:4242 NCCL DIAG [INFO] p2p: GPU 3 -> GPU 5 via PCI/P2P: data mismatch",
    "ws:4242:4242 NCCL DIAG NCCL diagnostics completed in 245.3 ms across 8 ranks",
])
DIAG_OK = "\n".join([
    "ws:4242:4242 NCCL DIAG === NCCL Diagnostics ===",
    "ws:4242:4242 NCCL DIAG [OK]   p2p: verified P2P access in both directions between every GPU pair "
    "(2 peer accesses)",
    "ws:4242:4242 NCCL DIAG NCCL diagnostics completed in 12.5 ms across 2 ranks",
])


def torch_engine(monkeypatch, nccl_version: str, debug: str = ""):
    """probe_python and harness_sweep standing in for torch with this NCCL; the environments run are kept."""
    runs = []

    def sweep(python, backend, nranks, opts, env, tmpdir):
        runs.append(env)
        rows = [{"size_bytes": 16384, "count": 4096, "type": "float", "redop": "sum", "out_of_place": None,
                 "in_place": {"time_us": 12.0, "algbw_gbps": 1.4, "busbw_gbps": 1.4, "wrong": 0}}]
        return nccl_bench_run.Sweep(status="ok", collectives={"all_reduce": rows}, nccl_version=nccl_version,
                                    nranks=nranks, debug_text=debug, elapsed_s=1.0,
                                    versions={"devices": [PRO6000, PRO6000]})

    monkeypatch.setattr(nccl_bench_run, "harness_sweep", sweep)
    monkeypatch.setattr(nccl_bench_run, "probe_python", lambda python, tmpdir: {
        "torch": "2.9.1+cu128", "device_count": 2, "nccl": True, "cuda_build": "12.8", "nccl_version": nccl_version,
        "devices": [PRO6000, PRO6000]})
    return runs


def test_torch_nccl_from_2_31_runs_nccl_diagnostics_and_reports_them(monkeypatch, capsys):
    runs = torch_engine(monkeypatch, "2.31.2", DIAG_FAILED)
    result = run_module(nccl_bench.main, {"engine": "torch-nccl", "python": "/usr/bin/python3", "thresholds": []},
                        capsys)

    assert runs[0]["NCCL_RUN_DIAGNOSTICS"] == "1"
    assert "NCCL_RUN_DIAGNOSTICS" not in result["env"]  # asked for by the benchmark, not for the deployment
    assert result["versions"]["torch_nccl_version"] == "2.31.2"
    diagnostics = result["nccl_diagnostics"]
    assert diagnostics["requested"] is True
    assert diagnostics["p2p"] == {"status": "failed", "passed": 52, "total": 56}
    assert diagnostics["completed"] == {"ms": 245.3, "ranks": 8}
    assert "GPU 3 -> GPU 5 via PCI/P2P: data mismatch" in [line["message"] for line in diagnostics["lines"]]
    finding = next(f for f in result["findings"] if f["id"] == "nccl_diagnostics_p2p_failed")
    assert finding["severity"] == "critical" and "52 of 56" in finding["summary"]
    assert any("data mismatch" in line for line in finding["evidence"]["said"])


def test_nccl_diagnostics_that_pass_make_no_finding(monkeypatch, capsys):
    torch_engine(monkeypatch, "2.31.2", DIAG_OK)
    result = run_module(nccl_bench.main, {"engine": "torch-nccl", "python": "/usr/bin/python3", "thresholds": []},
                        capsys)
    assert result["nccl_diagnostics"]["p2p"] == {"status": "ok", "passed": 2, "total": 2}
    assert not [f for f in result["findings"] if f["id"].startswith("nccl_diagnostics")]


def test_older_torch_nccl_gets_no_diagnostics_and_the_result_says_why(monkeypatch, capsys):
    runs = torch_engine(monkeypatch, "2.27.3")
    result = run_module(nccl_bench.main, {"engine": "torch-nccl", "python": "/usr/bin/python3", "thresholds": []},
                        capsys)

    assert "NCCL_RUN_DIAGNOSTICS" not in runs[0]
    assert result["nccl_diagnostics"]["requested"] is False
    assert "2.27.3" in result["nccl_diagnostics"]["why"] and "2.31" in result["nccl_diagnostics"]["why"]
    assert result["versions"]["torch_nccl_version"] == "2.27.3"


def test_the_users_own_setting_of_nccl_run_diagnostics_wins(monkeypatch, capsys):
    runs = torch_engine(monkeypatch, "2.31.2")
    run_module(nccl_bench.main, {"engine": "torch-nccl", "python": "/usr/bin/python3", "thresholds": [],
                                 "env": {"NCCL_RUN_DIAGNOSTICS": "0"}}, capsys)
    assert runs[0]["NCCL_RUN_DIAGNOSTICS"] == "0"


def test_diagnostic_lines_other_than_p2p_are_flagged_raw(monkeypatch, capsys):
    torch_engine(monkeypatch, "2.31.2", "h:1 NCCL DIAG [INFO] gpu: something new NCCL says\n" + DIAG_OK)
    result = run_module(nccl_bench.main, {"engine": "torch-nccl", "python": "/usr/bin/python3", "thresholds": []},
                        capsys)
    finding = next(f for f in result["findings"] if f["id"] == "nccl_diagnostics_flagged")
    assert finding["severity"] == "warning"
    assert finding["evidence"]["said"] == ["h:1 NCCL DIAG [INFO] gpu: something new NCCL says"]
