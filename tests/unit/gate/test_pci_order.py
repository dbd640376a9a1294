"""GPUs in PCI order everywhere: on a host with mixed GPUs, the GPUs the gate approves (NVML's indexes, PCI order)
are the ones the service's unit makes CUDA use, and every benchmark process counts GPUs the same way."""

from __future__ import annotations

from typing import Any

import yaml
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import harness_runner
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules import engine

from tests.paths import ROOT
from tests.unit.captures import PRO6000, audited

ROLE = ROOT / "roles" / "sglang_serve"
QWEN = {"name": "Qwen-72B", "family": "qwen", "weights_gib": 100}


def mixed_host() -> dict[str, Any]:
    """The 8x RTX PRO 6000 host with its first four GPUs (lowest PCI addresses) an older, slower model."""
    facts = audited(PRO6000)
    for device in facts["gpus"]["devices"][:4]:
        device.update({"name": "NVIDIA RTX A6000", "compute_capability": "8.6", "sm": "sm_86"})
    facts["findings"] = engine.evaluate(facts)
    return facts


def cuda_order(devices: list[dict[str, Any]], env: dict[str, str]) -> list[str]:
    """The PCI addresses of the GPUs in the order CUDA numbers them: PCI order with CUDA_DEVICE_ORDER=PCI_BUS_ID,
    else fastest first (the newer architecture first; PCI order among equals)."""
    by_bus = sorted(devices, key=lambda d: d["pci_bus_id"])
    if env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID":
        return [d["pci_bus_id"] for d in by_bus]
    return [d["pci_bus_id"] for d in sorted(by_bus, key=lambda d: -float(d["compute_capability"]))]


def unit_env(gate_result: dict[str, Any], extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the role writes into the unit's environment file, rendered from its vars as Ansible does."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    variables = {"sglang_serve_gate": gate_result, "sglang_serve_extra_env": extra or {},
                 "__sglang_serve_launch": trust_as_template(role_vars["__sglang_serve_launch"])}
    return dict(Templar(loader=DataLoader(), variables=variables).template(
        trust_as_template(role_vars["__sglang_serve_env"])))


def test_the_gates_gpus_are_the_ones_the_unit_names() -> None:
    facts = mixed_host()
    devices = facts["gpus"]["devices"]
    # NVML numbers the GPUs in PCI order, as the gate reads them.
    assert [d["pci_bus_id"] for d in devices] == sorted(d["pci_bus_id"] for d in devices)
    result = gate.decide(facts, QWEN)
    approved = [devices[i]["pci_bus_id"] for i in result["launch"]["gpus"]]
    assert approved
    for extra in (None, {"CUDA_DEVICE_ORDER": "FASTEST_FIRST", "CUDA_VISIBLE_DEVICES": "0,1"}):
        env = unit_env(result, extra)
        assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        order = cuda_order(devices, env)
        used = [order[int(i)] for i in env["CUDA_VISIBLE_DEVICES"].split(",")]
        assert used == approved
    # Without the order, CUDA would start the service on other GPUs than those approved.
    fastest = cuda_order(devices, {})
    assert [fastest[i] for i in result["launch"]["gpus"]] != approved


def test_every_benchmark_process_counts_gpus_in_pci_order(monkeypatch) -> None:
    seen: dict[str, str] = {}

    def fake_run(argv, timeout_s, env=None, cwd=None):
        seen.update(env)
        raise OSError(2, "not run")

    monkeypatch.setattr(harness_runner, "run_bounded", fake_run)
    harness_runner.run_process(["true"], 1.0, env={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"})
    assert seen["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    for harness in ("p2p_harness.py", "collective_harness.py"):
        text = (ROOT / "plugins/module_utils/bench" / harness).read_text()
        assert 'env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"' in text, harness
    assert "export CUDA_DEVICE_ORDER=PCI_BUS_ID" in (ROOT / "scripts/gpu-check.sh").read_text()
