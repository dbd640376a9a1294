"""The finding ids a user accepts as a risk, read from the accept list as written.

Finding ids are stable: a list written for an older version keeps working. An id the catalog has retired
and renamed (``renamed_to``) is read as its successor, and a note asks for the new id; a retired id without
a successor accepts nothing, and a note says so. Anything that is not a list accepts nothing, with a note.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import retired_entry
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import as_list


def read_accept(accept: Any, label: str, notes: list[str]) -> dict[str, str]:
    """Each id to accept, mapped to the id as the list wrote it (they differ for a renamed id), so that later
    notes name what the user wrote. ``label`` is the name the user gave the list."""
    if accept is not None and not isinstance(accept, list):
        notes.append(f"{label}: expected a list of finding ids; found {type(accept).__name__}, so nothing is "
                     "accepted")
    accepted: dict[str, str] = {}
    for written in (a.strip() for a in as_list(accept) if isinstance(a, str) and a.strip()):
        entry = retired_entry(written)
        if entry is None:
            accepted[written] = written
        elif entry.renamed_to:
            accepted.setdefault(entry.renamed_to, written)
            notes.append(f"{label} lists {written}, a retired finding id ({entry.retired}): it is read as "
                         f"{entry.renamed_to}; write {entry.renamed_to} in the list instead")
        else:
            notes.append(f"{label} lists {written}, a retired finding id ({entry.retired}): no finding is raised "
                         "under it any more, so it accepts nothing; remove it from the list")
    return accepted
