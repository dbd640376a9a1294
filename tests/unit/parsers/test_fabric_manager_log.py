"""The fabric manager's refusal of the loaded driver, read from the real outputs users posted."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.fabric_manager_log import version_mismatch
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES

FM = FIXTURES / "fabric-manager"


@pytest.mark.parametrize(("name", "expected"), [
    ("systemctl-status_550_version-mismatch.txt", {"fabric_manager": "550.127.05", "driver": "550.120"}),
    ("log_590-on-580_version-mismatch_wrapped.txt", {"fabric_manager": "590.48.01", "driver": "580.126.09"}),
    ("forum_550_version-mismatch_typographic-apostrophe.txt",
     {"fabric_manager": "550.90.07", "driver": "550.107.02"}),
])
def test_each_posted_refusal_gives_both_versions(name: str, expected: dict) -> None:
    assert version_mismatch((FM / name).read_text(encoding="utf-8")) == expected


def test_later_wording_and_no_refusal() -> None:
    later = ("nv-fabricmanager[1]: fabric manager NVIDIA GPU driver interface version 550.127.05 doesn't match "
             "with driver version 550.120. Please update with the matching NVIDIA driver package.")
    assert version_mismatch(later) == {"fabric_manager": "550.127.05", "driver": "550.120"}
    assert version_mismatch("Started NVIDIA fabric manager service.") is None
    assert version_mismatch("") is None


@given(st.text())
def test_no_text_makes_it_raise(text: str) -> None:
    found = version_mismatch(text)
    assert found is None or set(found) == {"fabric_manager", "driver"}
