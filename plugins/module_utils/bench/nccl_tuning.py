"""Tuning NCCL: the candidate environments, each one's summary, and the one to deploy with.

Pure functions over plain data: a candidate is ``{name, env: {NCCL_...: value}}``; its summary gives
the small-message latency and the large-message bus bandwidth of its sweep, and ``choose_best``
weighs them into the recommended environment.
"""

from __future__ import annotations

import math
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_judge import (
    SMALL_REFERENCE_BYTES,
    BenchInputError,
    best_busbw,
    best_time,
    nearest_row,
    not_measured,
    wrong_total,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.units import human_bytes
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.known_names import unknown_keys

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

# Tuning: a candidate within this fraction of the best score loses to the simpler environment.
SCORE_TIE = 0.03


def normalize_candidates(entries: list[Any] | None) -> list[dict[str, Any]]:
    if not entries:
        return [dict(c, env=dict(c["env"])) for c in DEFAULT_CANDIDATES]
    out = []
    names = set()
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not entry.get("name"):
            raise BenchInputError(f"candidates[{index}]: expected {{name: ..., env: {{NCCL_...: ...}}}}, got {entry!r}")
        unknown = unknown_keys(entry, ("name", "env"), f"candidates[{index}]")
        if unknown:
            raise BenchInputError("; ".join(unknown))
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
    elif status == "ok" and not_measured(collectives):
        # inf or nan printed for some size: no evidence, so no candidate to recommend.
        status = "not_measured"
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
