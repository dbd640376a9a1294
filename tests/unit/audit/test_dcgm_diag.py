"""DCGM's diagnostic verdicts, from material or from dcgmi run on the host when asked: a failed test is
critical with DCGM's words and GPU ids, a warned one a warning, no verdict (not installed, timed out, cut) is
said and never a pass; not asked, nothing is run and nothing is said."""

from __future__ import annotations

import sys

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import source as source_module
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_format import command_key
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import DCGM_DIAG
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.dcgm_diag import gather_dcgm_diag
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import LiveSource
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import Piece
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_readers import replay
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

from tests.paths import FIXTURES
from tests.unit import captures, schemas
from tests.unit.material.test_capture import incident

DCGM = FIXTURES / "dcgm"


def dcgm_findings(found: dict) -> dict[str, dict]:
    return {f["id"]: f for f in found["findings"] if f["id"].startswith("dcgm_diag")}


def from_material(name: str) -> dict:
    capture = incident(Piece("diag.json", (DCGM / name).read_bytes()))
    return facts.audit(replay(capture), facts.resolve_subsets(["all"]), RuleOptions())


def test_a_pasted_4x_failure_is_critical_and_names_test_gpu_and_dcgm_s_message() -> None:
    found = from_material("4.x_r2_memory_fail_gpu2.json")
    assert found["health"]["dcgm_diag"]["source"] == "material"
    finding = dcgm_findings(found)["dcgm_diag_failed"]
    assert (finding["severity"], finding["action"]) == ("critical", "drain")
    assert "memory on GPU 2: Error using CUDA API cudaMalloc Detected 4 uncorrectable" in finding["summary"]
    assert "[DCGM error 17]" in finding["summary"]
    assert finding["evidence"]["tests"] == [{"category": "Hardware", "test": "memory", "gpus": [2],
                                             "messages": [finding["evidence"]["tests"][0]["messages"][0]]}]
    assert found["summary"]["verdict"] != "fit"


def test_a_pasted_warning_is_a_warning_and_a_healthy_run_says_nothing() -> None:
    warned = dcgm_findings(from_material("4.x_r1_software_warn_persistence.json"))
    assert set(warned) == {"dcgm_diag_warned"} and warned["dcgm_diag_warned"]["action"] == "none"
    assert "software on GPU 0: Persistence mode for GPU 0 is disabled" in warned["dcgm_diag_warned"]["summary"]
    assert dcgm_findings(from_material("4.x_r1_pass.json")) == {}


def test_the_issue_139_paste_is_material_its_skips_are_no_finding() -> None:
    capture = incident(Piece("dcgmi_diag_r3.json", (DCGM / "3.x_r3_t400_skips_closed.json").read_bytes()))
    assert [i["kind"] for i in capture["from_material"]["inputs"]][-1] == "dcgm-diag-json"
    assert any("DCGM diagnostic" in s["what"] for s in capture["from_material"]["seen"])
    found = facts.audit(replay(capture), facts.resolve_subsets(["all"]), RuleOptions())
    assert found["health"]["dcgm_diag"]["result"]["elided"] == 1
    assert dcgm_findings(found) == {}


def test_a_cut_paste_gives_no_verdict_and_says_why() -> None:
    found = from_material("3.x_r3_t400_skips_cut.txt")
    assert found["health"]["dcgm_diag"]["result"] is None
    finding = dcgm_findings(found)["dcgm_diag_not_run"]
    assert finding["severity"] == "info" and "cut short" in finding["summary"]


def test_not_asked_nothing_is_run_and_the_facts_keep_their_old_shape() -> None:
    found = captures.audited(captures.H100)
    assert "dcgm_diag" not in found["health"] and dcgm_findings(found) == {}


def test_asked_on_a_host_without_dcgm_the_audit_goes_on_with_the_reason() -> None:
    data = captures.capture(captures.H100)
    found = facts.audit(replay(data), facts.resolve_subsets(["all"]), RuleOptions(), dcgm_diag=True)
    assert found["health"]["dcgm_diag"] == {"source": "dcgmi", "level": 1, "result": None,
                                            "reason": found["health"]["dcgm_diag"]["reason"]}
    assert "dcgmi is not installed" in found["health"]["dcgm_diag"]["reason"]
    assert set(dcgm_findings(found)) == {"dcgm_diag_not_run"}
    assert found["summary"]["verdict"] == captures.audited(captures.H100)["summary"]["verdict"]


def test_asked_the_recorded_run_of_dcgmi_is_judged() -> None:
    data = captures.capture(captures.H100)
    data["commands"][command_key(DCGM_DIAG.argv)] = {
        "rc": 0, "stdout": (DCGM / "4.x_r2_memory_fail_gpu2.json").read_text(), "stderr": ""}
    found = facts.audit(replay(data), facts.resolve_subsets(["all"]), RuleOptions(), dcgm_diag=True)
    assert found["health"]["dcgm_diag"]["source"] == "dcgmi"
    assert "dcgm_diag_failed" in dcgm_findings(found)
    # Not asked, the same capture's recorded run is not read: the option decides, not what a capture holds.
    assert "dcgm_diag" not in facts.audit(replay(data), facts.resolve_subsets(["all"]), RuleOptions())["health"]


def test_the_live_run_has_its_own_timeout_and_a_missing_dcgmi_is_not_installed(monkeypatch) -> None:

    source = LiveSource()
    slow = source.run_long([sys.executable, "-c", "import time; time.sleep(30)"], 1)
    assert slow.rc == 124 and "no answer within 1 s" in slow.stderr
    monkeypatch.setattr(source_module, "COMMAND_TIMEOUT_S", 30)
    assert gather_dcgm_diag(LiveSource(env={"PATH": "/nonexistent"}), True)["reason"].startswith(
        "dcgmi is not installed")


@pytest.mark.parametrize("rc, stdout, stderr, says", [
    (124, "", "no answer", "no answer within 300 s"),
    (255, "", "Error: unable to establish a connection to the specified host: localhost", "exited 255 and said: "
                                                                                          "Error: unable"),
])
def test_a_run_that_gave_no_document_says_what_dcgmi_did(rc, stdout, stderr, says) -> None:
    data = {"format": "gpuhost-capture/1", "commands": {command_key(DCGM_DIAG.argv): {"rc": rc, "stdout": stdout,
                                                                                       "stderr": stderr}}}
    diag = gather_dcgm_diag(replay(data), True)
    assert diag["result"] is None and says in diag["reason"]


@pytest.mark.parametrize("name", ["4.x_r2_memory_fail_gpu2.json", "3.x_r3_t400_skips_cut.txt",
                                  "3.x_r3_t400_skips_closed.json"])
def test_the_facts_with_a_dcgm_diagnostic_follow_the_published_schema(name: str) -> None:
    errors = sorted(schemas.validator("facts").iter_errors(from_material(name)), key=str)
    assert not errors, errors[0].message
