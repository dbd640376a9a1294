"""What a reader of a host's report meets first: the verdict's scope, what to do next, the P2P matrices in order."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.report import render as report
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.markdown import anchor, fenced
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.scope import two_hosts, verdict_scope
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import enrich_guest_findings

from tests.unit.captures import H100, HYPERVISOR, INCIDENT, MICROVM, MISMATCH, RTX4090, audited
from tests.unit.report.test_report import FACTS

NO_CLIQUE = "proxmox-host-8xRTXPRO6000-vm-no-clique"


def facts(**changes: Any) -> dict[str, Any]:
    copied = json.loads(json.dumps(FACTS))
    copied.update(changes)
    return copied


def headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")]


def section(text: str, heading: str) -> str:
    """The lines of one "## " section, without its heading."""
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


# ---------------------------------------------------------------------------
# P2P matrices: read first, identical ones folded


def test_five_identical_matrices_are_one_table_with_a_line_saying_so() -> None:
    text = report.host_markdown("h100", audited(H100))
    assert [h for h in headings(text) if h.startswith("## P2P")] == ["## P2P read matrix"]
    assert "The write, nvlink, atomics and pci matrices are identical to read." in text
    assert text.count("| GPU7 | OK | OK | OK | OK | OK | OK | OK | X |") == 1


def test_the_read_matrix_comes_first_and_each_distinct_one_is_shown_once() -> None:
    text = report.host_markdown("rtx4090", audited(RTX4090))
    # read (quoted by the summary) before nvlink, whichever order the facts hold them in.
    assert [h for h in headings(text) if h.startswith("## P2P")] == ["## P2P read matrix", "## P2P nvlink matrix"]
    assert "The write and pci matrices are identical to read." in text
    assert "The atomics matrix is identical to nvlink." in text


def test_matrices_that_differ_are_all_shown_in_order_whatever_order_the_facts_hold() -> None:
    p2p = {"pci": [["X", "OK"], ["OK", "X"]], "atomics": [["X", "NS"], ["NS", "X"]],
           "write": [["X", "CNS"], ["CNS", "X"]], "read": [["X", "GNS"], ["GNS", "X"]],
           "nvlink": [["X", "TNS"], ["TNS", "X"]]}
    text = report.host_markdown("h", facts(p2p=p2p))
    assert [h for h in headings(text) if h.startswith("## P2P")] == [
        "## P2P read matrix", "## P2P write matrix", "## P2P nvlink matrix", "## P2P atomics matrix",
        "## P2P pci matrix"]
    assert "identical" not in text
    # The same facts with the keys in another order give the same bytes.
    assert report.host_markdown("h", facts(p2p=dict(sorted(p2p.items())))) == text


# ---------------------------------------------------------------------------
# The verdict's scope


def scope_line(text: str) -> str:
    lines = text.splitlines()
    assert lines[2].startswith("**Verdict: ") and lines[4].startswith("Verdict scope: ")
    return lines[4]


@pytest.mark.parametrize("name", [NO_CLIQUE, HYPERVISOR])
def test_a_hypervisor_is_judged_as_one(name: str) -> None:
    line = scope_line(report.host_markdown(name, audited(name)))
    assert line.startswith("Verdict scope: judged as a hypervisor: its ")
    assert "GPUs are bound to vfio-pci for guests" in line
    assert "Serving fitness is judged in each guest's own audit" in line
    # Only a Proxmox node's VM configs are judged.
    assert ("the configs of its 1 VM(s) that pass devices through" in line) == (name == NO_CLIQUE)


def test_an_unfit_hypervisor_says_its_verdict_is_about_its_vms() -> None:
    found = audited(NO_CLIQUE)
    assert found["summary"]["verdict"] == "unfit"
    assert "| hypervisor |" in report.fleet_markdown({"pve": found})


def test_a_host_unfit_only_for_p2p_says_a_tp1_model_does_not_need_it() -> None:
    found = audited(RTX4090)
    line = scope_line(report.host_markdown("rtx4090", found))
    assert line.startswith("Verdict scope: judged for tensor parallelism over all 4 GPUs")
    assert "Every critical finding (p2p_not_supported) is about traffic between GPUs, which a model that fits " \
           "one GPU (TP1) does not have: the deployment gate judges each model at its own tensor-parallel size." \
           in line
    assert "| rtx4090 | this run | unfit | TP over all 4 GPUs |" in report.fleet_markdown({"rtx4090": found})


def test_a_host_with_another_critical_finding_does_not_point_to_tp1() -> None:
    found = audited(RTX4090)
    found["findings"].insert(0, {"id": "gpu_lost", "severity": "critical", "summary": "lost", "evidence": {},
                                 "remedy": "power-cycle"})
    assert "TP1" not in scope_line(report.host_markdown("rtx4090", found))


def test_a_single_gpu_host_is_judged_without_p2p() -> None:
    one = facts()
    one["gpus"]["devices"] = one["gpus"]["devices"][:1]
    one["summary"].update(gpu_count=1, p2p="n/a (one GPU)")
    assert scope_line(report.host_markdown("one", one)) == (
        "Verdict scope: judged for serving on its one GPU: no tensor parallelism, so GPU peer-to-peer does not "
        "apply.")
    assert "| one | this run | unfit | one GPU |" in report.fleet_markdown({"one": one})


def test_a_proxmox_node_that_also_serves_is_judged_both_ways() -> None:
    both = facts(proxmox={"node": "pve", "vms": [{"vmid": 120, "hostpci": []}]},
                 pci={"nvidia_devices": [{"bdf": "0000:41:00.0", "kind": "gpu", "driver": "vfio-pci"}]})
    line = scope_line(report.host_markdown("pve", both))
    assert line.startswith("Verdict scope: judged for tensor parallelism over its 2 GPUs")
    assert line.endswith(" Besides, 1 GPU is bound to vfio-pci for guests. As a Proxmox node, the configs of its "
                         "1 VM(s) that pass devices through are judged too.")


def test_the_group_the_audit_was_given_is_named() -> None:
    group = facts()
    group["findings"][0]["evidence"]["group"] = ["GPU0", "GPU1"]
    group["gpus"]["devices"] += [dict(group["gpus"]["devices"][0], index=i) for i in (2, 3)]
    assert "over GPU0, GPU1 (2 of 4 GPUs: the group the audit was given)" in \
        scope_line(report.host_markdown("g", group))


@pytest.mark.parametrize(("name", "start", "short"), [
    (MICROVM, "judged as a host to serve models on its own GPUs: the audit found none.", "no GPU"),
    (MISMATCH, "judged as a host to serve models on its 8 GPUs, which the driver cannot use now", "GPUs unusable"),
    (H100, "judged for tensor parallelism over its 8 GPUs (all of them unless gpu_audit_tensor_parallel_gpus",
     "TP over 8 GPUs"),
])
def test_other_hosts_scopes(name: str, start: str, short: str) -> None:
    found = audited(name)
    assert scope_line(report.host_markdown(name, found)).startswith(f"Verdict scope: {start}")
    scope = verdict_scope(found)
    assert scope is not None and scope.short == short


def test_a_thin_old_report_gets_a_scope_from_what_it_has_or_none() -> None:
    thin = {"summary": {"verdict": "fit", "gpu_count": 8}, "gpus": {"driver_version": "550.127.05"}}
    scope = verdict_scope(thin)
    assert scope is not None and scope.short == "TP over 8 GPUs"
    assert verdict_scope({}) is None and verdict_scope({"summary": "odd", "findings": "odd"}) is None


def test_material_of_two_hosts_says_so_under_the_scope_line_and_in_the_fleet_row() -> None:
    facts = {**audited(INCIDENT), "material": {"node_outputs": ["pveversion.txt", "node-dmesg.txt"],
                                               "warnings": [two_hosts(["pveversion.txt", "node-dmesg.txt"])]}}
    lines = report.host_markdown("guest", facts).splitlines()
    at = lines.index(scope_line("\n".join(lines)))
    assert lines[at + 2].startswith("Two hosts in the material: the guest is judged here")
    assert "(pveversion.txt, node-dmesg.txt) are set apart" in lines[at + 2]
    # The fleet table (and the analysis index) say what the verdict judges the same way.
    assert verdict_scope(facts).short.endswith("; the guest only, its node set apart")
    assert "its node set apart" in report.fleet_markdown({"guest": facts})
    # Odd material (edited by hand) changes nothing.
    odd = {**audited(INCIDENT), "material": {"node_outputs": "pveversion.txt"}}
    assert verdict_scope(odd).two_hosts is None


# ---------------------------------------------------------------------------
# What to do next


def test_what_to_do_next_lists_critical_then_warning_each_linked_to_its_block() -> None:
    text = report.host_markdown("rtx4090", audited(RTX4090))
    assert text.index("## What to do next") < text.index("## Findings")
    steps = [line for line in section(text, "What to do next").splitlines() if re.match(r"\d+\. ", line)]
    assert steps == [
        "1. **CRITICAL** `p2p_not_supported`: No GPU peer-to-peer between 6 of 6 GPU pairs (12 of 12 directions), "
        "status CNS/GNS: all-reduce falls back to host memory. [What to do](#critical-p2p_not_supported)",
        "2. **warning** `pcie_link_narrow`: 1 GPU link(s) trained narrower than they can: bandwidth to those GPUs "
        "is cut. [What to do](#warning-pcie_link_narrow)",
        "3. **warning** `small_bar1`: 4 GPU(s) expose a BAR1 below 1024 MiB: peers and the CPU see GPU memory "
        "through a small window, which limits P2P and GPUDirect. [What to do](#warning-small_bar1)"]
    assert "3 info finding(s) below leave the verdict as it is." in text
    assert "### CRITICAL: p2p_not_supported" in text and "### warning: small_bar1" in text


def test_a_long_summary_gives_its_first_sentence_and_the_links_stay_unique() -> None:
    found = facts()
    again = dict(found["findings"][0], summary="Second one. It has more to say.\nOn two lines.")
    found["findings"].append(again)
    text = report.host_markdown("h", found)
    assert "`p2p_not_supported`: Second one. [What to do](#critical-p2p_not_supported-1)" in text
    assert "[What to do](#critical-p2p_not_supported)" in text


def test_a_host_without_findings_has_nothing_to_do() -> None:
    text = report.host_markdown("h", facts(findings=[]))
    assert section(text, "What to do next").strip() == "Nothing: no critical or warning finding."


def test_a_linked_guest_says_where_its_fix_runs() -> None:
    guest = enrich_guest_findings(audited(INCIDENT), {"pve-no-clique": audited(NO_CLIQUE)})
    text = report.host_markdown("guest", guest)
    assert "The fix runs on the Proxmox host pve-no-clique, VM 120. [What to do](#critical-p2p_not_supported)" in text


def test_anchors_follow_the_renderers_rule() -> None:
    taken: dict[str, int] = {}
    assert anchor("CRITICAL: p2p_not_supported", taken) == "critical-p2p_not_supported"
    assert anchor("CRITICAL: p2p_not_supported", taken) == "critical-p2p_not_supported-1"
    assert anchor("GPU host audit: h.example (rack 1)", taken) == "gpu-host-audit-hexample-rack-1"


def test_a_remedy_holding_a_fence_gets_a_longer_one() -> None:
    assert fenced("plain `x`", "text") == ["```text", "plain `x`", "```"]
    assert fenced("see ```\ncode\n```", "text") == ["````text", "see ```\ncode\n```", "````"]
    found = facts()
    found["findings"][0]["remedy"] = "Run:\n```\nqm set 120 --machine q35\n```"
    assert "````text\nRun:\n```\nqm set 120 --machine q35\n```\n````" in report.host_markdown("h", found)


def test_the_report_is_byte_identical_for_the_same_facts() -> None:
    for name in (H100, RTX4090, NO_CLIQUE):
        assert report.host_markdown(name, audited(name)) == report.host_markdown(name, audited(name))
