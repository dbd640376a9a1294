"""The fresh container: it only saw the roles in check mode, which must have changed nothing."""

from __future__ import annotations

from check_run import changed_files

testinfra_hosts = ["podman://serving-venv-fresh"]

# Besides check_run.IGNORED: systemd's cache directory for DynamicUser= services.
EXTRA_IGNORED = ["/var/cache/private"]


def test_check_run_changed_no_file(host) -> None:
    changed = changed_files(host, EXTRA_IGNORED)
    assert changed == [], f"changed on the fresh container: {changed}"


def test_nothing_was_installed(host) -> None:
    assert not host.user("sglang").exists
    for path in ("/opt/sglang", "/opt/uv"):
        assert not host.file(path).exists, path
    for name in ("python3-venv", "acl"):
        assert not host.package(name).is_installed, name
