"""gpu_p2p_probe: the tools' real outputs, the proof and its findings, and the probe itself without CUDA."""

from __future__ import annotations

import contextlib
import json

import gpu_p2p_probe
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import p2p_judge as logic
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import p2p_runner
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_bandwidth import P2PToolParseError, parse_p2p_log
from hypothesis import given
from hypothesis import strategies as st

from tests import paths
from tests.unit.modules import run_module
from tests.unit.torch_venv import torch_python

FIXTURES = paths.FIXTURES / "p2p"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def matrix(parsed: dict, name: str, measured_by: str = "gpu") -> list:
    return next(m["values"] for m in parsed["matrices"] if m["name"] == name and m["measured_by"] == measured_by)


# ---------------------------------------------------------------------------
# Parsers over real outputs


def test_p2p_bandwidth_latency_test_without_peer_access():
    parsed = parse_p2p_log(read("p2pBandwidthLatencyTest_2xRTX4090-no-p2p.txt"))
    assert parsed["tool"] == "p2pBandwidthLatencyTest"
    assert [d["name"] for d in parsed["devices"]] == ["NVIDIA GeForce RTX 4090"] * 2
    assert parsed["devices"][1]["pci_bus_id"] == "0000:c1:00"
    assert parsed["access"] == [[None, False], [False, None]]
    assert parsed["connectivity"] == [[True, False], [False, True]]
    assert matrix(parsed, "P2P=Enabled Latency (P2P Writes) Matrix (us)") == [[1.33, 13.10], [11.59, 1.30]]
    assert matrix(parsed, "P2P=Enabled Latency (P2P Writes) Matrix (us)", "cpu") == [[2.53, 7.94], [7.94, 2.45]]
    assert matrix(parsed, "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)")[0] == [909.49, 21.73]
    kinds = {(m["kind"], m["unit"], m["path"], m["bidirectional"]) for m in parsed["matrices"]}
    assert ("latency", "us", "p2p_enabled", False) in kinds
    assert ("bandwidth", "GB/s", "p2p_disabled", True) in kinds


def test_p2p_bandwidth_latency_test_with_nvlink_pairs():
    parsed = parse_p2p_log(read("p2pBandwidthLatencyTest_4xA100-PCIe-nvlink-pairs.txt"))
    assert parsed["access"][0] == [None, True, False, False]
    assert parsed["access"][2] == [False, False, None, True]
    assert matrix(parsed, "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)")[0][1] == 275.07
    assert matrix(parsed, "P2P=Enabled Latency (P2P Writes) Matrix (us)")[3] == [18.78, 18.08, 2.32, 2.48]


@pytest.mark.parametrize("name", ["nvbandwidth_v0.8_6xA6000-read-ce.txt",
                                  "nvbandwidth-j_v0.8_6xA6000-read-ce_constructed.json"])
def test_nvbandwidth_text_and_json_agree(name):
    parsed = parse_p2p_log(read(name))
    assert (parsed["tool"], parsed["driver_version"]) == ("nvbandwidth", "580.95.05")
    (only,) = parsed["matrices"]
    assert (only["name"], only["kind"], only["path"]) == ("device_to_device_memcpy_read_ce", "bandwidth", "peer")
    assert only["values"][0] == [None, 26.34, 26.35, 21.95, 22.64, 21.8]
    # The SUM line adds the unrounded values; the cells are rounded to 2 decimals.
    assert sum(v for row in only["values"] for v in row if v is not None) == pytest.approx(715.53, abs=0.1)


def test_nvbandwidth_json_latency_keeps_ns_and_gives_us_beside():
    document = {"nvbandwidth": {"testcases": [{
        "name": "device_to_device_latency_sm", "status": "Passed", "sum": 3018.5,
        "bandwidth_description": "Device to Device Latency SM GPU(row) <-> GPU(column) (ns)",
        "bandwidth_matrix": [["N/A", "1520.5"], ["1498", "N/A"]]}]}}
    (only,) = parse_p2p_log(json.dumps(document))["matrices"]
    assert (only["kind"], only["unit"], only["path"]) == ("latency", "ns", "peer")
    assert only["values"] == [[None, 1520.5], [1498.0, None]]
    assert only["values_us"] == [[None, 1.5205], [1.498, None]]
    assert only["sum"] == 3018.5


# Pieces of logs: one matrix or a few, cut out of a longer output (SOURCES.md)


