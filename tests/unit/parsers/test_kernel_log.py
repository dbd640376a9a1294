"""The kernel log reader: Xid lines of several driver generations, bus losses without an Xid, dmesg and
journal prefixes, and properties over generated logs (any text reads without raising; every Xid line
written in any format comes back with its fields)."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.kernel_log import (
    normalize_bus,
    parse_kernel_log,
    parse_line,
    summarize_events,
)
from hypothesis import given, settings
from hypothesis import strategies as st

# Lines as public bug reports and NVIDIA's documentation show them, one per driver generation.
LINES = [
    # 300 series and older: no "PCI:", no pid.
    ("[ 1234.567890] NVRM: Xid (0000:02:00): 13, 0003 00000000 0000a1c0 000002fc 00000000 00000000",
     13, "0000:02:00.0", None, None, "0003 00000000 0000a1c0 000002fc 00000000 00000000", 1234.56789, None),
    # 3xx-4xx: "PCI:", no pid.
    ("[  812.004217] NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.",
     79, "0000:02:00.0", None, None, "GPU has fallen off the bus.", 812.004217, None),
    # 418-470: pid only.
    ("[ 3301.2] NVRM: Xid (PCI:0000:3b:00): 31, pid=1234, Ch 00000010, intr 10000000. MMU Fault: ENGINE GRAPHICS",
     31, "0000:3b:00.0", 1234, None, "Ch 00000010, intr 10000000. MMU Fault: ENGINE GRAPHICS", 3301.2, None),
    # 495 and newer: pid and name, unknown ones quoted.
    ("[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
     79, "0000:91:00.0", None, None, "GPU has fallen off the bus.", 6781741.548779, None),
    ("[51233.871020] NVRM: Xid (PCI:0000:3a:00): 48, pid=48211, name=python3, An uncorrectable double bit error",
     48, "0000:3a:00.0", 48211, "python3", "An uncorrectable double bit error", 51233.87102, None),
    # journalctl -k (short), as syslog writes it.
    ("Mar 03 10:00:01 gpu-node-7 kernel: NVRM: Xid (PCI:0000:cb:00): 119, pid=3045, name=nvidia-smi, Timeout after "
     "6s of waiting for RPC response from GPU0 GSP!", 119, "0000:cb:00.0", 3045, "nvidia-smi",
     "Timeout after 6s of waiting for RPC response from GPU0 GSP!", None, "Mar 03 10:00:01"),
    # journalctl -o short-iso, and a syslog file that keeps the dmesg stamp after "kernel:".
    ("2025-01-17T08:12:44+0000 gpu-node-7 kernel: NVRM: Xid (PCI:0000:41:00): 94, pid=7, name=pt_main_thread, "
     "Contained: SM (0x1). RST: No, D-RST: No", 94, "0000:41:00.0", 7, "pt_main_thread",
     "Contained: SM (0x1). RST: No, D-RST: No", None, "2025-01-17T08:12:44+0000"),
    ("Jan  7 03:14:15 h100-2 kernel: [ 9901.000001] NVRM: Xid (PCI:0000:18:00): 74, pid=0, name=, NVLink: fatal error",
     74, "0000:18:00.0", 0, None, "NVLink: fatal error", 9901.000001, "Jan  7 03:14:15"),
    # dmesg -T, and NVML's 8-digit domain.
    ("[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:00000000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM "
     "Warp Exception on (GPC 7, TPC 0, SM 0): Out Of Range Address", 13, "0000:cb:00.0", None, None,
     "Graphics SM Warp Exception on (GPC 7, TPC 0, SM 0): Out Of Range Address", None, "Fri Aug 30 11:43:09 2024"),
    # dmesg -x (facility and level before the stamp).
    ("kern  :warn  : [  77.1] NVRM: Xid (PCI:0000:01:00): 154, pid=9, name=sglang, GPU recovery action changed from "
     "0x0 (None) to 0x1 (GPU Reset Required)", 154, "0000:01:00.0", 9, "sglang",
     "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", 77.1, None),
]


@pytest.mark.parametrize(("line", "xid", "bus", "pid", "process", "message", "uptime", "time"), LINES)
def test_xid_lines_of_every_generation(line, xid, bus, pid, process, message, uptime, time) -> None:
    event = parse_line(line)
    assert event is not None and event.kind == "xid"
    assert (event.xid, event.pci_bus_id, event.pid, event.process, event.message) == (xid, bus, pid, process, message)
    assert event.uptime_s == pytest.approx(uptime) if uptime is not None else event.uptime_s is None
    assert event.time == time


@pytest.mark.parametrize(("line", "bus"), [
    ("[6781741.548783] NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.", "0000:91:00.0"),
    ("[  812.1] NVRM: GPU at 0000:02:00.0 has fallen off the bus.", "0000:02:00.0"),
    ("Mar 03 10:00:01 host kernel: NVRM: GPU at PCI:0000:02:00: GPU has fallen off the bus.", "0000:02:00.0"),
    ("[  812.1] NVRM: GPU has fallen off the bus.", None),
])
def test_bus_losses_without_an_xid(line: str, bus: str | None) -> None:
    event = parse_line(line)
    assert event is not None and event.kind == "fallen_off_bus"
    assert event.xid is None and event.pci_bus_id == bus


@pytest.mark.parametrize("line", [
    "[    0.000000] Linux version 6.8.0-85-generic",
    "[   21.550812] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05",
    "[93512.118402] NVRM: API mismatch: the client has the version 590.48, but",
    "[6781741.548776] NVRM: GPU Board Serial Number: 1653723052734",
    "[6781741.548768] NVRM: GPU at PCI:0000:91:00: GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b",
    "[6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 44 LTSSM Fault Up",
    "NVRM: Xid (PCI:0000:01:00): not-a-number, something",
    "",
])
def test_other_lines_are_not_events(line: str) -> None:
    assert parse_line(line) is None


def test_a_log_and_its_summary() -> None:
    again = "[ 9999.5] NVRM: Xid (PCI:0000:3a:00): 48, pid=1, name=x, again"
    log = "\r\n".join(line for line, *_ in LINES[:5]) + f"\n{again}\n"
    events = parse_kernel_log(log)
    assert [e.xid for e in events] == [13, 79, 31, 79, 48, 48]
    summary = summarize_events(events)
    dbe = next(s for s in summary if s["xid"] == 48)
    assert (dbe["count"], dbe["first_uptime_s"], dbe["last_uptime_s"]) == (2, 51233.87102, 9999.5)
    assert dbe["processes"] == ["python3", "x"] and dbe["message"] == "An uncorrectable double bit error"
    assert len(summary) == 5  # the two Xid 79 lines are on two GPUs
    assert parse_kernel_log(None) == []  # type: ignore[arg-type]


def test_bus_addresses_are_normalised() -> None:
    assert normalize_bus("PCI:0000:41:00") == "0000:41:00.0"
    assert normalize_bus("00000000:41:00.0") == "0000:41:00.0"
    assert normalize_bus("0000:AB:00.1") == "0000:ab:00.1"
    assert normalize_bus(None) is None


# ---------------------------------------------------------------------------
# Properties over generated logs

HEX2 = st.integers(0, 255).map(lambda n: f"{n:02x}")
BUS = st.tuples(st.integers(0, 0xFFFF), HEX2, st.integers(0, 31)).map(lambda t: f"{t[0]:04x}:{t[1]}:{t[2]:02x}")
PROCESS = st.text("abcdefghijklmnopqrstuvwxyz_-0123456789.", min_size=1, max_size=15)
MESSAGE = st.text(st.characters(codec="ascii", exclude_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85"),
                  max_size=60).map(str.strip)
STAMP = st.integers(0, 10**9).map(lambda n: n / 1_000_000)


@st.composite
def xid_line(draw: st.DrawFn) -> tuple[str, dict]:
    """An Xid line in one of the driver generations' forms, behind one of the log prefixes."""
    xid, bus, message = draw(st.integers(1, 200)), draw(BUS), draw(MESSAGE)
    form = draw(st.sampled_from(["old", "pci", "pid", "pid_name", "unknown"]))
    pid = draw(st.integers(0, 4_000_000)) if form in ("pid", "pid_name") else None
    process = draw(PROCESS) if form == "pid_name" else None
    head = f"NVRM: Xid ({'' if form == 'old' else 'PCI:'}{bus}): {xid}"
    if form == "pid":
        head += f", pid={pid}"
    elif form == "pid_name":
        head += f", pid={pid}, name={process}"
    elif form == "unknown":
        head += ", pid='<unknown>', name=<unknown>"
    body = f"{head}, {message}" if message or form == "old" else head
    prefix_kind = draw(st.sampled_from(["dmesg", "ctime", "journal", "iso", "syslog", "none"]))
    stamp = draw(STAMP)
    prefix = {"dmesg": f"[{stamp:12.6f}] ", "ctime": "[Fri Aug 30 11:43:09 2024] ",
              "journal": "Mar 03 10:00:01 node kernel: ", "iso": "2025-01-17T08:12:44+0000 node kernel: ",
              "syslog": f"Jan  7 03:14:15 node kernel: [{stamp:.6f}] ", "none": ""}[prefix_kind]
    expected = {"xid": xid, "pci_bus_id": f"{bus}.0", "pid": pid, "process": process,
                "message": message, "uptime": stamp if prefix_kind in ("dmesg", "syslog") else None}
    return prefix + body, expected


