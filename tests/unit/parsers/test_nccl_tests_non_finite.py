"""inf and nan in nccl-tests output are no measurement: null values, the row marked, never a number.

nccl-tests prints ``0.00 us / inf GB/s`` when a timer read nothing (algbw = size / 0) and ``nan`` for
0 / 0; the JSON writer writes a NaN double as the string "nan". Such a placement's time and
bandwidths become null (its wrong count stays: the values were still checked) and the row lists it
under ``not_measured``, so that no judge takes 0.00 us for a fast all-reduce or inf for a fast link.
"""

from __future__ import annotations

import json
import math

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests_json import parse_nccl_tests_json
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests_text import parse_nccl_tests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import paths

HEADER = ("# nThread 1 nGpus 2 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
          "validation: 1 graph: 0\n"
          "#  Rank  0 Group  0 Pid 1 on h device  0 [0000:01:00] NVIDIA RTX PRO 6000 Blackwell Workstation Edition\n"
          "#  Rank  1 Group  0 Pid 1 on h device  1 [0000:02:00] NVIDIA RTX PRO 6000 Blackwell Workstation Edition\n"
          "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
          "   busbw #wrong\n"
          "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
          "  (GB/s)\n")
FOOTER = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : inf\n#\n"
NON_FINITE = ["inf", "-inf", "+inf", "INF", "Inf", "nan", "-nan", "NaN", "+nan"]
NULL = {"time_us": None, "algbw_gbps": None, "busbw_gbps": None}


def line(size: int, oop: tuple[str, str, str], ip: tuple[str, str, str], wrong: str = "0") -> str:
    return (f"{size:>12} {size // 4:>13}     float     sum      -1  {oop[0]:>7} {oop[1]:>7} {oop[2]:>7} {wrong:>6}"
            f"  {ip[0]:>7} {ip[1]:>7} {ip[2]:>7} {wrong:>6}")


def test_zero_time_and_infinite_bandwidth_is_no_measurement():
    text = HEADER + "\n".join([
        line(8, ("12.25", "0.00", "0.00"), ("12.00", "0.00", "0.00")),
        line(524288, ("0.00", "inf", "inf"), ("0.00", "inf", "inf")),
        line(1048576, ("31.10", "33.72", "33.72"), ("nan", "nan", "nan"), wrong="N/A"),
    ]) + "\n" + FOOTER
    run = parse_nccl_tests(text).as_dict()

    good, zero, half = run["results"]
    assert "not_measured" not in good
    assert zero["not_measured"] == ["out_of_place", "in_place"]
    assert zero["out_of_place"] == {**NULL, "wrong": 0} and zero["in_place"] == {**NULL, "wrong": 0}
    assert half["not_measured"] == ["in_place"]
    assert half["out_of_place"]["time_us"] == 31.1 and half["in_place"] == {**NULL, "wrong": None}
    assert run["avg_busbw_gbps"] is None  # the footer's average of an inf is no figure either
    json.dumps(run, allow_nan=False)


def test_json_nan_and_inf_are_no_measurement():
    document = json.loads((paths.FIXTURES / "nccl" / "all_reduce_perf_json-v3_constructed-from-writer.json")
                          .read_text())
    document["results"][0]["out_of_place"] = {"time": 0.0, "alg_bw": "inf", "bus_bw": "inf", "nwrong": 0}
    document["results"][1]["in_place"] = {"time": "nan", "alg_bw": "nan", "bus_bw": "nan", "nwrong": None}
    text = json.dumps(document).replace('"inf"', "Infinity", 1)  # Python's own spelling of a bare infinity
    run = parse_nccl_tests_json(text).as_dict()

    first, second = run["results"][:2]
    assert first["not_measured"] == ["out_of_place"] and first["out_of_place"] == {**NULL, "wrong": 0}
    assert second["not_measured"] == ["in_place"] and second["in_place"] == {**NULL, "wrong": None}
    assert all("not_measured" not in r for r in run["results"][2:])
    json.dumps(run, allow_nan=False)


def test_the_latency_curve_skips_what_was_not_measured():
    text = HEADER + "\n".join([line(8, ("12.25", "0.00", "0.00"), ("12.00", "0.00", "0.00")),
                               line(16, ("0.00", "inf", "inf"), ("0.00", "inf", "inf"))]) + "\n"
    run = parse_nccl_tests(text)
    assert run.latency_curve() == [(8, 12.25)] and run.latency_curve(in_place=True) == [(8, 12.0)]


FINITE = st.floats(min_value=0, max_value=1e6, allow_nan=False).map(lambda v: f"{v:.2f}")
VALUE = st.one_of(FINITE, st.sampled_from(NON_FINITE))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(st.tuples(st.tuples(VALUE, VALUE, VALUE), st.tuples(VALUE, VALUE, VALUE)),
                     min_size=1, max_size=6))
def test_property_non_finite_tokens_are_null_and_marked(rows):
    text = HEADER + "\n".join(line(8 << i, oop, ip) for i, (oop, ip) in enumerate(rows)) + "\n"
    run = parse_nccl_tests(text).as_dict()

    json.dumps(run, allow_nan=False)  # no inf or nan escapes as a number
    for (oop, ip), result in zip(rows, run["results"], strict=True):
        expected = [name for name, values in (("out_of_place", oop), ("in_place", ip))
                    if not all(math.isfinite(float(v)) for v in values)]
        assert result.get("not_measured", []) == expected
        for name, values in (("out_of_place", oop), ("in_place", ip)):
            measured = [result[name][k] for k in ("time_us", "algbw_gbps", "busbw_gbps")]
            assert measured == ([None] * 3 if name in expected else [float(v) for v in values])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(token=st.sampled_from(["nan", "-nan", "inf", "-inf", "Infinity", "NaN", None, 1e308]),
       field=st.sampled_from(["time", "alg_bw", "bus_bw"]), placement=st.sampled_from(["out_of_place", "in_place"]))
def test_property_json_non_finite_values_are_null_and_marked(token, field, placement):
    document = json.loads((paths.FIXTURES / "nccl" / "all_reduce_perf_json-v3_constructed-from-writer.json")
                          .read_text())
    document["results"][0][placement][field] = "__TOKEN__"
    text = json.dumps(document).replace('"__TOKEN__"', token if token in ("Infinity", "NaN") else json.dumps(token))
    try:
        run = parse_nccl_tests_json(text).as_dict()
    except ValueError:
        assert token is None  # a missing number is an error that says so, not a null guess
        return
    json.dumps(run, allow_nan=False)
    result = run["results"][0]
    if token in ("nan", "-nan", "inf", "-inf", "Infinity", "NaN"):
        assert result["not_measured"] == [placement] and result[placement]["time_us"] is None
    else:
        assert "not_measured" not in result
