"""The gpu_analyze module, the one module that takes material: many inputs in one process, their reports."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import gpu_analyze
import gpu_host_facts
import pytest

from tests.paths import CAPTURES, FIXTURES, ROOT
from tests.unit import schemas
from tests.unit.material.test_capture import TOPO_M
from tests.unit.modules import deprecations_of, run_module

BUG_REPORT = FIXTURES / "bug-reports" / "nvidia-bug-report_418_2xV100-SXM2_baremetal_constructed.log"
NCCL_LOG = FIXTURES / "nccl" / ("transfer-test-in-all_reduce_perf-layout_incident-reconstructed_"
                                 "8xRTXPRO6000-vm-no-p2p.txt")
P2P_NS = FIXTURES / "nvidia-smi" / "topo-p2p-r_8gpu-vm-NS.txt"
H100 = CAPTURES / "baremetal-8xH100-SXM.json"


def incident(directory: Path) -> Path:
    """The incident's pasted outputs: topo -p2p r (NS everywhere) with its command line, topo -m, and the
    nccl-tests log with 13.7 us at 12 KB."""
    directory.mkdir(parents=True)
    (directory / "p2p.txt").write_text("root@glm5-vm:~# nvidia-smi topo -p2p r\n" + P2P_NS.read_text())
    (directory / "topo.txt").write_bytes(TOPO_M)
    shutil.copy(NCCL_LOG, directory / "all_reduce_perf.log")
    return directory


def analyse(capsys, tmp_path: Path, inputs: list[str], **args) -> dict:
    return run_module(gpu_analyze.main, {"inputs": inputs, "base_dir": str(tmp_path), **args}, capsys)


def test_argument_spec_matches_documentation() -> None:
    import yaml

    documented = yaml.safe_load(gpu_analyze.DOCUMENTATION)["options"]
    assert set(documented) == set(gpu_analyze.get_argument_spec())


def test_many_inputs_each_give_a_report_and_a_bad_one_stops_none(tmp_path: Path, capsys) -> None:
    incident(tmp_path / "glm5-incident")
    shutil.copy(BUG_REPORT, tmp_path / "nvidia-bug-report.log")
    result = analyse(capsys, tmp_path, ["glm5-incident", "nvidia-bug-report.log", str(H100), "missing/",
                                        "glm5-incident/"], model="glm-5")
    rows = {row["host"]: row for row in result["inputs"]}
    assert list(rows) == [f"{name}.analysis" for name in ("glm5-incident", "nvidia-bug-report", "baremetal-8xH100-SXM",
                                                         "missing", "glm5-incident-2")]
    assert [rows[h]["form"] for h in rows] == ["directory", "file", "capture", None, "directory"]
    assert rows["missing.analysis"]["error"].startswith(f"{tmp_path}/missing does not exist (given as 'missing/'")
    assert result["changed"] and not result.get("failed")
    reports = tmp_path / "reports"
    assert result["dest"] == str(reports)
    assert {p.name for p in reports.iterdir()} == {
        "analysis.md", *(f"{h}{suffix}" for h in rows if h != "missing.analysis" for suffix in (".json", ".md")),
        "glm5-incident.analysis-nccl.svg", "glm5-incident-2.analysis-nccl.svg",
        *(f"{h}.analysis-p2p.svg" for h in ("glm5-incident", "glm5-incident-2", "baremetal-8xH100-SXM"))}
    assert "| missing.analysis | failed, no report yet |" in (reports / "analysis.md").read_text()
    assert result["lines"][3].startswith("missing/: NOT READ: ")
    assert result["lines"][2] == (f"{H100} -> baremetal-8xH100-SXM.analysis: fit (bare metal; 8 GPU(s); P2P ok) - no "
                                  f"findings. Report: {reports}/baremetal-8xH100-SXM.analysis.md")
    for host in ("glm5-incident.analysis", "nvidia-bug-report.analysis", "baremetal-8xH100-SXM.analysis"):
        report = json.loads((reports / f"{host}.json").read_text())
        assert schemas.validator("report").is_valid(report), host


def test_the_incidents_pastes_give_the_critical_p2p_finding_and_their_benchmark(tmp_path: Path, capsys) -> None:
    incident(tmp_path / "incident")
    result = analyse(capsys, tmp_path, ["incident"], model="glm-5")
    report = json.loads((tmp_path / "reports" / "incident.analysis.json").read_text())
    assert "p2p_not_supported" in {f["id"] for f in report["findings"]}
    assert report["summary"]["worst_finding"] == {"id": "p2p_not_supported", "severity": "critical"}
    # The nccl-tests log was read as nccl_bench reads it: its 12 KB row, priced for the model.
    rows = report["bench"]["nccl"]["results"]
    assert any(row["size_bytes"] == 12288 and row["out_of_place"]["time_us"] == pytest.approx(13.7) for row in rows)
    assert "communication_ceiling" in report["summary"]
    assert result["inputs"][0]["bench_logs"] == {"nccl": str(tmp_path / "incident" / "all_reduce_perf.log")}
    # Its values are in the report: it is listed as read, by nccl_bench, and not among the inputs not used.
    gave = {i["name"]: i["as"] for i in report["material"]["inputs"]}
    assert gave["all_reduce_perf.log"] == ["bench:nccl_bench"]
    assert "all_reduce_perf.log" not in {e["name"] for e in report["material"]["unmapped"]}
    markdown = (tmp_path / "reports" / "incident.analysis.md").read_text()
    assert "| all_reduce_perf.log | nccl-tests | bench:nccl_bench |" in markdown
    assert "| nothing read |" not in markdown


def test_without_bench_logs_the_logs_stay_unmapped(tmp_path: Path, capsys) -> None:
    incident(tmp_path / "incident")
    analyse(capsys, tmp_path, ["incident"], bench_logs=False)
    report = json.loads((tmp_path / "reports" / "incident.analysis.json").read_text())
    assert "bench" not in report
    assert "gpu_bench_nccl_log" in {e["name"]: e["why"] for e in report["material"]["unmapped"]}["all_reduce_perf.log"]


def test_check_mode_writes_nothing_and_says_would_write(tmp_path: Path, capsys) -> None:
    result = run_module(gpu_analyze.main, {"inputs": [str(H100)], "dest": str(tmp_path / "out")}, capsys,
                        check_mode=True)
    assert not (tmp_path / "out").exists()
    assert result["written"] == [str(tmp_path / "out" / n) for n in
                                 ("analysis.md", "baremetal-8xH100-SXM.analysis-p2p.svg",
                                  "baremetal-8xH100-SXM.analysis.json", "baremetal-8xH100-SXM.analysis.md")]
    assert result["lines"][0].endswith(f"Would write: {tmp_path}/out/baremetal-8xH100-SXM.analysis.md")


def test_a_second_run_changes_nothing(tmp_path: Path, capsys) -> None:
    args = {"inputs": [str(H100), str(BUG_REPORT)], "dest": str(tmp_path)}
    assert run_module(gpu_analyze.main, args, capsys)["changed"] is True
    again = run_module(gpu_analyze.main, args, capsys)
    assert again["changed"] is False and again["written"] == []


def test_an_unknown_model_fails_before_anything_is_read(tmp_path: Path, capsys) -> None:
    result = run_module(gpu_analyze.main, {"inputs": [str(H100)], "dest": str(tmp_path / "r"),
                                           "model": "no-such-model"}, capsys)
    assert result["failed"] and "known model" in result["msg"] and not (tmp_path / "r").exists()


def test_the_former_option_name_model_profile_still_prices_the_log_and_is_deprecated(tmp_path: Path,
                                                                                      capsys) -> None:
    incident(tmp_path / "incident")
    now = analyse(capsys, tmp_path, ["incident"], model="llama-3-70b", dest=str(tmp_path / "now"))
    former = analyse(capsys, tmp_path, ["incident"], model_profile="llama-3-70b", dest=str(tmp_path / "former"))
    assert deprecations_of(former) == [("Alias 'model_profile' is deprecated. See the module docs for more "
                                        "information", "2027-06-01", "gpuhost.gpu")]
    assert "deprecations" not in now
    report = "incident.analysis.json"
    assert (tmp_path / "former" / report).read_text() == (tmp_path / "now" / report).read_text()
    assert "Llama-3-70B" in (tmp_path / "now" / report).read_text()


# ---------------------------------------------------------------------------
# One host's material alone: what gpu_host_facts' removed bundle option and gpu_material_facts were asked


def test_a_directory_of_pastes_carries_its_section(tmp_path: Path, capsys) -> None:
    incident(tmp_path / "incident")
    analyse(capsys, tmp_path, ["incident"])
    facts = json.loads((tmp_path / "reports" / "incident.analysis.json").read_text())
    assert {"inputs", "not_seen", "unmapped", "warnings"} <= set(facts["material"])
    assert [i["name"] for i in facts["material"]["inputs"]] == ["all_reduce_perf.log", "p2p.txt", "topo.txt"]
    assert "kernel log (dmesg)" in facts["material"]["not_seen"]
    assert schemas.validator("report").is_valid(facts)


def test_one_bug_report_is_an_input(tmp_path: Path, capsys) -> None:
    analyse(capsys, tmp_path, [str(BUG_REPORT)])
    facts = json.loads((tmp_path / "reports" / f"{BUG_REPORT.name.removesuffix('.log')}.analysis.json").read_text())
    assert facts["material"]["inputs"][0]["kind"] == "nvidia-bug-report"
    assert facts["gpus"]["driver_version"] == "418.87.01"


def test_a_relative_missing_input_names_the_absolute_path(tmp_path: Path, capsys) -> None:
    result = analyse(capsys, tmp_path, ["tickets/4711"])
    assert result["inputs"][0]["error"].startswith(f"{tmp_path}/tickets/4711 does not exist")


def test_gpu_host_facts_refuses_a_capture_built_from_material(tmp_path: Path, capsys) -> None:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import build_capture

    path = tmp_path / "built.json"
    path.write_text(json.dumps(build_capture([("topo.txt", TOPO_M)])))
    result = run_module(gpu_host_facts.main, {"capture": str(path)}, capsys)
    assert result["failed"] and "built from saved material" in result["msg"] and "gpu_analyze" in result["msg"]
    assert "Traceback" not in result["msg"]


def ansible_adhoc(tmp_path: Path, module: str, args: dict) -> subprocess.CompletedProcess:
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path))
    return subprocess.run([str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-e",
                           f"ansible_python_interpreter={sys.executable}", "-m", module, "-a", json.dumps(args)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def test_the_removed_entry_points_say_where_material_goes_now(tmp_path: Path) -> None:
    """Through ansible itself: an old playbook's gpu_material_facts task meets the tombstone's message, and
    gpu_host_facts' bundle option is an unsupported parameter, not a traceback."""
    removed = ansible_adhoc(tmp_path, "gpuhost.gpu.gpu_material_facts", {"bundle": str(BUG_REPORT)})
    said = removed.stdout + removed.stderr
    assert removed.returncode != 0 and "gpu_analyze" in said and "was removed" in said, said[-2000:]
    old_option = ansible_adhoc(tmp_path, "gpuhost.gpu.gpu_host_facts", {"bundle": str(BUG_REPORT)})
    said = old_option.stdout + old_option.stderr
    assert old_option.returncode != 0 and "Unsupported parameters" in said and "bundle" in said, said[-2000:]
    assert "Traceback" not in said