def test_p2p_latency_matrices_without_banner_and_with_line_numbers():
    # cuda-samples#230: two latency titles with their GPU and CPU sub-matrices, numbered by the editor.
    parsed = parse_p2p_log(read("p2pBandwidthLatencyTest_4gpu_latency-matrices-only_line-numbered.txt"))
    assert (parsed["tool"], parsed["devices"], parsed["connectivity"]) == ("p2pBandwidthLatencyTest", [], None)
    assert parsed["access"] == [[None] * 4] * 4  # the piece does not say
    assert matrix(parsed, "P2P=Enabled Latency (P2P Writes) Matrix (us)")[0] == [2.59, 2.31, 1.85, 1.86]
    assert matrix(parsed, "P2P=Disabled Latency Matrix (us)", "cpu")[3] == [6.2, 6.24, 5.79, 2.49]
    assert {(m["kind"], m["unit"]) for m in parsed["matrices"]} == {("latency", "us")}


def test_p2p_bandwidth_matrices_without_banner():
    # nccl#814: three matrices pasted with a comment line of the poster's, no banner, no devices.
    parsed = parse_p2p_log(read("p2pBandwidthLatencyTest_6gpu_bandwidth-matrices-only_no-banner.txt"))
    assert [m["path"] for m in parsed["matrices"]] == ["p2p_disabled", "p2p_enabled", "p2p_enabled"]
    assert matrix(parsed, "Unidirectional P2P=Enabled Bandwidth (P2P Reads) Matrix (GB/s)")[5][0] == 9.95


def test_nvbandwidth_matrices_without_banner_quoted():
    # nvbandwidth#24: "> Running ..." quoted by Markdown, the header's indent lost, no SUM lines.
    parsed = parse_p2p_log(read("nvbandwidth_8xH100_host-sm-matrices_quoted-no-banner.txt"))
    assert [(m["name"], m["path"], m["unit"], len(m["values"])) for m in parsed["matrices"]] == [
        ("host_to_device_memcpy_sm", "host", "GB/s", 1), ("device_to_host_memcpy_sm", "host", "GB/s", 1)]
    assert all("sum" not in m for m in parsed["matrices"])
    assert parsed["version"] is None


def test_nvbandwidth_sum_and_devices():
    parsed = parse_p2p_log(read("nvbandwidth_v0.8_8xH20-3e_device-local-copy_sum.txt"))
    (only,) = parsed["matrices"]
    assert (only["name"], only["sum"], parsed["driver_version"]) == ("device_local_copy", 8930.99, "550.127.08")
    assert parsed["devices"][7] == {"index": 7, "name": "NVIDIA H20-3e", "pci_bus_id": "0000:da:00"}
    assert sum(only["values"][0]) == pytest.approx(only["sum"], abs=0.05)


def test_nvbandwidth_latency_text_keeps_ns_and_gives_us_beside():
    parsed = parse_p2p_log(read("nvbandwidth_4xA100-nvlink-pairs_d2d-latency-ns_constructed.txt"))
    (only,) = parsed["matrices"]
    assert (only["name"], only["kind"], only["unit"], only["path"]) == \
        ("device_to_device_latency_sm", "latency", "ns", "peer")
    assert only["values"][0] == [None, 2250.0, None, None]
    assert only["values_us"][2] == [None, None, None, 2.32]
    assert only["sum"] == 9110.0
    # The judge reads it in us: the NVLink pairs are fast, the others have no value (no peer access).
    assert logic.findings({"tool": "nvbandwidth", "access": None, "matrices": parsed["matrices"]}) == []
    slow = dict(only, values=[[None, 15000.0], [14000.0, None]], values_us=[[None, 15.0], [14.0, None]])
    (finding,) = logic.findings({"tool": "nvbandwidth", "access": None, "matrices": [slow]})
    assert (finding["id"], finding["evidence"]["worst"]) == ("p2p_small_copy_latency", {"pair": "GPU0->GPU1",
                                                                                          "us": 15.0})


def test_nvbandwidth_host_latency_and_perf_formatter_sum():
    text = ("Running host_device_latency_sm.\nmemory latency SM CPU(row) <-> GPU(column) (ns)\n"
            "           0         1\n 0    712.50    698.25\n\n&&&& PERF host_device_latency_sm 1410.75 -ns\n")
    (only,) = parse_p2p_log(text)["matrices"]
    assert (only["path"], only["unit"], only["sum"], only["values_us"]) == ("host", "ns", 1410.75,
                                                                            [[0.7125, 0.69825]])


