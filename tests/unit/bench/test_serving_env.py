"""The benchmark measures NCCL with the environment SGLang gives it when it serves (entrypoints/engine.py
_set_envs_and_config, 0.5.10.post1 and 0.5.23), and the result and the report say which environment it was."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.serving_env import (
    ALWAYS,
    UNLESS_SET,
    as_served,
    describe,
)
from hypothesis import given
from hypothesis import strategies as st


def test_sglangs_variables_are_added_as_sglang_adds_them():
    run, served = as_served({"NCCL_P2P_DISABLE": "1"}, "sglang")
    assert run == {"NCCL_P2P_DISABLE": "1", "NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0",
                   "CUDA_DEVICE_MAX_CONNECTIONS": "8"}
    assert served["added"] == {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "8"}
    assert "engine.py" in served["source"]


def test_a_value_the_user_set_is_kept_except_the_one_sglang_overrides():
    run, served = as_served({"NCCL_CUMEM_ENABLE": "1", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}, "sglang")
    assert run["NCCL_CUMEM_ENABLE"] == "1" and run["CUDA_DEVICE_MAX_CONNECTIONS"] == "8"
    assert served["kept"] == {"NCCL_CUMEM_ENABLE": "1"}
    assert served["replaced"] == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert "over your 1" in describe(served)


def test_nccl_defaults_add_nothing_and_say_so():
    run, served = as_served({"NCCL_PROTO": "LL"}, "nccl-defaults")
    assert run == {"NCCL_PROTO": "LL"} and served["added"] == {}
    assert describe(served).startswith("Measured with NCCL's defaults")


def test_an_unknown_mode_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="sglang, nccl-defaults"):
        as_served({}, "vllm")


@given(st.dictionaries(st.sampled_from(["NCCL_CUMEM_ENABLE", "NCCL_NVLS_ENABLE", "CUDA_DEVICE_MAX_CONNECTIONS",
                                        "NCCL_PROTO"]), st.sampled_from(["0", "1", "8", "LL"])))
def test_every_run_env_is_what_sglang_would_leave(env):
    run, served = as_served(env, "sglang")
    for name, value in UNLESS_SET.items():
        assert run[name] == env.get(name, value)
    for name, value in ALWAYS.items():
        assert run[name] == value
    assert describe(served).startswith("Measured with the environment SGLang sets")


# ---------------------------------------------------------------------------
# Through the module: every sweep runs with it, the result says which, env and recommended_env stay deployable


def test_every_sweep_runs_with_sglangs_serving_environment(monkeypatch, capsys):
    import nccl_bench

    from tests.unit.bench.test_nccl_bench import fake_sweeps
    from tests.unit.modules import run_module

    calls = fake_sweeps(monkeypatch, {"": (12.0, 40.0), "p2p-off": (30.0, 30.0)})
    candidates = [{"name": "as-is", "env": {}}, {"name": "p2p-disabled", "env": {"NCCL_P2P_DISABLE": "1"}}]
    result = run_module(nccl_bench.main, {"engine": "torch-nccl", "python": "/usr/bin/python3", "tune": True,
                                          "candidates": candidates, "env": {"NCCL_NVLS_ENABLE": "1"}}, capsys)
    assert len(calls) == 2
    assert all(c["NCCL_CUMEM_ENABLE"] == "0" and c["CUDA_DEVICE_MAX_CONNECTIONS"] == "8" for c in calls)
    assert all(c["NCCL_NVLS_ENABLE"] == "1" for c in calls)  # set by the user: SGLang keeps it
    assert result["serving_env"]["mode"] == "sglang"
    assert result["serving_env"]["kept"] == {"NCCL_NVLS_ENABLE": "1"}
    assert "NCCL_CUMEM_ENABLE" not in result["env"] and "NCCL_CUMEM_ENABLE" not in result["recommended_env"]


def test_nccl_defaults_run_without_it_and_the_report_says_so(monkeypatch, capsys):
    import nccl_bench

    from tests.unit.bench.test_nccl_bench import fake_sweeps
    from tests.unit.modules import run_module

    calls = fake_sweeps(monkeypatch, {"": (12.0, 40.0)})
    result = run_module(nccl_bench.main, {"engine": "torch-nccl", "python": "/usr/bin/python3",
                                          "serving_env": "nccl-defaults"}, capsys)
    assert "NCCL_CUMEM_ENABLE" not in calls[0] and "CUDA_DEVICE_MAX_CONNECTIONS" not in calls[0]
    assert result["serving_env"]["mode"] == "nccl-defaults"


def test_the_report_says_which_environment_the_numbers_were_measured_with():
    from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import bench_markdown

    rows = [{"size_bytes": 16384, "count": 4096, "type": "float", "redop": "sum", "out_of_place": None,
             "in_place": {"time_us": 17.1, "algbw_gbps": 0.96, "busbw_gbps": 0.96, "wrong": 0}}]
    _run, served = as_served({}, "sglang")
    text = "\n".join(bench_markdown("h", {"nccl": {"engine": "torch-nccl", "nranks": 2, "results": rows,
                                                    "serving_env": served}}))
    assert "Measured with the environment SGLang sets when it serves: CUDA_DEVICE_MAX_CONNECTIONS=8" in text
    _run, served = as_served({}, "nccl-defaults")
    text = "\n".join(bench_markdown("h", {"nccl": {"engine": "torch-nccl", "nranks": 2, "results": rows,
                                                    "serving_env": served}}))
    assert "Measured with NCCL's defaults" in text


def test_the_gate_says_when_the_benchmark_measured_nccl_defaults():
    from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate

    from tests.unit.captures import INCIDENT, audited
    from tests.unit.gate.test_gate import GLM5, INCIDENT_BENCH, bench_result

    bench = bench_result(INCIDENT_BENCH)
    as_served_note = "measured NCCL with its defaults"
    result = gate.decide(audited(INCIDENT), GLM5, bench={**bench, "serving_env": as_served({}, "sglang")[1]},
                         accept=["p2p_not_supported"])
    assert not any(as_served_note in n for n in result["notes"])
    result = gate.decide(audited(INCIDENT), GLM5, bench={**bench, "serving_env": as_served({}, "nccl-defaults")[1]},
                         accept=["p2p_not_supported"])
    assert any(as_served_note in n for n in result["notes"])
