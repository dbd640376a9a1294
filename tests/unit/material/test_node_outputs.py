"""A Proxmox node's own outputs given with a guest's material are set apart, never judged as the guest's: the
incident ticket (tests/fixtures/tickets/incident-guest) with the node's kernel log, command line or pveversion
added. Material of the node alone is the node's: its pveversion makes it a Proxmox node, as on a live host."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import DMESG_KEY, build_capture
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.section import with_material
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.scope import two_hosts, verdict_scope

from tests.paths import FIXTURES
from tests.unit import schemas
from tests.unit.material.test_capture import VM_CONFIG, audit

TICKET = sorted((FIXTURES / "tickets" / "incident-guest").iterdir())
# The first lines of a Proxmox VE 8 node's boot log (kernel 6.8.12-5-pve, as `pveversion` names it).
NODE_DMESG = (b"[    0.000000] Linux version 6.8.12-5-pve (build@proxmox) (gcc (Debian 12.2.0-14) 12.2.0) #1 SMP "
              b"PREEMPT_DYNAMIC PMX 6.8.12-5 (2024-12-03T10:26Z) ()\n"
              b"[    0.000000] Command line: BOOT_IMAGE=/boot/vmlinuz-6.8.12-5-pve root=/dev/mapper/pve-root ro quiet "
              b"intel_iommu=on\n")
NODE_CMDLINE = b"BOOT_IMAGE=/boot/vmlinuz-6.8.12-5-pve root=/dev/mapper/pve-root ro quiet intel_iommu=on iommu=pt\n"
PVEVERSIONS = sorted((FIXTURES / "pveversion").glob("pveversion*"))
RUNNING_KERNEL = {"pveversion_pve8.3.5_kernel-6.8.12-8-pve_prompt.txt": "6.8.12-8-pve",
                  "pveversion_pve8.0.3_kernel-6.2.16-3-pve.txt": "6.2.16-3-pve",
                  "pveversion_pve7.4-14_kernel-5.15.107-2-pve.txt": "5.15.107-2-pve",
                  "pveversion-v_pve9.1_grep-kernel_prompt.txt": "6.17.13-4-pve"}
NODE_PVEVERSION = (FIXTURES / "pveversion" / "pveversion_pve8.3.5_kernel-6.8.12-8-pve_prompt.txt").read_bytes()
GUEST_DMESG = (b"[    0.000000] Linux version 6.8.0-79-generic (buildd@lcy02-amd64-058) #79-Ubuntu SMP\n"
               b"[    0.000000] Hypervisor detected: KVM\n")


def ticket_with(name: str, data: bytes) -> dict:
    return build_capture([*[(path.name, path.read_bytes()) for path in TICKET], (name, data)])


@pytest.mark.parametrize(("name", "data"), [("node-dmesg.txt", NODE_DMESG), ("cmdline.txt", NODE_CMDLINE),
                                            ("pveversion.txt", NODE_PVEVERSION)])
def test_a_nodes_kernel_output_in_a_guests_material_is_set_apart(name, data) -> None:
    capture = ticket_with(name, data)
    material = capture["from_material"]
    assert DMESG_KEY not in capture["commands"] and "/proc/cmdline" not in capture["files"]
    assert "pveversion" not in capture["commands"]
    [why] = [u["why"] for u in material["unmapped"] if u["name"] == name]
    assert "Proxmox node's own output (" in why and "input of its own" in why
    assert ("(pveversion, kernel 6.8.12-8-pve)" if name == "pveversion.txt" else "(kernel 6.8.12-5-pve)") in why
    assert material["node_outputs"] == [name]
    assert material["warnings"][0] == two_hosts([name])
    assert next(e for e in material["inputs"] if e["name"] == name)["as"] == []
    # The guest is judged as without the node's output: the same verdict and findings.
    alone = audit(build_capture([(path.name, path.read_bytes()) for path in TICKET]))
    judged = audit(capture)
    # The report's shape is unchanged: the facts with their material section still validate.
    assert not list(schemas.validator("facts").iter_errors(with_material(judged, capture)))
    assert judged["summary"]["verdict"] == alone["summary"]["verdict"]
    assert sorted(f["id"] for f in judged["findings"]) == sorted(f["id"] for f in alone["findings"])
    # pveversion set apart: no node is claimed, the VM config stays the guest's VM's.
    assert judged["proxmox"]["node_evidence"] is None


def test_the_guests_own_kernel_log_stays_the_guests() -> None:
    capture = ticket_with("dmesg.txt", GUEST_DMESG)
    assert capture["commands"][DMESG_KEY]["stdout"].startswith("[    0.000000] Linux version 6.8.0-79-generic")
    assert capture["from_material"]["node_outputs"] == [] and len(capture["from_material"]["warnings"]) == 1


def test_a_nodes_kernel_log_alone_is_that_hosts() -> None:
    # Without a guest's outputs and its VM's config there is one host, and the log is its own.
    capture = build_capture([("dmesg.txt", NODE_DMESG)])
    assert DMESG_KEY in capture["commands"] and capture["from_material"]["warnings"] == []


@pytest.mark.parametrize("path", PVEVERSIONS, ids=lambda path: path.name)
def test_material_of_a_node_alone_is_judged_as_the_node(path) -> None:
    # A VM config with hostpci and no tool of the node's: the config of some VM, no node (no hypervisor judged).
    config_only = audit(build_capture([("131.conf", VM_CONFIG)]))
    assert config_only["proxmox"]["node_evidence"] is None
    assert verdict_scope(config_only).short != "hypervisor"
    # With the node's pveversion, short or -v: a Proxmox node, judged as the hypervisor, as a live node is.
    capture = build_capture([("131.conf", VM_CONFIG), (path.name, path.read_bytes())])
    assert capture["from_material"]["node_outputs"] == []
    assert next(e for e in capture["from_material"]["inputs"] if e["name"] == path.name)["as"] == [
        "commands:pveversion"]
    judged = audit(capture)
    assert judged["proxmox"]["node_evidence"] == "pveversion"
    assert judged["proxmox"]["kernel"] == RUNNING_KERNEL[path.name]
    assert verdict_scope(judged).short == "hypervisor"