@pytest.mark.parametrize("mark", ["[...]", "...", "[snip]", "<snip>", "…"])
def test_rows_cut_out_with_an_elision_are_none(mark):
    text = read("nvbandwidth_v0.8_6xA6000-read-ce.txt")
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(" 2 "))
    cut = "\n".join([*lines[:start], mark, *lines[start + 2:]])
    (only,) = parse_p2p_log(cut)["matrices"]
    assert only["values"][2] == only["values"][3] == [None] * 6
    assert only["values"][4] == [22.64, 22.64, 21.81, 26.35, None, 26.34]
    p2p = read("p2pBandwidthLatencyTest_4xA100-PCIe-nvlink-pairs.txt")
    piece = p2p[p2p.index("P2P=Enabled Latency (P2P Writes)"):p2p.index("     2  18.87")] + mark + "\n"
    found = parse_p2p_log(piece)["matrices"][0]
    assert found["values"][:2] == [[2.62, 2.25, 19.85, 16.96], [2.22, 2.71, 14.12, 20.38]]
    assert found["values"][2:] == [[None] * 4] * 2


def test_a_matrix_without_its_title_has_no_name_kind_or_unit():
    piece = "   GPU     0      1\n     0   2.61  14.95\n     1  11.09   2.10\n"
    (only,) = parse_p2p_log(piece)["matrices"]
    assert (only["name"], only["kind"], only["unit"], only["values"]) == (None, None, None,
                                                                          [[2.61, 14.95], [11.09, 2.1]])
    bare = "           0         1\n 0       N/A     26.34\n 1     26.34       N/A\n"
    parsed = parse_p2p_log(bare)
    assert (parsed["tool"], parsed["matrices"][0]["name"], parsed["matrices"][0]["unit"]) == ("nvbandwidth", None, None)
    # Nothing to judge: the unit is unknown.
    assert logic.small_latency_matrix({"tool": "p2pBandwidthLatencyTest", "matrices": [only]}) is None


@pytest.mark.parametrize("wrap", ["crlf", "qp", "mpirun", "quoted"])
def test_pasted_logs_read_the_same(wrap):
    text = read("p2pBandwidthLatencyTest_4xA100-PCIe-nvlink-pairs.txt")
    if wrap == "crlf":
        pasted = text.replace("\n", "\r\n")
    elif wrap == "qp":
        pasted = "\n".join("=\n".join(line[i:i + 70] for i in range(0, max(len(line), 1), 70))
                           for line in text.replace("=", "=3D").split("\n"))
    elif wrap == "mpirun":
        pasted = "\n".join(f"[1,0]<stdout>:{line}" for line in text.split("\n"))
    else:
        pasted = "\n".join(f"> {line}" for line in text.split("\n"))
    assert parse_p2p_log(pasted) == parse_p2p_log(text)


@given(data=st.data())
def test_pieces_of_the_logs_raise_only_their_own_error(data):
    name = data.draw(st.sampled_from(sorted(p.name for p in FIXTURES.iterdir() if p.suffix == ".txt")))
    lines = read(name).split("\n")
    start = data.draw(st.integers(min_value=0, max_value=len(lines)))
    end = data.draw(st.integers(min_value=start, max_value=len(lines)))
    with contextlib.suppress(P2PToolParseError):
        parse_p2p_log("\n".join(lines[start:end]))
    with contextlib.suppress(P2PToolParseError):
        parse_p2p_log("\n".join([*lines[:start], "[...]", *lines[end:]]))


def test_output_cut_in_its_last_matrix_keeps_what_it_printed():
    """Cut after two rows of its first matrix, the paste keeps the peer access, the connectivity and those two
    rows; the rows not printed are None, and ``cut`` says where the paste ends."""
    text = read("p2pBandwidthLatencyTest_4xA100-PCIe-nvlink-pairs.txt")
    parsed = parse_p2p_log(text[: text.index("     2  21.46")])
    first = parsed["matrices"][-1]
    assert parsed["cut"] == {"matrix": first["name"], "rows": 2, "of": 4}
    assert first["values"][2:] == [[None] * 4] * 2 and None not in first["values"][0]
    assert parsed["access"][0][1] is True and parsed["access"][0][2] is False


