"""report/bench_shape.py: a benchmark section of any shape is used whole, with non-finite numbers as null, or
refused with its reasons; what is used renders without error."""

from __future__ import annotations

import json
import math
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.report import render
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.bench_shape import check_bench, finite
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.plot import sweep_svg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.report.test_report import BENCH, FACTS

# The keys the renderer reads, so that generated sections reach its every branch, and a few others.
KEYS = st.sampled_from(["probe", "nccl", "matrices", "values", "name", "unit", "path", "size_bytes", "results",
                        "out_of_place", "in_place", "time_us", "busbw_gbps", "algbw_gbps", "tuning", "candidates",
                        "transports", "communication_ceiling", "summary", "summary_batch", "notes", "collective",
                        "recommended_env", "findings", "id", "severity", "failed", "msg", "engine", "other"])
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
                      max_leaves=40)


def strict(text: str) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(name)
    return json.loads(text, parse_constant=refuse)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(KEYS, VALUES, max_size=4) | VALUES)
def test_any_bench_is_used_or_refused_and_what_is_used_renders(bench: Any) -> None:
    checked = check_bench(bench)
    if checked.bench is None:
        assert bench in (None, {}) or checked.refused or not isinstance(bench, dict)
        return
    assert not checked.refused
    merged = render.merge_bench(json.loads(json.dumps(FACTS)), bench)
    render.host_markdown("h", merged)
    strict(render.report_json("h", merged))
    nccl = checked.bench.get("nccl") or {}
    if nccl.get("results"):
        sweep_svg("h", {"as run": nccl["results"]})


def test_non_finite_numbers_become_null_and_are_named() -> None:
    value, where = finite({"a": [1.0, math.inf, {"b": math.nan}], "c": -math.inf, "d": 2})
    assert value == {"a": [1.0, None, {"b": None}], "c": None, "d": 2}
    assert where == ["a[1] (inf)", "a[2].b (nan)", "c (-inf)"]


def test_the_bench_the_benchmark_writes_is_kept_as_it_is() -> None:
    checked = check_bench(BENCH)
    assert (checked.bench, checked.refused, checked.nulled) == (BENCH, [], [])


def test_every_reason_is_given() -> None:
    checked = check_bench({"probe": {"matrices": "x"}, "nccl": {"results": [1], "findings": [{"id": 3}]}})
    assert checked.bench is None
    assert checked.refused == ["probe.matrices is a string, expected a list",
                               "nccl.results[0] is a number, expected a mapping",
                               "nccl.findings[0].id is a number, expected a string",
                               "nccl.findings[0].severity is missing, expected a string"]


def test_a_bench_written_before_the_rename_is_read_under_todays_names() -> None:
    # A last report of schema_version 6 holds the communication ceiling under comm_floor, its finding under that
    # retired id: the report carries them in today's shape, so that they show and the schema holds.
    ceiling = {"summary": "all-reduce alone limits single-stream decode to 457 tok/s on this host",
               "summary_batch": None, "batch_1": {"batch": 1}}
    older = {"probe": None, "nccl": {"results": [], "comm_floor": ceiling,
                                     "findings": [{"id": "comm_floor", "severity": "info", "summary": "s"}]}}
    nccl = check_bench(older).bench["nccl"]
    assert nccl["communication_ceiling"] == ceiling and "comm_floor" not in nccl
    assert [f["id"] for f in nccl["findings"]] == ["communication_ceiling"]
    assert older["nccl"]["findings"][0]["id"] == "comm_floor"  # the caller's bench is left as it was
    merged = render.merge_bench(json.loads(json.dumps(FACTS)), older)
    assert merged["summary"]["communication_ceiling"] == ceiling["summary"]


def test_todays_key_wins_over_an_older_one_beside_it() -> None:
    today = {"summary": "today", "summary_batch": None}
    both = {"nccl": {"comm_floor": {"summary": "older", "summary_batch": None}, "communication_ceiling": today}}
    assert check_bench(both).bench["nccl"] == {"communication_ceiling": today}
