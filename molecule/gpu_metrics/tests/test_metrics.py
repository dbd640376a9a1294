"""The converged container: node_exporter serves the audit's gpuhost_ series with the values of the JSON report
the audit wrote on the controller, and the check run after idempotence changed nothing."""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from pathlib import Path

testinfra_hosts = ["podman://gpu-metrics"]

REPORT = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "reports" / "gpu-metrics.json"
SAMPLE = re.compile(r'^(gpuhost_\w+|node_textfile_scrape_error)(?:\{(.*)\})? (\S+)$')
P2P_NOT_OK = {"NS", "CNS", "GNS", "TNS", "DR"}


def scrape(host) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The exporter's samples of the audit (and the textfile collector's error flag), as curl gets them."""
    text = host.check_output("curl -s --fail 127.0.0.1:9100/metrics")
    samples = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match:
            labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
            samples[(match.group(1), labels)] = float(match.group(3))
    return samples


def value(samples, name: str, **labels: object) -> float | None:
    return samples.get((name, frozenset((k, str(v)) for k, v in labels.items())))


def test_the_exporter_listens_on_localhost_only(host) -> None:
    assert host.service("prometheus-node-exporter").is_enabled
    assert host.service("prometheus-node-exporter").is_running
    assert host.socket("tcp://127.0.0.1:9100").is_listening
    assert not host.socket("tcp://0.0.0.0:9100").is_listening


def test_the_metrics_hold_the_report(host) -> None:
    report = json.loads(REPORT.read_text())
    samples = scrape(host)
    assert value(samples, "node_textfile_scrape_error") == 0
    verdict = report["summary"]["verdict"]
    assert value(samples, "gpuhost_verdict", verdict=verdict) == 1
    assert sum(v for (name, _l), v in samples.items() if name == "gpuhost_verdict") == 1
    assert value(samples, "gpuhost_gpus") == report["summary"]["gpu_count"] == len(report["gpus"]["devices"])
    for severity in ("critical", "warning", "info"):
        expected = sum(1 for f in report["findings"] if f["severity"] == severity)
        assert value(samples, "gpuhost_findings", severity=severity) == expected, severity
    fired = {(dict(labels)["id"], dict(labels)["severity"]) for (name, labels), _v in samples.items()
             if name == "gpuhost_finding"}
    assert fired == {(f["id"], f["severity"]) for f in report["findings"]}
    assert abs(value(samples, "gpuhost_last_audit_timestamp_seconds") - time.time()) < 3600


def test_p2p_status_is_the_reports_matrix(host) -> None:
    report = json.loads(REPORT.read_text())
    samples = scrape(host)
    matrix = report["p2p"]["read"]
    assert len(matrix) == 8
    for a in range(len(matrix)):
        for b in range(a + 1, len(matrix)):
            cells = {matrix[a][b], matrix[b][a]}
            expected = 0 if cells & P2P_NOT_OK else 1 if cells == {"OK"} else None
            assert value(samples, "gpuhost_p2p_status", gpu_a=a, gpu_b=b, capability="read") == expected, (a, b)


def test_links_are_the_reports(host) -> None:
    report = json.loads(REPORT.read_text())
    samples = scrape(host)
    links = {d["bdf"].lower(): d.get("link") or {} for d in report["pci"]["nvidia_devices"] if d.get("kind") == "gpu"}
    for device in report["gpus"]["devices"]:
        bus_id = device["pci_bus_id"].lower()
        labels = {"gpu": device["index"], "bus_id": bus_id}
        assert value(samples, "gpuhost_gpu_pcie_link_width", **labels) == links[bus_id]["width_current"], bus_id
        assert value(samples, "gpuhost_gpu_pcie_link_max_width", **labels) == links[bus_id]["width_max"], bus_id


def test_the_check_run_changed_nothing(host) -> None:
    paths = "/etc /usr /opt /var/lib/prometheus /var/lib/dpkg /root"
    changed = host.check_output(f"find {paths} -xdev -path /root/.ansible -prune -o "
                                f"-newer /run/molecule-before-check -print")
    assert changed == "", f"the check run changed: {changed}"


def test_the_audit_is_scheduled(host) -> None:
    timer = host.service("gpuhost-audit.timer")
    assert timer.is_enabled and timer.is_running
    service = host.file("/etc/systemd/system/gpuhost-audit.service").content_string
    assert "ExecStart=/usr/bin/flock --nonblock --conflict-exit-code 75 /run/lock/gpuhost-audit.lock " in service


def test_a_run_that_finds_the_lock_taken_does_nothing_and_succeeds(host) -> None:
    """Holding the lock as another audit would, a start of the service exits at once with 75, counted as success
    (the checkout's ansible-playbook does not even exist here, so a run that did not stop at the lock would fail)."""
    host.check_output(shlex.join(["flock", "/run/lock/gpuhost-audit.lock", "systemctl", "start",
                                  "gpuhost-audit.service"]))
    shown = host.check_output("systemctl show --property=Result,ExecMainStatus gpuhost-audit.service")
    assert "Result=success" in shown and "ExecMainStatus=75" in shown, shown
