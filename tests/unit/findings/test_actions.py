"""Each finding's action comes from the catalog, and a host's action is the most disruptive of them."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings import catalog
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.actions import ACTIONS, most_disruptive
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import (
    ACTION_OF,
    CATALOG,
    IDS_BY_ACTION,
    CatalogError,
    make,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import judgement


@pytest.mark.parametrize("entry", CATALOG.values(), ids=lambda e: e.id)
def test_every_catalog_id_declares_one_valid_action(entry: catalog.Entry) -> None:
    assert ACTION_OF.get(entry.id) in ACTIONS, f"{entry.id} has no action in IDS_BY_ACTION"
    assert sum(entry.id in ids for ids in IDS_BY_ACTION.values()) == 1


def test_the_vocabulary_is_the_documented_order_of_disruption() -> None:
    assert ACTIONS == ("none", "drain", "reset_gpu", "reboot", "reinstall_driver", "fix_hypervisor")


def test_an_id_without_an_action_or_with_two_is_refused() -> None:
    grown = {**CATALOG, "new_check": catalog.Entry("new_check", "gpu", "warning", "a new check", "fix it")}
    with pytest.raises(CatalogError, match="new_check have no action"):
        catalog._check(grown)
    twice = {**IDS_BY_ACTION, "reboot": (*IDS_BY_ACTION["reboot"], "xid_errors")}
    original = catalog.IDS_BY_ACTION
    catalog.IDS_BY_ACTION = twice
    try:
        with pytest.raises(CatalogError, match="more than one line"):
            catalog._check(CATALOG)
    finally:
        catalog.IDS_BY_ACTION = original


def test_a_finding_carries_its_ids_action() -> None:
    assert make("gpu_lost", "GPU 3 lost").action == "reboot"
    assert make("row_remap_pending", "GPU 1 waits").action == "reset_gpu"
    assert make("nvml_unavailable", "no NVML").as_dict()["action"] == "none"


def test_a_critical_finding_asks_at_least_a_drain_but_the_gates_reasons_do_not() -> None:
    # pcie_aer_errors is a warning asking nothing; raised critical (a fatal AER error) the host is unfit.
    assert make("pcie_aer_errors", "corrected errors").action == "none"
    assert make("pcie_aer_errors", "fatal error", severity="critical").action == "drain"
    # Raised info (only the balloon device is there) it asks nothing of the hypervisor.
    assert make("proxmox_vm_balloon", "balloon", commands="qm set").action == "fix_hypervisor"
    assert make("proxmox_vm_balloon", "device only", severity="info", commands="qm set").action == "none"
    # A model that needs more GPUs than the host has says nothing about the host's health.
    assert make("not_enough_gpus", "needs 8").action == "none"


@pytest.mark.parametrize(("actions", "expected"), [
    ([], "none"),
    (["none", "none"], "none"),
    (["drain", "reset_gpu", "none"], "reset_gpu"),
    (["reset_gpu", "reboot"], "reboot"),
    (["reboot", "reinstall_driver", "drain"], "reinstall_driver"),
    (["fix_hypervisor", "reinstall_driver"], "fix_hypervisor"),
    (["reboot", "restart_everything", None], "reboot"),
])
def test_the_most_disruptive_action_wins(actions: list, expected: str) -> None:
    assert most_disruptive(actions) == expected


def test_the_judgement_carries_the_hosts_action() -> None:
    findings = [make(i, i).as_dict() for i in ("nvml_unavailable", "row_remap_pending", "gpu_lost")]
    assert judgement(findings)["action"] == "reboot"
    assert judgement([])["action"] == "none"
    # Findings of a report written before actions existed ask for nothing that can be told.
    assert judgement([{"id": "gpu_lost", "severity": "critical"}])["action"] == "none"
