"""gate/accept_list.py: an accept list written for an older version keeps working. A retired id renamed in the
catalog is read as its successor, one retired without a successor accepts nothing; each is said in a note."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings import catalog
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import CATALOG, Entry
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.accept_list import read_accept

from tests.unit.captures import INCIDENT, audited
from tests.unit.gate.test_ceiling import GLM5


def test_the_retired_comm_floor_is_read_as_communication_ceiling() -> None:
    notes: list[str] = []
    assert read_accept(["comm_floor", " p2p_not_supported "], "deploy_accept_findings", notes) == {
        "communication_ceiling": "comm_floor", "p2p_not_supported": "p2p_not_supported"}
    assert notes == ["deploy_accept_findings lists comm_floor, a retired finding id (renamed communication_ceiling): "
                     "it is read as communication_ceiling; write communication_ceiling in the list instead"]


def test_the_retired_model_profile_invalid_is_read_as_model_invalid() -> None:
    notes: list[str] = []
    assert read_accept(["model_profile_invalid"], "deploy_accept_findings", notes) == {
        "model_invalid": "model_profile_invalid"}
    assert notes == ["deploy_accept_findings lists model_profile_invalid, a retired finding id (renamed "
                     "model_invalid): it is read as model_invalid; write model_invalid in the list instead"]


def test_the_new_id_written_too_is_taken_as_written() -> None:
    notes: list[str] = []
    accepted = read_accept(["comm_floor", "communication_ceiling"], "accept", notes)
    assert accepted == {"communication_ceiling": "communication_ceiling"}
    assert len(notes) == 1


@pytest.mark.parametrize("accept", [None, [], [3, None, "  "]])
def test_nothing_to_read_says_nothing(accept: object) -> None:
    notes: list[str] = []
    assert read_accept(accept, "accept", notes) == {}
    assert notes == []


def test_not_a_list_accepts_nothing_and_says_so() -> None:
    notes: list[str] = []
    assert read_accept("p2p_not_supported", "deploy_accept_findings", notes) == {}
    assert notes == ["deploy_accept_findings: expected a list of finding ids; found str, so nothing is accepted"]


def test_a_retired_id_without_a_successor_accepts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = Entry("old_check", "audit", "info", "an old check", "nothing", retired="the check was wrong")
    monkeypatch.setattr(catalog, "CATALOG", {**CATALOG, "old_check": gone})
    notes: list[str] = []
    assert read_accept(["old_check"], "accept", notes) == {}
    assert notes == ["accept lists old_check, a retired finding id (the check was wrong): no finding is raised "
                     "under it any more, so it accepts nothing; remove it from the list"]


def test_a_renamed_critical_id_still_accepts_its_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    # The incident guest has no P2P: accepted under today's id it passes; under a retired name of that id too.
    renamed = Entry("p2p_missing", "p2p", "critical", "old name", "nothing", retired="renamed p2p_not_supported",
                    renamed_to="p2p_not_supported")
    monkeypatch.setattr(catalog, "CATALOG", {**CATALOG, "p2p_missing": renamed})
    today = gate.decide(audited(INCIDENT), GLM5, accept=["p2p_not_supported"])
    older = gate.decide(audited(INCIDENT), GLM5, accept=["p2p_missing"])
    assert today["verdict"] == older["verdict"] == "pass"
    assert [a["id"] for a in older["accepted"]] == [a["id"] for a in today["accepted"]]
    assert "p2p_not_supported" in {a["id"] for a in older["accepted"]}
    assert any(n.startswith("accept lists p2p_missing, a retired finding id") for n in older["notes"])
    assert not any("matched no critical finding" in n for n in older["notes"])


def test_the_gate_names_the_retired_id_as_the_user_wrote_it() -> None:
    # communication_ceiling is an info finding, never a blocking one: accepting it, under either name, accepts
    # nothing, and the note says so with the name the list gave.
    result = gate.decide(audited(INCIDENT), GLM5, accept=["p2p_not_supported", "comm_floor"])
    assert result["verdict"] == "pass"
    assert any("lists comm_floor, a retired finding id (renamed communication_ceiling): it is read as "
               "communication_ceiling" in n for n in result["notes"])
    assert any(n.startswith("accept lists comm_floor, which matched no critical finding here") for n in result["notes"])
