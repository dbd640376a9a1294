"""Every picture of every capture host, opened in a real headless browser (Debian's Chromium): each renders (the
browser rasterises it onto a canvas and finds ink), shows what it should (the chart's points inside their frames,
the heatmap's cells), and a screenshot of them all is kept in .cache/pictures/ (git-ignored) for a person to look
at. The hosts: every capture of tests/captures audited as it is, and every host of the fleet of captures
(tests/fleet/hosts.yml) with its benchmark logs judged, the incident guest's NCCL chart among them.

Skipped, with the reason, only where Chromium is missing (scripts/system-deps.sh installs it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.pictures import picture_files

from tests.paths import CAPTURES, ROOT
from tests.source_files import load_source

CHROMIUM = next((path for path in map(shutil.which, ("chromium", "chromium-browser")) if path), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed: apt-get install chromium, "
                                                         "or make system-deps")
ARTEFACTS = ROOT / ".cache" / "pictures"
RESULT = re.compile(r'<pre id="result">(.*?)</pre>', re.DOTALL)
# Runs in the page: for each picture, its points against their frames, its cells, and the share of its pixels
# the browser painted darker than near-white once rasterised (an SVG that fails to render paints none).
SCRIPT = r"""
function check(section) {
  const svg = section.querySelector("svg"), box = svg.getBoundingClientRect();
  const frames = {};
  svg.querySelectorAll("rect.frame").forEach(f => { frames[f.dataset.panel] = f.getBoundingClientRect(); });
  const out = {name: section.dataset.name, width: box.width, height: box.height,
               cells: svg.querySelectorAll("rect.cell").length, marks: svg.querySelectorAll("path.mark").length,
               points: Array.from(svg.querySelectorAll("circle.point")).map(c => {
                 const r = c.getBoundingClientRect(), f = frames[c.dataset.panel];
                 const x = r.x + r.width / 2, y = r.y + r.height / 2;
                 return {panel: c.dataset.panel, size: +c.dataset.size, value: +c.dataset.value,
                         inside: x > f.left && x < f.right && y > f.top && y < f.bottom};
               })};
  return new Promise(done => {
    const img = new Image();
    img.onload = () => {
      const canvas = document.createElement("canvas");
      canvas.width = box.width; canvas.height = box.height;
      const context = canvas.getContext("2d");
      context.drawImage(img, 0, 0);
      const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
      let ink = 0;
      for (let i = 0; i < data.length; i += 4) if (data[i] < 200 || data[i + 1] < 200 || data[i + 2] < 200) ink++;
      out.ink = ink / (canvas.width * canvas.height);
      done(out);
    };
    img.onerror = () => { out.ink = -1; done(out); };
    const text = new XMLSerializer().serializeToString(svg);
    img.src = "data:image/svg+xml;base64," + btoa(unescape(encodeURIComponent(text)));
  });
}
Promise.all(Array.from(document.querySelectorAll("section")).map(check))
  .then(r => { document.getElementById("result").textContent = JSON.stringify(r); });
"""


def _records() -> dict[str, dict[str, Any]]:
    sys.path.insert(0, str(ROOT / "scripts"))
    page = load_source(ROOT / "scripts" / "docsref" / "pictures_page.py", "docsref_pictures_page")
    records = {path.stem: page.record(str(path)) for path in sorted(CAPTURES.glob("*.json"))}
    records.update(page.fleet_records(ROOT))
    return records


@pytest.fixture(scope="module")
def pictures() -> dict[str, str]:
    return {name: svg for host, record in _records().items() for name, svg in picture_files(host, record).items()}


def _chromium(*argv: str) -> str:
    run = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          "--virtual-time-budget=10000", *argv], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


@pytest.fixture(scope="module")
def rendered(pictures: dict[str, str]) -> dict[str, dict[str, Any]]:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    page = ARTEFACTS / "pictures.html"
    page.write_text("<!doctype html><html><body style='margin:0;background:white'>"
                    + "".join(f'<section data-name="{name}"><h3 style="margin:4px">{name}</h3>{svg}</section>'
                              for name, svg in sorted(pictures.items()))
                    + f"<pre id='result'>pending</pre><script>{SCRIPT}</script></body></html>", encoding="utf-8")
    found = RESULT.search(_chromium("--dump-dom", page.as_uri()))
    assert found and found.group(1) != "pending", "the page's check did not run"
    height = sum(int(re.search(r'height="(\d+)"', svg).group(1)) + 40 for svg in pictures.values())
    _chromium(f"--screenshot={ARTEFACTS / 'pictures.png'}", f"--window-size=820,{height}", page.as_uri())
    return {entry["name"]: entry for entry in json.loads(found.group(1))}


def test_every_picture_of_every_capture_host_renders(pictures: dict[str, str],
                                                       rendered: dict[str, dict[str, Any]]) -> None:
    assert set(rendered) == set(pictures)
    for svg in pictures.values():  # a file must be XML, which HTML's inline SVG forgives
        ET.fromstring(svg)
    assert {name for name in pictures if name.endswith("-p2p.svg")} >= {"incident-guest-p2p.svg",
                                                                         "pro6000-baremetal-p2p.svg"}
    for name, seen in rendered.items():
        assert seen["width"] > 300 and seen["height"] > 200, seen
        assert 0.01 < seen["ink"] < 0.9, seen  # painted, and not a solid block
        if name.endswith("-p2p.svg"):
            assert seen["cells"] >= 4, seen
        else:
            assert seen["points"] and all(p["inside"] for p in seen["points"]), seen
    screenshot = (ARTEFACTS / "pictures.png").read_bytes()
    assert screenshot.startswith(b"\x89PNG") and len(screenshot) > 10_000


def test_the_incident_chart_shows_its_small_message_latency_inside_its_axes(
        rendered: dict[str, dict[str, Any]]) -> None:
    chart = rendered["incident-guest-nccl.svg"]
    latency = [p for p in chart["points"] if p["panel"] == "latency"]
    smallest = min(latency, key=lambda p: p["size"])
    assert smallest["size"] == 12288 and smallest["inside"], chart
    assert chart["marks"] == 1


def test_the_pictures_the_docs_show_open_as_files() -> None:
    """docs/reference/pictures/ as a reader's browser gets them: files, parsed as XML (an inline SVG in HTML is
    forgiven what a file is not, such as two dashes in a comment)."""
    shown = sorted((ROOT / "docs" / "reference" / "pictures").glob("*.svg"))
    assert [path.name for path in shown] == ["incident-guest-nccl.svg", "incident-guest-p2p.svg"]
    for path in shown:
        dom = _chromium("--dump-dom", path.as_uri())
        assert "<svg" in dom and "parsererror" not in dom and "error on line" not in dom, (path.name, dom[:500])
