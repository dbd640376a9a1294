"""An all-reduce's time estimated from one GPU-to-GPU copy, for when no all-reduce was measured at the
serving rank count.

An all-reduce over n GPUs is not one transfer. NCCL's own cost model (``src/graph/tuning.cc``,
``ncclTopoTuneModel``) prices an all-reduce as ``base latency + hops x hop latency + bytes / bandwidth``:

- ring: ``2(n-1)`` dependent steps (reduce-scatter then all-gather around the ring); its algorithm
  bandwidth is the bus bandwidth x ``n / 2(n-1)``, so the data term is ``2(n-1)/n x bytes / busbw``.
- tree: NCCL's double binary tree spans *nodes*; inside one host its tree is a chain of the local
  GPUs, and tuning.cc counts ``2 x ((n/nodes - 1) x intra-node hops + log2(nodes) x inter-node hops)``.
  On one host that is again ``2(n-1)`` hops; the textbook ``2 x log2(n)`` steps only hold when every
  rank is on its own node. Its algorithm bandwidth is half the bus bandwidth: ``2 x bytes / busbw``.

NCCL picks, per call, the algorithm and protocol whose predicted time is lowest. On one host both
algorithms wait the same ``2(n-1)`` hops and the ring moves less data, so the ring is what the model
predicts NCCL picks; both figures are given so that a reader can see the difference.

Assumptions, returned with every estimate: each hop costs the measured per-pair copy latency (the
probe's copy of a small buffer takes the same path as NCCL's hop: through host memory when P2P is
off); NCCL's base latency (a few microseconds per call) is left out, so the step term is the floor;
the bus bandwidth is the large-transfer copy bandwidth when one was measured, else the data term is
left out (it is small next to the hops for decode-sized messages).

Pure functions: no Ansible, no I/O.
"""

from __future__ import annotations

import math
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError

ALGORITHMS = ("ring", "tree")


def _positive(name: str, value: Any, whole: bool = False) -> None:
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) or value <= 0:
        kind = "a whole number above 0" if whole else "a number above 0"
        raise ModelError(f"all-reduce estimate: expected {name} as {kind}; found {value!r}. "
                         "Pass the measured value, or no estimate can be made")


def ring_steps(ranks: int) -> int:
    """Dependent steps of a ring all-reduce over ``ranks`` GPUs: reduce-scatter plus all-gather."""
    return 2 * (ranks - 1)


def tree_steps(ranks: int, nodes: int = 1) -> int:
    """Hops NCCL's tree all-reduce waits (up then down): a chain inside each node, a binary tree across
    nodes. With one rank per node this is the textbook ``2 x ceil(log2 n)``."""
    per_node = ranks // nodes
    return 2 * ((per_node - 1) + math.ceil(math.log2(nodes)) if nodes > 1 else per_node - 1)


def _algorithm(name: str, steps: int, hop_us: float, data_factor: float, size: int,
               bus_gbps: float | None) -> dict[str, Any]:
    step_us = steps * hop_us
    # GB/s is 1e9 bytes per second, that is 1e3 bytes per microsecond.
    data_us = data_factor * size / (bus_gbps * 1e3) if bus_gbps else 0.0
    return {"algorithm": name, "steps": steps, "step_us": step_us, "data_us": data_us, "time_us": step_us + data_us}


def estimate_allreduce(ranks: int, message_bytes: int, hop_latency_us: float, bus_gbps: float | None = None,
                       nodes: int = 1) -> dict[str, Any]:
    """The time of one all-reduce of ``message_bytes`` over ``ranks`` GPUs, from a per-pair copy latency.

    Returns ``{ranks, nodes, message_bytes, hop_latency_us, bus_gbps, ring, tree, binary_tree_steps,
    nccl_pick, time_us, assumptions}``: ``ring`` and ``tree`` are ``{algorithm, steps, step_us, data_us,
    time_us}``; ``nccl_pick`` is the algorithm NCCL's cost model ranks fastest and ``time_us`` its time.
    """
    _positive("ranks", ranks, whole=True)
    _positive("the message size in bytes", message_bytes, whole=True)
    _positive("the per-pair copy latency in us", hop_latency_us)
    _positive("nodes", nodes, whole=True)
    if bus_gbps is not None:
        _positive("the bus bandwidth in GB/s", bus_gbps)
    if ranks % nodes:
        raise ModelError(f"all-reduce estimate: expected the ranks ({ranks}) spread evenly over the nodes "
                         f"({nodes}); found a remainder. Give the GPUs per node times the nodes")
    if ranks == 1:
        ring = tree = {"algorithm": "none", "steps": 0, "step_us": 0.0, "data_us": 0.0, "time_us": 0.0}
        pick = ring
    else:
        ring = _algorithm("ring", ring_steps(ranks), hop_latency_us, 2 * (ranks - 1) / ranks, message_bytes, bus_gbps)
        tree = _algorithm("tree", tree_steps(ranks, nodes), hop_latency_us, 2.0, message_bytes, bus_gbps)
        # NCCL takes the lowest predicted time; on a tie (one host, no bandwidth known) the ring, which
        # moves less data per rank.
        pick = tree if tree["time_us"] < ring["time_us"] else ring
    assumptions = [
        f"{pick['steps']} dependent hops ({pick['algorithm']}, the algorithm NCCL's cost model picks for "
        f"{ranks} GPU(s) on {nodes} node(s)), each costing the measured {hop_latency_us:g} us GPU-to-GPU copy",
        "NCCL's per-call base latency is left out: the estimate is a floor of the hops, not a measurement",
        (f"data term at {bus_gbps:g} GB/s bus bandwidth (the large-copy bandwidth)" if bus_gbps else
         "no bandwidth measured: the data term is left out (small next to the hops for decode-sized messages)"),
    ]
    if nodes == 1 and ranks > 2:
        assumptions.append(f"one host: NCCL's tree is a chain of the local GPUs, {ring_steps(ranks)} hops like the "
                           f"ring; a binary tree's {2 * math.ceil(math.log2(ranks))} steps would need one GPU per node")
    return {
        "ranks": ranks,
        "nodes": nodes,
        "message_bytes": message_bytes,
        "hop_latency_us": hop_latency_us,
        "bus_gbps": bus_gbps,
        "ring": ring,
        "tree": tree,
        "binary_tree_steps": 2 * math.ceil(math.log2(ranks)) if ranks > 1 else 0,
        "nccl_pick": pick["algorithm"],
        "time_us": pick["time_us"],
        "assumptions": assumptions,
    }


def not_an_allreduce(ranks: int | None, allreduce_us: float | None, hop_latency_us: float | None) -> str | None:
    """Why an "all-reduce" time cannot be one, or None: over 3 or more GPUs an all-reduce waits at least
    ``2(n-1)`` hops (4 or more), each a GPU-to-GPU transfer; one that takes less than two copies' time is a
    single transfer read as an all-reduce (a point-to-point test laid out as all_reduce_perf)."""
    if not ranks or ranks < 3 or not allreduce_us or not hop_latency_us or allreduce_us <= 0 or hop_latency_us <= 0:
        return None
    if allreduce_us < 2 * hop_latency_us:
        return (f"the {ranks}-GPU all-reduce time ({allreduce_us:g} us) is below two GPU-to-GPU copies "
                f"({hop_latency_us:g} us each), yet an all-reduce over {ranks} GPUs waits {ring_steps(ranks)} "
                "dependent transfers: these figures are a transfer test, not an all-reduce")
    return None
