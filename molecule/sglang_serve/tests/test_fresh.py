"""The fresh container: provisioned (user, venv, model) but only ever run in check mode, which must
have changed nothing."""

from __future__ import annotations

testinfra_hosts = ["podman://sglang-serve-fresh"]

# Paths that change on a running system whatever the role does.
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


def test_nothing_was_deployed(host) -> None:
    for path in ("/etc/systemd/system/sglang-glm-5-nvfp4.service", "/etc/sglang", "/var/lib/sglang-serve"):
        assert not host.file(path).exists, path
    assert host.check_output("systemctl show --property=LoadState --value sglang-glm-5-nvfp4.service") == "not-found"
