"""A pasted NCCL INFO log as P2P evidence (material/nccl_transports.py, rules/p2p_evidence.py, rules/nccl_log_p2p.py):
a P2P transport between two GPUs of the host proves P2P for that pair (no P2P finding), a refusal NCCL logged
proves its absence (p2p_not_supported), SHM or NET alone proves nothing (nccl_log_no_p2p, a warning; info when
the log's environment switched P2P off), and a log whose ranks cannot be matched to GPUs is not used, with the
reason in ``problems``. Each runs the real audit over a capture built from the pasted outputs."""

from __future__ import annotations

from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import _peer_access
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import build_capture
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_transports import transports_facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_debug import parse_nccl_debug
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_query import QUERY_GPU_FIELDS
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import host_markdown
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.p2p_evidence import NCCL_LOG, p2p_evidence
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.paths import FIXTURES
from tests.unit import schemas
from tests.unit.material.test_capture import audit

NCCL = FIXTURES / "nccl"
# Real NCCL 2.7.8 log of node tesla-105 (SOURCES.md): GPUs 18000/1a000 and af000/b1000 over P2P/IPC, 1a000 <-> af000
# over "direct shared memory" (across host bridges, where NCCL's default P2P level stops), ranks 4-7 on the other node.
DDP_278 = (NCCL / "nccl-debug_2.7.8_channel-busid-p2p-ipc-shm-net-socket_2x4gpu_excerpt.log").read_bytes()
# Real log of NVIDIA/nccl#1516: "Could not enable P2P between dev 1(=81000) and dev 0(=41000)", then SHM.
REFUSED = (NCCL / "nccl-debug_2.1x-2.2x_could-not-enable-p2p_shm-and-net_2x2gpu_excerpt.log").read_bytes()


def query_csv(*buses: str) -> tuple[str, bytes]:
    """``nvidia-smi --query-gpu`` with the audit's fields for GPUs of these bus ids, index in the order given
    (constructed: it only gives the log's bus ids an nvidia-smi index)."""
    rows = "".join(f"{i}, NVIDIA A100-SXM4-40GB, GPU-0000000{i}, 00000000:{bus}, 8.0, 40960, 535.104.05, 4, 4, 16, 16, "
                   "Enabled, Enabled, Disabled\n" for i, bus in enumerate(buses))
    return "query.csv", (", ".join(QUERY_GPU_FIELDS) + "\n" + rows).encode()


def findings(*inputs: tuple[str, bytes]) -> tuple[dict, dict]:
    facts = audit(build_capture(list(inputs)))
    assert list(schemas.validator("facts").iter_errors(facts)) == []
    return facts, {f["id"]: f for f in facts["findings"]}


def log_221(*lines: str, nvml: tuple[int, ...] = (0, 1)) -> bytes:
    """An NCCL 2.21-style INFO log (constructed after src/init.cc and src/transport/*.cc of 2.21.5): one init line per
    rank with cudaDev, nvmlDev and busId, then the given connection lines."""
    head = ["h1:100:100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"]
    head += [f"h1:10{rank}:10{rank} [{rank}] NCCL INFO comm 0x55{rank} rank {rank} nranks {len(nvml)} cudaDev {rank} "
             f"nvmlDev {dev} busId {dev + 1}000 commId 0x1 - Init COMPLETE" for rank, dev in enumerate(nvml)]
    return ("\n".join(head + [f"h1:100:101 [0] NCCL INFO {line}" for line in lines]) + "\n").encode()


def test_p2p_transports_of_a_bare_metal_log_give_no_p2p_finding() -> None:
    """Negative control: the P2P/IPC pairs are granted; the SHM pair across host bridges is said, not judged."""
    facts, found = findings(("nccl.log", DDP_278), query_csv("18:00.0", "1a:00.0", "af:00.0", "b1:00.0"))
    matrix = facts["nccl_transports"]["matrix"]
    assert matrix[0][1] == matrix[1][0] == matrix[2][3] == matrix[3][2] == "P2P"
    assert matrix[1][2] == matrix[2][1] == "SHM"
    assert matrix[0][2] is None  # no connection between them in the log
    assert "p2p_not_supported" not in found
    assert found["nccl_log_no_p2p"]["severity"] == "warning"
    assert found["nccl_log_no_p2p"]["evidence"]["pairs_without_p2p"] == 2
    assert facts["nccl_transports"]["nccl_version"] == "2.7.8" and facts["nccl_transports"]["not_mapped"] is None
    assert p2p_evidence(facts).capability == NCCL_LOG


