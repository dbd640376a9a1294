"""The replica installed from the primary's locks: the same packages at the same versions."""

from __future__ import annotations

import testinfra

testinfra_hosts = ["podman://serving-venv-replica"]


def test_replica_has_the_primarys_freeze(host) -> None:
    primary = testinfra.get_host("podman://serving-venv-primary")
    theirs = primary.file("/opt/sglang/requirements/freeze.txt").content_string
    ours = host.file("/opt/sglang/requirements/freeze.txt").content_string
    assert ours == theirs
    assert len(ours.splitlines()) > 50


def test_replica_has_the_primarys_locks(host) -> None:
    primary = testinfra.get_host("podman://serving-venv-primary")
    for name in ("base.lock", "sglang.lock", "base.in", "sglang.in", "sglang.constraints.txt"):
        path = f"/opt/sglang/requirements/{name}"
        assert host.file(path).content_string == primary.file(path).content_string, name
