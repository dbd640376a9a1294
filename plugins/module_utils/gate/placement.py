"""Which GPUs serve together: P2P level and topology distance per pair, and memory fit per group.

Pure functions over the gate's inputs (gate_inputs). A tensor-parallel group is judged pair by pair:
its P2P level (proven by the probe, claimed by the driver, unknown, absent, or failed under the
probe) and its distance in the topology matrix; and as a whole by the NUMA nodes it spans and
whether each of its GPUs holds its share of the weights, its KV cache and some headroom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import (
    DEFAULT_KV_CACHE_FRACTION,
    DeployModel,
    Gpu,
    Host,
    cell,
)

# Beyond this many candidate groups of one size, groups are grown greedily from each GPU instead.
MAX_ENUMERATED_GROUPS = 5000

# Topology distance between two GPUs, nearest first (nvidia-smi topo -m labels; SOC is the old SYS).
TOPOLOGY_RANK = {"NV": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5, "SOC": 5}
UNKNOWN_DISTANCE = 6

P2P_STATES = ("proven", "claimed", "unknown", "absent", "failed")


def pair_state(host: Host, proof: dict[tuple[int, int], bool], a: int, b: int) -> str:
    """proven, claimed, unknown, absent or failed, for the unordered pair."""
    directions = [proof.get((a, b)), proof.get((b, a))]
    if False in directions:
        return "failed"
    if directions == [True, True]:
        return "proven"
    labels = [cell(host.p2p_read, a, b), cell(host.p2p_read, b, a)]
    known = [label for label in labels if label is not None]
    if any(label != "OK" for label in known):
        return "absent"
    if len(known) == 2:
        return "claimed"
    return "unknown"


def distance(host: Host, a: int, b: int) -> int:
    label = cell(host.topology, a, b) or cell(host.topology, b, a)
    if label is None:
        return UNKNOWN_DISTANCE
    if label.startswith("NV"):
        return TOPOLOGY_RANK["NV"]
    return TOPOLOGY_RANK.get(label.upper(), UNKNOWN_DISTANCE)


def group_key(host: Host, proof: dict[tuple[int, int], bool], group: tuple[Gpu, ...]) -> tuple[Any, ...]:
    states = [pair_state(host, proof, a.index, b.index) for a, b in combinations(group, 2)]
    distances = [distance(host, a.index, b.index) for a, b in combinations(group, 2)]
    return (
        sum(1 for s in states if s in ("absent", "failed")),
        sum(1 for s in states if s == "unknown"),
        sum(1 for s in states if s != "proven"),
        len({g.numa for g in group if g.numa is not None}),
        max(distances, default=0),
        sum(distances),
        len({g.name for g in group}),
        tuple(g.index for g in group),
    )


def candidate_groups(gpus: list[Gpu], size: int, host: Host,
                     proof: dict[tuple[int, int], bool]) -> list[tuple[Gpu, ...]]:
    if size > len(gpus) or size < 1:
        return []
    if math.comb(len(gpus), size) <= MAX_ENUMERATED_GROUPS:
        return list(combinations(gpus, size))
    grown = set()
    for seed in gpus:
        group = [seed]
        while len(group) < size:
            rest = [g for g in gpus if g not in group]
            group.append(min(rest, key=lambda g: group_key(host, proof, tuple(sorted([*group, g],
                                                                                     key=lambda x: x.index)))))
        grown.add(tuple(sorted(group, key=lambda g: g.index)))
    return sorted(grown, key=lambda g: tuple(x.index for x in g))


@dataclass
class Fit:
    fits: bool
    need_gib_per_gpu: float | None
    have_gib_per_gpu: float | None
    weights_gib_per_gpu: float | None
    kv_cache_gib_per_gpu: float | None
    headroom_gib_per_gpu: float | None

    def as_dict(self) -> dict[str, Any]:
        def r(value: float | None) -> float | None:
            return round(value, 2) if value is not None else None
        return {"fits": self.fits, "need_gib_per_gpu": r(self.need_gib_per_gpu),
                "have_gib_per_gpu": r(self.have_gib_per_gpu), "weights_gib_per_gpu": r(self.weights_gib_per_gpu),
                "kv_cache_gib_per_gpu": r(self.kv_cache_gib_per_gpu),
                "headroom_gib_per_gpu": r(self.headroom_gib_per_gpu)}


def memory_fit(deploy: DeployModel, group: tuple[Gpu, ...]) -> Fit:
    """Whether each GPU of the group holds its share of the weights, its KV cache and the headroom.

    Weights are taken as evenly sharded over the tensor-parallel group; the smallest GPU decides.
    """
    memories = [g.memory_gib for g in group]
    if deploy.weights_gib is None:
        known = [m for m in memories if m is not None]
        return Fit(True, None, min(known) if known and len(known) == len(memories) else None, None, None, None)
    if not group or not all(memories):
        return Fit(False, None, None, deploy.weights_gib / max(len(group), 1), None, None)
    have = min(m for m in memories if m is not None)
    weights = deploy.weights_gib / len(group)
    if deploy.kv_cache_gib_per_gpu is not None:
        kv = deploy.kv_cache_gib_per_gpu
    else:
        kv = have * (deploy.kv_cache_fraction if deploy.kv_cache_fraction is not None else DEFAULT_KV_CACHE_FRACTION)
    headroom = have * deploy.headroom_fraction
    need = weights + kv + headroom
    return Fit(need <= have, need, have, weights, kv, headroom)
