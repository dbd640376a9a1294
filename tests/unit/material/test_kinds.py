"""Telling material apart by its content: every fixture of tests/fixtures is named as its kind (or
as none, for the files that are no tool output a support engineer pastes), the same with CRLF, as bytes and
with chatter around it; the more specific kind wins where a text carries two; nothing raises on any input."""

from __future__ import annotations

import fnmatch
import gzip

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.kinds import KINDS, detect_kind, pasted_command
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_bug_report import parse_bug_report
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cpu_limit import within
from tests.paths import FIXTURES

# Each fixture's kind, by its path under tests/fixtures (the first pattern that matches). None: no output of a
# tool a support engineer pastes (provenance notes, generators, config-space hex dumps and sysfs files the audit
# reads itself, a Proxmox PCI mapping, SGLang's --help).
FIXTURE_KINDS = [
    ("*/SOURCES.md", None),
    ("model_configs/*.json", None),  # a model's config.json: no tool output
    ("bug-reports/*.log", "nvidia-bug-report"),
    # Whole, elided ({"..."}) or cut: the root key and test_categories tell it (parsers/dcgm_diag.py).
    ("dcgm/*", "dcgm-diag-json"),
    # dmesg --human's "kern  :err   : <ISO time>" prefix on an SXid line alone: material/kinds.py does not
    # tell it (no NVRM line, no [uptime] stamp), so as material it is not read (the live audit reads it).
    ("kernel-log/dmesg-human_nvswitch-sxid-*", None),
    ("kernel-log/dmesg*", "dmesg"),
    ("kernel-log/journal-k*", "journal-kernel"),
    # Pastes of several outputs: named by their most specific one (material/capture.py cuts them apart).
    ("pastes/club-3090-1229_*", "nvidia-smi-topo-m"),
    ("pastes/club-3090-1130_*", "nvidia-smi-topo-p2p"),
    ("nccl/*.json", "nccl-tests-json"),
    ("nccl/nccl-debug_*", "nccl-debug"),
    ("nccl/nccl-topo-dump_*", "nccl-topo-xml"),
    ("nccl/*_perf_*", "nccl-tests"),
    # Transfer-test figures laid out as all_reduce_perf prints: by content an nccl-tests log, which is the trap.
    ("nccl/transfer-test-in-all_reduce_perf-layout_*", "nccl-tests"),
    ("nvidia-smi/list-gpus_*", "nvidia-smi-list"),
    ("nvidia-smi/q_*.xml", "nvidia-smi-q-xml"),
    ("nvidia-smi/q_*.txt", "nvidia-smi-q"),
    ("nvidia-smi/query-gpu_*", "nvidia-smi-query-gpu"),
    ("nvidia-smi/topo-m_*", "nvidia-smi-topo-m"),
    ("nvidia-smi/topo-p2p*", "nvidia-smi-topo-p2p"),
    ("p2p/nvbandwidth-j_*.json", "nvbandwidth-json"),
    ("p2p/nvbandwidth_*", "nvbandwidth"),
    ("p2p/p2pBandwidthLatencyTest_*", "p2p-bandwidth-latency-test"),
    ("p2p/simpleP2P_*", "simple-p2p"),
    ("p2p/p2p-probe_*.jsonl", "gpu-p2p-probe-log"),
    ("p2p/*.py", None),
    ("pci/lspci/*", "lspci-vvv"),
    ("pci/config/*.hex", None),
    ("pci/sysfs/*", None),
    ("proxmox/*.conf", "proxmox-vm-config"),
    ("proxmox/mapping-pci.cfg", None),
    ("pveversion/pveversion*", "pveversion"),
    ("sglang/decode-log_*", "sglang-decode-log"),
    ("sglang/*", None),
    # The fabric manager's refusal of a driver: read by the live audit from its journal, not yet a material kind.
    ("fabric-manager/*", "fabric-manager-log"),
    # A sysfs value, dpkg and APT settings: read by the live audit (audit/host_settings.py, audit/packages.py), no
    # material kind yet.
    ("host-settings/*", None),
    ("packages/*", None),
    ("proc-cmdline/*.txt", "proc-cmdline"),
    # A ticket's outputs, one file each (tests/fixtures/tickets/SOURCES.md).
    ("tickets/*/topo-m.txt", "nvidia-smi-topo-m"),
    ("tickets/*/topo-p2p-r.txt", "nvidia-smi-topo-p2p"),
    ("tickets/*/all_reduce_perf.txt", "nccl-tests"),
    ("tickets/*/nccl-debug.log", "nccl-debug"),
    ("tickets/*/*.conf", "proxmox-vm-config"),
    ("tickets/*/sglang-server.log", "sglang-decode-log"),
]

