"""Drift between two audits of a host, from pairs of captures: exactly the changes and findings expected."""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.report.drift import with_drift
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.drift import compare, lowered
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.drift_basis import ITEMS, basis_of, guest_vm
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.captures import GPU_LOST, INCIDENT, PRO6000, audit, audited, capture

CLIQUE_OK = "proxmox-host-8xRTXPRO6000-vm-clique-ok"
NO_CLIQUE = "proxmox-host-8xRTXPRO6000-vm-no-clique"
DATE = "2026-01-05 08:00 UTC"


def changed(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(c["item"], c["subject"]) for c in compare(basis_of(before), basis_of(after), "proxmox" in after)]


def drift_ids(facts: dict[str, Any]) -> list[str]:
    return sorted(f["id"] for f in facts["findings"] if f["id"] in
                  ("gpu_gone", "gpu_added", "link_trained_lower", "p2p_proof_stale"))


def with_driver(name: str, version: str) -> dict[str, Any]:
    data = capture(name)
    data["nvml"]["driver_version"] = version
    return audit(data)


def with_link_width(name: str, bus: str, width: int) -> dict[str, Any]:
    data = capture(name)
    data["files"][f"/sys/bus/pci/devices/{bus}/current_link_width"] = f"{width}\n"
    for device in data["nvml"]["devices"]:
        if device["pci_bus_id"].lower().endswith(bus[5:]):
            device["pcie_width_current"] = width
    return audit(data)


def test_nothing_changed_gives_no_drift() -> None:
    for name in (PRO6000, INCIDENT, CLIQUE_OK):
        assert changed(audited(name), audited(name)) == []
        again = with_drift(audited(name), json.loads(json.dumps(audited(name))), DATE)
        assert "drift" not in again and drift_ids(again) == []


def test_a_driver_upgrade_is_the_one_change() -> None:
    after = with_driver(PRO6000, "590.44.01")
    changes = compare(basis_of(audited(PRO6000)), basis_of(after))
    assert [(c["item"], c["before"], c["after"], c["invalidates_proof"]) for c in changes] == [
        ("driver", "580.95.05", "590.44.01", True)]
    written = with_drift(after, audited(PRO6000), DATE)
    assert written["drift"]["since"] == DATE and drift_ids(written) == []
    assert written["summary"] == after["summary"]  # a driver change alone is no finding without a proof


def test_a_link_trained_narrower_is_link_trained_lower() -> None:
    after = with_link_width(PRO6000, "0000:41:00.0", 8)
    changes = compare(basis_of(audited(PRO6000)), basis_of(after))
    assert [(c["item"], c["subject"]) for c in changes] == [("link", "0000:41:00.0")]
    assert changes[0]["before"]["width"] == 16 and changes[0]["after"]["width"] == 8 and lowered(changes[0])
    written = with_drift(after, audited(PRO6000), DATE)
    assert drift_ids(written) == ["link_trained_lower"]
    finding = next(f for f in written["findings"] if f["id"] == "link_trained_lower")
    assert "0000:41:00.0 x16/x16 gen5 -> x8/x16 gen5" in finding["summary"] and finding["severity"] == "warning"


def test_a_vm_config_change_on_the_proxmox_host() -> None:
    changes = compare(basis_of(audited(CLIQUE_OK)), basis_of(audited(NO_CLIQUE)), proxmox_host=True)
    vm = [c for c in changes if c["item"] == "proxmox_vm_config"]
    assert [(c["subject"], c["invalidates_proof"]) for c in vm] == [("120", False)]
    assert vm[0]["before"]["args"] and vm[0]["after"]["args"] is None
    # The two captures also differ in the hugepages of the kernel command line: nothing else.
    assert {c["item"] for c in changes} == {"proxmox_vm_config", "kernel_cmdline"}
    assert drift_ids(with_drift(audited(NO_CLIQUE), audited(CLIQUE_OK), DATE)) == []


