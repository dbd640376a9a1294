"""The fresh container only ever saw the check run, which must have changed nothing there."""

from __future__ import annotations

from check_run import changed_files

testinfra_hosts = ["podman://gpu-metrics-fresh"]


def test_check_run_changed_no_file(host) -> None:
    changed = changed_files(host)
    assert changed == [], f"changed on the fresh container: {changed}"


def test_nothing_was_installed(host) -> None:
    assert not host.package("prometheus-node-exporter").is_installed
    assert not host.file("/var/lib/prometheus/node-exporter/gpuhost.prom").exists
    assert not host.file("/etc/systemd/system/gpuhost-audit.timer").exists
