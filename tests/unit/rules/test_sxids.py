"""SXid findings on a real H100 HGX capture whose kernel log gains real SXid lines; silent without them."""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.sxids import rule_sxid
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

from tests.paths import FIXTURES
from tests.unit import captures

LOGS = FIXTURES / "kernel-log"


def audited_with(*fixtures: str) -> dict:
    data = captures.capture(captures.H100)
    data["commands"]["dmesg"]["stdout"] += "".join((LOGS / name).read_text() for name in fixtures)
    return captures.audit(data)


def ids(found: dict) -> dict[str, dict]:
    return {f["id"]: f for f in found["findings"] if f["id"].startswith("nvswitch_sxid")}


def test_the_healthy_hgx_capture_has_no_sxid_and_no_finding() -> None:
    found = captures.audited(captures.H100)
    assert found["health"]["kernel_log"]["sxid_events"] == []
    assert ids(found) == {}


def test_non_fatal_sxids_are_a_warning_that_names_the_code() -> None:
    found = audited_with("dmesg_570_nvswitch-sxid-22013-non-fatal_cut.txt")
    finding = ids(found)["nvswitch_sxid_errors"]
    assert finding["severity"] == "warning" and finding["action"] == "none"
    assert "SXid 22013 (Minion Link DLREQ interrupt) on nvidia-nvswitch3 (0000:04:00.0), 3 time(s), non-fatal" in \
        finding["summary"]
    assert "22013 is Minion Link DLREQ interrupt" in finding["remedy"]
    assert found["summary"]["verdict"] == "fit, with warnings"


def test_a_code_documented_fatal_makes_the_host_unfit_even_when_the_line_did_not_say() -> None:
    found = audited_with("dmesg-human_nvswitch-sxid-12028-data-only.txt")
    finding = ids(found)["nvswitch_sxid_fatal"]
    assert finding["severity"] == "critical" and finding["action"] == "reboot"
    assert "severity not printed" in finding["summary"]
    assert (found["summary"]["verdict"], found["summary"]["action"]) == ("unfit", "reboot")


def test_the_drivers_word_wins_and_an_unknown_unstated_code_is_only_a_warning() -> None:
    facts = {"health": {"kernel_log": {"sxid_events": [
        {"sxid": 22013, "switch": 0, "pci_bus_id": "0000:c1:00.0", "count": 1, "fatal": True, "message": "x"},
        {"sxid": 99999, "switch": 0, "pci_bus_id": "0000:c1:00.0", "count": 2, "fatal": None, "message": None},
    ]}}}
    found = {f.id: f for f in rule_sxid(facts, RuleOptions())}
    assert found["nvswitch_sxid_fatal"].evidence["sxid_events"][0]["sxid"] == 22013
    assert found["nvswitch_sxid_errors"].evidence["sxid_events"][0]["sxid"] == 99999
    assert "99999 not in this project's table" in found["nvswitch_sxid_errors"].remedy
