"""Rules that none of the captured hosts trips, each made to fire on the facts that call for it."""

from __future__ import annotations

from ansible.module_utils.gpuhost.rules import engine
from tests.unit.captures import PRO6000, audited


def by_id(findings: list[dict]) -> dict[str, dict]:
    return {f["id"]: f for f in findings}


def test_gpus_on_the_bus_without_a_driver_and_no_nvml():
    """A fresh install before the driver: PCI shows the GPUs, nothing binds them, NVML cannot load."""
    facts = audited(PRO6000)
    for device in facts["pci"]["nvidia_devices"]:
        device["driver"] = None
    facts["gpus"] = {"source": None, "devices": [], "nvml_error": "NVMLError_LibraryNotFound",
                     "nvidia_smi_error": "nvidia-smi: not found"}
    found = by_id(engine.evaluate(facts))
    finding = found["nvidia_driver_not_loaded"]
    assert finding["severity"] == "critical"
    assert finding["summary"].startswith("8 NVIDIA GPU(s) on the PCI bus have no NVIDIA driver bound")
    assert set(finding["evidence"]["devices"].values()) == {"none"}
    assert "nvidia_driver role" in finding["remedy"]
    assert "no_nvidia_gpu" not in found


def test_tensor_parallel_gpus_across_numa_nodes_over_pcie():
    """The bare-metal RTX PRO 6000 host with half its GPUs moved to the second socket."""
    facts = audited(PRO6000)
    bus = {d["pci_bus_id"]: d["index"] for d in facts["gpus"]["devices"]}
    for device in facts["pci"]["nvidia_devices"]:
        if device["kind"] == "gpu":
            device["numa_node"] = 0 if bus[device["bdf"]] < 4 else 1
    found = by_id(engine.evaluate(facts))
    finding = found["gpus_on_several_numa_nodes"]
    assert finding["severity"] == "warning"
    assert finding["evidence"]["numa_node_by_gpu"] == {f"GPU{i}": 0 if i < 4 else 1 for i in range(8)}
    # The captured topology says NODE (its GPUs really share a node); any non-NVLink pair counts.
    assert finding["evidence"]["pcie_pairs_across_nodes"][:2] == ["GPU0->GPU4: NODE", "GPU0->GPU5: NODE"]
    assert finding["evidence"]["pcie_pairs_across_nodes"][-1] == "... and 8 more pairs"
    # Only some GPUs in the tensor-parallel group, all on one node: nothing to say.
    assert "gpus_on_several_numa_nodes" not in by_id(engine.evaluate(facts, engine.RuleOptions([0, 1, 2, 3])))


def test_a_rule_that_trips_on_garbled_facts_becomes_a_finding():
    """Facts read back from a hand-edited report: a GPU entry without its address."""
    facts = audited(PRO6000)
    facts["pci"]["nvidia_devices"] = [{"kind": "gpu", "driver": "nouveau"}]
    facts["gpus"]["devices"] = []
    found = engine.evaluate(facts)
    errors = [f for f in found if f["id"] == "rule_error"]
    assert errors and errors[0]["severity"] == "warning"
    assert errors[0]["evidence"]["rule"].startswith("rule_")
    assert "KeyError" in errors[0]["summary"]
    assert "capture" in errors[0]["remedy"]
