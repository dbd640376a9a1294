"""A Proxmox host's report gives each VM's restart once, not once per finding (issue 29).

The incident's VM 120 has three findings with `qm set` commands (KVM hidden, no clique, ballooning). Each remedy
ended in `qm shutdown 120 && qm start 120`: followed top to bottom, the VM restarted three times. Each remedy now
gives its own commands and points to the VM's whole fix, which the report gives once with the one restart.
"""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import host_markdown

from tests.unit.captures import audited

NO_CLIQUE = "proxmox-host-8xRTXPRO6000-vm-no-clique"
RESTART = "qm shutdown 120 && qm start 120"


def test_the_host_report_restarts_each_vm_once_after_all_its_commands() -> None:
    facts = audited(NO_CLIQUE)
    text = host_markdown("pve-no-clique", facts)
    assert text.count(RESTART) == 1
    fix = text.split("Fix for VM 120: the commands of all its findings, then one restart:", 1)[1]
    block = fix.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    assert block[:3] == ["qm set 120 --cpu host",
                         "qm set 120 --args '" + " ".join(f"-set device.hostpci{n}.x-nv-gpudirect-clique=0"
                                                         for n in range(8)) + "'",
                         "qm set 120 --balloon 0"]
    assert block[3] == RESTART


def test_each_remedy_keeps_its_own_commands_and_points_to_the_one_restart() -> None:
    for finding in audited(NO_CLIQUE)["findings"]:
        if finding["id"] in ("proxmox_vm_hidden", "proxmox_vm_no_clique", "proxmox_vm_balloon"):
            assert "qm set 120 --" in finding["remedy"] and RESTART not in finding["remedy"], finding["id"]
            assert 'the report\'s "Fix for VM 120"' in finding["remedy"]
