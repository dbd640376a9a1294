"""Where a deployed server's time per token goes: the measured decode rate set against the communication ceiling.

Pure functions over plain data: the measurement (throughput_client.py or bench_serving.py), the deployment
gate's result (deploy_gate), a threshold. No I/O.

- measured time per token: 1000 / single-stream decode tok/s, in ms;
- the communication ceiling per token: the time all-reduce alone takes per decode step, from the gate's
  ``launch.communication_ceiling`` (``comm_us_per_token``, also under ``batch_1``), else from its
  ``launch.communication_ceiling_tok_s`` (1 / rate). Its source (a measured all-reduce, or an estimate)
  is read from the ceiling where it says so; where nothing is given the ceiling is "unknown", never guessed;
- the share of the measured time all-reduce alone explains (its time / measured, at most what was measured: a
  larger time means the ceiling was priced on a slower path than the one that runs);
- a reference rate where the gate's known-good entries for this GPU and model carry one
  (``reference_decode_tok_s`` with its ``reference_source``), else null;
- ``serving_decode_slow`` when a minimum decode rate is set and the measurement is below it.
"""

from __future__ import annotations

import math
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.host_ceiling import explained_share
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings import catalog
from ansible_collections.gpuhost.gpu.plugins.module_utils.values import as_dict

# Keys a communication ceiling may describe its origin with, first found wins; ``basis`` names its kind
# (``measured_all_reduce`` or ``estimated_from_pair_latency``, model/ceiling.py).
CEILING_SOURCE_KEYS = ("source", "floor_source", "latency_source")


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def gate_ceiling(gate: Any) -> dict[str, Any]:
    """The communication ceiling the gate priced, as all-reduce time per token in us, with its source; nulls
    where it has none."""
    launch = as_dict(as_dict(gate).get("launch"))
    ceiling = launch.get("communication_ceiling")
    ceilings = ceiling if isinstance(ceiling, list) else [ceiling]
    tp = launch.get("tensor_parallel_size")
    for item in (as_dict(c) for c in ceilings):
        for candidate in (item, as_dict(item.get("batch_1"))):
            us = _positive(candidate.get("comm_us_per_token"))
            if us is None or (isinstance(tp, int) and candidate.get("tensor_parallel_size") not in (None, tp)):
                continue
            source = next((candidate.get(k) or item.get(k) for k in CEILING_SOURCE_KEYS
                           if isinstance(candidate.get(k) or item.get(k), str)), None)
            kind = candidate.get("basis") or item.get("basis")
            kind = kind if isinstance(kind, str) else None
            if kind is None and (candidate.get("assumptions") or item.get("assumptions")):
                kind = "estimated"
            assumptions = candidate.get("assumptions") or item.get("assumptions")
            return {"us_per_token": us, "source": source, "kind": kind, "from": "launch.communication_ceiling",
                    "assumptions": [str(a) for a in assumptions] if isinstance(assumptions, list) else [],
                    "basis": launch.get("communication_ceiling_basis")}
    rate = _positive(launch.get("communication_ceiling_tok_s"))
    if rate is not None:
        return {"us_per_token": 1e6 / rate, "source": None, "kind": None, "assumptions": [],
                "from": "launch.communication_ceiling_tok_s", "basis": launch.get("communication_ceiling_basis")}
    return {"us_per_token": None, "source": None, "kind": None, "assumptions": [], "from": None, "basis": None}


def reference(gate: Any) -> dict[str, Any]:
    """A public reference rate for this GPU and model from the gate's matching known-good entries; else nulls."""
    launch = as_dict(as_dict(gate).get("launch"))
    entries = launch.get("known_good_source")
    for entry in (entries if isinstance(entries, list) else []):
        rate = _positive(as_dict(entry).get("reference_decode_tok_s"))
        if rate is not None:
            return {"decode_tok_s": rate, "source": as_dict(entry).get("reference_source"),
                    "entry": as_dict(entry).get("id")}
    return {"decode_tok_s": None, "source": None, "entry": None}


