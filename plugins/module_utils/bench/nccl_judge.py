"""The NCCL benchmark's vocabulary and its results read back: engines, size classes, result rows.

Pure functions over plain data: the harness's JSON events and nccl-tests results as
``nccl_tests.NcclTestsRun.as_dict()`` gives them. Nothing here starts a process, so every rule is
tested without a GPU. What the numbers mean is judged next to it: thresholds and their violations in
nccl_thresholds, the tuning of NCCL environments in nccl_tuning, the findings in nccl_findings.

A result row is the nccl-tests shape: ``size_bytes``, ``count``, ``type``, ``redop``,
``out_of_place`` and ``in_place``, each ``{time_us, algbw_gbps, busbw_gbps, wrong}``
or null when that placement was not measured (torch's all_reduce is in place only).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.units import GIB, KIB, MIB
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.harness_events import harness_events

ENGINES = ("auto", "nccl-tests", "torch-nccl", "torch-gloo")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
# The key of results whose collective the log does not show (nccl_tests: collective None): no limit of a
# named collective judges them.
UNKNOWN_COLLECTIVE = "unknown"
PLACEMENTS = ("out_of_place", "in_place")

DEFAULT_MIN_BYTES = 8
DEFAULT_MAX_BYTES = 1 * GIB
# gloo moves CPU buffers over loopback TCP: a few MiB already shows its curve, and keeps the
# CPU engine's default sweep well under 30 s on two cores.
GLOO_MAX_BYTES = 4 * MIB

# Size classes. A decode step all-reduces one hidden vector per token: 6144 x bf16 = 12 KiB at
# batch 1, under 1 MiB up to batch ~64. There the time is latency (hops, protocol, launch), not
# bandwidth. Prefill and large batches move tens of MiB, where bus bandwidth decides.
SMALL_MAX_BYTES = 1 * MIB  # below: latency-bound
LARGE_MIN_BYTES = 32 * MIB  # from here: bandwidth-bound
# The size whose latency stands for the small class: a decode all-reduce at batch 1.
SMALL_REFERENCE_BYTES = 16 * KIB


class BenchInputError(ValueError):
    """Options or data the benchmark cannot use, with what was expected."""


# ---------------------------------------------------------------------------
# Sizes


def size_class(size_bytes: int) -> str:
    if size_bytes < SMALL_MAX_BYTES:
        return "small"
    if size_bytes >= LARGE_MIN_BYTES:
        return "large"
    return "medium"


def nearest_row(rows: list[dict[str, Any]], size_bytes: int, within: float = 2.0) -> dict[str, Any] | None:
    """The measured row closest to size_bytes (on a log scale), if within a factor of ``within``."""
    best = None
    best_distance = math.inf
    for row in rows:
        size = row.get("size_bytes")
        if not isinstance(size, int) or size <= 0:
            continue
        distance = abs(math.log(size / size_bytes))
        if distance < best_distance:
            best, best_distance = row, distance
    if best is None or best_distance > math.log(within) + 1e-9:
        return None
    return best


def measurements(row: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(p, row[p]) for p in PLACEMENTS if isinstance(row.get(p), dict)]


def best_time(row: dict[str, Any]) -> tuple[str, float] | None:
    values = [(p, m["time_us"]) for p, m in measurements(row) if isinstance(m.get("time_us"), (int, float))]
    return min(values, key=lambda v: v[1]) if values else None


def best_busbw(row: dict[str, Any]) -> tuple[str, float] | None:
    values = [(p, m["busbw_gbps"]) for p, m in measurements(row) if isinstance(m.get("busbw_gbps"), (int, float))]
    return max(values, key=lambda v: v[1]) if values else None


def wrong_total(rows: list[dict[str, Any]]) -> int | None:
    """Wrong elements over every row and placement; None when nothing was checked."""
    counts = [m.get("wrong") for row in rows for _unused, m in measurements(row)]
    checked = [c for c in counts if isinstance(c, int)]
    return sum(checked) if checked else None


def not_measured(collectives: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The sizes whose numbers the tool printed as inf or nan (the parsers' ``not_measured``, or a
    placement without a time): {collective, size_bytes, placements}."""
    found = []
    for collective, rows in collectives.items():
        for row in rows:
            placements = list(row.get("not_measured") or [])
            placements += [p for p, m in measurements(row) if m.get("time_us") is None and p not in placements]
            if placements:
                found.append({"collective": collective, "size_bytes": row.get("size_bytes"), "placements": placements})
    return found


