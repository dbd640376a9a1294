"""Which pasted topo -p2p matrix decides P2P, and what its cells prove (rules/p2p_evidence.py): the capability from
the command line or the file name, combined capabilities (topo -p2p rw), GNS/CNS as no P2P whatever the
capability, a matrix of no stated capability judged only where its cells can be, and healthy matrices that give
no P2P finding. Each runs the real audit over a capture built from the pasted outputs."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import build_capture
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.p2p_evidence import P2PEvidence, p2p_evidence

from tests.paths import FIXTURES
from tests.unit.material.test_capture import audit

SMI = FIXTURES / "nvidia-smi"
NS_8 = (SMI / "topo-p2p-r_8gpu-vm-NS.txt").read_bytes()
# Printed for `nvidia-smi topo -p2p rw` on a bare-metal 2x RTX 5090 host (SOURCES.md).
GNS_RW = (SMI / "topo-p2p_2xRTX5090-GNS.txt").read_bytes()
CNS_2 = (SMI / "topo-p2p-r_595_2xRTX3090-CNS.txt").read_bytes()
OK_5 = (SMI / "topo-p2p-p_5gpu-OK.txt").read_bytes()


def findings(*inputs: tuple[str, bytes]) -> tuple[dict, dict]:
    facts = audit(build_capture(list(inputs)))
    return facts, {f["id"]: f for f in facts["findings"]}


def test_the_real_rw_matrix_with_its_command_line_is_unfit_with_p2p_not_supported() -> None:
    facts, found = findings(("peer.txt", b"$ nvidia-smi topo -p2p rw\n" + GNS_RW))
    assert found["p2p_not_supported"]["severity"] == "critical"
    assert found["p2p_not_supported"]["evidence"]["capability"] == "read+write"
    assert facts["summary"]["verdict"] == "unfit" and facts["summary"]["p2p"] == "none"
    assert facts["summary"]["gpu_count"] == 2


@pytest.mark.parametrize(("name", "data"), [("nvlink.txt", GNS_RW), ("p2p_nvlink.txt", CNS_2),
                                            ("p2p.txt", GNS_RW), ("p2p.txt", CNS_2)],
                         ids=["gns-nvlink", "cns-nvlink", "gns-not-stated", "cns-not-stated"])
def test_gns_and_cns_mean_no_p2p_whatever_the_capability(name, data) -> None:
    facts, found = findings((name, data))
    assert "p2p_not_supported" in found
    assert "p2p_capability_not_stated" not in found
    assert facts["summary"]["p2p"] == "none"


def test_ns_under_nvlink_is_no_p2p_finding_and_p2p_is_unknown() -> None:
    # NS for NVLink is what every PCIe card answers: it says nothing of P2P over PCIe.
    facts, found = findings(("p2p_nvlink.txt", NS_8))
    assert "p2p_not_supported" not in found and "p2p_capability_not_stated" not in found
    assert facts["summary"]["p2p"] == "unknown"
    assert facts["summary"]["gpu_count"] == 8


def test_ns_of_a_capability_not_stated_says_both_meanings_and_judges_neither() -> None:
    facts, found = findings(("matrix.txt", NS_8))
    assert "p2p_not_supported" not in found
    stated = found["p2p_capability_not_stated"]
    assert stated["severity"] == "warning"
    assert stated["evidence"]["pairs_unknown"] == 56 and stated["evidence"]["statuses"] == ["NS"]
    assert stated["evidence"]["matrix"][0] == "X NS NS NS NS NS NS NS"
    assert set(stated["evidence"]["meaning"]) == {"read or write", "nvlink"}
    assert "paste it with its command line" in stated["remedy"]
    assert facts["summary"]["verdict"] != "fit" and facts["summary"]["p2p"] == "unknown"
    assert facts["summary"]["gpu_count"] == 8


@pytest.mark.parametrize(("name", "data"), [
    ("p2p_read.txt", OK_5), ("topo_p2p_rw.txt", OK_5), ("p2p.txt", OK_5), ("nvlink.txt", OK_5),
    ("pasted.txt", b"root@dgx:~# nvidia-smi topo -p2p w\n" + OK_5),
], ids=["read", "rw", "not-stated", "nvlink", "write-command-line"])
def test_a_healthy_matrix_gives_no_p2p_finding_and_no_virtualization_claim(name, data) -> None:
    facts, found = findings((name, data))
    assert not {"p2p_not_supported", "p2p_capability_not_stated"} & set(found)
    assert facts["summary"]["p2p"] == "ok"
    assert facts["virtualization"]["type"] is None


def test_a_read_matrix_decides_before_any_other() -> None:
    evidence = p2p_evidence({"p2p": {"not_stated": [["X", "GNS"], ["GNS", "X"]], "nvlink": [["X", "NS"], ["NS", "X"]],
                                     "read": [["X", "OK"], ["OK", "X"]]}})
    assert evidence == P2PEvidence("read", [["X", "OK"], ["OK", "X"]])


def test_a_matrix_that_proves_something_decides_before_one_that_proves_nothing() -> None:
    evidence = p2p_evidence({"p2p": {"nvlink": [["X", "NS"], ["NS", "X"]], "not_stated": [["X", "CNS"], ["CNS", "X"]]}})
    assert evidence is not None and evidence.capability == "not_stated"
    assert p2p_evidence({"p2p": {}}) is None


@pytest.mark.parametrize(("capability", "label", "state"), [
    ("read", "NS", "none"), ("write", "DR", "none"), ("read+write", "TNS", "none"), ("nvlink", "NS", "unknown"),
    ("nvlink", "GNS", "none"), ("read+nvlink", "NS", "unknown"), ("not_stated", "CNS", "none"),
    ("not_stated", "U", "unknown"), ("atomics", "OK", "ok"),
])
def test_what_one_cell_proves(capability, label, state) -> None:
    assert P2PEvidence(capability, []).state(label) == state


def test_the_gate_blocks_on_the_same_matrix_the_audit_judged() -> None:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate

    facts, _ = findings(("peer.txt", b"$ nvidia-smi topo -p2p rw\n" + GNS_RW))
    result = gate.decide(facts, {"name": "some-model", "tensor_parallel_size": 2}, sglang_version="0.5.9")
    assert result["verdict"] == "block"
    assert "p2p_not_supported" in [r["id"] for r in result["reasons"]]
    nvlink_ns, _ = findings(("p2p_nvlink.txt", NS_8))
    unknown = gate.decide(nvlink_ns, {"name": "some-model", "tensor_parallel_size": 8}, sglang_version="0.5.9")
    assert "p2p_not_supported" not in [r["id"] for r in unknown["reasons"]]


@pytest.mark.parametrize("p2p", [None, [], "read", {"read": "NS"}, {1: [["X"]]}, {"read": [None, ["X", 3]]},
                                 {"": [None]}, {"nvlink": [None, "x", ["X", None, 7]]}])
def test_odd_p2p_facts_give_no_matrix_or_one_without_raising(p2p) -> None:
    evidence = p2p_evidence({"p2p": p2p})
    assert evidence is None or isinstance(evidence.matrix, list)


@pytest.mark.parametrize(("name", "label", "title"), [
    ("p2p_read.txt", "| P2P (read) | none |", "## P2P read matrix"),
    ("topo_p2p_rw.txt", "| P2P (read+write) | none |", "## P2P read+write matrix"),
    ("p2p.txt", "| P2P (capability not stated) | unknown |", "## P2P matrix (capability not stated in the material)"),
])
def test_the_report_names_the_capability_its_p2p_line_was_judged_from(name, label, title) -> None:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import host_markdown

    facts, _ = findings((name, NS_8))
    markdown = host_markdown("host", facts)
    assert label in markdown and title in markdown


def test_the_incident_matrix_wrapped_by_a_mail_client_still_decides() -> None:
    from tests.unit.parsers.test_topo_wrap import hard_wrap

    facts, found = findings(("p2p_read.txt", hard_wrap(NS_8.decode(), 30).encode()))
    assert found["p2p_not_supported"]["severity"] == "critical"
    assert facts["summary"]["verdict"] == "unfit" and facts["summary"]["gpu_count"] == 8
