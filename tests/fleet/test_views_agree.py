"""Every view of a host tells the same story: the host JSON, the host Markdown, its fleet.md row, its gate report (JSON
and Markdown, where the gate ran) and its Prometheus textfile.

Two real runs, reports written: site.yml's audit, benchmark-from-logs and gate phases over tests/fleet/hosts.yml,
and playbooks/audit.yml over one host per capture of tests/captures that no fleet host replays (the fleet's hosts
show the others, with their benchmark and gate besides). Each view is read back as a person or a scraper would read
it (the Markdown by its lines, the metrics by their series), never through the code that wrote it, and compared on:
verdict, action, finding ids, severity counts, GPU count, P2P state, worst finding, pair counts and the
communication ceiling with its basis.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.ceiling import format_rate
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.prometheus import textfile

from tests.fleet.test_site_fleet import INVENTORY, ROOT, ansible_playbook

ALL_CAPTURES = sorted((ROOT / "tests" / "captures").glob("*.json"))
REPLAYED = set(re.findall(r"^ *fleet_capture: *(\S+)$", INVENTORY.read_text(), re.MULTILINE))
# Audited a second time, a capture the fleet replays would only repeat its fleet host's views.
CAPTURES = [path for path in ALL_CAPTURES if path.stem not in REPLAYED]
BASIS_WORD = {"measured_all_reduce": "measured", "estimated_from_pair_latency": "estimated"}


def playbook(playbook_path: Path, inventory: Path, reports: Path, *args: str) -> None:
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    run = subprocess.run([ansible_playbook(), str(playbook_path), "-i", str(inventory), *args,
                          "-e", f"gpuhost_report_dir={reports}"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    # The gate fails the hosts it blocks, after every report is written: that is not a failed run here.
    assert run.stdout.count("PLAY RECAP") == 1 and "unreachable=1" not in run.stdout, \
        f"{playbook_path.name} did not run through:\n{run.stdout[-6000:]}\n{run.stderr[-3000:]}"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory, site_live: dict[str, Any]) -> dict[str, Path]:
    # site.yml's run is the walkthrough's (tests/fleet/conftest.py); the gate fails the hosts it blocks, after
    # every report is written, so only an unreachable host would be a run that did not go through.
    assert all(stats["unreachable"] == 0 for stats in site_live["output"]["stats"].values()), site_live["output"]
    fleet = site_live["reports"]
    captures = tmp_path_factory.mktemp("capture-views")
    inventory = captures / "captures.yml"
    inventory.write_text(json.dumps({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"},
        "hosts": {f"capture-{path.stem}": {"gpu_audit_capture": str(path)} for path in CAPTURES}}}))
    playbook(ROOT / "playbooks" / "audit.yml", inventory, captures / "reports")
    found = {path.stem: fleet for path in fleet.glob("*.json") if not path.stem.endswith("-gate")}
    found.update({path.stem: captures / "reports" for path in (captures / "reports").glob("*.json")})
    return found


def fleet_hosts() -> list[str]:
    text = INVENTORY.read_text()
    hosts = text[text.index("gpu_hosts:"):]
    return sorted(set(re.findall(r"^        ([a-z0-9][a-z0-9-]+):$", hosts, re.MULTILINE)))


HOSTS = fleet_hosts() + [f"capture-{path.stem}" for path in CAPTURES]


def test_every_host_is_compared() -> None:
    # A renamed inventory or a capture folder that moved would leave this test comparing nothing; a fleet host
    # naming a capture that does not exist would leave that capture unseen.
    assert len(fleet_hosts()) >= 10 and len(ALL_CAPTURES) >= 10 and CAPTURES
    known = {path.stem for path in ALL_CAPTURES}
    assert REPLAYED.issubset(known), REPLAYED - known


# --- reading each view back --------------------------------------------------------------------------------


def section(markdown: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", markdown, re.MULTILINE | re.DOTALL)
    return match.group(1) if match else ""


def row(markdown: str, label: str) -> str | None:
    match = re.search(rf"^\| {re.escape(label)} \| (.*) \|$", markdown, re.MULTILINE)
    return match.group(1) if match else None


def markdown_view(markdown: str) -> dict[str, Any]:
    verdict = re.search(r"^\*\*Verdict: (.+?)\*\* \((\d+) critical, (\d+) warning, (\d+) info\)", markdown,
                        re.MULTILINE)
    assert verdict, "the host Markdown has no verdict line"
    action = re.search(r"^\*\*Action: (\S+)\*\*", markdown, re.MULTILINE)
    assert action, "the host Markdown has no action line"
    gpus = row(markdown, "GPUs") or ""
    ceiling = row(markdown, "Communication ceiling")
    return {
        "verdict": verdict.group(1),
        "action": action.group(1),
        "counts": {"critical": int(verdict.group(2)), "warning": int(verdict.group(3)), "info": int(verdict.group(4))},
        "ids": sorted(re.findall(r"^### (?:CRITICAL|warning|info): (\S+)$", section(markdown, "Findings"),
                                 re.MULTILINE)),
        "gpu_count": 0 if gpus == "none found" else int(gpus.split(" x ")[0]),
        "p2p": row(markdown, "P2P (read)"),
        "ceiling": ceiling_of(ceiling) if ceiling else None,
    }


def ceiling_of(text: str) -> tuple[str, str]:
    """(tok/s as shown, basis word) of a 'limits single-stream decode to N tok/s on this host (basis ...)' text."""
    match = re.search(r"decode to ([\d.]+) tok/s on this host \((measured|estimated)", text)
    assert match, f"a communication ceiling that does not say its rate and basis: {text!r}"
    return match.group(1), match.group(2)


def json_view(report: dict[str, Any]) -> dict[str, Any]:
    summary = report["summary"]
    priced = (((report.get("bench") or {}).get("nccl") or {}).get("communication_ceiling") or {}).get("batch_1")
    rate = (priced or {}).get("max_tokens_per_s_single_stream")
    return {
        "verdict": summary["verdict"], "action": summary["action"], "counts": summary["counts"],
        "ids": sorted(f["id"] for f in report["findings"]),
        "gpu_count": summary["gpu_count"], "p2p": summary["p2p"],
        "ceiling": (format_rate(rate), BASIS_WORD[priced["basis"]]) if rate else None,
    }


def fleet_row(fleet_md: str, host: str) -> dict[str, Any]:
    match = re.search(rf"^\| {re.escape(host)} \| (.*) \|$", fleet_md, re.MULTILINE)
    assert match, f"fleet.md has no row for {host}"
    _audit, verdict, _scope, gpus, _virt, p2p, worst, action = match.group(1).split(" | ")
    return {"verdict": verdict, "gpu_count": 0 if gpus == "none found" else int(gpus.split(" x ")[0]), "p2p": p2p,
            "worst": None if worst == "none" else worst, "action": action}


def metrics_view(report: dict[str, Any]) -> dict[str, Any]:
    text = textfile(report, 0)
    samples = re.findall(r"^(gpuhost_\w+)(?:\{(.*)\})? (\S+)$", text, re.MULTILINE)

    def labelled(name: str) -> list[tuple[dict[str, str], str]]:
        return [(dict(re.findall(r'(\w+)="([^"]*)"', labels)), value) for n, labels, value in samples if n == name]

    verdicts = [labels["verdict"] for labels, value in labelled("gpuhost_verdict") if value == "1"]
    actions = [labels["action"] for labels, value in labelled("gpuhost_action") if value == "1"]
    gpus = [value for _labels, value in labelled("gpuhost_gpus")]
    return {
        "verdict": verdicts[0] if len(verdicts) == 1 else verdicts,
        "action": actions[0] if len(actions) == 1 else actions,
        "counts": {labels["severity"]: int(value) for labels, value in labelled("gpuhost_findings")},
        "ids": sorted(labels["id"] for labels, _value in labelled("gpuhost_finding")),
        "gpu_count": int(gpus[0]) if gpus else None,
        "read_pairs": [value for labels, value in labelled("gpuhost_p2p_status") if labels["capability"] == "read"],
        "allreduce_source": [labels["source"] for labels, _value in labelled("gpuhost_allreduce_latency_seconds")],
        "ceiling": [(format_rate(float(value)), labels["basis"])
                    for labels, value in labelled("gpuhost_communication_ceiling_tokens_per_second")],
    }


def load(host: str, reports: dict[str, Path]) -> tuple[dict[str, Any], str]:
    where = reports[host]
    return json.loads((where / f"{host}.json").read_text()), (where / f"{host}.md").read_text()


# --- the comparisons ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", HOSTS)
def test_host_json_markdown_fleet_row_and_metrics_agree(host: str, reports: dict[str, Path]) -> None:
    report, markdown = load(host, reports)
    record = json_view(report)
    shown = markdown_view(markdown)
    assert shown == record, f"{host}: the Markdown says {shown}, the JSON {record}"

    fleet = fleet_row((reports[host] / "fleet.md").read_text(), host)
    worst = report["summary"]["worst_finding"]
    assert fleet == {"verdict": record["verdict"], "gpu_count": record["gpu_count"], "p2p": record["p2p"],
                     "worst": f"{worst['severity']}: {worst['id']}" if worst else None,
                     "action": record["action"]}, host

    metrics = metrics_view(report)
    assert metrics["verdict"] == record["verdict"] and metrics["counts"] == record["counts"], host
    assert metrics["action"] == record["action"], host
    # Ids this catalog does not know get no series; every id a report of this version holds is known.
    assert metrics["ids"] == sorted(set(record["ids"])), host
    # No GPU series only where the material did not show the GPU list (0 would be a guess there).
    assert metrics["gpu_count"] == record["gpu_count"] or (metrics["gpu_count"] is None and not record["gpu_count"])
    if record["p2p"] == "none":
        assert metrics["read_pairs"] and set(metrics["read_pairs"]) == {"0"}, host
    elif record["p2p"] == "ok":
        assert metrics["read_pairs"] and set(metrics["read_pairs"]) == {"1"}, host
    if record["ceiling"]:
        expected = {"measured": {"measured"}, "estimated": {"predicted_ceiling"}}[record["ceiling"][1]]
        # A size outside the measured sweep has no latency series (it was not measured): absent, never other.
        assert set(metrics["allreduce_source"]) <= expected, host
        word = {"measured": "measured", "estimated": "predicted_ceiling"}[record["ceiling"][1]]
        assert metrics["ceiling"] in ([], [(record["ceiling"][0], word)]), host
        assert bool(metrics["ceiling"]) == bool(metrics["allreduce_source"]), host
    else:
        assert not metrics["ceiling"], host


def pair_counts(text: str) -> list[tuple[int, int, int | None]]:
    """(found, of, directions of) for every 'N of M GPU pairs (X of Y directions)' or 'N of the M pairs'."""
    found = []
    for match in re.finditer(r"(\d+) of (?:the )?(\d+) (?:GPU )?pairs(?: \((\d+) of (\d+) directions\))?", text):
        found.append((int(match.group(1)), int(match.group(2)), int(match.group(4)) if match.group(4) else None))
    return found


def group_sizes(report: dict[str, Any], gate: dict[str, Any] | None) -> set[int]:
    sizes = {report["summary"]["gpu_count"]}
    for finding in report["findings"]:
        group = (finding.get("evidence") or {}).get("group")
        if isinstance(group, list):
            sizes.add(len(group))
        gpus = (finding.get("evidence") or {}).get("gpus")
        if isinstance(gpus, int):
            sizes.add(gpus)
    if gate and gate["launch"].get("tensor_parallel_size"):
        sizes.add(gate["launch"]["tensor_parallel_size"])
    return sizes


def gate_of(host: str, reports: dict[str, Path]) -> tuple[dict[str, Any], str] | None:
    path = reports[host] / f"{host}-gate.json"
    if not path.exists():
        return None
    return json.loads(path.read_text()), (reports[host] / f"{host}-gate.md").read_text()


@pytest.mark.parametrize("host", HOSTS)
def test_pairs_are_counted_one_way_everywhere(host: str, reports: dict[str, Path]) -> None:
    report, markdown = load(host, reports)
    gate = gate_of(host, reports)
    texts = [markdown, json.dumps(report), *([gate[1], json.dumps(gate[0])] if gate else [])]
    pairs_of = {n * (n - 1) // 2 for n in group_sizes(report, gate[0] if gate else None) if n > 1}
    for text in texts:
        for found, of, directions in pair_counts(text):
            assert of in pairs_of, f"{host}: '{found} of {of} pairs' counts no GPU group of this host {pairs_of}"
            assert directions is None or directions == 2 * of, f"{host}: {of} pairs are not {directions} directions"


@pytest.mark.parametrize("host", [h for h in HOSTS if not h.startswith("capture-")])
def test_the_gate_shows_the_hosts_communication_figure(host: str, reports: dict[str, Path]) -> None:
    gate = gate_of(host, reports)
    if gate is None:
        pytest.skip(f"{host} has no gate report (no model to deploy, or no GPU)")
    decision, gate_md = gate
    report, markdown = load(host, reports)
    launch = decision["launch"]
    priced = launch.get("communication_ceiling")
    rate = launch.get("communication_ceiling_tok_s")
    shown = re.search(r"^- Communication ceiling: (.*)$", gate_md, re.MULTILINE)
    assert shown, f"{host}: the gate Markdown has no communication ceiling line"
    if rate is None:
        assert shown.group(1) == "not measured"
        return
    assert shown.group(1).startswith(f"{rate} tok/s"), f"{host}: gate Markdown {shown.group(1)!r}, JSON {rate}"
    basis = BASIS_WORD[priced["basis"]]
    assert basis in shown.group(1) or (basis == "measured" and "measured all-reduce" in shown.group(1)), host
    bench = (((report.get("bench") or {}).get("nccl") or {}).get("communication_ceiling") or {}).get("batch_1") or {}
    if bench.get("model") == priced.get("model") and bench.get("tensor_parallel_size") == priced.get(
            "tensor_parallel_size"):
        # The same model at the same tensor-parallel size: one figure, one basis, in every view.
        figure = (format_rate(rate), basis)
        assert json_view(report)["ceiling"] == figure, host
        assert markdown_view(markdown)["ceiling"] == figure, host
        for line in re.findall(r"^- info `communication_ceiling` \(bench\): (.*)$", gate_md, re.MULTILINE):
            assert ceiling_of(line) == figure, f"{host}: the gate's bench finding says {line!r}"


def test_the_incidents_copy_test_is_never_shown_as_an_all_reduce(reports: dict[str, Path]) -> None:
    report, markdown = load("incident-guest", reports)
    decision, gate_md = gate_of("incident-guest", reports)
    for view in (markdown, json.dumps(report), gate_md, json.dumps(decision)):
        assert "465 tok/s" not in view and "measured all-reduce over 8" not in view
    assert json_view(report)["ceiling"] == (format_rate(decision["launch"]["communication_ceiling_tok_s"]),
                                            "estimated")
