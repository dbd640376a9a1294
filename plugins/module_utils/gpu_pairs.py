"""How GPU pairs are counted in every text: a pair is two GPUs, whichever way the data goes.

P2P matrices (nvidia-smi topo -p2p, NVML, the probe) are read per direction, GPU0->GPU1 apart from
GPU1->GPU0, while the gate and NCCL speak of pairs. So that no two views disagree on "how many pairs",
a count of directions is always shown as pairs first, with the directions beside it:
"28 of 28 GPU pairs (56 of 56 directions)".
"""

from __future__ import annotations

from collections.abc import Iterable


def gpu_pairs(directions: Iterable[tuple[int, int]]) -> int:
    """The number of GPU pairs that the ordered (source, destination) directions touch."""
    return len({frozenset(d) for d in directions if d[0] != d[1]})


def pairs_of(gpus: int) -> int:
    """The number of GPU pairs among ``gpus`` GPUs."""
    return gpus * (gpus - 1) // 2 if gpus > 1 else 0


def pair_count_text(directions: Iterable[tuple[int, int]], gpus: int) -> str:
    """'<pairs> of <all pairs> GPU pairs (<directions> of <all directions> directions)' for the directions
    found among ``gpus`` GPUs (every one of which reads both ways)."""
    found = list(dict.fromkeys((i, j) for i, j in directions if i != j))
    return (f"{gpu_pairs(found)} of {pairs_of(gpus)} GPU pairs "
            f"({len(found)} of {gpus * (gpus - 1)} directions)")
