"""Gate reasons that the captured fleet does not trip, and the gate's policy by finding category."""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import CATALOG
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules import engine

from tests.unit.captures import PRO6000, RTX4090, audited

MODEL = {"name": "Llama-3-8B", "family": "llama-3-8b", "weights_gib": 15, "attention_heads": 32,
         "min_compute_capability": "8.0", "min_driver": "550.54", "min_cuda": "12.2", "tensor_parallel_size": 1}


def reasons(result: dict) -> dict[str, dict]:
    return {r["id"]: r for r in result["reasons"]}


def test_a_driver_version_the_audit_could_not_read_blocks_unless_accepted():
    facts = audited(PRO6000)
    facts["gpus"]["driver_version"] = None
    blocked = gate.decide(facts, MODEL)
    reason = reasons(blocked)["driver_version_unknown"]
    assert blocked["verdict"] == "block"
    assert reason["source"] == "gate" and reason["evidence"] == {"required": "550.54", "found": None}
    assert "accept driver_version_unknown" in reason["remedy"]
    accepted = gate.decide(facts, MODEL, accept=["driver_version_unknown"])
    assert accepted["verdict"] == "pass"
    assert [a["id"] for a in accepted["accepted"]] == ["driver_version_unknown"]


def test_a_driver_version_that_is_no_version_says_so():
    facts = audited(PRO6000)
    facts["gpus"]["driver_version"] = "N/A"
    reason = reasons(gate.decide(facts, MODEL))["driver_version_unknown"]
    assert "'N/A', which is not a version number" in reason["summary"]
    assert reason["remedy"] == "Check `nvidia-smi`."


def test_gpus_of_unknown_compute_capability_are_not_used_blind():
    facts = audited(PRO6000)
    for device in facts["gpus"]["devices"]:
        device["compute_capability"] = None
        device["sm"] = None
    result = gate.decide(facts, MODEL)
    reason = reasons(result)["compute_capability_unknown"]
    assert result["verdict"] == "block"
    assert reason["evidence"]["unknown"][:2] == ["GPU0", "GPU1"]
    assert "accept compute_capability_unknown" in reason["remedy"]


def granted_rtx4090() -> dict:
    """The RTX 4090 workstation with a (patched) driver that grants P2P between every pair."""
    facts = audited(RTX4090)
    count = len(facts["gpus"]["devices"])
    facts["p2p"]["read"] = [["X" if i == j else "OK" for j in range(count)] for i in range(count)]
    facts["findings"] = engine.evaluate(facts)
    return facts


def test_findings_about_collectives_are_moot_for_one_gpu_by_category():
    """With P2P granted on consumer GPUs the audit warns that it is unproven (category p2p): a model
    served by one GPU has no collectives, so the gate resolves that finding instead of listing it."""
    assert CATALOG["consumer_p2p_unproven"].category == "p2p"
    result = gate.decide(granted_rtx4090(), MODEL)
    assert result["launch"]["tensor_parallel_size"] == 1
    resolved = {r["id"]: r["resolved_by"] for r in result["resolved"]}
    assert resolved.get("consumer_p2p_unproven") == "tensor-parallel size 1: no collectives between GPUs"
    assert "consumer_p2p_unproven" not in {f["id"] for f in result["other_findings"]}
    two = gate.decide(granted_rtx4090(), {**MODEL, "tensor_parallel_size": 2})
    assert "consumer_p2p_unproven" in {f["id"] for f in two["other_findings"]}
