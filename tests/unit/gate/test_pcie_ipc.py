"""SGLang's opt-in FlashInfer PCIe IPC all-reduce (0.5.21 on: device_communicators/pcie_ipc_ar.py, world sizes
2, 4, 8, SGLANG_ENABLE_PCIE_IPC_ALLREDUCE, no P2P check of its own; parallel_state.py tries it after the custom
all-reduce, whatever --disable-custom-all-reduce): modelled as a path, recommended only where the probe proved
P2P, never set where it did not."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.all_reduce import PCIE_IPC_ENV, sglang_all_reduce

from tests.unit.captures import H100, INCIDENT, PRO6000, audited
from tests.unit.gate.test_gate import GLM5, LLAMA70, probe_result

ON = {PCIE_IPC_ENV: "1"}


@pytest.mark.parametrize(("version", "tp", "path"), [
    ("0.5.21", 8, "pcie_ipc"), ("0.5.23", 4, "pcie_ipc"), ("0.5.23", 2, "custom"),
    ("0.5.23", 6, "nccl"), ("0.5.20", 8, "nccl"), ("0.5.10.post1", 8, "nccl"),
])
def test_the_pcie_ipc_path_where_sglang_runs_it(version, tp, path):
    result = sglang_all_reduce(tp, False, "proven", [], version, ON)
    assert result["path"] == path, result["reason"]


def test_it_runs_even_with_custom_all_reduce_disabled_and_says_when_p2p_is_not_proven():
    result = sglang_all_reduce(8, False, "none", ["--disable-custom-all-reduce"], "0.5.23", ON)
    assert result["path"] == "pcie_ipc" and result["off_by"] == "flag"
    assert "not proven" in result["reason"] and "checks no P2P itself" in result["reason"]


def test_recommended_for_pcie_gpus_with_proven_p2p_and_applied_only_when_asked():
    facts = audited(PRO6000)
    result = gate.decide(facts, GLM5, probe=probe_result(8), sglang_version="0.5.23")
    ipc = result["launch"]["pcie_ipc"]
    assert ipc["available"] and ipc["recommended"] and not ipc["applied"]
    assert PCIE_IPC_ENV not in result["launch"]["env"]
    assert result["launch"]["all_reduce"]["path"] == "nccl"
    assert any(n.startswith("Recommended: SGLang's opt-in PCIe IPC all-reduce") for n in result["notes"])
    applied = gate.decide(facts, GLM5, probe=probe_result(8), sglang_version="0.5.23", pcie_ipc_all_reduce=True)
    assert applied["launch"]["pcie_ipc"]["applied"] is True
    assert applied["launch"]["env"][PCIE_IPC_ENV] == "1"
    assert applied["launch"]["all_reduce"]["path"] == "pcie_ipc"
    assert applied["launch"]["communication_ceiling_basis"] in (None, "nccl_lower_bound")
    assert "PCIe IPC all-reduce" in applied["summary"]


@pytest.mark.parametrize(("capture", "probe", "version", "words"), [
    (PRO6000, None, "0.5.23", "not proven by the probe"),  # P2P only claimed
    (INCIDENT, None, "0.5.23", "not proven by the probe"),  # no P2P at all
    (PRO6000, 8, "0.5.20", "has no PCIe IPC all-reduce"),
    (PRO6000, 8, None, "version is not given"),
])
def test_never_set_where_it_is_not_recommended_even_when_asked(capture, probe, version, words):
    result = gate.decide(audited(capture), GLM5, probe=probe_result(probe) if probe else None,
                         sglang_version=version, accept=["p2p_not_supported"], pcie_ipc_all_reduce=True)
    ipc = result["launch"]["pcie_ipc"]
    assert ipc["recommended"] is False and ipc["applied"] is False and words in ipc["why"]
    assert PCIE_IPC_ENV not in result["launch"]["env"]
    assert result["launch"]["all_reduce"]["path"] != "pcie_ipc"
    assert any(n.startswith("pcie_ipc_all_reduce asked for, not applied") for n in result["notes"])


def test_an_nvlink_mesh_keeps_the_custom_all_reduce():
    result = gate.decide(audited(H100), LLAMA70, probe=probe_result(8), sglang_version="0.5.23",
                         pcie_ipc_all_reduce=True)
    assert result["launch"]["pcie_ipc"]["recommended"] is False and "NVLink" in result["launch"]["pcie_ipc"]["why"]


def test_a_benchmark_environment_that_sets_it_without_proof_loses_it():
    from tests.unit.gate.test_gate import INCIDENT_BENCH, bench_result

    bench = bench_result(INCIDENT_BENCH)
    bench["recommended_env"] = {**(bench.get("recommended_env") or {}), PCIE_IPC_ENV: "1"}
    result = gate.decide(audited(INCIDENT), GLM5, bench=bench, sglang_version="0.5.23", accept=["p2p_not_supported"])
    assert PCIE_IPC_ENV not in result["launch"]["env"]
    assert any(n.startswith(f"{PCIE_IPC_ENV} from the benchmark's environment is left out") for n in result["notes"])
