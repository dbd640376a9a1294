"""The report's pictures (report/plot.py, report/heatmap.py, report/pictures.py): axes that cover the data with
several ticks, the references and the communication figure on the NCCL chart, the P2P heatmap's states, and the
links under the findings they explain, before the evidence. What a browser makes of them:
test_pictures_browser.py."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.heatmap import p2p_heatmap, pair_states
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.pictures import picture_files
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.plot import (
    nccl_chart,
    size_axis,
    sweep_svg,
    value_axis,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import host_markdown

from tests.paths import ROOT
from tests.source_files import load_source
from tests.unit import captures

SVG = "{http://www.w3.org/2000/svg}"


def _pictures_page() -> Any:
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    return load_source(ROOT / "scripts" / "docsref" / "pictures_page.py", "docsref_pictures_page")


@pytest.fixture(scope="module")
def incident() -> dict[str, Any]:
    """The incident guest's judged record, as the fleet of captures gives it (capture, nccl-tests and probe logs)."""
    page = _pictures_page()
    return page.record(**page.fleet_hosts(ROOT)[page.SHOWN])


def _rows(latencies: list[tuple[int, float]], busbw: float = 1.0) -> list[dict[str, Any]]:
    return [{"size_bytes": size, "out_of_place": {"time_us": us, "busbw_gbps": busbw * (n + 1)}}
            for n, (size, us) in enumerate(latencies)]


def _ticks(svg: ET.Element, panel: int) -> list[float]:
    """The value ticks of one panel (0 latency, 1 bandwidth): text class tick, right-aligned left of its frame."""
    frames = [r for r in svg.iter(f"{SVG}rect") if r.get("class") == "frame"]
    x0 = float(frames[panel].get("x"))
    return [float(t.text) for t in svg.iter(f"{SVG}text") if t.get("class") == "tick"
            and t.get("text-anchor") == "end" and math.isclose(float(t.get("x")), x0 - 4)]


def _inside(svg: ET.Element) -> list[bool]:
    frames = {r.get("data-panel"): r for r in svg.iter(f"{SVG}rect") if r.get("class") == "frame"}
    out = []
    for point in (c for c in svg.iter(f"{SVG}circle") if c.get("class") == "point"):
        frame = frames[point.get("data-panel")]
        x, y = float(point.get("cx")), float(point.get("cy"))
        left, top = float(frame.get("x")), float(frame.get("y"))
        out.append(left < x < left + float(frame.get("width")) and top < y < top + float(frame.get("height")))
    return out


def test_the_112_us_point_lies_inside_axes_of_several_ticks() -> None:
    """The case the chart failed on: a small-message latency of about 112 us under a lowest tick of 1,000 us, a
    bandwidth axis with one tick."""
    svg = ET.fromstring(sweep_svg("h", {"as run": _rows([(12288, 112.4), (805306368, 43230.0)], busbw=16.0)}))
    assert all(_inside(svg)) and len(_inside(svg)) == 4
    for panel, values in ((0, (112.4, 43230.0)), (1, (16.0, 32.0))):
        ticks = _ticks(svg, panel)
        assert len(ticks) >= 3, (panel, ticks)
        assert min(ticks) <= min(values) and max(ticks) >= max(values), (panel, ticks)


@pytest.mark.parametrize("values", [[13.7, 43230.0], [100.0, 1000.0], [1.57], [0.004, 9e6], [5.0, 5.0000001]])
def test_an_axis_spans_its_values_with_three_ticks_at_least(values: list[float]) -> None:
    low, high, ticks = value_axis(values)
    assert low < min(values) and high > max(values)
    assert len(ticks) >= 2 and all(low * 0.999 <= t <= high * 1.001 for t in ticks)
    assert len(ticks) >= 3 or high / low < 10


def test_the_size_axis_has_a_few_power_of_two_ticks() -> None:
    low, high, ticks = size_axis([8.0, 12288.0, 805306368.0])
    assert low < 8 and high > 805306368 and 3 <= len(ticks) <= 8
    assert all(math.log2(t).is_integer() for t in ticks)


def test_the_incident_chart_has_its_references_and_its_communication_figure(incident: dict[str, Any]) -> None:
    svg = ET.fromstring(nccl_chart("incident-guest", incident))
    assert all(_inside(svg)) and len(_inside(svg)) == 4
    # The thresholds the benchmark was judged by: 38 us at 16 KiB (critical), 8 GB/s at 64 MiB (warning).
    assert len([r for r in svg.iter(f"{SVG}rect") if r.get("class") == "reference"]) == 2
    texts = " ".join(t.text or "" for t in svg.iter(f"{SVG}text"))
    assert "critical: at most 38 us at 16K" in texts and "warning: at least 8 GB/s at 64M" in texts
    ceiling = incident["bench"]["nccl"]["communication_ceiling"]["batch_1"]
    (mark,) = [p for p in svg.iter(f"{SVG}path") if p.get("class") == "mark"]
    assert float(mark.get("data-value")) == ceiling["allreduce_latency_us"]
    assert f"at most {ceiling['max_tokens_per_s_per_stream']:.1f} tok/s per stream" in texts


