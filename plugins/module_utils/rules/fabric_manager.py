"""The fabric manager beyond its service state (rules/health.py judges that and its refusal of the loaded
driver): the errors of its log given as material, and the installed package against the loaded driver
while it runs.

Its log (health.fabric_manager.log, parsers/fabric_manager_log.py): a start that failed (its start script's
exit, a config item it calls invalid) on a host with NVSwitches, or where the material showed no PCI bus to
tell, is fabric_manager_inactive, with the lines that say why. ``NV_WARN_NOTHING_TO_DO`` says the fabric
manager found no NVSwitch to manage: on a host whose PCI bus shows NVSwitches that is fabric_manager_inactive
(NVLink 5 systems need NVLSM beside it, or the NVSwitch driver is not bound); where the PCI bus shows none, or
was not seen, it is no finding (a fabric manager installed where no NVSwitch needs it, as on GPUs joined by
NVLink bridges). A log whose last word is a successful start is no finding.

The package (health.fabric_manager.package_version): NVIDIA ships the fabric manager for exactly one driver
version and it refuses any other at start. A running fabric manager whose installed package differs from the
loaded driver started before one of them moved (an upgrade without a restart): it works until its next start,
which refuses. That is fabric_manager_version_mismatch raised as a warning.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.health_limits import FABRIC_MANAGER_RUNNING
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

_START_ERRORS = ("start_failed", "config_invalid", "nothing_to_do")


def _fabric(facts: dict[str, Any]) -> dict[str, Any]:
    found = (facts.get("health") or {}).get("fabric_manager")
    return found if isinstance(found, dict) else {}


def rule_fabric_manager_log(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    fabric = _fabric(facts)
    log = fabric.get("log") if isinstance(fabric.get("log"), dict) else {}
    errors = [e for e in log.get("errors") or [] if isinstance(e, dict) and e.get("kind") in _START_ERRORS]
    switches = fabric.get("nvswitches")
    if not errors or log.get("started") is True or switches == 0:
        return []
    if switches is None and {e["kind"] for e in errors} <= {"nothing_to_do", "start_failed"} \
            and any(e["kind"] == "nothing_to_do" for e in errors):
        return []  # no NVSwitch for it, and nothing showed the host has any
    where = f"This host has {switches} NVSwitch(es) and" if switches else "In the material,"
    lines = " | ".join(e.get("line") or "" for e in errors[:4])
    return [make("fabric_manager_inactive",
                 f"{where} nvidia-fabricmanager's log says it did not start: {lines}. Without it the GPUs' NVLink "
                 "fabric is not set up and CUDA refuses to start (cudaErrorSystemNotReady).",
                 {"nvswitches": switches, "service": fabric.get("service"), "log_errors": errors[:10]})]


def rule_fabric_manager_package(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    fabric = _fabric(facts)
    package = fabric.get("package_version")
    driver = (facts.get("gpus") or {}).get("driver_version")
    if fabric.get("service") not in FABRIC_MANAGER_RUNNING or not isinstance(package, str) \
            or not isinstance(driver, str) or package == driver.strip():
        return []
    return [make("fabric_manager_version_mismatch",
                 f"nvidia-fabricmanager runs, but its installed package is {package} and the loaded driver is "
                 f"{driver}: the running one started before one of them changed, and its next start (a restart, "
                 "a reboot that does not load a driver of its version) will refuse the driver.",
                 {"service": fabric.get("service"), "fabric_manager": package, "driver": driver,
                  "from": "package"}, severity="warning", fabric_manager=package, driver=driver)]


FABRIC_MANAGER_RULES = (rule_fabric_manager_log, rule_fabric_manager_package)
