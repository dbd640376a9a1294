"""The GPU health rules: Xid events, ECC, retired pages and row remapping, clocks held back, PCIe AER
errors, and the NVSwitch fabric (fabric manager service, NVML's fabric state).

They read the ``health`` facts (audit/health.py); what a host did not report (an older capture, a
GPU without ECC, a kernel without AER counters) is null there and fires nothing. Thresholds are the
named constants of findings/health_limits.py; the Xid table is xids.py. Every value a rule used is in its
evidence.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.health_limits import (
    AER_CORRECTABLE_LIMIT,
    AER_FATAL_LIMIT,
    AER_NONFATAL_LIMIT,
    CLOCKS_PROBLEM_REASONS,
    ECC_UNCORRECTED_AGGREGATE_LIMIT,
    ECC_UNCORRECTED_VOLATILE_LIMIT,
    FABRIC_MANAGER_RUNNING,
    FABRIC_NOT_READY_STATES,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.gpu_usable import event_text, gpu_names, xid_events
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.xids import XIDS, xid_severity


def health_gpus(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return [g for g in (facts.get("health") or {}).get("gpus") or [] if isinstance(g, dict)]


def gpu_label(gpu: dict[str, Any]) -> str:
    return f"GPU{gpu.get('index')} ({gpu.get('pci_bus_id') or 'bus unknown'})"


def _over(value: Any, limit: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > limit


def rule_xid(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    """Xid events of this boot (79 and bus losses are gpu_lost's): those that need a reset apart."""
    grave, rest = [], []
    for event in xid_events(facts):
        if event.get("kind") == "xid" and event.get("xid") != 79:
            severity = xid_severity(event.get("xid"), str(event.get("message") or ""))
            (grave if severity == "critical" else rest).append((event, severity))
    findings = []
    if grave:
        findings.append(_xid_finding(facts, "xid_needs_reset", [e for e, _s in grave], "critical"))
    if rest:
        severity = "warning" if any(s == "warning" for _e, s in rest) else "info"
        findings.append(_xid_finding(facts, "xid_errors", [e for e, _s in rest], severity))
    return findings


def _xid_finding(facts: dict[str, Any], finding_id: str, events: list[dict[str, Any]], severity: str) -> Finding:
    numbers = sorted({e["xid"] for e in events})
    explained = {str(n): (f"{XIDS[n].name}: {XIDS[n].meaning}" if n in XIDS else "not in the audit's table")
                 for n in numbers}
    evidence = {"events": [event_text(e, gpu_names(facts)) for e in events[:20]], "xids": explained,
                "kernel_log": ((facts.get("health") or {}).get("kernel_log") or {}).get("source")}
    gpus = len({e.get("pci_bus_id") for e in events})
    summary = (f"The kernel log of this boot has Xid {', '.join(str(n) for n in numbers)} "
               f"({sum(int(e.get('count') or 1) for e in events)} event(s) on {gpus} GPU(s))"
               + (": a GPU needs a reset, a reboot or service before it is trusted again." if severity == "critical"
                  else "."))
    actions = "\n".join(f"  Xid {n}: {XIDS[n].action}." if n in XIDS else f"  Xid {n}: look it up in NVIDIA's Xid "
                        "catalog (docs.nvidia.com/deploy/xid-errors)." for n in numbers)
    return make(finding_id, summary, evidence, severity=severity, actions=actions)


def rule_ecc(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    now, history = {}, {}
    for gpu in health_gpus(facts):
        ecc = gpu.get("ecc") or {}
        values = {k: ecc.get(k) for k in ("mode_current", "uncorrected_volatile", "uncorrected_aggregate",
                                          "corrected_volatile", "corrected_aggregate")}
        if _over(ecc.get("uncorrected_volatile"), ECC_UNCORRECTED_VOLATILE_LIMIT):
            now[gpu_label(gpu)] = values
        elif _over(ecc.get("uncorrected_aggregate"), ECC_UNCORRECTED_AGGREGATE_LIMIT):
            history[gpu_label(gpu)] = values
    if not now and not history:
        return []
    limits = {"uncorrected_volatile": ECC_UNCORRECTED_VOLATILE_LIMIT,
              "uncorrected_aggregate": ECC_UNCORRECTED_AGGREGATE_LIMIT}
    if now:
        return [make(
            "ecc_uncorrectable_errors",
            f"{len(now)} GPU(s) had uncorrectable ECC errors since the driver loaded: data in GPU memory was lost "
            "and results computed there may be wrong.",
            {"gpus": {**now, **history}, "limits": limits})]
    return [make(
        "ecc_uncorrectable_errors",
        f"{len(history)} GPU(s) had uncorrectable ECC errors in their lifetime (none since the driver loaded).",
        {"gpus": history, "limits": limits}, severity="warning")]


def rule_retired_pages(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    pending = {gpu_label(g): g.get("retired_pages") for g in health_gpus(facts)
               if (g.get("retired_pages") or {}).get("pending") is True}
    if not pending:
        return []
    return [make(
        "retired_pages_pending",
        f"{len(pending)} GPU(s) have memory pages waiting to be retired: until the GPU is reset, the bad pages "
        "can still be handed out.",
        {"gpus": pending})]


def rule_row_remap(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    failed = {gpu_label(g): g.get("row_remap") for g in health_gpus(facts) if (g.get("row_remap") or {}).get("failed")}
    pending = {gpu_label(g): g.get("row_remap") for g in health_gpus(facts)
               if (g.get("row_remap") or {}).get("pending") and gpu_label(g) not in failed}
    findings = []
    if failed:
        findings.append(make(
            "row_remap_failed",
            f"{len(failed)} GPU(s) could not remap a failing memory row (no spare row left in the bank): the GPU "
            "keeps memory that corrupts data.",
            {"gpus": failed}))
    if pending:
        findings.append(make(
            "row_remap_pending",
            f"{len(pending)} GPU(s) have a memory row remap pending: it takes effect at the next GPU reset; until "
            "then the failing row stays in use.",
            {"gpus": pending}))
    return findings


def rule_clocks(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    held = {}
    for gpu in health_gpus(facts):
        reasons = gpu.get("clocks_event_reasons") or {}
        problems = [r for r in reasons.get("active") or [] if r in CLOCKS_PROBLEM_REASONS]
        if problems:
            held[gpu_label(gpu)] = {"mask": f"0x{reasons.get('mask') or 0:x}", "active": reasons.get("active"),
                                    "problem": problems}
    if not held:
        return []
    causes = ", ".join(sorted({p for h in held.values() for p in h["problem"]}))
    return [make(
        "gpu_clocks_slowdown",
        f"{len(held)} GPU(s) run with clocks held back by {causes}: the hardware protects itself from heat or "
        "a power problem, and every collective waits for the slowest GPU.",
        {"gpus": held, "problem_reasons": list(CLOCKS_PROBLEM_REASONS)})]


def rule_aer(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    fatal, other = {}, {}
    for entry in (facts.get("health") or {}).get("aer") or []:
        totals = {kind: (entry.get(kind) or {}).get("total") for kind in ("correctable", "nonfatal", "fatal")}
        label = f"{entry.get('bdf')} ({'GPU' if entry.get('role') == 'gpu' else 'port above GPU'} {entry.get('gpu')})"
        detail = {kind: entry.get(kind) for kind in ("correctable", "nonfatal", "fatal") if entry.get(kind)}
        if _over(totals["fatal"], AER_FATAL_LIMIT):
            fatal[label] = detail
        elif _over(totals["nonfatal"], AER_NONFATAL_LIMIT) or \
                (isinstance(totals["correctable"], int) and totals["correctable"] >= AER_CORRECTABLE_LIMIT):
            other[label] = detail
    if not fatal and not other:
        return []
    limits = {"fatal": AER_FATAL_LIMIT, "nonfatal": AER_NONFATAL_LIMIT, "correctable": AER_CORRECTABLE_LIMIT}
    return [make(
        "pcie_aer_errors",
        f"PCIe AER counted errors since boot on {len(fatal) + len(other)} device(s) on the GPUs' paths"
        + (f", fatal on {len(fatal)}" if fatal else "") + ": the link drops or corrupts packets.",
        {"devices": {**fatal, **other}, "limits": limits}, severity="critical" if fatal else "warning")]


def rule_fabric_manager(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    fabric = (facts.get("health") or {}).get("fabric_manager") or {}
    state = fabric.get("service")
    if not fabric.get("nvswitches") or state is None or state in FABRIC_MANAGER_RUNNING:
        return []
    return [make(
        "fabric_manager_inactive",
        f"This host has {fabric['nvswitches']} NVSwitch(es) but nvidia-fabricmanager is {state}: without it the "
        "GPUs' NVLink fabric is not set up and CUDA refuses to start (cudaErrorSystemNotReady).",
        {"nvswitches": fabric["nvswitches"], "service": state})]


def rule_fabric_manager_version(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    fabric = (facts.get("health") or {}).get("fabric_manager") or {}
    mismatch = fabric.get("version_mismatch")
    if not isinstance(mismatch, dict):
        return []
    return [make(
        "fabric_manager_version_mismatch",
        f"nvidia-fabricmanager is {fabric.get('service') or 'of a state not read'}: its log says it was built for "
        f"driver interface "
        f"{mismatch.get('fabric_manager')} and the loaded driver is {mismatch.get('driver')}, so it refused to "
        "start and the NVLink fabric is not set up.",
        {"service": fabric.get("service"), **mismatch},
        fabric_manager=mismatch.get("fabric_manager"), driver=mismatch.get("driver"))]


def rule_gpu_fabric(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    waiting = {gpu_label(g): g.get("fabric") for g in health_gpus(facts)
               if (g.get("fabric") or {}).get("state") in FABRIC_NOT_READY_STATES
               or ((g.get("fabric") or {}).get("state") == "completed"
                   and (g.get("fabric") or {}).get("status") not in (None, "success"))}
    if not waiting:
        return []
    return [make(
        "gpu_fabric_not_ready",
        f"{len(waiting)} GPU(s) have not joined the NVLink fabric (NVML fabric state): CUDA programs cannot start "
        "on them yet.",
        {"gpus": waiting, "ready_state": "completed with status success"})]


HEALTH_RULES = (
    rule_xid,
    rule_ecc,
    rule_retired_pages,
    rule_row_remap,
    rule_clocks,
    rule_aer,
    rule_fabric_manager,
    rule_fabric_manager_version,
    rule_gpu_fabric,
)
