"""The Markdown report of material says what each input was and what the material never showed, and
does not call an IOMMU it never saw "off"."""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import Piece, build_capture
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_readers import replay
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.section import with_material
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.material_md import material_section
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import host_markdown
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

from tests.paths import FIXTURES

P2P_NS = (FIXTURES / "nvidia-smi" / "topo-p2p-r_8gpu-vm-NS.txt").read_bytes()


def pasted_matrix_report() -> str:
    capture = build_capture([Piece("p2p.txt", P2P_NS, command="nvidia-smi topo -p2p r"),
                             ("notes.txt", b"the customer says it is slow\n")])
    found = facts.audit(replay(capture), facts.resolve_subsets(["all"]), RuleOptions())
    return host_markdown("customer-vm", with_material(found, capture))


def test_the_report_lists_each_input_and_what_was_not_seen() -> None:
    report = pasted_matrix_report()
    section = report[report.index("## Material"):]
    assert "| p2p.txt | nvidia-smi-topo-p2p | commands:nvidia-smi topo -p2p r |" in section
    assert "| notes.txt | not recognised | nothing read |" in section
    assert "Not seen in the material" in section
    assert "- PCI devices from sysfs (/sys/bus/pci/devices)" in section


def test_an_iommu_the_material_never_showed_is_not_seen_not_off() -> None:
    report = pasted_matrix_report()
    assert "| IOMMU | not seen |" in report
    assert "off (no IOMMU groups)" not in report


def test_a_report_without_material_has_no_such_section() -> None:
    assert material_section(None) == []
    assert material_section("garbled") == []
    assert "## Material" not in host_markdown("h", {"summary": {}, "iommu": {"enabled": False}})
    assert "| IOMMU | off (no IOMMU groups) |" in host_markdown("h", {"summary": {}, "iommu": {"enabled": False}})


def test_marks_and_warnings_are_shown() -> None:
    lines = material_section({"inputs": [{"name": "r.log.gz", "kind": "nvidia-bug-report", "gzip": True,
                                        "truncated": True, "as": []}],
                            "unmapped": [{"name": "nccl.log", "why": "a benchmark log"}],
                            "warnings": ["two hosts in one input"]})
    text = "\n".join(lines)
    assert "| r.log.gz (gzip, cut short) | nvidia-bug-report | nothing read |" in text
    assert "| nccl.log | a benchmark log |" in text
    assert "- two hosts in one input" in text


def test_a_not_judged_verdict_is_explained_and_counted_in_the_fleet() -> None:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import fleet_markdown

    report_path = FIXTURES / "bug-reports" / "nvidia-bug-report_580_2xRTX-PRO-6000_kvm-guest_constructed.log"
    capture = build_capture([(report_path.name, report_path.read_bytes())])
    found = with_material(facts.audit(replay(capture), facts.resolve_subsets(["all"]), RuleOptions()), capture)
    report = host_markdown("guest", found)
    assert report.startswith("# GPU host audit: guest\n\n**Verdict: not judged**")
    assert 'so the verdict is "not judged", not fit' in report
    assert "1 host(s): 0 fit, 0 fit with warnings, 0 unfit, 1 not judged." in fleet_markdown({"guest": found}, {})