def test_p2p_on_every_pair_is_ok_and_fit_for_p2p() -> None:
    lines = ["Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read", "Channel 00/0 : 1[1] -> 0[0] via P2P/IPC"]
    facts, found = findings(("nccl.log", log_221(*lines)), query_csv("01:00.0", "02:00.0"))
    assert facts["summary"]["p2p"] == "ok"
    assert not {"p2p_not_supported", "nccl_log_no_p2p"} & set(found)
    assert "p2p" not in facts["not_seen"]  # the log judged P2P
    assert _peer_access(facts) == [["X", "OK"], ["OK", "X"]]  # the gate reads a granted pair as OK


def test_a_refusal_in_the_log_is_p2p_not_supported_and_unfit() -> None:
    facts, found = findings(("nccl.log", REFUSED), query_csv("41:00.0", "81:00.0"))
    assert facts["nccl_transports"]["matrix"] == [["X", "refused"], ["refused", "X"]]
    finding = found["p2p_not_supported"]
    assert finding["severity"] == "critical" and finding["evidence"]["source"] == "NCCL INFO log"
    assert "Could not enable P2P" in finding["summary"]
    assert "NCCL was refused P2P" in finding["remedy"]
    assert facts["summary"]["p2p"] == "none" and facts["summary"]["verdict"] == "unfit"


def test_an_nvml_refusal_names_the_gpus_by_their_nvidia_smi_index() -> None:
    # "P2P is disabled between connected GPUs 1 and 0" prints NVML indexes (src/graph/paths.cc).
    lines = ["P2P is disabled between connected GPUs 1 and 0. You can repress this message with "
             "NCCL_IGNORE_DISABLED_P2P=1.", "Channel 00 : 0[0] -> 1[1] via SHM/direct/direct"]
    facts, found = findings(("nccl.log", log_221(*lines)), query_csv("01:00.0", "02:00.0"))
    assert facts["nccl_transports"]["matrix"][1][0] == "refused"
    assert "p2p_not_supported" in found


def test_shm_without_refusal_is_a_warning_and_p2p_stays_unknown() -> None:
    facts, found = findings(("nccl.log", log_221("Channel 00 : 0[0] -> 1[1] via SHM/direct/direct",
                                                 "Channel 00 : 1[1] -> 0[0] via SHM/direct/direct")),
                            query_csv("01:00.0", "02:00.0"))
    assert "p2p_not_supported" not in found
    assert found["nccl_log_no_p2p"]["severity"] == "warning"
    assert "host bridges" in found["nccl_log_no_p2p"]["remedy"]
    assert facts["summary"]["p2p"] == "unknown"


def test_p2p_switched_off_by_the_environment_is_said_as_such() -> None:
    data = log_221("NCCL_P2P_DISABLE set by environment to 1", "Channel 00 : 0[0] -> 1[1] via SHM/direct/direct")
    facts, found = findings(("nccl.log", data), query_csv("01:00.0", "02:00.0"))
    finding = found["nccl_log_no_p2p"]
    assert finding["severity"] == "info"
    assert finding["evidence"]["p2p_off_by_environment"] == "NCCL_P2P_DISABLE set by environment to 1"
    assert "switched off on purpose" in finding["remedy"]
    assert "p2p_not_supported" not in found
    assert facts["summary"]["p2p"] == "unknown"


def test_a_read_matrix_decides_before_the_log() -> None:
    ns = (FIXTURES / "nvidia-smi" / "topo-p2p-r_2gpu-NS.txt").read_bytes()
    lines = ["Channel 00 : 0[0] -> 1[1] via SHM/direct/direct"]
    facts, found = findings(("nccl.log", log_221(*lines)), query_csv("01:00.0", "02:00.0"),
                            ("p2p_read.txt", ns))
    assert p2p_evidence(facts).capability == "read"
    assert "p2p_not_supported" in found and "nccl_log_no_p2p" not in found


def test_an_nccl_log_alone_with_nvml_indexes_is_judged() -> None:
    """From NCCL 2.9 the init lines name nvmlDev, nvidia-smi's index: the log's GPUs get it and are judged."""
    data = log_221("Channel 00/0 : 0[2] -> 1[5] via P2P/IPC", "Channel 00/0 : 1[5] -> 0[2] via P2P/IPC", nvml=(2, 5))
    facts, _found = findings(("nccl.log", data))
    assert sorted(d["index"] for d in facts["gpus"]["devices"]) == [2, 5]
    assert facts["nccl_transports"]["matrix"][2][5] == "P2P"
    assert facts["summary"]["p2p"] == "ok"


