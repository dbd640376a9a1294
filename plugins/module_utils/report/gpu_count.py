"""How many GPUs a report says the host has, in words: a count NCCL's outputs gave is a lower bound.

An NCCL INFO log names the GPU of each rank, and NCCL's topology dump holds the GPU of each local rank only
("Detect only the GPU managed by this process. We'll get any others through XML fusion", of the local ranks:
src/graph/topo.cc ncclTopoGetSystem): GPUs the job did not use are in neither (material/nccl_gpus.py).
"""

from __future__ import annotations

from typing import Any

NCCL_SOURCE = "nccl"  # gpus.source when NCCL's outputs were the only GPU list (audit/gpus.py)
USED_BY_NCCL = "the GPUs the NCCL job used"


def lower_bound(gpus: Any) -> bool:
    """Whether the count is only what an NCCL job used (more GPUs may sit in the host)."""
    return isinstance(gpus, dict) and gpus.get("source") == NCCL_SOURCE


def gpus_counted(count: Any, gpus: Any) -> str:
    """``8 GPU(s)``, or ``at least 4 GPUs (the GPUs the NCCL job used)``."""
    if lower_bound(gpus):
        return f"at least {count} GPU{'s' if count != 1 else ''} ({USED_BY_NCCL})"
    return f"{count} GPU(s)"
