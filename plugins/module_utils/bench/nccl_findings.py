"""What one NCCL benchmark sweep and the tuning say about the host: the findings, worst first.

Pure functions over plain data: the sweep's result rows, its threshold violations (nccl_thresholds),
the transport summary of an ``NCCL_DEBUG=INFO`` log (with the GPU pairs where NCCL said P2P could not
be enabled), and the tuning (nccl_tuning). Every finding is
made from the findings catalog (``findings.catalog.make``), which holds its severity and remedy.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_judge import measurements, not_measured
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_tuning import summarize_candidate
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.units import human_bytes
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make, text
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding, worst_first
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_debug import REFUSAL_MEANING

# The P2P-disabled control: a hop through host memory costs several times a P2P hop (a copy between
# two GPUs takes 0.4-1.4 us with P2P, 12-15 us without), so where P2P works the control is clearly
# slower on small messages. Within 10% of it, P2P gives nothing.
P2P_NO_GAIN_RATIO = 0.9


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
                  if any(m.get("wrong") for _unused, m in measurements(r))]
    if wrong_rows:
        findings.append(make(
            "nccl_wrong_values",
            f"The {engine} benchmark{where} returned wrong values in {len(wrong_rows)} measurement(s): the "
            "collective completes but the data that arrives is not what was sent.",
            {"engine": engine, "nranks": nranks, "env": env_text, "wrong": wrong_rows[:20]}))

    unmeasured = not_measured(collectives)
    if unmeasured:
        findings.append(make(
            "nccl_results_not_measured",
            f"The {engine} benchmark{where} printed inf or nan instead of a time at {len(unmeasured)} size(s), from "
            f"{human_bytes(unmeasured[0]['size_bytes'] or 0)} of {unmeasured[0]['collective']}: those are no "
            "measurement, and the curve is not evidence of a healthy host.",
            {"engine": engine, "nranks": nranks, "env": env_text, "sizes": unmeasured[:20]}))

    if status == "timeout":
        size = (hung_at or {}).get("size_bytes")
        at = (f"at {(hung_at or {}).get('collective')} {human_bytes(size)}" if size
              else "at start-up, before every rank had joined (torch import, rendezvous, NCCL initialisation),")
        findings.append(make(
            "nccl_timeout",
            f"The {engine} benchmark{where} hung {at} and was stopped after {timeout_s:g} s.",
            {"engine": engine, "nranks": nranks, "env": env_text, "hung_at": hung_at, "timeout_s": timeout_s,
             "ranks_alive_at_deadline": alive or []}))

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
        what = "All-reduce" if worst_violation["collective"] == "all_reduce" else worst_violation["collective"]
        findings.append(make(
            "nccl_small_message_latency",
            f"{what} of {human_bytes(worst_violation['measured_size_bytes'])} on {nranks} ranks takes "
            f"{worst_violation['measured']:g} us{where}, above the {worst_violation['limit']:g} us that GPUs with "
            "working P2P need: decode, which all-reduces small messages several times a layer, pays this on "
            "every token.",
            evidence, severity=worst_violation["severity"]))

    bandwidth = [v for v in violations if v["metric"] == "busbw_gbps"]
    if bandwidth:
        v = min(bandwidth, key=lambda v: v["measured"] / v["limit"])
        findings.append(make(
            "nccl_low_bus_bandwidth",
            f"{v['collective']} of {human_bytes(v['measured_size_bytes'])} reaches {v['measured']:g} GB/s busbw"
            f"{where}, under the {v['limit']:g} GB/s floor.",
            {"engine": engine, "nranks": nranks, "env": env_text, "violations": bandwidth, "why_limit": v["why"],
             "transports": transport_names(transports) or "unknown"},
            severity=v["severity"]))

    p2p_off = env.get("NCCL_P2P_DISABLE") == "1" or env.get("NCCL_P2P_LEVEL") == "LOC"
    own = summarize_candidate(label or "as-is", env, status, collectives, next(iter(collectives), "all_reduce"))
    if (control and control.get("small") and own.get("small") and not p2p_off and nranks > 1
            and engine != "torch-gloo" and not small
            and own["small"]["time_us"] >= P2P_NO_GAIN_RATIO * control["small"]["time_us"]):
        findings.append(make(
            "nccl_p2p_no_gain",
            f"Small all-reduces take {own['small']['time_us']:g} us{where} and {control['small']['time_us']:g} us "
            "with NCCL_P2P_DISABLE=1: peer-to-peer brings nothing here, so NCCL goes (or might as well go) "
            "through host memory.",
            {"engine": engine, "nranks": nranks, "size_bytes": own["small"]["size_bytes"],
             "time_us": own["small"]["time_us"], "p2p_disabled_us": control["small"]["time_us"],
             "transports": transport_names(transports) or "unknown"}))

    refused = p2p_refused_finding(engine, nranks, transports, env_text, where)
    if refused is not None:
        findings.append(refused)

    counts = transport_names(transports)
    p2p = (transports or {}).get("p2p_used") if isinstance(transports, dict) and "p2p_used" in transports \
        else uses_p2p(counts)
    deliberate = env.get("NCCL_P2P_DISABLE") == "1" or env.get("NCCL_P2P_LEVEL") == "LOC"
    if p2p is False and nranks > 1 and not deliberate and engine != "torch-gloo":
        findings.append(make(
            "nccl_no_p2p_transport",
            f"NCCL connected the {nranks} ranks{where} without P2P: every channel goes through "
            f"{', '.join(sorted(counts))}, i.e. host memory or the network.",
            {"engine": engine, "transports": counts, "env": env_text}))
    return findings


def _device_text(device: Any, bus_id: Any, rank: Any, kind: Any) -> str:
    name = f"{'NVML GPU' if kind == 'nvml' else 'CUDA device'} {device}"
    known = [str(bus_id)] if bus_id else []
    known += [f"rank {rank}"] if rank is not None else []
    return f"{name} ({', '.join(known)})" if known else name


def _pair_texts(refusals: list[dict[str, Any]]) -> list[str]:
    """Each GPU pair NCCL named once, whichever way round and however often it said so."""
    pairs: dict[tuple[Any, ...], str] = {}
    hosts = {r.get("host") for r in refusals if r.get("devices")}
    for refusal in refusals:
        devices = refusal.get("devices")
        if not devices:
            continue
        buses = refusal.get("bus_ids") or [None, None]
        ranks = refusal.get("ranks") or [None, None]
        kind = refusal.get("index_kind")
        sides = [(bus or f"{kind}{device}", _device_text(device, bus, rank, kind))
                 for device, bus, rank in zip(devices, buses, ranks, strict=False)]
        key = (refusal.get("host"), frozenset(side for side, _unused in sides))
        on = f" on {refusal.get('host')}" if len(hosts) > 1 and refusal.get("host") else ""
        pairs.setdefault(key, f"{sides[0][1]} and {sides[1][1]}{on}")
    return list(pairs.values())


def p2p_refused_finding(engine: str, nranks: int, transports: dict[str, Any] | None, env_text: str,
                        where: str = "") -> Finding | None:
    """What NCCL_DEBUG=INFO said about P2P it could not enable (nccl_debug's p2p_refusals), as one finding
    naming the pairs; None when it said nothing of the kind."""
    refusals = [r for r in ((transports or {}).get("p2p_refusals") or []) if isinstance(r, dict)] \
        if isinstance(transports, dict) else []
    if not refusals:
        return None
    reasons = sorted({str(r.get("reason")) for r in refusals})
    pairs = _pair_texts(refusals)
    evidence = {"engine": engine, "nranks": nranks, "env": env_text, "pairs": pairs[:28], "reasons": reasons,
                "said": [r.get("message") for r in refusals][:8],
                "transports": transport_names(transports) or "unknown"}
    if reasons == ["environment"]:
        return make("nccl_p2p_refused",
                    f"NCCL did not use P2P{where}: {refusals[0].get('message')}; every GPU pair goes through host "
                    "memory or the network.", evidence, severity="info", remedy=text("nccl_p2p_refused", "environment"))
    meaning = "; ".join(REFUSAL_MEANING.get(reason, reason) for reason in reasons if reason != "environment")
    named = (f" between {len(pairs)} GPU pair(s){where}: {'; '.join(pairs[:6])}"
             + (f" and {len(pairs) - 6} more" if len(pairs) > 6 else "")) if pairs else where
    summary = (f"NCCL could not enable P2P{named}. Why, as NCCL says: {meaning}. Those connections go through host "
               "memory (SHM) or the network.")
    if "nvml_p2p_disabled_nvlink" in reasons:
        return make("nccl_p2p_refused", summary, evidence, severity="critical",
                    remedy=text("nccl_p2p_refused", "nvlink"))
    return make("nccl_p2p_refused", summary, evidence)


def tuning_findings(tuning: dict[str, Any], primary_label: str = "as-is") -> list[Finding]:
    """What the tuning says beyond each candidate's own findings."""
    findings: list[Finding] = []
    summaries = tuning.get("candidates") or []
    recommended = tuning.get("recommended")
    broken = [s for s in summaries if s["status"] != "ok"]
    if recommended is None and summaries:
        findings.append(make(
            "nccl_tuning_no_working_candidate",
            f"None of the {len(summaries)} NCCL environments tried finished with correct values.",
            {"candidates": [{k: s.get(k) for k in ("name", "env", "status", "error", "hung_at")} for s in summaries]}))
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
    findings.append(make(
        "nccl_tuning_recommendation", summary,
        {"recommended": recommended, "best": tuning.get("best"),
         "failed": [{k: s.get(k) for k in ("name", "status", "error")} for s in broken]},
        severity=severity))
    return findings


def sort_findings(findings: list[Finding]) -> list[dict[str, Any]]:
    unique: dict[tuple[str, str], Finding] = {}
    for finding in findings:
        unique.setdefault((finding.id, finding.summary), finding)
    return [f.as_dict() for f in worst_first(unique.values())]