def test_a_pasted_matrix_that_names_no_model_says_so_not_no_driver(tmp_path: Path, capsys) -> None:
    """A topo -p2p r paste counts two GPUs and names no model: nothing read shows a driver fault, so the report
    says the material does not state the model (it said "model unknown: no driver")."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "p2p.txt").write_text("$ nvidia-smi topo -p2p r\n" + (FIXTURES / "nvidia-smi" /
                                            "topo-p2p-r_2gpu-NS.txt").read_text())
    analyse(capsys, tmp_path, ["m"])
    text = (tmp_path / "reports" / "m.analysis.md").read_text()
    assert "| GPUs | 2 x NVIDIA GPU (model not stated in the material) |" in text
    assert "no driver" not in text


@pytest.mark.parametrize(("name", "denied"), [
    # Cut inside the peer-access lines: 13 of the 21 pairs are told, all refused (before: bench_probe_not_run,
    # "expected its matrices ... found none").
    ("p2pBandwidthLatencyTest_7gpu-mixed-4090-5090-A6000-3090_cut-in-peer-access_excerpt.txt", "13 of 21 GPU pairs"),
    # simpleP2P, not read at all before.
    ("simpleP2P_6x2080Ti_no-peer-access_excerpt.txt", "9 of 15 GPU pairs"),
])
def test_pastes_cut_short_or_from_simple_p2p_settle_peer_access(tmp_path: Path, capsys, name, denied) -> None:
    (tmp_path / "m").mkdir()
    shutil.copy(FIXTURES / "p2p" / name, tmp_path / "m" / "p2p.txt")
    result = analyse(capsys, tmp_path, ["m"])
    report = json.loads((tmp_path / "reports" / "m.analysis.json").read_text())
    found = {f["id"]: f for f in report["findings"]}
    assert "bench_probe_not_run" not in found
    assert found["p2p_peer_access_unavailable"]["summary"].startswith(denied)
    assert "p2p_peer_access_unavailable" in result["lines"][0]
    assert schemas.validator("report").is_valid(report)


def test_a_whole_simple_p2p_run_keeps_its_copy_figure(tmp_path: Path, capsys) -> None:
    (tmp_path / "m").mkdir()
    shutil.copy(FIXTURES / "p2p" / "simpleP2P_2xL4_peer-yes_bandwidth_passed.txt", tmp_path / "m" / "p2p.txt")
    analyse(capsys, tmp_path, ["m"])
    report = json.loads((tmp_path / "reports" / "m.analysis.json").read_text())
    probe = report["bench"]["probe"]
    assert (probe["tool"], probe["memcpy_peer"], probe["passed"]) == ("simpleP2P", {"pair": [0, 1], "gb_per_s": 19.87},
                                                                     True)
    assert "p2p_peer_access_unavailable" not in {f["id"] for f in report["findings"]}
    assert schemas.validator("report").is_valid(report)
    assert ("simpleP2P: cudaMemcpyPeer between GPU0 and GPU1, both ways with peer access on: 19.87 GB/s; its data "
            "check passed.") in (tmp_path / "reports" / "m.analysis.md").read_text()


def test_a_paste_cut_in_its_last_matrix_says_where_in_the_report(tmp_path: Path, capsys) -> None:
    (tmp_path / "m").mkdir()
    shutil.copy(FIXTURES / "p2p" / "p2pBandwidthLatencyTest_2xRTX4090_cut-in-last-matrix_excerpt.txt",
                tmp_path / "m" / "p2p.txt")
    analyse(capsys, tmp_path, ["m"])
    text = (tmp_path / "reports" / "m.analysis.md").read_text()
    assert ("The p2pBandwidthLatencyTest paste ends inside Bidirectional P2P=Enabled Bandwidth Matrix (GB/s) (1 of 2 "
            "rows)") in text


def test_an_nccl_topology_dump_of_a_flat_emulated_bus_names_a_virtual_machine(tmp_path: Path, capsys) -> None:
    """GPUs on bus 00 vote for a VM, with the dump named as the source; its weak signs are listed beside."""
    (tmp_path / "m").mkdir()
    shutil.copy(FIXTURES / "nccl" / "nccl-topo-dump_2xRTXPRO6000-q35-flat-bus-vm_constructed.xml",
                tmp_path / "m" / "system.xml")
    analyse(capsys, tmp_path, ["m"])
    report = json.loads((tmp_path / "reports" / "m.analysis.json").read_text())
    virt = report["virtualization"]
    assert virt["type"] == "vm"
    assert [(e["signal"], e["weight"]) for e in virt["evidence"]] == [("NCCL topology dump", "strong"),
                                                                     ("NCCL topology dump", "weak"),
                                                                     ("NCCL topology dump", "weak")]
    assert "GPU 0 at 0000:00:10.0, GPU 1 at 0000:00:11.0" in virt["evidence"][0]["value"]
    assert {"what": "NCCL topology dump (GPU placement, links, NUMA; virtualization signs)",
            "from": ["system.xml"]} in report["material"]["seen"]
    assert schemas.validator("report").is_valid(report)


@pytest.mark.parametrize(("name", "notes"), [
    # The real guest's dump: NUMA unknown, a weak note only; the verdict stays "unknown", never bare metal.
    ("nccl-topo-dump_2.2x_H200-vm-numaid-minus1_excerpt.xml", ['NUMA node unknown (numaid="-1")']),
    # The bare-metal host's dump shows no sign at all.
    ("nccl-topo-dump_2.2x_8xH200-baremetal-switch-nic_excerpt.xml", []),
])
def test_weak_or_no_topology_signs_decide_nothing(tmp_path: Path, capsys, name, notes) -> None:
    (tmp_path / "m").mkdir()
    shutil.copy(FIXTURES / "nccl" / name, tmp_path / "m" / "system.xml")
    analyse(capsys, tmp_path, ["m"])
    virt = json.loads((tmp_path / "reports" / "m.analysis.json").read_text())["virtualization"]
    assert virt["type"] is None
    assert [e["value"].split(":")[0] for e in virt["evidence"]] == notes


# ---------------------------------------------------------------------------
# A matrix named the way users name it


def test_the_incident_matrix_saved_as_p2p_read_alone_is_unfit_with_8_gpus(tmp_path: Path, capsys) -> None:
    # The incident's own topo -p2p r output, without its command line, as a user saves it.
    (tmp_path / "pastes").mkdir()
    (tmp_path / "pastes" / "p2p_read.txt").write_text(P2P_NS.read_text())
    analyse(capsys, tmp_path, ["pastes"])
    report = json.loads((tmp_path / "reports" / "pastes.analysis.json").read_text())
    assert report["summary"]["verdict"] == "unfit"
    assert report["summary"]["worst_finding"] == {"id": "p2p_not_supported", "severity": "critical"}
    assert report["summary"]["gpu_count"] == 8
    markdown = (tmp_path / "reports" / "pastes.analysis.md").read_text()
    assert ("| p2p_read.txt | nvidia-smi-topo-p2p | commands:nvidia-smi topo -p2p r (capability r from its file "
            "name) |") in markdown


def test_a_healthy_bare_metal_hosts_pastes_give_no_p2p_finding_and_no_virtualization_claim(tmp_path: Path,
                                                                                          capsys) -> None:
    # Negative control: a read matrix of OK, an nccl-tests run whose NCCL_DEBUG lines show P2P transports
    # (2x A100), its all-reduce read as nccl_bench reads it.
    pastes = tmp_path / "healthy"
    pastes.mkdir()
    (pastes / "p2p_read.txt").write_text(" \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n GPU1\tOK\tX\t\n")
    shutil.copy(FIXTURES / "nccl" / "all_reduce_perf_2.13-2.14_nccl2.20.5_debug-info-interleaved_2xA100.txt",
                pastes / "all_reduce.log")
    analyse(capsys, tmp_path, ["healthy"])
    report = json.loads((tmp_path / "reports" / "healthy.analysis.json").read_text())
    ids = {f["id"] for f in report["findings"]}
    assert not {i for i in ids if "p2p" in i}, ids
    assert report["summary"]["p2p"] == "ok"
    assert report["virtualization"]["type"] is None
    assert report["summary"]["virtualization"].startswith("unknown (")
    assert report["summary"]["verdict"] != "unfit"
    assert report["bench"]["nccl"] is not None


def test_a_benchmark_log_pasted_after_other_outputs_is_read_from_its_file(tmp_path: Path, capsys) -> None:
    # One file: the incident's matrix under its shell line, topo -m and the nccl-tests log under their headings.
    pastes = tmp_path / "one-file"
    pastes.mkdir()
    (pastes / "terminal.md").write_text("$ nvidia-smi topo -p2p r\n" + P2P_NS.read_text() + "\n## nvidia-smi topo -m\n"
                                       + TOPO_M.decode() + "\n## all_reduce_perf -g 8\n" + NCCL_LOG.read_text())
    result = analyse(capsys, tmp_path, ["one-file"])
    report = json.loads((tmp_path / "reports" / "one-file.analysis.json").read_text())
    assert report["summary"]["worst_finding"] == {"id": "p2p_not_supported", "severity": "critical"}
    assert result["inputs"][0]["bench_logs"] == {"nccl": str(pastes / "terminal.md")}
    assert any(row["size_bytes"] == 12288 for row in report["bench"]["nccl"]["results"])
    gave = [(i["kind"], i["as"]) for i in report["material"]["inputs"]]
    assert gave == [("nvidia-smi-topo-p2p", ["commands:nvidia-smi topo -p2p r"]),
                    ("nvidia-smi-topo-m", ["commands:nvidia-smi topo -m"]), ("nccl-tests", ["bench:nccl_bench"])]


def test_a_file_name_that_is_not_utf8_is_shown_escaped_and_stops_no_report(tmp_path: Path, capsys) -> None:
    directory = incident(tmp_path / "incident")
    # b"caf\xe9.txt": Latin-1, as an older archive tool writes it; Python lists it with a lone surrogate.
    (directory / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"hello\n")
    result = analyse(capsys, tmp_path, ["incident", str(H100)])
    assert not result.get("failed") and [row["error"] for row in result["inputs"]] == [None, None]
    reports = tmp_path / "reports"
    written = {p.name for p in reports.iterdir()}
    assert {"incident.analysis.md", "incident.analysis.json", "baremetal-8xH100-SXM.analysis.md",
            "analysis.md"} <= written
    # Markdown shows a backslash escaped (report/markdown.py): the text reads caf\xe9.txt.
    assert "caf\\\\xe9.txt" in (reports / "incident.analysis.md").read_text()
    unmapped = json.loads((reports / "incident.analysis.json").read_text())["material"]["unmapped"]
    assert "caf\\xe9.txt" in {entry["name"] for entry in unmapped}


def test_the_limits_are_options_and_a_bomb_is_one_input_not_read(tmp_path: Path, capsys) -> None:
    from tests.unit.material.test_gunzip import zeros_gzip

    (tmp_path / "bomb.log.gz").write_bytes(zeros_gzip(16))
    result = analyse(capsys, tmp_path, ["bomb.log.gz", str(H100)], max_decompressed_mib=8)
    assert "more than 8 MiB, the limit on decompressed bytes" in result["inputs"][0]["error"]
    assert "gpu_analyze_max_decompressed_mib=N" in result["inputs"][0]["error"]
    assert result["inputs"][1]["error"] is None
    assert analyse(capsys, tmp_path, ["bomb.log.gz"], max_file_mib=0)["msg"].startswith(
        "max_file_mib: expected a whole number of at least 1; found 0")


def test_an_nccl_info_log_alone_counts_its_gpus_as_a_lower_bound_and_is_listed_as_read(tmp_path: Path,
                                                                                      capsys) -> None:
    """A real NCCL 2.7.8 INFO log (4 GPUs of tesla-105) is the only input: the report counts its GPUs, and its
    Material row says what it gave rather than "nothing read" (before: "GPUs: none found", "Not used")."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "nccl.log").write_bytes(
        (FIXTURES / "nccl" / "nccl-debug_2.7.8_channel-busid-p2p-ipc-shm-net-socket_2x4gpu_excerpt.log").read_bytes())
    result = analyse(capsys, tmp_path, ["m"])
    text = (tmp_path / "reports" / "m.analysis.md").read_text()
    # The log shows the GPUs its job used, not every GPU of the host: a lower bound, said as one.
    assert ("| GPUs | at least 4 GPUs (the GPUs the NCCL job used): NVIDIA GPU (model not stated in the material) |"
            in text)
    assert any("; at least 4 GPUs (the GPUs the NCCL job used); P2P " in line for line in result["lines"])
    assert "| nccl.log | nccl-debug | material:nccl-debug-log |" in text
    assert "none found" not in text and "Not used" not in text


