"""The fresh container: it only saw the roles in check mode, which must have changed nothing."""

from __future__ import annotations

testinfra_hosts = ["podman://serving-venv-fresh"]

# Paths that change on a running system whatever the roles do.
IGNORED = [
    "/proc", "/sys", "/dev", "/run", "/tmp", "/var/tmp", "/var/log", "/var/lib/systemd",
    "/var/cache/private", "/root/.ansible",
]


def test_check_run_changed_no_file(host) -> None:
    prune = " -o ".join(f"-path {path}" for path in IGNORED)
    changed = host.check_output(
        f"find / -xdev \\( {prune} -o -name __pycache__ \\) -prune -o -newer /run/molecule-baseline -print"
    )
    assert changed == "", f"changed on the fresh container: {changed.splitlines()}"


def test_nothing_was_installed(host) -> None:
    assert not host.user("sglang").exists
    for path in ("/opt/sglang", "/opt/uv"):
        assert not host.file(path).exists, path
    for name in ("python3-venv", "acl"):
        assert not host.package(name).is_installed, name
