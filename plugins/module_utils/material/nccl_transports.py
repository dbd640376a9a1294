"""What an ``NCCL_DEBUG=INFO`` log in material proves about P2P between each pair of this host's GPUs:
the facts' ``nccl_transports``, one of the P2P evidence sources rules/p2p_evidence.py weighs.

Each connection line names two ranks and the transport NCCL chose (parsers/nccl_debug.py); a rank becomes a GPU
through the communicators' init lines (``comm ... rank R nranks N cudaDev D [nvmlDev M] busId B - Init
COMPLETE``, NCCL's src/init.cc), and the bus id through the GPU facts. Where that chain breaks (no init line
with a bus id, as before NCCL 2.4; a rank that is another GPU in another communicator of the log; ranks on
several hosts; a bus id no GPU fact has), the pair is left out and ``not_mapped`` says why: a rank number alone
is never taken for a GPU index.

A cell says, by NVML index, what the log shows between the row GPU and the column GPU:
- ``P2P``: a P2P transport connected them (``via P2P/IPC``, ``P2P/CUMEM``, ``P2P/direct pointer``,
  ``P2P/indirect``; src/transport/p2p.cc prints these only after p2pCanConnect granted the pair): P2P works.
- ``refused``: NCCL asked and was told no (``Could not enable P2P between dev ...``: cudaDeviceCanAccessPeer
  said 0, src/transport/p2p.cc; ``peer query failed``; ``P2P is disabled between connected GPUs``: NVML's P2P
  read/write status not OK, src/graph/paths.cc ncclTopoCheckP2p; ``P2P not supported between GPU...``).
- ``SHM`` or ``NET``: connected without P2P and without a refusal line. That proves nothing by itself:
  ncclTopoCheckP2p uses P2P by default only up to PATH_PXB (GPUs behind one PCIe switch), so GPUs under
  different host bridges or CPU sockets get SHM on a host whose driver grants P2P (src/graph/paths.cc, 2.7 to
  2.30). ``p2p_off_by_environment`` says when NCCL_P2P_DISABLE or NCCL_P2P_LEVEL chose it instead.
- ``X`` on the diagonal; null where the log shows no connection between the two GPUs (or could not be mapped).
A refusal outweighs a P2P line for the same pair: the conservative reading of a contradictory log.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_gpus import NCCL_DEBUG_MATERIAL, WHAT_DEBUG
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_debug import (
    TransportSummary,
    p2p_refusals,
    parse_nccl_debug,
)

# The refusal reasons of parsers/nccl_debug.py that name a pair NCCL was told has no P2P.
_PAIR_REFUSALS = ("peer_access_denied", "peer_query_failed", "nvml_p2p_disabled", "nvml_p2p_disabled_nvlink",
                  "not_supported")
# The settings that make NCCL choose SHM or NET between GPUs whose P2P works (src/graph/paths.cc ncclGetLevel).
P2P_SETTINGS = ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL")


def gather_nccl_transports(source: Source, gpus: dict[str, Any]) -> dict[str, Any] | None:
    """``{nccl_version, matrix, transports, p2p_off_by_environment, not_mapped}``; None when the material holds no
    NCCL INFO log or the log shows no connection between two GPUs and no refusal."""
    text = source.material(NCCL_DEBUG_MATERIAL)
    if not text:
        return None
    summary = parse_nccl_debug(text)
    facts = transports_facts(summary, gpus)
    if facts is not None and facts["not_mapped"]:
        source.note_problem(WHAT_DEBUG, f"its P2P evidence is not used: {facts['not_mapped']}")
    return facts


def transports_facts(summary: TransportSummary, gpus: dict[str, Any]) -> dict[str, Any] | None:
    """The facts for a parsed log and the host's GPU facts (pure: the tests call it directly)."""
    connections = [c for c in summary.connections if c.to_rank is not None]
    refusals = [r for r in p2p_refusals(summary) if r.reason in _PAIR_REFUSALS]
    if not connections and not refusals:
        return None
    index_by_bus = {str(d["pci_bus_id"]).lower(): d["index"] for d in (gpus.get("devices") or [])
                    if isinstance(d, dict) and isinstance(d.get("index"), int) and d.get("pci_bus_id")}
    # A line whose host prefix was cut on the way names none: it is not another host.
    hosts = {host for host, _rank in summary.rank_buses if host is not None}
    if not index_by_bus and len(hosts) <= 1:
        index_by_bus = _log_nvml_indexes(summary, gpus)
    cells: dict[tuple[int, int], str] = {}
    why: str | None = None
    if len(hosts) > 1:
        why = (f"its communicators ran on {len(hosts)} hosts ({', '.join(sorted(str(h) for h in hosts))}): which "
               "GPUs are this host's cannot be told; give one host's log")
    elif not index_by_bus:
        why = "no GPU of the material has both an index and a bus id to match the log's ranks to"
    else:
        why = _map(summary, connections, refusals, index_by_bus, cells)
    size = max(index_by_bus.values()) + 1 if index_by_bus else 0
    matrix: list[list[str | None]] = []
    if cells:
        matrix = [["X" if i == j else cells.get((i, j)) for j in range(size)] for i in range(size)]
    return {
        "nccl_version": summary.nccl_version,
        "matrix": matrix,
        "transports": dict(summary.transports),
        "p2p_off_by_environment": _environment(summary),
        "not_mapped": why if not cells else None,
    }