def test_the_analysis_writes_its_own_index_and_leaves_an_audits_fleet_md(tmp_path: Path, capsys) -> None:
    # Issue 29: the analysis wrote fleet.md with its inputs only, over the audit's table in the same directory.
    audited = "# GPU fleet audit\n\n| Host | Audit |\n|---|---|\n| gpu-node-7 | this run |\n"
    (tmp_path / "fleet.md").write_text(audited)
    shutil.copy(H100, tmp_path / "analysis.json")
    result = run_module(gpu_analyze.main, {"inputs": [str(tmp_path / "analysis.json")], "dest": str(tmp_path)}, capsys)
    assert (tmp_path / "fleet.md").read_text() == audited
    # An input named like the index gets a name of its own rather than overwriting it.
    assert [row["host"] for row in result["inputs"]] == ["analysis-input.analysis"]
    assert "| analysis-input.analysis | this run |" in (tmp_path / "analysis.md").read_text()


# ---------------------------------------------------------------------------
# The probe's own saved log (gpu_p2p_probe save_log) as material

PROBE_VM = FIXTURES / "p2p" / "p2p-probe_8xRTXPRO6000-vm-no-p2p_constructed.jsonl"
PROBE_BAREMETAL = FIXTURES / "p2p" / "p2p-probe_8xRTXPRO6000-baremetal-p2p_constructed.jsonl"


