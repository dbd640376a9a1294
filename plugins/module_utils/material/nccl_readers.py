"""The source that replays material, with the readers of what only material holds (audit/source.py
``MaterialReaders``): the GPUs an NCCL dump or INFO log shows (material/nccl_gpus.py), the dump's signs of an
emulated topology (material/nccl_topology.py) and the log's P2P evidence per pair (material/nccl_transports.py).
Every audit of material replays it through ``replay``.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import MaterialReaders, ReplaySource
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_gpus import nccl_gpus
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_topology import topology_signals
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_transports import gather_nccl_transports

NCCL_READERS = MaterialReaders(gpus=nccl_gpus, topology_signals=topology_signals, transports=gather_nccl_transports)


def replay(capture: dict[str, Any]) -> ReplaySource:
    """The source of a capture built from material (or any capture), with the material readers; CaptureError as
    ReplaySource raises it."""
    return ReplaySource(capture, readers=NCCL_READERS)
