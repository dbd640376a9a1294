"""Rules that none of the captured hosts trips, each made to fire on the facts that call for it."""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.rules import engine

from tests.unit.captures import PRO6000, audited


def by_id(findings: list[dict]) -> dict[str, dict]:
    return {f["id"]: f for f in findings}


def test_gpus_on_the_bus_without_a_driver_and_no_nvml():
    """A fresh install before the driver: PCI shows the GPUs, nothing binds them, NVML cannot load."""
    facts = audited(PRO6000)
    for device in facts["pci"]["nvidia_devices"]:
        device["driver"] = None
    for module in ("nvidia", "nvidia_uvm", "nvidia_drm", "nvidia_modeset"):
        facts["iommu"]["modules"][module] = False
    facts["gpus"] = {"source": None, "devices": [], "nvml_error": "NVMLError_LibraryNotFound",
                     "nvidia_smi_error": "nvidia-smi: not found"}
    found = by_id(engine.evaluate(facts))
    finding = found["nvidia_driver_not_loaded"]
    assert finding["severity"] == "critical"
    assert finding["summary"].startswith("8 NVIDIA GPU(s) on the PCI bus have no NVIDIA driver bound")
    assert set(finding["evidence"]["devices"].values()) == {"none"}
    assert "nvidia_driver role" in finding["remedy"]
    assert "no_nvidia_gpu" not in found


def test_a_loaded_module_that_binds_no_gpu_is_not_a_missing_driver():
    """The module loaded but refused the GPUs at probe (a branch that does not support them): installing
    the driver is not the remedy, the kernel log's probe error is."""
    facts = audited(PRO6000)
    for device in facts["pci"]["nvidia_devices"]:
        device["driver"] = None
    facts["gpus"] = {"source": None, "count": 0, "devices": [], "kernel_module_version": "580.95.05",
                     "nvml_error": "NVMLError_DriverNotLoaded: Driver Not Loaded",
                     "nvidia_smi_error": "driver_not_loaded: NVIDIA-SMI has failed because it couldn't communicate "
                                         "with the NVIDIA driver."}
    found = by_id(engine.evaluate(facts))
    assert "nvidia_driver_not_loaded" not in found
    finding = found["nvidia_driver_not_binding"]
    assert finding["severity"] == "critical"
    assert finding["evidence"]["usable_gpus"] == 0 and finding["evidence"]["kernel_module_version"] == "580.95.05"
    assert len(finding["evidence"]["gpus_without_driver"]) == 8
    assert "probe" in finding["remedy"]
    # One GPU refused while the others work: a warning, the rest of the host stays usable.
    facts = audited(PRO6000)
    facts["pci"]["nvidia_devices"][0]["driver"] = None
    partial = by_id(engine.evaluate(facts))["nvidia_driver_not_binding"]
    assert partial["severity"] == "warning" and partial["evidence"]["usable_gpus"] == 8


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
