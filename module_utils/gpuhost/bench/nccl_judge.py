"""What the NCCL benchmark's numbers mean: thresholds, size classes, tuning, findings.

Pure functions over plain data: the harness's JSON events, nccl-tests results as
``nccl_tests.NcclTestsRun.as_dict()`` gives them, and the transport summary of an
``NCCL_DEBUG=INFO`` log. Nothing here starts a process, so every rule is tested
without a GPU.

A result row is the nccl-tests shape: ``size_bytes``, ``count``, ``type``, ``redop``,
``out_of_place`` and ``in_place``, each ``{time_us, algbw_gbps, busbw_gbps, wrong}``
or null when that placement was not measured (torch's all_reduce is in place only).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ansible.module_utils.gpuhost.bench.harness_runner import harness_events
from ansible.module_utils.gpuhost.rules.host import SEVERITY_RANK, Finding

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

ENGINES = ("auto", "nccl-tests", "torch-nccl", "torch-gloo")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
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

# Default candidate environments for tuning: the host as it is, P2P off (the control, and the
# remedy when P2P is broken), P2P allowed across the whole system (NCCL's default cut-off is
# PXB; GPUs behind different root ports, or in a VM, may peer fine beyond it), and each protocol.
DEFAULT_CANDIDATES: tuple[dict[str, Any], ...] = (
    {"name": "as-is", "env": {}},
    {"name": "p2p-disabled", "env": {"NCCL_P2P_DISABLE": "1"}},
    {"name": "p2p-level-sys", "env": {"NCCL_P2P_LEVEL": "SYS"}},
    {"name": "proto-ll", "env": {"NCCL_PROTO": "LL"}},
    {"name": "proto-ll128", "env": {"NCCL_PROTO": "LL128"}},
    {"name": "proto-simple", "env": {"NCCL_PROTO": "Simple"}},
)

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

# The P2P-disabled control: a hop through host memory costs several times a P2P hop (a copy between
# two GPUs takes 0.4-1.4 us with P2P, 12-15 us without), so where P2P works the control is clearly
# slower on small messages. Within 10% of it, P2P gives nothing.
P2P_NO_GAIN_RATIO = 0.9

# Tuning: a candidate within this fraction of the best score loses to the simpler environment.
SCORE_TIE = 0.03


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


def human_bytes(size: int) -> str:
    for unit, factor in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


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
    counts = [m.get("wrong") for row in rows for _, m in measurements(row)]
    checked = [c for c in counts if isinstance(c, int)]
    return sum(checked) if checked else None


def avg_busbw(rows: list[dict[str, Any]]) -> float | None:
    """nccl-tests' footer figure: the mean busbw over every size and placement."""
    values = [m["busbw_gbps"] for row in rows for _, m in measurements(row)
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


# ---------------------------------------------------------------------------
# Thresholds


def default_thresholds(nranks: int, engine: str) -> list[dict[str, Any]]:
    if engine == "torch-gloo" or nranks < 2:
        return []
    hops = 2 * (nranks - 1)
    return [
        {"collective": "all_reduce", "size_bytes": SMALL_REFERENCE_BYTES,
         "max_time_us": SMALL_BASE_US + SMALL_PER_HOP_US * hops, "severity": "critical",
         "why": f"{nranks} GPUs with working P2P finish a {human_bytes(SMALL_REFERENCE_BYTES)} all-reduce in "
                f"about {SMALL_BASE_US:g} us plus ~1 us for each of the {hops} ring hops; through host memory "
                "every hop costs several us more"},
        {"collective": "all_reduce", "size_bytes": LARGE_REFERENCE_BYTES, "min_busbw_gbps": LARGE_MIN_BUSBW_GBPS,
         "severity": "warning",
         "why": "a PCIe Gen4 x16 host reaches 12-20 GB/s busbw with or without P2P; less points to a degraded "
                "link or a network transport between GPUs of one host"},
    ]


def normalize_thresholds(entries: list[Any]) -> list[dict[str, Any]]:
    """Validate user thresholds: each needs size_bytes and max_time_us and/or min_busbw_gbps."""
    out = []
    for index, entry in enumerate(entries):
        where = f"thresholds[{index}]"
        if not isinstance(entry, dict):
            raise BenchInputError(f"{where}: expected a mapping such as {{size_bytes: 16384, max_time_us: 30}}, "
                                  f"got {entry!r}")
        unknown = set(entry) - {"collective", "size_bytes", "max_time_us", "min_busbw_gbps", "severity", "why"}
        if unknown:
            raise BenchInputError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
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
        rows = collectives.get(threshold["collective"]) or []
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


# ---------------------------------------------------------------------------
# Tuning


def normalize_candidates(entries: list[Any] | None) -> list[dict[str, Any]]:
    if not entries:
        return [dict(c, env=dict(c["env"])) for c in DEFAULT_CANDIDATES]
    out = []
    names = set()
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not entry.get("name"):
            raise BenchInputError(f"candidates[{index}]: expected {{name: ..., env: {{NCCL_...: ...}}}}, got {entry!r}")
        env = entry.get("env") or {}
        if not isinstance(env, dict):
            raise BenchInputError(f"candidates[{index}].env must be a mapping of variable names to values")
        name = str(entry["name"])
        if name in names:
            raise BenchInputError(f"candidates[{index}]: the name {name!r} is used twice")
        names.add(name)
        out.append({"name": name, "env": {str(k): str(v) for k, v in env.items()}})
    return out


def summarize_candidate(name: str, env: dict[str, str], status: str, collectives: dict[str, list[dict[str, Any]]],
                        primary: str, error: str | None = None, hung_at: Any = None) -> dict[str, Any]:
    rows = collectives.get(primary) or []
    wrong = wrong_total([r for rs in collectives.values() for r in rs])
    small_row = nearest_row(rows, SMALL_REFERENCE_BYTES)
    small_time = best_time(small_row) if small_row else None
    large_row = max(rows, key=lambda r: r.get("size_bytes") or 0) if rows else None
    large_bw = best_busbw(large_row) if large_row else None
    if status == "ok" and wrong:
        status = "wrong_values"
    summary: dict[str, Any] = {
        "name": name,
        "env": env,
        "status": status,
        "wrong": wrong,
        "small": {"size_bytes": small_row["size_bytes"], "time_us": small_time[1]} if small_time else None,
        "large": {"size_bytes": large_row["size_bytes"], "busbw_gbps": large_bw[1]} if large_bw else None,
    }
    if error:
        summary["error"] = error
    if hung_at:
        summary["hung_at"] = hung_at
    return summary


def choose_best(summaries: list[dict[str, Any]], base_env: dict[str, str]) -> dict[str, Any]:
    """Best candidate per size class, and the one environment to deploy with.

    Only candidates that finished with correct values compete. The recommendation maximises the
    geometric mean of two ratios to the best: small-message latency and large-message busbw, so
    that a protocol that wins one class by losing the other badly is not chosen. Within 3% of
    the top score, the candidate with the fewest variables wins (as-is first): settings that buy
    nothing are not worth carrying into the deployment.
    """
    eligible = [s for s in summaries if s["status"] == "ok" and s.get("small") and s.get("large")]
    result: dict[str, Any] = {"candidates": summaries, "best": {"small": None, "large": None},
                              "recommended": None, "recommended_env": None}
    if not eligible:
        return result
    small = min(eligible, key=lambda s: s["small"]["time_us"])
    large = max(eligible, key=lambda s: s["large"]["busbw_gbps"])
    result["best"]["small"] = {"name": small["name"], "env": small["env"], **small["small"]}
    result["best"]["large"] = {"name": large["name"], "env": large["env"], **large["large"]}
    best_time_us = small["small"]["time_us"]
    best_bw = large["large"]["busbw_gbps"]

    def score(s: dict[str, Any]) -> float:
        time_ratio = best_time_us / s["small"]["time_us"] if s["small"]["time_us"] > 0 else 0.0
        bw_ratio = s["large"]["busbw_gbps"] / best_bw if best_bw > 0 else 1.0
        return math.sqrt(max(time_ratio, 0.0) * max(bw_ratio, 0.0))

    scores = {s["name"]: score(s) for s in eligible}
    top = max(scores.values())
    close = [s for s in eligible if scores[s["name"]] >= top * (1 - SCORE_TIE)]
    chosen = min(close, key=lambda s: (len(s["env"]), summaries.index(s)))
    result["recommended"] = {
        "name": chosen["name"],
        "env": chosen["env"],
        "score": round(scores[chosen["name"]], 4),
        "why": (f"{chosen['small']['time_us']:g} us at {human_bytes(chosen['small']['size_bytes'])} "
                f"(best {best_time_us:g} us, {small['name']}), {chosen['large']['busbw_gbps']:g} GB/s busbw at "
                f"{human_bytes(chosen['large']['size_bytes'])} (best {best_bw:g} GB/s, {large['name']})"),
    }
    result["recommended_env"] = {**base_env, **chosen["env"]}
    for s in summaries:
        if s["name"] in scores:
            s["score"] = round(scores[s["name"]], 4)
    return result


# ---------------------------------------------------------------------------
# Findings


P2P_REMEDY = (
    "This is the signature of NCCL going through host memory instead of GPU peer-to-peer. See the audit's "
    "p2p_not_supported finding (gpu_host_facts) for why P2P is missing on this host. In a Proxmox/QEMU guest: "
    "machine q35, each GPU passed as its own function (hostpciN: 0000:41:00.0,pcie=1), no hidden=1, and "
    "`args: -set device.hostpci0.x-nv-gpudirect-clique=0 -set device.hostpci1.x-nv-gpudirect-clique=0 ...` "
    "for the GPUs of one tensor-parallel group; then re-run this benchmark. If P2P cannot be had: set "
    "NCCL_P2P_DISABLE=1 explicitly, start SGLang with --disable-custom-all-reduce, and prefer fewer GPUs per "
    "tensor-parallel group on one NUMA node, or bare metal.")


def transport_names(transports: dict[str, Any] | None) -> dict[str, int]:
    """Transport name -> connections, from a TransportSummary.as_dict()."""
    if not isinstance(transports, dict):
        return {}
    counts = transports.get("transports")
    if isinstance(counts, dict):
        return {str(k): int(v) for k, v in counts.items() if isinstance(v, int)}
    return {}


def uses_p2p(counts: dict[str, int]) -> bool | None:
    if not counts:
        return None
    return any(name.upper().startswith("P2P") for name in counts)


def findings_for_run(*, engine: str, nranks: int, collectives: dict[str, list[dict[str, Any]]],
                     violations: list[dict[str, Any]], env: dict[str, str], status: str = "ok",
                     hung_at: dict[str, Any] | None = None, timeout_s: float | None = None,
                     transports: dict[str, Any] | None = None, alive: list[int] | None = None,
                     control: dict[str, Any] | None = None, label: str = "") -> list[Finding]:
    """Findings for one sweep (one candidate). ``control`` is the P2P-disabled candidate's summary."""
    findings: list[Finding] = []
    where = f" (candidate {label})" if label else ""
    env_text = " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "no NCCL variables"

    wrong_rows = [{"collective": c, "size_bytes": r["size_bytes"],
                   **{p: m["wrong"] for p, m in measurements(r) if m.get("wrong")}}
                  for c, rows in collectives.items() for r in rows
                  if any(m.get("wrong") for _, m in measurements(r))]
    if wrong_rows:
        findings.append(Finding(
            "nccl_wrong_values", "critical",
            f"The {engine} benchmark{where} returned wrong values in {len(wrong_rows)} measurement(s): the "
            "collective completes but the data that arrives is not what was sent.",
            {"engine": engine, "nranks": nranks, "env": env_text, "wrong": wrong_rows[:20]},
            "Do not serve with these settings. On GPUs whose P2P grant is a private mirror (NVIDIA/nccl#2335) "
            "writes succeed and the peer reads zeros: run the P2P probe (gpu_p2p_probe) and compare with "
            "NCCL_P2P_DISABLE=1 (the tuning's p2p-disabled candidate); if that one is correct, deploy with "
            "NCCL_P2P_DISABLE=1 and SGLang --disable-custom-all-reduce."))

    if status == "timeout":
        size = (hung_at or {}).get("size_bytes")
        at = (f"at {(hung_at or {}).get('collective')} {human_bytes(size)}" if size
              else "at start-up, before every rank had joined (torch import, rendezvous, NCCL initialisation),")
        findings.append(Finding(
            "nccl_timeout", "critical",
            f"The {engine} benchmark{where} hung {at} and was stopped after {timeout_s:g} s.",
            {"engine": engine, "nranks": nranks, "env": env_text, "hung_at": hung_at, "timeout_s": timeout_s,
             "ranks_alive_at_deadline": alive or []},
            "A collective that never finishes is what a broken P2P window does to NCCL (NVIDIA/nccl#2335), as "
            "do an IOMMU without passthrough and nvidia_uvm HMM on some hosts. Re-run with NCCL_P2P_DISABLE=1: "
            "if it completes, P2P is the cause (run gpu_p2p_probe for the pair). Check `dmesg` for Xid and "
            "IOMMU faults, and that iommu=pt is on the kernel command line."))

    small = [v for v in violations if v["metric"] == "time_us"]
    if small:
        worst_violation = max(small, key=lambda v: v["measured"] / v["limit"])
        counts = transport_names(transports)
        evidence: dict[str, Any] = {
            "engine": engine, "nranks": nranks, "env": env_text,
            "measured_us": worst_violation["measured"], "limit_us": worst_violation["limit"],
            "size_bytes": worst_violation["measured_size_bytes"], "why_limit": worst_violation["why"],
            "transports": counts or "unknown (no NCCL_DEBUG=INFO lines)",
        }
        if control and control.get("small"):
            evidence["p2p_disabled_us"] = control["small"]["time_us"]
            ratio = worst_violation["measured"] / control["small"]["time_us"] if control["small"]["time_us"] else 0
            evidence["ratio_to_p2p_disabled"] = round(ratio, 3)
        findings.append(Finding(
            "nccl_small_message_latency", worst_violation["severity"],
            f"All-reduce of {human_bytes(worst_violation['measured_size_bytes'])} on {nranks} ranks takes "
            f"{worst_violation['measured']:g} us{where}, above the {worst_violation['limit']:g} us that GPUs with "
            "working P2P need: decode, which all-reduces small messages several times a layer, pays this on "
            "every token.",
            evidence, P2P_REMEDY))

    bandwidth = [v for v in violations if v["metric"] == "busbw_gbps"]
    if bandwidth:
        v = min(bandwidth, key=lambda v: v["measured"] / v["limit"])
        findings.append(Finding(
            "nccl_low_bus_bandwidth", v["severity"],
            f"{v['collective']} of {human_bytes(v['measured_size_bytes'])} reaches {v['measured']:g} GB/s busbw"
            f"{where}, under the {v['limit']:g} GB/s floor.",
            {"engine": engine, "nranks": nranks, "env": env_text, "violations": bandwidth, "why_limit": v["why"],
             "transports": transport_names(transports) or "unknown"},
            "Check each GPU's link in the audit (current vs max link speed and width; a slot at x4 or Gen1 "
            "shows here), that NCCL did not pick NET/Socket between GPUs of this host (NCCL_DEBUG=INFO), and "
            "compare the tuning candidates: NCCL_P2P_LEVEL=SYS or NCCL_P2P_DISABLE=1 may move more."))

    p2p_off = env.get("NCCL_P2P_DISABLE") == "1" or env.get("NCCL_P2P_LEVEL") == "LOC"
    own = summarize_candidate(label or "as-is", env, status, collectives, next(iter(collectives), "all_reduce"))
    if (control and control.get("small") and own.get("small") and not p2p_off and nranks > 1
            and engine != "torch-gloo" and not small
            and own["small"]["time_us"] >= P2P_NO_GAIN_RATIO * control["small"]["time_us"]):
        findings.append(Finding(
            "nccl_p2p_no_gain", "warning",
            f"Small all-reduces take {own['small']['time_us']:g} us{where} and {control['small']['time_us']:g} us "
            "with NCCL_P2P_DISABLE=1: peer-to-peer brings nothing here, so NCCL goes (or might as well go) "
            "through host memory.",
            {"engine": engine, "nranks": nranks, "size_bytes": own["small"]["size_bytes"],
             "time_us": own["small"]["time_us"], "p2p_disabled_us": control["small"]["time_us"],
             "transports": transport_names(transports) or "unknown"},
            P2P_REMEDY))

    counts = transport_names(transports)
    p2p = (transports or {}).get("p2p_used") if isinstance(transports, dict) and "p2p_used" in transports \
        else uses_p2p(counts)
    deliberate = env.get("NCCL_P2P_DISABLE") == "1" or env.get("NCCL_P2P_LEVEL") == "LOC"
    if p2p is False and nranks > 1 and not deliberate and engine != "torch-gloo":
        findings.append(Finding(
            "nccl_no_p2p_transport", "warning",
            f"NCCL connected the {nranks} ranks{where} without P2P: every channel goes through "
            f"{', '.join(sorted(counts))}, i.e. host memory or the network.",
            {"engine": engine, "transports": counts, "env": env_text},
            P2P_REMEDY))
    return findings


def tuning_findings(tuning: dict[str, Any], primary_label: str = "as-is") -> list[Finding]:
    """What the tuning says beyond each candidate's own findings."""
    findings: list[Finding] = []
    summaries = tuning.get("candidates") or []
    recommended = tuning.get("recommended")
    broken = [s for s in summaries if s["status"] != "ok"]
    if recommended is None and summaries:
        findings.append(Finding(
            "nccl_tuning_no_working_candidate", "critical",
            f"None of the {len(summaries)} NCCL environments tried finished with correct values.",
            {"candidates": [{k: s.get(k) for k in ("name", "env", "status", "error", "hung_at")} for s in summaries]},
            "Fix what the nccl_wrong_values / nccl_timeout findings name before deploying; the audit "
            "(gpu_host_facts) and the P2P probe (gpu_p2p_probe) tell which GPUs and which path fail."))
        return findings
    if recommended is None:
        return findings
    baseline = next((s for s in summaries if s["name"] == primary_label), None)
    if baseline is not None and baseline["status"] != "ok":
        severity = "critical"
        summary = (f"As the host is, NCCL fails ({baseline['status']}); with {recommended['name']} it works: "
                   "deploy with that environment.")
    elif recommended["name"] != primary_label and recommended["env"]:
        severity = "info"
        summary = f"NCCL does better with {recommended['name']} than as-is: {recommended['why']}."
    else:
        return findings
    findings.append(Finding(
        "nccl_tuning_recommendation", severity, summary,
        {"recommended": recommended, "best": tuning.get("best"),
         "failed": [{k: s.get(k) for k in ("name", "status", "error")} for s in broken]},
        "Use recommended_env for the serving processes (the SGLang role's environment); a P2P-disabled "
        "recommendation also means SGLang --disable-custom-all-reduce."))
    return findings


def sort_findings(findings: list[Finding]) -> list[dict[str, Any]]:
    unique: dict[tuple[str, str], Finding] = {}
    for finding in findings:
        unique.setdefault((finding.id, finding.summary), finding)
    ordered = sorted(unique.values(), key=lambda f: SEVERITY_RANK.get(f.severity, len(SEVERITY_RANK)))
    return [f.as_dict() for f in ordered]
