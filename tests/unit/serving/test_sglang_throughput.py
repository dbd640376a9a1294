"""The throughput measurement against the stand-in paced by a known per-token delay and slot count, the
breakdown against gate results of every shape, the threshold, and bench_serving's command line and result."""

from __future__ import annotations

import json
import sys
import threading
import urllib.request

import pytest
import sglang_throughput
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving import bench_serving, throughput_client
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.throughput_breakdown import (
    breakdown,
    breakdown_text,
    judge,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.throughput_client import (
    ClientError,
    measure,
    read_events,
)

from tests.unit.modules import run_module
from tests.unit.standin import KEY, listening, running_standin

# 20 ms per decode step: one stream makes at most 50 tok/s, 2 slots at most 100 tok/s in total.
DELAY = 0.02
SLOTS = 2
PACED = ["--standin-token-delay", str(DELAY), "--standin-max-running", str(SLOTS)]
# Tolerances. time.sleep never returns early, so the stand-in cannot be faster than its pacing; the client's
# clock only sees chunk arrivals, whose jitter over 31 intervals (0.6 s) is a few ms: 5% above the pace
# covers it. Below the pace, each token also costs a JSON dump, a socket write and a thread switch on a
# shared 2-core CI machine, a few ms at worst next to 20 ms: 35% below still fails a stand-in that ignores
# its pacing by a factor of 2 (or a client that counts the prefill as decode), which is what is tested.
ABOVE = 1.05
BELOW = 0.65


def test_single_stream_and_aggregate_follow_the_pacing() -> None:
    with running_standin("good", extra=PACED) as url:
        result = measure(url, KEY, "GLM-5-NVFP4", "a prompt", 32, 2, 4, 30)
    single, agg = result["single_stream"], result["aggregate"]
    assert BELOW / DELAY <= single["decode_tok_s"] <= ABOVE / DELAY, single
    # The first token comes after one decode step (the prefill): at least the delay, not many of them.
    assert DELAY * 1000 <= single["ttft_ms"] <= 6 * DELAY * 1000, single
    assert single["output_tokens"] == 64
    # Four streams share two slots: two waves of 32 steps, so SLOTS/DELAY in total, not 4/DELAY.
    assert agg["output_tokens"] == 128 and agg["concurrency"] == 4
    assert BELOW * SLOTS / DELAY <= agg["tok_s"] <= ABOVE * SLOTS / DELAY, agg


def test_unlimited_slots_serve_every_stream_at_once() -> None:
    with running_standin("good", extra=["--standin-token-delay", str(DELAY)]) as url:
        result = measure(url, KEY, "GLM-5-NVFP4", "a prompt", 32, 1, 4, 30)
    assert BELOW * 4 / DELAY <= result["aggregate"]["tok_s"] <= ABOVE * 4 / DELAY, result["aggregate"]


def test_a_wrong_key_is_a_clear_error() -> None:
    with running_standin("good") as url, pytest.raises(ClientError, match="HTTP 401; the server refused the API key"):
        measure(url, "not-the-key-0123456789", "GLM-5-NVFP4", "a prompt", 4, 1, 1, 10)


def test_events_counted_by_usage_when_given_and_by_chunks_else() -> None:
    times = iter(float(t) for t in range(10))
    chunk = b'data: {"choices": [{"text": " a"}]}'
    stream = read_events([chunk, b"", chunk, b'data: {"choices": [], "usage": {"completion_tokens": 7}}',
                          b"data: [DONE]"], lambda: next(times), 0.0)
    assert (stream.tokens, stream.first_token_s, stream.last_token_s) == (7, 0.0, 1.0)
    stream = read_events([chunk, chunk, chunk, b"data: [DONE]"], lambda: next(times), 0.0)
    assert stream.tokens == 3 and stream.decode_tok_s == 1.0
    with pytest.raises(ClientError, match="without a token"):
        read_events([b"data: [DONE]"], lambda: 0.0, 0.0)
    with pytest.raises(ClientError, match="not JSON"):
        read_events([b"data: {oops"], lambda: 0.0, 0.0)


MEASURED = {"tool": "client", "single_stream": {"decode_tok_s": 11.0, "ttft_ms": 300.0},
            "aggregate": {"concurrency": 64, "tok_s": 210.0}}


@pytest.mark.parametrize(("launch", "comm_ms", "kind", "said", "share"), [
    # The gate's communication_ceiling as model/ceiling.py returns it: its kind (basis), its source and assumptions.
    ({"tensor_parallel_size": 8, "communication_ceiling": {
        "tensor_parallel_size": 8, "comm_us_per_token": 45454.5, "basis": "estimated_from_pair_latency",
        "source": "13.7 us per hop x 14 ring steps", "assumptions": ["NCCL's base latency left out"]}},
     45.45, "estimated_from_pair_latency", "(estimated_from_pair_latency: 13.7 us per hop x 14 ring steps)", 0.5),
    ({"communication_ceiling": {"comm_us_per_token": 4545.45, "basis": "measured_all_reduce"}},
     4.55, "measured_all_reduce", "(measured_all_reduce), 5% of it", 0.05),
    # As the benchmark writes it (batch_1 inside), with an estimate's assumptions and no basis key.
    ({"communication_ceiling": {"batch_1": {"comm_us_per_token": 9090.9, "assumptions": ["ring"]}}}, 9.09, "estimated",
     "(estimated), 10% of it", 0.1),
    # Only the rate: the time per token is its inverse, and where it came from is not said.
    ({"communication_ceiling_tok_s": 468.0}, 2.14, None, "(source not stated)", 0.0235),
    # A ceiling priced for another tensor-parallel size is not this deployment's.
    ({"tensor_parallel_size": 8, "communication_ceiling": {"tensor_parallel_size": 4, "comm_us_per_token": 1000.0}},
     None, None, "communication ceiling unknown", None),
    ({}, None, None, "communication ceiling unknown", None),
])
def test_breakdown_reads_the_ceiling_the_gate_priced(launch, comm_ms, kind, said, share) -> None:
    parts = breakdown(MEASURED, {"launch": launch})
    assert parts["measured_ms_per_token"] == pytest.approx(1000 / 11)
    assert parts["communication_ceiling_kind"] == kind
    assert said in breakdown_text(parts)
    if comm_ms is None:
        assert parts["communication_ceiling_ms_per_token"] is None and parts["comm_share"] is None
    else:
        assert parts["communication_ceiling_ms_per_token"] == pytest.approx(comm_ms, abs=0.01)
        assert parts["comm_share"] == pytest.approx(share, abs=0.001)
    assert parts["reference_decode_tok_s"] is None
    assert "no reference figure" in breakdown_text(parts)


def test_breakdown_takes_a_reference_from_a_known_good_entry_and_tolerates_junk() -> None:
    gate = {"launch": {"known_good_source": [{"id": "x"}, {"id": "ref", "reference_decode_tok_s": 44.0,
                                                           "reference_source": "a public benchmark"}]}}
    parts = breakdown(MEASURED, gate)
    assert (parts["reference_decode_tok_s"], parts["reference_entry"]) == (44.0, "ref")
    assert parts["measured_vs_reference"] == pytest.approx(0.25)
    assert "reference 44.0 tok/s (a public benchmark), measured 25% of it" in breakdown_text(parts)
    junk_ceiling = [1, None, {"comm_us_per_token": "7"}]
    for junk in (None, "gate", {"launch": "x"}, {"launch": {"communication_ceiling": junk_ceiling}}):
        assert breakdown({}, junk)["communication_ceiling_ms_per_token"] is None


def test_threshold_makes_the_finding() -> None:
    assert judge(MEASURED, None) == [] and judge(MEASURED, 11.0) == []
    (finding,) = judge(MEASURED, 30)
    assert finding["id"] == "serving_decode_slow" and finding["severity"] == "warning"
    assert "11.0 tok/s, below the minimum of 30 tok/s" in finding["summary"]
    (finding,) = judge({"single_stream": None}, 30)
    assert "no decode rate could be measured" in finding["summary"]


def test_module_measures_judges_and_masks(capsys) -> None:
    with running_standin("good", extra=PACED) as url:
        result = run_module(sglang_throughput.main, {
            "url": url, "api_key": KEY, "model": "GLM-5-NVFP4", "max_tokens": 16, "single_requests": 1,
            "concurrency": 2, "timeout": 30, "min_decode_tok_s": 1000,
            "gate": {"launch": {"communication_ceiling_tok_s": 500.0}}}, capsys)
    assert result["ok"] and not result.get("failed") and result["tool"] == "client"
    assert result["tool_reason"] == "no model directory for bench_serving's tokenizer"
    assert result["slow"] and result["findings"][0]["id"] == "serving_decode_slow"
    assert "tok/s single stream" in result["summary"] and "communication ceiling 2.00 ms" in result["summary"]
    assert KEY not in json.dumps(result)


def test_module_reports_a_failed_measurement_without_failing(capsys) -> None:
    with running_standin("good") as url:
        result = run_module(sglang_throughput.main, {"url": url, "api_key": "wrong-key-0123456789abc",
                                                     "model": "m", "min_decode_tok_s": 5}, capsys)
    assert not result["ok"] and "HTTP 401" in result["msg"] and result["slow"]


def test_module_refuses_bad_options(capsys) -> None:
    result = run_module(sglang_throughput.main, {"url": "localhost:1", "model": "m", "concurrency": 0,
                                                 "min_decode_tok_s": -1, "tool": "bench_serving"}, capsys)
    assert result["failed"]
    for said in ("concurrency: expected 1 to 1024, found 0", "url: expected http://", "min_decode_tok_s",
                 "tool bench_serving: expected python"):
        assert said in result["msg"]


def test_bench_serving_command_line_keeps_the_key_off_it() -> None:
    argv = bench_serving.argv("/venv/bin/python", "http://127.0.0.1:30000", "GLM-5-NVFP4", "/models/GLM-5-NVFP4",
                              128, 64, 16, 16, "/tmp/out.jsonl")
    assert argv[:3] == ["/venv/bin/python", "-m", "sglang.bench_serving"]
    pairs = dict(zip(argv[3:-1:2], argv[4::2], strict=True))
    assert pairs["--backend"] == "sglang-oai" and pairs["--dataset-name"] == "random-ids"
    assert pairs["--max-concurrency"] == "16" and pairs["--output-file"] == "/tmp/out.jsonl"
    assert argv[-1] == "--disable-tqdm" and not any("key" in a.lower() for a in argv)


def test_bench_serving_result_read_from_its_last_line() -> None:
    # The keys bench_serving writes per run (python/sglang/bench_serving.py, its result dict).
    earlier = json.dumps({"completed": 1, "median_tpot_ms": 1.0})
    line = json.dumps({"backend": "sglang-oai", "max_concurrency": 1, "completed": 3, "duration": 4.2,
                       "total_output_tokens": 192, "output_throughput": 45.7, "median_ttft_ms": 120.5,
                       "median_tpot_ms": 20.0, "mean_tpot_ms": 21.0})
    result = bench_serving.last_result(earlier + "\n" + line + "\n")
    single = bench_serving.single_stream(result)
    assert single == {"requests": 3, "decode_tok_s": 50.0, "ttft_ms": 120.5, "output_tokens": 192}
    agg = bench_serving.aggregate(result, 16)
    assert (agg["tok_s"], agg["duration_s"], agg["concurrency"]) == (45.7, 4.2, 16)
    with pytest.raises(bench_serving.BenchServingError, match="no result line"):
        bench_serving.last_result("")
    with pytest.raises(bench_serving.BenchServingError, match="completed no request"):
        bench_serving.single_stream({"completed": 0})
    with pytest.raises(bench_serving.BenchServingError, match="not JSON"):
        bench_serving.last_result("Traceback")


def test_standin_streams_as_sglang_does() -> None:
    with running_standin("good") as url:
        body = json.dumps({"model": "GLM-5-NVFP4", "prompt": "p", "max_tokens": 3, "temperature": 0, "stream": True,
                           "stream_options": {"include_usage": True}}).encode()
        request = urllib.request.Request(url + "/v1/completions", data=body, method="POST", headers={
            "Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Type"] == "text/event-stream"
            events = [line[6:] for line in response.read().decode().splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert [c["choices"][0]["finish_reason"] for c in chunks[:3]] == [None, None, "length"]
    assert chunks[3]["choices"] == [] and chunks[3]["usage"]["completion_tokens"] == 3
    # The same greedy text as the answer without streaming.
    assert "".join(c["choices"][0]["text"] for c in chunks[:3]).startswith(" ")


# A stand-in for sglang.bench_serving: reads the options the module passes, checks that the key came in its
# environment, and appends one result line as the real one does, 20 ms per output token.
FAKE_BENCH_SERVING = '''
import argparse, json, os, sys
p = argparse.ArgumentParser()
for flag in ("--backend", "--base-url", "--model", "--tokenizer", "--dataset-name", "--random-input-len",
             "--random-output-len", "--random-range-ratio", "--num-prompts", "--max-concurrency", "--request-rate",
             "--output-file"):
    p.add_argument(flag)
p.add_argument("--disable-tqdm", action="store_true")
a = p.parse_args()
if os.environ.get("OPENAI_API_KEY") != "%s":
    sys.exit("no key")
n, c, out = int(a.num_prompts), int(a.max_concurrency), int(a.random_output_len)
with open(a.output_file, "a") as f:
    f.write(json.dumps({"backend": a.backend, "completed": n, "total_output_tokens": n * out, "duration": 1.0,
                        "output_throughput": c * 50.0, "median_ttft_ms": 30.0, "median_tpot_ms": 20.0}) + "\\n")
'''


def test_module_uses_bench_serving_from_the_venv(tmp_path, monkeypatch, capsys) -> None:
    package = tmp_path / "sglang"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "bench_serving.py").write_text(FAKE_BENCH_SERVING % KEY)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    result = run_module(sglang_throughput.main, {
        "url": "http://127.0.0.1:1", "api_key": KEY, "model": "GLM-5-NVFP4", "python": sys.executable,
        "tokenizer": str(tmp_path), "concurrency": 4, "max_tokens": 8}, capsys)
    assert result["ok"], result
    assert (result["tool"], result["tool_reason"]) == ("bench_serving", "sglang.bench_serving is in the serving venv")
    assert result["single_stream"] == {"requests": 3, "decode_tok_s": 50.0, "ttft_ms": 30.0, "output_tokens": 24}
    assert result["aggregate"]["tok_s"] == 200.0 and result["aggregate"]["output_tokens"] == 32


def test_the_new_module_is_run_where_the_venv_has_it(tmp_path, monkeypatch, capsys) -> None:
    # From 0.5.19 sglang.bench_serving is a deprecated shim of sglang.benchmark.serving (0.5.19 and 0.5.23 wheels):
    # here the old one exits with an error, so only a run of the new one succeeds.
    package = tmp_path / "sglang"
    (package / "benchmark").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "benchmark" / "__init__.py").write_text("")
    (package / "benchmark" / "serving.py").write_text(FAKE_BENCH_SERVING % KEY)
    (package / "bench_serving.py").write_text("import sys\nsys.exit('the deprecated shim ran')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    result = run_module(sglang_throughput.main, {
        "url": "http://127.0.0.1:1", "api_key": KEY, "model": "GLM-5-NVFP4", "python": sys.executable,
        "tokenizer": str(tmp_path), "concurrency": 4, "max_tokens": 8}, capsys)
    assert result["ok"], result
    assert (result["tool"], result["tool_reason"]) == ("bench_serving",
                                                       "sglang.benchmark.serving is in the serving venv")


