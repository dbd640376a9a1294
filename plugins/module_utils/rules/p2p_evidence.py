"""Which P2P matrix of the facts decides GPU peer access, and what each of its cells proves.

One judgement, read by the P2P rule (rules/host.py), the summary's P2P verdict (audit/facts.py) and the
capability-not-stated rule (here), so that they never disagree.

A cell proves no peer access when the matrix's capability is the one peer access needs (read, write, or
both at once as ``topo -p2p rw`` prints them): any status but OK is the driver refusing it. GNS (GPU not
supported) and CNS (chipset not supported) prove it whatever the capability, the GPU or the chipset refusing
P2P itself (NVML_P2P_STATUS_GPU_NOT_SUPPORTED, _CHIPSET_NOT_SUPPORTED). Under any other capability (NVLink,
atomics, prop) or one the material does not state, NS, TNS, DR and U prove nothing about peer access over
PCIe: NS under NVLink is the normal answer of every PCIe card. OK is a grant under any capability (and a grant
is no proof that data arrives: bench/ checks that).

Material's NCCL INFO log is evidence too (the facts' ``nccl_transports``, material/nccl_transports.py): a
P2P transport between two GPUs proves P2P works for that pair, a refusal NCCL logged proves it does not, and
SHM or NET alone proves nothing (NCCL avoids P2P across host bridges by default). It decides after a read or
write matrix, which is the driver's own answer, and before the matrices of other capabilities.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.gpu_pairs import pair_count_text
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_capability import (
    CAPABILITIES,
    NOT_STATED,
    PEER_ACCESS_LETTERS,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import (
    RuleOptions,
    matrix_pairs,
    pairs_text,
    tp_group,
)

NO_P2P_WHATEVER_CAPABILITY = frozenset({"GNS", "CNS"})
_PEER_ACCESS_NAMES = frozenset(CAPABILITIES[letter] for letter in PEER_ACCESS_LETTERS)
# The order matrices are looked at: a peer-access matrix first (read before write, as the audit's own run
# reads them), then the others, the one of no stated capability last.
_ORDER = ("read", "write", "read+write")
# The capability name of the evidence an NCCL INFO log gives, and what each of its cells proves.
NCCL_LOG = "nccl_log"
_NCCL_STATES = {"P2P": "ok", "refused": "none"}


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
        if self.capability == NCCL_LOG:
            return _NCCL_STATES.get(label, "unknown")
        if label == "OK":
            return "ok"
        if self.peer_access or label in NO_P2P_WHATEVER_CAPABILITY:
            return "none"
        return "unknown"


def p2p_evidence(facts: dict[str, Any]) -> P2PEvidence | None:
    """The matrix that decides P2P for these facts, or None when they hold none (or hold no mapping of them)."""
    p2p = facts.get("p2p") if isinstance(facts, dict) else None
    matrices = {name: matrix for name, matrix in (p2p.items() if isinstance(p2p, dict) else [])
                if isinstance(name, str) and isinstance(matrix, list) and matrix}
    names = [name for name in _ORDER if name in matrices]
    names += sorted(name for name in matrices if name not in _ORDER and name != NOT_STATED)
    names += [NOT_STATED] if NOT_STATED in matrices else []
    candidates = [P2PEvidence(name, matrices[name]) for name in names]
    nccl = nccl_evidence(facts)
    # A peer-access matrix decides; else the NCCL log where it proves something about some pair; else the first
    # matrix that does.
    for evidence in candidates:
        if evidence.peer_access:
            return evidence
    for evidence in ([nccl] if nccl is not None else []) + candidates:
        if _proves(evidence):
            return evidence
    return candidates[0] if candidates else nccl


def nccl_evidence(facts: dict[str, Any]) -> P2PEvidence | None:
    """The NCCL INFO log's pairs as evidence; None when the facts hold no mapped log."""
    transports = facts.get("nccl_transports") if isinstance(facts, dict) else None
    matrix = transports.get("matrix") if isinstance(transports, dict) else None
    return P2PEvidence(NCCL_LOG, matrix) if isinstance(matrix, list) and matrix else None


def _proves(evidence: P2PEvidence) -> bool:
    return any(evidence.state(label) != "unknown" for row in evidence.matrix if isinstance(row, list)
               for label in row if isinstance(label, str) and label != "X")


def rule_p2p_capability_not_stated(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    """The matrix that decides is of a capability the material does not state, and some pairs of the group show a
    status that only its capability could give a meaning: say both meanings and judge neither (GNS and CNS
    pairs are rules/host.py rule_p2p's, proved whatever the capability)."""
    decided = p2p_evidence(facts)
    group = tp_group(facts, options)
    if decided is None or decided.capability != NOT_STATED or len(group) < 2:
        return []
    unknown = [(i, j, label) for i, j, label in matrix_pairs(decided.matrix, group)
               if decided.state(label) == "unknown"]
    if not unknown:
        return []
    labels = sorted({label for _i, _j, label in unknown})
    counted = pair_count_text([(i, j) for i, j, _label in unknown], len(group))
    return [make(
        "p2p_capability_not_stated",
        f"A pasted nvidia-smi topo -p2p matrix shows {'/'.join(labels)} between {counted}, but nothing in the "
        "material says which capability it is of (no command line, no telling file name). Under read or write, NS "
        "means no GPU peer-to-peer; under NVLink it is the normal answer of PCIe cards. Neither is assumed: P2P is "
        "not judged from it.",
        {"group": [f"GPU{i}" for i in group], "statuses": labels, "pairs_unknown": len(unknown),
         "matrix": [" ".join(str(cell) for cell in row) for row in decided.matrix], "examples": pairs_text(unknown),
         "meaning": {"read or write": "no GPU peer-to-peer: every all-reduce goes through host memory",
                     "nvlink": "no NVLink between the pair: normal for PCIe cards, nothing about P2P over PCIe"}})]
