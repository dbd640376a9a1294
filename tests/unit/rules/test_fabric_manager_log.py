"""The fabric manager's own log as material, and its package against the loaded driver while it runs:
real journal lines from public threads (tests/fixtures/fabric-manager/SOURCES.md) and the real HGX H100 capture."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_format import command_key
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import FABRIC_MANAGER_PACKAGE
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import build_capture
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_readers import replay
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.fabric_manager_log import (
    log_events,
    looks_like_fabric_manager_log,
    package_version,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES
from tests.unit import captures, schemas
from tests.unit.material.test_capture import incident

FM = FIXTURES / "fabric-manager"


def fabric_ids(found: dict) -> dict[str, dict]:
    return {f["id"]: f for f in found["findings"] if f["id"].startswith("fabric_manager")}


def from_material(*names: str, with_gpus: bool = False) -> dict:
    inputs = [(name, (FM / name).read_bytes()) for name in names]
    capture = incident(*inputs) if with_gpus else build_capture(inputs)
    return facts.audit(replay(capture), facts.resolve_subsets(["all"]), RuleOptions())


@pytest.mark.parametrize(("name", "kinds", "started"), [
    ("journal_520_A40-nvlink-bridge_nothing-to-do.txt", ["nothing_to_do"], False),
    ("journal_start-sh_2x4090_nothing-to-do.txt", ["nothing_to_do", "start_failed"], False),
    ("journal_8xH20_started.txt", [], True),
    ("log_8xH200_config-invalid.txt", ["config_invalid"], False),
    ("systemctl-status_550_version-mismatch.txt", ["version_mismatch"], False),
    ("log_590-on-580_version-mismatch_wrapped.txt", ["version_mismatch"], False),
])
def test_each_posted_log_gives_its_errors(name: str, kinds: list[str], started: bool) -> None:
    text = (FM / name).read_text(encoding="utf-8")
    assert looks_like_fabric_manager_log(text)
    events = log_events(text)
    assert [e["kind"] for e in events["errors"]] == kinds and events["started"] is started


def test_a_config_the_fabric_manager_calls_invalid_is_inactive_with_its_line() -> None:
    found = from_material("log_8xH200_config-invalid.txt")
    assert found["health"]["fabric_manager"]["nvswitches"] is None
    finding = fabric_ids(found)["fabric_manager_inactive"]
    assert finding["severity"] == "critical"
    assert "FABRIC_NODE_CONFIG_FILE has an invalid value" in finding["summary"]


def test_the_refusal_in_a_pasted_journal_is_the_version_mismatch() -> None:
    found = from_material("systemctl-status_550_version-mismatch.txt")
    finding = fabric_ids(found)["fabric_manager_version_mismatch"]
    assert (finding["severity"], finding["action"]) == ("critical", "reinstall_driver")
    assert "of a state not read" in finding["summary"] and "550.120" in finding["remedy"]


@pytest.mark.parametrize("name", ["journal_520_A40-nvlink-bridge_nothing-to-do.txt",
                                  "journal_start-sh_2x4090_nothing-to-do.txt", "journal_8xH20_started.txt"])
def test_nothing_to_do_without_nvswitches_shown_and_a_good_start_are_silent(name: str) -> None:
    assert fabric_ids(from_material(name)) == {}


def test_the_facts_with_a_fabric_manager_log_follow_the_published_schema() -> None:
    for name in ("log_8xH200_config-invalid.txt", "journal_8xH20_started.txt"):
        errors = sorted(schemas.validator("facts").iter_errors(from_material(name, with_gpus=True)), key=str)
        assert not errors, errors[0].message


def with_package(stdout: str, rc: int = 0) -> dict:
    data = captures.capture(captures.H100)  # nvidia-fabricmanager active, driver 550.127.05
    data["commands"][command_key(FABRIC_MANAGER_PACKAGE.argv)] = {"rc": rc, "stdout": stdout, "stderr": ""}
    return captures.audit(data)


def test_a_running_fabric_manager_whose_package_moved_is_a_warning() -> None:
    found = with_package("ii  nvidia-fabricmanager-550 550.163.01-1\n")
    assert found["health"]["fabric_manager"]["package_version"] == "550.163.01"
    finding = fabric_ids(found)["fabric_manager_version_mismatch"]
    assert finding["severity"] == "warning"
    assert "installed package is 550.163.01 and the loaded driver is 550.127.05" in finding["summary"]


def test_a_running_fabric_manager_of_the_driver_s_version_is_silent() -> None:
    found = with_package("ii  nvidia-fabricmanager-550 550.127.05-1\nrc  nvidia-fabricmanager-535 535.183.01-1\n")
    assert found["health"]["fabric_manager"]["package_version"] == "550.127.05"
    assert fabric_ids(found) == {}


@pytest.mark.parametrize(("text", "version"), [
    ("ii  nvidia-fabric-manager 1:580.95.05-1ubuntu1\n", "580.95.05"),
    ("un  nvidia-fabricmanager-550 \n", None),
    ("ii  nvidia-fabricmanager-550 550.54.15-1\nii  nvidia-fabricmanager-535 535.161.08-1\n", None),
    ("dpkg-query: no packages found matching nvidia-fabric*manager*\n", None),
])
def test_package_versions_as_dpkg_lists_them(text: str, version: str | None) -> None:
    assert package_version(text) == version


@given(st.text())
def test_no_text_makes_the_log_reader_raise(text: str) -> None:
    events = log_events(text)
    assert set(events) == {"errors", "started"}
    looks_like_fabric_manager_log(text)
    package_version(text)
