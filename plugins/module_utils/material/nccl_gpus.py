"""The GPUs material shows only through NCCL: its topology dump, or the communicator init lines of an
``NCCL_DEBUG=INFO`` log. Read only where no nvidia-smi output lists GPUs (audit/gpus.py), so that an 8-GPU
dump or log never stands beside "GPUs: none found".

What each tells (and what it cannot):
- the dump (parsers/nccl_topo_xml.py, after NCCL's src/graph/xml.cc) holds one ``<gpu>`` per GPU of the node
  its process saw, with its PCI bus id and ``sm``: bus id and compute capability per GPU;
- the log's ``comm ... rank R nranks N cudaDev D busId B - Init COMPLETE`` lines (src/init.cc; parsers/
  nccl_debug.py) name the bus id of each GPU a rank used, per host (``host:pid:tid``): the GPUs of a log of
  several hosts cannot be told apart from this host's, so none is taken and ``problems`` says why.
Neither names the model or GPUs the job did not use: those stay None. The log's init lines name the index
nvidia-smi gives (NVML's) from about NCCL 2.9 on; the dump and older logs do not, and it stays None.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_topology import (
    NCCL_DEBUG_MATERIAL,
    NCCL_TOPO_MATERIAL,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import ParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_debug import parse_nccl_debug
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_topo_xml import parse_nccl_topo_xml

WHAT_DEBUG = "NCCL INFO log"


def nccl_gpus(source: Source) -> list[dict[str, Any]]:
    """``[{pci_bus_id, compute_capability, index}]`` of the GPUs the material's NCCL outputs show (the dump first:
    it lists every GPU of the node, the log only those a rank used); [] when they show none."""
    text = source.material(NCCL_TOPO_MATERIAL)
    if text:
        try:
            dump = parse_nccl_topo_xml(text)
        except ParseError as exc:
            source.note_problem("NCCL topology dump", str(exc))
            dump = {"gpus": []}
        gpus = [{"pci_bus_id": gpu.get("pci_bus_id"), "compute_capability": _capability(gpu.get("sm")), "index": None}
                for gpu in dump["gpus"]]
        if gpus:
            return gpus
    text = source.material(NCCL_DEBUG_MATERIAL)
    if not text:
        return []
    summary = parse_nccl_debug(text)
    buses: dict[str | None, set[str]] = {}
    for (host, kind, _index), (_rank, bus) in summary.devices.items():
        if kind == "bus":
            buses.setdefault(host, set()).add(bus)
    if len(buses) > 1:
        source.note_problem(WHAT_DEBUG, f"its communicators ran on {len(buses)} hosts "
                                        f"({', '.join(sorted(str(h) for h in buses))}): which GPUs are this "
                                        "host's cannot be told; give one host's log")
        return []
    # From about NCCL 2.9 the init lines name the NVML index (nvmlDev, src/init.cc), which is nvidia-smi's index;
    # a bus id given two of them (an inconsistent log) gets none.
    nvml: dict[str, set[int]] = {}
    for (_host, kind, index), (_rank, bus) in summary.devices.items():
        if kind == "nvml" and index.isdigit():
            nvml.setdefault(bus, set()).add(int(index))
    return [{"pci_bus_id": bus, "compute_capability": None,
             "index": next(iter(nvml[bus])) if len(nvml.get(bus, ())) == 1 else None}
            for host_buses in buses.values() for bus in sorted(host_buses)]


def _capability(sm: Any) -> str | None:
    """NCCL's ``sm="90"`` -> "9.0" (major * 10 + minor, src/graph/xml.cc); None when absent."""
    if not isinstance(sm, int) or sm <= 0:
        return None
    return f"{sm // 10}.{sm % 10}"
