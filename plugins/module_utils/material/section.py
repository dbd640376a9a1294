"""The facts' ``material`` section: what the material held and what the audit could not see in it.

A capture built from material (material/capture.py) carries the section; gpu_analyze copies it into the facts
of the audit that replayed the capture, with what its reader (material/reader.py) says beyond it. gpu_host_facts
refuses such a capture: the module every audited host runs ships none of this.
"""

from __future__ import annotations

from typing import Any, Protocol

# The facts' copy of the capture's from_material section (its lists: material/capture.py).
MATERIAL_KEYS = ("inputs", "seen", "unread", "not_seen", "kept", "unmapped", "warnings", "node_outputs")


class MaterialNotes(Protocol):
    """What the reader of the material says beyond the capture (material/reader.py ``Material``)."""

    reasons: dict[str, str]  # input name -> why, replacing the capture's
    notes: list[dict[str, str]]  # {name, why}: what was not read, beyond the capture's inputs
    read_as: dict[str, str]  # input name -> what read it outside the capture (bench:nccl_bench)


def with_material(facts: dict[str, Any], capture: dict[str, Any],
                  material: MaterialNotes | None = None) -> dict[str, Any]:
    """The facts with the capture's ``material`` section (what the material held and what it did not show), when
    the capture was built from material; the facts unchanged otherwise. The ``material``'s own reasons
    replace the capture's for the same input, and its notes (what was not read at all) join ``unmapped``. An input
    the material's reader read outside the capture (a benchmark log) says so in its ``as`` and leaves
    ``unmapped``: its values are in the report, so it is no input left unused."""
    account = capture.get("from_material")
    if not isinstance(account, dict):
        return facts
    reasons, notes = (material.reasons, material.notes) if material else ({}, [])
    read_as = getattr(material, "read_as", None) or {}
    section = {key: list(account.get(key) or []) for key in MATERIAL_KEYS}
    section["inputs"] = [dict(entry, **{"as": [*entry.get("as", []), read_as[entry["name"]]]})
                         if isinstance(entry, dict) and entry.get("name") in read_as else entry
                         for entry in section["inputs"]]
    section["unmapped"] = [dict(entry, why=reasons[entry["name"]])
                           if isinstance(entry, dict) and entry.get("name") in reasons else entry
                           for entry in section["unmapped"]
                           if not (isinstance(entry, dict) and entry.get("name") in read_as)] + notes
    return {**facts, "material": section}
