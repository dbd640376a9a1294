"""The before/after report of a P2P fix (report/p2p_fix.py, p2p_fix_md.py) over the incident's replayed results."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.p2p_fix import (
    allreduce_times,
    compare,
    measurement,
    probe_proof,
    read_state,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.p2p_fix_md import render

NS = [["X", "NS", "NS"], ["NS", "X", "NS"], ["NS", "NS", "X"]]
OK = [["X", "OK", "OK"], ["OK", "X", "OK"], ["OK", "OK", "X"]]


def proof(access: bool, wrong: int = 0) -> list[list[Any]]:
    cell = {"peer_access": access, "ce_wrong": wrong, "sm_wrong": 0, "zeros_at_destination": 0, "elements": 8}
    return [[None if i == j else dict(cell) for j in range(3)] for i in range(3)]


def facts(matrix: list[list[str]], findings: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"summary": {"verdict": "unfit" if findings else "fit", "virtualization": "KVM virtual machine"},
            "p2p": {"read": matrix}, "findings": [{"id": f} for f in findings]}


def nccl(times: dict[int, float] | None) -> dict[str, Any]:
    if times is None:
        return {"failed": True, "msg": "cannot read the nccl-tests log nccl.txt"}
    return {"results": [{"size_bytes": s, "out_of_place": {"time_us": t}} for s, t in times.items()],
            "communication_ceiling": {"summary": "all-reduce alone limits decode", "batch_1": {
                "model": "GLM-5", "tensor_parallel_size": 8, "max_tokens_per_s_single_stream": 467.9},
                "batch_64": {"batch": 64, "max_tokens_per_s_aggregate": 1459.4}}}


BEFORE = measurement(facts(NS, ("p2p_not_supported",)),
                     {"probe": {"proof": proof(False), "source": "probe-log"}, "nccl": nccl({12288: 13.7, 1024: 12.0})})
AFTER = measurement(facts(OK), {"probe": {"proof": proof(True), "source": "probe-log"}, "nccl": nccl({12288: 4.2})})


def report(after: dict[str, Any] | None = AFTER, restored: dict[str, Any] | None = None) -> dict[str, Any]:
    change = {"changes": [{"key": "cpu", "old": "host,hidden=1", "new": "host"}], "backup": "/b/120.conf.1",
              "command_line": "qm set 120 --cpu host", "restarted": True}
    return compare(guest="glm5-vm", node="pve1", vmid=120, date="2026-12-03 10:00 UTC", before=BEFORE,
                   after=after, change=change, restored=restored)


@pytest.mark.parametrize(("matrix", "state"), [(NS, "none"), (OK, "ok"), (None, None), ([["X"]], None),
                                               ([["X", "OK"], ["NS", "X"]], "partial")])
def test_read_state(matrix: Any, state: str | None) -> None:
    assert read_state(matrix) == state


def test_fixed_when_every_pair_is_ok_and_proven() -> None:
    made = report()
    assert made["verdict"] == "fixed" and made["before"]["p2p_read_state"] == "none"
    assert made["after"]["probe"] == {**made["after"]["probe"], "pairs": 6, "proven_pairs": 6, "data_check": "passed"}
    assert made["before"]["probe"]["peer_access_pairs"] == 0 and made["before"]["probe"]["proven_pairs"] == 0
    assert made["latency"] == [{"size_bytes": 1024, "before_us": 12.0, "after_us": None, "speedup": None},
                               {"size_bytes": 12288, "before_us": 13.7, "after_us": 4.2, "speedup": 3.26}]
    assert made["before"]["ceiling"]["single_stream_tokens_per_s"] == 467.9
    assert made["before"]["ceiling"]["batch"] == 64


def test_data_that_does_not_arrive_fails_the_check() -> None:
    probe = probe_proof({"proof": proof(True, wrong=3)})
    assert probe["data_check"] == "failed" and probe["data_wrong_pairs"] == 6 and probe["proven_pairs"] == 0
    broken = measurement(facts(OK), {"probe": {"proof": proof(True, wrong=3)}})
    assert report(broken)["verdict"] == "not_fixed"


def test_a_probe_that_did_not_run_proves_nothing() -> None:
    unproven = measurement(facts(OK), {"probe": {"failed": True, "msg": "no torch"}, "nccl": nccl(None)})
    made = report(unproven)
    assert made["verdict"] == "granted_unproven"
    assert made["after"]["probe"]["pairs"] is None and made["after"]["probe"]["why_not"] == "no torch"
    assert made["after"]["ceiling"] is None and made["after"]["allreduce_us"] == {}
    assert "cannot read the nccl-tests log" in made["after"]["allreduce_why_not"]


def test_pending_and_restored() -> None:
    assert report(after=None)["verdict"] == "pending"
    undone = report(restored={"reason": "the guest did not come back", "backup": "/b/120.conf.1"})
    assert undone["verdict"] == "restored" and "did not come back" in undone["summary"]
    assert "## Restored" in render(undone)


def test_markdown_shows_both_matrices_and_the_latency() -> None:
    text = render(report())
    assert "| GPU0 | X | NS | NS |" in text and "| GPU0 | X | OK | OK |" in text
    assert "| 12 KiB (12288 B) | 13.7 | 4.2 | 3.26 |" in text
    assert "`qm set 120 --cpu host`" in text and "| cpu | host,hidden=1 | host |" in text
    assert render(report(after=None)).count("Not measured.") == 1


def test_odd_results_give_nulls_not_errors() -> None:
    odd = measurement({"p2p": {"read": "garbage"}, "findings": ["x", None]},
                      {"probe": {"proof": [[None, "cell"], 7]}, "nccl": {"results": [{"size_bytes": "8"}, None]}})
    assert odd["p2p_read"] is None and odd["probe"]["ran"] is False and odd["allreduce_us"] == {}
    assert allreduce_times({"results": [{"size_bytes": 8, "in_place": {"time_us": 2}}]}) == {8: 2.0}
    assert "Not measured on either side." not in render(report(copy.deepcopy(odd)))


@pytest.mark.parametrize(("p2p", "state", "capability"), [
    # The P2P rule's one judgement (rules/p2p_evidence.py), not the read matrix alone.
    ({"write": NS}, "none", "write"),  # NS under write denies peer access as under read
    ({"read+write": NS}, "none", "read+write"),
    ({"not_stated": [["X", "GNS"], ["GNS", "X"]]}, "none", "not_stated"),  # GNS: no P2P whatever the capability
    ({"nvlink": NS}, None, "nvlink"),  # NS under NVLink is every PCIe card's normal answer: nothing proved
    ({"nvlink": NS, "read": OK}, "ok", "read"),  # the read matrix decides over another capability
])
def test_the_p2p_state_is_the_one_the_p2p_rule_judges_from(p2p, state, capability) -> None:
    side = measurement({"p2p": p2p}, {})
    assert side["p2p_read_state"] == state
    assert side["p2p_capability"] == capability


def test_the_report_names_the_matrix_it_compared() -> None:
    before = measurement({"p2p": {"write": NS}}, {})
    after = measurement({"p2p": {"write": OK}}, {})
    made = compare(guest="g", node="pve", vmid=120, date=None, before=before, after=after,
                   change={"changes": [], "command_line": None, "backup": None, "restarted": True})
    assert made["verdict"] == "granted_unproven"
    assert "## P2P write (nvidia-smi topo -p2p w)" in render(made)
