"""Which P2P matrix of the facts decides GPU peer access, and what each of its cells proves.

One judgement, read by the P2P rule (rules/host.py), the summary's P2P verdict (audit/facts.py) and the
capability-not-stated rule, so that they never disagree.

A cell proves no peer access when the matrix's capability is the one peer access needs (read, write, or
both at once as ``topo -p2p rw`` prints them): any status but OK is the driver refusing it. GNS (GPU not
supported) and CNS (chipset not supported) prove it whatever the capability, the GPU or the chipset refusing
P2P itself (NVML_P2P_STATUS_GPU_NOT_SUPPORTED, _CHIPSET_NOT_SUPPORTED). Under any other capability (NVLink,
atomics, prop) or one the material does not state, NS, TNS, DR and U prove nothing about peer access over
PCIe: NS under NVLink is the normal answer of every PCIe card. OK is a grant under any capability (and a grant
is no proof that data arrives: bench/ checks that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ansible.module_utils.gpuhost.parsers.p2p_capability import CAPABILITIES, NOT_STATED, PEER_ACCESS_LETTERS

NO_P2P_WHATEVER_CAPABILITY = frozenset({"GNS", "CNS"})
_PEER_ACCESS_NAMES = frozenset(CAPABILITIES[letter] for letter in PEER_ACCESS_LETTERS)
# The order matrices are looked at: a peer-access matrix first (read before write, as the audit's own run
# reads them), then the others, the one of no stated capability last.
_ORDER = ("read", "write", "read+write")


@dataclass(frozen=True)
class P2PEvidence:
    capability: str  # the facts key: read, write, read+write, nvlink, ..., not_stated
    matrix: list[list[str | None]]

    @property
    def peer_access(self) -> bool:
        """Whether every non-OK cell of this matrix denies peer access (its capabilities are read/write)."""
        return self.capability != NOT_STATED and set(self.capability.split("+")) <= _PEER_ACCESS_NAMES

    def state(self, label: str) -> str:
        """``ok``, ``none`` (no peer access, proved) or ``unknown`` for one cell."""
        if label == "OK":
            return "ok"
        if self.peer_access or label in NO_P2P_WHATEVER_CAPABILITY:
            return "none"
        return "unknown"


def p2p_evidence(facts: dict[str, Any]) -> P2PEvidence | None:
    """The matrix that decides P2P for these facts, or None when they hold none."""
    matrices = {name: matrix for name, matrix in (facts.get("p2p") or {}).items()
                if isinstance(matrix, list) and matrix}
    if not matrices:
        return None
    names = [name for name in _ORDER if name in matrices]
    names += sorted(name for name in matrices if name not in _ORDER and name != NOT_STATED)
    names += [NOT_STATED] if NOT_STATED in matrices else []
    candidates = [P2PEvidence(name, matrices[name]) for name in names]
    # A peer-access matrix decides; else the first that proves something about some pair does.
    for evidence in candidates:
        if evidence.peer_access:
            return evidence
    for evidence in candidates:
        if any(evidence.state(label) != "unknown" for row in evidence.matrix for label in row
               if label not in (None, "X")):
            return evidence
    return candidates[0]