def avg_busbw(rows: list[dict[str, Any]]) -> float | None:
    """nccl-tests' footer figure: the mean busbw over every size and placement."""
    values = [m["busbw_gbps"] for row in rows for _unused, m in measurements(row)
              if isinstance(m.get("busbw_gbps"), (int, float))]
    return round(sum(values) / len(values), 6) if values else None


# ---------------------------------------------------------------------------
# Harness output


@dataclass
class HarnessRun:
    """A harness run read back: results per collective and how it ended."""

    status: str  # ok, timeout, error
    collectives: dict[str, list[dict[str, Any]]]
    start: dict[str, Any]
    summary: dict[str, Any]

    @property
    def nccl_version(self) -> str | None:
        return self.start.get("nccl_version")

    @property
    def error_message(self) -> str | None:
        error = self.summary.get("error") or {}
        if error.get("message"):
            return str(error["message"])
        if self.status == "error":
            tails = [r.get("stderr_tail", "").strip() for r in self.summary.get("ranks") or []]
            tails = [t.splitlines()[-1] for t in tails if t]
            return tails[0] if tails else "the harness ended without a result and without saying why"
        return None


def parse_harness_output(text: str) -> HarnessRun:
    """Read the harness's JSON lines; lines that are not JSON events are ignored."""
    collectives: dict[str, list[dict[str, Any]]] = {}
    start: dict[str, Any] = {}
    summary: dict[str, Any] | None = None
    for event in harness_events(text):
        kind = event.get("event")
        if kind == "start":
            start = event
        elif kind == "result":
            collectives.setdefault(str(event.get("collective")), []).append(result_row(event))
        elif kind == "summary":
            summary = event
    if summary is None:
        raise BenchInputError("the benchmark harness printed no summary line; its output was:\n" + text[-2000:])
    return HarnessRun(str(summary.get("status") or "error"), collectives, start, summary)


def result_row(event: dict[str, Any]) -> dict[str, Any]:
    """A harness result event as an nccl-tests result row."""
    return {
        "size_bytes": event.get("size_bytes"),
        "count": event.get("count"),
        "type": event.get("type"),
        "redop": event.get("redop"),
        "out_of_place": event.get("out_of_place"),
        "in_place": event.get("in_place"),
    }


def collective_entry(rows: list[dict[str, Any]], out_of_bounds: Any = None) -> dict[str, Any]:
    wrong = wrong_total(rows)
    return {
        "results": rows,
        "avg_busbw_gbps": avg_busbw(rows),
        "out_of_bounds": out_of_bounds if out_of_bounds is not None else wrong,
    }


# ---------------------------------------------------------------------------
# nccl-tests runs


def nccl_tests_argv(binary: str, min_bytes: int, max_bytes: int, step_factor: int, nranks: int,
                    iters: int, warmup: int, check: bool) -> list[str]:
    return [binary, "-b", str(min_bytes), "-e", str(max_bytes), "-f", str(step_factor), "-g", str(nranks),
            "-n", str(iters), "-w", str(warmup), "-c", "1" if check else "0"]


_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+[A-Za-z_][A-Za-z0-9_]*\s")


def completed_sizes(text: str) -> list[int]:
    """Sizes with a full result row in (possibly cut-off) nccl-tests output."""
    sizes = []
    for line in text.splitlines():
        match = _ROW.match(line)
        if match and len(line.split()) >= 9:
            sizes.append(int(match.group(1)))
    return sizes


def hung_size(sizes: list[int], completed: list[int]) -> int | None:
    """The first size of the sweep that has no result: where a killed run was stuck."""
    done = set(completed)
    for size in sizes:
        if size not in done:
            return size
    return None
