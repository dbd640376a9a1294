"""The GPU health part of a host's Markdown report, as tables for render.py to draw.

``health_tables(facts)`` gives (heading, lines before the table, headers, rows) per table: the
per-GPU readings, the kernel log's Xid events, the PCIe AER counters that are not zero, the
fabric manager on NVSwitch hosts and DCGM's diagnostic (its tests that did not pass, or why it gave no
verdict). Hosts without health facts (older reports) give nothing.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.report.markdown import inline

Table = tuple[str, list[str], list[str], list[list[Any]]]


def _pair(a: Any, b: Any) -> str:
    return f"{'-' if a is None else a}/{'-' if b is None else b}"


def _flags(*named: tuple[str, Any]) -> str:
    known = [(name, value) for name, value in named if value is not None]
    if not known:
        return "-"
    return ", ".join(name for name, value in known if value) or "no"


def health_tables(facts: dict[str, Any]) -> list[Table]:
    health = facts.get("health") or {}
    tables: list[Table] = []
    gpus = [g for g in health.get("gpus") or [] if isinstance(g, dict)]
    if gpus:
        rows = []
        for gpu in gpus:
            ecc = gpu.get("ecc") or {}
            pages = gpu.get("retired_pages") or {}
            remap = gpu.get("row_remap") or {}
            fabric = gpu.get("fabric") or {}
            clocks = gpu.get("clocks_event_reasons") or {}
            rows.append([f"GPU{gpu.get('index')}", gpu.get("pci_bus_id"), ecc.get("mode_current"),
                         _pair(ecc.get("uncorrected_volatile"), ecc.get("uncorrected_aggregate")),
                         _pair(ecc.get("corrected_volatile"), ecc.get("corrected_aggregate")),
                         _flags(("pending", pages.get("pending"))),
                         _flags(("pending", remap.get("pending")), ("failed", remap.get("failed"))),
                         ", ".join(clocks.get("active") or []) or None,
                         _fabric_cell(fabric)])
        tables.append(("GPU health", [f"From {health.get('gpus_source')}."],
                       ["GPU", "Bus id", "ECC", "Uncorrectable vol/agg", "Corrected vol/agg", "Retired pages",
                        "Row remap", "Clocks event reasons", "Fabric"], rows))
    kernel_log = health.get("kernel_log") or {}
    events = kernel_log.get("xid_events") or []
    if events:
        tables.append(("Xid events in the kernel log", [f"From {kernel_log.get('source')}, this boot."],
                       ["Xid", "GPU", "Count", "First", "Last", "Message"],
                       [[e.get("xid") if e.get("xid") is not None else "fallen off the bus", e.get("pci_bus_id"),
                         e.get("count"), e.get("first_time") or e.get("first_uptime_s"),
                         e.get("last_time") or e.get("last_uptime_s"), str(e.get("message") or "")[:120]]
                        for e in events]))
    aer = [a for a in health.get("aer") or [] if any((a.get(k) or {}).get("total")
                                                     for k in ("correctable", "nonfatal", "fatal"))]
    if aer:
        tables.append(("PCIe AER errors since boot", [], ["Device", "Role", "GPU", "Correctable", "Non-fatal", "Fatal"],
                       [[a.get("bdf"), a.get("role"), a.get("gpu"), *(_aer_cell(a.get(k)) for k in
                                                                      ("correctable", "nonfatal", "fatal"))]
                        for a in aer]))
    fabric = health.get("fabric_manager")
    if fabric:
        log = fabric.get("log") if isinstance(fabric.get("log"), dict) else None
        # Material's own words: escaped, as they stand outside a table cell.
        said = [f"The fabric manager's log in the material: {inline(e.get('kind'))}: {inline(e.get('line'))}"
                for e in (log or {}).get("errors") or []][:6]
        if log and log.get("started"):
            said.append("The fabric manager's log in the material shows it started.")
        tables.append(("NVSwitch fabric", said, ["NVSwitches", "nvidia-fabricmanager", "Package"],
                       [[fabric.get("nvswitches"), fabric.get("service") or "not read",
                         fabric.get("package_version") or "-"]]))
    diag = health.get("dcgm_diag")
    if isinstance(diag, dict):
        tables.append(_dcgm_table(diag))
    return tables


def _dcgm_table(diag: dict[str, Any]) -> Table:
    """DCGM's tests that did not pass, per GPU, with DCGM's messages; the findings judge them (rules/dcgm_diag.py)."""
    origin = "dcgmi diag -r 1 on the host" if diag.get("source") == "dcgmi" else "dcgmi diag output in the material"
    result = diag.get("result")
    if not isinstance(result, dict):
        return ("DCGM diagnostic", [f"From {origin}: no verdict (no pass either)."], ["Why"], [[diag.get("reason")]])
    tests = [t for t in result.get("tests") or [] if isinstance(t, dict)]
    rows = [[t.get("category"), t.get("name"), r.get("status") or "not known",
             ", ".join(map(str, r.get("gpus") or [])) or "-",
             " | ".join(str(w.get("text")) + (f" [DCGM error {w['error_id']}]" if w.get("error_id") is not None else "")
                        for w in r.get("warnings") or [])[:200] or "-"]
            for t in tests for r in t.get("results") or [] if r.get("status") not in ("pass", "skip")] \
        or [["-", "every test run", "pass or skip", "-", "-"]]
    counts = {s: sum(1 for t in tests if t.get("status") == s) for s in ("pass", "fail", "warn", "skip")}
    said = (f"From {origin} (DCGM {inline(result.get('dcgm_version') or 'version not printed')}): "
            + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + " test(s)."
            + (f" {result['elided']} element(s) elided in the paste were not read." if result.get("elided") else ""))
    return ("DCGM diagnostic", [said], ["Category", "Test", "Status", "GPU", "DCGM's message"], rows)


def _fabric_cell(fabric: dict[str, Any]) -> str | None:
    """The fabric state, with NVML's status once the GPU takes part in a fabric."""
    state = fabric.get("state")
    if state in (None, "not_supported"):
        return "n/a" if state else None
    return f"{state} ({fabric.get('status')})"


def _aer_cell(counters: Any) -> str:
    if not isinstance(counters, dict):
        return "-"
    detail = ", ".join(f"{name} {count}" for name, count in (counters.get("nonzero") or {}).items())
    return f"{counters.get('total')}" + (f" ({detail})" if detail else "")