NOISE = st.text(st.characters(codec="utf-8", exclude_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"),
                max_size=80).filter(lambda line: "NVRM" not in line)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(xid_line(), NOISE.map(lambda n: (n, None))), max_size=12))
def test_every_generated_xid_line_comes_back_with_its_fields(lines: list[tuple[str, dict | None]]) -> None:
    events = parse_kernel_log("\n".join(line for line, _ in lines))
    expected = [e for _line, e in lines if e is not None]
    assert len(events) == len(expected)
    for event, want in zip(events, expected, strict=True):
        assert (event.kind, event.xid, event.pci_bus_id, event.pid, event.process) == \
            ("xid", want["xid"], want["pci_bus_id"], want["pid"], want["process"])
        assert event.message == want["message"]
        if want["uptime"] is None:
            assert event.uptime_s is None
        else:
            assert event.uptime_s == pytest.approx(want["uptime"], abs=1e-6)
    assert sum(group["count"] for group in summarize_events(events)) == len(events)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400))
def test_any_text_reads_without_raising(text: str) -> None:
    for event in parse_kernel_log(text):
        assert event.kind in ("xid", "fallen_off_bus")
        assert "NVRM" in event.line


@settings(max_examples=100, deadline=None)
@given(st.lists(xid_line(), min_size=1, max_size=8), st.sampled_from(["\n", "\r\n", "\r"]))
def test_line_ends_do_not_matter(lines: list[tuple[str, dict]], end: str) -> None:
    text = end.join(line for line, _ in lines)
    assert parse_kernel_log(text) == parse_kernel_log("\n".join(line for line, _ in lines))