def breakdown(measurement: dict[str, Any], gate: Any) -> dict[str, Any]:
    single = as_dict(measurement.get("single_stream"))
    rate = _positive(single.get("decode_tok_s"))
    measured_ms = 1000 / rate if rate else None
    ceiling = gate_ceiling(gate)
    comm_ms = ceiling["us_per_token"] / 1000 if ceiling["us_per_token"] else None
    share = explained_share(comm_ms, measured_ms)
    ref = reference(gate)
    return {
        "measured_ms_per_token": measured_ms,
        "communication_ceiling_ms_per_token": comm_ms,
        "communication_ceiling_source": ceiling["source"],
        "communication_ceiling_kind": ceiling["kind"],
        "communication_ceiling_assumptions": ceiling["assumptions"],
        "communication_ceiling_from": ceiling["from"],
        "communication_ceiling_basis": ceiling["basis"],
        "comm_share": share,
        "other_ms_per_token": (measured_ms - comm_ms) if comm_ms and measured_ms and comm_ms <= measured_ms
        else None,
        "reference_decode_tok_s": ref["decode_tok_s"],
        "reference_source": ref["source"],
        "reference_entry": ref["entry"],
        "measured_vs_reference": rate / ref["decode_tok_s"] if rate and ref["decode_tok_s"] else None,
    }


def _fmt(value: float | None, digits: int = 1, unit: str = "") -> str:
    return "unknown" if value is None else f"{value:.{digits}f}{unit}"


def breakdown_text(parts: dict[str, Any]) -> str:
    """The breakdown in one line: per token measured, the communication ceiling and its source, the share, the
    reference."""
    if parts["measured_ms_per_token"] is None:
        return "no decode rate measured"
    text = f"{_fmt(parts['measured_ms_per_token'])} ms per token"
    if parts["communication_ceiling_ms_per_token"] is None:
        text += "; communication ceiling unknown (the gate priced none)"
    else:
        said = [part for part in (parts.get("communication_ceiling_kind"), parts["communication_ceiling_source"])
                if part]
        source = ": ".join(said) or "source not stated"
        comm_ms = _fmt(parts["communication_ceiling_ms_per_token"], 2)
        text += (f"; communication ceiling {comm_ms} ms per token ({source}), "
                 f"{_fmt(parts['comm_share'] * 100 if parts['comm_share'] is not None else None, 0)}% of it")
    if parts["reference_decode_tok_s"] is not None:
        text += (f"; reference {_fmt(parts['reference_decode_tok_s'])} tok/s ({parts['reference_source']}), "
                 f"measured {_fmt(parts['measured_vs_reference'] * 100, 0)}% of it")
    else:
        text += "; no reference figure for this GPU and model"
    return text


def judge(measurement: dict[str, Any], min_decode_tok_s: float | None) -> list[dict[str, Any]]:
    """``serving_decode_slow`` when a minimum is set and the single-stream decode rate is below it."""
    if min_decode_tok_s is None:
        return []
    rate = _positive(as_dict(measurement.get("single_stream")).get("decode_tok_s"))
    if rate is not None and rate >= min_decode_tok_s:
        return []
    said = "no decode rate could be measured" if rate is None else f"{rate:.1f} tok/s"
    return [catalog.make("serving_decode_slow",
                         f"single-stream decode is {said}, below the minimum of {min_decode_tok_s:g} tok/s",
                         {"decode_tok_s": rate, "min_decode_tok_s": min_decode_tok_s}).as_dict()]


def summary(measurement: dict[str, Any], parts: dict[str, Any]) -> str:
    single = as_dict(measurement.get("single_stream"))
    agg = as_dict(measurement.get("aggregate"))
    return (f"{_fmt(single.get('decode_tok_s'))} tok/s single stream, time to first token "
            f"{_fmt(single.get('ttft_ms'), 0, ' ms')}, {_fmt(agg.get('tok_s'))} tok/s at {agg.get('concurrency')} "
            f"concurrent streams ({measurement.get('tool')}): {breakdown_text(parts)}")
