"""The NCCL benchmark's thresholds: the defaults and why, the user's checked, and the sizes that break them.

Pure functions over result rows per collective (the nccl-tests shape, see nccl_judge). A threshold
is ``{collective, size_bytes, max_time_us and/or min_busbw_gbps, severity, why, timing, calibration}``;
it is judged on the measured size nearest to its size (within a factor of 2), on the better of the two
placements, and only on results of its own collective: results of another collective, or of one the
log does not name (nccl_judge.UNKNOWN_COLLECTIVE), leave it unjudged with the reason.

An engine's time per operation is not another engine's: nccl-tests averages each rank's time over the
ranks (its ``-a`` default), the torch loop takes the slowest rank's and adds what torch costs per call.
``ENGINES`` says, per engine, the timing rule and what its default limits were calibrated on; a limit
without a calibration (``calibration`` null) warns and never calls a host critical.
"""

from __future__ import annotations

import math
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_judge import (
    COLLECTIVES,
    SMALL_REFERENCE_BYTES,
    UNKNOWN_COLLECTIVE,
    BenchInputError,
    best_busbw,
    best_time,
    nearest_row,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.units import MIB, human_bytes
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import SEVERITY_RANK
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.known_names import unknown_keys

# The keys a threshold may have; any other is refused with the closest one (max_time for max_time_us).
THRESHOLD_KEYS = ("collective", "size_bytes", "max_time_us", "min_busbw_gbps", "severity", "why")

# Default thresholds, for the GPU engines only (gloo measures the CPU and loopback TCP).
#
# Small messages, the host-memory fallback. A ring all-reduce takes 2(n-1) hops in sequence.
# Measured: 8x RTX PRO 6000 on PCIe Gen5 with P2P, NCCL all-reduce 256 B..64 KiB: ~24 us
# (voipmonitor/rtx6kpro, hardware/pcie-bandwidth.md), i.e. ~10 us of launch and protocol plus
# ~1 us a hop. Without P2P each hop goes through host memory: the copy latency between two GPUs
# rises from 0.4-1.4 us to 12-15 us (the same page; 13.7 us at 12 KB in the incident VM), and
# NCCL's SHM transport pays a PCIe write plus a PCIe read of host memory per hop, several us
# each. The limit allows 10 us plus 2 us a hop: 14 us for 2 GPUs, 22 us for 4, 38 us for 8;
# 60% above the P2P figure for 8 GPUs, below what two host-memory crossings a hop cost. It is
# an estimate, not a law: override `thresholds` with your own P2P baseline once you have one,
# and read it together with the transport NCCL chose and the P2P-disabled control run.
SMALL_BASE_US = 10.0
SMALL_PER_HOP_US = 2.0
# Large messages: a floor that says "badly wrong", not "no P2P" (through host memory the
# incident still moved 32.6 GB/s). A PCIe Gen4 x16 link carries ~25 GB/s a direction and NCCL
# reaches 12-20 GB/s busbw on it with or without P2P; under 8 GB/s at 64 MiB something else is
# broken: a link trained at a lower width or speed, or NCCL using a network socket between
# GPUs of one host.
LARGE_REFERENCE_BYTES = 64 * MIB
LARGE_MIN_BUSBW_GBPS = 8.0

# Per engine: how it times one operation over the ranks, and what its default limits rest on (None: nothing
# measured with this engine yet, so its limits only warn). Calibrating the torch loop takes, on one host,
# its figures at SMALL_REFERENCE_BYTES with P2P and with NCCL_P2P_DISABLE=1 beside nccl-tests' at the same
# size (scripts/gpu_check.py records them on its first multi-GPU run): the limit lies between the
# two torch-loop figures, and the ratio to nccl-tests carries the estimate above over to it.
ENGINES: dict[str, dict[str, str | None]] = {
    "nccl-tests": {
        "timing": "mean over ranks",
        "calibration": "nccl-tests all_reduce_perf, 8x RTX PRO 6000 on PCIe Gen5 with P2P: ~24 us at 256 B..64 KiB "
                       "(voipmonitor/rtx6kpro, hardware/pcie-bandwidth.md); without P2P 12-15 us a hop",
    },
    "torch-nccl": {"timing": "max over ranks", "calibration": None},
    "torch-gloo": {"timing": "max over ranks", "calibration": None},
}
GIVEN_CALIBRATION = "the thresholds option (the user's own baseline)"


def engine_timing(engine: str) -> str:
    """How ``engine`` times one operation over the ranks: mean (nccl-tests) or max (the torch loop)."""
    return str(ENGINES.get(engine, ENGINES["nccl-tests"])["timing"])


def default_thresholds(nranks: int, engine: str) -> list[dict[str, Any]]:
    if engine == "torch-gloo" or nranks < 2:
        return []
    hops = 2 * (nranks - 1)
    calibration = ENGINES.get(engine, ENGINES["nccl-tests"])["calibration"]
    uncalibrated = "" if calibration else (
        f"; measured so with nccl-tests (mean over ranks), not yet with {engine} ({engine_timing(engine)}, "
        "torch's cost per call added): it warns until calibrated")
    limits = [
        {"collective": "all_reduce", "size_bytes": SMALL_REFERENCE_BYTES,
         "max_time_us": SMALL_BASE_US + SMALL_PER_HOP_US * hops, "severity": "critical",
         "why": f"{nranks} GPUs with working P2P finish a {human_bytes(SMALL_REFERENCE_BYTES)} all-reduce in "
                f"about {SMALL_BASE_US:g} us plus ~1 us for each of the {hops} ring hops; through host memory "
                f"every hop costs several us more{uncalibrated}"},
        {"collective": "all_reduce", "size_bytes": LARGE_REFERENCE_BYTES, "min_busbw_gbps": LARGE_MIN_BUSBW_GBPS,
         "severity": "warning",
         # The floor is Gen4's; the text names no generation of this host's GPUs, which the benchmark does not know.
         "why": f"GPUs of one host on PCIe x16 links reach {LARGE_MIN_BUSBW_GBPS:g} GB/s busbw or more with or "
                "without P2P (12-20 GB/s on Gen4, more on Gen5); less points to a degraded link or a network "
                f"transport between GPUs of one host{uncalibrated}"},
    ]
    return applied(limits, engine, calibration)


def applied(thresholds: list[dict[str, Any]], engine: str, calibration: str | None) -> list[dict[str, Any]]:
    """The thresholds as they judge ``engine``'s figures: with its timing rule and their calibration; one
    without a calibration is at most a warning."""
    out = []
    for threshold in thresholds:
        item = dict(threshold, timing=engine_timing(engine), calibration=calibration)
        if calibration is None and item["severity"] == "critical":
            item["severity"] = "warning"
        out.append(item)
    return out


def thresholds_for(given: list[dict[str, Any]] | None, nranks: int, engine: str) -> list[dict[str, Any]]:
    """The thresholds a run applies: the user's (checked by normalize_thresholds, calibrated by whoever gave
    them), else the engine's defaults."""
    if given is None:
        return default_thresholds(nranks, engine)
    return applied(given, engine, GIVEN_CALIBRATION)


def calibration_figures(engine: str, nranks: int | None, runs: dict[str, list[dict[str, Any]]],
                        thresholds: list[dict[str, Any]]) -> dict[str, Any]:
    """What a multi-GPU run gives to calibrate ``engine``'s limits: per threshold size, the best time of each
    run (``runs``: label -> all-reduce rows, e.g. the engine with P2P, with NCCL_P2P_DISABLE=1, and nccl-tests
    beside it), the limit that applied and whether it was calibrated. Null where a run measured no size near."""
    sizes = sorted({t["size_bytes"] for t in thresholds if "max_time_us" in t} | {SMALL_REFERENCE_BYTES})
    at = {}
    for size in sizes:
        figures: dict[str, Any] = {}
        for label, rows in runs.items():
            row = nearest_row(rows, size)
            measured = best_time(row) if row is not None else None
            figures[label] = {"time_us": measured[1], "size_bytes": row["size_bytes"]} if measured and row else None
        limit = next((t for t in thresholds if t["size_bytes"] == size and "max_time_us" in t), None)
        at[str(size)] = {"runs": figures, "limit_us": limit["max_time_us"] if limit else None,
                         "calibration": limit.get("calibration") if limit else None}
    return {"engine": engine, "timing": engine_timing(engine), "nranks": nranks, "at_size_bytes": at,
            "calibrated": ENGINES.get(engine, {}).get("calibration") is not None}


def normalize_thresholds(entries: list[Any]) -> list[dict[str, Any]]:
    """Validate user thresholds: each needs size_bytes and max_time_us and/or min_busbw_gbps."""
    out = []
    for index, entry in enumerate(entries):
        where = f"thresholds[{index}]"
        if not isinstance(entry, dict):
            raise BenchInputError(f"{where}: expected a mapping such as {{size_bytes: 16384, max_time_us: 30}}, "
                                  f"got {entry!r}")
        unknown = unknown_keys(entry, THRESHOLD_KEYS, where)
        if unknown:
            raise BenchInputError("; ".join(unknown))
        try:
            size = int(entry["size_bytes"])
        except (KeyError, TypeError, ValueError):
            raise BenchInputError(f"{where}: size_bytes (an integer number of bytes) is required") from None
        if size < 1:
            raise BenchInputError(f"{where}: size_bytes must be positive")
        item: dict[str, Any] = {"collective": str(entry.get("collective") or "all_reduce"), "size_bytes": size}
        if item["collective"] not in COLLECTIVES:
            raise BenchInputError(f"{where}: collective must be one of {', '.join(COLLECTIVES)}")
        for key in ("max_time_us", "min_busbw_gbps"):
            if entry.get(key) is not None:
                try:
                    item[key] = float(entry[key])
                except (TypeError, ValueError):
                    raise BenchInputError(f"{where}: {key} must be a number") from None
                if not math.isfinite(item[key]) or item[key] <= 0:
                    # NaN compares false with everything: a limit of NaN would judge nothing, silently.
                    raise BenchInputError(f"{where}: {key}: expected a positive, finite number; got {entry[key]!r}")
        if "max_time_us" not in item and "min_busbw_gbps" not in item:
            raise BenchInputError(f"{where}: give max_time_us, min_busbw_gbps or both")
        severity = str(entry.get("severity") or ("critical" if "max_time_us" in item else "warning"))
        if severity not in SEVERITY_RANK:
            raise BenchInputError(f"{where}: severity must be critical, warning or info")
        item["severity"] = severity
        if entry.get("why"):
            item["why"] = str(entry["why"])
        out.append(item)
    return out


def evaluate_thresholds(collectives: dict[str, list[dict[str, Any]]],
                        thresholds: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(violations, thresholds that no measured size could judge). The better placement is judged."""
    violations = []
    unjudged = []
    for threshold in thresholds:
        name = threshold["collective"]
        if name not in collectives and collectives:
            # A limit of one collective never judges another's numbers, nor numbers of an unknown one.
            measured = ", ".join(sorted(c for c in collectives if c != UNKNOWN_COLLECTIVE))
            said = (f"the results are of {measured}" if measured else
                    "the log does not say which collective it measured (keep its command line or its "
                    "'# Collective test starting' line)")
            unjudged.append(dict(threshold, reason=f"{said}; limits for {name} judge {name} results only"))
            continue
        rows = collectives.get(name) or []
        row = nearest_row(rows, threshold["size_bytes"])
        if row is None:
            unjudged.append(dict(threshold, reason="no measured size within a factor of 2"))
            continue
        checks = []
        if "max_time_us" in threshold:
            checks.append(("time_us", best_time(row), threshold["max_time_us"], lambda v, lim: v > lim))
        if "min_busbw_gbps" in threshold:
            checks.append(("busbw_gbps", best_busbw(row), threshold["min_busbw_gbps"], lambda v, lim: v < lim))
        for metric, measured, limit, breached in checks:
            if measured is None:
                unjudged.append(dict(threshold, reason=f"no {metric} at {row['size_bytes']} B"))
                continue
            placement, value = measured
            if breached(value, limit):
                violations.append({
                    "collective": threshold["collective"],
                    "size_bytes": threshold["size_bytes"],
                    "measured_size_bytes": row["size_bytes"],
                    "metric": metric,
                    "limit": limit,
                    "measured": value,
                    "placement": placement,
                    "severity": threshold["severity"],
                    "why": threshold.get("why", ""),
                })
    return violations, unjudged
