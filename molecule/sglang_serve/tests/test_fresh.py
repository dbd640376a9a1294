"""The fresh container: provisioned (user, venv, model) but only ever run in check mode, which must
have changed nothing."""

from __future__ import annotations

from check_run import changed_files

testinfra_hosts = ["podman://sglang-serve-fresh"]

# Besides check_run.IGNORED: systemd's cache directory for DynamicUser= services.
EXTRA_IGNORED = ["/var/cache/private"]


def test_check_run_changed_no_file(host) -> None:
    changed = changed_files(host, EXTRA_IGNORED)
    assert changed == [], f"changed on the fresh container: {changed}"


def test_nothing_was_deployed(host) -> None:
    for path in ("/etc/systemd/system/sglang-glm-5-nvfp4.service", "/etc/sglang", "/var/lib/sglang-serve",
                 "/usr/local/lib/sglang-serve", "/etc/systemd/system/nvidia-device-nodes.service"):
        assert not host.file(path).exists, path
    assert host.check_output("systemctl show --property=LoadState --value sglang-glm-5-nvfp4.service") == "not-found"