def test_real_pastes_cut_short_give_peer_access_per_pair():
    """Real pastes that end early: after the connectivity matrix (4 V100, all peers), inside the peer-access
    lines (7 mixed GPUs: 4090 pair and 5090 pair only; GPU3..6's own lines cut), inside the last matrix (2 4090)."""
    v100 = parse_p2p_log(read("p2pBandwidthLatencyTest_4xV100-SXM2_cut-after-connectivity_excerpt.txt"))
    assert v100["matrices"] == [] and v100["cut"] is None and len(v100["devices"]) == 4
    assert all(cell is True for i, row in enumerate(v100["access"]) for j, cell in enumerate(row) if i != j)
    mixed = parse_p2p_log(read("p2pBandwidthLatencyTest_7gpu-mixed-4090-5090-A6000-3090_cut-in-peer-access_"
                               "excerpt.txt"))
    assert mixed["matrices"] == [] and mixed["connectivity"] is None
    assert mixed["access"][0] == [None, True, False, False, False, False, False]
    assert mixed["access"][2] == [False, False, None, True, False, False, False]
    assert mixed["access"][3] == [None] * 7  # its lines were cut: not told
    pair = parse_p2p_log(read("p2pBandwidthLatencyTest_2xRTX4090_cut-in-last-matrix_excerpt.txt"))
    assert pair["cut"] == {"matrix": "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)", "rows": 1, "of": 2}
    assert pair["matrices"][-1]["values"] == [[1016.92, 12.88], [None, None]] and len(pair["matrices"]) == 4


def test_a_paste_cut_after_the_next_title_and_header_drops_that_empty_matrix():
    # The 4 V100 paste with the next two lines the sample prints (title and header), no row: "has 0 rows for 4
    # GPUs" before; now the access stands and the empty matrix is left out, with the cut said.
    text = read("p2pBandwidthLatencyTest_4xV100-SXM2_cut-after-connectivity_excerpt.txt")
    text += "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)\n   D\\D     0      1      2      3 \n"
    parsed = parse_p2p_log(text)
    assert parsed["matrices"] == []
    assert parsed["cut"] == {"matrix": "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)", "rows": 0, "of": 4}
    assert parsed["access"][0] == [None, True, True, True]


def test_a_short_last_row_is_the_cut_and_a_short_row_with_more_after_it_is_damage():
    text = read("p2pBandwidthLatencyTest_2xRTX4090_cut-in-last-matrix_excerpt.txt")
    assert parse_p2p_log(text + "     1  12.88\n")["cut"]["rows"] == 1
    with pytest.raises(P2PToolParseError, match="expected 2 values"):
        parse_p2p_log(text.replace("     1   6.34 926.75 \n", "     1   6.34\n", 1))


def test_a_row_missing_before_the_last_matrix_is_damage_not_a_cut():
    text = read("p2pBandwidthLatencyTest_4xA100-PCIe-nvlink-pairs.txt")
    row = text[text.index("     3  21.49"):]  # the first matrix's last row; seven matrices follow it
    damaged = text.replace(row[: row.index("\n") + 1], "", 1)
    with pytest.raises(P2PToolParseError, match="has 3 rows for 4 GPUs"):
        parse_p2p_log(damaged)


def test_cut_output_fails_clearly():
    with pytest.raises(P2PToolParseError, match="found none of their markers"):
        parse_p2p_log("Segmentation fault (core dumped)\n")


@given(st.text(max_size=300))
def test_log_reader_raises_only_its_own_error(text):
    with contextlib.suppress(P2PToolParseError):
        parse_p2p_log(text)


# ---------------------------------------------------------------------------
# Findings


def test_log_without_p2p_gives_the_host_path_findings(capsys):
    path = FIXTURES / "p2pBandwidthLatencyTest_2xRTX4090-no-p2p.txt"
    result = run_module(gpu_p2p_probe.main, {"log": str(path)}, capsys, check_mode=True)

    assert (result["changed"], result["source"], result["tool"]) == (False, "log", "p2pBandwidthLatencyTest")
    ids = [(f["id"], f["severity"]) for f in result["findings"]]
    assert ids == [("p2p_small_copy_latency", "critical"), ("p2p_peer_access_unavailable", "warning")]
    latency = result["findings"][0]
    assert latency["evidence"]["worst"] == {"pair": "GPU0->GPU1", "us": 13.1}
    assert "x-nv-gpudirect-clique" in latency["remedy"]


