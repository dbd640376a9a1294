"""The consumer: no toolkit, no compiler; the extension came from the wheelhouse."""

from __future__ import annotations

import hashlib

from common import (
    KEY,
    KEY_DIR,
    WHEEL,
    WHEELHOUSE,
    WORKDIR,
    check_gpu_code,
    check_installed_as_user,
    check_ownership,
    marker,
)

testinfra_hosts = ["podman://cuda-extension-consumer"]


def test_no_compiler_exists_here(host) -> None:
    for tool in ("nvcc", "gcc", "g++", "cc", "c++"):
        assert host.run(f"command -v {tool}").rc != 0, tool
    assert host.check_output("find / -xdev -name nvcc -print -quit") == ""
    assert not host.file("/usr/local/cuda-13.1").exists


def test_nothing_was_built_here(host) -> None:
    # No source, no wrapper, no log, no async job: only the wheel copied from the wheelhouse.
    assert host.check_output(f"ls -A {WORKDIR}").split() == ["dist"]


def test_installed_the_wheelhouse_wheel(host) -> None:
    recorded = marker(host)
    assert recorded["key"] == KEY
    assert recorded["key_dir"] == KEY_DIR
    assert recorded["action"] == "installed_from_wheelhouse"
    remote = host.check_output(f"sha256sum {WORKDIR}/dist/{WHEEL}").split()[0]
    assert remote == hashlib.sha256((WHEELHOUSE / WHEEL).read_bytes()).hexdigest()


def test_installed_extension_works_without_a_gpu(host) -> None:
    check_installed_as_user(host)


def test_library_holds_sm_120_code_only(host) -> None:
    check_gpu_code(host)


def test_venv_and_package_belong_to_the_venv_user(host) -> None:
    check_ownership(host)
