"""The fresh container: it only saw the cuda_toolkit role in check mode, which must have changed nothing."""

from __future__ import annotations

from check_run import changed_files

testinfra_hosts = ["podman://cuda-extension-fresh"]

# Besides check_run.IGNORED: systemd's cache directory for DynamicUser= services.
EXTRA_IGNORED = ["/var/cache/private"]


def test_check_run_changed_no_file(host) -> None:
    changed = changed_files(host, EXTRA_IGNORED)
    assert changed == [], f"changed on the fresh container: {changed}"


def test_nothing_was_installed(host) -> None:
    for path in ("/usr/local/cuda", "/usr/local/cuda-13.1", "/opt/cuda-pip", "/etc/profile.d/cuda.sh"):
        assert not host.file(path).exists, path
    for name in ("python3-venv", "g++"):
        assert not host.package(name).is_installed, name
