"""The host's action in the audit of each real capture: the most disruptive its findings ask, none when healthy."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.actions import most_disruptive

from tests.unit import captures

EXPECTED = {
    captures.H100: "none",
    captures.PRO6000: "none",
    captures.HYPERVISOR: "none",
    captures.H100_SICK: "reset_gpu",  # Xid 48, an uncorrectable ECC error and a row remap pending
    captures.GPU_LOST: "reboot",  # a GPU fell off the bus
    captures.MISMATCH: "reboot",  # driver upgraded without a reboot
    captures.I440FX: "fix_hypervisor",  # the VM's machine type is set on the hypervisor
    captures.INCIDENT: "drain",  # P2P not supported: unfit until a person fixes the path
    captures.MICROVM: "drain",
}


@pytest.mark.parametrize(("name", "action"), EXPECTED.items())
def test_the_summary_says_the_action_its_findings_ask(name: str, action: str) -> None:
    facts = captures.audited(name)
    assert facts["summary"]["action"] == action
    assert most_disruptive(f["action"] for f in facts["findings"]) == action


@pytest.mark.parametrize("name", captures.ALL)
def test_an_unfit_host_is_never_left_in_service(name: str) -> None:
    summary = captures.audited(name)["summary"]
    assert (summary["action"] != "none") == (summary["verdict"] == "unfit"), summary
