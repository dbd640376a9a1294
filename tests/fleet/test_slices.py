"""The capture fleet audited as AWX job slicing runs it: two slices, each a separate run over half of the
inventory, into one shared report directory and into one directory each; playbooks/merge_reports.yml then
rebuilds fleet.md, byte for byte as one run over the whole fleet writes it. The lost hosts of
tests/fleet/lost.yml (one unreachable with an old report, one whose audit fails) are split between the slices,
so that their rows (status, reason, last report's date) are merged too. Every run is made from an empty
working directory, which must stay empty: nothing is written outside the report directories.

The set_stats artifacts (what AWX shows on the job and passes along a workflow) are read from the json callback's
global_custom_stats: the audit's, the merge's, and the benchmark's and gate's of a check-mode site.yml run.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.test_site_fleet import FLEET, INVENTORY, LAST_REPORT_MTIME, LOST, ROOT, ansible_playbook, task_results

# Findings the report task adds to an audit's: drift between reports and the comparison of a class's hosts.
REPORT_PHASE_FINDINGS = {"gpu_gone", "gpu_added", "link_trained_lower", "p2p_proof_stale", "fleet_vbios_mismatch",
                         "fleet_driver_mismatch"}

LOST_HOSTS = ("lost-gpu-host", "broken-capture-host")
HOSTS = sorted(FLEET | set(LOST_HOSTS))
# Two halves of the inventory, one lost host in each (AWX deals hosts to slices in turn).
SLICES = (HOSTS[0::2], HOSTS[1::2])


def playbook(name: str, workdir: Path, *args: str) -> tuple[int, dict[str, Any]]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
           "ANSIBLE_SHOW_CUSTOM_STATS": "1", "ANSIBLE_NOCOLOR": "1"}
    run = subprocess.run([ansible_playbook(), str(ROOT / name), *args], cwd=workdir, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.stdout.startswith("{"), f"{name} {args}:\n{run.stdout[-4000:]}\n{run.stderr[-3000:]}"
    return run.returncode, json.loads(run.stdout)


def with_last_report(reports: Path) -> Path:
    """A report directory holding the unreachable host's report of an earlier run, as test_site_fleet's."""
    reports.mkdir(parents=True, exist_ok=True)
    last = reports / "lost-gpu-host.json"
    last.write_text(json.dumps({"host": "lost-gpu-host", "summary": {
        "verdict": "fit", "virtualization": "bare metal", "gpu_count": 8, "gpu_models": ["NVIDIA H100 80GB HBM3"],
        "p2p": "ok", "worst_finding": None}}))
    os.utime(last, (LAST_REPORT_MTIME, LAST_REPORT_MTIME))
    return reports


def audit(workdir: Path, reports: Path, hosts: list[str], *args: str) -> dict[str, Any]:
    code, output = playbook("playbooks/audit.yml", workdir, "-i", str(INVENTORY), "-i", str(LOST),
                            "--limit", ",".join(hosts), "-e", f"gpuhost_report_dir={reports}", *args)
    # Each run loses its lost host (unreachable, or failed), after the others' reports were written.
    assert code != 0 and set(output["stats"]) == set(hosts)
    return output


def merge(workdir: Path, *args: str) -> dict[str, Any]:
    code, output = playbook("playbooks/merge_reports.yml", workdir, *args)
    assert code == 0, json.dumps(output)[-3000:]
    return output


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("slices")
    workdir = base / "workdir"
    workdir.mkdir()
    whole = audit(workdir, with_last_report(base / "whole"), HOSTS)
    # One directory shared by both slices: each keeps the rows of the other (gpu_audit_fleet_keep).
    shared = with_last_report(base / "shared")
    first = audit(workdir, shared, SLICES[0], "-e", "gpu_audit_fleet_keep=true")
    audit(workdir, shared, SLICES[1], "-e", "gpu_audit_fleet_keep=true")
    shared_before_merge = (shared / "fleet.md").read_text()
    merged_shared = merge(workdir, "-e", f"gpuhost_report_dir={shared}")
    # One directory per slice; fleet.md merged into a third.
    own = [base / "slice1", base / "slice2"]
    for reports, hosts in zip(own, SLICES, strict=True):
        audit(workdir, with_last_report(reports) if "lost-gpu-host" in hosts else reports, hosts)
    dirs = {"merge_reports_dirs": [str(d) for d in own], "merge_reports_dest": str(base / "merged")}
    check = merge(workdir, "--check", "-e", json.dumps(dirs))
    check_wrote = (base / "merged").exists()
    merged_apart = merge(workdir, "-e", json.dumps(dirs))
    return {"base": base, "workdir": workdir, "whole": whole, "first": first, "shared": shared,
            "shared_before_merge": shared_before_merge, "merged_shared": merged_shared, "check": check,
            "check_wrote": check_wrote, "merged_apart": merged_apart}


def test_slices_into_one_directory_merge_into_the_fleet_md_of_one_run(runs):
    whole = (runs["base"] / "whole" / "fleet.md").read_text()
    assert (runs["shared"] / "fleet.md").read_text() == whole
    # Before the merge the last slice's table kept the first slice's rows: no slice shrinks the table.
    rows = [line for line in runs["shared_before_merge"].splitlines() if line.startswith("| ")][1:]
    assert sorted(row.split(" | ")[0][2:] for row in rows) == HOSTS


def test_slices_into_their_own_directories_merge_into_the_fleet_md_of_one_run(runs):
    assert (runs["base"] / "merged" / "fleet.md").read_text() == (runs["base"] / "whole" / "fleet.md").read_text()
    # The lost hosts' rows came through the merge: their status, the reason and the last report's date.
    assert "| lost-gpu-host | unreachable, last report 2026-01-02 03:04 UTC |" in (runs["base"] / "whole"
                                                                                 / "fleet.md").read_text()
    assert runs["merged_apart"]["global_custom_stats"]["gpuhost_fleet"]["fleet"] == str(runs["base"] / "merged"
                                                                                        / "fleet.md")


def test_the_merge_in_check_mode_writes_nothing(runs):
    assert not runs["check_wrote"]
    said = task_results({"output": runs["check"]}, "Say where the fleet's table is")["localhost"]["msg"]
    assert said.startswith(f"Check mode: would write {runs['base'] / 'merged' / 'fleet.md'}")


def test_nothing_is_written_outside_the_report_directories(runs):
    assert list(runs["workdir"].iterdir()) == []


def test_the_audit_publishes_every_hosts_verdict_as_artifacts(runs):
    stats = runs["whole"]["global_custom_stats"]["gpuhost_audit"]
    reports = runs["base"] / "whole"
    audited = task_results({"output": runs["whole"]}, "Audit the GPU host")
    assert set(stats["hosts"]) == set(HOSTS) and stats["report_dir"] == str(reports)
    for host in FLEET:
        # Published as the report records it: the audit's judgement with what only the report task can see
        # folded in (drift since the last report, the hosts of one class compared: rules/fleet_class.py).
        report = json.loads((reports / f"{host}.json").read_text())
        added = ({f["id"] for f in report["findings"]}
                 - {f["id"] for f in audited[host]["ansible_facts"]["gpu_host"]["findings"]})
        assert added <= REPORT_PHASE_FINDINGS, added
        summary = report["summary"]
        worst = summary["worst_finding"]
        assert stats["hosts"][host] == {"audit": "this run", "verdict": summary["verdict"],
                                        "worst_finding": f"{worst['severity']}: {worst['id']}" if worst else None,
                                        "action": summary["action"], "report": str(reports / f"{host}.md")}
    lost, broken = stats["hosts"]["lost-gpu-host"], stats["hosts"]["broken-capture-host"]
    assert (lost["audit"], lost["verdict"], lost["report"]) == ("unreachable", None, str(reports / "lost-gpu-host.md"))
    assert "127.0.0.1" in lost["msg"]  # in either of the two wordings Ansible gives a refused ssh by timing
    assert (broken["audit"], broken["report"]) == ("failed", None) and "cannot read the capture" in broken["msg"]
    verdicts = [row["verdict"] for row in stats["hosts"].values() if row["verdict"]]
    assert stats["counts"] == {**{v: verdicts.count(v) for v in set(verdicts)}, "unreachable": 1, "failed": 1}
    # A slice publishes its own hosts only.
    assert set(runs["first"]["global_custom_stats"]["gpuhost_audit"]["hosts"]) == set(SLICES[0])


def test_the_merge_publishes_the_whole_fleet_as_one_run_does(runs):
    whole = runs["whole"]["global_custom_stats"]["gpuhost_audit"]
    merged = runs["merged_shared"]["global_custom_stats"]["gpuhost_fleet"]
    assert merged["counts"] == whole["counts"]
    # The same rows, the reports named in the shared directory (the last report of the lost host, too).
    assert merged["hosts"] == {host: {**row, "report": row["report"] and row["report"].replace(
        str(runs["base"] / "whole"), str(runs["shared"]))} for host, row in whole["hosts"].items()}


def test_the_benchmark_and_the_gate_publish_their_verdicts(tmp_path: Path):
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    hosts = ["incident-guest", "incident-guest-accepted", "pve-no-clique"]
    code, output = playbook("site.yml", workdir, "--tags", "audit,bench,gate", "--check", "-i", str(INVENTORY),
                            "--limit", ",".join(hosts), "-e", f"gpuhost_report_dir={tmp_path / 'reports'}")
    assert code == 0, json.dumps(output)[-3000:]
    stats = output["global_custom_stats"]
    # The benchmark folds the incident's logs into the guests' verdicts; the hypervisor is not benchmarked.
    assert set(stats["gpuhost_bench"]["hosts"]) == set(hosts[:2])
    assert stats["gpuhost_bench"]["hosts"]["incident-guest"]["verdict"] == "unfit"
    gate = stats["gpuhost_gate"]
    assert gate["hosts"]["incident-guest"]["verdict"] == "block"
    assert gate["hosts"]["incident-guest"]["worst_finding"] == "p2p_not_supported"
    assert gate["hosts"]["incident-guest-accepted"] == {
        "verdict": "pass", "worst_finding": None,
        "report": str(tmp_path / "reports" / "incident-guest-accepted-gate.md")}
    assert gate["counts"] == {"block": 1, "pass": 1}
    assert not (tmp_path / "reports").exists() and list(workdir.iterdir()) == []
    # Off when asked (a string from -e, as AWX's extra variables may give it): no artifacts.
    code, output = playbook("playbooks/audit.yml", workdir, "--check", "-i", str(INVENTORY), "--limit", hosts[0],
                            "-e", f"gpuhost_report_dir={tmp_path / 'reports'}", "-e", "gpu_audit_stats=false")
    assert code == 0 and output["global_custom_stats"] == {}