def test_log_with_nvlink_pairs_flags_only_the_unpaired_gpus(capsys):
    path = FIXTURES / "p2pBandwidthLatencyTest_4xA100-PCIe-nvlink-pairs.txt"
    result = run_module(gpu_p2p_probe.main, {"log": str(path)}, capsys)

    by_id = {f["id"]: f for f in result["findings"]}
    assert by_id["p2p_small_copy_latency"]["evidence"]["slow_pairs"] == 8
    assert by_id["p2p_small_copy_latency"]["evidence"]["granted_but_slow"] == ""
    assert by_id["p2p_peer_access_unavailable"]["summary"].startswith("4 of 6 GPU pairs (8 of 12 directions)")


def harness_events(proof: dict, peer_us: float = 2.0, host_us: float = 12.0, **summary) -> str:
    events = [{"event": "start", "torch_version": "2.9.1+cu128", "devices": [{"index": 0, "name": "G"},
                                                                              {"index": 1, "name": "G"}],
               "access": [[None, True], [True, None]]}]
    for src, dst in ((0, 1), (1, 0)):
        events.append({"event": "proof", "src": src, "dst": dst, "peer_access": True, "elements": 1024,
                       "ce_wrong": 0, "sm_wrong": 0, "zeros_at_destination": 0, **(proof if src == 0 else {})})
        events.append({"event": "timing", "src": src, "dst": dst, "size_bytes": 16384, "iters": 50,
                       "peer": {"time_us": peer_us + 3, "gbps": 1.0, "gpu_us": peer_us},
                       "host": {"time_us": host_us, "gbps": 0.5}})
    events.append({"event": "summary", "status": "ok", "hung_at": None, **summary})
    return "\n".join(json.dumps(e) for e in events)


def test_a_private_mirror_is_a_critical_finding():
    run = logic.parse_harness_output(harness_events({"ce_wrong": 1024, "sm_wrong": 1024,
                                                     "zeros_at_destination": 1024}))
    result = logic.harness_result(run)
    assert result["proof"][0][1]["ce_wrong"] == 1024 and result["proof"][1][0]["ce_wrong"] == 0
    found = logic.findings(result)
    assert (found[0]["id"], found[0]["severity"]) == ("p2p_write_not_arriving", "critical")
    assert "private-mirror" in found[0]["summary"]


def test_healthy_peer_copies_give_no_finding():
    result = logic.harness_result(logic.parse_harness_output(harness_events({})))
    gpu = next(m for m in result["matrices"] if m["metric"] == "gpu_us")
    assert gpu["values"] == [[None, 2.0], [2.0, None]] and gpu["size_bytes"] == 16384
    assert logic.findings(result) == []


def test_peer_path_as_slow_as_the_host_is_reported():
    result = logic.harness_result(logic.parse_harness_output(harness_events({}, peer_us=13.0, host_us=14.0)))
    ids = [f["id"] for f in logic.findings(result)]
    assert ids == ["p2p_small_copy_latency", "p2p_no_gain"]


def test_a_hang_names_the_pair():
    found = logic.findings({"access": [], "matrices": []}, status="timeout", timeout_s=30,
                           hung_at={"src": 1, "dst": 0, "phase": "proof", "size_bytes": None})
    assert found[0]["id"] == "p2p_probe_timeout"
    assert "GPU1->GPU0 (proof)" in found[0]["summary"]


# ---------------------------------------------------------------------------
# The probe itself, for real, on a machine without CUDA


@pytest.fixture(scope="module")
def python() -> str:
    return torch_python()


def test_probe_without_cuda_fails_clearly(python, capsys):
    result = run_module(gpu_p2p_probe.main, {"python": python, "timeout": 60}, capsys)

    assert result["failed"] is True
    assert result["msg"].startswith(f"no CUDA device visible to {python}: torch 2.13.0+cpu (CUDA build None) sees none")
    assert "Traceback" not in result["msg"]


def test_probe_without_cuda_can_skip(python, capsys):
    result = run_module(gpu_p2p_probe.main, {"python": python, "timeout": 60, "missing_gpu": "skip"}, capsys)

    assert result["skipped"] is True and result["changed"] is False
    assert result["msg"].startswith("no CUDA device visible to")


def test_probe_with_an_interpreter_that_is_not_there(capsys, tmp_path):
    result = run_module(gpu_p2p_probe.main, {"python": str(tmp_path / "python")}, capsys)
    assert result["failed"] is True and "does not exist" in result["msg"]


