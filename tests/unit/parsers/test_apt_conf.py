"""APT's periodic unattended-upgrade setting and Package-Blacklist (parsers/apt_conf.py)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.apt_conf import (
    package_blacklist,
    periodic_unattended_upgrade,
)
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES

PACKAGES = FIXTURES / "packages"
ON = (PACKAGES / "20auto-upgrades_on.txt").read_text()
OFF = (PACKAGES / "20auto-upgrades_off_constructed.txt").read_text()
BLACKLIST = (PACKAGES / "50unattended-upgrades_blacklist-nvidia_constructed.txt").read_text()


@pytest.mark.parametrize(("texts", "expected"), [
    ([ON], True), ([OFF], False), ([], False),  # unset: apt.systemd.daily's default, 0
    ([ON, OFF], False), ([OFF, ON], True),  # the later file wins
    (['// APT::Periodic::Unattended-Upgrade "1";'], False),  # commented out
    (['APT::Periodic::Unattended-Upgrade "always";'], True),
    (['APT::Periodic::Unattended-Upgrade "sometimes";'], None),  # neither a number nor always: unknown
    (['APT {\n  Periodic {\n    Unattended-Upgrade "1";\n  };\n};\n'], None),  # nested: not read, so unknown
])
def test_periodic_setting(texts: list[str], expected: bool | None) -> None:
    assert periodic_unattended_upgrade(texts) is expected


def test_blacklist_entries_without_the_commented_ones() -> None:
    assert package_blacklist([BLACKLIST]) == ["nvidia-", "libnvidia-", "cuda-", "libnccl"]


@given(st.lists(st.text(max_size=120), max_size=3))
def test_any_text_raises_nothing(texts: list[str]) -> None:
    assert periodic_unattended_upgrade(texts) in (True, False, None)
    assert all(isinstance(entry, str) for entry in package_blacklist(texts))