def probe_findings_of_the_live_path(log: Path) -> set[str]:
    """The finding ids gpu_p2p_probe gives for the same log, as the gpu_bench role runs it."""
    from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.p2p_runner import run_probe

    return {f["id"] for f in run_probe({"log": str(log)}, check_mode=True, warn=lambda message: None)["findings"]}


def test_a_saved_vm_probe_log_alone_gives_the_p2p_findings_of_the_live_probe(tmp_path: Path, capsys) -> None:
    (tmp_path / "vm").mkdir()
    shutil.copy(PROBE_VM, tmp_path / "vm" / "probe.jsonl")
    result = analyse(capsys, tmp_path, ["vm"])
    report = json.loads((tmp_path / "reports" / "vm.analysis.json").read_text())
    live = probe_findings_of_the_live_path(PROBE_VM)
    assert "p2p_peer_access_unavailable" in live
    assert live <= {f["id"] for f in report["findings"]}
    assert result["inputs"][0]["bench_logs"] == {"probe": str(tmp_path / "vm" / "probe.jsonl")}
    # Listed as read, by the probe's reader, and what it gave: not among the inputs not used.
    gave = {i["name"]: (i["kind"], i["as"]) for i in report["material"]["inputs"]}
    assert gave["probe.jsonl"] == ("gpu-p2p-probe-log", ["bench:gpu_p2p_probe"])
    assert "probe.jsonl" not in {e["name"] for e in report["material"]["unmapped"]}
    markdown = (tmp_path / "reports" / "vm.analysis.md").read_text()
    assert "| probe.jsonl | gpu-p2p-probe-log | bench:gpu_p2p_probe |" in markdown
    assert schemas.validator("report").is_valid(report)


