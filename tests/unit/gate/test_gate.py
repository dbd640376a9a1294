"""The deployment gate over the facts of real host profiles: verdicts, reasons and launch settings.

Audit facts come from replaying the captures in tests/captures (the same facts gpu_host_facts returns
on those hosts); benchmark and probe results are built with the benchmark's and the probe's own logic,
so their findings have the shapes those modules return.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import deploy_gate
import pytest
import yaml
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import nccl_findings, nccl_thresholds, nccl_tuning
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import p2p_judge as probe_logic
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import versions
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.known_good import KNOWN_GOOD, merged_table
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules import engine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.captures import ALL, H100, HYPERVISOR, I440FX, INCIDENT, MICROVM, PRO6000, RTX4090, audited
from tests.unit.modules import run_module

# The incident's model: GLM-5 in NVFP4, 744B parameters; its checkpoint loads to about 56 GB per GPU
# over eight GPUs (433 GB), i.e. 403 GiB; 64 attention heads.
GLM5 = {
    "name": "GLM-5-NVFP4", "family": "glm-5", "path": "/models/GLM-5-NVFP4", "weights_gib": 403,
    "tensor_parallel_size": "auto", "attention_heads": 64, "min_compute_capability": "8.0",
    "min_driver": "570", "min_cuda": "12.8",
}
# A dense 70B model in bf16 (131.5 GiB of weights, 64 heads); driver minimum written so that comparing
# versions as strings would get it wrong ("550.127.05" < "550.54" as text).
LLAMA70 = {
    "name": "Llama-3-70B-Instruct", "family": "llama-3-70b", "weights_gib": 131.5, "attention_heads": 64,
    "min_compute_capability": "8.0", "min_driver": "550.54", "min_cuda": "12.2",
}
INCIDENT_FLAGS = ["--tp", "8", "--nsa-decode-backend", "trtllm", "--disable-custom-all-reduce"]


def audit(name: str) -> dict[str, Any]:
    return audited(name)


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [item["id"] for item in items]


def set_numa(facts_: dict[str, Any], nodes: list[int]) -> dict[str, Any]:
    """The audit of the same host with its GPUs on other NUMA nodes (by GPU index), rules judged again."""
    bus = {d["pci_bus_id"]: d["index"] for d in facts_["gpus"]["devices"]}
    for device in facts_["pci"]["nvidia_devices"]:
        if device["kind"] == "gpu" and device["bdf"] in bus:
            device["numa_node"] = nodes[bus[device["bdf"]]]
    facts_["topology"]["numa_affinity"] = list(nodes)
    facts_["findings"] = engine.evaluate(facts_)
    return facts_


def probe_result(count: int, failing: tuple[tuple[int, int], ...] = (), visible: str | None = None) -> dict[str, Any]:
    """A gpu_p2p_probe result: every pair's pattern checked at the destination, some pairs reading zeros."""
    good = {"ce_wrong": 0, "sm_wrong": 0, "zeros_at_destination": 0, "elements": 1048576, "peer_access": True}
    bad = {"ce_wrong": 1048576, "sm_wrong": 1048576, "zeros_at_destination": 1048576, "elements": 1048576,
           "peer_access": True}
    proof = [[None if i == j else dict(bad if (i, j) in failing else good) for j in range(count)]
             for i in range(count)]
    access = [[None if i == j else True for j in range(count)] for i in range(count)]
    result: dict[str, Any] = {"source": "probe", "tool": "torch", "status": "ok", "access": access, "proof": proof,
                              "matrices": [], "devices": [{"index": i, "name": "GPU"} for i in range(count)]}
    if visible is not None:
        result["visible"] = visible
    result["findings"] = probe_logic.findings(result)
    return result


def row(size: int, time_us: float, busbw: float = 1.0) -> dict[str, Any]:
    return {"size_bytes": size, "count": size // 2, "type": "bfloat16", "redop": "sum", "out_of_place": None,
            "in_place": {"time_us": time_us, "algbw_gbps": busbw, "busbw_gbps": busbw, "wrong": 0}}