FIXTURE_FILES = sorted(path for path in FIXTURES.rglob("*") if path.is_file())
IDS = [str(path.relative_to(FIXTURES)) for path in FIXTURE_FILES]


def kind_of_fixture(relative: str) -> str | None:
    for pattern, kind in FIXTURE_KINDS:
        if fnmatch.fnmatch(relative, pattern):
            return kind
    pytest.fail(f"tests/fixtures/{relative} has no kind in FIXTURE_KINDS of {__name__}: add the kind it is "
                "(or None for a file that is no tool output)", pytrace=False)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=IDS)
def test_every_fixture_is_detected_as_its_kind(path) -> None:
    expected = kind_of_fixture(str(path.relative_to(FIXTURES)))
    data = path.read_bytes()
    assert detect_kind(data) == expected
    text = data.decode("utf-8", errors="replace")
    assert detect_kind(text) == expected
    # Through Windows and e-mail.
    assert detect_kind(text.replace("\r\n", "\n").replace("\n", "\r\n")) == expected


def test_the_kinds_are_the_ones_listed() -> None:
    named = {kind for _, kind in FIXTURE_KINDS if kind} | {"dmesg", "proc-cmdline"}
    assert named == set(KINDS)


# The sections of the bug reports are pastes of their own: dmesg and /proc/cmdline have no other fixture.
BUG_REPORTS = sorted((FIXTURES / "bug-reports").glob("*.log"))
SECTION_KINDS = {"dmesg": "dmesg", "/proc/cmdline": "proc-cmdline", "nvidia-smi --query": "nvidia-smi-q",
                 "nvidia-smi --query --unit": "nvidia-smi-q", 'lspci -d "10de:*" -v -xxx': "lspci-vvv",
                 "/proc/cpuinfo": None, "/proc/meminfo": None, "dmidecode": None, "lspci -nn": None,
                 "/proc/driver/nvidia/version": None}


@pytest.mark.parametrize("path", BUG_REPORTS, ids=[p.name for p in BUG_REPORTS])
def test_sections_of_a_bug_report_are_detected_as_their_own_kind(path) -> None:
    report = parse_bug_report(path.read_text(encoding="utf-8"))
    checked = 0
    for name, kind in SECTION_KINDS.items():
        section = report.get(name)
        if section is not None:
            assert detect_kind(section.text) == kind, name
            checked += 1
    assert checked >= 6


NOISE_LINE = st.one_of(st.just(""), st.from_regex(r"[a-z]{1,10}(?: [a-z]{1,10}){0,6}", fullmatch=True))
# The kinds whose fixtures keep their kind with chatter around them: every kind but None (chatter is no
# tool output either, which stays None) and proc-cmdline (one line of parameters, by definition).
NOISY = [(path, kind_of_fixture(i)) for path, i in zip(FIXTURE_FILES, IDS, strict=True)
         if kind_of_fixture(i) not in (None, "proc-cmdline")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(NOISY), st.lists(NOISE_LINE, max_size=4), st.lists(NOISE_LINE, max_size=4))