def test_a_saved_bare_metal_probe_log_with_working_p2p_gives_no_p2p_finding(tmp_path: Path, capsys) -> None:
    (tmp_path / "metal").mkdir()
    shutil.copy(PROBE_BAREMETAL, tmp_path / "metal" / "p2p-probe.jsonl")
    analyse(capsys, tmp_path, ["metal"])
    report = json.loads((tmp_path / "reports" / "metal.analysis.json").read_text())
    assert not probe_findings_of_the_live_path(PROBE_BAREMETAL)
    ids = {f["id"] for f in report["findings"]}
    assert not {i for i in ids if "p2p" in i}, ids
    assert report["bench"]["probe"]["proof"], "the probe's proof of each pair reached the report"


# ---------------------------------------------------------------------------
# An input named like an audited host


def test_an_input_named_like_an_audited_host_leaves_the_audits_report(tmp_path: Path, capsys) -> None:
    """The audit wrote reports/gpu-node-1.{md,json,-nccl.svg}; material of that host, named after it, is analysed
    into the same reports/: the audit's files keep every byte, the analysis's report is beside them."""
    reports = tmp_path / "reports"
    reports.mkdir()
    audit_files = {reports / name: f"the audit's {name}\n".encode() for name in
                   ("gpu-node-1.md", "gpu-node-1.json", "gpu-node-1-nccl.svg")}
    for path, content in audit_files.items():
        path.write_bytes(content)
    incident(tmp_path / "gpu-node-1")
    result = analyse(capsys, tmp_path, ["gpu-node-1"], model="glm-5")
    for path, content in audit_files.items():
        assert path.read_bytes() == content, path.name
    row = result["inputs"][0]
    assert row["host"] == "gpu-node-1.analysis"
    assert {p.name for p in reports.iterdir()} == {
        "analysis.md", *(p.name for p in audit_files),
        "gpu-node-1.analysis.md", "gpu-node-1.analysis.json", "gpu-node-1.analysis-nccl.svg",
        "gpu-node-1.analysis-p2p.svg"}
    markdown = (reports / "gpu-node-1.analysis.md").read_text()
    assert "(gpu-node-1.analysis-nccl.svg)" in markdown
    assert "| gpu-node-1.analysis | this run |" in (reports / "analysis.md").read_text()


