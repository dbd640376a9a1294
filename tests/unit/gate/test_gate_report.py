"""The gate's Markdown report (roles/deployment_gate/templates/gate.md.j2) as Ansible renders it, over real verdicts.

The results come from the gate over the captures' audits; a guest's Proxmox link is built as the audit's
report module builds it, from the audit of the Proxmox host that runs it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import gpu_audit_report
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import enrich_guest_findings

from tests.unit.captures import I440FX, INCIDENT, MICROVM, RTX4090, audited
from tests.unit.gate.test_gate import GLM5

TEMPLATE = Path(__file__).resolve().parents[3] / "roles" / "deployment_gate" / "templates" / "gate.md.j2"
NO_CLIQUE = "proxmox-host-8xRTXPRO6000-vm-no-clique"
SMALL = {"name": "Qwen3-8B", "family": "qwen3", "weights_gib": 16, "attention_heads": 32}


def render(result: dict[str, Any], host: str = "h") -> str:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    templar = Templar(loader=DataLoader(), variables={"deployment_gate_result": result, "inventory_hostname": host})
    return templar.template(trust_as_template(TEMPLATE.read_text(encoding="utf-8")))


def incident_link() -> dict[str, Any]:
    linked = enrich_guest_findings(audited(INCIDENT), {"pve-no-clique": audited(NO_CLIQUE)})
    return gpu_audit_report.guest_links({"guest": linked})["guest"]


def section(text: str, heading: str) -> str:
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def steps(text: str) -> list[str]:
    return [line for line in section(text, "What to do next").splitlines() if re.match(r"\d+\. ", line)]


def test_a_blocked_guest_gets_its_vms_fix_once_in_a_code_block() -> None:
    result = gate.decide(audited(INCIDENT), {**GLM5, "tensor_parallel_size": 8}, sglang_version="0.5.9")
    text = render({**result, "proxmox_link": incident_link()}, "incident-guest")
    assert text.index("## What to do next") < text.index("## What blocks") < text.index("## Launch settings")
    assert steps(text) == [
        "1. `p2p_not_supported` blocks: No working GPU peer-to-peer between 28 of the 28 pairs of the chosen GPUs "
        "[0, 1, 2, 3, 4, 5, 6, 7]: every all-reduce goes through host memory. The fix runs on the Proxmox host "
        "pve-no-clique, VM 120 (glm5-tp8). [How to fix](#1-p2p_not_supported)"]
    block = section(text, "What blocks")
    assert block.startswith("\n### 1. `p2p_not_supported`\n")
    # The VM's own commands, fenced, once in the whole report; the generic remedy's placeholders are gone.
    commands = re.findall(r"```text\n(.*?)\n```", block, re.S)
    assert len(commands) == 1 and "  qm set 120 --balloon 0\n  qm shutdown 120 && qm start 120" in commands[0]
    assert text.count("qm set 120 --cpu host") == 1
    assert "<vmid>" not in text and "0000:BB:00.0" not in text
    # The gate's own last line stays, as prose after the block.
    assert "```\n\nTo deploy without P2P anyway, add p2p_not_supported to the accepted findings" in block
    # No remedy is squashed into a table cell any more.
    assert not any(line.startswith("| `p2p_not_supported`") for line in text.splitlines())
    assert "Its commands are in the blocks above: [`p2p_not_supported`](#1-p2p_not_supported)." in \
        section(text, "The fix is on the Proxmox host")


def test_a_remedy_of_several_lines_is_a_code_block_not_a_table_cell() -> None:
    text = render({**gate.decide(audited(I440FX), GLM5), "proxmox_link": {}}, "i440fx")
    assert [line.split(" blocks: ")[0] for line in steps(text)] == [
        "1. `cuda_version_unknown`", "2. `not_enough_gpu_memory`", "3. `p2p_not_supported`",
        "4. `qemu_machine_i440fx`"]
    block = section(text, "What blocks").split("### 3. `p2p_not_supported`\n", 1)[1].split("\n### ", 1)[0]
    fenced = re.search(r"```text\n(.*?)\n```", block, re.S)
    assert fenced is not None
    assert "  machine: q35\n  hostpci0: 0000:BB:00.0,pcie=1\n  hostpci1: 0000:BB:00.0,pcie=1" in fenced.group(1)
    assert fenced.group(1).endswith("To deploy anyway, accept p2p_not_supported.")
    assert "## The fix is on the Proxmox host" not in text
    assert "Verdict scope: judged for this model; no GPUs could be chosen for it here" in text


def test_a_pass_at_tp1_says_what_it_set_aside_and_to_deploy() -> None:
    result = gate.decide(audited(RTX4090), SMALL)
    assert result["verdict"] == "pass"
    text = render({**result, "proxmox_link": {}}, "rtx4090")
    assert "Verdict scope: judged for this model at tensor-parallel size 1 on GPU(s) 0; the audit's verdict judges " \
           "the host itself. Findings set aside for this launch: `p2p_not_supported` (see [Made moot by the launch " \
           "settings](#made-moot-by-the-launch-settings))." in text
    assert steps(text)[0] == "1. Deploy with `--tp 1` on GPUs 0. [Launch settings](#launch-settings)"
    assert steps(text)[1].startswith("2. warning `pcie_link_narrow` (audit): ")
    assert "## What blocks" not in text and "## Made moot by the launch settings" in text


def test_an_accepted_risk_points_to_the_proxmox_fix_shown_once() -> None:
    result = gate.decide(audited(INCIDENT), GLM5, accept=["p2p_not_supported"], sglang_version="0.5.9")
    text = render({**result, "proxmox_link": incident_link()}, "incident-guest-accepted")
    assert steps(text)[:2] == [
        "1. `p2p_not_supported` is accepted as a risk; the fix runs on the Proxmox host pve-no-clique, VM 120 "
        "(glm5-tp8). [Commands](#the-fix-is-on-the-proxmox-host)",
        "2. Deploy with `--tp 8 --nsa-decode-backend trtllm --disable-custom-all-reduce` on GPUs 0,1,2,3,4,5,6,7. "
        "[Launch settings](#launch-settings)"]
    assert text.count("qm set 120 --cpu host") == 1
    assert "```text\nThis guest is VM 120 (glm5-tp8)" in section(text, "The fix is on the Proxmox host")


def test_the_same_reason_twice_gets_two_anchors() -> None:
    result = gate.decide(audited(MICROVM), {"name": "x", "weights_gib": "a lot", "attention_heads": "many"})
    assert [reason["id"] for reason in result["reasons"]][:2] == ["model_invalid", "model_invalid"]
    text = render({**result, "proxmox_link": {}})
    assert "### 1. `model_invalid`" in text and "### 2. `model_invalid`" in text
    assert "(#1-model_invalid)" in text and "(#2-model_invalid)" in text


def test_the_gate_report_is_byte_identical_for_the_same_result() -> None:
    result = {**gate.decide(audited(INCIDENT), GLM5, sglang_version="0.5.9"), "proxmox_link": incident_link()}
    assert render(result) == render(result)
