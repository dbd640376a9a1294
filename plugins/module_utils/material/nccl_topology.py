"""What NCCL's own outputs in material say of the host's virtualization, as votes and notes of audit/virt.py: an
NCCL topology dump (parsers/nccl_topo_xml.py ``emulated_signs``) and the topology an ``NCCL_DEBUG=INFO`` log prints
(parsers/nccl_debug.py ``topology_pci_nodes``: the PCI switches and bridges above the GPUs and NICs, by id). One of
the readers a source that replays material carries (audit/source.py ``MaterialReaders``, material/nccl_readers.py),
so the live audit ships no NCCL parser.
"""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.virt import (
    EMULATED_HOST_BRIDGES,
    EMULATED_SWITCH_PORTS,
    VIRTUAL_PCI_VENDORS,
    Evidence,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_debug import topology_pci_nodes
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_topo_xml import (
    NcclTopoParseError,
    emulated_signs,
    parse_nccl_topo_xml,
)

# The name material files an NCCL topology dump under (material/capture.py); Source.material reads it.
NCCL_TOPO_MATERIAL = "nccl-topo-dump"
# The name material files an NCCL_DEBUG=INFO log under; material/nccl_gpus.py and nccl_transports.py read it too.
NCCL_DEBUG_MATERIAL = "nccl-debug-log"
_NCCL_TOPO_SOURCE = "NCCL topology dump"
_NCCL_LOG_SOURCE = "NCCL_DEBUG=INFO topology"


def topology_signals(source: Source) -> tuple[list[Evidence], list[Evidence]]:
    """The signs of an emulated topology in NCCL's outputs the material holds: the dump's (GPUs on the root bus
    vote for a VM; no PCIe link speed and an unknown NUMA node are weak notes) and the INFO log's (a PCI node of a
    virtual vendor or an emulated switch port votes for its hypervisor), each named with its source."""
    votes, notes = _dump_signals(source)
    votes += _log_signals(source)
    return votes, notes


def _log_signals(source: Source) -> list[Evidence]:
    text = source.material(NCCL_DEBUG_MATERIAL)
    if not text:
        return []
    known = {**{ids: f"{machine or platform} host bridge" for ids, (machine, platform) in
                EMULATED_HOST_BRIDGES.items()}, **EMULATED_SWITCH_PORTS}
    seen: dict[tuple[str, str], list[str]] = {}  # (hypervisor, what) -> the nodes
    for node in topology_pci_nodes(text):
        ids = (node.vendor, node.device)
        if node.vendor in VIRTUAL_PCI_VENDORS:
            name, label = VIRTUAL_PCI_VENDORS[node.vendor]
            seen.setdefault((name, f"{node.vendor[2:]}:{node.device[2:]} {label}"), []).append(node.node)
        elif ids in known:
            seen.setdefault(("kvm", f"{node.vendor[2:]}:{node.device[2:]} {known[ids]}"), []).append(node.node)
    return [Evidence(_NCCL_LOG_SOURCE, f"{what} at {', '.join('PCI/' + n for n in nodes)}", name)
            for (name, what), nodes in seen.items()]


def _dump_signals(source: Source) -> tuple[list[Evidence], list[Evidence]]:
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