def deep_topology(levels: int) -> str:
    """An NCCL topology dump with a GPU under ``levels`` nested PCI switches (no tool nests so deep)."""
    return ('<system version="1">\n<cpu numaid="0" arch="x86_64">\n'
            + '<pci busid="0000:16:00.0" class="0x060400">\n' * levels
            + '<pci busid="0000:18:00.0" class="0x030200" link_width="16">\n<gpu dev="0" sm="90" rank="0" gdr="1"/>\n'
            + "</pci>\n" * (levels + 1) + "</cpu>\n</system>\n")


def test_one_bad_file_costs_only_itself(tmp_path: Path, capsys) -> None:
    # A 5,000-deep topology dump and deeply nested JSON beside the incident's pastes: the audit stopped on
    # RecursionError and the whole directory was lost ("a defect of the audit").
    directory = incident(tmp_path / "incident")
    (directory / "system.xml").write_text(deep_topology(5000))
    nested = "[" * 100000 + "]" * 100000
    (directory / "results.json").write_text('{"version": "1", "results": ' + nested + "}")
    (directory / "dcgm.json").write_text('{"DCGM GPU Diagnostic": {"test_categories": ' + nested + "}}")
    result = analyse(capsys, tmp_path, ["incident"], model_profile="glm-5")
    assert result["inputs"][0]["error"] is None and not result.get("failed")
    report = json.loads((tmp_path / "reports" / "incident.analysis.json").read_text())
    assert report["summary"]["worst_finding"] == {"id": "p2p_not_supported", "severity": "critical"}
    assert any(row["size_bytes"] == 12288 for row in report["bench"]["nccl"]["results"])
    not_used = {entry["name"]: entry["why"] for entry in report["material"]["unmapped"]}
    assert not_used["system.xml"].startswith("not used: nested too deeply to be read"), not_used
    # JSON nested as deep is no capture and no tool's output; DCGM's reader says what it could not read in it.
    assert not_used["results.json"].startswith("not output of a tool this reader knows")
    assert "| system.xml | not used: nested too deeply" in (tmp_path / "reports" / "incident.analysis.md").read_text()