def test_a_guests_proof_goes_stale_when_its_vm_config_changes() -> None:
    guest = audited(INCIDENT)
    before_vm = guest_vm(guest, {"pve": audited(CLIQUE_OK)})
    after_vm = guest_vm(guest, {"pve": audited(NO_CLIQUE)})
    assert list(before_vm) == ["120"] and before_vm != after_vm
    bench = {"probe": {"source": "probe", "tool": "torch", "status": "ok"}, "nccl": None}
    proven = with_drift({**guest, "bench": bench}, None, None, bench_given=True, now=1767600000, vm_config=before_vm)
    assert proven["proof"]["measured_at"] == 1767600000 and drift_ids(proven) == []
    later = with_drift({**guest, "bench": bench}, json.loads(json.dumps(proven)), DATE, vm_config=after_vm)
    assert drift_ids(later) == ["p2p_proof_stale"]
    stale = next(f for f in later["findings"] if f["id"] == "p2p_proof_stale")
    assert stale["evidence"]["items"] == ["proxmox_vm_config"] and "VM 120 config (" in stale["summary"]
    assert "measured 2026-01-05 08:00 UTC" in stale["summary"]


def test_a_gpu_fallen_off_is_gpu_gone_and_unfit() -> None:
    changes = compare(basis_of(audited(PRO6000)), basis_of(audited(GPU_LOST)))
    assert [(c["item"], c["after"]) for c in changes] == [("gpu_set", None)]
    written = with_drift(audited(GPU_LOST), audited(PRO6000), DATE)
    assert drift_ids(written) == ["gpu_gone"]
    assert written["summary"]["verdict"] == "unfit"
    back = with_drift(audited(PRO6000), json.loads(json.dumps(written)), "2026-01-06 08:00 UTC")
    assert drift_ids(back) == ["gpu_added"] and back["summary"]["verdict"] == audited(PRO6000)["summary"]["verdict"]


def test_a_gpu_still_gone_stays_through_a_later_change() -> None:
    gone = with_drift(audited(GPU_LOST), audited(PRO6000), DATE)
    later = with_drift(with_driver(GPU_LOST, "590.44.01"), json.loads(json.dumps(gone)), "2026-01-07 08:00 UTC")
    assert [(c["item"], c["since"]) for c in later["drift"]["changes"]] == [
        ("driver", "2026-01-07 08:00 UTC"), ("gpu_set", DATE)]
    assert drift_ids(later) == ["gpu_gone"]


def test_the_record_stays_while_nothing_changes() -> None:
    first = with_drift(with_driver(PRO6000, "590.44.01"), audited(PRO6000), DATE)
    second = with_drift(with_driver(PRO6000, "590.44.01"), json.loads(json.dumps(first)), "2026-01-08 08:00 UTC")
    assert second["drift"] == first["drift"]


def test_values_not_known_on_one_side_are_no_change() -> None:
    old = audited(PRO6000)
    for key in ("gpus", "pci", "p2p", "iommu", "kernel", "virtualization"):
        old.pop(key)
    assert changed(old, audited(PRO6000)) == []
    assert changed(audited(PRO6000), old) == []


def _report() -> st.SearchStrategy[Any]:
    leaves = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    return st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from([*ITEMS, "gpus", "pci", "p2p", "devices", "pci_bus_id", "read", "proxmox", "vms", "vmid",
                         "driver_version", "kernel", "release", "link", "iommu", "enabled", "mode", "drift",
                         "changes", "proof", "basis"]), inner, max_size=6), max_leaves=30)


@settings(max_examples=200, deadline=None)
@given(_report())
def test_a_report_compared_with_itself_gives_nothing(report: Any) -> None:
    facts = report if isinstance(report, dict) else {}
    assert compare(basis_of(facts), basis_of(facts)) == []
    assert with_drift({**facts, "findings": [], "summary": {}}, json.loads(json.dumps(facts)), DATE).get(
        "findings", []) == []


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([PRO6000, INCIDENT, GPU_LOST, CLIQUE_OK, NO_CLIQUE]))
def test_a_capture_compared_with_itself_gives_nothing(name: str) -> None:
    assert changed(audited(name), audited(name)) == []
