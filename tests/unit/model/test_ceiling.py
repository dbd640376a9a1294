"""What the all-reduce latency costs a model: models, interpolation, the communication ceiling."""

from __future__ import annotations

import math

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.ceiling import (
    allreduce_bytes_per_token,
    estimated_ceiling,
    explained_share,
    format_rate,
    interpolate_latency_us,
    measured_ceiling,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.known import KNOWN_MODELS, known_model
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.shape import Model, load_model
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests_text import parse_nccl_tests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import paths

FIXTURES = paths.FIXTURES / "nccl"
INCIDENT = "transfer-test-in-all_reduce_perf-layout_incident-reconstructed_8xRTXPRO6000-vm-no-p2p.txt"


def incident_run():
    with open(FIXTURES / INCIDENT, encoding="utf-8") as handle:
        return parse_nccl_tests(handle.read())


# --------------------------------------------------------------------------------------------------
# The incident: GLM-5 on 8 GPUs in a VM without P2P. Its figures (12 KB at 13.7 us) come from a
# GPU-to-GPU transfer test; the fixture lays them out as an all_reduce_perf row. Read as a measured
# all-reduce (the wrong reading, kept here side by side with the right one) they say 465 tok/s.


def test_the_transfer_figures_read_as_an_all_reduce_are_labelled_measured() -> None:
    model = known_model("glm-5")
    run = incident_run()
    ceiling = measured_ceiling(model, run.latency_curve(), batch=1, measured_ranks=run.nranks)

    # Independent of model/ceiling.py: the message is one token's hidden state, and the curve has a point at that
    # very size, so the step time is that point's time once per all-reduce of every layer and the embedding.
    message = model.hidden_size * model.dtype_bytes
    measured = {r.size_bytes: r.out_of_place.time_us for r in run.results}
    assert message in measured
    expected_step_us = (model.layers * model.allreduces_per_layer + 1) * measured[message]
    expected_rate = 1_000_000 / expected_step_us

    assert ceiling["allreduce_bytes"] == message
    assert ceiling["latency_basis"] == "measured"
    assert ceiling["basis"] == "measured_all_reduce"
    assert ceiling["comm_us_per_token"] == pytest.approx(expected_step_us)
    assert ceiling["max_tokens_per_s_single_stream"] == pytest.approx(expected_rate)
    assert ceiling["summary"] == (f"all-reduce alone limits single-stream decode to {round(expected_rate)} tok/s "
                                  "on this host (measured all-reduce over 8 GPUs)")
    assert ceiling["notes"] == []


def test_the_incident_figures_read_as_a_transfer_explain_a_large_share_of_the_token_time() -> None:
    """The same 13.7 us, read for what it is: one GPU-to-GPU hop. An 8-GPU all-reduce waits 14 of them."""
    model = known_model("glm-5")
    ceiling = estimated_ceiling(model, hop_latency_us=13.7, bus_gbps=32.6)

    # Independent arithmetic: 2(8-1) = 14 hops of 13.7 us, plus 2*7/8 of 12288 bytes at 32.6 GB/s, per
    # all-reduce; 78 layers x 2 + the embedding's = 157 all-reduces per token.
    per_allreduce = 14 * 13.7 + (14 / 8) * 12288 / 32.6e3
    assert ceiling["basis"] == "estimated_from_pair_latency"
    assert ceiling["allreduces_per_step"] == 157
    assert ceiling["allreduce_latency_us"] == pytest.approx(per_allreduce)
    assert ceiling["comm_us_per_token"] == pytest.approx(157 * per_allreduce)
    assert ceiling["estimate"]["nccl_pick"] == "ring"
    assert "estimated: 14 ring steps at TP 8 from the 13.7 us GPU-to-GPU copy latency" in ceiling["summary"]

    # The incident saw 11 tok/s single stream: about 90.9 ms per token. The ceiling's all-reduce time is about
    # 30 ms of it: a third of the time goes to waiting on all-reduce hops alone, where the all-reduce reading said 0.5%.
    observed_us = 1e6 / 11
    share = explained_share(ceiling, observed_us)
    assert 0.30 < share < 0.40
    assert explained_share(ceiling, None) is None
    print(f"ceiling {ceiling['comm_us_per_token'] / 1000:.1f} ms of {observed_us / 1000:.1f} ms per token "
          f"({share:.0%}); assumptions:", *ceiling["assumptions"], sep="\n  ")
    for needle in ("157 all-reduces per decode step", "14 dependent hops (ring", "13.7 us GPU-to-GPU copy",
                   "base latency is left out", "32.6 GB/s"):
        assert any(needle in a for a in ceiling["assumptions"]), needle

    wrong = measured_ceiling(model, incident_run().latency_curve(), measured_ranks=8)
    assert explained_share(wrong, observed_us) < 0.03


def test_estimated_ceiling_at_tp1_and_bad_inputs() -> None:
    single = estimated_ceiling(load_model({**KNOWN_MODELS["glm-5"], "tensor_parallel_size": 1}), 13.7)
    assert single["comm_us_per_token"] == 0.0 and single["basis"] == "estimated_from_pair_latency"
    with pytest.raises(ModelError, match="per-pair copy latency in us as a number above 0; found 0"):
        estimated_ceiling(known_model("glm-5"), 0)
    with pytest.raises(ModelError, match="expected a Model"):
        estimated_ceiling(KNOWN_MODELS["glm-5"], 13.7)  # type: ignore[arg-type]


def test_batch_estimate_uses_the_larger_message() -> None:
    ceiling = estimated_ceiling(known_model("glm-5"), 13.7, 32.6, batch=64)
    assert ceiling["allreduce_bytes"] == 64 * 12288
    assert ceiling["allreduce_latency_us"] > 14 * 13.7
    assert ceiling["summary_batch"].startswith("at 64 concurrent streams")


def test_the_incident_model_is_the_published_architecture() -> None:
    model = known_model("glm-5")
    assert (model.layers, model.allreduces_per_layer, model.hidden_size, model.dtype_bytes,
            model.tensor_parallel_size, model.extra_allreduces) == (78, 2, 6144, 2, 8, 1)
    assert allreduce_bytes_per_token(model, 1) == 12288  # the 12 KB of the incident


def test_ceiling_at_a_concurrency() -> None:
    model = known_model("glm-5")
    curve = [(4096, 12.0), (12288, 13.7), (131072, 40.0), (1048576, 180.0), (805306368, 43230.0)]
    ceiling = measured_ceiling(model, curve, batch=64)

    size = 64 * model.hidden_size * model.dtype_bytes  # 786432 bytes: between two measured points
    low, high = (131072, 40.0), (1048576, 180.0)
    t = math.exp(math.log(low[1]) + (math.log(size) - math.log(low[0])) / (math.log(high[0]) - math.log(low[0]))
                 * (math.log(high[1]) - math.log(low[1])))
    step = (model.layers * model.allreduces_per_layer + 1) * t
    assert ceiling["latency_basis"] == "interpolated"
    assert ceiling["allreduce_latency_us"] == pytest.approx(t)
    assert ceiling["comm_us_per_step"] == pytest.approx(step)
    assert ceiling["max_tokens_per_s_per_stream"] == pytest.approx(1e6 / step)
    assert ceiling["max_tokens_per_s_aggregate"] == pytest.approx(64 * 1e6 / step)
    # The single-stream figure is always the batch-1 one.
    assert ceiling["max_tokens_per_s_single_stream"] == pytest.approx(
        1e6 / ((model.layers * model.allreduces_per_layer + 1) * 13.7))
    assert ceiling["summary_batch"].startswith("at 64 concurrent streams, all-reduce alone limits decode to ")


def test_ceiling_notes_what_was_not_measured() -> None:
    model = known_model("glm-5")
    ceiling = measured_ceiling(model, [(12288, 13.7), (65536, 20.0)], batch=8, measured_ranks=4)

    assert ceiling["latency_basis"] == "extrapolated"  # 98304 bytes: above the largest measured size
    assert any("measured over 4 GPUs" in note for note in ceiling["notes"])
    assert any("outside the measured sizes" in note for note in ceiling["notes"])


def test_tensor_parallel_one_has_no_ceiling() -> None:
    model = load_model({**KNOWN_MODELS["glm-5"], "tensor_parallel_size": 1})
    ceiling = measured_ceiling(model, [(12288, 13.7)])

    assert ceiling["comm_us_per_token"] == 0.0
    assert ceiling["max_tokens_per_s_single_stream"] is None
    assert "no all-reduce" in ceiling["summary"]


def test_llama_model() -> None:
    model = known_model("Llama-3-70B")
    assert (model.layers, model.hidden_size) == (80, 8192)
    assert allreduce_bytes_per_token(model, 4) == 8192 * 2 * 4


@pytest.mark.parametrize(("rate", "text"), [(467.9, "468"), (99.94, "99.9"), (11.04, "11.0"), (1010.4, "1010")])
def test_format_rate(rate: float, text: str) -> None:
    assert format_rate(rate) == text


# --------------------------------------------------------------------------------------------------
# Interpolation

CURVE = [(4096, 10.0), (16384, 20.0), (65536, 80.0)]


def test_interpolation_is_exact_at_measured_sizes() -> None:
    for size, time_us in CURVE:
        assert interpolate_latency_us(CURVE, size) == time_us


def test_interpolation_is_straight_in_log_log() -> None:
    # At the geometric mean of two sizes, the time is the geometric mean of their times.
    assert interpolate_latency_us(CURVE, 8192) == pytest.approx(math.sqrt(10.0 * 20.0))
    assert interpolate_latency_us(CURVE, 32768) == pytest.approx(40.0)


def test_below_the_curve_the_latency_is_held() -> None:
    assert interpolate_latency_us(CURVE, 8) == 10.0


def test_above_the_curve_the_last_bandwidth_is_kept() -> None:
    # 65536 bytes in 80 us; twice the bytes at the same bandwidth take twice the time.
    assert interpolate_latency_us(CURVE, 131072) == pytest.approx(160.0)


def test_unsorted_curve_and_repeated_sizes() -> None:
    # nccl-tests -R repeats sizes; repeats are averaged.
    curve = [(65536, 80.0), (4096, 9.0), (16384, 20.0), (4096, 11.0)]
    assert interpolate_latency_us(curve, 4096) == 10.0
    assert interpolate_latency_us(curve, 32768) == pytest.approx(40.0)


@pytest.mark.parametrize(("curve", "size", "message"), [
    ([], 8, "expected a list of \\(size_bytes, time_us\\) pairs; found \\[\\]"),
    ("12288 13.7", 8, "expected a list"),
    ([(0, 5.0)], 8, "sizes as whole numbers of bytes above 0; found 0.*zero-byte rows"),
    ([(8, -1.0)], 8, "times in us above 0; found -1.0 for 8 bytes"),
    ([(8, float("nan"))], 8, "times in us above 0"),
    ([(8, 1.0, 2.0)], 8, "pairs; found \\(8, 1.0, 2.0\\)"),
    ([(8.5, 1.0)], 8, "whole numbers of bytes"),
    ([(8, 1.0)], 0, "message size: expected a whole number of bytes above 0; found 0"),
])
def test_bad_curves(curve: object, size: int, message: str) -> None:
    with pytest.raises(ModelError, match=message):
        interpolate_latency_us(curve, size)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(points=st.lists(st.tuples(st.integers(1, 2**34), st.floats(0.01, 1e7)), min_size=1, max_size=12,
                       unique_by=lambda p: p[0]),
       size=st.integers(1, 2**36))
def test_property_interpolation_stays_between_its_neighbours(points: list[tuple[int, float]], size: int) -> None:
    # Monotone curves (time grows with size), as measured ones are: the estimate keeps the order.
    sizes = sorted(p[0] for p in points)
    times = sorted(p[1] for p in points)
    curve = list(zip(sizes, times, strict=True))
    value = interpolate_latency_us(curve, size)
    below = [t for s, t in curve if s <= size]
    above = [t for s, t in curve if s >= size]
    assert value >= (below[-1] if below else curve[0][1]) * (1 - 1e-9)
    if above:
        assert value <= above[0] * (1 + 1e-9)
    else:
        assert value == pytest.approx(curve[-1][1] * size / curve[-1][0])


# --------------------------------------------------------------------------------------------------
# Models


@pytest.mark.parametrize(("change", "message"), [
    ({"layer": 78}, r"model.layer: unknown key; did you mean layers\?"),
    ({"layers": 0}, r"expected 'layers' as a whole number of 1 or more; found 0"),
    ({"hidden_size": "6144"}, r"'hidden_size' as a whole number of 1 or more; found '6144'"),
    ({"dtype_bytes": True}, r"'dtype_bytes' as a whole number.*found True"),
    ({"name": ""}, r"expected 'name' as a non-empty string"),
    ({"notes": 3}, r"expected 'notes' as text"),
    ({"extra_allreduces": -1}, r"'extra_allreduces' as a whole number of 0 or more; found -1"),
])
def test_bad_models(change: dict, message: str) -> None:
    data = {**KNOWN_MODELS["glm-5"], **change}
    with pytest.raises(ModelError, match=message):
        load_model(data)


def test_missing_field_says_where_to_find_it() -> None:
    data = dict(KNOWN_MODELS["glm-5"])
    del data["hidden_size"]
    with pytest.raises(ModelError, match=r"expected the field 'hidden_size'.*config.json"):
        load_model(data)


def test_a_model_must_be_a_mapping() -> None:
    with pytest.raises(ModelError, match="expected a mapping"):
        load_model([("name", "x")])  # type: ignore[arg-type]


def test_an_unknown_known_model() -> None:
    with pytest.raises(ModelError, match=r"expected a known model \(glm-5, llama-3-70b\); found 'glm-9'"):
        known_model("glm-9")


def test_every_known_model_loads_and_round_trips() -> None:
    for key in KNOWN_MODELS:
        model = known_model(key)
        assert isinstance(model, Model)
        assert load_model(model.as_dict()) == model


@pytest.mark.parametrize("batch", [0, -1, 1.5, True])
def test_bad_batch(batch: object) -> None:
    with pytest.raises(ModelError, match="batch: expected a whole number of 1 or more"):
        measured_ceiling(known_model("glm-5"), CURVE, batch=batch)  # type: ignore[arg-type]


def test_communication_ceiling_wants_a_loaded_model() -> None:
    with pytest.raises(ModelError, match="expected a Model; found dict"):
        measured_ceiling(KNOWN_MODELS["glm-5"], CURVE)  # type: ignore[arg-type]


def test_bench_result_priced_for_glm5_from_the_incident_log() -> None:

    from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.host_ceiling import add_communication_ceiling
    from ansible_collections.gpuhost.gpu.plugins.module_utils.model.ceiling import measured_curve
    from ansible_collections.gpuhost.gpu.plugins.module_utils.model.known import known_model
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests_text import parse_nccl_tests

    log = FIXTURES / (
        "transfer-test-in-all_reduce_perf-layout_incident-reconstructed_8xRTXPRO6000-vm-no-p2p.txt")
    result = parse_nccl_tests(log.read_text()).as_dict()
    add_communication_ceiling(result, "glm-5", 64)
    model = known_model("glm-5")
    per_token_us = dict(measured_curve(result["results"]))[model.hidden_size * model.dtype_bytes] * (
        model.layers * model.allreduces_per_layer + model.extra_allreduces)
    ceiling = result["communication_ceiling"]["batch_1"]
    assert ceiling["comm_us_per_token"] == pytest.approx(per_token_us)
    assert ceiling["max_tokens_per_s_single_stream"] == pytest.approx(1e6 / per_token_us)
    finding = result["findings"][-1]
    assert finding["id"] == "communication_ceiling"
    assert f"to {round(1e6 / per_token_us)} tok/s" in finding["summary"]
    assert "at 64 concurrent streams" in finding["summary"]


def test_torch_rows_without_out_of_place_use_in_place() -> None:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.model.ceiling import measured_curve

    rows = [{"size_bytes": 4096, "out_of_place": None, "in_place": {"time_us": 20.0}},
            {"size_bytes": 0, "out_of_place": {"time_us": 1.0}},
            {"size_bytes": 8192, "out_of_place": {"time_us": 30.0}, "in_place": {"time_us": 31.0}}]
    assert measured_curve(rows) == [(4096, 20.0), (8192, 30.0)]


def test_a_misspelled_known_model_names_the_closest() -> None:
    with pytest.raises(ModelError, match=r"found 'glm5'; did you mean glm-5\? Pick a known model or pass your own "
                                         r"mapping"):
        known_model("glm5")
