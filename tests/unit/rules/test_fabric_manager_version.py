"""Fabric manager presence, state and version match on the real HGX H100 capture (4 NVSwitches)."""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_format import command_key
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import FABRIC_MANAGER, FABRIC_MANAGER_JOURNAL

from tests.paths import FIXTURES
from tests.unit import captures

STATUS = FIXTURES / "fabric-manager" / "systemctl-status_550_version-mismatch.txt"


def fabric_ids(found: dict) -> dict[str, dict]:
    return {f["id"]: f for f in found["findings"] if f["id"].startswith("fabric_manager")}


def with_service(state: str, journal: str | None) -> dict:
    data = captures.capture(captures.H100)
    data["commands"][command_key(FABRIC_MANAGER.argv)] = {"rc": 3, "stdout": f"{state}\n", "stderr": ""}
    if journal is not None:
        data["commands"][command_key(FABRIC_MANAGER_JOURNAL.argv)] = {"rc": 0, "stdout": journal, "stderr": ""}
    return captures.audit(data)


def test_a_running_fabric_manager_is_silent_and_its_log_is_not_read() -> None:
    found = captures.audited(captures.H100)
    # Running: its package's version is asked for (the capture predates that read: not read, null).
    assert found["health"]["fabric_manager"] == {"nvswitches": 4, "service": "active", "version_mismatch": None,
                                                 "package_version": None}
    assert fabric_ids(found) == {}


def test_a_refused_driver_says_both_versions_and_asks_for_the_matching_package() -> None:
    found = with_service("failed", STATUS.read_text())
    assert found["health"]["fabric_manager"]["version_mismatch"] == {"fabric_manager": "550.127.05",
                                                                     "driver": "550.120"}
    finding = fabric_ids(found)["fabric_manager_version_mismatch"]
    assert (finding["severity"], finding["action"]) == ("critical", "reinstall_driver")
    assert "exactly the loaded driver's version (550.120; the fabric manager found is 550.127.05)" in \
        finding["remedy"]
    assert "fabric_manager_inactive" in fabric_ids(found)
    assert found["summary"]["action"] == "reinstall_driver"


def test_a_stopped_fabric_manager_whose_log_was_not_read_is_only_inactive() -> None:
    found = with_service("inactive", None)
    assert found["health"]["fabric_manager"]["version_mismatch"] is None
    assert set(fabric_ids(found)) == {"fabric_manager_inactive"}
