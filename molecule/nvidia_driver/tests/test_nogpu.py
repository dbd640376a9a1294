"""The host without GPUs under role defaults: the role skipped it and changed nothing."""

import pytest
from check_run import changed_files

testinfra_hosts = ["podman://nvidia-driver-nogpu"]

ROLE_FILES = [
    "/etc/apt/sources.list.d/nvidia-cuda.sources",
    "/etc/apt/keyrings/nvidia-cuda.asc",
    "/etc/apt/keyrings/nvidia-cuda.gpg",
    "/etc/apt/preferences.d/nvidia-driver-branch.pref",
    "/etc/modprobe.d/nvidia-driver-blacklist-nouveau.conf",
    "/etc/modprobe.d/nvidia-driver-options.conf",
    "/etc/systemd/system/nvidia-persistenced.service.d",
]


@pytest.mark.parametrize("path", ROLE_FILES)
def test_no_role_file(host, path):
    assert not host.file(path).exists


def test_no_nvidia_package(host):
    # dpkg-query exits 1 when no package matches.
    result = host.run("dpkg-query --show --showformat='${Package} ${db:Status-Abbrev}\\n' 'nvidia-*' 'python3-debian'")
    installed = [line for line in result.stdout.splitlines() if line.split()[1:2] == ["ii"]]
    assert installed == []


def test_nothing_changed_since_prepare(host):
    assert changed_files(host) == []