def test_the_client_module_is_one_of_the_known_ones() -> None:
    argv = bench_serving.argv("/venv/bin/python", "http://h:1", "m", "/t", 1, 1, 1, 1, "/o", "sglang.benchmark.serving")
    assert argv[1:3] == ["-m", "sglang.benchmark.serving"]
    with pytest.raises(bench_serving.BenchServingError, match="expected the benchmark client"):
        bench_serving.argv("/venv/bin/python", "http://h:1", "m", "/t", 1, 1, 1, 1, "/o", "os")


def test_a_wave_that_does_not_finish_in_time_is_an_error(monkeypatch) -> None:
    release = threading.Event()

    def stuck(*_args) -> None:
        release.wait(5)
        raise ClientError("released")

    monkeypatch.setattr(throughput_client, "stream_completion", stuck)
    try:
        with pytest.raises(ClientError, match=r"2 of 2 concurrent requests did not finish within 0\.2 s"):
            throughput_client.measure("http://127.0.0.1:1", KEY, "m", "p", 4, 0, 2, 0.2)
    finally:
        release.set()


def test_check_mode_sends_nothing(capsys) -> None:
    with listening() as (url, connected):
        result = run_module(sglang_throughput.main, {"url": url, "api_key": KEY, "model": "GLM-5-NVFP4",
                                                     "single_requests": 1, "concurrency": 2, "timeout": 2},
                            capsys, check_mode=True)
        assert not connected(), "check mode connected to the server"
    assert result["skipped"] is True and result["changed"] is False and not result.get("failed")
    assert result["msg"] == f"check mode: no request sent to {url}; nothing was measured"
