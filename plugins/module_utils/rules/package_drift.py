"""Driver, CUDA and NCCL packages that unattended-upgrades may move under a running host (facts["packages"],
audit/packages.py).

An upgrade of the driver's packages while its kernel module is loaded leaves the libraries newer than the
module: NVML answers "Driver/library version mismatch" and nvidia-smi exits 18 until a reboot
(gpu_driver_library_mismatch); a fabric manager upgraded apart from the driver refuses to start
(fabric_manager_version_mismatch); a new libnccl2 or CUDA changes what the benchmark measured. Hosts that
serve hold these packages (``apt-mark hold``) or keep them out of unattended-upgrades' reach
(``Unattended-Upgrade::Package-Blacklist``).

The warning needs all of: unattended-upgrades installed, its periodic run on (APT::Periodic::Unattended-
Upgrade above 0), and an installed driver, CUDA or NCCL package neither held nor matched by the blacklist.
Anything not read (no dpkg-query, apt.conf.d not listed, a capture before these reads) leaves it unjudged:
no finding. The allowed origins are not read: a package from an origin unattended-upgrades does not allow is
counted as one it may move, and the finding says so.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

GPU_PACKAGE = re.compile(r"^(?:nvidia-|libnvidia-|cuda-|libcuda|libnccl)")
# Matched by the patterns but without effect on what the GPUs run: a control panel, the PRIME switcher, the
# repository's signing key.
HARMLESS = frozenset({"nvidia-settings", "nvidia-prime", "cuda-keyring"})
_NAMED_AT_MOST = 8


def _blacklisted(name: str, patterns: list[str]) -> bool:
    for pattern in patterns:
        try:
            if re.match(pattern, name):
                return True
        except re.error:
            continue  # unattended-upgrades could not use it either
    return False


def movable_packages(facts: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The installed GPU packages unattended-upgrades may upgrade; None when that cannot be told."""
    packages = (facts.get("packages") or {}).get("packages")
    unattended = (facts.get("packages") or {}).get("unattended_upgrades") or {}
    if packages is None or unattended.get("installed") is None or unattended.get("enabled") is None:
        return None
    if not (unattended["installed"] and unattended["enabled"]):
        return []
    blacklist = [p for p in unattended.get("blacklist") or [] if isinstance(p, str)]
    return [p for p in packages if isinstance(p, dict) and isinstance(p.get("name"), str)
            and GPU_PACKAGE.match(p["name"]) and p["name"].split(":", 1)[0] not in HARMLESS
            and not p.get("held") and not _blacklisted(p["name"].split(":", 1)[0], blacklist)]


def rule_packages_not_held(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    movable = movable_packages(facts)
    if not movable:
        return []
    names = sorted({p["name"].split(":", 1)[0] for p in movable})
    shown = ", ".join(names[:_NAMED_AT_MOST]) + (f" and {len(names) - _NAMED_AT_MOST} more"
                                                 if len(names) > _NAMED_AT_MOST else "")
    return [make(
        "gpu_packages_not_held",
        f"unattended-upgrades is on and {len(names)} NVIDIA driver, CUDA or NCCL package(s) are neither held nor "
        f"blacklisted: {shown}.",
        {"packages": [f"{p['name']}={p.get('version')}" for p in movable],
         "origins_read": False},
        names=" ".join(names))]


PACKAGE_DRIFT_RULES = (rule_packages_not_held,)
