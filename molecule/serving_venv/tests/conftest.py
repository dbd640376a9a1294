"""Shared by the tests of the converged containers: skip them when prepare found no torch wheel."""

from __future__ import annotations

import pytest

WHEEL = "/srv/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.fixture(autouse=True)
def torch_wheel(request: pytest.FixtureRequest) -> None:
    if "fresh" in request.node.nodeid:
        return
    host = request.getfixturevalue("host")
    if not host.file(WHEEL).exists:
        pytest.skip(f"{WHEEL} is missing: the controller had no torch CPU wheel (see prepare's message)")
