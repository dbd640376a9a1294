"""report/slurm_drain.py: what the verdict asks of a Slurm node, read off the one judgement, over scontrol's real
output (Slurm 22.05.8, Debian 12, captured from the cluster tests/unit/tooling/test_gpu_prolog_slurm.py starts)."""

from __future__ import annotations

import contextlib

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.slurm_drain import (
    Node,
    NodeStateError,
    decide,
    drain_reason,
    read_node,
)
from hypothesis import given
from hypothesis import strategies as st

from tests.unit import captures

IDLE = (
    'NodeName=gpu1 Arch=x86_64 CoresPerSocket=1 \n'
    '   CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=4.86\n'
    '   AvailableFeatures=(null)\n'
    '   ActiveFeatures=(null)\n'
    '   Gres=(null)\n'
    '   NodeAddr=127.0.0.1 NodeHostName=localhost Version=22.05.8\n'
    '   OS=Linux 6.18.44-fc-v1300 #1 SMP PREEMPT_DYNAMIC @0 \n'
    '   RealMemory=1 AllocMem=0 FreeMem=17115 Sockets=1 Boards=1\n'
    '   State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n'
    '   Partitions=debug \n'
    '   BootTime=2026-12-07T03:02:27 SlurmdStartTime=2026-12-07T12:24:05\n'
    '   LastBusyTime=2026-12-07T12:24:06\n'
    '   CfgTRES=cpu=1,mem=1M,billing=1\n'
    '   AllocTRES=\n'
    '   CapWatts=n/a\n'
    '   CurrentWatts=0 AveWatts=0\n'
    '   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s\n'
    '\n'
)
DRAINED = (
    'NodeName=gpu1 Arch=x86_64 CoresPerSocket=1 \n'
    '   CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=4.86\n'
    '   AvailableFeatures=(null)\n'
    '   ActiveFeatures=(null)\n'
    '   Gres=(null)\n'
    '   NodeAddr=127.0.0.1 NodeHostName=localhost Version=22.05.8\n'
    '   OS=Linux 6.18.44-fc-v1300 #1 SMP PREEMPT_DYNAMIC @0 \n'
    '   RealMemory=1 AllocMem=0 FreeMem=17115 Sockets=1 Boards=1\n'
    '   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n'
    '   Partitions=debug \n'
    '   BootTime=2026-12-07T03:02:27 SlurmdStartTime=2026-12-07T12:24:05\n'
    '   LastBusyTime=2026-12-07T12:24:06\n'
    '   CfgTRES=cpu=1,mem=1M,billing=1\n'
    '   AllocTRES=\n'
    '   CapWatts=n/a\n'
    '   CurrentWatts=0 AveWatts=0\n'
    '   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s\n'
    '   Reason=gpuhost: drain; critical: p2p_not_supported; report /var/lib/gpuhost/gpu1.json'
    ' [root@2026-12-07T12:24:07]\n'
    '\n'
)


def test_scontrol_output_gives_the_state_and_the_reason_without_who_set_it() -> None:
    assert read_node(IDLE) == Node("IDLE", None)
    node = read_node(DRAINED)
    assert node == Node("IDLE+DRAIN", "gpuhost: drain; critical: p2p_not_supported; report /var/lib/gpuhost/gpu1.json")
    assert node.drained and node.ours
    # CRLF, a not-responding node, a draining one with a job, another's reason.
    crlf = read_node(DRAINED.replace("IDLE+DRAIN", "MIXED*+DRAIN").replace("\n", "\r\n"))
    assert crlf.drained and crlf.ours and crlf.reason.endswith("gpu1.json")
    other = read_node(DRAINED.replace("Reason=gpuhost: drain", "Reason=fan swap, gpuhost: drain"))
    assert other.drained and not other.ours


@pytest.mark.parametrize("text", ["", "Node gpu9 not found", "NodeName=gpu1 Arch=x86_64"])
def test_no_state_is_a_clear_error(text: str) -> None:
    with pytest.raises(NodeStateError, match="expected scontrol show node's output with a State= field"):
        read_node(text)


@given(st.text())
def test_any_text_gives_a_node_or_its_own_error(text: str) -> None:
    with contextlib.suppress(NodeStateError):
        read_node(text)


IDLE_NODE, OURS, OTHERS = Node("IDLE", None), read_node(DRAINED), Node("IDLE+DRAIN", "fan swap")
UNFIT, FIT = captures.audited(captures.INCIDENT), captures.audited(captures.PRO6000)
WARNED = {"summary": {"verdict": "fit, with warnings", "action": "none"}, "findings": []}
NOT_JUDGED = {"summary": {"verdict": "not judged", "action": "none"}, "findings": []}
NOT_JUDGED_DRAIN = {"summary": {"verdict": "not judged", "action": "drain"},
                    "findings": [{"id": "pcie_link_narrow", "severity": "warning"}]}
UNFIT_NO_ACTION = {"summary": {"verdict": "unfit", "action": "none"}, "findings": []}


@pytest.mark.parametrize(("facts", "node", "act"), [
    (FIT, IDLE_NODE, "leave"),
    (UNFIT, IDLE_NODE, "drain"),
    (UNFIT, OURS, "leave"),
    (FIT, OURS, "resume"),
    (WARNED, OURS, "resume"),
    # Never resumed without a fit verdict, never drained for a verdict that asks no action.
    (NOT_JUDGED, OURS, "leave"),
    (NOT_JUDGED, IDLE_NODE, "leave"),
    (NOT_JUDGED_DRAIN, IDLE_NODE, "drain"),
    (UNFIT_NO_ACTION, OURS, "leave"),
    ({}, OURS, "leave"),
    ({"summary": {"verdict": "unfit", "action": "explode"}}, IDLE_NODE, "leave"),
    # Someone else's drain is theirs, whatever the verdict.
    (FIT, OTHERS, "leave"),
    (UNFIT, OTHERS, "leave"),
], ids=["fit", "unfit", "unfit-again", "fixed", "warned-fixed", "not-judged-ours", "not-judged", "not-judged-drain",
        "unfit-no-action", "no-verdict", "unknown-action", "others-fit", "others-unfit"])
def test_what_the_verdict_asks_of_the_node(facts: dict, node: Node, act: str) -> None:
    assert decide(facts, node, "/r/h.json").act == act


def test_the_drain_reason_names_the_action_the_findings_and_the_report() -> None:
    decision = decide(UNFIT, IDLE_NODE, "/var/lib/gpuhost/gpu1.json")
    assert decision.reason == "gpuhost: drain; critical: p2p_not_supported; report /var/lib/gpuhost/gpu1.json"
    assert decision.reason == drain_reason(UNFIT, "/var/lib/gpuhost/gpu1.json")
    assert drain_reason(UNFIT, None).endswith("; no report written (--json FILE)")
    assert "\n" not in drain_reason({"summary": {"action": "drain"}, "findings": [
        {"id": "a\nb", "severity": "critical"}]}, "x")
