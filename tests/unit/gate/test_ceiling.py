"""The communication ceiling from the right kind of number: a measured all-reduce over the serving rank
count, or an estimate from the probe's GPU-to-GPU copy latency; never a transfer figure read as an
all-reduce. The incident's logs side by side: the transfer test laid out as all_reduce_perf
(tests/fixtures/nccl) and the P2P probe of the same guest (tests/fixtures/p2p)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.from_logs import nccl_from_log, probe_from_log
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate

from tests import paths
from tests.unit.captures import INCIDENT, PRO6000, audited

TRANSFER_LOG = paths.FIXTURES / "nccl" / (
    "transfer-test-in-all_reduce_perf-layout_incident-reconstructed_8xRTXPRO6000-vm-no-p2p.txt")
INCIDENT_PROBE = paths.FIXTURES / "p2p" / "p2p-probe_8xRTXPRO6000-vm-no-p2p_constructed.jsonl"
BAREMETAL_PROBE = paths.FIXTURES / "p2p" / "p2p-probe_8xRTXPRO6000-baremetal-p2p_constructed.jsonl"
GLM5 = {"name": "GLM-5-NVFP4", "family": "glm-5", "weights_gib": 403, "tensor_parallel_size": "auto",
        "attention_heads": 64}


def decide(facts: str, bench: dict | None, probe: dict | None) -> dict:
    return gate.decide(audited(facts), GLM5, bench=bench, probe=probe, accept=["p2p_not_supported"])


def test_the_transfer_log_read_alone_is_a_measured_all_reduce() -> None:
    # Without the probe nothing tells the row is one copy's time: labelled for what it claims to be.
    result = decide(INCIDENT, nccl_from_log(str(TRANSFER_LOG)), None)
    ceiling = result["launch"]["communication_ceiling"]
    assert ceiling["basis"] == "measured_all_reduce"
    assert result["launch"]["communication_ceiling_tok_s"] == pytest.approx(1e6 / (157 * 13.7), abs=0.05)


def test_with_the_probe_the_transfer_is_refused_and_the_ceiling_estimated() -> None:
    result = decide(INCIDENT, nccl_from_log(str(TRANSFER_LOG)), probe_from_log(str(INCIDENT_PROBE)))
    launch = result["launch"]
    ceiling = launch["communication_ceiling"]
    assert ceiling["basis"] == "estimated_from_pair_latency"
    assert any("these figures are a transfer test, not an all-reduce" in n for n in result["notes"])
    # The probe's slowest pair copies 16 KiB in 13.9 us (GPU time); 14 ring hops per all-reduce, 157 per token.
    assert ceiling["estimate"]["hop_latency_us"] == 13.9 and ceiling["estimate"]["ring"]["steps"] == 14
    assert ceiling["comm_us_per_token"] == pytest.approx(157 * 14 * 13.9)
    assert launch["communication_ceiling_tok_s"] == pytest.approx(1e6 / (157 * 14 * 13.9), abs=0.05)
    assert launch["communication_ceiling_tok_s"] < 40  # of the order of the observed 11 tok/s, not 465
    assert any("slowest pair of the group" in a for a in ceiling["assumptions"])
    # The verdict's one line says it too, with what priced it.
    assert result["summary"].endswith("; communication ceiling 32.7 tok/s single stream, 30.6 ms of all-reduce per "
                                      "token (estimated: 14 ring steps at TP 8 "
                                      "from the 13.9 us GPU-to-GPU copy latency; "
                                      "collectives per step from the known model glm-5)")


def test_the_probe_alone_gives_an_estimate() -> None:
    ceiling = decide(INCIDENT, None, probe_from_log(str(INCIDENT_PROBE)))["launch"]["communication_ceiling"]
    assert ceiling["basis"] == "estimated_from_pair_latency" and ceiling["source"].startswith("estimated: 14 ring")


def test_bare_metal_ceiling_is_small_next_to_its_token_time() -> None:
    # The same GPUs with P2P: about 50 tok/s single stream (20 ms per token) on bare metal.
    result = gate.decide(audited(PRO6000), GLM5, probe=probe_from_log(str(BAREMETAL_PROBE)))
    ceiling = result["launch"]["communication_ceiling"]
    assert ceiling["basis"] == "estimated_from_pair_latency"
    assert ceiling["comm_us_per_token"] < 0.5 * 20_000


def test_a_measured_all_reduce_slower_than_two_copies_is_kept() -> None:
    bench = nccl_from_log(str(TRANSFER_LOG))
    for row in bench["results"]:
        for placement in ("out_of_place", "in_place"):
            row[placement]["time_us"] *= 20
    bench.pop("communication_ceiling", None)
    result = decide(INCIDENT, bench, probe_from_log(str(INCIDENT_PROBE)))
    assert result["launch"]["communication_ceiling"]["basis"] == "measured_all_reduce"


def test_no_bench_and_no_probe_says_why_there_is_no_ceiling() -> None:
    result = decide(INCIDENT, None, None)
    assert result["launch"]["communication_ceiling_tok_s"] is None
    assert any("neither an all-reduce measured by the benchmark nor a GPU-to-GPU copy latency" in n
               for n in result["notes"])


def test_an_all_reduce_measured_over_other_ranks_gives_way_to_the_estimate() -> None:
    bench = nccl_from_log(str(TRANSFER_LOG))
    for row in bench["results"]:
        for placement in ("out_of_place", "in_place"):
            row[placement]["time_us"] *= 20
    bench.pop("communication_ceiling", None)
    bench["nranks"] = 4
    result = decide(INCIDENT, bench, probe_from_log(str(INCIDENT_PROBE)))
    assert result["launch"]["communication_ceiling"]["basis"] == "estimated_from_pair_latency"
    assert any("measured all-reduce over 4 GPUs, the deployment runs 8" in n for n in result["notes"])


def test_the_benchmark_and_the_gate_give_one_figure_for_one_model_and_tp() -> None:
    # The benchmark priced with the probe beside it: the incident's copy test is refused there too, and the
    # ceiling it reports is the gate's, figure and basis, for GLM-5 at TP 8.
    probe = probe_from_log(str(INCIDENT_PROBE))
    bench = nccl_from_log(str(TRANSFER_LOG), model="glm-5", probe=probe)
    ceiling = bench["communication_ceiling"]["batch_1"]
    assert ceiling["basis"] == "estimated_from_pair_latency"
    assert any("these figures are a transfer test, not an all-reduce" in n for n in bench["notes"])
    finding = next(f for f in bench["findings"] if f["id"] == "communication_ceiling")
    assert finding["summary"].startswith("All-reduce alone limits single-stream decode to 32.7 tok/s on this host "
                                         "(estimated: 14 ring steps at TP 8 from the 13.9 us GPU-to-GPU copy")
    launch = decide(INCIDENT, bench, probe)["launch"]
    assert launch["communication_ceiling"]["basis"] == ceiling["basis"]
    assert launch["communication_ceiling"]["comm_us_per_token"] == pytest.approx(ceiling["comm_us_per_token"])
    assert launch["communication_ceiling_tok_s"] == round(ceiling["max_tokens_per_s_single_stream"], 1)


def test_without_the_probe_the_benchmark_takes_the_log_for_what_it_claims() -> None:
    bench = nccl_from_log(str(TRANSFER_LOG), model="glm-5")
    assert bench["communication_ceiling"]["batch_1"]["basis"] == "measured_all_reduce"
