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
    vote for a VM; no PCIe link speed and an unknown NUMA node are weak notes) and, in the dump and the INFO log's
    topology alike, a PCI device of a virtual vendor or an emulated bridge or switch port (a vote for its
    hypervisor), each named with its source."""
    votes, notes = _dump_signals(source)
    votes += _log_signals(source)
    return votes, notes


def _log_signals(source: Source) -> list[Evidence]:
    text = source.material(NCCL_DEBUG_MATERIAL)
    if not text:
        return []
    nodes = [(f"PCI/{node.node}", node.vendor, node.device) for node in topology_pci_nodes(text)]
    return _emulated_devices(_NCCL_LOG_SOURCE, nodes)


def _emulated_devices(signal: str, devices: list[tuple[str, str, str]]) -> list[Evidence]:
    """One vote per kind of emulated device among (where, vendor, device): a virtual vendor's (QEMU, virtio,
    VMware ...) for its hypervisor, an emulated host bridge or switch port for KVM."""
    known = {**{ids: f"{machine or platform} host bridge" for ids, (machine, platform) in
                EMULATED_HOST_BRIDGES.items()}, **EMULATED_SWITCH_PORTS}
    seen: dict[tuple[str, str], list[str]] = {}  # (hypervisor, what) -> where
    for where, vendor, device in devices:
        if vendor in VIRTUAL_PCI_VENDORS:
            name, label = VIRTUAL_PCI_VENDORS[vendor]
            seen.setdefault((name, f"{vendor[2:]}:{device[2:]} {label}"), []).append(where)
        elif (vendor, device) in known:
            seen.setdefault(("kvm", f"{vendor[2:]}:{device[2:]} {known[(vendor, device)]}"), []).append(where)
    return [Evidence(signal, f"{what} at {', '.join(places)}", name) for (name, what), places in seen.items()]


def _dump_signals(source: Source) -> tuple[list[Evidence], list[Evidence]]:
    text = source.material(NCCL_TOPO_MATERIAL)
    if not text:
        return [], []
    try:
        topology = parse_nccl_topo_xml(text)
    except NcclTopoParseError as exc:
        source.note_problem(_NCCL_TOPO_SOURCE, str(exc)[:300])
        return [], []
    signs = emulated_signs(topology)
    where = ", ".join(signs["gpus"])
    votes = _emulated_devices(_NCCL_TOPO_SOURCE, [(pci["pci_bus_id"] or "an unknown bus id", pci["vendor"],
                                                   pci["device"]) for pci in topology["pci_ids"]])
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