def test_a_log_whose_ranks_cannot_be_matched_is_not_used_and_says_why() -> None:
    # Two communicators number the same ranks differently: a connection line does not say whose it is.
    data = log_221("Channel 00 : 0[0] -> 1[1] via SHM/direct/direct") + (
        b"h1:100:100 [1] NCCL INFO comm 0x66 rank 0 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x2 - "
        b"Init COMPLETE\n")
    facts, found = findings(("nccl.log", data), query_csv("01:00.0", "02:00.0"))
    assert facts["nccl_transports"]["matrix"] == []
    assert "different GPUs in different communicators" in facts["nccl_transports"]["not_mapped"]
    assert any("its P2P evidence is not used" in p["error"] for p in facts["problems"])
    assert "nccl_log_no_p2p" not in found and "p2p_not_supported" not in found


def test_a_log_before_init_lines_named_bus_ids_is_not_mapped() -> None:
    summary = parse_nccl_debug(b"h:1:1 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via P2P/IPC\n")
    facts = transports_facts(summary, {"devices": [{"index": 0, "pci_bus_id": "0000:01:00.0"}]})
    assert facts["matrix"] == [] and "no communicator init line" in facts["not_mapped"]


def test_the_markdown_shows_the_log_matrix_and_the_label() -> None:
    facts, _found = findings(("nccl.log", REFUSED), query_csv("41:00.0", "81:00.0"))
    text = host_markdown("h", facts)
    assert "## P2P from the NCCL INFO log" in text
    assert "| P2P (NCCL INFO log) | none |" in text


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([
    "comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x1 - Init COMPLETE",
    "comm 0x2 rank 1 nranks 2 cudaDev 1 busId 2000 - Init COMPLETE",
    "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "Channel 01 : 1[1] -> 0[0] via SHM/direct/direct",
    "Channel 00 : 1[2000] -> 2[3000] [send] via NET/IB/0", "Could not enable P2P between dev 1(=2000) and dev 0(=1000)",
    "P2P is disabled between connected GPUs 0 and 1.", "NCCL_P2P_LEVEL set by environment to SYS",
    "Channel 00 : 7[7] -> 7[7] via P2P/IPC", "garbage ] [ -> via"]), max_size=12),
    st.lists(st.tuples(st.integers(-1, 9), st.sampled_from(["0000:01:00.0", "0000:02:00.0", "", "zz"])), max_size=4))
def test_any_log_and_gpu_list_give_cells_of_the_vocabulary(lines, gpus) -> None:
    summary = parse_nccl_debug("\n".join(f"h:1:1 [0] NCCL INFO {line}" for line in lines))
    facts = transports_facts(summary, {"devices": [{"index": i, "pci_bus_id": bus} for i, bus in gpus]})
    if facts is None:
        return
    cells = {cell for row in facts["matrix"] for cell in row}
    assert cells <= {"X", "P2P", "refused", "SHM", "NET", None}
    assert (facts["not_mapped"] is None) == bool(facts["matrix"])


def test_gpus_without_bus_ids_are_matched_through_the_logs_own_nvml_indexes() -> None:
    """A pasted topo matrix gives GPU indexes and no bus ids; the log's init lines pair each rank's NVML index with
    its bus id, and NVML numbers GPUs as the matrix does: the log's pairs are mapped, not discarded."""
    log = (FIXTURES / "tickets" / "incident-guest" / "nccl-debug.log").read_text()
    gpus = {"devices": [{"index": i, "pci_bus_id": None} for i in range(8)]}
    facts = transports_facts(parse_nccl_debug(log), gpus)
    assert facts["not_mapped"] is None
    assert facts["nccl_version"] == "2.27.3"
    assert facts["matrix"][1][0] == facts["matrix"][0][1] == "refused"
    assert facts["matrix"][7][0] == "SHM"


def test_an_nvml_index_the_log_pairs_with_two_bus_ids_is_not_used() -> None:
    log = ("h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x2 - Init COMPLETE\n"
           "h:1:1 [0] NCCL INFO comm 0x3 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 2000 commId 0x4 - Init COMPLETE\n"
           "h:1:1 [1] NCCL INFO comm 0x1 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId 0x2 - Init COMPLETE\n"
           "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n")
    facts = transports_facts(parse_nccl_debug(log), {"devices": [{"index": 0}, {"index": 1}]})
    assert facts["matrix"] == []
    assert facts["not_mapped"]