def test_no_sweep_no_chart() -> None:
    assert nccl_chart("h", captures.audited(captures.H100)) is None


def _states(facts: dict[str, Any]) -> set[str]:
    return {state for row in pair_states(facts)[1] for state, _label in row if state != "self"}


def test_the_heatmap_tells_no_pair_from_two_islands_and_proof_from_a_grant(incident: dict[str, Any]) -> None:
    assert _states(incident) == {"refused"}
    assert "no GPU pair can peer (56 directions)" in p2p_heatmap("incident-guest", incident)
    islands = {"p2p": {"read": [["X", "OK", "NS", "NS"], ["OK", "X", "NS", "NS"],
                                ["NS", "NS", "X", "OK"], ["NS", "NS", "OK", "X"]]}}
    svg = ET.fromstring(p2p_heatmap("h", islands))
    cells = {(int(c.get("data-from")), int(c.get("data-to"))): c.get("data-state")
             for c in svg.iter(f"{SVG}rect") if c.get("class") == "cell"}
    assert cells[(0, 1)] == cells[(2, 3)] == "granted" and cells[(0, 2)] == cells[(3, 1)] == "refused"
    assert "4 of 12 directions can peer" in ET.tostring(svg, encoding="unicode")
    # A probe's proof outranks the driver's grant: checked data is proven, zeros at the peer are wrong data.
    good = {"peer_access": True, "ce_wrong": 0, "sm_wrong": 0, "zeros_at_destination": 0}
    proof = [[None, good], [{**good, "zeros_at_destination": 4096}, None]]
    states = pair_states({"p2p": {"read": [["X", "OK"], ["OK", "X"]]}, "bench": {"probe": {"proof": proof}}})[1]
    assert [states[0][1][0], states[1][0][0]] == ["proven", "wrong data"]
    assert p2p_heatmap("h", {}) is None


def test_the_pictures_are_linked_under_the_findings_they_explain_before_the_evidence(
        incident: dict[str, Any]) -> None:
    markdown = host_markdown("incident-guest", incident)
    block = markdown.split("### CRITICAL: p2p_not_supported", 1)[1].split("\n### ", 1)[0]
    assert block.index("![GPU pairs by P2P state](incident-guest-p2p.svg)") < block.index("Evidence:")
    nccl = [f["id"] for f in incident["findings"] if f["id"].startswith("nccl_") or f["id"] == "communication_ceiling"]
    assert nccl, [f["id"] for f in incident["findings"]]
    block = markdown.split(f": {nccl[0]}\n", 1)[1].split("\n### ", 1)[0]
    assert block.index("![busbw and latency against message size](incident-guest-nccl.svg)") < block.index("Evidence:")
    # And above the text matrices.
    matrix = markdown.split("## P2P read matrix", 1)[1]
    assert matrix.index("(incident-guest-p2p.svg)") < matrix.index("| GPU0 |")


@pytest.mark.parametrize("nccl", [
    {"results": [{"size_bytes": 8, "out_of_place": {"time_us": 1e308, "busbw_gbps": 1e-300}}]},
    {"results": _rows([(8, 5.0), (8, 5.0)]), "tuning": ["ring"], "thresholds": 3, "communication_ceiling": [1]},
    {"results": _rows([(1, 0.5)]), "thresholds": [{"size_bytes": 1e30, "max_time_us": 2.0}, "x"],
     "communication_ceiling": {"batch_1": {"allreduce_bytes": 16, "allreduce_latency_us": True}}},
], ids=["out-of-range", "odd-shapes", "odd-thresholds"])
def test_a_record_of_odd_shape_still_gives_a_chart(nccl: dict[str, Any]) -> None:
    ET.fromstring(nccl_chart("h", {"bench": {"nccl": nccl}}))


@pytest.mark.parametrize("facts", [
    {"p2p": {"read": [["X", None, 3], "OK", [["NS"]]]}},
    {"p2p": {"read": [["X", "OK"], ["OK", "X"]]}, "bench": {"probe": {"proof": [[{"peer_access": "yes"}], 7]}}},
    {"p2p": {"read": [["X"]]}, "bench": {"probe": {"proof": [[None, {"peer_access": True, "ce_wrong": -1}]] * 3}}},
    {"p2p": {"read": [["X", "OK"], ["OK", "X"]]}, "bench": "none"},
], ids=["odd-cells", "odd-proof", "proof-larger", "odd-bench"])
def test_a_record_of_odd_shape_still_gives_a_heatmap(facts: dict[str, Any]) -> None:
    ET.fromstring(p2p_heatmap("h", facts))
    assert list(picture_files("h", facts)) == ["h-p2p.svg"]