# --- the probe's own output, kept with save_log and replayed with log -------------------------


def test_the_constructed_probe_logs_match_their_builder():
    import subprocess
    import sys

    rc = subprocess.run([sys.executable, str(FIXTURES / "build_probe_logs.py"), "--check"], capture_output=True,
                        text=True)
    assert rc.returncode == 0, rc.stderr


def test_a_replayed_probe_run_keeps_its_proof(capsys):
    path = FIXTURES / "p2p-probe_8xH100-SXM-nvlink_constructed.jsonl"
    result = run_module(gpu_p2p_probe.main, {"log": str(path)}, capsys, check_mode=True)

    assert (result["source"], result["status"], result["tool"]) == ("probe-log", "ok", "torch")
    assert len(result["devices"]) == 8
    assert result["proof"][0][1] == {"ce_wrong": 0, "sm_wrong": 0, "zeros_at_destination": 0, "elements": 1048576,
                                     "peer_access": True}
    assert result["findings"] == []


def test_a_replayed_probe_run_without_p2p_is_critical(capsys):
    path = FIXTURES / "p2p-probe_8xRTXPRO6000-vm-no-p2p_constructed.jsonl"
    result = run_module(gpu_p2p_probe.main, {"log": str(path)}, capsys)

    ids = [f["id"] for f in result["findings"]]
    assert "p2p_small_copy_latency" in ids
    assert "p2p_peer_access_unavailable" in ids


def test_a_cut_off_probe_log_says_what_is_missing(tmp_path, capsys):
    lines = (FIXTURES / "p2p-probe_8xH100-SXM-nvlink_constructed.jsonl").read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    # Without the summary line it is no longer the probe's output, nor a tool's.
    cut.write_text("\n".join(lines[:-1]) + "\n")
    result = run_module(gpu_p2p_probe.main, {"log": str(cut)}, capsys)

    assert result["failed"] is True
    assert "nor as the probe's own output" in result["msg"]


def test_save_log_keeps_the_run_for_replay(tmp_path, capsys, monkeypatch):
    text = (FIXTURES / "p2p-probe_8xRTXPRO6000-baremetal-p2p_constructed.jsonl").read_text()
    saved = tmp_path / "probe.jsonl"

    class Ran:
        stdout, stderr, rc, error = text, "", 0, None

    monkeypatch.setattr(p2p_runner, "python_problem", lambda python: None)
    monkeypatch.setattr(p2p_runner, "run_script", lambda *args, **kwargs: Ran())
    live = run_module(gpu_p2p_probe.main, {"save_log": str(saved)}, capsys)
    replayed = run_module(gpu_p2p_probe.main, {"log": str(saved)}, capsys)

    assert saved.read_text() == text
    assert (live["source"], replayed["source"]) == ("probe", "probe-log")
    assert live["proof"] == replayed["proof"]


def test_save_log_writes_nothing_in_check_mode(tmp_path, capsys, monkeypatch):
    text = (FIXTURES / "p2p-probe_8xRTXPRO6000-baremetal-p2p_constructed.jsonl").read_text()
    saved = tmp_path / "probe.jsonl"

    class Ran:
        stdout, stderr, rc, error = text, "", 0, None

    monkeypatch.setattr(p2p_runner, "python_problem", lambda python: None)
    monkeypatch.setattr(p2p_runner, "run_script", lambda *args, **kwargs: Ran())
    run_module(gpu_p2p_probe.main, {"save_log": str(saved)}, capsys, check_mode=True)

    assert not saved.exists()


def test_a_piece_cut_after_the_connectivity_header_gives_its_peer_access():
    # Found by the property above (then refused): the peer-access lines and a "P2P Connectivity Matrix" header
    # whose rows were cut off hold no matrix, but the lines settle access per pair.
    lines = read("p2pBandwidthLatencyTest_4xA100-PCIe-nvlink-pairs.txt").split("\n")
    parsed = parse_p2p_log("\n".join(lines[5:23]))
    assert parsed["matrices"] == [] and parsed["connectivity"] is None
    assert parsed["access"] == [[None, True, False, False], [True, None, False, False],
                                [False, False, None, True], [False, False, True, None]]
    with pytest.raises(P2PToolParseError, match="found none"):
        parse_p2p_log("\n".join(lines[20:23]))