def _map(summary: TransportSummary, connections: list[Any], refusals: list[Any], index_by_bus: dict[str, int],
         cells: dict[tuple[int, int], str]) -> str | None:
    """Fill ``cells``; the reason nothing could be mapped, when nothing was."""
    buses_of_rank: dict[int, set[str]] = {}
    for (_host, rank), buses in summary.rank_buses.items():
        buses_of_rank.setdefault(rank, set()).update(buses)
    ambiguous = sorted(rank for rank, buses in buses_of_rank.items() if len(buses) > 1)
    bus_of_rank = {rank: next(iter(buses)) for rank, buses in buses_of_rank.items() if len(buses) == 1}
    for connection in connections:
        pair = (_index(bus_of_rank.get(connection.from_rank), index_by_bus),
                _index(bus_of_rank.get(connection.to_rank), index_by_bus))
        if pair[0] is None or pair[1] is None or pair[0] == pair[1]:
            continue
        word = _word(connection.transport)
        if word is not None and _rank(word) > _rank(cells.get(pair)):  # type: ignore[index]
            cells[pair] = word  # type: ignore[index]
    for refusal in refusals:
        pair = _refused_pair(refusal, index_by_bus)
        if pair is not None:
            cells[pair] = cells[pair[::-1]] = "refused"
    if cells:
        return None
    if not summary.rank_buses:
        return ("no communicator init line names the bus id of its rank (NCCL 2.4 or newer prints 'comm ... rank R "
                "nranks N cudaDev D busId B - Init COMPLETE'): which GPU each rank used cannot be told")
    if ambiguous:
        return (f"ranks {', '.join(map(str, ambiguous))} are different GPUs in different communicators of the log, "
                "and connection lines do not say which communicator they belong to: give the log of one job")
    return "the bus ids of its ranks match no GPU of the material"


def _log_nvml_indexes(summary: TransportSummary, gpus: dict[str, Any]) -> dict[str, int]:
    """Bus id -> NVML index as the log's own init lines pair them (``nvmlDev M busId B``, NCCL 2.9 on), for GPUs of
    the material that have an index and no bus id (a pasted topo matrix). NVML numbers GPUs as nvidia-smi does, so the
    index is the matrix's; an index the material does not have, or one the log pairs with two bus ids, is left out."""
    known = {d["index"] for d in gpus.get("devices") or [] if isinstance(d, dict) and isinstance(d.get("index"), int)}
    found: dict[int, set[str]] = {}
    for (_host, kind, index), (_rank, bus) in summary.devices.items():
        if kind == "nvml" and index.isdigit() and int(index) in known:
            found.setdefault(int(index), set()).add(bus.lower())
    return {next(iter(buses)): index for index, buses in found.items() if len(buses) == 1}


def _index(bus: str | None, index_by_bus: dict[str, int]) -> int | None:
    return index_by_bus.get(bus.lower()) if bus else None


def _refused_pair(refusal: Any, index_by_bus: dict[str, int]) -> tuple[int, int] | None:
    """The two GPU indexes of a refusal: by bus id where the line or the init lines gave one; NCCL's NVML indexes
    (``P2P is disabled between connected GPUs``) are the indexes nvidia-smi and the facts use."""
    buses = refusal.bus_ids or (None, None)
    found = [_index(bus, index_by_bus) for bus in buses]
    if None in found and refusal.index_kind == "nvml" and refusal.devices is not None:
        known = set(index_by_bus.values())
        found = [device if device in known else None for device in refusal.devices]
    if None in found or found[0] == found[1]:
        return None
    return found[0], found[1]


def _word(transport: str) -> str | None:
    if transport.startswith("P2P"):
        return "P2P"
    if transport == "SHM":
        return "SHM"
    if transport.startswith("NET"):
        return "NET"
    return None


def _rank(word: str | None) -> int:
    """A pair seen over several transports shows the one that proves most: P2P over SHM over NET."""
    return {"NET": 1, "SHM": 2, "P2P": 3}.get(word or "", 0)


def _environment(summary: TransportSummary) -> str | None:
    """The setting the log says NCCL took that turns P2P off (or limits it), as NCCL printed it; None when none."""
    said = [f"{name} set by environment to {summary.env[name]}" for name in P2P_SETTINGS
            if name in summary.env and (name != "NCCL_P2P_DISABLE" or summary.env[name] != "0")]
    return "; ".join(said) or None
