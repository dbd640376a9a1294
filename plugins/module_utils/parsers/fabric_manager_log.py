"""The fabric manager's own refusal to start on a driver of another version, from its log or journal.

nv-fabricmanager compares the GPU driver interface it was built for with the loaded driver and, when they
differ, logs one line and exits (the service then shows ``failed``). As printed by releases 525 to 590 in
public reports (tests/fixtures/fabric-manager/SOURCES.md)::

    nv-fabricmanager[104230]: fabric manager NVIDIA GPU driver interface version 550.127.05 don't match with
    driver version 550.120. Please update with matching NVIDIA driver package.

(one line; later releases say ``doesn't match``; pasted into a forum the apostrophe may be typographic).
``version_mismatch(text)`` -> ``{"fabric_manager": "550.127.05", "driver": "550.120"}`` from the last such
line, or None when the text holds none.

The other lines that say why it did not start, as printed in public reports (tests/fixtures/fabric-manager/
SOURCES.md), are read by ``log_events(text)`` -> ``{"errors": [{"kind", "line"}], "started": bool | None}``:

* ``nothing_to_do``: ``request to query NVSwitch device information from NVSwitch driver failed with
  error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]``: no NVSwitch for it to manage (a host without
  NVSwitches, where it is not needed; on NVLink 5 systems, a fabric manager started without NVLSM).
* ``config_invalid``: ``fabric manager config file item: FABRIC_NODE_CONFIG_FILE has an invalid value``.
* ``start_failed``: the start script's ``"/usr/bin/nv-fabricmanager -c ..." failed! Exit code: 1``.
* ``version_mismatch``: the refusal above.

``started`` is True when the log shows ``Successfully configured all the available NVSwitches``, False when it
shows only errors, None when it shows neither. ``looks_like_fabric_manager_log`` tells such a paste by the
fabric manager's process names in journal lines or by one of these messages. ``package_version(text)`` reads
the fabric manager's package version from ``dpkg-query -W`` output. Nothing here raises.
"""

from __future__ import annotations

import re

# "don't", "doesn't", and the typographic apostrophe (U+2019) that forums and bug trackers turn it into.
MISMATCH_RE = re.compile(r"fabric manager NVIDIA GPU driver interface version (?P<fm>\d+(?:\.\d+)+) "
                         r"(?:do(?:es)?n['\u2019]t|does not) match with driver version (?P<driver>\d+(?:\.\d+)+)",
                         re.IGNORECASE)


def version_mismatch(text: str) -> dict[str, str] | None:
    if not isinstance(text, str):
        return None
    found = list(MISMATCH_RE.finditer(" ".join(text.split())))
    if not found:
        return None
    return {"fabric_manager": found[-1].group("fm"), "driver": found[-1].group("driver")}


# The journal's process names of the fabric manager and of its start script (nvidia-fabricmanager-start.sh,
# since 570), and the service's unit name in systemd's lines.
_PROCESS_RE = re.compile(r"\b(?:nv-fabricmanager|nvidia-fabricmanager-start\.sh)\[\d{1,10}\]:|"
                         r"\bnvidia-fabricmanager\.service\b")
_ERRORS = (
    ("nothing_to_do", re.compile(r"request to query NVSwitch device information from NVSwitch driver failed"
                                 r".{0,80}NV_WARN_NOTHING_TO_DO", re.IGNORECASE)),
    ("config_invalid", re.compile(r"fabric manager config file item: \S{1,80} has an invalid value", re.IGNORECASE)),
    ("start_failed", re.compile(r"nv-fabricmanager[^\n]{0,200}\" failed! Exit code: \d{1,4}")),
    ("version_mismatch", MISMATCH_RE),
)
_STARTED_RE = re.compile(r"Successfully configured all the available NVSwitches")
_MAX_ERRORS = 20
# dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\n' 'nvidia-fabric*manager*':
# "ii  nvidia-fabricmanager-550 550.54.15-1" (the branch in the name since 470; "nvidia-fabric-manager" in
# NVIDIA's newer packaging). Only "ii" (installed) lines count: dpkg also lists removed packages it remembers.
_PACKAGE_RE = re.compile(r"^ii\s+nvidia-fabric-?manager(?:-\d{3})?\s+(?:\d+:)?(?P<version>\d+(?:\.\d+)+)"
                         r"(?:-\S*)?\s*$")


def looks_like_fabric_manager_log(text: str) -> bool:
    if not isinstance(text, str):
        return False
    return bool(_PROCESS_RE.search(text)) or any(pattern.search(" ".join(text.split())) for _unused, pattern in _ERRORS)


def log_events(text: str) -> dict[str, object]:
    if not isinstance(text, str):
        return {"errors": [], "started": None}
    errors: list[dict[str, str]] = []
    for line in text.replace("\r", "\n").split("\n"):
        for kind, pattern in _ERRORS[:-1]:
            if pattern.search(line) and len(errors) < _MAX_ERRORS:
                errors.append({"kind": kind, "line": line.strip()[:300]})
    # The refusal may be wrapped over lines: read on the text joined, as version_mismatch does.
    joined = " ".join(text.split())
    refusals = list(MISMATCH_RE.finditer(joined))
    if refusals and len(errors) < _MAX_ERRORS:
        errors.append({"kind": "version_mismatch", "line": refusals[-1].group(0)[:300]})
    started = True if _STARTED_RE.search(joined) else (False if errors else None)
    return {"errors": errors, "started": started}


def package_version(text: str) -> str | None:
    """The version (without its Debian revision) of the one fabric manager package ``dpkg-query -W`` lists with
    a version; None when none is installed, or when several are (which one runs is then not told)."""
    if not isinstance(text, str):
        return None
    versions = {match.group("version") for line in text.splitlines()
                for match in [_PACKAGE_RE.match(line.strip())] if match}
    return versions.pop() if len(versions) == 1 else None
