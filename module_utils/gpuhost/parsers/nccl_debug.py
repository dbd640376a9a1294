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
* ``comm 0x... rank 0 nranks 2 cudaDev 0 ... - Init COMPLETE``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

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


@dataclass
class TransportSummary:
    nccl_version: str | None = None
    connections: list[Connection] = field(default_factory=list)
    transports: dict[str, int] = field(default_factory=dict)  # family -> connection lines
    env: dict[str, str] = field(default_factory=dict)  # the settings NCCL reports taking from the environment
    nranks: int | None = None  # the largest communicator that completed its init
    warnings: list[str] = field(default_factory=list)  # NCCL WARN messages, the first few

    def as_dict(self) -> dict[str, Any]:
        return {
            "nccl_version": self.nccl_version,
            "connections": [asdict(connection) for connection in self.connections],
            "transports": dict(self.transports),
            "env": dict(self.env),
            "nranks": self.nranks,
            "warnings": list(self.warnings),
            "p2p_used": p2p_used(self),
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
    for line in text.replace("\x00", "").splitlines():
        try:
            _read_line(summary, line)
        except (ValueError, IndexError):  # a log is best-effort: an unreadable line is skipped
            continue
    return summary


def _read_line(summary: TransportSummary, line: str) -> None:
    if "NCCL" not in line and " via " not in line:
        return
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


def _add(summary: TransportSummary, connection: Connection) -> None:
    summary.connections.append(connection)
    summary.transports[connection.transport] = summary.transports.get(connection.transport, 0) + 1


def p2p_used(summary: TransportSummary) -> bool | None:
    """Whether any connection went GPU to GPU over P2P; None when the log shows no connection at all."""
    peer = [c for c in summary.connections if c.to_rank is not None]
    if not peer:
        return None
    return any(c.transport.startswith("P2P") for c in peer)
