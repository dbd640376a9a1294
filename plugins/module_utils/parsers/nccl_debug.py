"""What NCCL says about itself with ``NCCL_DEBUG=INFO``: its version, the transport of each connection,
the settings it took from the environment.

A pure, best-effort reader: it never raises, whatever the input, because a log is whatever the job
printed (several processes writing at once, launcher prefixes, timestamps, lines cut in two). What it
cannot read it leaves out. The line formats follow NCCL's own sources (``src/transport/*.cc``,
``src/graph/connect.cc``, ``src/misc/param.cc``) and real logs of several versions
(tests/fixtures/nccl/SOURCES.md):

* Connections. NCCL 2.3 to 2.6: ``Ring 04 : 3[3] -> 2[2] via P2P/IPC`` (the bracket holds the CUDA
  device, from 2.6 the PCI bus id: ``155[3d000]``). NCCL 2.7 on: ``Channel 00 : ...`` and, from 2.12
  for network and 2.14 for P2P, with the connection index: ``Channel 00/0 : 0[0] -> 1[1] via
  P2P/IPC/read``. Network connections say ``[send]`` or ``[receive]`` before ``via``. Transports:
  ``P2P/direct pointer`` (same process), ``P2P/IPC`` and, from 2.18, ``P2P/CUMEM`` (with ``/read`` and
  ``/CE`` variants), ``P2P/indirect/...``; ``direct shared memory`` (to 2.12), then ``SHM/direct/direct``
  (``SHM/CE/...`` with copy engines; ``SHM/direct`` in the latest); ``NET/IB/0/GDRDMA``,
  ``NET/Socket/1``, plugin networks (``NET/AWS Libfabric/0``); ``COLLNET/SHARP/0``.
* ``NCCL version 2.21.5+cuda12.4``, alone on rank 0's line or after the ``NCCL INFO`` prefix.
* ``NCCL_P2P_LEVEL set by environment to LOC``; numeric settings end in a period
  (``NCCL_IB_GID_INDEX set by environment to 3.``).
* ``comm 0x... rank 0 nranks 2 cudaDev 0 ... - Init COMPLETE`` (from about 2.9 with ``nvmlDev N busId
  B``; from 2.19 ``Init START`` carries them too): which rank is which device.
* P2P refused, by NCCL version (``src/transport/p2p.cc``, ``src/graph/paths.cc``, ``src/allocator.cc``):
  ``Could not enable P2P between dev 1(=81000) and dev 0(=41000)`` (2.7 on: CUDA device and NCCL bus id;
  cudaDeviceCanAccessPeer said no), ``peer query failed between dev ...`` (2.5 on: that call failed),
  ``P2P is disabled between connected GPUs 1 and 0. You can repress ...`` (2.12 on, NVML indexes: NVML's
  P2P status is not OK; the ``NVLINK connected`` variant is a WARN and NCCL aborts), ``P2P not supported
  between GPU0 and GPU1`` (2.26 on, CUDA devices), ``Legacy IPC not supported`` (no pair: cudaIpc is
  refused, as under WSL), and ``NCCL_P2P_DISABLE set by environment to 1`` / ``NCCL_P2P_LEVEL set by
  environment to LOC`` (P2P off on purpose). Bus ids are NCCL's (``81000`` = ``0000:81:00.0``).

Lines two processes wrote at once hold two records: each record of a line is read. The record prefix is
not needed: lines read the same with ``host:pid:tid [0] NCCL INFO``, with only ``[0] NCCL INFO`` (the host
cut on the way), behind a timestamp or a launcher's tag, and in NCCL 2.0 to 2.2's ``host:pid:tid [0] INFO``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import normalize_paste

# "Ring 04 : 7[7] -> 3[3] via P2P/IPC", "Channel 00/0 : 0[0] -> 1[1] [receive] via NET/IB/0/GDRDMA".
# Searched anywhere in a line: launchers and concurrent writers put other text before it.
_CONNECTION_RE = re.compile(
    r"\b(Ring|Tree|Channel)\s+(\d{1,6})(?:/\d{1,6})?\s*:\s*"
    r"(\d{1,9})(?:\[[0-9a-fA-F]{1,16}\])?\s*->\s*(\d{1,9})(?:\[[0-9a-fA-F]{1,16}\])?\s*"
    r"(?:\[(?:send|receive)\]\s*)?via\s+(\S.*?)\s*$")
# "CollNet 00/0 : 3 [send] via COLLNET/SHARP/0": one rank and the network offload, no peer.
_COLLNET_RE = re.compile(
    r"\bCollNet\s+(\d{1,6})(?:/\d{1,6})?\s*:\s*(\d{1,9})\s*(?:\[(?:send|receive)\]\s*)?via\s+(\S.*?)\s*$")
# The version line ends the record; warnings that quote a version ("compiled with NCCL version ...,
# but ...") go on and are not taken.
_VERSION_RE = re.compile(r"(?:^|[\s:>\]])NCCL version (\d{1,3}\.\d{1,3}\.\d{1,3})\S*\s*$")
_ENV_RE = re.compile(r"\b(NCCL_[A-Z0-9_]{1,64}) set by environment to (.*?)\s*$")
_INIT_RE = re.compile(r"\bn[Rr]anks (\d{1,9})\b.*\bInit COMPLETE\b")
_WARN_RE = re.compile(r"\bNCCL WARN\s+(.*?)\s*$")
# Where a record starts: "host:pid:tid [dev] NCCL" (a second record inside a line was written at the same time).
_RECORD_START_RE = re.compile(r"(?:(?<=\s)|(?<=^)|(?<=[\]>:|)]))([A-Za-z0-9<>._-]{1,255}):\d{1,12}:\d{1,12} "
                              r"\[\d{1,6}\] (?=(?:\S+:\d{1,9} )?NCCL (?:INFO|WARN))")
_PAIR = r"dev (\d{1,4})\(=([0-9a-fA-F]{1,16})\) and dev (\d{1,4})\(=([0-9a-fA-F]{1,16})\)"
_COULD_NOT_RE = re.compile(r"\bCould not enable P2P between " + _PAIR)
_QUERY_FAILED_RE = re.compile(r"\bpeer query failed between " + _PAIR)
_DISABLED_RE = re.compile(r"\bP2P is disabled between (NVLINK )?connected GPUs (\d{1,4}) and (\d{1,4})\b")
_NOT_SUPPORTED_RE = re.compile(r"\bP2P not supported between GPU(\d{1,4}) and GPU(\d{1,4})\b")
_LEGACY_IPC_RE = re.compile(r"\bLegacy IPC not supported\b")
# "comm 0x5f rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 81000 commId 0x.. - Init COMPLETE"
_COMM_RE = re.compile(r"\brank (\d{1,9}) nranks \d{1,9} cudaDev (\d{1,4})(?: nvmlDev (\d{1,4}))? "
                      r"busId ([0-9a-fA-F]{1,16})\b")
_MAX_REFUSALS = 64

_MAX_WARNINGS = 20

KINDS = {"Ring": "ring", "Tree": "tree", "Channel": "channel"}


@dataclass(frozen=True)
class Connection:
    channel: int
    kind: str  # "ring" (NCCL before 2.7), "tree", "channel", or "collnet" (a rank to the network offload)
    from_rank: int
    to_rank: int | None  # None for collnet connections
    transport: str  # normalised family: "P2P/IPC", "P2P/CUMEM", "P2P/direct", "SHM", "NET/IB", ...
    detail: str  # what followed "via", as NCCL printed it


@dataclass(frozen=True)
class P2PRefusal:
    """One thing NCCL said about not using P2P. ``devices`` are numbered as NCCL printed them
    (``index_kind``: ``cuda``, the process's CUDA device; ``nvml``, the NVML index); ``bus_ids`` and
    ``ranks`` are filled where the log tells (the line itself, or the communicator's init lines)."""

    reason: str  # peer_access_denied, peer_query_failed, nvml_p2p_disabled, nvml_p2p_disabled_nvlink,
    #              not_supported, ipc_not_supported, environment
    host: str | None
    devices: tuple[int, int] | None
    index_kind: str | None
    bus_ids: tuple[str | None, str | None] | None
    ranks: tuple[int | None, int | None] | None
    message: str


REFUSAL_MEANING = {
    "peer_access_denied": "the driver refuses peer access (cudaDeviceCanAccessPeer = 0)",
    "peer_query_failed": "cudaDeviceCanAccessPeer failed",
    "nvml_p2p_disabled": "NVML reports P2P read/write not OK between the GPUs",
    "nvml_p2p_disabled_nvlink": "NVML reports P2P disabled between NVLink-connected GPUs (NCCL aborts)",
    "not_supported": "CUDA reports no P2P support between the GPUs",
    "ipc_not_supported": "CUDA IPC is refused in this environment, so P2P between processes is off",
    "environment": "P2P is switched off by the environment (NCCL_P2P_DISABLE=1 or NCCL_P2P_LEVEL=LOC)",
}
"""What each refusal reason means, for the report."""


def nccl_bus_id(value: str) -> str | None:
    """``0000:81:00.0`` from NCCL's hexadecimal bus id ``81000`` (domain, bus, device, function packed)."""
    try:
        number = int(value, 16)
    except ValueError:
        return None
    if number >> 36:
        return None
    return f"{number >> 20:04x}:{(number >> 12) & 0xff:02x}:{(number >> 4) & 0xff:02x}.{number & 0xf:x}"


@dataclass
class TransportSummary:
    nccl_version: str | None = None
    connections: list[Connection] = field(default_factory=list)
    transports: dict[str, int] = field(default_factory=dict)  # family -> connection lines
    env: dict[str, str] = field(default_factory=dict)  # the settings NCCL reports taking from the environment
    nranks: int | None = None  # the largest communicator that completed its init
    warnings: list[str] = field(default_factory=list)  # NCCL WARN messages, the first few
    p2p_refusals: list[P2PRefusal] = field(default_factory=list)  # where and why NCCL did not use P2P
    # (host, kind, index) -> (rank, bus id), from the communicators' init lines; kind "cuda", "nvml", "bus".
    devices: dict[tuple[str | None, str, str], tuple[int, str]] = field(default_factory=dict)
    # (host, rank) -> every bus id an init line gave that rank: several when the log holds communicators that
    # number their ranks differently (a rank of one is another GPU in the next), which the connection lines,
    # naming no communicator, cannot be told apart by.
    rank_buses: dict[tuple[str | None, int], set[str]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "nccl_version": self.nccl_version,
            "connections": [asdict(connection) for connection in self.connections],
            "transports": dict(self.transports),
            "env": dict(self.env),
            "nranks": self.nranks,
            "warnings": list(self.warnings),
            "p2p_used": p2p_used(self),
            "p2p_refusals": [{key: list(value) if isinstance(value, tuple) else value
                              for key, value in asdict(refusal).items()} for refusal in p2p_refusals(self)],
        }


def transport_family(detail: str) -> str:
    """The transport a ``via`` text names, without the per-connection details; unknown text comes back as is."""
    text = detail.strip()
    if text.startswith("P2P/"):
        kind = text[4:].split("/", 1)[0].strip()
        if kind.startswith("direct pointer"):
            return "P2P/direct"
        if kind.startswith("common device"):
            return "P2P/common"
        return f"P2P/{kind}" if kind else "P2P"
    if text.startswith(("SHM/", "direct shared memory")) or text == "SHM":
        return "SHM"
    for prefix in ("NET/", "COLLNET/"):
        if text.startswith(prefix):
            name = text[len(prefix):].split("/", 1)[0].strip()
            return f"{prefix}{name}" if name else prefix.rstrip("/")
    return text


def parse_nccl_debug(text: Any) -> TransportSummary:
    """Everything ``NCCL_DEBUG=INFO`` said that the host report uses. Never raises."""
    summary = TransportSummary()
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if not isinstance(text, str):
        return summary
    for line in normalize_paste(text.replace("\x00", "")).splitlines():
        for record, host in _records(line):
            try:
                _read_line(summary, record, host)
            except (ValueError, IndexError):  # a log is best-effort: an unreadable line is skipped
                continue
    return summary


def _records(line: str) -> list[tuple[str, str | None]]:
    """The records of a line (two when processes wrote at once) and the host each names."""
    starts = list(_RECORD_START_RE.finditer(line))
    if len(starts) < 2:
        return [(line, starts[0].group(1) if starts else None)]
    pieces = [(line[:starts[1].start()], starts[0].group(1))]
    for index, start in enumerate(starts[1:], start=1):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(line)
        pieces.append((line[start.start():end], start.group(1)))
    return pieces


def _read_line(summary: TransportSummary, line: str, host: str | None = None) -> None:
    if "NCCL" not in line and " via " not in line and "P2P" not in line:
        return
    if _read_refusal(summary, line, host):
        return
    match = _COMM_RE.search(line)
    if match:
        rank, cuda, nvml, bus = int(match.group(1)), match.group(2), match.group(3), nccl_bus_id(match.group(4))
        if bus is not None:
            summary.devices[(host, "cuda", cuda)] = (rank, bus)
            summary.devices[(host, "bus", bus)] = (rank, bus)
            if nvml is not None:
                summary.devices[(host, "nvml", nvml)] = (rank, bus)
            summary.rank_buses.setdefault((host, rank), set()).add(bus)
    match = _CONNECTION_RE.search(line)
    if match:
        kind, channel, source, target, detail = match.groups()
        _add(summary, Connection(int(channel), KINDS[kind], int(source), int(target), transport_family(detail),
                                 detail))
        return
    match = _COLLNET_RE.search(line)
    if match:
        channel, rank, detail = match.groups()
        _add(summary, Connection(int(channel), "collnet", int(rank), None, transport_family(detail), detail))
        return
    match = _VERSION_RE.search(line)
    if match and summary.nccl_version is None:
        summary.nccl_version = match.group(1)
        return
    match = _ENV_RE.search(line)
    if match:
        value = match.group(2)
        # Numeric settings are printed as "%lld." (src/misc/param.cc): the period is not part of the value.
        if re.fullmatch(r"-?\d+\.", value):
            value = value[:-1]
        summary.env[match.group(1)] = value
        return
    match = _INIT_RE.search(line)
    if match:
        nranks = int(match.group(1))
        summary.nranks = max(summary.nranks or 0, nranks)
        return
    match = _WARN_RE.search(line)
    if match and len(summary.warnings) < _MAX_WARNINGS and match.group(1) not in summary.warnings:
        summary.warnings.append(match.group(1))


def _read_refusal(summary: TransportSummary, line: str, host: str | None) -> bool:
    """A line that says P2P was not used between two GPUs (or at all); True when it was one."""
    refusal: P2PRefusal | None = None
    for pattern, reason in ((_COULD_NOT_RE, "peer_access_denied"), (_QUERY_FAILED_RE, "peer_query_failed")):
        match = pattern.search(line)
        if match:
            refusal = P2PRefusal(reason, host, (int(match.group(1)), int(match.group(3))), "cuda",
                                 (nccl_bus_id(match.group(2)), nccl_bus_id(match.group(4))), None,
                                 line[match.start():].strip()[:300])
    match = _DISABLED_RE.search(line)
    if match:
        reason = "nvml_p2p_disabled_nvlink" if match.group(1) else "nvml_p2p_disabled"
        refusal = P2PRefusal(reason, host, (int(match.group(2)), int(match.group(3))), "nvml", None, None,
                             line[match.start():].strip()[:300])
    match = _NOT_SUPPORTED_RE.search(line)
    if match:
        refusal = P2PRefusal("not_supported", host, (int(match.group(1)), int(match.group(2))), "cuda", None, None,
                             line[match.start():].strip()[:300])
    match = _LEGACY_IPC_RE.search(line)
    if match:
        refusal = P2PRefusal("ipc_not_supported", host, None, None, None, None, line[match.start():].strip()[:300])
    if refusal is None:
        return False
    if refusal not in summary.p2p_refusals and len(summary.p2p_refusals) < _MAX_REFUSALS:
        summary.p2p_refusals.append(refusal)
    return True


def p2p_refusals(summary: TransportSummary) -> list[P2PRefusal]:
    """The refusals with bus ids and ranks filled from the communicators' init lines, and the one the
    environment makes (NCCL_P2P_DISABLE=1, NCCL_P2P_LEVEL=LOC or 0)."""
    out = []
    for refusal in summary.p2p_refusals:
        if refusal.devices is None:
            out.append(refusal)
            continue
        known = [summary.devices.get((refusal.host, "bus", bus)) if bus else
                 summary.devices.get((refusal.host, refusal.index_kind or "", str(device)))
                 for device, bus in zip(refusal.devices, refusal.bus_ids or (None, None), strict=True)]
        bus_ids = tuple(bus or (entry[1] if entry else None)
                        for bus, entry in zip(refusal.bus_ids or (None, None), known, strict=True))
        ranks = tuple(entry[0] if entry else None for entry in known)
        out.append(P2PRefusal(refusal.reason, refusal.host, refusal.devices, refusal.index_kind,
                              bus_ids if any(bus_ids) else None,  # type: ignore[arg-type]
                              ranks if any(rank is not None for rank in ranks) else None,  # type: ignore[arg-type]
                              refusal.message))
    disabled = summary.env.get("NCCL_P2P_DISABLE") == "1"
    level = summary.env.get("NCCL_P2P_LEVEL")
    if disabled or level in ("LOC", "0"):
        said = ("NCCL_P2P_DISABLE set by environment to 1" if disabled
                else f"NCCL_P2P_LEVEL set by environment to {level}")
        out.append(P2PRefusal("environment", None, None, None, None, None, said))
    return out


def _add(summary: TransportSummary, connection: Connection) -> None:
    summary.connections.append(connection)
    summary.transports[connection.transport] = summary.transports.get(connection.transport, 0) + 1


def p2p_used(summary: TransportSummary) -> bool | None:
    """Whether any connection went GPU to GPU over P2P; None when the log shows no connection at all."""
    peer = [c for c in summary.connections if c.to_rank is not None]
    if not peer:
        return None
    return any(c.transport.startswith("P2P") for c in peer)


# A PCI node of the topology NCCL prints at INFO (``src/graph/topo.cc`` ncclTopoPrintRec): ``PCI/0-65000
# (104c823200000000)`` (recent NCCL: domain, then the bus id) or ``PCI/6000 (1000c0101000a000)``; the
# parenthesis packs vendor, device, subsystem vendor and subsystem device, four hex digits each. Older NCCL
# prints no parenthesis (``PCI/6000``): nothing to read there.
_TOPO_PCI_RE = re.compile(r"\bPCI/(?:([0-9A-Fa-f]{1,8})-)?([0-9A-Fa-f]{1,16}) \(([0-9A-Fa-f]{16})\)")


@dataclass(frozen=True)
class TopologyPci:
    """A PCI switch or bridge on the path NCCL printed: its bus id (None where NCCL's id does not read as one),
    vendor and device ids as ``0x104c`` / ``0x8232``."""

    node: str  # as NCCL printed it: "0-65000"
    bus_id: str | None
    vendor: str
    device: str


def topology_pci_nodes(text: Any) -> list[TopologyPci]:
    """The PCI nodes of the topology an ``NCCL_DEBUG=INFO`` log prints (``=== System : ... ===`` and the tree under
    it), each once, in the order first printed. Never raises; anything else gives an empty list."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if not isinstance(text, str):
        return []
    found: dict[str, TopologyPci] = {}
    for match in _TOPO_PCI_RE.finditer(normalize_paste(text.replace("\x00", ""))):
        domain, bus, packed = match.groups()
        node = f"{domain}-{bus}" if domain is not None else bus
        if node in found:
            continue
        bus_id = nccl_bus_id(bus)
        if bus_id and domain is not None:
            bus_id = f"{int(domain, 16):04x}{bus_id[4:]}" if int(domain, 16) <= 0xffff else None
        found[node] = TopologyPci(node, bus_id, f"0x{packed[:4].lower()}", f"0x{packed[4:8].lower()}")
    return list(found.values())
