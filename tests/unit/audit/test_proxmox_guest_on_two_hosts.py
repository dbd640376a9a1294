"""A guest whose uuid matches VMs on two Proxmox hosts is said, not linked silently to one (issue 29).

A cloned VM keeps its smbios1 uuid: the incident guest matches VM 120 on the host whose config blocks P2P and VM 120
on its fixed clone. The link picks the first; its remedy and the report module's warnings now name both.
"""

from __future__ import annotations

from pathlib import Path

import gpu_audit_report
import pytest

from tests.unit.captures import audited
from tests.unit.modules import run_module

NO_CLIQUE = "proxmox-host-8xRTXPRO6000-vm-no-clique"
CLIQUE_OK = "proxmox-host-8xRTXPRO6000-vm-clique-ok"
INCIDENT_GUEST = "proxmox-q35-guest-8xRTXPRO6000-p2p-NS"


def warnings(result: dict) -> list[str]:
    return [w["event"]["msg"] if isinstance(w, dict) else w for w in result.get("warnings") or []]


def test_the_report_warns_and_the_remedy_names_both_hypervisors(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    hosts = {"glm5-guest": audited(INCIDENT_GUEST), "pve-a": audited(NO_CLIQUE), "pve-b": audited(CLIQUE_OK)}
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": hosts}, capsys, check_mode=True)
    warned = [w for w in warnings(result) if w.startswith("glm5-guest: ")]
    assert warned == ["glm5-guest: its DMI product_uuid is the smbios1 uuid of VMs on several Proxmox hosts: pve-a VM "
                      "120, pve-b VM 120. Its report gives the fix for pve-a VM 120 (the one whose config blocks P2P); "
                      "check that this VM runs the guest, and give each clone its own uuid"]
    remedy = result["guest_links"]["glm5-guest"]["remedies"]["p2p_not_supported"]
    assert "Its product_uuid is also the smbios1 uuid of pve-b VM 120" in remedy


def test_a_guest_matched_once_gets_no_such_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Its own name: the warnings of a module run in this process may still hold the test above's.
    hosts = {"lone-guest": audited(INCIDENT_GUEST), "pve-a": audited(NO_CLIQUE)}
    result = run_module(gpu_audit_report.main, {"dest": str(tmp_path), "hosts": hosts}, capsys, check_mode=True)
    assert not [w for w in warnings(result) if w.startswith("lone-guest: ")]
    assert "also the smbios1 uuid" not in result["guest_links"]["lone-guest"]["remedies"]["p2p_not_supported"]
