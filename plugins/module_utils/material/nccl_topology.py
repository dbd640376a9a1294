"""What an NCCL topology dump in material says of the host's virtualization (parsers/nccl_topo_xml.py
``emulated_signs``), as votes and notes of audit/virt.py: one of the readers a source that replays material
carries (audit/source.py ``MaterialReaders``, material/nccl_readers.py), so the live audit ships no NCCL parser.
"""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.virt import Evidence
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_topo_xml import (
    NcclTopoParseError,
    emulated_signs,
    parse_nccl_topo_xml,
)

# The name material files an NCCL topology dump under (material/capture.py); Source.material reads it.
NCCL_TOPO_MATERIAL = "nccl-topo-dump"
_NCCL_TOPO_SOURCE = "NCCL topology dump"


def topology_signals(source: Source) -> tuple[list[Evidence], list[Evidence]]:
    """The signs of an emulated topology in an NCCL topology dump the material holds (parsers/nccl_topo_xml.py
    emulated_signs): GPUs on the root bus vote for a VM; no PCIe link speed and an unknown NUMA node are weak
    notes, each named with the dump as its source."""
    text = source.material(NCCL_TOPO_MATERIAL)
    if not text:
        return [], []
    try:
        signs = emulated_signs(parse_nccl_topo_xml(text))
    except NcclTopoParseError as exc:
        source.note_problem(_NCCL_TOPO_SOURCE, str(exc)[:300])
        return [], []
    where = ", ".join(signs["gpus"])
    votes = []
    if signs["gpus_on_root_bus"]:
        votes.append(Evidence(_NCCL_TOPO_SOURCE, f"every GPU on PCI bus 00, as on a flat bus a hypervisor emulates "
                                                 f"({where})", "vm"))
    notes = []
    if signs["no_link_speed"]:
        notes.append(Evidence(_NCCL_TOPO_SOURCE, "no PCIe link speed for any GPU (conventional PCI as emulated, or "
                                                 "no /sys)", "vm", weight="weak"))
    if signs["numa_unknown"]:
        notes.append(Evidence(_NCCL_TOPO_SOURCE, 'NUMA node unknown (numaid="-1"): no NUMA layout given, as in a '
                                                 "guest without one or on some single-socket hosts",
                              "vm", weight="weak"))
    return votes, notes
