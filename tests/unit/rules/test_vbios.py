"""VBIOS consistency across one host's GPUs: fires on GPUs of one model with different VBIOS versions, read from
a pasted `nvidia-smi -q` (text and XML) or from NVML, and is silent where they agree or were not read."""

from __future__ import annotations

import copy

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import build_capture
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_readers import replay
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q import parse_nvidia_smi_q
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.vbios import rule_vbios_consistency
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

from tests.paths import FIXTURES
from tests.unit import captures

SMI = FIXTURES / "nvidia-smi"
HEALTHY = SMI / "q_550_2xH100-HBM3_fabric.txt"
DIFFERS = SMI / "q_550_2xH100-HBM3_vbios-differs_constructed.txt"


def audit_material(path) -> dict:
    capture = build_capture([("nvidia-smi-q.txt", path.read_bytes())])
    return facts.audit(replay(capture), facts.resolve_subsets(["all"]), RuleOptions())


def vbios_findings(found: dict) -> list[dict]:
    return [f for f in found["findings"] if f["id"] == "gpu_vbios_mismatch"]


@pytest.mark.parametrize(("name", "versions"), [
    ("q_550_2xH100-HBM3_fabric.txt", ["96.00.89.00.01"] * 2),
    ("q_550_2xH100-HBM3_fabric.xml", ["96.00.89.00.01"] * 2),
    ("q_418_2xV100-SXM2_throttle-retired.txt", ["88.00.43.00.01"] * 2),
    ("q_418_2xV100-SXM2_throttle-retired.xml", ["88.00.43.00.01"] * 2),
    ("q_535_H100-PCIe_power-brake.xml", ["96.00.5E.00.03"]),
    ("q_550_2xH100-HBM3_vbios-differs_constructed.txt", ["96.00.89.00.01", "96.00.74.00.1C"]),
])
def test_the_q_parser_reads_each_gpus_vbios_as_printed(name: str, versions: list[str]) -> None:
    parsed = parse_nvidia_smi_q((SMI / name).read_text())
    assert [gpu.vbios_version for gpu in parsed.gpus] == versions


def test_a_pasted_q_with_two_vbios_versions_on_one_model_is_a_warning_naming_the_gpus() -> None:
    found = audit_material(DIFFERS)
    [finding] = vbios_findings(found)
    assert finding["severity"] == "warning" and finding["action"] == "none"
    assert finding["evidence"]["vbios_by_model"] == {
        "NVIDIA H100 80GB HBM3": {"96.00.74.00.1C": [1], "96.00.89.00.01": [0]}}
    assert "96.00.74.00.1C on GPU 1" in finding["summary"] and "96.00.89.00.01 on GPU 0" in finding["summary"]


def test_the_same_paste_with_one_vbios_is_silent() -> None:
    found = audit_material(HEALTHY)
    assert [d["vbios_version"] for d in found["gpus"]["devices"]] == ["96.00.89.00.01"] * 2
    assert not vbios_findings(found)


def test_nvml_versions_are_judged_the_same_way_and_unread_ones_never_count() -> None:
    found = captures.audited(captures.H100)
    assert not vbios_findings(found)
    devices = found["gpus"]["devices"]
    for device, version in zip(devices, ["96.00.89.00.01"] * 7 + [None], strict=True):
        device["vbios_version"] = version
    assert rule_vbios_consistency(found, RuleOptions()) == []  # seven read alike, one unread: nothing differs
    devices[7]["vbios_version"] = "96.00.74.00.1C"
    [finding] = rule_vbios_consistency(found, RuleOptions())
    assert finding.evidence["vbios_by_model"][devices[7]["name"]]["96.00.74.00.1C"] == [7]


def test_different_models_may_run_different_vbios() -> None:
    found = copy.deepcopy(captures.audited(captures.H100))
    for device in found["gpus"]["devices"]:
        device["vbios_version"] = "96.00.89.00.01"
    found["gpus"]["devices"][0].update(name="NVIDIA H100 PCIe", vbios_version="96.00.5E.00.03")
    assert rule_vbios_consistency(found, RuleOptions()) == []
