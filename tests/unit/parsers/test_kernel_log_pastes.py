"""Kernel logs as users paste them (tests/fixtures/kernel-log, SOURCES.md): dmesg -T grepped and cut mid-line,
a bus loss told over three NVRM lines, journalctl -k with and without the host name, indented by Markdown;
what kind each is, what the reader finds in it, and what the audit of material of one piece makes of it."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import build_capture
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.kinds import detect_kind
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.kernel_log import join_continued, parse_kernel_log
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES
from tests.unit.material.test_capture import audit

LOGS = FIXTURES / "kernel-log"

CASES = [
    ("dmesg-T_535_xid-43-31-94_grep-NVRM_cut.txt", "dmesg",
     [("xid", 43, "0000:00:05.0"), ("xid", 43, "0000:00:05.0"), ("xid", 31, "0000:00:07.0"),
      ("xid", 94, "0000:00:08.0")]),
    ("dmesg_570_fallen-off-bus-three-lines.txt", "dmesg", [("fallen_off_bus", None, "0000:b3:00.0")]),
    ("journal-k-no-hostname_gsp-heartbeat_indented.txt", "journal-kernel", []),
    ("journal-k_595_rm-init-adapter-failed.txt", "journal-kernel", []),
    ("dmesg_2015_xid-32-31-no-pid_laptop.txt", "dmesg",
     [("xid", 32, "0000:01:00.0"), ("xid", 32, "0000:01:00.0"), ("xid", 31, "0000:01:00.0")]),
    ("journal-k-stripped_590_xid-45-caused-by-145-149_8gpu_excerpt.txt", "journal-kernel",
     [("xid", 45, bus) for bus in ("0000:dc:00.0", "0000:ed:00.0", "0000:ba:00.0", "0000:97:00.0", "0000:dc:00.0",
                                   "0000:ba:00.0", "0000:ed:00.0")]),
]


def test_the_old_xid_form_has_no_pid_and_the_new_one_names_the_process() -> None:
    old = parse_kernel_log((LOGS / "dmesg_2015_xid-32-31-no-pid_laptop.txt").read_text())
    assert [(e.pid, e.process) for e in old] == [(None, None)] * 3
    assert old[2].message.startswith("Ch 00000003, engmask")
    new = parse_kernel_log((LOGS / "journal-k-stripped_590_xid-45-caused-by-145-149_8gpu_excerpt.txt").read_text())
    assert (new[0].pid, new[0].process, new[0].uptime_s, new[0].time) == (1818990, "python3", None, None)


@pytest.mark.parametrize(("name", "kind", "events"), CASES, ids=[case[0] for case in CASES])
def test_each_real_kernel_log_is_told_and_read(name, kind, events) -> None:
    text = (LOGS / name).read_text()
    assert detect_kind(text) == kind
    assert [(e.kind, e.xid, e.pci_bus_id) for e in parse_kernel_log(text)] == events


def test_a_line_cut_mid_paste_is_no_event_and_the_rest_are_read() -> None:
    events = parse_kernel_log((LOGS / "dmesg-T_535_xid-43-31-94_grep-NVRM_cut.txt").read_text())
    assert events[-1].xid == 94 and events[-1].time == "Fri Aug  9 13:32:56 2024" and events[-1].pid is None


def test_the_three_line_bus_loss_keeps_its_stamp_and_whole_message() -> None:
    event = parse_kernel_log((LOGS / "dmesg_570_fallen-off-bus-three-lines.txt").read_text())[0]
    assert event.uptime_s == pytest.approx(1843.308145)
    assert event.message.endswith("installed in this system has fallen off the bus and is not responding to "
                                  "commands.")


def test_the_three_line_bus_loss_in_journal_form_is_read_too() -> None:
    # The same message as journalctl -k stamps every line of it.
    lines = [line.strip() for line in (LOGS / "dmesg_570_fallen-off-bus-three-lines.txt").read_text().splitlines()]
    journal = "\n".join(f"Feb 14 05:03:41 gpu-1 kernel: {line.split('] ', 1)[-1]}" for line in lines[:3])
    assert detect_kind(journal) == "journal-kernel"
    assert [(e.kind, e.pci_bus_id) for e in parse_kernel_log(journal)] == [("fallen_off_bus", "0000:b3:00.0")]


@pytest.mark.parametrize(("name", "source", "events"), [
    ("dmesg-T_535_xid-43-31-94_grep-NVRM_cut.txt", "dmesg", 4),
    ("journal-k_595_rm-init-adapter-failed.txt", "journal", 0),
    # Before "kernel: NVRM:" lines whose stamp was cut were told as a journal, this paste was no kernel log at all.
    ("journal-k-stripped_590_xid-45-caused-by-145-149_8gpu_excerpt.txt", "journal", 7),
    ("dmesg_2015_xid-32-31-no-pid_laptop.txt", "dmesg", 3),
])
def test_a_pasted_kernel_log_is_the_audits_kernel_log(name, source, events) -> None:
    facts = audit(build_capture([(name, (LOGS / name).read_bytes())]))
    assert facts["health"]["kernel_log"]["source"] == source
    assert facts["health"]["kernel_log"]["events"] == events
    assert "kernel_log" not in facts["not_seen"]


def test_an_xid_line_after_an_unfinished_one_is_not_swallowed() -> None:
    lines = ["[ 1.0] NVRM: GPU at PCI:0000:00:05: GPU-efbdfde9", "[ 1.0] NVRM: Xid (PCI:0000:00:05): 43, Ch 08"]
    assert join_continued(lines) == lines
    assert [e.xid for e in parse_kernel_log("\n".join(lines))] == [43]


@given(st.lists(st.sampled_from(["[ 1.5] NVRM: The NVIDIA GPU 0000:01:00.0", "    NVRM: fallen off the bus.",
                                 "NVRM: (PCI ID: 10de:2330) installed", "kernel: other line", "", "NVRM: Xid",
                                 "Mar 03 10:00:01 h kernel: NVRM: Xid (PCI:0000:cb:00): 119, pid=3, name=x, T"]),
                max_size=30))
def test_joining_never_raises_and_keeps_every_line_that_does_not_go_on_an_nvrm_message(lines) -> None:
    joined = join_continued(lines)
    assert len(joined) <= len(lines)
    assert [line for line in lines if "NVRM:" not in line] == [line for line in joined if "NVRM:" not in line]
    parse_kernel_log("\n".join(lines))
