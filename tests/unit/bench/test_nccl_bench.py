"""nccl_bench without processes: thresholds, size classes, tuning, harness output, logs, nccl-tests runs.

The harness and torch are not involved here (test_collective_gloo.py runs them for real); the
nccl-tests engine is exercised with small scripts standing in for the binaries, printing real
outputs from tests/fixtures/nccl.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import nccl_bench
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import collective_harness as harness
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import nccl_findings, nccl_thresholds, nccl_tuning
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import nccl_judge as logic
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import nccl_runner as nccl_bench_run
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests import bus_bandwidth_factor
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests_text import parse_nccl_tests
from hypothesis import given
from hypothesis import strategies as st

from tests import paths
from tests.unit.modules import deprecations_of, run_module

FIXTURES = paths.FIXTURES / "nccl"


def fixture(pattern: str) -> Path:
    found = sorted(FIXTURES.glob(pattern))
    if not found:
        pytest.skip(f"no fixture {pattern} in tests/fixtures/nccl")
    return found[0]


def row(size: int, time_us: float, busbw: float, wrong: int | None = 0, placement: str = "in_place") -> dict:
    measured = {"time_us": time_us, "algbw_gbps": size / time_us / 1e3, "busbw_gbps": busbw, "wrong": wrong}
    other = "out_of_place" if placement == "in_place" else "in_place"
    return {"size_bytes": size, "count": size // 4, "type": "float", "redop": "sum", placement: measured, other: None}


# ---------------------------------------------------------------------------
# Sizes and the busbw formula


def test_sizes_follow_nccl_tests_b_e_f():
    assert harness.message_sizes(8, 128, 2) == [8, 16, 32, 64, 128]
    assert harness.message_sizes(8, 100, 4) == [8, 32]
    assert len(harness.message_sizes(8, 1 << 30, 2)) == 28
    with pytest.raises(ValueError):
        harness.message_sizes(16, 8, 2)


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize("nranks", [1, 2, 3, 4, 8, 16])
def test_harness_bus_factors_are_nccl_tests_factors(collective, nranks):
    assert harness.bus_factor(collective, nranks) == pytest.approx(bus_bandwidth_factor(collective, nranks))


@pytest.mark.parametrize("nranks", [2, 4, 8])
def test_harness_measurement_busbw_formula(nranks):
    # 16 KiB in 13.7 us: algbw 1.196 GB/s, busbw x 2(n-1)/n.
    m = harness.measurement("all_reduce", 16384, nranks, 13.7e-6, 0)
    assert m["time_us"] == pytest.approx(13.7)
    assert m["algbw_gbps"] == pytest.approx(16384 / 13.7 / 1e3, rel=1e-5)
    assert m["busbw_gbps"] == pytest.approx(m["algbw_gbps"] * 2 * (nranks - 1) / nranks, rel=1e-5)


def test_element_counts_round_to_whole_shares():
    assert harness.element_counts("all_reduce", 8, 4) == (2, 2)
    assert harness.element_counts("all_gather", 8, 4) == (0, 0)  # 2 floats do not split over 4 ranks
    assert harness.element_counts("reduce_scatter", 1024, 3) == (255, 85)


def test_fault_spec():
    assert harness.parse_fault("wrong:1") == {"kind": "wrong", "rank": 1}
    assert harness.parse_fault("hang:0:4096") == {"kind": "hang", "rank": 0, "size_bytes": 4096}
    assert harness.parse_fault("") == {}
    with pytest.raises(ValueError, match="expected 'wrong:RANK'"):
        harness.parse_fault("wrong")


def test_size_classes():
    assert logic.size_class(16 * 1024) == "small"
    assert logic.size_class(4 << 20) == "medium"
    assert logic.size_class(64 << 20) == "large"


def test_nearest_row_within_a_factor_of_two():
    rows = [row(8192, 10, 1), row(65536, 20, 3)]
    assert logic.nearest_row(rows, 16384)["size_bytes"] == 8192
    assert logic.nearest_row(rows, 12288)["size_bytes"] == 8192
    assert logic.nearest_row(rows, 1 << 20) is None


# ---------------------------------------------------------------------------
# Harness output


def harness_lines(nranks: int = 2, status: str = "ok", sizes=(8, 16384, 1 << 20), **summary) -> str:
    lines = [{"event": "start", "backend": "nccl", "nranks": nranks, "torch_version": "2.9.1+cu128",
              "nccl_version": "2.27.3"}]
    for size in sizes:
        lines.append({"event": "begin", "collective": "all_reduce", "size_bytes": size})
        lines.append({"event": "result", "collective": "all_reduce", "size_bytes": size, "count": size // 4,
                      "type": "float", "redop": "sum", "root": -1, "out_of_place": None,
                      "in_place": harness.measurement("all_reduce", size, nranks, 2e-5 + size / 20e9, 0)})
    lines.append({"event": "summary", "status": status, "hung_at": None, "ranks": [], "nccl_debug": "", **summary})
    return "\n".join(json.dumps(line) for line in lines)


def test_harness_output_to_nccl_tests_rows():
    run = logic.parse_harness_output("some warning a rank printed\n" + harness_lines())
    assert run.status == "ok" and run.nccl_version == "2.27.3"
    rows = run.collectives["all_reduce"]
    assert [r["size_bytes"] for r in rows] == [8, 16384, 1 << 20]
    assert set(rows[0]) == {"size_bytes", "count", "type", "redop", "out_of_place", "in_place"}
    for r in rows:
        m = r["in_place"]
        assert m["busbw_gbps"] == pytest.approx(m["algbw_gbps"] * bus_bandwidth_factor("all_reduce", 2), rel=1e-5)


def test_harness_output_without_summary_is_an_error():
    with pytest.raises(logic.BenchInputError, match="no summary line"):
        logic.parse_harness_output('{"event": "start"}\nTraceback (most recent call last):')


@given(st.text(max_size=400))
def test_harness_output_reader_raises_only_its_own_error(text):
    with contextlib.suppress(logic.BenchInputError):
        logic.parse_harness_output(text)


def test_harness_error_message_falls_back_to_rank_stderr():
    run = logic.parse_harness_output(harness_lines(status="error", ranks=[
        {"rank": 1, "returncode": 1, "stderr_tail": "Traceback...\nRuntimeError: NCCL error: unhandled cuda error"}]))
    assert run.error_message == "RuntimeError: NCCL error: unhandled cuda error"


# ---------------------------------------------------------------------------
# Thresholds


@pytest.mark.parametrize(("nranks", "limit"), [(2, 14.0), (4, 22.0), (8, 38.0)])
def test_default_small_message_limit_grows_with_ring_hops(nranks, limit):
    small, large = nccl_thresholds.default_thresholds(nranks, "nccl-tests")
    assert (small["size_bytes"], small["max_time_us"], small["severity"]) == (16384, limit, "critical")
    assert (large["size_bytes"], large["min_busbw_gbps"], large["severity"]) == (64 << 20, 8.0, "warning")


@pytest.mark.parametrize(("engine", "timing", "severity"), [("nccl-tests", "mean over ranks", "critical"),
                                                            ("torch-nccl", "max over ranks", "warning")])
def test_each_engine_states_its_timing_rule_and_what_its_limits_rest_on(engine, timing, severity):
    small, large = nccl_thresholds.default_thresholds(8, engine)
    assert small["timing"] == large["timing"] == timing
    assert small["severity"] == severity
    calibrated = nccl_thresholds.ENGINES[engine]["calibration"]
    assert small["calibration"] == calibrated
    if calibrated is None:
        assert "warns until calibrated" in small["why"]


def test_an_uncalibrated_torch_loop_limit_warns_and_never_calls_the_host_critical():
    # 8 GPUs, 16 KiB in 60 us as the torch loop times it (the slowest rank, torch's cost per call added):
    # above the 38 us estimated from nccl-tests, which does not make the host unfit.
    rows = [row(16384, 60.0, 0.5), row(64 << 20, 300.0, 20.0)]
    limits = nccl_thresholds.default_thresholds(8, "torch-nccl")
    violations, _ = nccl_thresholds.evaluate_thresholds({"all_reduce": rows}, limits)
    assert [(v["metric"], v["severity"]) for v in violations] == [("time_us", "warning")]
    found = nccl_findings.findings_for_run(engine="torch-nccl", nranks=8, collectives={"all_reduce": rows},
                                           violations=violations, env={})
    latency = next(f for f in found if f.id == "nccl_small_message_latency")
    assert latency.severity == "warning"
    assert not [f.id for f in found if f.severity == "critical"]
    # The same figure from nccl-tests (mean over ranks, the calibration) is critical.
    limits = nccl_thresholds.default_thresholds(8, "nccl-tests")
    violations, _ = nccl_thresholds.evaluate_thresholds({"all_reduce": rows}, limits)
    assert violations[0]["severity"] == "critical"


def test_thresholds_given_are_calibrated_by_whoever_gave_them():
    given = nccl_thresholds.normalize_thresholds([{"size_bytes": 16384, "max_time_us": 30}])
    (limit,) = nccl_thresholds.thresholds_for(given, 8, "torch-nccl")
    assert (limit["severity"], limit["timing"]) == ("critical", "max over ranks")
    assert limit["calibration"] == nccl_thresholds.GIVEN_CALIBRATION


def test_calibration_figures_put_each_run_beside_the_limit():
    limits = nccl_thresholds.default_thresholds(2, "torch-nccl")
    figures = nccl_thresholds.calibration_figures(
        "torch-nccl", 2, {"torch-nccl": [row(16384, 30.0, 0.5)],
                          "torch-nccl NCCL_P2P_DISABLE=1": [row(16384, 55.0, 0.3)], "nccl-tests": []}, limits)
    at = figures["at_size_bytes"]["16384"]
    assert at["runs"] == {"torch-nccl": {"time_us": 30.0, "size_bytes": 16384},
                          "torch-nccl NCCL_P2P_DISABLE=1": {"time_us": 55.0, "size_bytes": 16384},
                          "nccl-tests": None}
    assert (at["limit_us"], at["calibration"]) == (14.0, None)
    assert (figures["timing"], figures["calibrated"]) == ("max over ranks", False)


def test_no_default_thresholds_for_gloo_or_one_rank():
    assert nccl_thresholds.default_thresholds(4, "torch-gloo") == []
    assert nccl_thresholds.default_thresholds(1, "torch-nccl") == []


@pytest.mark.parametrize(("entry", "message"), [
    ({"max_time_us": 30}, "size_bytes .* is required"),
    ({"size_bytes": 16384}, "give max_time_us, min_busbw_gbps or both"),
    ({"size_bytes": 16384, "max_time": 30}, r"thresholds\[0\].max_time: unknown key; did you mean max_time_us\?"),
    ({"size_bytes": 16384, "max_time_us": "fast"}, "must be a number"),
    ({"size_bytes": 16384, "max_time_us": 3, "collective": "broadcast"}, "collective must be one of"),
    ("16384:30", "expected a mapping"),
])
def test_bad_thresholds_say_what_is_expected(entry, message):
    with pytest.raises(logic.BenchInputError, match=message):
        nccl_thresholds.normalize_thresholds([entry])


def test_threshold_judges_the_better_placement_at_the_nearest_size():
    rows = [{**row(16384, 40.0, 1.0), "out_of_place": {"time_us": 25.0, "algbw_gbps": 0.6, "busbw_gbps": 1.1,
                                                      "wrong": 0}}]
    thresholds = nccl_thresholds.normalize_thresholds([{"size_bytes": 12288, "max_time_us": 30},
                                                       {"size_bytes": 16384, "max_time_us": 20, "why": "baseline"},
                                                       {"size_bytes": 1 << 26, "min_busbw_gbps": 10}])
    violations, unjudged = nccl_thresholds.evaluate_thresholds({"all_reduce": rows}, thresholds)
    assert violations == [{"collective": "all_reduce", "size_bytes": 16384, "measured_size_bytes": 16384,
                           "metric": "time_us", "limit": 20.0, "measured": 25.0, "placement": "out_of_place",
                           "severity": "critical", "why": "baseline"}]
    assert [u["size_bytes"] for u in unjudged] == [1 << 26]


# ---------------------------------------------------------------------------
# Logs: real nccl-tests outputs through the module


def test_log_without_p2p_breaches_the_defaults(capsys, tmp_path):
    # The command the source post ran, kept with its output: it names the collective.
    source = fixture("all_reduce_perf_*2x2080Ti-no-p2p.txt")
    path = tmp_path / "all_reduce.log"
    path.write_text("$ ./build/all_reduce_perf -b 8 -e 1024M -f 2 -g2\n" + source.read_text())
    result = run_module(nccl_bench.main, {"log": str(path)}, capsys, check_mode=True)

    assert result["changed"] is False
    assert (result["engine"], result["source"], result["nranks"]) == ("nccl-tests", "log", 2)
    assert result["results"] == parse_nccl_tests(path.read_text()).as_dict()["results"]
    by_metric = {v["metric"]: v for v in result["violations"]}
    assert by_metric["time_us"]["measured"] == 17.07 and by_metric["time_us"]["limit"] == 14.0
    assert by_metric["busbw_gbps"]["measured"] == 3.99
    ids = [(f["id"], f["severity"]) for f in result["findings"]]
    assert ids == [("nccl_small_message_latency", "critical"), ("nccl_low_bus_bandwidth", "warning")]
    assert "x-nv-gpudirect-clique" in result["findings"][0]["remedy"]
    assert result["recommended_env"] is None


def test_log_that_does_not_name_its_collective_is_not_judged_as_all_reduce(capsys):
    # Two ranks, an operation, root -1 and busbw = algbw: all-reduce and send/recv print exactly this.
    path = fixture("all_reduce_perf_*2x2080Ti-no-p2p.txt")
    result = run_module(nccl_bench.main, {"log": str(path), "model": "glm-5"}, capsys, check_mode=True)

    assert result["collective"] is None
    assert result["results"] == parse_nccl_tests(path.read_text()).as_dict()["results"]
    assert list(result["per_collective"]) == ["unknown"]
    assert result["violations"] == [] and result["findings"] == []
    assert {u["collective"] for u in result["unjudged_thresholds"]} == {"all_reduce"}
    assert all("does not say which collective" in u["reason"] for u in result["unjudged_thresholds"])
    assert "all_reduce or sendrecv" in result["notes"][0]
    assert "not all-reduce" in result["notes"][1]
    assert "communication_ceiling" not in result


def test_log_of_another_collective_is_not_judged_as_all_reduce(capsys):
    path = fixture("broadcast_perf_2.0-era*mpirun-command_excerpt.txt")
    result = run_module(nccl_bench.main, {"log": str(path), "model": "glm-5"}, capsys)

    assert (result["collective"], list(result["per_collective"])) == ("broadcast", ["broadcast"])
    assert result["violations"] == []
    assert all(u["reason"].startswith("the results are of broadcast") for u in result["unjudged_thresholds"])
    assert result["notes"] == ["No communication ceiling for GLM-5: the benchmark measured broadcast, not all-reduce."]


def test_the_former_option_name_model_profile_still_prices_the_log_and_is_deprecated(capsys):
    path = fixture("all_reduce_perf_*2x2080Ti-no-p2p.txt")
    now = run_module(nccl_bench.main, {"log": str(path), "model": "llama-3-70b"}, capsys, check_mode=True)
    former = run_module(nccl_bench.main, {"log": str(path), "model_profile": "llama-3-70b"}, capsys, check_mode=True)

    assert deprecations_of(former) == [("Alias 'model_profile' is deprecated. See the module docs for more "
                                        "information", "2027-06-01", "gpuhost.gpu")]
    assert "deprecations" not in now
    del former["deprecations"]
    assert former == now


def test_log_of_a_healthy_pcie_host_passes(capsys):
    path = fixture("all_reduce_perf_*4xV100-PCIe.txt")
    result = run_module(nccl_bench.main, {"log": str(path)}, capsys)

    assert result["nranks"] == 4
    assert result["violations"] == [] and result["findings"] == []


def test_log_with_nccl_info_lines_names_the_transport(capsys):
    path = fixture("all_reduce_perf_*debug-info-interleaved*.txt")
    result = run_module(nccl_bench.main, {"log": str(path)}, capsys)

    assert result["transports"]["p2p_used"] is True
    assert any(name.startswith("P2P") for name in result["transports"]["transports"])
    assert not [f for f in result["findings"] if f["id"] == "nccl_no_p2p_transport"]


def test_json_log_is_read_by_content(capsys, tmp_path):
    source = fixture("all_reduce_perf_json-*.json")
    path = tmp_path / "run.out"  # the name says nothing: the content decides
    path.write_text(source.read_text())
    result = run_module(nccl_bench.main, {"log": str(path)}, capsys)

    assert result["results"] and result["collective"] == "all_reduce"
    assert result["transports"] is None


def test_crashed_run_log_fails_with_the_reason(capsys):
    path = fixture("all_reduce_perf_*crash*.txt")
    result = run_module(nccl_bench.main, {"log": str(path)}, capsys)

    assert result["failed"] is True
    assert result["msg"].startswith(f"{path} is not readable as nccl-tests output")
    assert "Traceback" not in result["msg"]


def test_garbled_log_fails_clearly(capsys, tmp_path):
    path = tmp_path / "garbled.txt"
    path.write_text("# nThread 1 nGpus 2\n#  size count type redop root time algbw busbw #wrong time algbw busbw "
                    "#wrong\n  8  2  float  sum  -1  12.x  0.00\n")
    result = run_module(nccl_bench.main, {"log": str(path)}, capsys)
    assert result["failed"] is True and "not readable as nccl-tests output" in result["msg"]


def test_missing_log_fails_clearly(capsys, tmp_path):
    result = run_module(nccl_bench.main, {"log": str(tmp_path / "absent.txt")}, capsys)
    assert result["failed"] is True and "cannot read the nccl-tests log" in result["msg"]


# ---------------------------------------------------------------------------
# The nccl-tests engine, with scripts standing in for the binaries


def fake_binary(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_nccl_tests_engine_runs_the_binary_with_the_sweep(capsys, tmp_path):
    output = fixture("all_reduce_perf_*2x2080Ti-no-p2p.txt")
    fake_binary(tmp_path, "all_reduce_perf", f'echo "$@" > {tmp_path}/argv; echo "NCCL_DEBUG=$NCCL_DEBUG" '
                                             f'>> {tmp_path}/argv; cat {output}\n')
    args = {"nccl_tests_dir": str(tmp_path), "nranks": 2, "iters": 7, "warmup": 2, "env": {"NCCL_PROTO": "LL"}}
    result = run_module(nccl_bench.main, args, capsys)

    assert result["engine"] == "nccl-tests" and result["status"] == "ok"
    argv, debug = (tmp_path / "argv").read_text().splitlines()
    assert argv == "-b 8 -e 1073741824 -f 2 -g 2 -n 7 -w 2 -c 1"
    assert debug == "NCCL_DEBUG=INFO"
    assert len(result["results"]) == 28
    assert result["env"] == {"NCCL_PROTO": "LL"}


def test_nccl_tests_engine_hang_names_the_size(capsys, tmp_path):
    output = fixture("all_reduce_perf_*2x2080Ti-no-p2p.txt")
    # Print the table up to 4 KiB, then hang as NCCL does on a broken P2P window.
    fake_binary(tmp_path, "all_reduce_perf", f"sed -n '1,/^ *4096 /p' {output}; exec sleep 60\n")
    args = {"nccl_tests_dir": str(tmp_path), "nranks": 2, "timeout": 1}
    result = run_module(nccl_bench.main, args, capsys)

    assert result["status"] == "timeout"
    assert result["hung_at"] == {"collective": "all_reduce", "size_bytes": 8192}
    assert result["findings"][0]["id"] == "nccl_timeout"


def test_nccl_tests_engine_without_binary_fails_clearly(capsys, tmp_path):
    result = run_module(nccl_bench.main, {"engine": "nccl-tests", "nccl_tests_dir": str(tmp_path)}, capsys)
    assert result["failed"] is True
    assert result["msg"].startswith(f"engine nccl-tests: no all_reduce_perf in {tmp_path}")


def test_completed_sizes_of_a_cut_off_table():
    text = fixture("all_reduce_perf_*2x2080Ti-no-p2p.txt").read_text()
    cut = text[: text.index("   16384 ")]
    assert logic.completed_sizes(cut)[-1] == 8192
    assert logic.hung_size(harness.message_sizes(8, 1 << 20, 2), logic.completed_sizes(cut)) == 16384


# ---------------------------------------------------------------------------
# Tuning


def summary(name, env, time_us, busbw, status="ok"):
    return {"name": name, "env": env, "status": status, "wrong": 0,
            "small": {"size_bytes": 16384, "time_us": time_us}, "large": {"size_bytes": 1 << 30, "busbw_gbps": busbw}}


def test_best_per_size_class_and_one_recommendation():
    summaries = [summary("as-is", {}, 24.0, 40.0),
                 summary("p2p-disabled", {"NCCL_P2P_DISABLE": "1"}, 50.0, 30.0),
                 summary("proto-ll", {"NCCL_PROTO": "LL"}, 20.0, 10.0),
                 summary("proto-simple", {"NCCL_PROTO": "Simple"}, 30.0, 41.0)]
    tuning = nccl_tuning.choose_best(summaries, {"NCCL_DEBUG": "WARN"})

    assert (tuning["best"]["small"]["name"], tuning["best"]["small"]["time_us"]) == ("proto-ll", 20.0)
    assert (tuning["best"]["large"]["name"], tuning["best"]["large"]["busbw_gbps"]) == ("proto-simple", 41.0)
    # LL wins small messages by wrecking large ones: the balanced baseline is recommended.
    assert tuning["recommended"]["name"] == "as-is"
    assert tuning["recommended"]["score"] == pytest.approx(math.sqrt(20 / 24 * 40 / 41), abs=1e-4)
    assert tuning["recommended_env"] == {"NCCL_DEBUG": "WARN"}


def test_a_clear_winner_is_recommended_and_a_near_tie_keeps_the_simpler_env():
    better = [summary("as-is", {}, 30.0, 20.0), summary("p2p-level-sys", {"NCCL_P2P_LEVEL": "SYS"}, 12.0, 40.0)]
    assert nccl_tuning.choose_best(better, {})["recommended_env"] == {"NCCL_P2P_LEVEL": "SYS"}
    tie = [summary("as-is", {}, 20.5, 40.0), summary("proto-ll128", {"NCCL_PROTO": "LL128"}, 20.0, 40.0)]
    assert nccl_tuning.choose_best(tie, {})["recommended"]["name"] == "as-is"


def test_failing_candidates_do_not_compete():
    summaries = [summary("as-is", {}, 5.0, 50.0, status="wrong_values"),
                 summary("p2p-disabled", {"NCCL_P2P_DISABLE": "1"}, 40.0, 20.0)]
    tuning = nccl_tuning.choose_best(summaries, {})
    assert tuning["recommended"]["name"] == "p2p-disabled"
    finding = nccl_findings.tuning_findings(tuning)[0]
    assert (finding.id, finding.severity) == ("nccl_tuning_recommendation", "critical")

    none_work = nccl_tuning.choose_best([summary("as-is", {}, 5.0, 50.0, status="timeout")], {})
    assert none_work["recommended"] is None and none_work["recommended_env"] is None
    assert nccl_findings.tuning_findings(none_work)[0].id == "nccl_tuning_no_working_candidate"


def test_wrong_values_make_a_candidate_ineligible():
    rows = [row(16384, 20.0, 1.0, wrong=3), row(1 << 20, 100.0, 10.0)]
    assert nccl_tuning.summarize_candidate("as-is", {}, "ok", {"all_reduce": rows}, "all_reduce")["status"] == \
        "wrong_values"


def test_candidates_are_checked():
    assert [c["name"] for c in nccl_tuning.normalize_candidates(None)] == [
        "as-is", "p2p-disabled", "p2p-level-sys", "proto-ll", "proto-ll128", "proto-simple"]
    with pytest.raises(logic.BenchInputError, match="used twice"):
        nccl_tuning.normalize_candidates([{"name": "a", "env": {}}, {"name": "a", "env": {}}])
    # A misspelled env would run the candidate with no environment: the as-is run again under another name.
    with pytest.raises(logic.BenchInputError, match=r"candidates\[0\].evn: unknown key; did you mean env\?"):
        nccl_tuning.normalize_candidates([{"name": "a", "evn": {"NCCL_PROTO": "LL"}}])


def fake_sweeps(monkeypatch, by_env):
    """harness_sweep answering from a table: NCCL_P2P_DISABLE / NCCL_PROTO value -> (16 KiB us, 1 GiB GB/s)."""
    calls = []

    def sweep(python, backend, nranks, opts, env, tmpdir):
        calls.append(env)
        key = (env.get("NCCL_P2P_DISABLE") and "p2p-off") or env.get("NCCL_PROTO") or env.get("NCCL_P2P_LEVEL", "")
        small_us, large_bw = by_env[key]
        rows = [row(16384, small_us, 1.0), row(1 << 30, 1e6, large_bw)]
        debug = "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via " + (
            "SHM/direct/direct" if key == "p2p-off" else "P2P/CUMEM")
        return nccl_bench_run.Sweep(status="ok", collectives={"all_reduce": rows}, nccl_version="2.27.3",
                                    nranks=nranks, debug_text=debug, elapsed_s=1.0)

    monkeypatch.setattr(nccl_bench_run, "harness_sweep", sweep)
    monkeypatch.setattr(nccl_bench_run, "probe_python", lambda python, tmpdir: {
        "torch": "2.9.1+cu128", "device_count": 2, "nccl": True, "cuda_build": "12.8"})
    return calls


def test_tuning_through_the_module(monkeypatch, capsys):
    calls = fake_sweeps(monkeypatch, {"": (12.0, 40.0), "p2p-off": (30.0, 30.0), "SYS": (11.0, 41.0),
                                      "LL": (10.0, 8.0), "LL128": (12.0, 39.0), "Simple": (25.0, 42.0)})
    result = run_module(nccl_bench.main, {"engine": "torch-nccl", "python": "/usr/bin/python3", "tune": True,
                                          "env": {"NCCL_IB_DISABLE": "1"}}, capsys)

    assert len(calls) == 6 and all(c["NCCL_DEBUG"] == "INFO" and c["NCCL_IB_DISABLE"] == "1" for c in calls)
    tuning = result["tuning"]
    assert [c["name"] for c in tuning["candidates"]] == [c["name"] for c in nccl_tuning.DEFAULT_CANDIDATES]
    assert tuning["best"]["small"]["name"] == "proto-ll"
    assert tuning["best"]["large"]["name"] == "proto-simple"
    assert tuning["recommended"]["name"] == "p2p-level-sys"
    assert result["recommended_env"] == {"NCCL_IB_DISABLE": "1", "NCCL_P2P_LEVEL": "SYS"}
    assert result["transports"]["transports"] == {"P2P/CUMEM": 1}
    assert [f["id"] for f in result["findings"]] == ["nccl_tuning_recommendation"]


def test_p2p_that_gains_nothing_is_reported(monkeypatch, capsys):
    fake_sweeps(monkeypatch, {"": (31.0, 30.0), "p2p-off": (30.0, 30.0)})
    candidates = [{"name": "as-is", "env": {}}, {"name": "p2p-disabled", "env": {"NCCL_P2P_DISABLE": "1"}}]
    result = run_module(nccl_bench.main, {"engine": "torch-nccl", "python": "/usr/bin/python3", "tune": True,
                                          "candidates": candidates, "thresholds": []}, capsys)

    ids = [f["id"] for f in result["findings"]]
    assert "nccl_p2p_no_gain" in ids


def test_transport_through_host_memory_is_reported():
    findings = nccl_findings.findings_for_run(
        engine="torch-nccl", nranks=8, collectives={}, violations=[], env={},
        transports={"transports": {"SHM": 56}, "p2p_used": False})
    assert [f.id for f in findings] == ["nccl_no_p2p_transport"]
    deliberate = nccl_findings.findings_for_run(
        engine="torch-nccl", nranks=8, collectives={}, violations=[], env={"NCCL_P2P_DISABLE": "1"},
        transports={"transports": {"SHM": 56}, "p2p_used": False})
    assert deliberate == []


def test_p2p_refused_by_the_driver_names_the_pairs(capsys, tmp_path):
    # An NCCL_DEBUG=INFO log where NCCL could not enable P2P (nccl#1516), with the run it belongs to.
    path = tmp_path / "run.log"
    path.write_text(fixture("nccl-debug_2.1x-2.2x_could-not-enable-p2p*.log").read_text()
                    + "$ ./build/all_reduce_perf -b 8 -e 1024M -f 2 -g2\n"
                    + fixture("all_reduce_perf_*2x2080Ti-no-p2p.txt").read_text())
    result = run_module(nccl_bench.main, {"log": str(path)}, capsys)

    refused = next(f for f in result["findings"] if f["id"] == "nccl_p2p_refused")
    assert refused["severity"] == "warning"
    assert refused["evidence"]["pairs"] == ["CUDA device 1 (0000:81:00.0, rank 1) and CUDA device 0 (0000:41:00.0)"]
    assert "cudaDeviceCanAccessPeer = 0" in refused["summary"]
    assert "x-nv-gpudirect-clique" in refused["remedy"]
    assert result["transports"]["p2p_refusals"][0]["bus_ids"] == ["0000:81:00.0", "0000:41:00.0"]


@pytest.mark.parametrize(("refusal", "severity", "remedy"), [
    ({"reason": "environment", "host": None, "devices": None, "index_kind": None, "bus_ids": None, "ranks": None,
      "message": "NCCL_P2P_DISABLE set by environment to 1"}, "info", "switched off on purpose"),
    ({"reason": "nvml_p2p_disabled_nvlink", "host": "h", "devices": [0, 1], "index_kind": "nvml", "bus_ids": None,
      "ranks": None, "message": "P2P is disabled between NVLINK connected GPUs 0 and 1."}, "critical",
     "nvidia-fabricmanager"),
])
def test_p2p_refused_severity_follows_the_reason(refusal, severity, remedy):
    findings = nccl_findings.findings_for_run(
        engine="nccl-tests", nranks=2, collectives={}, violations=[], env={},
        transports={"transports": {}, "p2p_used": None, "p2p_refusals": [refusal]})
    (finding,) = findings
    assert (finding.id, finding.severity) == ("nccl_p2p_refused", severity)
    assert remedy in finding.remedy