def test_chatter_around_a_paste_keeps_its_kind(fixture, before, after) -> None:
    path, kind = fixture
    text = "\n".join([*before, path.read_text(encoding="utf-8", errors="replace"), *after])
    assert detect_kind(text) == kind


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=600), st.binary(max_size=600)))
def test_any_text_or_bytes_gives_a_kind_or_none(data) -> None:
    assert detect_kind(data) in (None, *KINDS)


ALL_LINES = sorted({line for path in FIXTURE_FILES for line in path.read_text("utf-8", "replace").splitlines()})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(ALL_LINES), max_size=40), st.sampled_from(["\n", "\r\n", "\r"]))
def test_lines_of_every_tool_mixed_give_a_kind_or_none(lines, newline) -> None:
    assert detect_kind(newline.join(lines)) in (None, *KINDS)
    assert pasted_command(newline.join(lines)) is None or isinstance(pasted_command(newline.join(lines)), str)


@pytest.mark.parametrize("data", [None, 42, 4.2, ["GPU0"], {"a": 1}, b"", "", "   \n\t\n"])
def test_what_is_no_text_or_empty_is_none(data) -> None:
    assert detect_kind(data) is None


def test_gzip_is_left_to_the_caller() -> None:
    report = BUG_REPORTS[0].read_bytes()
    assert detect_kind(report) == "nvidia-bug-report"
    assert detect_kind(gzip.compress(report)) is None


def test_the_bug_report_wins_over_the_outputs_it_holds() -> None:
    text = BUG_REPORTS[0].read_text(encoding="utf-8")
    assert "NVSMI LOG" in text and "dmesg:" in text
    assert detect_kind(text) == "nvidia-bug-report"
    # A piece of one without its prologue still shows the separator and a file title.
    middle = text[text.index("____________________________________________\n\n*** /proc/cmdline"):]
    assert detect_kind(middle) == "nvidia-bug-report"


def test_an_nccl_tests_run_with_debug_lines_is_nccl_tests_and_a_debug_log_with_its_header_only_is_not() -> None:
    interleaved = FIXTURES / "nccl" / "all_reduce_perf_2.13-2.14_nccl2.20.5_debug-info-interleaved_2xA100.txt"
    assert "NCCL INFO" in interleaved.read_text() and detect_kind(interleaved.read_bytes()) == "nccl-tests"
    header_only = FIXTURES / "nccl" / "nccl-debug_2.8.3_p2p-disabled-by-env_2xT4.log"
    assert "# nThread" in header_only.read_text() and detect_kind(header_only.read_bytes()) == "nccl-debug"
    assert detect_kind("# nThread 1 nGpus 2 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5\n") == "nccl-tests"


CUT_HOST = FIXTURES / "nccl" / "nccl-debug_2.7.8_rank-only-prefix_constructed-from-excerpt.log"


@pytest.mark.parametrize("prefix", [
    "", "2021-03-04 10:11:12,345 - INFO - ", "[1,0]<stdout>:", "[1,mpirank:0,algo-1]<stdout>:", "0: ",
    "worker-0: ", "[rank0]: ", "  | 2024-05-01T10:00:00Z | ",
])
def test_nccl_records_without_host_pid_tid_are_a_debug_log_behind_any_prefix(prefix) -> None:
    """``[0] NCCL INFO ...`` (the host cut), its version line and its connection lines, each alone and behind
    the prefixes launchers and log collectors add, are an NCCL_DEBUG=INFO log."""
    lines = CUT_HOST.read_text().splitlines()
    for line in ("[0] NCCL INFO Using network Socket", "NCCL version 2.7.8+cuda10.1",
                 "Channel 00 : 0[18000] -> 1[1a000] via P2P/IPC", "Ring 04 : 6[6] -> 5[5] via P2P/IPC"):
        assert detect_kind(prefix + line + "\n") == "nccl-debug", prefix + line
    assert detect_kind("\n".join(prefix + line for line in lines)) == "nccl-debug"


