"""The fabric manager's own refusal to start on a driver of another version, from its log or journal.

nv-fabricmanager compares the GPU driver interface it was built for with the loaded driver and, when they
differ, logs one line and exits (the service then shows ``failed``). As printed by releases 525 to 590 in
public reports (tests/fixtures/fabric-manager/SOURCES.md)::

    nv-fabricmanager[104230]: fabric manager NVIDIA GPU driver interface version 550.127.05 don't match with
    driver version 550.120. Please update with matching NVIDIA driver package.

(one line; later releases say ``doesn't match``; pasted into a forum the apostrophe may be typographic).
``version_mismatch(text)`` -> ``{"fabric_manager": "550.127.05", "driver": "550.120"}`` from the last such
line, or None when the text holds none. Nothing here raises.
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
