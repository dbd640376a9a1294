"""Where a Proxmox fix runs decides the action, and only a node's own tools make a host a node.

- A guest whose P2P finding is fixed on its VM asks ``fix_hypervisor`` (report, fleet.md, metrics and exit code all
  read the summary's action), whether the VM was found by the node's audit (uuid) or came in the same material.
- A qemu-server directory alone makes no Proxmox node: a machine with a VM config left on it is audited as what it
  is, not as a hypervisor with its IOMMU off.
"""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import enrich_guest_findings

from tests.unit.captures import audit, audited, capture

NO_CLIQUE = "proxmox-host-8xRTXPRO6000-vm-no-clique"
INCIDENT_GUEST = "proxmox-q35-guest-8xRTXPRO6000-p2p-NS"
H100 = "baremetal-8xH100-SXM"


def test_a_guest_linked_to_its_vm_asks_fix_hypervisor() -> None:
    guest = enrich_guest_findings(audited(INCIDENT_GUEST), {"pve-no-clique": audited(NO_CLIQUE)})
    finding = next(f for f in guest["findings"] if f["id"] == "p2p_not_supported")
    assert finding["evidence"]["proxmox_host"] == "pve-no-clique"
    assert finding["action"] == "fix_hypervisor"
    # The summary is judged again from the findings: every view reads this one action.
    assert guest["summary"]["action"] == "fix_hypervisor"
    assert any("x-nv-gpudirect-clique" in c for c in finding["evidence"]["commands"])


def test_an_unlinked_guest_keeps_drain() -> None:
    guest = audited(INCIDENT_GUEST)
    assert enrich_guest_findings(guest, {}) is guest
    assert guest["summary"]["action"] == "drain"


def with_left_over_config(data: dict) -> dict:
    config = capture(NO_CLIQUE)["files"]["/etc/pve/qemu-server/120.conf"]
    data["files"]["/etc/pve/qemu-server/120.conf"] = config
    data["dirs"]["/etc/pve/qemu-server"] = ["120.conf"]
    return data


def test_a_vm_config_left_on_a_machine_makes_no_hypervisor() -> None:
    facts = audit(with_left_over_config(capture(H100)))
    assert "proxmox" not in facts
    assert not [f for f in facts["findings"] if f["id"].startswith("proxmox_")]
    assert facts["summary"]["action"] == "none"


def test_a_node_is_told_by_pveversion_or_its_kernel() -> None:
    assert audit(capture(NO_CLIQUE))["proxmox"]["node_evidence"] == "pveversion"
    data = capture(NO_CLIQUE)
    data["commands"]["pveversion"] = {"rc": None, "stdout": "", "stderr": "pveversion: command not found"}
    data["files"]["/proc/sys/kernel/osrelease"] = "6.8.12-5-pve\n"
    assert audit(data)["proxmox"]["node_evidence"] == "kernel 6.8.12-5-pve"


def test_fleet_md_and_the_metrics_read_the_guests_fix_hypervisor(tmp_path, capsys) -> None:
    import gpu_audit_report

    from tests.unit.modules import run_module

    hosts = {"glm5-guest": audited(INCIDENT_GUEST), "pve-no-clique": audited(NO_CLIQUE)}
    run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": hosts}, capsys)
    row = next(line for line in (tmp_path / "fleet.md").read_text().splitlines() if "glm5-guest" in line)
    assert "fix_hypervisor" in row and "drain" not in row
    report = (tmp_path / "glm5-guest.json").read_text()
    assert '"action": "fix_hypervisor"' in report