@pytest.mark.parametrize("text", [
    # PyTorch's error quotes the version at the end of its message: no log of NCCL's own.
    "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8\n",
    # Prose that quotes a record between backticks.
    "NCCL says so (`lab:14075:14865 [3] NCCL INFO Could not enable P2P ...`).\n",
    "The format is `Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read` from 2.14.\n",
])
def test_text_that_only_quotes_nccl_is_no_debug_log(text) -> None:
    assert detect_kind(text) is None


@pytest.mark.parametrize(("text", "kind"), [
    # One GPU: topo -m has its affinity columns, topo -p2p only X.
    ("\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-15\t0\t\tN/A\n", "nvidia-smi-topo-m"),
    (" \tGPU0\t\n GPU0\tX\t\n", "nvidia-smi-topo-p2p"),
    # A matrix whose header names only GPUs but whose cells are link labels.
    ("\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU1\tPHB\t X \n", "nvidia-smi-topo-m"),
    # Rows without a header above them are no matrix.
    ("GPU0\tX\tNS\nGPU1\tNS\tX\n", None),
])
def test_topo_matrices_told_apart(text, kind) -> None:
    assert detect_kind(text) == kind


@pytest.mark.parametrize(("text", "kind"), [
    ("BOOT_IMAGE=/boot/vmlinuz-6.8.0-79-generic root=/dev/mapper/vg-root ro quiet splash\n", "proc-cmdline"),
    ("$ cat /proc/cmdline\ninitrd=\\initrd.img root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on\n", "proc-cmdline"),
    ("ro quiet\nsplash\n", None),
    ("hello there\n", None),
    ("[    0.000000] Linux version 6.8.0\n[    0.000000] Hypervisor detected: KVM\n", "dmesg"),
    ("[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid=1\n"
     "[Fri Aug 30 11:43:10 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid=1\n", "dmesg"),
    ("kern  :warn  : [  77.1] NVRM: Xid (PCI:0000:01:00): 154, pid=9\n", "dmesg"),
    ("0, NVIDIA RTX PRO 6000, GPU-d2aa5003-82b5-5fa7-adac-e24f2b4ad66c, 00000000:01:00.0\n", "nvidia-smi-query-gpu"),
    ("1, 2, 3\n4, 5, 6\n", None),
    ("name: gpu-box\nmemory: 4096\ncores: 8\n", None),
    ("agent: 1\nostype: l26\nmemory: 65536\nhostpci0: 0000:01:00.0,pcie=1\n", "proxmox-vm-config"),
])
def test_small_pastes(text, kind) -> None:
    assert detect_kind(text) == kind


@pytest.mark.parametrize(("text", "command"), [
    ("$ nvidia-smi topo -p2p r\n \tGPU0\tGPU1\t\n", "nvidia-smi topo -p2p r"),
    ("root@pve-gpu-01:~# qm config 120\nagent: 1\n", "qm config 120"),
    ("(base) user@host:~$ sudo nvidia-smi   -q\n\n==============NVSMI LOG==============\n", "nvidia-smi -q"),
    ("here it is\n# cat /etc/pve/qemu-server/131.conf\nboot: order=scsi0\n", "cat /etc/pve/qemu-server/131.conf"),
    (" \tGPU0\tGPU1\t\n GPU0\tX\tNS\t\n", None),
    ("a\nb\nc\n$ nvidia-smi topo -p2p r\n", None),  # only the first lines carry the command
    (b"\x1f\x8b\x08\x00", None),
    (7, None),
])
def test_the_command_a_paste_names(text, command) -> None:
    assert pasted_command(text) == command


