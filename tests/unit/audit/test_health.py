"""GPU health: Xid events, ECC, retired pages and row remapping, clocks held back, PCIe AER, the NVSwitch
fabric. The H100 capture with an Xid 48 and a pending row remap (H100_SICK), in-memory changes for what
no capture shows, and the rule that health readings of a healthy host add no finding."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import FABRIC_MANAGER, JOURNAL
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.health import gather_health, gpus_from_parsed
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import ReplaySource
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import category_of
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_health import (
    HEALTH_QUERY_FIELDS,
    HEALTH_QUERY_FIELDS_OLD,
    parse_health_query,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.report import render
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules import engine
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.xids import XIDS, xid_severity

from tests.unit.captures import (
    H100,
    H100_SICK,
    HYPERVISOR,
    I440FX,
    INCIDENT,
    MICROVM,
    NO_NVML,
    PRO6000,
    RTX4090,
    audit,
    audited,
    capture,
)

pytestmark = pytest.mark.capture


def by_id(findings: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in findings}


def evaluate(facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return by_id(engine.evaluate(facts))


@pytest.mark.parametrize("name", [H100, PRO6000, INCIDENT, I440FX, RTX4090, HYPERVISOR, MICROVM, NO_NVML])
def test_health_readings_of_healthy_hosts_add_no_finding(name: str) -> None:
    result = audited(name)
    assert "health" in result
    assert [f["id"] for f in result["findings"] if category_of(f["id"]) == "health"] == []


def test_the_h100_with_an_uncorrectable_memory_error() -> None:
    result = audited(H100_SICK)
    found = by_id(result["findings"])
    assert result["summary"]["verdict"] == "unfit"
    xid = found["xid_needs_reset"]
    assert xid["severity"] == "critical" and list(xid["evidence"]["xids"]) == ["48"]
    assert xid["evidence"]["events"][0].startswith("Xid 48 on GPU2 (0000:3a:00.0), 1 time(s), first at 51233.87102 s")
    assert "Xid 48: Drain the GPU and reset it" in xid["remedy"]
    others = found["xid_errors"]
    assert others["severity"] == "warning" and sorted(others["evidence"]["xids"]) == ["63", "94"]
    ecc = found["ecc_uncorrectable_errors"]
    assert ecc["severity"] == "critical"
    assert ecc["evidence"]["gpus"] == {"GPU2 (0000:3a:00.0)": {
        "mode_current": True, "uncorrected_volatile": 1, "uncorrected_aggregate": 1, "corrected_volatile": 3,
        "corrected_aggregate": 12}}
    assert ecc["evidence"]["limits"] == {"uncorrected_volatile": 0, "uncorrected_aggregate": 0}
    remap = found["row_remap_pending"]
    assert remap["evidence"]["gpus"]["GPU2 (0000:3a:00.0)"] == {"correctable": 0, "uncorrectable": 1,
                                                                "pending": True, "failed": False}
    clocks = found["gpu_clocks_slowdown"]
    assert clocks["evidence"]["gpus"]["GPU5 (0000:ab:00.0)"]["mask"] == "0x88"
    aer = found["pcie_aer_errors"]
    assert aer["severity"] == "warning"
    assert aer["evidence"]["devices"]["0000:aa:00.0 (port above GPU 0000:ab:00.0)"]["correctable"] == {
        "total": 240, "nonzero": {"BadTLP": 181, "BadDLLP": 57, "Rollover": 2}}
    assert "fabric_manager_inactive" not in found and "gpu_fabric_not_ready" not in found
    text = render.host_markdown(H100_SICK, result)
    assert "## Xid events in the kernel log" in text and "| 48 | 0000:3a:00.0 | 1 |" in text
    assert "## PCIe AER errors since boot" in text and "BadTLP 181" in text
    assert "| nvidia-fabricmanager |" in text.split("## NVSwitch fabric")[1].split("\n")[2]


def test_a_failed_row_remap_and_pending_page_retirement() -> None:
    facts = audited(H100)
    facts["health"]["gpus"][1]["row_remap"].update(uncorrectable=512, pending=False, failed=True)
    facts["health"]["gpus"][4]["retired_pages"].update(pending=True, double_bit=3)
    facts["health"]["gpus"][6]["ecc"].update(uncorrected_aggregate=2)
    found = evaluate(facts)
    assert found["row_remap_failed"]["severity"] == "critical"
    assert found["row_remap_failed"]["evidence"]["gpus"]["GPU1 (0000:2a:00.0)"]["uncorrectable"] == 512
    assert "RMA" in found["row_remap_failed"]["remedy"]
    assert found["retired_pages_pending"]["evidence"]["gpus"]["GPU4 (0000:9a:00.0)"]["double_bit"] == 3
    assert found["ecc_uncorrectable_errors"]["severity"] == "warning"  # lifetime only, none since boot


def test_fabric_manager_stopped_on_the_nvswitch_host() -> None:
    data = capture(H100)
    data["commands"][FABRIC_MANAGER.key] = {"rc": 3, "stdout": "failed\n", "stderr": ""}
    for device in data["nvml"]["devices"]:
        device["health"]["fabric"] = {"state": 1, "status": 0}
    result = audit(data)
    found = by_id(result["findings"])
    assert found["fabric_manager_inactive"]["evidence"] == {"nvswitches": 4, "service": "failed"}
    assert "systemctl enable --now nvidia-fabricmanager" in found["fabric_manager_inactive"]["remedy"]
    assert len(found["gpu_fabric_not_ready"]["evidence"]["gpus"]) == 8
    assert result["summary"]["verdict"] == "unfit"
    # A host without NVSwitches never asks systemctl.
    assert audited(PRO6000)["health"]["fabric_manager"] is None


def test_fatal_and_nonfatal_aer_errors() -> None:
    facts = audited(PRO6000)
    entry = facts["health"]["aer"][0]
    entry["nonfatal"] = {"total": 2, "nonzero": {"CmpltTO": 2}}
    assert evaluate(facts)["pcie_aer_errors"]["severity"] == "warning"
    entry["fatal"] = {"total": 1, "nonzero": {"SDES": 1}}
    assert evaluate(facts)["pcie_aer_errors"]["severity"] == "critical"
    entry["fatal"] = entry["nonfatal"] = None
    entry["correctable"] = {"total": 99, "nonzero": {"BadTLP": 99}}
    assert "pcie_aer_errors" not in evaluate(facts)  # under AER_CORRECTABLE_LIMIT


def test_the_xid_table() -> None:
    assert {13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 154} <= set(XIDS)
    assert all(x.name and x.meaning and x.action for x in XIDS.values())
    assert xid_severity(48) == "critical" and xid_severity(13) == "warning" and xid_severity(43) == "info"
    assert xid_severity(999) == "warning"
    assert xid_severity(154, "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)") == "info"
    assert xid_severity(154, "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)") == "critical"


def test_xids_that_only_follow_other_errors_are_information() -> None:
    facts = audited(H100)
    facts["health"]["kernel_log"]["xid_events"] = [
        {"kind": "xid", "xid": 43, "pci_bus_id": "0000:18:00.0", "count": 3, "first_uptime_s": 10.0,
         "last_uptime_s": 20.0, "first_time": None, "last_time": None, "message": "Ch 00000008", "processes": []},
        {"kind": "xid", "xid": 45, "pci_bus_id": "0000:18:00.0", "count": 1, "first_uptime_s": 20.5,
         "last_uptime_s": 20.5, "first_time": None, "last_time": None, "message": "Ch 00000008", "processes": []}]
    found = evaluate(facts)
    assert found["xid_errors"]["severity"] == "info" and "xid_needs_reset" not in found
    facts["health"]["kernel_log"]["xid_events"][0]["xid"] = 4242
    assert evaluate(facts)["xid_errors"]["severity"] == "warning"
    assert "NVIDIA's Xid catalog" in evaluate(facts)["xid_errors"]["remedy"]


def test_the_journal_when_dmesg_is_refused() -> None:
    data = capture(RTX4090)  # audited without root: dmesg refused
    data["commands"][JOURNAL.key] = {"rc": 0, "stderr": "", "stdout": (
        "Mar 03 10:00:01 ws kernel: NVRM: Xid (PCI:0000:16:00): 13, pid=4242, name=python, Graphics Exception\n")}
    kernel_log = audit(data)["health"]["kernel_log"]
    assert kernel_log["source"] == "journal" and kernel_log["xid_events"][0]["first_time"] == "Mar 03 10:00:01"
    data["commands"][JOURNAL.key] = {"rc": 1, "stdout": "", "stderr": "No journal files were found.\n"}
    result = audit(data)
    assert result["health"]["kernel_log"]["source"] is None
    assert {"what": JOURNAL.key, "error": "No journal files were found."} in result["problems"]
    assert audited(RTX4090)["health"]["kernel_log"] == {"source": None, "events": 0, "xid_events": [],
                                                        "sxid_events": []}


def test_a_refused_kernel_log_is_a_problem_even_without_the_virtualization_subset() -> None:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
    from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

    result = facts.audit(ReplaySource(capture(RTX4090)), ["gpus"], RuleOptions())
    assert {"what": "dmesg", "error": "dmesg: read kernel buffer failed: Operation not permitted"} in result["problems"]
    # With every subset, virt.py and the kernel log note it once.
    assert [p["what"] for p in audited(RTX4090)["problems"]].count("dmesg") == 1


def test_nvidia_smi_health_query_of_old_and_new_drivers() -> None:
    line = "0, 00000000:18:00.0, Enabled, Enabled, 1, 3, 0, 12, No, 0, 2, 0x0000000000000088\n"
    row = parse_health_query(line)[0]
    assert row["ecc_uncorrected_volatile"] == 1 and row["retired_pages_dbe"] == 2
    assert row["clocks_event_reasons"] == 0x88 and row["retired_pages_pending"] == 0
    na = parse_health_query("0, 00000000:18:00.0, [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], "
                            "0x0000000000000001\n")[0]
    assert na["ecc_mode_current"] is None and na["errors"]["ecc_uncorrected_volatile"] == "[N/A]"
    # A driver before R530 refuses the new clocks field; the audit asks again with the old one. (Without the
    # nvidia-smi -q -x answer, which the health query only stands in for.)
    data = capture(NO_NVML)
    del data["commands"]["nvidia-smi -q -x"]
    new = f"nvidia-smi --query-gpu={','.join(HEALTH_QUERY_FIELDS)} --format=csv,noheader,nounits"
    old = f"nvidia-smi --query-gpu={','.join(HEALTH_QUERY_FIELDS_OLD)} --format=csv,noheader,nounits"
    answer = data["commands"][new]
    data["commands"][new] = {"rc": 2, "stdout": 'Field "clocks_event_reasons.active" is not a valid field to '
                             "query.\n\n", "stderr": ""}
    data["commands"][old] = answer
    assert len(audit(data)["health"]["gpus"]) == 8
    data["commands"][old] = {"rc": 0, "stdout": "garbage\n", "stderr": ""}
    result = audit(data)
    assert result["health"]["gpus"] == [] and any(p["what"] == old for p in result["problems"])


def test_the_seam_for_another_nvidia_smi_parser() -> None:
    """Per-GPU dicts from a parser of `nvidia-smi -q -x` give the same facts as NVML's readings."""
    rows = [{"index": 0, "pci_bus_id": "00000000:3A:00.0", "ecc_mode_current": True, "ecc_uncorrected_volatile": 1,
             "remapped_rows": {"correctable": 0, "uncorrectable": 1, "pending": True, "failure": False},
             "clocks_event_reasons": 0x1, "fabric": {"state": 3, "status": 0}}]
    parsed = gpus_from_parsed(rows, "nvidia-smi -q")
    assert parsed[0]["pci_bus_id"] == "0000:3a:00.0" and parsed[0]["row_remap"]["pending"] is True
    assert parsed[0]["fabric"] == {"state": "completed", "status": "success"}
    source = ReplaySource(capture(H100))
    health = gather_health(source, {"nvidia_devices": []}, {"source": None}, source.nvml(), parsed_gpus=parsed)
    assert health["gpus_source"] == "nvidia-smi -q" and health["gpus"] == parsed
    facts = audited(H100)
    facts["health"]["gpus"] = parsed
    assert {"ecc_uncorrectable_errors", "row_remap_pending"} <= set(evaluate(facts))
    # The flat view nvidia_smi_q.health_view gives, with the GPU's index and bus id added.
    view = {"index": 1, "pci_bus_id": "0000:2a:00.0", "ecc_mode": True, "ecc_uncorrected_volatile": 0,
            "ecc_uncorrected_aggregate": 4, "retired_pages_pending": None, "remapped_rows_pending": False,
            "remapped_rows_failed": True, "clocks_event_reasons": ["sw_power_cap", "hw_slowdown"],
            "persistence_mode": True}
    gpu = gpus_from_parsed([view], "nvidia-smi -q")[0]
    assert gpu["ecc"]["mode_current"] is True and gpu["row_remap"]["failed"] is True
    assert gpu["clocks_event_reasons"] == {"mask": 0xC, "active": ["sw_power_cap", "hw_slowdown"]}
    facts["health"]["gpus"] = [gpu]
    assert {"row_remap_failed", "gpu_clocks_slowdown", "ecc_uncorrectable_errors"} <= set(evaluate(facts))
