"""Every fuzz entry point (tests/fuzz/entry_points.py) runs in time linear in its input: each is given long
repetitive inputs, one pattern repeated to 4, 16 and 64 KiB, on one line and on many, and fails when its CPU time
grows clearly faster than the input (docs/development.md, "Regexes over input").

A linear reader's time, less what it costs at 4 KiB (the fixed part: an audit of a capture, a report), grows about
5 times from 16 to 64 KiB (48 KiB more against 12); a quadratic one's about 17 times. A ratio above GROWTH, on time
worth measuring (above SIGNIFICANT), fails once confirmed by the best of ATTEMPTS measures of each size (each at
least MEASURED seconds of calls: the kernel counts CPU time in ticks); a call past CALL_SECONDS of CPU fails at
once (a cubic regex never gets to the next size).

The patterns are the shapes that made readers quadratic or worse, taken from real outputs (tests/fixtures): a
secret word repeated in a VM description, colons after an nccl-tests rank line, blank lines, GPU rows of a
topology matrix, unclosed quotes, braces and brackets, an NCCL log record's head, lines padded with blanks, and
plain words and digits."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from tests.cpu_limit import CpuTimeout, within
from tests.fuzz.entry_points import EntryPoint, entry_points

SIZES = (4 * 1024, 16 * 1024, 64 * 1024)
GROWTH = 9.0
# A first, single call of each size is read in the kernel's ticks (4 ms here): its growth is taken over at least a tick
# and only screens, at a lower ratio, for the measure that decides.
TICK = 0.004
SCREEN = 7.0
SIGNIFICANT = 0.015  # seconds of CPU above the 4 KiB time at 64 KiB: below it, noise decides the ratio
CALL_SECONDS = 3.0
ATTEMPTS = 2
MEASURED = 0.05  # seconds of CPU each size is repeated for when a first, single call looks quadratic

# (name, the start of the text, the unit repeated after it, its end). Each runs once as one long line and once with a
# newline after each unit.
PATTERNS: tuple[tuple[str, str, str, str], ...] = (
    # A Proxmox VM description (tests/fixtures/proxmox) holding a secret word again and again.
    ("secret words", "args: -x ", "pass", ""),
    ("secret names", "description: ", "root-password:", ""),
    # An nccl-tests rank line (tests/fixtures/nccl) and colons after it.
    ("colons after a rank line", "#  Rank  0 Group  0 Pid  4096 on host device  0 [0x3d] ", ":", ""),
    ("an NCCL log record's head", "", "host:1:2 [0] ", ""),
    # A topology matrix's GPU row (tests/fixtures/nvidia-smi/topo-m_*): header and row alike.
    ("GPU rows", "\tGPU0\tGPU1\n", "GPU0\t X \tNV18\t", ""),
    ("blanks", "", " ", "x"),
    ("unclosed quotes", "data=", "\"", ""),
    ("unclosed braces", "-object ", " {", ""),
    ("markup", "<system version=\"1\">", "<pci busid=\"0000:01:00.0\">", ""),
    # A --query-gpu header (tests/fixtures/nvidia-smi/query-gpu_*) whose unit never closes.
    ("open brackets", "name, pci.bus_id ", "[", "]"),
    # An lspci device line (tests/fixtures/pci) and a kernel log line (tests/fixtures/kernel-log) padded with blanks.
    ("blanks in an lspci device line", "0000:01:00.0 3D controller: NVIDIA Corporation Device 2330", " ", "x"),
    ("blanks in a hypervisor line", "[    0.000000] Hypervisor detected: KVM", " ", "x"),
    ("numbers", "", "0 ", ""),
    ("words", "", "NVIDIA ", ""),
)


def _texts(start: str, unit: str, end: str, newline: bool) -> list[str]:
    unit = unit + "\n" if newline else unit
    return [start + unit * ((size - len(start) - len(end)) // len(unit)) + end for size in SIZES]


def _gzipped(entry: EntryPoint) -> EntryPoint:
    """The gzip entry points damage their input where its bytes say, so that each size would be damaged elsewhere
    (and read to another length): here they take it gzip-compressed whole."""
    import gzip

    from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import build_capture
    from ansible_collections.gpuhost.gpu.plugins.module_utils.material.gunzip import gunzip

    calls = {"capture.build_capture(gzip)": lambda data: build_capture([("paste.gz", gzip.compress(data))]),
             "gunzip.gunzip": lambda data: gunzip(gzip.compress(data), 1 << 20)}
    return replace(entry, call=calls[entry.name]) if entry.name in calls else entry


def cpu_time(call: Callable[[], Any], at_least: float = 0.0) -> float:
    """CPU seconds of one call, each within CALL_SECONDS; the call repeated until ``at_least`` seconds have passed
    (the kernel counts CPU time in ticks of a few milliseconds), the time being their mean. What the entry point
    raises counts as done: the fuzz harness judges what escapes, this test only time."""
    calls = 0
    started = time.process_time()
    while True:
        try:
            within(CALL_SECONDS, call)
        except CpuTimeout:
            raise
        except Exception:
            pass
        calls += 1
        spent = time.process_time() - started
        if spent >= at_least:
            return spent / calls


def _times(entry: EntryPoint, inputs: list[Any], at_least: float = 0.0, attempts: int = 1) -> list[float]:
    return [min(cpu_time(lambda data=data: entry.call(data), at_least) for _ in range(attempts)) for data in inputs]


def growth(times: list[float], floor: float = 0.0005) -> float:
    """How much the time past the smallest size grew from the middle size to the largest."""
    small, middle, large = times
    return (large - small) / max(middle - small, floor)


@pytest.mark.parametrize("entry", entry_points(), ids=lambda entry: entry.name)
def test_time_grows_no_faster_than_the_input(entry: EntryPoint) -> None:
    entry = _gzipped(entry)
    slow = []
    for name, start, unit, end in PATTERNS:
        for newline in (False, True):
            texts = _texts(start, unit, end, newline)
            inputs = [text.encode("utf-8") if entry.takes == "bytes" else text for text in texts]
            shape = f"{name}, {'lines' if newline else 'one line'}"
            try:
                times = _times(entry, inputs)
                if growth(times, TICK) <= SCREEN or times[2] - times[0] <= SIGNIFICANT:
                    continue
                times = _times(entry, inputs, MEASURED, ATTEMPTS)  # confirmed, or noise
            except CpuTimeout as exc:
                slow.append(f"{shape}: {exc} on {len(texts[-1])} characters or fewer")
                continue
            if growth(times) > GROWTH and times[2] - times[0] > SIGNIFICANT:
                slow.append(f"{shape}: CPU time {', '.join(f'{t * 1000:.1f} ms' for t in times)} at "
                            f"{', '.join(f'{size // 1024} KiB' for size in SIZES)}, {growth(times):.1f} times more "
                            "past the 4 KiB time from 16 to 64 KiB (linear: about 5)")
    assert not slow, f"{entry.name} is not linear in its input (a regex or loop over it):\n" + "\n".join(slow)
