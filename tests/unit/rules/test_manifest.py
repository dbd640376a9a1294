"""A host judged against the manifest of its class: each capture matches its own class, a capture of a host
that deviates (a GPU lost, P2P missing, a narrow link) raises the finding that says how, and changing one value
of a matching host raises exactly the finding for it. Without a manifest nothing is raised."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.engine import evaluate
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.manifest import MANIFEST_RULES
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.manifest_format import load
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

from tests import paths
from tests.unit.captures import (
    ALL,
    GPU_LOST,
    H100,
    H100_SICK,
    INCIDENT,
    MISMATCH,
    PRO6000,
    RTX4090,
    audit,
    audited,
    capture,
)

MANIFESTS = paths.ROOT / "inventories" / "example" / "manifests"


def manifest(name: str) -> dict[str, Any]:
    return load(yaml.safe_load((MANIFESTS / f"{name}.yml").read_text(encoding="utf-8")), name)


def judged(facts: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return evaluate(facts, RuleOptions(manifest=manifest(name)), rules=MANIFEST_RULES)


def ids(findings: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(f["id"], f["severity"]) for f in findings if f["id"].startswith("manifest_")]


def _p2p_ok(facts: dict[str, Any]) -> dict[str, Any]:
    """The incident guest as its class has it: a clique given, P2P read and write OK on every pair."""
    for capability in ("read", "write"):
        matrix = facts["p2p"][capability]
        facts["p2p"][capability] = [["X" if i == j else "OK" for j in range(len(row))] for i, row in enumerate(matrix)]
    return facts


def _link_fixed(facts: dict[str, Any]) -> dict[str, Any]:
    """The 4090 workstation with GPU3 trained at x16, as its slot is wired."""
    for device in facts["gpus"]["devices"]:
        device["pcie"]["width_current"] = 16
    for device in facts["pci"]["nvidia_devices"]:
        if device.get("link"):
            device["link"]["width_current"] = device["link"]["width_max"]
    return facts


# (capture, its class, how the capture is brought to the class where it deviates: None when it matches as is)
MATCHING = [
    (H100, "hgx-h100-8gpu", None),
    (H100_SICK, "hgx-h100-8gpu", None),  # sick (Xid 48) but built as its class: health findings, no manifest one
    (PRO6000, "rtxpro6000-server-8gpu", None),
    (INCIDENT, "proxmox-guest-8xrtxpro6000-clique", _p2p_ok),
    (RTX4090, "workstation-4xrtx4090", _link_fixed),
]


@pytest.mark.parametrize(("name", "klass", "bring"), MATCHING, ids=[m[0] for m in MATCHING])
def test_capture_matches_its_class(name: str, klass: str, bring: Any) -> None:
    facts = audited(name)
    assert ids(judged(bring(facts) if bring else facts, klass)) == []


def test_whole_audit_with_a_manifest_adds_nothing_to_a_matching_host() -> None:
    plain = audited(PRO6000)
    with_manifest = audit(capture(PRO6000), manifest=manifest("rtxpro6000-server-8gpu"))
    assert with_manifest["findings"] == plain["findings"] == []


def test_lost_gpu_is_a_missing_gpu_of_the_class() -> None:
    # The real capture: GPU3 (0000:42:00.0) fell off the bus. Through the whole audit, so the finding is in
    # the record every report renders.
    findings = audit(capture(GPU_LOST), manifest=manifest("rtxpro6000-server-8gpu"))["findings"]
    found = [f for f in findings if f["id"] == "manifest_gpu_count"]
    assert [f["severity"] for f in found] == ["critical"]
    assert found[0]["evidence"] == {"manifest_class": "rtxpro6000-server-8gpu", "expected": 8, "found": 7,
                                    "empty_slots": ["0000:42:00.0"]}
    assert "rtxpro6000-server-8gpu" in found[0]["remedy"]
    assert ids(findings) == [("manifest_gpu_count", "critical")]


def test_incident_guest_lacks_the_p2p_of_its_class() -> None:
    findings = audit(capture(INCIDENT), manifest=manifest("proxmox-guest-8xrtxpro6000-clique"))["findings"]
    assert ids(findings) == [("manifest_p2p", "critical")]
    p2p = next(f for f in findings if f["id"] == "manifest_p2p")
    assert p2p["evidence"]["pairs"][0] == "GPU0->GPU1: read NS, class OK"
    assert "56 GPU pair(s)" in p2p["summary"]  # 28 pairs, read and write


def test_narrow_link_of_the_4090_capture_is_below_its_slot() -> None:
    findings = judged(audited(RTX4090), "workstation-4xrtx4090")
    assert ids(findings) == [("manifest_link_below", "warning")]
    assert findings[0]["evidence"]["links"] == ["0000:7c:00.0: x8 where the class has x16"]


def test_driver_that_cannot_answer_shows_no_gpu_of_the_class() -> None:
    # The real capture of a driver upgraded without a reboot: no GPU answers, so no P2P matrix was read either.
    findings = judged(audited(MISMATCH), "proxmox-guest-8xrtxpro6000-clique")
    assert ids(findings) == [("manifest_gpu_count", "critical"), ("manifest_not_checked", "info")]
    assert findings[1]["evidence"]["not_read"] == ["p2p.read: the audit read no read matrix",
                                                   "p2p.write: the audit read no write matrix"]


def _h100(change: Any) -> list[dict[str, Any]]:
    facts = audited(H100)
    change(facts)
    return judged(facts, "hgx-h100-8gpu")


def _device(facts: dict[str, Any], index: int) -> dict[str, Any]:
    return facts["gpus"]["devices"][index]


def _pci(facts: dict[str, Any], bus: str) -> dict[str, Any]:
    return next(d for d in facts["pci"]["nvidia_devices"] if d["bdf"] == bus)


def _other_driver(facts: dict[str, Any]) -> None:
    facts["gpus"]["driver_version"] = "570.86.15"


def _other_model(facts: dict[str, Any]) -> None:
    _device(facts, 7)["name"] = "NVIDIA H100 PCIe"


def _gen4_slot(facts: dict[str, Any]) -> None:
    _device(facts, 2)["pcie"]["gen_max"] = 4


def _moved_socket(facts: dict[str, Any]) -> None:
    _pci(facts, "0000:18:00.0")["numa_node"] = 1


def _one_pair_without_p2p(facts: dict[str, Any]) -> None:
    facts["p2p"]["read"][0][5] = "CNS"


def _extra_gpu(facts: dict[str, Any]) -> None:
    facts["gpus"]["count"] = 9


def _nvml_addresses(facts: dict[str, Any]) -> None:
    for device in facts["gpus"]["devices"]:
        device["pci_bus_id"] = "0000" + device["pci_bus_id"].upper()


MUTATIONS = [
    (_other_driver, [("manifest_driver_version", "warning")]),
    (_other_model, [("manifest_gpu_model", "warning")]),
    (_gen4_slot, [("manifest_link_below", "warning")]),
    (_moved_socket, [("manifest_numa", "warning")]),
    (_one_pair_without_p2p, [("manifest_p2p", "critical")]),
    (_extra_gpu, [("manifest_gpu_count", "warning")]),
    (_nvml_addresses, []),  # 00000000:18:00.0 is the slot 0000:18:00.0
]


@pytest.mark.parametrize(("change", "expected"), MUTATIONS, ids=[m[0].__name__ for m in MUTATIONS])
def test_one_deviation_one_finding(change: Any, expected: list[tuple[str, str]]) -> None:
    assert ids(_h100(change)) == expected


def test_vbios_not_listed_and_vbios_not_read() -> None:
    klass = manifest("hgx-h100-8gpu")
    klass["gpus"]["vbios_versions"] = {"NVIDIA H100 80GB HBM3": ["96.00.99.00.01"]}
    facts = audited(H100)
    # The captures were recorded without VBIOS versions: not read is neither a match nor a deviation.
    unread = evaluate(facts, RuleOptions(manifest=klass), rules=MANIFEST_RULES)
    assert ids(unread) == [("manifest_not_checked", "info")]
    assert unread[0]["evidence"]["not_read"] == [
        "vbios_version of GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6, GPU7: not in what the audit read"]
    for device in facts["gpus"]["devices"]:
        device["vbios_version"] = "96.00.99.00.01"
    _device(facts, 6)["vbios_version"] = "96.00.74.00.0B"
    found = evaluate(facts, RuleOptions(manifest=klass), rules=MANIFEST_RULES)
    assert ids(found) == [("manifest_vbios_mismatch", "warning")]
    assert found[0]["evidence"]["found"] == ["GPU6: 96.00.74.00.0B"]


def test_guest_without_numa_says_it_was_not_checked() -> None:
    klass = manifest("proxmox-guest-8xrtxpro6000-clique")
    klass["slots"][0]["numa_node"] = 0
    findings = evaluate(_p2p_ok(audited(INCIDENT)), RuleOptions(manifest=klass), rules=MANIFEST_RULES)
    assert ids(findings) == [("manifest_not_checked", "info")]
    assert "numa_node of GPU0" in findings[0]["evidence"]["not_read"][0]


@pytest.mark.parametrize("name", ALL)
def test_no_manifest_no_manifest_finding(name: str) -> None:
    assert ids(audited(name)["findings"]) == []
