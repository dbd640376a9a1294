"""Material turned into a capture, and the real audit run over it: the incident's pasted outputs, the
bug reports of tests/fixtures/bug-reports (plain, gzip in one member and in many, cut short), each kind of paste
and how it is refused when the capture could not hold it faithfully; the audit's answers where the material
is partial: what it did not hold is not seen, never absent from the host, and the findings that need it
are named as not judged."""

from __future__ import annotations

import gzip
import json
import re

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import CAPTURE_FORMAT
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.virt import UNKNOWN
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import VERDICTS
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import (
    DMESG_KEY,
    HEALTH_KEYS,
    LSPCI_KEY,
    QUERY_KEY,
    Piece,
    PieceError,
    build_capture,
    gunzip,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_readers import replay
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_bug_report import parse_bug_report
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_query import QUERY_GPU_FIELDS
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.paths import FIXTURES
from tests.unit import schemas

SMI = FIXTURES / "nvidia-smi"
P2P_NS = (SMI / "topo-p2p-r_8gpu-vm-NS.txt").read_bytes()
OLD_REPORT = FIXTURES / "bug-reports" / "nvidia-bug-report_418_2xV100-SXM2_baremetal_constructed.log"
NEW_REPORT = FIXTURES / "bug-reports" / "nvidia-bug-report_580_2xRTX-PRO-6000_kvm-guest_constructed.log"

# The incident guest's topo -m, as its nvidia-smi printed it: 8 GPUs behind one host bridge of a q35 guest.
TOPO_M = ("\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
          + "".join(f"GPU{i}\t" + "\t".join(" X " if j == i else "PHB" for j in range(8)) + "\t0-63\t0\t\tN/A\n"
                    for i in range(8))
          + "\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect between "
            "NUMA nodes (e.g., QPI/UPI)\n  NODE = Connection traversing PCIe as well as the interconnect between "
            "PCIe Host Bridges within a NUMA node\n  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge "
            "(typically the CPU)\n  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe "
            "Host Bridge)\n  PIX  = Connection traversing at most a single PCIe bridge\n  NV#  = Connection "
            "traversing a bonded set of # NVLinks\n").encode()
# The audit's own --query-gpu, pasted with its header (--format=csv,nounits): the incident's eight GPUs.
QUERY_CSV = (", ".join(QUERY_GPU_FIELDS) + "\n" + "".join(
    f"{i}, NVIDIA RTX PRO 6000 Blackwell Server Edition, GPU-d2aa5003-82b5-5fa7-adac-e24f2b4ad6{i:02d}, "
    f"00000000:0{i + 1}:00.0, 12.0, 97887, 590.44.01, 5, 5, 16, 16, Enabled, Enabled, Disabled\n"
    for i in range(8))).encode()


def audit(capture):
    return facts.audit(replay(capture), facts.resolve_subsets(["all"]), RuleOptions())


def ids(findings):
    return {finding["id"] for finding in findings}


def incident(*extra):
    return build_capture([Piece("p2p.txt", P2P_NS, command="nvidia-smi topo -p2p r"),
                          ("topo-m.txt", TOPO_M), *extra])


def test_the_incidents_pastes_become_the_commands_the_audit_runs() -> None:
    capture = incident()
    assert capture["format"] == CAPTURE_FORMAT and "nvml" not in capture
    source = replay(json.loads(json.dumps(capture)))
    assert source.run(["nvidia-smi", "topo", "-p2p", "r"]).stdout == P2P_NS.decode()
    assert source.run(["nvidia-smi", "topo", "-m"]).stdout == TOPO_M.decode()
    assert source.run(["nvidia-smi", "topo", "-p2p", "w"]).rc is None  # never another letter
    held = capture["from_material"]
    assert [(i["name"], i["kind"], i["as"]) for i in held["inputs"]] == [
        ("p2p.txt", "nvidia-smi-topo-p2p", ["commands:nvidia-smi topo -p2p r"]),
        ("topo-m.txt", "nvidia-smi-topo-m", ["commands:nvidia-smi topo -m"])]
    # The audit reads them without --query-gpu.
    assert [(s["what"], s["from"]) for s in held["seen"]] == [
        ("P2P read matrix (nvidia-smi topo -p2p r)", ["p2p.txt"]),
        ("topology matrix (nvidia-smi topo -m)", ["topo-m.txt"])]
    assert held["unread"] == []
    assert "NVML (GPU facts, P2P and topology from the driver's library)" in held["not_seen"]
    assert "PCI devices from sysfs (/sys/bus/pci/devices)" in held["not_seen"]
    assert "kernel log (dmesg)" in held["not_seen"]


def test_partial_material_is_never_called_fit() -> None:
    found = audit(incident())
    assert found["summary"]["verdict"] == "unfit"
    assert found["summary"]["p2p"] != "ok"


def test_the_pasted_p2p_matrix_alone_gives_the_critical_p2p_finding() -> None:
    found = audit(incident())
    p2p = next(f for f in found["findings"] if f["id"] == "p2p_not_supported")
    assert p2p["severity"] == "critical" and "56 of 56" in p2p["summary"]
    # The GPUs are those the matrices show: their indexes, nothing else known of them.
    gpus = found["gpus"]
    assert (gpus["source"], gpus["count"]) == ("nvidia-smi", 8) and "nvidia_smi_error" not in gpus
    assert [d["index"] for d in gpus["devices"]] == list(range(8))
    assert all(d["name"] is None and d["pci_bus_id"] is None for d in gpus["devices"])
    assert found["topology"]["gpus"] == [f"GPU{i}" for i in range(8)]
    assert found["summary"]["gpu_count"] == 8 and found["summary"]["p2p"] == "none"
    # Capabilities the material did not hold are not seen, not problems of the host.
    assert found["problems"] == []


def test_a_p2p_matrix_without_topo_m_gives_the_gpus_of_its_size() -> None:
    found = audit(build_capture([Piece("p2p.txt", P2P_NS, command="nvidia-smi topo -p2p r")]))
    assert [d["index"] for d in found["gpus"]["devices"]] == list(range(8))
    assert "p2p_not_supported" in ids(found["findings"])


def test_a_command_missing_from_material_is_not_seen_rather_than_not_installed() -> None:
    source = replay(incident())
    missing = source.run(["nvidia-smi", "-q", "-x"])
    assert (missing.rc, missing.seen) == (None, False) and source.partial
    assert not source.seen("commands", "nvidia-smi -q -x") and source.seen("commands", "nvidia-smi topo -m")
    assert not source.seen("nvml") and not source.seen("dirs", "/sys/bus/pci/devices")
    # A capture of a host recorded what it read: what it lacks is absent, as before.
    whole = {key: value for key, value in incident().items() if key != "from_material"}
    assert replay(whole).run(["nvidia-smi", "-q", "-x"]).seen is True
    assert replay(whole).seen("dirs", "/sys/bus/pci/devices") and not replay(whole).partial
    assert "not_seen" not in audit(whole)


def test_with_the_audits_query_gpu_pasted_too_the_critical_p2p_finding_fires() -> None:
    capture = incident(("query.csv", QUERY_CSV))
    assert [s["what"] for s in capture["from_material"]["seen"]] == [
        "GPU list from nvidia-smi --query-gpu (the audit's fields)", "P2P read matrix (nvidia-smi topo -p2p r)",
        "topology matrix (nvidia-smi topo -m)"]
    found = audit(capture)
    p2p = next(f for f in found["findings"] if f["id"] == "p2p_not_supported")
    assert p2p["severity"] == "critical" and "56 of 56" in p2p["summary"]
    assert found["summary"]["p2p"] == "none" and found["summary"]["gpu_count"] == 8


VM_CONFIG = (FIXTURES / "proxmox" / "q35-4gpu-hidden-short-form_pve7.4.conf").read_bytes()
# What absent material would have said of the host, had it been read as absent hardware.
ABSENCE = [
    ("no_nvidia_gpu", lambda: incident()),
    ("no_nvidia_gpu", lambda: build_capture([("dmesg.txt", b"[    0.000000] Linux version 6.8.0\n")])),
    ("gpu_count_mismatch", lambda: incident(("query.csv", QUERY_CSV))),
    ("proxmox_iommu_off", lambda: build_capture([Piece("131.conf", VM_CONFIG)])),
    ("nvml_unavailable", lambda: incident(("query.csv", QUERY_CSV))),
]


@pytest.mark.parametrize(("finding", "material"), ABSENCE,
                         ids=["no_gpu_matrices", "no_gpu_dmesg", "count", "proxmox_iommu_off", "nvml"])
def test_no_finding_comes_from_what_the_material_did_not_show(finding, material) -> None:
    assert finding not in ids(audit(material())["findings"])


def test_what_the_material_did_not_show_is_named_with_the_findings_not_judged() -> None:
    found = audit(build_capture([Piece("131.conf", VM_CONFIG)]))
    assert found["not_seen"] == ["nvml", "gpus", "p2p", "pci", "iommu", "kernel_log", "virtualization"]
    assert found["iommu"]["enabled"] is None and found["proxmox"]["host"]["iommu_enabled"] is None
    assert found["summary"]["p2p"] == "unknown"  # not "n/a (no GPU usable here)": no GPU list was seen
    assert found["summary"]["verdict"] != "fit"
    judged = next(f for f in found["findings"] if f["id"] == "audit_not_judged")
    assert judged["severity"] == "warning"
    assert judged["evidence"]["not_seen"]["iommu"].startswith("IOMMU groups and devices from sysfs")
    not_judged = judged["evidence"]["not_judged"]
    assert not_judged["proxmox_iommu_off"] == ["iommu"]
    assert not_judged["no_nvidia_gpu"] == ["pci", "gpus"]
    assert not_judged["p2p_not_supported"] == ["p2p"]
    # GPUs the matrices show: whether there is a GPU is judged, P2P too.
    incident_judged = next(f for f in audit(incident())["findings"] if f["id"] == "audit_not_judged")
    assert "no_nvidia_gpu" not in incident_judged["evidence"]["not_judged"]
    assert "p2p_not_supported" not in incident_judged["evidence"]["not_judged"]
    assert incident_judged["evidence"]["not_judged"]["gpu_count_mismatch"] == ["pci"]


def test_a_proxmox_host_whose_iommu_was_seen_off_is_still_judged() -> None:
    capture = build_capture([Piece("131.conf", VM_CONFIG)])
    capture["dirs"].update({"/sys/kernel/iommu_groups": [], "/sys/class/iommu": []})
    # A VM config and IOMMU directories alone are no node: whose IOMMU they show, nothing says.
    assert "proxmox_iommu_off" not in ids(audit(capture)["findings"])
    capture["commands"]["pveversion"] = {"rc": 0, "stdout": "pve-manager/8.3.2/3e76eec21c4a14a7 (running kernel: "
                                                            "6.8.12-5-pve)\n", "stderr": ""}
    found = audit(capture)
    assert found["iommu"]["enabled"] is False and "proxmox_iommu_off" in ids(found["findings"])
    assert "proxmox_iommu_off" not in next(f for f in found["findings"] if f["id"] == "audit_not_judged")[
        "evidence"]["not_judged"]


def test_virtualization_is_not_guessed_from_no_evidence() -> None:
    found = audit(incident())
    assert found["virtualization"]["type"] is None and found["summary"]["virtualization"] == UNKNOWN
    assert found["virtualization"]["evidence"] == [] and "virtualization" in found["not_seen"]
    # One signal is enough to judge: a bug report's /proc/cpuinfo without the hypervisor flag.
    old = audit(build_capture([("nvidia-bug-report.log", OLD_REPORT.read_bytes())]))
    assert old["virtualization"]["type"] == "bare_metal" and "virtualization" not in old["not_seen"]


@pytest.mark.parametrize("material", [
    lambda: incident(), lambda: incident(("query.csv", QUERY_CSV)), lambda: build_capture([("131.conf", VM_CONFIG)]),
    lambda: build_capture([("r.log", OLD_REPORT.read_bytes())]),
    lambda: build_capture([("r.log", NEW_REPORT.read_bytes())]),
], ids=["matrices", "matrices-query", "vm-config", "418", "5xx"])
def test_the_facts_of_partial_material_are_declared(material) -> None:
    assert list(schemas.validator("facts").iter_errors(audit(material()))) == []


@pytest.mark.parametrize(("inputs", "letter"), [
    ([("p2p.txt", b"$ nvidia-smi topo -p2p w\n" + P2P_NS)], "w"),
    ([("nvidia-smi topo -p2p n", P2P_NS)], "n"),
    ([Piece("x", P2P_NS, command="nvidia-smi  topo -p2p a")], "a"),
])
def test_the_capability_of_a_p2p_matrix_comes_from_its_command(inputs, letter) -> None:
    capture = build_capture(inputs)
    assert list(capture["commands"]) == [f"nvidia-smi topo -p2p {letter}"]
    assert capture["commands"][f"nvidia-smi topo -p2p {letter}"]["stdout"] == P2P_NS.decode()


@pytest.mark.parametrize(("name", "letters"), [
    ("p2p_read.txt", "r"), ("p2p-r.txt", "r"), ("topo_p2p_w.log", "w"), ("p2p_write.txt", "w"), ("nvlink.txt", "n"),
    ("gpu-atomics.out", "a"), ("topo-p2p-p.txt", "p"), ("P2P_Read_Write.txt", "rw"), ("topo_p2p_rw.txt", "rw"),
])
def test_without_a_command_line_the_file_name_gives_the_capability(name, letters) -> None:
    capture = build_capture([(name, P2P_NS)])
    command = "nvidia-smi topo -p2p " + letters
    assert list(capture["commands"]) == [command]
    assert capture["from_material"]["inputs"][0]["capability"] == {"letters": letters, "from": "file name"}


def test_the_command_line_in_the_paste_wins_over_the_file_name() -> None:
    capture = build_capture([("p2p_read.txt", b"$ nvidia-smi topo -p2p n\n" + P2P_NS)])
    assert list(capture["commands"]) == ["nvidia-smi topo -p2p n"]
    assert capture["from_material"]["inputs"][0]["capability"] == {"letters": "n", "from": "command line"}


@pytest.mark.parametrize(("command", "key"), [
    ("nvidia-smi topo -p2p rw", "nvidia-smi topo -p2p rw"), ("nvidia-smi topo -p2p wr", "nvidia-smi topo -p2p rw"),
    ("nvidia-smi topo --p2pstatus rwnap", "nvidia-smi topo -p2p rwnap"),
])
def test_a_combined_capability_is_kept_under_its_own_command(command, key) -> None:
    capture = build_capture([("p2p.txt", f"root@host:~# {command}\n".encode() + P2P_NS)])
    assert list(capture["commands"]) == [key]
    assert capture["from_material"]["unmapped"] == []


def test_a_matrix_whose_capability_nothing_states_is_kept_as_such() -> None:
    capture = build_capture([("p2p.txt", P2P_NS)])
    assert list(capture["commands"]) == ["nvidia-smi topo -p2p"]
    assert capture["from_material"]["inputs"][0]["capability"] == {"letters": None, "from": "not stated"}
    seen = {s["what"] for s in capture["from_material"]["seen"]}
    assert "P2P matrix of a capability not stated (nvidia-smi topo -p2p)" in seen


def test_a_capability_named_by_a_heading_is_recorded_as_told_by_the_heading() -> None:
    # A Markdown heading or HTML summary is not the command line nvidia-smi ran: the report says which told it.
    paste = (b"## nvidia-smi -L\nGPU 0: NVIDIA A100 (UUID: GPU-1)\nGPU 1: NVIDIA A100 (UUID: GPU-2)\n"
             b"<summary>GPU peer-access matrix (topo -p2p r)</summary>\n" + P2P_NS)
    capture = build_capture([("report.md", paste)])
    matrices = [i for i in capture["from_material"]["inputs"] if i.get("capability")]
    assert [i["capability"] for i in matrices] == [{"letters": "r", "from": "heading"}]
    assert "nvidia-smi topo -p2p r" in capture["commands"]


def test_a_shell_line_in_a_paste_of_several_outputs_is_still_a_command_line() -> None:
    paste = b"$ nvidia-smi -L\nGPU 0: NVIDIA A100 (UUID: GPU-1)\n$ nvidia-smi topo -p2p r\n" + P2P_NS
    capture = build_capture([("report.md", paste)])
    matrices = [i for i in capture["from_material"]["inputs"] if i.get("capability")]
    assert [i["capability"] for i in matrices] == [{"letters": "r", "from": "command line"}]


def test_a_command_line_of_no_capability_nvidia_smi_takes_is_refused_with_what_to_do() -> None:
    capture = build_capture([("p2p_read.txt", b"$ nvidia-smi topo -p2p x\n" + P2P_NS)])
    assert capture["commands"] == {}
    assert "none of r, w, n, a, p" in capture["from_material"]["unmapped"][0]["why"]


def test_crlf_and_fences_of_a_paste_are_undone() -> None:
    pasted = b"```\r\n" + P2P_NS.replace(b"\n", b"\r\n") + b"```\r\n"
    capture = build_capture([Piece("chat", pasted, command="nvidia-smi topo -p2p r")])
    assert capture["commands"]["nvidia-smi topo -p2p r"]["stdout"] == P2P_NS.decode()


@pytest.mark.parametrize("path", [OLD_REPORT, NEW_REPORT], ids=["418", "5xx"])
def test_a_bug_report_gives_files_dmesg_and_nvidia_smi_q(path) -> None:
    text = path.read_bytes()
    report = parse_bug_report(text)
    plain = build_capture([("nvidia-bug-report.log", text)])
    assert plain["commands"][DMESG_KEY]["stdout"] == report.get("dmesg").text
    assert plain["commands"]["nvidia-smi -q"]["stdout"] == report.get("nvidia-smi --query").text
    assert plain["files"]["/proc/cmdline"] == report.get("/proc/cmdline").text
    assert "/etc/issue" not in plain["files"] and "/var/log/nvidia-installer.log" not in plain["files"]
    held = plain["from_material"]
    assert [s["what"] for s in held["seen"]] == [
        "GPU details and health from nvidia-smi -q (BAR1, virtualization mode, row remapping, fabric)",
        "kernel log (dmesg)", "kernel command line (/proc/cmdline)", "CPU flags (/proc/cpuinfo)",
        "memory and huge pages (/proc/meminfo)"]
    assert "commands:nvidia-smi -q" not in held["kept"] and "files:/proc/driver/nvidia/version" in held["kept"]
    assert held["seen"][1]["from"] == [f"nvidia-bug-report.log: dmesg (line {report.get('dmesg').line})"]
    # gzip as nvidia-bug-report.sh writes it (a member per section) and as gzip(1) would: the same capture.
    members = b"".join(gzip.compress(part.encode()) for part in re.split(r"(?=\n_{44}\n)", text.decode()))
    assert gunzip(members)[0] == text
    assert gunzip(members)[1] is True
    for data in (gzip.compress(text), members):
        packed = build_capture([("nvidia-bug-report.log.gz", data)])
        assert packed["from_material"]["inputs"][0]["gzip"] is True
        assert packed["commands"][DMESG_KEY] == plain["commands"][DMESG_KEY]
        assert packed["files"]["/proc/cmdline"] == plain["files"]["/proc/cmdline"]


def test_what_the_audit_says_of_the_418_bug_report() -> None:
    found = audit(build_capture([("nvidia-bug-report.log.gz", gzip.compress(OLD_REPORT.read_bytes()))]))
    xid = next(f for f in found["findings"] if f["id"] == "xid_errors")
    assert "Xid 63" in xid["summary"]
    assert found["health"]["kernel_log"]["xid_events"][0]["pci_bus_id"] == "0000:3b:00.0"
    assert found["iommu"]["cmdline"]["intel_iommu"] == "on"
    # Its nvidia-smi -q: the GPUs, their BAR1 and health, as -q -x would give them.
    gpus = found["gpus"]
    assert (gpus["source"], gpus["count"], gpus["driver_version"], gpus["cuda_driver_version"]) == \
        ("nvidia-smi", 2, "418.87.01", "10.1")
    assert [(d["index"], d["pci_bus_id"], d["name"], d["bar1_total_mib"], d["brand"]) for d in gpus["devices"]] == [
        (0, "0000:18:00.0", "Tesla V100-SXM2-16GB", 16384, "tesla"),
        (1, "0000:3b:00.0", "Tesla V100-SXM2-16GB", 16384, "tesla")]
    assert found["health"]["gpus_source"] == "nvidia-smi -q"
    assert {"ecc_uncorrectable_errors", "retired_pages_pending"} <= ids(found["findings"])
    assert found["summary"]["verdict"] == "unfit" and found["summary"]["p2p"] == "unknown"


def test_what_the_audit_says_of_the_5xx_bug_report_of_a_guest() -> None:
    found = audit(build_capture([("nvidia-bug-report.log", NEW_REPORT.read_bytes())]))
    assert found["summary"]["virtualization"] == "KVM virtual machine"
    assert found["virtualization"]["type"] == "vm"
    assert [(d["virtualization_mode"], d["bar1_total_mib"]) for d in found["gpus"]["devices"]] == \
        [("passthrough", 131072)] * 2
    # Healthy GPUs, and no P2P matrix in a bug report: not judged, so never called fit.
    assert found["summary"]["verdict"] == "not judged" and found["summary"]["p2p"] == "unknown"
    judged = next(f for f in found["findings"] if f["id"] == "audit_not_judged")
    assert judged["evidence"]["not_judged"]["p2p_not_supported"] == ["p2p"]


def test_nvidia_smi_q_text_is_read_only_where_q_x_is_missing() -> None:
    xml = (SMI / "q_535_H100-PCIe_power-brake.xml").read_bytes()
    report_q = build_capture([("r.log", OLD_REPORT.read_bytes())])["commands"]["nvidia-smi -q"]["stdout"]
    capture = build_capture([Piece("q.xml", xml), Piece("q.txt", report_q.encode(), "nvidia-smi -q")])
    assert {u["what"]: u["why"] for u in capture["from_material"]["unread"]}[
        "GPU details and health from nvidia-smi -q (BAR1, virtualization mode, row remapping, fabric)"].startswith(
        "the audit reads nvidia-smi -q only where nvidia-smi -q -x is missing")
    found = audit(capture)
    assert found["health"]["gpus_source"] == "nvidia-smi -q -x"
    assert "Tesla V100-SXM2-16GB" not in found["summary"]["gpu_models"]


def test_matrices_and_a_q_that_disagree_keep_q_and_say_so() -> None:
    report_q = build_capture([("r.log", OLD_REPORT.read_bytes())])["commands"]["nvidia-smi -q"]["stdout"]
    found = audit(incident(Piece("q.txt", report_q.encode(), "nvidia-smi -q")))
    assert found["gpus"]["count"] == 2
    assert any("the matrices show 8 GPUs, nvidia-smi -q shows 2" in p["error"] for p in found["problems"])


def test_a_bug_report_cut_short_gives_what_it_holds() -> None:
    data = gzip.compress(NEW_REPORT.read_bytes())
    capture = build_capture([("nvidia-bug-report.log.gz", data[:len(data) * 2 // 3])])
    entry = capture["from_material"]["inputs"][0]
    assert entry["kind"] == "nvidia-bug-report" and entry["truncated"] is True
    assert DMESG_KEY in capture["commands"] and "/proc/cmdline" in capture["files"]


def test_a_damaged_gzip_stream_gives_what_came_before_the_damage() -> None:
    data = bytearray(gzip.compress(NEW_REPORT.read_bytes()))
    damage = len(data) * 3 // 4
    data[damage:damage + 40] = bytes(byte ^ 0xFF for byte in data[damage:damage + 40])
    text, whole = gunzip(bytes(data))
    assert not whole and 0 < len(text) < len(NEW_REPORT.read_bytes())
    capture = build_capture([("nvidia-bug-report.log.gz", bytes(data))])
    assert capture["from_material"]["inputs"][0]["truncated"] is True
    assert capture["commands"][DMESG_KEY]["stdout"] == parse_bug_report(NEW_REPORT.read_bytes()).get("dmesg").text


def test_absent_and_unreadable_files_of_a_bug_report() -> None:
    sep = "_" * 44
    text = (f"{sep}\n\nStart of NVIDIA bug report log file.\n\n{sep}\n\n*** /proc/driver/nvidia/version does not "
            f"exist\n\n{sep}\n\n*** /proc/driver/nvidia/params is not readable\n\n{sep}\n\n*** /var/log/Xorg.0.log "
            f"does not exist\n\n{sep}\n\ndmesg:\n\n{sep}\n\nEnd of NVIDIA bug report log file.\n")
    capture = build_capture([("r.log", text.encode())])
    assert capture["files"] == {"/proc/driver/nvidia/version": None,
                                "/proc/driver/nvidia/params": {"error": "not readable to nvidia-bug-report.sh"}}
    assert capture["commands"] == {}
    assert any("dmesg section is empty" in u["why"] for u in capture["from_material"]["unmapped"])


def test_query_gpu_output_is_written_only_for_the_audits_fields() -> None:
    headerless = b"".join(QUERY_CSV.splitlines(keepends=True)[1:])
    health_header = (b"index, pci.bus_id, ecc.mode.current, ecc.mode.pending, ecc.errors.uncorrected.volatile.total, "
                     b"ecc.errors.uncorrected.aggregate.total, ecc.errors.corrected.volatile.total, "
                     b"ecc.errors.corrected.aggregate.total, retired_pages.pending, retired_pages.sbe, "
                     b"retired_pages.dbe, clocks_event_reasons.active\n0, 00000000:01:00.0, Enabled, Enabled, 0, 0, 0, "
                     b"0, No, 0, 0, 0x0000000000000000\n")
    capture = build_capture([
        ("other.csv", (SMI / "query-gpu_570_compute_cap,compute_mode,driver_version,name,index.csv").read_bytes()),
        ("headerless.csv", headerless),
        Piece("declared.csv", headerless, command=QUERY_KEY),
        ("health.csv", health_header),
    ])
    assert sorted(capture["commands"]) == sorted([QUERY_KEY, HEALTH_KEYS[0]])
    assert capture["commands"][QUERY_KEY]["stdout"] == headerless.decode()
    assert [u["name"] for u in capture["from_material"]["unmapped"]] == ["other.csv", "headerless.csv"]


def test_lspci_is_written_only_with_pci_domains() -> None:
    lspci = FIXTURES / "pci" / "lspci"
    capture = build_capture([("short.txt", (lspci / "q35-guest.lspci-3.9.0.vvv.root.txt").read_bytes()),
                             ("long.txt", (lspci / "q35-guest.lspci-3.9.0.vvv-nn-D.root.txt").read_bytes())])
    assert list(capture["commands"]) == [LSPCI_KEY]
    assert [u["name"] for u in capture["from_material"]["unmapped"]] == ["short.txt"]
    # Without sysfs it is read for what it shows of a hypervisor (audit/virt.py), not left unread.
    assert LSPCI_KEY not in {u["what"].split(" (")[0] for u in capture["from_material"]["unread"]}
    assert any(s["what"].startswith(LSPCI_KEY) and s["from"] == ["long.txt"] for s in capture["from_material"]["seen"])


def test_a_vm_config_is_written_under_its_vm_id() -> None:
    conf = (FIXTURES / "proxmox" / "q35-8gpu-clique-ok_pve8.3.conf").read_bytes()
    capture = build_capture([("130.conf", conf), ("paste", b"root@pve:~# qm config 131\n" + conf),
                             ("no-id.txt", conf), Piece("cur", conf, command="qm config 132 --current")])
    assert capture["dirs"] == {"/etc/pve/qemu-server": ["130.conf", "131.conf"]}
    assert capture["files"]["/etc/pve/qemu-server/131.conf"] == conf.decode()
    why = {u["name"]: u["why"] for u in capture["from_material"]["unmapped"]}
    assert list(why) == ["no-id.txt", "cur"]
    assert "nothing says its VM id" in why["no-id.txt"] and "leaves out the pending changes" in why["cur"]
    seen = capture["from_material"]["seen"]
    assert seen == [{"what": "Proxmox VM configs (/etc/pve/qemu-server)", "from": ["130.conf", "paste"]}]
    assert sorted(vm["vmid"] for vm in audit(capture)["proxmox"]["vms"]) == [130, 131]


def test_mixing_a_vm_config_with_nvidia_smi_output_is_flagged() -> None:
    conf = (FIXTURES / "proxmox" / "q35-8gpu-clique-ok_pve8.3.conf").read_bytes()
    capture = incident(("120.conf", conf))
    warned = capture["from_material"]["warnings"]
    assert warned and "judged as the guest's and the config as that of the VM it runs in" in warned[0]


def test_other_kinds_and_unknown_text_are_not_written_and_say_why() -> None:
    capture = build_capture([
        ("nccl.log", (FIXTURES / "nccl" / ("transfer-test-in-all_reduce_perf-layout_incident-reconstructed_"
                                            "8xRTXPRO6000-vm-no-p2p.txt")).read_bytes()),
        ("bw.txt", (FIXTURES / "p2p" / "p2pBandwidthLatencyTest_2xRTX4090-no-p2p.txt").read_bytes()),
        ("note.txt", b"the GPUs are slow, please help\n"),
        ("broken.gz", b"\x1f\x8b\x08\x00garbage"),
        ("dmesg.txt", b"[    0.000000] Linux version 6.8.0\n[    1.000000] NVRM: Xid (PCI:0000:01:00): 79, pid=1\n"),
        ("cmdline", b"BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet\n"),
        ("list.txt", (SMI / "list-gpus_570_TITAN-V_RTX-5880-Ada.txt").read_bytes()),
        ("q.xml", (SMI / "q_535_H100-PCIe_power-brake.xml").read_bytes()),
    ])
    why = {u["name"]: u["why"] for u in capture["from_material"]["unmapped"]}
    assert "gpu_bench_nccl_log" in why["nccl.log"] and "gpu_bench_probe_log" in why["bw.txt"]
    assert why["note.txt"].startswith("not output of a tool this reader knows")
    assert "does not decompress" in why["broken.gz"]
    assert set(capture["commands"]) == {DMESG_KEY, "nvidia-smi -L", "nvidia-smi -q -x"}
    assert capture["files"] == {"/proc/cmdline": "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet\n"}
    assert [u["what"] for u in capture["from_material"]["unread"]] == ["GPU count from nvidia-smi -L"]
    assert "GPU details and health from nvidia-smi -q -x (BAR1, virtualization mode, row remapping, fabric)" in [
        s["what"] for s in capture["from_material"]["seen"]]
    assert capture["from_material"]["kept"] == []
    assert "gpu_lost" in ids(audit(capture)["findings"])  # the pasted dmesg's Xid 79


def test_two_inputs_that_disagree_keep_the_first() -> None:
    other = P2P_NS.replace(b"NS", b"OK")
    capture = build_capture([Piece("a", P2P_NS, "nvidia-smi topo -p2p r"),
                             Piece("b", other, "nvidia-smi topo -p2p r"),
                             Piece("c", P2P_NS, "nvidia-smi topo -p2p r")])
    assert capture["commands"]["nvidia-smi topo -p2p r"]["stdout"] == P2P_NS.decode()
    assert capture["from_material"]["unmapped"] == [{"name": "b", "why": "a already gave nvidia-smi topo -p2p r, with "
                                                                  "other content; give one host's material per input"}]
    assert capture["from_material"]["inputs"][2]["as"] == ["commands:nvidia-smi topo -p2p r"]


@pytest.mark.parametrize(("inputs", "message"), [
    ("p2p.txt", "expected a list of inputs"),
    (b"raw", "expected a list of inputs"),
    (42, "expected a list of inputs"),
    ([("only a name",)], "input 1: expected (name, bytes) or a Piece"),
    ([("a", b"x"), (3, b"x")], "input 2: expected a text name and bytes"),
    ([("a", 42)], "input 1: expected a text name and bytes"),
    ([Piece("a", b"x", command=7)], "expected the command as text"),
])
def test_what_is_not_named_bytes_is_refused_with_what_to_give(inputs, message) -> None:
    with pytest.raises(PieceError, match=re.escape(message)):
        build_capture(inputs)


FIXTURE_FILES = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.stat().st_size < 40_000)


MATERIAL = st.one_of(st.binary(max_size=300), st.sampled_from(FIXTURE_FILES).map(lambda p: p.read_bytes()),
                     st.sampled_from(FIXTURE_FILES).map(lambda p: gzip.compress(p.read_bytes())[:200]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.text(max_size=30), MATERIAL), max_size=4))
def test_any_material_gives_a_capture_the_audit_replays(inputs) -> None:
    capture = build_capture(inputs)
    json.dumps(capture)
    # Each input is listed, whole or as the pieces of a paste of several outputs (material/capture.py).
    listed = [entry["name"] for entry in capture["from_material"]["inputs"]]
    assert len(listed) >= len(inputs)
    assert all(any(seen == name or seen.startswith(f"{name}, line ") for seen in listed) for name, _ in inputs)
    found = audit(capture)
    assert found["summary"]["verdict"] in VERDICTS
    if "audit_not_judged" in ids(found["findings"]):
        assert found["summary"]["verdict"] in ("not judged", "unfit")


def test_material_without_a_critical_finding_but_lacking_evidence_is_not_judged_never_fit() -> None:
    # The guest's bug report holds no topo -p2p: P2P could not be judged, so "fit, with warnings" would be a guess.
    found = audit(build_capture([(NEW_REPORT.name, NEW_REPORT.read_bytes())]))
    assert "p2p" in found["not_seen"]
    assert not [f for f in found["findings"] if f["severity"] == "critical"]
    assert found["summary"]["verdict"] == "not judged"
    assert schemas.validator("facts").is_valid(found)


def test_a_file_whose_reader_fails_midway_is_undone_and_listed_and_the_others_are_kept(monkeypatch) -> None:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.material import capture as capture_module

    conf = (FIXTURES / "proxmox" / "q35-8gpu-clique-ok_pve8.3.conf").read_bytes()
    real = capture_module._take_vm_config

    def fails_after_filing(built, name, command, output, entry):
        real(built, name, command, output, entry)
        if name == "131.conf":
            raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setitem(capture_module._HANDLERS, "proxmox-vm-config", fails_after_filing)
    capture = build_capture([("130.conf", conf), ("131.conf", conf), ("p2p", P2P_NS)])
    # What 131.conf filed before it failed is gone: its file, its line in the listing, its sources.
    assert capture["dirs"] == {"/etc/pve/qemu-server": ["130.conf"]}
    assert list(capture["files"]) == ["/etc/pve/qemu-server/130.conf"]
    inputs = {entry["name"]: entry for entry in capture["from_material"]["inputs"]}
    assert inputs["131.conf"]["kind"] is None and inputs["131.conf"]["as"] == []
    assert inputs["130.conf"]["as"] and inputs["p2p"]["as"]
    why = {u["name"]: u["why"] for u in capture["from_material"]["unmapped"]}
    assert why == {"131.conf": "not used: nested too deeply to be read (thousands of levels, as no tool writes); give "
                               "the tool's output as it printed it"}
    assert capture["from_material"]["seen"][-1]["from"] == ["130.conf"]
