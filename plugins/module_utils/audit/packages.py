"""The NVIDIA driver, CUDA and NCCL packages of a Debian or Ubuntu host, whether each is held, and whether
unattended-upgrades may upgrade them: what rules/package_drift.py judges. Read only, and cheaply: one
``dpkg-query -W`` over a few name patterns and the small files of /etc/apt/apt.conf.d.

Null where the host cannot tell: no dpkg-query (not a Debian family host), an apt.conf.d that cannot be
listed, a capture made before these reads. The nested apt.conf spelling and the allowed origins
(``Unattended-Upgrade::Origins-Pattern``, which needs each package's origin) are not read: a package
outside the allowed origins is still counted as one unattended-upgrades may move (said in the finding).
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import DPKG_GPU_PACKAGES
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.apt_conf import (
    package_blacklist,
    periodic_unattended_upgrade,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.dpkg_list import parse_dpkg_list

APT_CONF_DIR = "/etc/apt/apt.conf.d"
# apt.conf(5): APT reads the files of the directory whose names hold only alphanumerics, '-', '_' and '.' and
# have no extension or ".conf"; a 50unattended-upgrades.dpkg-old or an editor's backup is skipped.
APT_PART = re.compile(r"^[A-Za-z0-9_\-]+(?:\.conf)?$")
APT_CONF = "/etc/apt/apt.conf"
UNATTENDED_PACKAGE = "unattended-upgrades"


def _apt_texts(source: Source) -> list[str] | None:
    """The texts APT reads, in its order: apt.conf.d's files by name, then apt.conf; None when the directory
    cannot be listed."""
    names = source.listdir(APT_CONF_DIR)
    if names is None:
        return None
    parts = sorted(name for name in names if APT_PART.match(name))
    texts = [source.read_text(f"{APT_CONF_DIR}/{name}") or "" for name in parts]
    return [*texts, source.read_text(APT_CONF) or ""]


def gather_packages(source: Source) -> dict[str, Any]:
    result = source.run(DPKG_GPU_PACKAGES.argv)
    # dpkg-query exits 1 when a pattern matched nothing; no rc (not found) or nothing printed says nothing.
    listed = parse_dpkg_list(result.stdout) if result.rc in (0, 1) else None
    texts = _apt_texts(source)
    enabled = None if texts is None else periodic_unattended_upgrade(texts)
    installed = None if listed is None else any(p.base == UNATTENDED_PACKAGE and p.installed for p in listed)
    return {
        "unattended_upgrades": {"installed": installed, "enabled": enabled,
                                "blacklist": None if texts is None else package_blacklist(texts)},
        "packages": None if listed is None else [
            {"name": p.name, "version": p.version, "held": p.held} for p in listed
            if p.installed and p.base != UNATTENDED_PACKAGE],
    }
