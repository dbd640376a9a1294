"""nvidia-bug-report.log split into its sections: the 418-era and the 5xx layouts (tests/fixtures/bug-reports, built
after the public script's layout), the separators and titles of other script versions written inline, logs cut
anywhere, CRLF, and properties: no input raises anything but BugReportParseError."""

from __future__ import annotations

import gzip

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import ParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.kernel_log import parse_kernel_log
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_bug_report import (
    SEPARATOR,
    BugReportParseError,
    command_name,
    parse_bug_report,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.paths import FIXTURES

OLD = FIXTURES / "bug-reports" / "nvidia-bug-report_418_2xV100-SXM2_baremetal_constructed.log"
NEW = FIXTURES / "bug-reports" / "nvidia-bug-report_580_2xRTX-PRO-6000_kvm-guest_constructed.log"
Q_OLD = FIXTURES / "nvidia-smi" / "q_418_2xV100-SXM2_throttle-retired.txt"
Q_NEW = FIXTURES / "nvidia-smi" / "q_580_2xRTX-PRO-6000-Blackwell_vm-passthrough.txt"


def read(path) -> str:
    return path.read_text(encoding="utf-8")


def test_the_418_layout() -> None:
    report = parse_bug_report(read(OLD))
    assert (report.script_version, report.complete) == ("26442361", True)
    assert report.date == "Tue Oct 15 09:13:02 UTC 2019" and report.uname.startswith("Linux dgx-v100-03 4.15.0-65")
    kinds = {section.name: section.kind for section in report.sections}
    assert kinds["prologue"] == "prologue" and kinds["epilogue"] == "epilogue"
    assert kinds["/var/log/nvidia-installer.log"] == "missing"
    assert kinds["ldd output (glxinfo not found)"] == "skipped"
    assert kinds["Using built-in specs."] == "text"  # gcc -v comes without a title
    assert kinds["Scanning kernel log files for NVIDIA kernel messages"] == "text"
    # The commands of one lspci block, each under its own name, quotes as printed.
    assert [s.name for s in report.sections if s.name.startswith("lspci")] == [
        'lspci -d "10de:*" -v -xxx', 'lspci -d "10b5:*" -v -xxx', "lspci -t", "lspci -nn"]
    assert report.get('lspci -d "10b5:*" -v -xxx').text == ""
    assert report.get("lspci -nn").text.endswith("[10de:1db1] (rev a1)\n")
    cmdline = report.get("/proc/cmdline")
    assert cmdline.kind == "file" and cmdline.text.endswith("intel_iommu=on iommu=pt\n")
    assert cmdline.metadata.startswith("*** ls: -r--r--r-- 1 root root 0 2019-10-15")
    assert cmdline.title == "*** /proc/cmdline" and report.as_dict()["/proc/cmdline"] == cmdline.text
    # The nvidia-smi block holds two commands; each output is the command's own, byte for byte.
    assert report.get("nvidia-smi --query").text == read(Q_OLD)
    assert report.get("nvidia-smi --query --unit").text.rstrip().endswith("Attached Units                      : 0")
    events = parse_kernel_log(report.get("dmesg").text)
    assert [(e.xid, e.pci_bus_id) for e in events] == [(63, "0000:3b:00.0")]


def test_the_5xx_layout() -> None:
    report = parse_bug_report(read(NEW))
    assert (report.script_version, report.complete) == ("36307915", True)
    # The versions table follows the prologue without a separator of its own.
    assert "NVIDIA GPU Details" in report.get("prologue").text
    assert report.get("NVIDIA Driver Type Detection").kind == "text"
    assert report.get("vulkaninfo output").kind == "skipped"
    assert report.get("vulkaninfo output").text == "vulkaninfo not found\n"
    assert report.get("/sys/bus/pci/devices/0000:02:00.0/numa_node").text == "-1\n"
    assert report.get("/etc/os-release").metadata.endswith("/etc/os-release -> ../usr/lib/os-release")
    assert report.get("numactl -H").text.startswith("available: 1 nodes (0)")
    assert report.get("nvidia-smi --query").text == read(Q_NEW)
    assert [s.name for s in report.sections if s.name.startswith("nvidia-smi")] == [
        "nvidia-smi --query", "nvidia-smi --query --unit", "nvidia-smi nvlink --status",
        "nvidia-smi conf-compute --query-conf-compute"]
    assert report.get("nvidia-smi nvlink --status").text == ""
    assert report.get("nvidia-smi conf-compute --query-conf-compute").text == "CC status: OFF\n"
    assert "Hypervisor detected: KVM" in report.get("dmesg").text
    # The module parameters come as grep prints them, without a title.
    assert report.get("/sys/module/nvidia/parameters/NVreg_EnableGpuFirmware:18").kind == "text"
    assert report.get("no such section") is None


@pytest.mark.parametrize("path", [OLD, NEW], ids=["418", "5xx"])
def test_crlf_and_bytes_read_the_same(path) -> None:
    report = parse_bug_report(read(path))
    assert parse_bug_report(read(path).replace("\n", "\r\n")) == report
    assert parse_bug_report(path.read_bytes()) == report


def test_other_script_versions() -> None:
    text = "\n".join([
        SEPARATOR, "", "Start of NVIDIA bug report log file.  Please include this file, along", "",
        "nvidia-bug-report.sh Version: 17351990", "",
        # 300-series lspci: the separator before PLX devices has no empty line after it.
        SEPARATOR, "", '/sbin/lspci -d "10de:*" -v -xxx', "", "01:00.0 VGA compatible controller: NVIDIA", "",
        SEPARATOR, '/sbin/lspci -d "10b5:*" -v -xxx', "", "",
        SEPARATOR, "", "*** /proc/driver/nvidia/warnings/fbdev is not readable", "",
        SEPARATOR, "", 'base64 "/etc/nvidia/3dvp.conf"', "", "QUJD", "",
        SEPARATOR, "", "/usr/bin/systemctl status nvidia-persistenced.service",
        "* nvidia-persistenced.service - NVIDIA Persistence Daemon", "",
        SEPARATOR, "", "timeout 60 /usr/bin/mst start", "", "Starting MST", "",
        "timeout 60 /usr/bin/mst gpu add", "", "added", "",
        SEPARATOR, "", "journalctl -b -0 _COMM=Xorg", "", "-- No entries --", "",
        SEPARATOR, "", "Error: nvidia-smi failed", "exit 9", "Resolution: Contact NVIDIA for support", "",
        SEPARATOR, "", "/usr/bin/nvidia-smi -q", "", "NVSMI LOG", "", "/usr/bin/nvidia-smi -q -u", "", "no units", "",
    ])
    report = parse_bug_report(text)
    found = [(s.name, s.kind, s.text) for s in report.sections]
    assert found[1:] == [
        ('lspci -d "10de:*" -v -xxx', "command", "01:00.0 VGA compatible controller: NVIDIA\n"),
        ('lspci -d "10b5:*" -v -xxx', "command", ""),
        ("/proc/driver/nvidia/warnings/fbdev", "unreadable", ""),
        ("/etc/nvidia/3dvp.conf", "binary", "QUJD\n"),
        ("systemctl status nvidia-persistenced.service", "command",
         "* nvidia-persistenced.service - NVIDIA Persistence Daemon\n"),
        ("timeout 60 mst start", "command", "Starting MST\n"),
        ("timeout 60 mst gpu add", "command", "added\n"),
        ("journalctl -b -0 _COMM=Xorg", "command", "-- No entries --\n"),
        ("nvidia-smi failed", "error", "exit 9\nResolution: Contact NVIDIA for support\n"),
        ("nvidia-smi -q", "command", "NVSMI LOG\n"),
        ("nvidia-smi -q -u", "command", "no units\n"),
    ]
    assert report.script_version == "17351990" and report.date is None and not report.complete
    assert report.sections[-1].truncated and not report.sections[-2].truncated


@pytest.mark.parametrize(("title", "name"), [
    ("/usr/bin/nvidia-smi --query", "nvidia-smi --query"),
    ('/usr/bin/lspci -d "10de:*" -v -xxx', 'lspci -d "10de:*" -v -xxx'),
    ("/sbin/modinfo nvidia | grep vermagic", "modinfo nvidia | grep vermagic"),
    ("timeout 60 /usr/bin/mst status -v", "timeout 60 mst status -v"),
    ("ldd /usr/bin/glxinfo", "ldd /usr/bin/glxinfo"),
    ("/sys/module/nvidia/parameters/NVreg_EnableGpuFirmware:18", None),
    ("dmesg:", None),
    ("Start of NVIDIA bug report log file.", None),
])
def test_command_names(title, name) -> None:
    assert command_name(title) == name


def test_a_log_cut_anywhere_reads_up_to_the_cut() -> None:
    text = read(OLD)
    full = parse_bug_report(text)
    names = [section.name for section in full.sections]
    lines = text.split("\n")
    for cut in range(1, len(lines), 7):
        try:
            report = parse_bug_report("\n".join(lines[:cut]))
        except BugReportParseError:
            assert cut < 8, f"a log cut at line {cut} is still a bug report"
            continue
        assert not report.complete
        assert report.sections[-1].truncated
        cut_names = [section.name for section in report.sections]
        assert cut_names[:-1] == names[:len(cut_names) - 1]


@pytest.mark.parametrize(("data", "message"), [
    (gzip.compress(b"x"), "Gunzip nvidia-bug-report.log.gz first"),
    (42, "expected the log as text; found int"),
    ("Hello, here is my problem\n", "expected its sections"),
    (SEPARATOR + "\n\nsome text\n", "expected its sections"),
])
def test_what_is_not_a_bug_report_is_refused_with_what_to_do(data, message) -> None:
    with pytest.raises(BugReportParseError, match=r"nvidia-bug-report\.log: ") as caught:
        parse_bug_report(data)
    assert message in str(caught.value)
    assert isinstance(caught.value, ParseError)


LINES = sorted(set(read(OLD).split("\n")) | set(read(NEW).split("\n")) | {SEPARATOR, "", "*** /proc/x does not exist"})


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=800), st.binary(max_size=800)))
def test_any_input_reads_or_raises_its_own_error(data) -> None:
    try:
        report = parse_bug_report(data)
    except BugReportParseError:
        return
    assert all(section.text == "" or section.text.endswith("\n") for section in report.sections)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(LINES), max_size=60), st.sampled_from(["\n", "\r\n"]))
def test_lines_of_reports_in_any_order_read_or_raise_its_own_error(lines, newline) -> None:
    try:
        report = parse_bug_report(newline.join(lines))
    except BugReportParseError:
        return
    assert all("\r" not in section.text for section in report.sections)
    assert report.complete == any(section.kind == "epilogue" for section in report.sections)