def bench_result(candidates: list[tuple[str, dict[str, str], str, list[dict[str, Any]]]], nranks: int = 8,
                 thresholds: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An nccl_bench result with tuning, built as run_bench builds it: (name, env, status, rows) per candidate."""
    summaries = [nccl_tuning.summarize_candidate(name, env, status, {"all_reduce": rows}, "all_reduce")
                 for name, env, status, rows in candidates]
    tuning = nccl_tuning.choose_best(summaries, {})
    for summary, (_name, _env, _status, rows) in zip(summaries, candidates, strict=True):
        summary["results"] = rows
    name, env, status, rows = candidates[0]
    limits = nccl_thresholds.normalize_thresholds(thresholds) if thresholds is not None else \
        nccl_thresholds.default_thresholds(nranks, "torch-nccl")
    violations, _ = nccl_thresholds.evaluate_thresholds({"all_reduce": rows}, limits)
    control = next((s for s in summaries if s["env"].get("NCCL_P2P_DISABLE") == "1" and s["status"] == "ok"), None)
    found = nccl_findings.findings_for_run(engine="torch-nccl", nranks=nranks, collectives={"all_reduce": rows},
                                           violations=violations, env=env, status=status, timeout_s=300.0,
                                           control=control)
    found.extend(nccl_findings.tuning_findings(tuning, primary_label=name))
    return {"engine": "torch-nccl", "source": "run", "status": status, "nranks": nranks, "collective": "all_reduce",
            "results": rows, "env": env, "tuning": tuning, "recommended_env": tuning["recommended_env"],
            "findings": nccl_findings.sort_findings(found)}


# A benchmark that reports 13.7 us for an 8-GPU all-reduce of small messages without P2P (the incident's
# transfer figures, read as an all-reduce: the gate has no probe here to tell), the as-is run slower
# still; 32.6 GB/s for large transfers.
INCIDENT_BENCH = [
    ("as-is", {}, "ok", [row(8192, 14.9), row(16384, 14.9), row(67108864, 3600.0, 32.6)]),
    ("p2p-disabled", {"NCCL_P2P_DISABLE": "1"}, "ok", [row(8192, 13.7), row(16384, 13.7), row(67108864, 3600.0, 32.6)]),
]
# What a P2P-capable host of 8 GPUs manages for a 16 KiB all-reduce (nccl_bench_logic's reasoning): 10 us.
P2P_BASELINE = [{"size_bytes": 16384, "max_time_us": 10.0}]


# ---------------------------------------------------------------------------
# The incident guest: 8x RTX PRO 6000 (SM120) in a Proxmox q35 VM, P2P "NS" for every pair


def test_incident_guest_is_blocked_for_tp8_without_p2p():
    result = gate.decide(audit(INCIDENT), {**GLM5, "tensor_parallel_size": 8}, sglang_version="0.5.9")
    assert result["verdict"] == "block"
    assert ids(result["reasons"]) == ["p2p_not_supported"]
    reason = result["reasons"][0]
    assert reason["source"] == "gate"
    assert reason["summary"].startswith("No working GPU peer-to-peer between 28 of the 28 pairs of the chosen GPUs "
                                        "[0, 1, 2, 3, 4, 5, 6, 7]")
    assert reason["evidence"]["statuses"] == ["NS"]
    assert reason["evidence"]["virtualization"] == "KVM virtual machine (machine q35)"
    # The audit's host-side remedy travels with the reason, and so does the way to accept it.
    assert "x-nv-gpudirect-clique=0" in reason["remedy"]
    assert "add p2p_not_supported to the accepted findings" in reason["remedy"]
    assert result["accepted"] == []
    assert result["summary"] == "block: GLM-5-NVFP4 must not be deployed here (1 reason(s): p2p_not_supported)"


def test_incident_guest_passes_when_missing_p2p_is_accepted():
    result = gate.decide(audit(INCIDENT), GLM5, accept=["p2p_not_supported"], sglang_version="0.5.9")
    assert result["verdict"] == "pass"
    assert result["reasons"] == []
    launch = result["launch"]
    assert launch["tensor_parallel_size"] == 8
    assert launch["gpus"] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert launch["cuda_visible_devices"] == "0,1,2,3,4,5,6,7"
    assert launch["args"] == INCIDENT_FLAGS
    assert launch["env"] == {"NCCL_P2P_DISABLE": "1"}
    assert launch["custom_all_reduce"] is False
    assert launch["p2p"] == {"state": "absent", "pairs": {"proven": 0, "claimed": 0, "unknown": 0, "absent": 28,
                                                          "failed": 0}}
    assert [(a["id"], a["source"], a["accepted_because"]) for a in result["accepted"]] == [
        ("p2p_not_supported", "gate", "listed in accept")]
    assert [s["id"] for s in launch["known_good_source"]] == ["sm120-glm5-nsa-decode-trtllm"]
    assert launch["known_good_source"][0]["sglang_versions"] == "<0.5.10"
    assert any(note.startswith("Missing P2P is accepted as a risk") for note in result["notes"])
    # 403 GiB over 8 GPUs of 97887 MiB, with 10% each for KV cache and headroom.
    assert launch["memory"] == {"fits": True, "need_gib_per_gpu": 69.49, "have_gib_per_gpu": 95.59,
                                "weights_gib_per_gpu": 50.38, "kv_cache_gib_per_gpu": 9.56,
                                "headroom_gib_per_gpu": 9.56}
    assert result["summary"] == ("pass: GLM-5-NVFP4 with --tp 8 on GPUs 0,1,2,3,4,5,6,7; custom all-reduce off; "
                                 "NCCL_P2P_DISABLE=1; 1 finding(s) accepted as risk")


def test_auto_needs_all_eight_gpus_for_glm5():
    # At TP4 each 95.6 GiB GPU would hold 100.75 GiB of weights alone.
    result = gate.decide(audit(INCIDENT), GLM5, accept=["p2p_not_supported"])
    assert result["launch"]["tensor_parallel_size"] == 8


def test_incident_with_its_benchmark_takes_the_tuned_environment_and_its_ceiling():
    bench = bench_result(INCIDENT_BENCH, thresholds=P2P_BASELINE)
    assert [(f["id"], f["severity"]) for f in bench["findings"]] == [
        ("nccl_small_message_latency", "critical"), ("nccl_tuning_recommendation", "info")]
    blocked = gate.decide(audit(INCIDENT), GLM5, bench=bench, sglang_version="0.5.9")
    assert blocked["verdict"] == "block"
    assert ids(blocked["reasons"]) == ["p2p_not_supported", "nccl_small_message_latency"]
    assert blocked["reasons"][1]["source"] == "bench"

    result = gate.decide(audit(INCIDENT), GLM5, bench=bench, accept=["p2p_not_supported"], sglang_version="0.5.9")
    assert result["verdict"] == "pass"
    assert [(a["id"], a["accepted_because"]) for a in result["accepted"]] == [
        ("p2p_not_supported", "listed in accept"),
        ("nccl_small_message_latency", "consequence of the accepted p2p_not_supported")]
    launch = result["launch"]
    assert launch["env"] == {"NCCL_P2P_DISABLE": "1"}
    assert launch["args"] == INCIDENT_FLAGS
    # GLM-5: 78 layers x 2 all-reduces of 12 KiB plus the embedding's; the p2p-disabled candidate (the
    # tuning's choice) measured 13.7 us for an 8-GPU all-reduce of that size, so decode cannot beat
    # 1e6 / (157 x 13.7 us) tokens per second. (With no probe, nothing says that 13.7 us is one copy's time:
    # test_ceiling.py has the incident's real reading.)
    assert launch["communication_ceiling_tok_s"] == 464.9
    assert launch["communication_ceiling"]["allreduce_bytes"] == 12288
    assert launch["communication_ceiling"]["allreduces_per_step"] == 157
    assert launch["communication_ceiling"]["basis"] == "measured_all_reduce"
    assert [(w["id"], w["source"], w["severity"]) for w in result["other_findings"]] == [
        ("nccl_tuning_recommendation", "bench", "info")]


def test_a_failing_baseline_fixed_by_the_tuned_environment_is_resolved_by_the_launch():
    bench = bench_result([
        ("as-is", {}, "timeout", [row(8192, 14.9)]),
        ("p2p-disabled", {"NCCL_P2P_DISABLE": "1"}, "ok", [row(8192, 13.7), row(16384, 13.7),
                                                           row(67108864, 3600.0, 32.6)]),
    ])
    assert ("nccl_tuning_recommendation", "critical") in [(f["id"], f["severity"]) for f in bench["findings"]]
    result = gate.decide(audit(INCIDENT), GLM5, bench=bench, accept=["p2p_not_supported", "nccl_timeout"])
    assert result["verdict"] == "pass"
    assert [(r["id"], r["resolved_by"]) for r in result["resolved"]] == [
        ("nccl_tuning_recommendation", "the launch uses the environment the tuning recommends")]


def test_one_gpu_needs_no_p2p_even_in_the_incident_guest():
    small = {"name": "Mystery-7B", "family": "mystery", "weights_gib": 20, "min_driver": "570"}
    result = gate.decide(audit(INCIDENT), small)
    assert result["verdict"] == "pass"
    launch = result["launch"]
    assert launch["tensor_parallel_size"] == 1
    assert launch["args"] == ["--tp", "1"]
    assert launch["env"] == {}
    assert launch["custom_all_reduce"] is None
    assert launch["p2p"]["state"] == "n/a (one GPU)"
    assert [(r["id"], r["resolved_by"]) for r in result["resolved"]] == [
        ("p2p_not_supported", "tensor-parallel size 1: no collectives between GPUs")]


def test_unknown_model_family_gets_no_backend_flags_and_a_note():
    model = {**GLM5, "name": "Mystery-MoE", "family": "mystery-moe", "path": "/models/mystery"}
    result = gate.decide(audit(INCIDENT), model, accept=["p2p_not_supported"], sglang_version="0.5.9")
    assert result["launch"]["args"] == ["--tp", "8", "--disable-custom-all-reduce"]
    assert result["launch"]["known_good_source"] == []
    assert ("No known-good entry for mystery-moe on sm_120: no backend flags added; SGLang picks its defaults and "
            "the smoke test judges them.") in result["notes"]


@pytest.mark.parametrize(("version", "applied", "defaults"), [
    ("0.5.9", True, False),
    ("0.5.9.post1", True, False),
    ("0.5.10rc0", True, False),  # a pre-release of 0.5.10 comes before it
    # 0.5.10 to 0.5.11: SGLang's own defaults on SM120 are trtllm already (server_args.py): the flag changes nothing.
    ("v0.5.10", False, True),
    ("0.5.10.post1", False, True),
    ("0.5.11.post1", False, True),
    ("0.5.12rc0", False, True),
    ("0.5.12", False, False),
    ("0.6.0", False, False),
])
def test_known_good_flags_follow_the_sglang_version(version, applied, defaults):
    result = gate.decide(audit(INCIDENT), GLM5, accept=["p2p_not_supported"], sglang_version=version)
    assert ("--nsa-decode-backend" in result["launch"]["args"]) is applied
    skipped = [n for n in result["notes"] if n.startswith("Known-good entry sm120-glm5-nsa-decode-trtllm")]
    assert bool(skipped) is not applied
    used = [e["id"] for e in result["launch"]["known_good_source"]]
    assert ("sm120-glm5-dsa-trtllm-by-default" in used) is defaults


def test_without_a_version_the_entry_applies_with_a_note():
    result = gate.decide(audit(INCIDENT), GLM5, accept=["p2p_not_supported"])
    assert result["launch"]["args"] == INCIDENT_FLAGS
    assert ("SGLang version not given: known-good entry sm120-glm5-nsa-decode-trtllm applied; it is known good for "
            "SGLang <0.5.10. Pass sglang_version to check.") in result["notes"]


def test_known_good_overrides_add_replace_and_remove_entries():
    site = {"id": "site-glm5-0512", "arch": "sm_120", "models": ["glm-5*"], "sglang_versions": "==0.5.12",
            "flags": ["--dsa-decode-backend", "tilelang", "--tp", "4"], "env": {"SGLANG_SITE": "1"},
            "source": "smoke test on this site"}
    result = gate.decide(audit(INCIDENT), GLM5, accept=["p2p_not_supported"], sglang_version="0.5.12",
                         known_good_overrides=[site])
    # The gate's own --tp wins over a table entry's.
    assert result["launch"]["args"] == ["--tp", "8", "--dsa-decode-backend", "tilelang", "--disable-custom-all-reduce"]
    assert result["launch"]["env"] == {"NCCL_P2P_DISABLE": "1", "SGLANG_SITE": "1"}
    assert [s["id"] for s in result["launch"]["known_good_source"]] == ["site-glm5-0512"]

    replaced = {**KNOWN_GOOD[0], "flags": ["--nsa-decode-backend", "tilelang"], "sglang_versions": None}
    result = gate.decide(audit(INCIDENT), GLM5, accept=["p2p_not_supported"], sglang_version="0.5.12",
                         known_good_overrides=[replaced])
    assert result["launch"]["args"] == ["--tp", "8", "--nsa-decode-backend", "tilelang", "--disable-custom-all-reduce"]

    removed = {"id": KNOWN_GOOD[0]["id"], "disabled": True}
    result = gate.decide(audit(INCIDENT), GLM5, accept=["p2p_not_supported"], sglang_version="0.5.9",
                         known_good_overrides=[removed])
    assert result["launch"]["args"] == ["--tp", "8", "--disable-custom-all-reduce"]


def test_an_invalid_override_blocks_and_says_what_is_wrong():
    result = gate.decide(audit(INCIDENT), GLM5, accept=["p2p_not_supported"],
                         known_good_overrides=[{"id": "x", "arch": "sm_120", "models": "glm-5", "flags": "--tp 8"}])
    assert result["verdict"] == "block"
    assert [(r["id"], r["summary"]) for r in result["reasons"]] == [
        ("known_good_override_invalid", "known_good_overrides[0]: expected 'flags' as a list of strings (option and "
                                        "value as separate items); found '--tp 8'")]


def test_shipped_table_is_valid():
    table, problems = merged_table([])
    assert problems == []
    assert [e["id"] for e in table] == [e["id"] for e in KNOWN_GOOD]
    for entry in KNOWN_GOOD:
        assert entry["source"] and entry["note"], entry["id"]
        assert all(versions.sm_name(a) == a for a in entry["arch"]), entry["id"]


# ---------------------------------------------------------------------------
# The H100 host: 8x H100 SXM, NVLink between every pair, GPUs 0-3 on NUMA node 0 and 4-7 on node 1


def test_h100_passes_with_custom_all_reduce_when_the_probe_proves_p2p():
    result = gate.decide(audit(H100), LLAMA70, probe=probe_result(8))
    assert result["verdict"] == "pass"
    launch = result["launch"]
    assert launch["gpus"] == [0, 1, 2, 3]
    assert launch["args"] == ["--tp", "4"]
    assert launch["custom_all_reduce"] is True
    assert launch["env"] == {}
    assert launch["p2p"] == {"state": "proven", "pairs": {"proven": 6, "claimed": 0, "unknown": 0, "absent": 0,
                                                          "failed": 0}}
    assert result["summary"] == ("pass: Llama-3-70B-Instruct with --tp 4 on GPUs 0,1,2,3; custom all-reduce on "
                                 "(P2P proven)")


def test_h100_lets_sglang_check_p2p_when_it_is_only_claimed():
    # An NVLink mesh at TP 4: custom all-reduce can run there, so SGLang tests CUDA IPC itself rather than
    # the gate turning it off (before, only two GPUs got --enable-p2p-check).
    result = gate.decide(audit(H100), LLAMA70)
    assert result["verdict"] == "pass"
    launch = result["launch"]
    assert launch["args"] == ["--tp", "4", "--enable-p2p-check"]
    assert launch["custom_all_reduce"] is None and launch["all_reduce"]["p2p_check"] == "cuda_ipc"
    assert launch["env"] == {}  # NCCL keeps its own P2P detection
    assert launch["p2p"]["state"] == "claimed"
    assert any(n.startswith("P2P between the 4 chosen GPUs is claimed by the driver but not proven: "
                            "--enable-p2p-check added") for n in result["notes"])
    assert not any("stays off. Run gpu_p2p_probe" in n for n in result["notes"])


def test_pcie_gpus_above_two_keep_custom_all_reduce_off_when_p2p_is_only_claimed():
    result = gate.decide(audit(PRO6000), {**LLAMA70, "tensor_parallel_size": 4})
    launch = result["launch"]
    assert launch["p2p"]["state"] == "claimed" and launch["tensor_parallel_size"] == 4
    assert launch["args"][-1] == "--disable-custom-all-reduce"
    assert ("P2P is claimed by the driver between every pair of the chosen GPUs but not proven: custom all-reduce "
            "stays off. Run gpu_p2p_probe and pass its result as probe to turn it on.") in result["notes"]


def test_a_probe_of_some_gpus_maps_its_indexes_through_visible_devices():
    # Probed with CUDA_VISIBLE_DEVICES=4,5,6,7: its GPU0..3 are the host's GPU4..7.
    result = gate.decide(audit(H100), LLAMA70, probe=probe_result(4, visible="4,5,6,7"))
    assert result["launch"]["gpus"] == [4, 5, 6, 7]
    assert result["launch"]["custom_all_reduce"] is True


def test_probe_failure_steers_the_group_away_from_the_failing_pair():
    # GPU1 -> GPU2 reads zeros: the NUMA-0 group would include that pair, so the other node's GPUs serve.
    probe = probe_result(8, failing=((1, 2),))
    result = gate.decide(audit(H100), LLAMA70, probe=probe)
    assert result["verdict"] == "pass"
    assert result["launch"]["gpus"] == [4, 5, 6, 7]
    assert result["launch"]["custom_all_reduce"] is True
    assert [(r["id"], r["source"], r["resolved_by"]) for r in result["resolved"]] == [
        ("p2p_write_not_arriving", "probe", "the chosen GPUs include none of the pairs it names")]


def test_probe_failure_inside_the_group_blocks():
    probe = probe_result(8, failing=((1, 2),))
    result = gate.decide(audit(H100), {**LLAMA70, "tensor_parallel_size": 8}, probe=probe)
    assert result["verdict"] == "block"
    assert ids(result["reasons"]) == ["p2p_not_supported", "p2p_write_not_arriving"]
    assert result["reasons"][0]["evidence"]["pairs_failed_probe"] == ["GPU1-GPU2"]
    assert result["launch"]["env"] == {"NCCL_P2P_DISABLE": "1"}
    assert result["launch"]["p2p"]["pairs"] == {"proven": 27, "claimed": 0, "unknown": 0, "absent": 0, "failed": 1}


@pytest.mark.parametrize(("nodes", "expected"), [
    ([0, 0, 0, 0, 1, 1, 1, 1], [0, 1, 2, 3]),
    ([0, 1, 0, 1, 0, 1, 0, 1], [0, 2, 4, 6]),
    # Synthetic layouts where only one set of four shares a node (ties go to the lowest indexes).
    ([1, 0, 0, 0, 0, 1, 1, 2], [1, 2, 3, 4]),
    ([1, 1, 1, 0, 0, 0, 0, 2], [3, 4, 5, 6]),
])
def test_auto_picks_four_gpus_of_one_numa_node(nodes, expected):
    result = gate.decide(set_numa(audit(H100), nodes), LLAMA70, probe=probe_result(8))
    assert result["launch"]["tensor_parallel_size"] == 4
    assert result["launch"]["gpus"] == expected


def test_auto_prefers_the_nearer_pair_in_the_topology():
    facts_ = audit(PRO6000)
    # GPU0-GPU1 share a host bridge (PHB) on this host, as do 2-3, 4-5, 6-7; move 0-1 apart.
    facts_["topology"]["matrix"][0][1] = facts_["topology"]["matrix"][1][0] = "NODE"
    model = {"name": "Qwen-72B", "family": "qwen", "weights_gib": 100}
    result = gate.decide(facts_, model)
    assert result["launch"]["gpus"] == [2, 3]


def test_auto_prefers_gpus_the_driver_lets_peer():
    facts_ = audit(RTX4090)
    read = facts_["p2p"]["read"]
    read[2][3] = read[3][2] = "OK"
    facts_["findings"] = engine.evaluate(facts_)
    model = {"name": "Qwen-14B", "family": "qwen", "weights_gib": 28}
    result = gate.decide(facts_, model)
    assert result["verdict"] == "pass"
    assert result["launch"]["gpus"] == [2, 3]
    # Two GPUs with P2P only claimed: SGLang tests CUDA IPC itself before it uses custom all-reduce.
    assert result["launch"]["args"] == ["--tp", "2", "--enable-p2p-check"]
    assert ("consumer_p2p_unproven", "audit") in [(w["id"], w["source"]) for w in result["other_findings"]]


def test_attention_heads_limit_the_sizes_auto_tries():
    # 403 GiB needs all eight H100s; with 20 attention heads a group of 8 cannot split them.
    model = {"name": "Odd-Heads", "weights_gib": 403, "attention_heads": 64}
    assert gate.decide(audit(H100), model)["launch"]["tensor_parallel_size"] == 8
    result = gate.decide(audit(H100), {**model, "attention_heads": 20})
    assert ids(result["reasons"]) == ["not_enough_gpu_memory"]
    assert result["reasons"][0]["evidence"]["sizes_tried"] == [1, 2, 4]


# ---------------------------------------------------------------------------
# Blocks


def test_no_gpu_machine_blocks_with_a_clear_reason():
    result = gate.decide(audit(MICROVM), GLM5)
    assert result["verdict"] == "block"
    assert ids(result["reasons"]) == ["no_usable_gpu", "no_nvidia_gpu"]
    assert result["reasons"][0]["summary"] == ("No GPU this host can use: neither the PCI bus nor the driver shows an "
                                               "NVIDIA GPU.")
    assert result["launch"]["tensor_parallel_size"] is None
    assert result["launch"]["args"] == []


def test_hypervisor_with_gpus_bound_to_vfio_blocks():
    result = gate.decide(audit(HYPERVISOR), GLM5)
    assert ids(result["reasons"]) == ["no_usable_gpu"]
    assert result["reasons"][0]["summary"] == ("No GPU this host can use: 4 NVIDIA GPU(s) are bound to vfio-pci (a "
                                               "hypervisor passing them to VMs).")


def test_i440fx_guest_blocks_on_its_machine_type_even_with_p2p_accepted():
    model = {"name": "Llama-3-8B", "family": "llama-3-8b", "weights_gib": 15, "tensor_parallel_size": 2}
    result = gate.decide(audit(I440FX), model, accept=["p2p_not_supported"])
    assert ids(result["reasons"]) == ["qemu_machine_i440fx"]
    assert result["reasons"][0]["source"] == "audit"
    assert result["reasons"][0]["remedy"].endswith("To deploy anyway, accept qemu_machine_i440fx.")


def test_not_enough_memory_names_the_numbers():
    result = gate.decide(audit(RTX4090), {**GLM5, "min_driver": None, "min_cuda": None})
    reason = result["reasons"][0]
    assert reason["id"] == "not_enough_gpu_memory"
    assert reason["evidence"]["sizes_tried"] == [1, 2, 4]
    assert reason["evidence"]["largest_group"] == [0, 1, 2, 3]
    assert reason["evidence"]["need_gib_per_gpu"] == 105.55
    assert reason["evidence"]["have_gib_per_gpu"] == 23.99
    assert reason["summary"] == ("GLM-5-NVFP4 does not fit: at tensor-parallel size 4 each GPU would need 105.55 GiB "
                                 "(weights, KV cache, headroom) and has 23.99 GiB.")


@pytest.mark.parametrize(("tp", "reason_id", "summary"), [
    (16, "tensor_parallel_unsatisfiable", "Llama-3-70B-Instruct asks for tensor_parallel_size 16; this host has 8 "
                                          "usable GPU(s)."),
    (3, "tensor_parallel_unsatisfiable", "tensor_parallel_size 3 does not divide the model's 64 attention heads; "
                                         "SGLang refuses to start."),
    (2, "not_enough_gpu_memory", "Llama-3-70B-Instruct does not fit: at tensor-parallel size 2 each GPU would need "
                                 "81.68 GiB (weights, KV cache, headroom) and has 79.65 GiB."),
])
def test_explicit_tensor_parallel_size_the_host_cannot_satisfy(tp, reason_id, summary):
    result = gate.decide(audit(H100), {**LLAMA70, "tensor_parallel_size": tp})
    assert [(r["id"], r["summary"]) for r in result["reasons"]] == [(reason_id, summary)]


def test_min_gpus_above_the_host():
    result = gate.decide(audit(I440FX), {"name": "Big", "min_gpus": 4})
    assert [(r["id"], r["source"]) for r in result["reasons"]] == [
        ("not_enough_gpus", "gate"), ("p2p_not_supported", "audit"), ("qemu_machine_i440fx", "audit")]
    assert result["reasons"][0]["summary"] == "Big asks for min_gpus 4; this host has 2 usable GPU(s)."


def test_driver_and_cuda_too_old_compare_as_versions():
    result = gate.decide(audit(H100), {**LLAMA70, "min_driver": "570.10", "min_cuda": "12.8"}, probe=probe_result(8))
    assert [(r["id"], r["evidence"]) for r in result["reasons"]] == [
        ("driver_too_old", {"required": "570.10", "found": "550.127.05"}),
        ("cuda_too_old", {"required": "12.8", "found": "12.4"}),
    ]
    # 550.127.05 is newer than 550.54 (as text it would sort first).
    assert gate.decide(audit(H100), LLAMA70)["verdict"] == "pass"
    # The incident guest: driver 590.44.01, CUDA 13.1.
    assert gate.decide(audit(INCIDENT), {**GLM5, "min_driver": "580.95.05", "min_cuda": 13.1},
                       accept=["p2p_not_supported"])["verdict"] == "pass"


def test_unknown_cuda_version_blocks_unless_accepted():
    model = {"name": "Llama-3-8B", "weights_gib": 15, "min_cuda": "12.8"}
    result = gate.decide(audit(I440FX), model, accept=["p2p_not_supported", "qemu_machine_i440fx"])
    assert ids(result["reasons"]) == ["cuda_version_unknown"]
    result = gate.decide(audit(I440FX), model,
                         accept=["p2p_not_supported", "qemu_machine_i440fx", "cuda_version_unknown"])
    assert result["verdict"] == "pass"


@pytest.mark.parametrize(("minimum", "verdict"), [("8.9", "pass"), ("sm_89", "pass"), ("9.0", "block"),
                                                   (8.6, "pass"), ("sm_90a", "block")])
def test_compute_capability(minimum, verdict):
    facts_ = audit(RTX4090)
    read = facts_["p2p"]["read"]
    read[0][1] = read[1][0] = "OK"
    model = {"name": "Small", "weights_gib": 28, "min_compute_capability": minimum}
    result = gate.decide(facts_, model)
    assert result["verdict"] == verdict
    if verdict == "block":
        # No GPU qualifies, so no group is chosen and the audit's own P2P finding (all GPUs) stands too.
        assert ids(result["reasons"]) == ["compute_capability_too_low", "p2p_not_supported"]
        assert result["reasons"][0]["evidence"]["too_old"] == {"GPU0": "8.9", "GPU1": "8.9", "GPU2": "8.9",
                                                               "GPU3": "8.9"}


def test_a_too_old_driver_cannot_be_accepted():
    result = gate.decide(audit(H100), {**LLAMA70, "min_driver": "570"}, accept=["driver_too_old"])
    assert ids(result["reasons"]) == ["driver_too_old"]
    assert result["accepted"] == []


def test_accepting_an_id_that_matches_nothing_says_so():
    result = gate.decide(audit(H100), LLAMA70, accept=["p2p_not_suported"])
    assert result["verdict"] == "pass"
    assert ("accept lists p2p_not_suported, which matched no critical finding here (a typo, or a finding that is "
            "gone): nothing else was accepted") in result["notes"]


@pytest.mark.parametrize(("model", "message"), [
    ({"tensor_parallel_size": "eight"}, "model.tensor_parallel_size: expected a whole number of 1 or more; found "
                                        "'eight'"),
    ({"weights_gib": -3}, "model.weights_gib: expected a number above 0; found -3"),
    ({"min_driver": "r570"}, "model.min_driver: expected a version such as '570' or '12.8' (quote it in YAML); "
                             "found 'r570'"),
    ({"memory_headroom_fraction": 1.2}, "model.memory_headroom_fraction: expected a number at least 0 and below 1; "
                                        "found 1.2"),
    ({"kv_cache_fraction": 0.5, "memory_headroom_fraction": 0.5},
     "model: kv_cache_fraction (0.5) plus memory_headroom_fraction (0.5) leave nothing for the weights; lower them"),
    ("GLM-5", "model: expected a mapping (name, weights_gib, tensor_parallel_size, ...); found str"),
])
def test_invalid_models_block_with_what_is_wrong(model, message):
    result = gate.decide(audit(H100), model)
    assert result["verdict"] == "block"
    assert message in [r["summary"] for r in result["reasons"] if r["id"] == "model_invalid"]


def test_params_estimate_weights_with_a_note():
    result = gate.decide(audit(H100), {"name": "Llama-3-70B", "params_b": 70.6, "attention_heads": 64})
    # 70.6e9 x 2 bytes = 131.5 GiB: TP4, as with weights_gib given.
    assert result["launch"]["tensor_parallel_size"] == 4
    assert any(n.startswith("weights estimated from params_b at 2 bytes per parameter") for n in result["notes"])


def test_without_weights_the_largest_size_is_chosen():
    result = gate.decide(audit(H100), {"name": "Unknown-size", "attention_heads": 64})
    assert result["launch"]["tensor_parallel_size"] == 8
    assert result["launch"]["memory"]["need_gib_per_gpu"] is None


def test_missing_audit_blocks():
    result = gate.decide(None, GLM5)
    assert ids(result["reasons"]) == ["audit_missing"]


# ---------------------------------------------------------------------------
# Versions, compared as numbers


@pytest.mark.parametrize(("older", "newer"), [
    ("570.10", "580.95.05"),
    ("550.54", "550.127.05"),
    ("12.8", "13.1"),
    ("12.8", "12.10"),
    ("0.5.9", "0.5.10"),
    ("0.5.10.dev3", "0.5.10a1"),
    ("0.5.10a1", "0.5.10rc1"),
    ("0.5.10rc1", "0.5.10"),
    ("0.5.10", "0.5.10.post1"),
    ("0.5.10+cu128", "0.5.11"),
])
def test_version_order(older, newer):
    assert versions.compare(older, newer) == -1
    assert versions.compare(newer, older) == 1
    assert versions.at_least(newer, older) is True
    assert versions.at_least(older, newer) is False


def test_equal_versions_and_unreadable_ones():
    assert versions.compare("12.0", "12") == 0
    assert versions.compare("v0.5.9", "0.5.9") == 0
    assert versions.compare("N/A", "12.8") is None
    assert versions.at_least(None, "570") is None
    assert versions.compare(12.8, "12.8") == 0


@pytest.mark.parametrize(("value", "expected"), [
    ("12.0", (12, 0)), ("8.9", (8, 9)), (9.0, (9, 0)), ("sm_120", (12, 0)), ("sm_90a", (9, 0)), ("SM89", (8, 9)),
    ("sm_100", (10, 0)), ("ampere", None), (None, None), (True, None),
])
def test_compute_capability_forms(value, expected):
    assert versions.compute_capability(value) == expected


@pytest.mark.parametrize(("version", "spec", "expected"), [
    ("0.5.11", "<0.5.12", True),
    ("0.5.12", "<0.5.12", False),
    ("0.5.9", ">=0.5.6,<0.5.12", True),
    ("0.5.5", ">=0.5.6,<0.5.12", False),
    ("0.5.9", "0.5.*", True),
    ("0.6.0", "0.5.*", False),
    ("1.0.3", "1.0.*", True),
    ("1.1", "1.0.*", False),
    ("0.5.9", ["==0.5.8", "==0.5.9"], True),
    ("0.5.9", "~=0.5.6", True),
    ("0.6.0", "~=0.5.6", False),
    ("0.5.9", None, True),
    ("0.5.9", "*", True),
    ("0.5.9", "!=0.5.9", False),
    ("garbage", "<0.5.12", None),
    ("0.5.9", "<<0.5", None),
])
def test_version_specifiers(version, spec, expected):
    assert versions.matches(version, spec) is expected


# ---------------------------------------------------------------------------
# The module


def test_argument_spec_matches_documentation():
    documented = yaml.safe_load(deploy_gate.DOCUMENTATION)["options"]
    spec = deploy_gate.get_argument_spec()
    assert set(documented) == set(spec)
    for name, option in spec.items():
        assert documented[name]["type"] == option["type"], name
        assert documented[name].get("default") == option.get("default"), name
        assert documented[name].get("required", False) == option.get("required", False), name


def test_module_returns_the_verdict_in_check_mode(capsys):
    result = run_module(deploy_gate.main, {"audit": audit(INCIDENT), "model": GLM5, "accept": ["p2p_not_supported"],
                                           "sglang_version": "0.5.9"}, capsys, check_mode=True)
    assert result["changed"] is False
    assert not result.get("failed")
    assert result["verdict"] == "pass"
    assert result["launch"]["args"] == INCIDENT_FLAGS
    assert result["msg"] == result["summary"]


def test_module_fails_on_block_when_asked(capsys):
    result = run_module(deploy_gate.main, {"audit": audit(INCIDENT), "model": GLM5, "fail_on_block": True}, capsys)
    assert result["failed"] is True
    assert result["verdict"] == "block"
    assert result["msg"].startswith("block: GLM-5-NVFP4 must not be deployed here (1 reason(s): p2p_not_supported): "
                                    "No working GPU peer-to-peer")


def test_module_blocks_without_failing_by_default(capsys):
    result = run_module(deploy_gate.main, {"audit": audit(MICROVM), "model": GLM5}, capsys)
    assert not result.get("failed")
    assert result["verdict"] == "block"


# ---------------------------------------------------------------------------
# Whatever the facts, a verdict


JUNK = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-10, max_value=10**6)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8)
    | st.sampled_from(["OK", "NS", "NV18", "PHB", "SYS", "X", "12.0", "sm_120", "gpu", "critical", "p2p_not_supported",
                       "580.95.05", "auto", "glm-5", "0,1"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=16,
)
MODEL_KEYS = ["name", "family", "path", "weights_gib", "params_b", "bytes_per_param", "min_gpus",
              "tensor_parallel_size", "min_compute_capability", "min_driver", "min_cuda", "kv_cache_gib_per_gpu",
              "kv_cache_fraction", "memory_headroom_fraction", "attention_heads", "layers", "hidden_size",
              "shape", "comm_profile"]
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_verdict(result: dict[str, Any]) -> None:
    assert result["verdict"] in ("pass", "block")
    assert (result["verdict"] == "block") == bool(result["reasons"])
    assert all(isinstance(r["id"], str) and r["summary"] for r in result["reasons"])
    if result["verdict"] == "pass":
        size = result["launch"]["tensor_parallel_size"]
        assert isinstance(size, int) and size >= 1
        assert result["launch"]["args"][:2] == ["--tp", str(size)]
    json.dumps(result)  # an Ansible result must serialise


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value[:3]):
            found.extend(_paths(child, (*prefix, index)))
    return found


@PROPERTY
@given(audit_=JUNK, model=JUNK, bench=JUNK, probe=JUNK, accept=JUNK, version=JUNK, overrides=JUNK)
def test_any_input_gets_a_verdict(audit_, model, bench, probe, accept, version, overrides):
    check_verdict(gate.decide(audit_, model, bench=bench, probe=probe, accept=accept, sglang_version=version,
                              known_good_overrides=overrides))


@PROPERTY
@given(name=st.sampled_from(ALL), data=st.data())
def test_damaged_real_facts_get_a_verdict(name, data):
    facts_ = audit(name)
    for path in data.draw(st.lists(st.sampled_from(_paths({k: facts_[k] for k in ("gpus", "p2p", "topology", "pci",
                                                                                   "findings") if k in facts_})),
                                   max_size=6)):
        parent = facts_
        try:
            for key in path[:-1]:
                parent = parent[key]
            if data.draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = data.draw(JUNK)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change removed or replaced this path
    model = data.draw(st.fixed_dictionaries({}, optional={key: JUNK for key in MODEL_KEYS}))
    probe = probe_result(8) if data.draw(st.booleans()) else data.draw(JUNK)
    check_verdict(gate.decide(facts_, model, probe=probe, accept=data.draw(JUNK)))


@PROPERTY
@given(model=st.fixed_dictionaries({}, optional={
    "weights_gib": st.floats(min_value=0.1, max_value=2000), "tensor_parallel_size": st.sampled_from(["auto", 1, 2, 4,
                                                                                                      8, 16, 3]),
    "attention_heads": st.integers(min_value=1, max_value=128), "min_gpus": st.integers(min_value=1, max_value=10),
    "kv_cache_fraction": st.floats(min_value=0, max_value=0.5)}),
    name=st.sampled_from(ALL))
def test_a_pass_always_fits_and_divides(model, name):
    result = gate.decide(audit(name), model, accept=["p2p_not_supported", "qemu_machine_i440fx"])
    check_verdict(result)
    if result["verdict"] == "pass":
        size = result["launch"]["tensor_parallel_size"]
        assert result["launch"]["memory"]["fits"] is True
        assert size >= model.get("min_gpus", 1)
        assert "attention_heads" not in model or model["attention_heads"] % size == 0
        assert len(set(result["launch"]["gpus"])) == size


def test_facts_are_not_changed_by_the_gate():
    facts_ = audit(INCIDENT)
    before = copy.deepcopy(facts_)
    gate.decide(facts_, GLM5, probe=probe_result(8), bench=bench_result(INCIDENT_BENCH))
    assert facts_ == before
