"""The gate's decision as it is built: blocking reasons, accepted risks, resolved findings, notes.

Every step of the gate (decide.py and the modules it calls) writes into one ``Decision``; ``block``
turns a reason of the findings catalog into a blocking reason, or into an accepted one when the user
accepts it and the gate allows accepting it (``ACCEPTABLE_GATE_REASONS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make

# Gate reasons a user may accept as a risk: the gate could not check something, or P2P is missing.
ACCEPTABLE_GATE_REASONS = frozenset({
    "p2p_not_supported", "driver_version_unknown", "cuda_version_unknown", "compute_capability_unknown",
})


@dataclass
class Decision:
    reasons: list[dict[str, Any]] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)
    resolved: list[dict[str, Any]] = field(default_factory=list)
    other_findings: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def block(self, reason_id: str, summary: str, evidence: dict[str, Any] | None = None, *,
              accept: frozenset[str] = frozenset(), remedy: str | None = None, **fields: Any) -> None:
        """A blocking reason from the catalog (its remedy filled with ``fields``), unless it may be
        accepted and is."""
        reason = {"id": reason_id, "source": "gate",
                  **make(reason_id, summary, evidence, remedy=remedy, **fields).as_dict()}
        if reason_id in accept and reason_id in ACCEPTABLE_GATE_REASONS:
            self.accepted.append({**reason, "accepted_because": "listed in accept"})
        else:
            self.reasons.append(reason)