def test_a_file_past_its_parse_time_is_not_used_and_the_others_are(tmp_path: Path, capsys, monkeypatch) -> None:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.material import nccl_gpus, nccl_topology

    directory = tmp_path / "incident"
    directory.mkdir()
    (directory / "p2p.txt").write_text("root@glm5-vm:~# nvidia-smi topo -p2p r\n" + P2P_NS.read_text())
    (directory / "system.xml").write_text(deep_topology(2))

    def stalls(text):  # a reader that never ends on this dump: the budget stops it
        while True:
            pass

    monkeypatch.setattr(nccl_topology, "parse_nccl_topo_xml", stalls)
    monkeypatch.setattr(nccl_gpus, "parse_nccl_topo_xml", stalls)
    result = analyse(capsys, tmp_path, ["incident"], parse_timeout=1)
    assert result["inputs"][0]["error"] is None
    report = json.loads((tmp_path / "reports" / "incident.analysis.json").read_text())
    assert report["summary"]["worst_finding"] == {"id": "p2p_not_supported", "severity": "critical"}
    why = {entry["name"]: entry["why"] for entry in report["material"]["unmapped"]}["system.xml"]
    assert why.startswith("not used: parsing it took more than 1 s of CPU time, the limit on parse time per file")
    assert "gpu_analyze_parse_timeout=N" in why
