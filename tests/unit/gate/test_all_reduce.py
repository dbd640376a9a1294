"""Which all-reduce SGLang really runs: its custom all-reduce or NCCL, as SGLang decides it, and what the gate
reports from that (the launch's flags, its summary, the communication ceiling).

SGLang's rule (python/sglang/srt/distributed/device_communicators/custom_all_reduce.py, from vLLM's): world
sizes 2, 4, 6 and 8 only; above 2 GPUs every pair must be on NVLink (NVML's NVLink P2P status); with 2 GPUs
over PCIe P2P must work, which SGLang does not check at all unless --enable-p2p-check makes it test CUDA IPC
(monkey_patch_p2p_access_check, utils/common.py of 0.5.10.post1 and 0.5.23); only SGLANG_SKIP_P2P_CHECK=1 makes it
ask the driver (can_p2p, custom_all_reduce_utils.py).
"""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.all_reduce import (
    RULES,
    nvlink_mesh,
    rule_for,
    sglang_all_reduce,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import read_host

from tests.unit.captures import ALL, H100, INCIDENT, PRO6000, audited
from tests.unit.gate.test_gate import GLM5, INCIDENT_BENCH, LLAMA70, bench_result, probe_result, row

# A dense 70B model in FP8 on two GPUs.
LLAMA70_TP2 = {"name": "Llama-3-70B-Instruct-FP8", "family": "llama-3-70b", "weights_gib": 70,
               "tensor_parallel_size": 2, "attention_heads": 64}


@pytest.mark.parametrize(("tp", "mesh", "p2p", "flags", "path", "off_by", "words"), [
    (8, False, "proven", [], "nccl", "sglang", "NVLink"),
    (4, True, "proven", [], "custom", None, "NVLink"),
    (8, True, "claimed", [], "custom", None, "asks nobody"),
    (2, False, "proven", [], "custom", None, "2 GPUs"),
    (2, False, "claimed", [], "custom", None, "nobody proved it"),
    (2, False, "claimed", ["--enable-p2p-check"], None, None, "CUDA IPC"),
    (2, False, "proven", ["--enable-p2p-check"], "custom", None, "CUDA IPC"),
    # Without --enable-p2p-check SGLang asks nobody: it tries its custom all-reduce even without P2P.
    (2, False, "none", [], "custom", None, "asks nobody"),
    (2, None, "unknown", [], "custom", None, "asks nobody"),
    (8, True, "proven", ["--disable-custom-all-reduce"], "nccl", "flag", "--disable-custom-all-reduce"),
    (3, True, "proven", [], "nccl", "sglang", "2, 4, 6 and 8"),
    (16, True, "proven", [], "nccl", "sglang", "2, 4, 6 and 8"),
    (4, None, "proven", [], None, None, "NVLink"),
])
def test_sglang_picks_its_all_reduce(tp, mesh, p2p, flags, path, off_by, words):
    result = sglang_all_reduce(tp, mesh, p2p, flags, "0.5.10.post1")
    assert (result["path"], result["off_by"]) == (path, off_by), result["reason"]
    assert words in result["reason"]
    assert result["rule"] == RULES[-1]["id"] == "sglang-custom-ar-vllm-derived"


@pytest.mark.parametrize(("p2p", "flags", "path", "off_by"), [
    ("none", [], "nccl", "sglang"),
    ("claimed", [], "custom", None),
    ("unknown", [], None, None),
    # The variable is read before the CUDA IPC test in can_p2p: the driver is asked even with the flag.
    ("none", ["--enable-p2p-check"], "nccl", "sglang"),
])
def test_only_sglang_skip_p2p_check_asks_the_driver(p2p, flags, path, off_by):
    result = sglang_all_reduce(2, False, p2p, flags, "0.5.23", {"SGLANG_SKIP_P2P_CHECK": "1"})
    assert (result["path"], result["off_by"], result["p2p_check"]) == (path, off_by, "driver")
    assert "SGLANG_SKIP_P2P_CHECK=1" in result["reason"]


@pytest.mark.parametrize(("flags", "env", "kind"), [
    ([], None, "assumed"),
    ([], {"SGLANG_SKIP_P2P_CHECK": "0"}, "assumed"),
    (["--enable-p2p-check"], {}, "cuda_ipc"),
    ([], {"SGLANG_SKIP_P2P_CHECK": "1"}, "driver"),
])
def test_the_p2p_check_is_named_as_sglang_runs_it(flags, env, kind):
    assert sglang_all_reduce(2, False, "claimed", flags, "0.5.10.post1", env)["p2p_check"] == kind


def test_without_the_p2p_check_missing_p2p_is_not_a_fallback_but_a_failure():
    result = sglang_all_reduce(2, False, "none", [], "0.5.10.post1")
    assert result["p2p_check"] == "assumed"
    assert "fails" in result["reason"] and "--disable-custom-all-reduce" in result["reason"]
    assert "driver grants no P2P" in result["reason"]


# Custom all-reduce v2 (0.5.12 on): NVLink only, 16 MiB; 0.5.12 has no fallback on PCIe, later ones fall back to
# the legacy one (8 MiB, 2 PCIe GPUs). custom_all_reduce.py dispatch_custom_allreduce, custom_all_reduce_v2.py.
@pytest.mark.parametrize(("version", "tp", "mesh", "path", "words"), [
    ("0.5.10.post1", 8, True, "custom", "up to 8 MiB"),
    ("0.5.12", 8, True, "custom", "up to 16 MiB"),
    ("0.5.23", 8, True, "custom", "up to 16 MiB"),
    ("0.5.23", 16, True, "custom", "up to 16 MiB"),
    ("0.5.13", 16, True, "nccl", "2 to 8 GPUs only"),
    ("0.5.10.post1", 16, True, "nccl", "2, 4, 6 and 8"),
    ("0.5.12", 2, False, "nccl", "no fallback"),
    ("0.5.13", 2, False, "custom", "up to 8 MiB"),
    ("0.5.23", 2, False, "custom", "up to 8 MiB"),
    ("0.5.23", 2, None, "custom", "16 MiB with its v2 if NVLink"),
    ("0.5.12", 2, None, None, "unknown"),
])
def test_custom_all_reduce_v2_per_release(version, tp, mesh, path, words):
    result = sglang_all_reduce(tp, mesh, "proven", [], version)
    assert result["path"] == path, result["reason"]
    assert words in result["reason"]


def test_the_legacy_custom_all_reduce_comes_back_with_v2_switched_off():
    result = sglang_all_reduce(8, True, "proven", [], "0.5.23", {"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"})
    assert result["path"] == "custom" and "up to 8 MiB" in result["reason"]


def test_one_gpu_reduces_nothing():
    result = sglang_all_reduce(1, None, "n/a", [], None)
    assert result["path"] is None and result["off_by"] is None
    assert "nothing is all-reduced" in result["reason"]


def test_the_rule_is_kept_per_sglang_version():
    rule, note = rule_for("0.5.10.post1")
    assert rule["world_sizes"] == (2, 4, 6, 8) and note is None and rule["v2"] is None
    assert rule_for("0.5.12")[0]["v2"]["pcie_fallback"] is False
    assert rule_for("0.5.23")[0]["v2"] == {"world_sizes": tuple(range(2, 17)), "max_message_mib": 16,
                                           "pcie_fallback": True}
    assert "custom_all_reduce.py" in rule["source"] and "vLLM" in rule["source"]
    rule, note = rule_for("0.1.9")
    assert rule is RULES[-1] and note is not None and "0.1.9" in note
    assert rule_for(None)[1] is None


def test_nvlink_mesh_from_nvml_then_the_topology_never_assumed():
    h100, pro = read_host(audited(H100)), read_host(audited(PRO6000))
    assert nvlink_mesh(h100, [0, 1, 2, 3]) == (True, {"nvlink": 6, "pcie": 0, "unknown": 0})
    assert nvlink_mesh(pro, list(range(8))) == (False, {"nvlink": 0, "pcie": 28, "unknown": 0})
    # Without NVML's NVLink matrix, the topology's NV# cells tell.
    facts = audited(H100)
    del facts["p2p"]["nvlink"]
    assert nvlink_mesh(read_host(facts), [0, 1, 2, 3])[0] is True
    facts["topology"]["matrix"][0][1] = facts["topology"]["matrix"][1][0] = "SYS"
    assert nvlink_mesh(read_host(facts), [0, 1, 2, 3]) == (False, {"nvlink": 5, "pcie": 1, "unknown": 0})
    # With neither, nothing is known: null, not "no NVLink".
    del facts["topology"]["matrix"]
    assert nvlink_mesh(read_host(facts), [0, 1, 2, 3]) == (None, {"nvlink": 0, "pcie": 0, "unknown": 6})


# ---------------------------------------------------------------------------
# The gate follows the path that runs


def test_pro6000_at_tp8_runs_nccl_because_sglang_turns_custom_all_reduce_off():
    result = gate.decide(audited(PRO6000), GLM5, probe=probe_result(8), sglang_version="0.5.10.post1")
    assert result["verdict"] == "pass"
    launch = result["launch"]
    assert launch["p2p"]["state"] == "proven"
    # P2P is proven, so the gate has no reason to forbid it; SGLang switches it off by itself. (No backend flag:
    # 0.5.10.post1 runs trtllm on SM120 by default, known_good.py.)
    assert launch["args"] == ["--tp", "8"]
    assert launch["custom_all_reduce"] is False
    assert launch["all_reduce"]["path"] == "nccl" and launch["all_reduce"]["off_by"] == "sglang"
    assert launch["all_reduce"]["nvlink_mesh"] is False
    assert "custom all-reduce on" not in result["summary"]
    assert ("custom all-reduce off (SGLang turns it off: 8 GPUs without an NVLink mesh); NCCL does every "
            "all-reduce") in result["summary"]


def test_h100_with_proven_p2p_runs_custom_all_reduce():
    result = gate.decide(audited(H100), LLAMA70, probe=probe_result(8))
    launch = result["launch"]
    assert launch["custom_all_reduce"] is True
    assert launch["all_reduce"]["path"] == "custom" and launch["all_reduce"]["nvlink_mesh"] is True
    assert result["summary"].endswith("custom all-reduce on (P2P proven)")


def test_the_incident_guest_keeps_the_flag_where_p2p_is_missing():
    result = gate.decide(audited(INCIDENT), GLM5, accept=["p2p_not_supported"], sglang_version="0.5.9")
    launch = result["launch"]
    assert launch["args"][-1] == "--disable-custom-all-reduce"
    assert launch["all_reduce"]["path"] == "nccl" and launch["all_reduce"]["off_by"] == "flag"


def test_two_pcie_gpus_with_p2p_claimed_not_proven_let_sglang_check_it():
    result = gate.decide(audited(PRO6000), LLAMA70_TP2)
    assert result["verdict"] == "pass"
    launch = result["launch"]
    assert launch["p2p"]["state"] == "claimed"
    assert launch["args"] == ["--tp", "2", "--enable-p2p-check"]
    assert launch["custom_all_reduce"] is None
    assert launch["all_reduce"]["path"] is None and launch["all_reduce"]["p2p_check"] == "cuda_ipc"
    assert any(note.startswith("P2P between the 2 chosen GPUs is claimed by the driver but not proven: "
                               "--enable-p2p-check added") for note in result["notes"])
    assert "if SGLang's own P2P check passes" in result["summary"]


def test_an_nvlink_mesh_above_two_gpus_with_p2p_only_claimed_gets_sglangs_own_check():
    result = gate.decide(audited(H100), LLAMA70)
    assert result["launch"]["args"] == ["--tp", "4", "--enable-p2p-check"]
    assert result["launch"]["all_reduce"]["path"] is None and result["launch"]["all_reduce"]["p2p_check"] == "cuda_ipc"


def test_an_unknown_nvlink_mesh_is_said_not_assumed():
    facts = audited(H100)
    del facts["p2p"]["nvlink"]
    del facts["topology"]["matrix"]
    result = gate.decide(facts, LLAMA70, probe=probe_result(8))
    launch = result["launch"]
    assert launch["args"] == ["--tp", "4"]
    assert launch["custom_all_reduce"] is None and launch["all_reduce"]["path"] is None
    assert launch["all_reduce"]["nvlink_mesh"] is None
    assert any("NVLink" in note and "unknown" in note for note in result["notes"])


def test_the_communication_ceiling_says_which_path_it_prices():
    bench = bench_result(INCIDENT_BENCH)
    nccl = gate.decide(audited(INCIDENT), GLM5, bench=bench, accept=["p2p_not_supported"])["launch"]
    assert nccl["communication_ceiling_tok_s"] == 464.9 and nccl["communication_ceiling_basis"] == "nccl"
    h100_bench = bench_result([("as-is", {}, "ok", [row(8192, 8.0), row(16384, 8.0)])], nranks=4)
    custom = gate.decide(audited(H100), LLAMA70, bench=h100_bench, probe=probe_result(8))
    assert custom["launch"]["communication_ceiling_basis"] == "nccl_lower_bound"
    assert any("lower bound" in note for note in custom["notes"])
    assert gate.decide(audited(H100), LLAMA70, probe=probe_result(8))["launch"]["communication_ceiling_basis"] is None


@pytest.mark.parametrize("capture", ALL)
@pytest.mark.parametrize("model", [GLM5, LLAMA70, LLAMA70_TP2], ids=["glm5", "llama70", "llama70-tp2"])
def test_the_gate_never_leaves_sglang_to_assume_p2p_nobody_proved(capture, model):
    result = gate.decide(audited(capture), model, accept=["p2p_not_supported"], sglang_version="0.5.23")
    found = result["launch"]["all_reduce"]
    if found and found["p2p_check"] == "assumed" and found["path"] == "custom":
        assert result["launch"]["p2p"]["state"] == "proven", found["reason"]
