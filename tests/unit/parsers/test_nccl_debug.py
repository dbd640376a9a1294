"""The NCCL_DEBUG=INFO reader, over real logs of several NCCL versions (tests/fixtures/nccl, see SOURCES.md)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_debug import (
    Connection,
    P2PRefusal,
    TopologyPci,
    TransportSummary,
    nccl_bus_id,
    p2p_refusals,
    p2p_used,
    parse_nccl_debug,
    topology_pci_nodes,
    transport_family,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import paths

FIXTURES = paths.FIXTURES / "nccl"
INFO_RUN = "all_reduce_perf_2.13-2.14_nccl2.20.5_debug-info-interleaved_2xA100.txt"


VM_TOPOLOGY = "nccl-debug_topology-print_H200-vm-xio3130-ports_excerpt.log"


def fixture(name: str) -> str:
    with open(FIXTURES / name, encoding="utf-8", newline="") as handle:
        return handle.read()


# name: version, nranks, transports, env, p2p_used, first connection
EXPECTED = {
    "nccl-debug_2.3-era_ring-p2p-ipc_interleaved-writes_8gpu.log": (
        None, None, {"P2P/IPC": 17}, {}, True, Connection(4, "ring", 3, 2, "P2P/IPC", "P2P/IPC")),
    "nccl-debug_2.5.6_ring-busid_rank-prefixed.log": (
        None, None, {"P2P/IPC": 3}, {}, True, Connection(0, "ring", 155, 157, "P2P/IPC", "P2P/IPC")),
    # NCCL 2.0 to 2.2: "host:pid:tid [0] INFO ..." without "NCCL"; nothing in them tells the version or a transport.
    "nccl-debug_2.2-era_info-without-nccl-word_horovod-4node-ib_excerpt.log": (None, None, {}, {}, None, None),
    "nccl-debug_2.2-era_info-without-nccl-word_tensorflow-around_excerpt.log": (None, None, {}, {}, None, None),
    # "Ring 00 : 1 -> 4 [receive] via NET/IB/1/GDRDMA": network connections named by rank only, behind mpirun tags.
    "nccl-debug_2.4-era_ring-rank-only-net-ib_mpirun-tagged_excerpt.log": (
        None, None, {"P2P/IPC": 5, "NET/IB": 3}, {}, True, Connection(0, "ring", 3, 1, "P2P/IPC", "P2P/IPC")),
    "nccl-debug_2.7.8_channel-busid-p2p-ipc-shm-net-socket_2x4gpu_excerpt.log": (
        "2.7.8", 8, {"NET/Socket": 8, "P2P/IPC": 8, "SHM": 4}, {}, True,
        Connection(0, "channel", 3, 4, "NET/Socket", "NET/Socket/0")),
    # The same records with "host:pid:tid" cut, as logs reach us: "[0] NCCL INFO ..." reads the same.
    "nccl-debug_2.7.8_rank-only-prefix_constructed-from-excerpt.log": (
        "2.7.8", 8, {"NET/Socket": 8, "P2P/IPC": 8, "SHM": 4}, {}, True,
        Connection(0, "channel", 3, 4, "NET/Socket", "NET/Socket/0")),
    "nccl-debug_2.8.3_p2p-disabled-by-env_2xT4.log": (
        "2.8.3", None, {}, {"NCCL_P2P_LEVEL": "LOC"}, None, None),
    "nccl-debug_2.7-2.12_busid-p2p-direct-read_net-ib.log": (
        None, None, {"P2P/direct": 10, "NET/IB": 1}, {}, True,
        Connection(6, "channel", 15, 14, "P2P/direct", "P2P/direct pointer/read")),
    "nccl-debug_2.1x_p2p-ipc-read_net-socket_16rank.log": (
        None, None, {"P2P/IPC": 14, "NET/Socket": 2}, {}, True,
        Connection(1, "channel", 8, 15, "P2P/IPC", "P2P/IPC/read")),
    "nccl-debug_2.13-plus_shm-direct-direct_7gpu.log": (
        None, None, {"SHM": 16}, {}, False, Connection(9, "channel", 4, 3, "SHM", "SHM/direct/direct")),
    "nccl-debug_2.2x_p2p-cumem_net-ib-gdrdma_2x2xH20.log": (
        None, None, {"NET/IB": 9, "P2P/CUMEM": 5}, {}, True,
        Connection(7, "channel", 0, 2, "NET/IB", "NET/IB/3/GDRDMA")),
    "nccl-debug_2.2x_p2p-cumem-read_timestamped-with-libfabric.log": (
        None, None, {"P2P/CUMEM": 9}, {}, True, Connection(2, "channel", 7, 6, "P2P/CUMEM", "P2P/CUMEM/read")),
    "nccl-debug_2.1x-2.2x_could-not-enable-p2p_shm-and-net_2x2gpu_excerpt.log": (
        None, 4, {"SHM": 2, "NET/IB": 2}, {"NCCL_PROTO": "LL", "NCCL_ALGO": "Tree"}, False,
        Connection(0, "channel", 1, 0, "SHM", "SHM/direct/direct")),
    "nccl-debug_2.1x_p2p-disabled-by-nvml_azure-vm_excerpt.log": (
        None, None, {}, {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": "1"}, None, None),
    VM_TOPOLOGY: (None, None, {}, {}, None, None),
    INFO_RUN: (
        "2.20.5", 2, {"P2P/direct": 48}, {"NCCL_WORK_FIFO_DEPTH": "4194304"}, True,
        Connection(0, "channel", 1, 0, "P2P/direct", "P2P/direct pointer/read")),
}


def test_every_log_fixture_is_covered() -> None:
    on_disk = {p.name for p in FIXTURES.iterdir() if p.name.startswith("nccl-debug_")}
    assert on_disk == {name for name in EXPECTED if name.startswith("nccl-debug_")}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_log_fixture_parses_exactly(name: str) -> None:
    version, nranks, transports, env, used, first = EXPECTED[name]
    summary = parse_nccl_debug(fixture(name))

    assert (summary.nccl_version, summary.nranks) == (version, nranks)
    assert summary.transports == transports
    assert summary.env == env
    assert p2p_used(summary) is used
    assert sum(summary.transports.values()) == len(summary.connections)
    assert (summary.connections[0] if summary.connections else None) == first


def test_every_via_line_is_one_connection() -> None:
    # Lines where two processes' records were written into one, or a record lost its prefix, still count once.
    text = fixture("nccl-debug_2.3-era_ring-p2p-ipc_interleaved-writes_8gpu.log")
    summary = parse_nccl_debug(text)

    assert len(summary.connections) == text.count(" via ")
    assert Connection(4, "ring", 7, 3, "P2P/IPC", "P2P/IPC") in summary.connections
    assert Connection(4, "ring", 6, 5, "P2P/IPC", "P2P/IPC") in summary.connections  # no prefix at all


def test_info_run_connections_pair_up() -> None:
    summary = parse_nccl_debug(fixture(INFO_RUN))
    pairs = {(c.from_rank, c.to_rank) for c in summary.connections}

    assert pairs == {(0, 1), (1, 0)}
    assert sorted({c.channel for c in summary.connections}) == list(range(24))


def test_warnings_are_kept() -> None:
    summary = parse_nccl_debug(fixture("nccl-debug_2.8.3_p2p-disabled-by-env_2xT4.log"))
    assert summary.warnings == ["Failed to open libibverbs.so[.1]"]


# --------------------------------------------------------------------------------------------------
# Line formats of other versions, from NCCL's sources and public reports (SOURCES.md)


@pytest.mark.parametrize(("line", "expected"), [
    # NCCL 2.3 network, no device bracket (src/transport/net.cc at v2.3.5).
    ("h:1:2 [0] NCCL INFO Ring 00 : 3 -> 0 via NET/IB/0/GDRDMA", Connection(0, "ring", 3, 0, "NET/IB",
                                                                            "NET/IB/0/GDRDMA")),
    # NCCL 2.4 trees were printed by the transport as "Ring".
    ("h:1:2 [0] NCCL INFO Ring 01 : 2[2] -> 3[3] via P2P/common device",
     Connection(1, "ring", 2, 3, "P2P/common", "P2P/common device")),
    # SHM before 2.13 (src/transport/shm.cc at v2.8.3).
    ("h:1:2 [0] NCCL INFO Channel 00 : 0[86000] -> 1[af000] via direct shared memory",
     Connection(0, "channel", 0, 1, "SHM", "direct shared memory")),
    # The latest SHM line and copy-engine variants (v2.30.7, v2.19.3).
    ("h:1:2 [0] NCCL INFO Channel 03 : 1[1] -> 0[0] via SHM/direct", Connection(3, "channel", 1, 0, "SHM",
                                                                               "SHM/direct")),
    ("h:1:2 [0] NCCL INFO Channel 03/1 : 1[1] -> 0[0] via P2P/IPC/CE", Connection(3, "channel", 1, 0, "P2P/IPC",
                                                                                 "P2P/IPC/CE")),
    ("h:1:2 [0] NCCL INFO Channel 05/0 : 2[2] -> 5[5] via P2P/indirect/1[1]",
     Connection(5, "channel", 2, 5, "P2P/indirect", "P2P/indirect/1[1]")),
    # A network plugin whose name has a space, and the proxy-rank form "NET/IB/0(1)".
    ("h:1:2 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/AWS Libfabric/0/GDRDMA",
     Connection(0, "channel", 8, 0, "NET/AWS Libfabric", "NET/AWS Libfabric/0/GDRDMA")),
    ("h:1:2 [0] NCCL INFO Channel 00/1 : 3[3] -> 8[0] [send] via NET/IB/0(1)/GDRDMA/Shared",
     Connection(0, "channel", 3, 8, "NET/IB", "NET/IB/0(1)/GDRDMA/Shared")),
    ("h:1:2 [0] NCCL INFO CollNet 00/0 : 3 [send] via COLLNET/SHARP/0",
     Connection(0, "collnet", 3, None, "COLLNET/SHARP", "COLLNET/SHARP/0")),
    # A transport this reader does not know is kept as printed.
    ("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via MNNVL/xyz", Connection(0, "channel", 0, 1, "MNNVL/xyz",
                                                                                "MNNVL/xyz")),
])
def test_connection_line_formats(line: str, expected: Connection) -> None:
    assert parse_nccl_debug(line).connections == [expected]


@pytest.mark.parametrize("line", [
    "h:1:2 [0] NCCL INFO Channel 00/24 :    0   1",  # the ring order, not a connection
    "h:1:2 [0] NCCL INFO Ring 00 : 7 -> 0 -> 1",  # graph search result
    "h:1:2 [0] NCCL INFO Tree 1 : 1 -> 3 -> 2/-1/-1",
    "h:1:2 [0] NCCL INFO Trees [0] -1/-1/-1->1->0 [1] -1/-1/-1->1->0",
    "h:1:2 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
])
def test_lines_that_are_not_connections(line: str) -> None:
    assert parse_nccl_debug(line).connections == []


@pytest.mark.parametrize(("text", "version"), [
    ("node:12225:12225 [0] NCCL INFO NCCL version 2.25.1+cuda12.4", "2.25.1"),  # nccl-tests#291
    ("[1,0]<stdout>:NCCL version 2.5.6+cuda10.2", "2.5.6"),  # nccl#300
    ("NCCL version 2.20.5+cuda12.4\nNCCL version 2.21.5+cuda12.4", "2.20.5"),  # the first one printed
    ("h:1:1 [0] init.cc:1 NCCL WARN NCCL library is too old. This application was compiled with NCCL version "
     "2.28.3, but is running with NCCL 2.27.5", None),
])
def test_version_line(text: str, version: str | None) -> None:
    assert parse_nccl_debug(text).nccl_version == version


def test_environment_lines() -> None:
    text = "\n".join([
        "qh100-gpu19:49358:49455 [4] NCCL INFO NCCL_IB_QPS_PER_CONNECTION set by environment to 2.",  # nccl#1357
        "qh100-gpu19:49358:49455 [4] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.",
        "h:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1",
        "h:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
        "h:1:1 [0] NCCL INFO NCCL_TOPO_FILE set by environment to /etc/nccl/topo.xml",
    ])
    assert parse_nccl_debug(text).env == {
        "NCCL_IB_QPS_PER_CONNECTION": "2", "NCCL_IB_GID_INDEX": "3", "NCCL_P2P_DISABLE": "1",
        "NCCL_SOCKET_IFNAME": "eth0", "NCCL_TOPO_FILE": "/etc/nccl/topo.xml",
    }


def test_nranks_is_the_largest_completed_communicator() -> None:
    text = "\n".join([
        "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 1000 commId 0x2 - Init COMPLETE",
        "h:1:1 [0] NCCL INFO comm 0x3 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
        "h:1:1 [0] NCCL INFO comm 0x4 rank 0 nranks 16 cudaDev 0 busId 1000 commId 0x5 - Init START",
    ])
    assert parse_nccl_debug(text).nranks == 8


@pytest.mark.parametrize(("detail", "family"), [
    ("P2P/IPC", "P2P/IPC"), ("P2P/IPC/read", "P2P/IPC"), ("P2P/CUMEM/read/CE", "P2P/CUMEM"),
    ("P2P/direct pointer/read", "P2P/direct"), ("P2P/direct pointer", "P2P/direct"),
    ("SHM/direct/direct", "SHM"), ("SHM/CE/direct", "SHM"), ("direct shared memory", "SHM"),
    ("NET/IB/0/GDRDMA", "NET/IB"), ("NET/Socket/1", "NET/Socket"), ("NET/IBext_v8/0", "NET/IBext_v8"),
    ("COLLNET/SHARP/0", "COLLNET/SHARP"), ("something new", "something new"), ("P2P/", "P2P"),
])
def test_transport_family(detail: str, family: str) -> None:
    assert transport_family(detail) == family


def test_p2p_used() -> None:
    assert p2p_used(TransportSummary()) is None
    shm = parse_nccl_debug("h:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct")
    assert p2p_used(shm) is False
    collnet_only = parse_nccl_debug("h:1:1 [0] NCCL INFO CollNet 00/0 : 3 [send] via COLLNET/SHARP/0")
    assert p2p_used(collnet_only) is None
    mixed = parse_nccl_debug("a Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\nb Channel 01/0 : 0[0] -> 1[1] via "
                             "P2P/CUMEM/read")
    assert p2p_used(mixed) is True


def test_as_dict() -> None:
    data = parse_nccl_debug(fixture("nccl-debug_2.2x_p2p-cumem_net-ib-gdrdma_2x2xH20.log")).as_dict()

    assert set(data) == {"nccl_version", "connections", "transports", "env", "nranks", "warnings", "p2p_used",
                         "p2p_refusals"}
    assert data["connections"][0] == {"channel": 7, "kind": "channel", "from_rank": 0, "to_rank": 2,
                                      "transport": "NET/IB", "detail": "NET/IB/3/GDRDMA"}
    assert data["p2p_used"] is True


# --------------------------------------------------------------------------------------------------
# Where NCCL did not use P2P, and why (formats of NCCL 2.4 to 2.30, SOURCES.md)

AZURE = "e2bd2729de1e4961bccb1c0d6311f3a4000001"


@pytest.mark.parametrize(("name", "expected"), [
    # Four identical lines (two processes, twice each) are one refusal; rank 1 is known from its init line.
    ("nccl-debug_2.1x-2.2x_could-not-enable-p2p_shm-and-net_2x2gpu_excerpt.log", [
        P2PRefusal("peer_access_denied", "ault43", (1, 0), "cuda", ("0000:81:00.0", "0000:41:00.0"), (1, None),
                   "Could not enable P2P between dev 1(=81000) and dev 0(=41000)")]),
    # NVML indexes: NVML GPU 0 is rank 0 with bus id 100000 (its Init START line).
    ("nccl-debug_2.1x_p2p-disabled-by-nvml_azure-vm_excerpt.log", [
        P2PRefusal("nvml_p2p_disabled", AZURE, (1, 0), "nvml", (None, "0001:00:00.0"), (None, 0),
                   "P2P is disabled between connected GPUs 1 and 0. You can repress this message with "
                   "NCCL_IGNORE_DISABLED_P2P=1."),
        P2PRefusal("peer_access_denied", AZURE, (1, 0), "cuda", ("0002:00:00.0", "0001:00:00.0"), (None, 0),
                   "Could not enable P2P between dev 1(=200000) and dev 0(=100000)")]),
    ("nccl-debug_2.8.3_p2p-disabled-by-env_2xT4.log", [
        P2PRefusal("environment", None, None, None, None, None, "NCCL_P2P_LEVEL set by environment to LOC")]),
    ("nccl-debug_2.2x_p2p-cumem_net-ib-gdrdma_2x2xH20.log", []),
])
def test_p2p_refusals_of_the_fixtures(name: str, expected: list[P2PRefusal]) -> None:
    assert p2p_refusals(parse_nccl_debug(fixture(name))) == expected


@pytest.mark.parametrize(("line", "reason", "devices", "kind", "bus_ids"), [
    # NCCL 2.5-2.6 (src/transport/p2p.cc at v2.5.6): the call itself failed.
    ("h:1:2 [0] NCCL INFO peer query failed between dev 0(=3d000) and dev 1(=3e000)", "peer_query_failed",
     (0, 1), "cuda", ("0000:3d:00.0", "0000:3e:00.0")),
    # NVLink-connected GPUs without P2P: a WARN, and NCCL stops (src/graph/paths.cc, 2.12 on).
    ("h:1:2 [1] graph/paths.cc:330 NCCL WARN P2P is disabled between NVLINK connected GPUs 0 and 1. This should "
     "not be the case given their connectivity, and is probably due to a hardware issue.",
     "nvml_p2p_disabled_nvlink", (0, 1), "nvml", None),
    # The allocator's check (src/allocator.cc, 2.26 on).
    ("h:1:2 [0] NCCL INFO P2P not supported between GPU0 and GPU1", "not_supported", (0, 1), "cuda", None),
    # No pair: cudaIpcGetMemHandle refused (WSL).
    ("h:1:2 [0] NCCL INFO Legacy IPC not supported", "ipc_not_supported", None, None, None),
])
def test_p2p_refusal_formats(line: str, reason: str, devices: tuple[int, int] | None, kind: str | None,
                             bus_ids: tuple[str, str] | None) -> None:
    (refusal,) = p2p_refusals(parse_nccl_debug(line))
    assert (refusal.reason, refusal.host, refusal.devices, refusal.index_kind, refusal.bus_ids) == \
        (reason, "h", devices, kind, bus_ids)


def test_p2p_refusals_in_lines_written_at_once() -> None:
    # nccl#833: several processes writing into one line; each record is read with its own host.
    line = ("lab:14075:14865 [3] NCCL INFO Could not enable P2P between dev 2(=300000) and dev 1(=200000)"
            "lab:14073:14864 [1] NCCL INFO Could not enable P2P between dev 0(=100000) and dev 3(=400000)")
    refusals = p2p_refusals(parse_nccl_debug("[1,0]<stdout>:" + line))
    assert [(r.host, r.devices) for r in refusals] == [("lab", (2, 1)), ("lab", (0, 3))]


@pytest.mark.parametrize("wrap", ["crlf", "qp", "rank-prefix"])
def test_pasted_refusals_read_the_same(wrap: str) -> None:
    text = fixture("nccl-debug_2.1x_p2p-disabled-by-nvml_azure-vm_excerpt.log")
    if wrap == "crlf":
        pasted = text.replace("\n", "\r\n")
    elif wrap == "qp":
        pasted = "\n".join("=\n".join(line[i:i + 72] for i in range(0, max(len(line), 1), 72))
                           for line in text.replace("=", "=3D").split("\n"))
    else:
        pasted = "\n".join(f"[rank0]:{line}" for line in text.split("\n"))
    assert p2p_refusals(parse_nccl_debug(pasted)) == p2p_refusals(parse_nccl_debug(text))


@pytest.mark.parametrize(("value", "bus_id"), [
    ("81000", "0000:81:00.0"), ("100000", "0001:00:00.0"), ("1a000", "0000:1a:00.0"), ("3d010", "0000:3d:01.0"),
    ("zz", None), ("1" * 12, None),
])
def test_nccl_bus_id(value: str, bus_id: str | None) -> None:
    assert nccl_bus_id(value) == bus_id


# --------------------------------------------------------------------------------------------------
# Properties: a log is best-effort, nothing raises

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_TOKENS = st.sampled_from([
    "h:1:2 [0] NCCL INFO ", "NCCL WARN ", "Ring ", "Channel ", "CollNet ", "00", "/0", " : ", "0[0]", "1[3d000]",
    " -> ", " [send] ", " [receive] ", "via ", "P2P/IPC", "SHM/direct/direct", "NET/IB/0", "NCCL version 2.21.5",
    "+cuda12.4", "NCCL_P2P_DISABLE set by environment to ", "1.", "nranks 8 ", "- Init COMPLETE", "\n", " ", "\r",
    "\x00", "99999999999999999999999999999999", "[1,0]<stdout>:", "Could not enable P2P between ", "dev 1(=81000)",
    " and ", "dev 0(=zz)", "P2P is disabled between connected GPUs 1 and 0", "rank 1 nranks 2 cudaDev 1 busId 81000",
    "=3D", "=\n", "Legacy IPC not supported",
])
LOG_LIKE_TEXT = st.lists(_TOKENS, max_size=80).map("".join)
ALL_FIXTURES = sorted(EXPECTED)


@PROPERTY_SETTINGS
@given(text=st.one_of(st.text(), LOG_LIKE_TEXT))
def test_property_never_raises(text: str) -> None:
    summary = parse_nccl_debug(text)
    assert sum(summary.transports.values()) == len(summary.connections)
    summary.as_dict()


@PROPERTY_SETTINGS
@given(value=st.one_of(st.none(), st.integers(), st.binary(), st.lists(st.text(), max_size=3)))
def test_property_any_input_type(value: object) -> None:
    assert isinstance(parse_nccl_debug(value), TransportSummary)


@PROPERTY_SETTINGS
@given(name=st.sampled_from(ALL_FIXTURES), data=st.data())
def test_property_truncated_logs_keep_a_prefix_of_the_connections(name: str, data: st.DataObject) -> None:
    text = fixture(name)
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    whole = parse_nccl_debug(text).connections
    head = parse_nccl_debug(text[:cut]).connections
    parse_nccl_debug(text[cut:])
    # A cut can shorten the last line's "via" text, never invent or reorder connections.
    assert len(head) <= len(whole)
    assert head[:-1] == whole[:len(head) - 1] if head else True


# --------------------------------------------------------------------------------------------------
# The topology NCCL prints: its PCI nodes by id

def test_the_topology_print_of_a_guest_gives_its_pci_nodes() -> None:
    # Three PCI nodes, each printed once, with QEMU's x3130-upstream ids; the GPU, NIC and NVSwitch lines are no PCI
    # nodes, and CPU/0-0 (1/2/-1) is no device id.
    assert topology_pci_nodes(fixture(VM_TOPOLOGY)) == [
        TopologyPci("0-65000", "0000:65:00.0", "0x104c", "0x8232"),
        TopologyPci("0-69000", "0000:69:00.0", "0x104c", "0x8232"),
        TopologyPci("0-6d000", "0000:6d:00.0", "0x104c", "0x8232"),
    ]


@pytest.mark.parametrize(("line", "nodes"), [
    # NCCL before the domain was printed: the bus id alone (https://github.com/NVIDIA/nccl-tests/issues/100 shows
    # the form without a parenthesis; with one, a Broadcom switch port).
    ("h:1:2 [0] NCCL INFO + PCI[24.0] - PCI/6000 (1000c0101000a000)",
     [TopologyPci("6000", "0000:06:00.0", "0x1000", "0xc010")]),
    ("h:1:2 [0] NCCL INFO + PCI[24.0] - PCI/1000", []),  # no ids printed: nothing to tell
    # A domain NCCL's bus id cannot carry into a PCI address: the ids are kept, the bus id is null.
    ("[0] NCCL INFO + PCI[0.2] - PCI/1ffff-10000 (1b36000c00000000)",
     [TopologyPci("1ffff-10000", None, "0x1b36", "0x000c")]),
    ("[1,0]<stdout>:h:1:2 [0] NCCL INFO + PCI[24.0] - PCI/0-3000 (1AF41041 1AF41100)", []),  # not 16 digits
])
def test_topology_pci_node_forms(line: str, nodes: list[TopologyPci]) -> None:
    assert topology_pci_nodes(line + "\r\n") == nodes


@PROPERTY_SETTINGS
@given(value=st.one_of(st.none(), st.integers(), st.binary(), st.text(),
                       st.lists(st.sampled_from(["PCI/", "0-", "65000", " (", "104c823200000000", ")", "\n", "x"]),
                                max_size=40).map("".join)))
def test_property_topology_pci_nodes_never_raise(value: object) -> None:
    nodes = topology_pci_nodes(value)
    assert all(len(node.vendor) == 6 and len(node.device) == 6 for node in nodes)
    assert len({node.node for node in nodes}) == len(nodes)


def test_topology_pci_nodes_grow_linearly() -> None:
    from tests.cpu_limit import within

    line = "h:1:2 [5] NCCL INFO + PCI[0.2] - PCI/0-65000 (104c823200000000)\n"
    assert len(within(2.0, lambda: topology_pci_nodes(line * 40000 + "PCI/" * 40000))) == 1
