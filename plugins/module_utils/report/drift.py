"""A host's report with its drift since the previous report, its P2P proof's basis, and their findings.

How the record persists, so that the same facts twice change no file:

- ``drift`` holds the changes the last audit that found any found against the report before it, each with
  ``since`` (that report's date: its file's modification time, as reports carry no clock). An audit that
  finds no change keeps the record as it was, so it stays until a later change replaces it. A later change
  replaces it, except for what is still wrong: a GPU still gone and a link still trained lower are carried
  into the new record with their own ``since``, so a second change does not hide them.
- ``proof`` is written when a benchmark is folded in: ``measured_at`` (epoch seconds; null when the results
  were read from a log, whose time is not known) and ``basis``, the facts it was measured on. It stays with the
  benchmark until a new one, so p2p_proof_stale holds on every audit until the host is measured again, not
  for one audit only. A report from before proofs were recorded that holds a benchmark gets one with an
  unknown time, measured on the facts of that report.
- gpu_gone, gpu_added and link_trained_lower come from the record; p2p_proof_stale from the proof's basis
  against the facts now. They are made afresh each time, never read back from the previous report.
"""

from __future__ import annotations

import time
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import with_findings
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.drift import (
    compare,
    drift_findings,
    gone,
    lowered,
    stale_proof,
    still_holds,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.drift_basis import ITEMS, basis_of, stored_basis

CHANGE_KEYS = ("item", "subject", "before", "after", "invalidates_proof", "since")


def _order(change: dict[str, Any]) -> tuple[int, str]:
    return ITEMS.index(change["item"]), str(change.get("subject") or "")


def stored_drift(value: Any) -> dict[str, Any] | None:
    """The drift of a previous report, if in the shape written today (else none: a record edited by hand
    or of another version is not carried on)."""
    if not isinstance(value, dict) or not isinstance(value.get("changes"), list):
        return None
    since = value.get("since") if isinstance(value.get("since"), str) else None
    changes = [c for c in value["changes"]
               if isinstance(c, dict) and set(CHANGE_KEYS) <= set(c) and c.get("item") in ITEMS]
    return {"since": since, "changes": [{k: c[k] for k in CHANGE_KEYS} for c in changes]}


def next_drift(previous: dict[str, Any] | None, previous_date: str | None, basis: dict[str, Any],
               proxmox_host: bool) -> dict[str, Any] | None:
    """The drift record to write (see the module's docstring); None when there is none."""
    if previous is None:
        return None
    kept = stored_drift(previous.get("drift"))
    new = compare(basis_of(previous), basis, proxmox_host)
    if not new:
        return kept
    found = {(c["item"], c["subject"]) for c in new}
    carried = [c for c in (kept or {}).get("changes", [])
               if (gone(c) or lowered(c)) and still_holds(c, basis) and (c["item"], c["subject"]) not in found]
    changes = [{**c, "since": previous_date} for c in new] + carried
    return {"since": previous_date, "changes": sorted(changes, key=_order)}


def measured(bench: Any) -> tuple[bool, bool]:
    """Whether the benchmark holds a measurement, and whether one ran in this play (not read from a log)."""
    bench = bench if isinstance(bench, dict) else {}
    probe, nccl = bench.get("probe"), bench.get("nccl")
    probe_ok = isinstance(probe, dict) and not probe.get("failed") and "tool" in probe
    nccl_ok = isinstance(nccl, dict) and not nccl.get("failed") and "status" in nccl
    live = (probe_ok and probe.get("source") == "probe") or (nccl_ok and nccl.get("source") == "run")
    return probe_ok or nccl_ok, bool(live)


def next_proof(facts: dict[str, Any], previous: dict[str, Any] | None, basis: dict[str, Any], bench_given: bool,
               now: int | None) -> dict[str, Any] | None:
    has_measurement, live = measured(facts.get("bench"))
    if not has_measurement:
        return None
    if bench_given:
        return {"measured_at": now if live else None, "basis": basis}
    old = (previous or {}).get("proof")
    if isinstance(old, dict) and stored_basis(old.get("basis")) is not None:
        at = old.get("measured_at")
        return {"measured_at": at if isinstance(at, int) and not isinstance(at, bool) else None,
                "basis": stored_basis(old["basis"])}
    # The benchmark kept from a report that recorded no proof was folded into that report's facts.
    return {"measured_at": None, "basis": basis_of(previous)} if previous else None


def measured_text(measured_at: int | None) -> str:
    if measured_at is None:
        return "measured at a time not known"
    return "measured " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(measured_at))


def with_drift(facts: dict[str, Any], previous: dict[str, Any] | None, previous_date: str | None, *,
               bench_given: bool = False, now: int | None = None,
               vm_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The host's facts (benchmark merged) with drift, proof and their findings; summary recounted.

    ``previous``: its last report (None: none); ``previous_date``: that report's date; ``bench_given``: the
    benchmark was folded in by this run, measured at ``now`` when it ran in this play; ``vm_config``: a
    guest's own VM config (rules/drift_basis.guest_vm), when its Proxmox host was audited in the same run.
    """
    proxmox_host = isinstance(facts.get("proxmox"), dict)
    basis = basis_of(facts, vm_config)
    drift = next_drift(previous, previous_date, basis, proxmox_host)
    proof = next_proof(facts, previous, basis, bench_given, now)
    found = drift_findings(drift["changes"], drift["since"]) if drift else []
    if proof:
        stale = stale_proof(proof["basis"], basis, measured_text(proof["measured_at"]), proxmox_host)
        found += [stale] if stale else []
    out = {key: value for key, value in facts.items() if key not in ("drift", "proof")}
    if drift:
        out["drift"] = drift
    if proof:
        out["proof"] = proof
    if found:
        out = with_findings(out, (f.as_dict() for f in found))
    return out


def drift_return(facts: dict[str, Any]) -> dict[str, Any]:
    """What gpu_audit_report returns per host: the items changed in the record and whether the proof is stale."""
    changes = (facts.get("drift") or {}).get("changes") or []
    return {"items": sorted({c["item"] for c in changes}, key=ITEMS.index),
            "proof_stale": any(f.get("id") == "p2p_proof_stale" for f in facts.get("findings") or [])}