REAL_OUTPUTS_WANTED = 3
# Kinds allowed fewer real outputs than REAL_OUTPUTS_WANTED, each with what was searched and why no more exist.
FEWER_REAL_OUTPUTS: dict[str, tuple[int, str]] = {
    "sglang-decode-log": (0, (
        "real decode lines are public (sgl-project/sglang#3909, #22166, #22331, sgl-project/sglang-jax#564), but "
        "only as excerpts of third-party threads that were not to be copied verbatim: the three fixtures are "
        "constructed in each era's spelling and field order (tests/fixtures/sglang/SOURCES.md)")),
    "nvidia-bug-report": (0, (
        "GitHub issues, public pages and repositories were searched for the bug report's own lines ('Start of "
        "NVIDIA bug report log file', its '____' separators with '*** /proc/cmdline'): issue templates ask for the "
        ".gz as an attachment, so threads hold its name, never its text; the excerpts quoted from one (the journal "
        "lines in NVIDIA/open-gpu-kernel-modules#626) keep none of its markers, so they are kernel-log pastes, and "
        "the sections users paste (dmesg, nvidia-smi -q, lspci) are fixtures of their own kinds")),
    "nvbandwidth-json": (0, (
        "issues, pages and code were searched for nvbandwidth -j / --json documents ('\"nvbandwidth\": {', "
        "'testcases', 'bandwidth_matrix'): only hand-written test inputs of other projects and format notes "
        "turned up, no document a run printed; scripts that run -j keep the file to themselves")),
    "nccl-tests-json": (0, (
        "issues, pages and code were searched for the -J file ('average_bus_bandwidith', 'nccl-tests -J'): -J "
        "exists since nccl-tests 2.17.3 (2025) and no run's file is public yet; the one JSON a thread shows is "
        "the output of an unmerged pull request's other format (NVIDIA/nccl-tests#318), which is no -J file")),
    "gpu-p2p-probe-log": (0, (
        "this collection's own probe: no public run of it exists to search for, and no GPU host was at hand to "
        "save one; its three logs are built from the harness's own records by p2p/build_probe_logs.py, which "
        "tests/unit/bench/test_p2p_probe.py keeps in step with the harness")),
}


def real_fixtures_per_kind() -> dict[str, list[str]]:
    """The fixtures of each kind whose file name does not say "constructed"."""
    found: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for relative in IDS:
        kind = kind_of_fixture(relative)
        if kind and "constructed" not in relative.rsplit("/", 1)[-1]:
            found[kind].append(relative)
    return found


def test_every_kind_has_three_real_outputs_or_says_why_not() -> None:
    short = []
    for kind, relatives in real_fixtures_per_kind().items():
        wanted = FEWER_REAL_OUTPUTS.get(kind, (REAL_OUTPUTS_WANTED, ""))[0]
        if len(relatives) < wanted:
            short.append(f"{kind}: {len(relatives)} real of {wanted} ({', '.join(relatives) or 'none'})")
    assert not short, ("kinds with too few real outputs under tests/fixtures (add public outputs with their "
                       "provenance in SOURCES.md, or an entry in FEWER_REAL_OUTPUTS saying why none exist): "
                       + "; ".join(short))


def test_an_exception_allows_fewer_only_where_fewer_exist() -> None:
    found = real_fixtures_per_kind()
    for kind, (allowed, why) in FEWER_REAL_OUTPUTS.items():
        assert kind in KINDS and why.strip(), kind
        # An exception never outlives its reason: once three exist, it goes.
        assert allowed < REAL_OUTPUTS_WANTED and len(found[kind]) < REAL_OUTPUTS_WANTED, kind


def test_a_long_topology_style_paste_is_told_in_linear_time() -> None:
    # Every GPU row is a header too: each was looked up in the list of rows (a 1.3 MB paste took a minute and a half).
    # The recogniser itself, on 60,000 rows: telling the kind of a paste that size costs more than the lookups did.
    from ansible_collections.gpuhost.gpu.plugins.module_utils.material.kinds import _topo_kind

    lines = ["\tGPU0\tGPU1", *["GPU0\t X \tNV18"] * 60000]
    assert within(1.0, lambda: _topo_kind(lines)) == "nvidia-smi-topo-m"
