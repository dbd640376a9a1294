"""NCCL's own check of every GPU pair at communicator start (NCCL_RUN_DIAGNOSTICS=1, NCCL 2.31 on).

The benchmark asks for it only where it knows, before the run, that the NCCL about to run is 2.31
or later (torch's NCCL, from the probe of the interpreter); an older NCCL ignores the variable and an
unknown one is not guessed at. What NCCL printed is read by parsers/nccl_diag (conservatively: the
documented summary lines into fields, every other line kept raw) and turned into findings here.

Pure functions over plain data.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_known_issues import at_least
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_diag import parse_nccl_diag

ENV = "NCCL_RUN_DIAGNOSTICS"
SINCE = (2, 31, 0)


def plan(engine: str, torch_nccl: str | None) -> tuple[bool, str]:
    """(whether to set NCCL_RUN_DIAGNOSTICS=1 for the run, why)."""
    if engine != "torch-nccl":
        return False, (f"engine {engine}: the NCCL it runs with is known only from its output, after the run, "
                       "so NCCL_RUN_DIAGNOSTICS was not set")
    newer = at_least(torch_nccl, SINCE)
    if newer is None:
        return False, "torch did not say which NCCL it bundles, so NCCL_RUN_DIAGNOSTICS was not set"
    if not newer:
        return False, f"NCCL {torch_nccl} predates the diagnostics of NCCL 2.31 (NCCL_RUN_DIAGNOSTICS)"
    return True, f"NCCL {torch_nccl} (2.31 or later) checked every GPU pair at communicator start"


def result(text: str, requested: bool, why: str, ran: bool) -> dict[str, Any] | None:
    """What the diagnostics said, for the result's ``nccl_diagnostics``. For a log (``ran`` false) None
    when it holds no report; a log may hold one from a run someone else started with the variable."""
    report = parse_nccl_diag(text)
    if not ran and not report["lines"]:
        return None
    if requested and not report["lines"]:
        why += "; NCCL printed no NCCL DIAG line (rank 0's output, where the report goes, holds none)"
    return {"requested": requested, "why": why, **report}


def findings(diagnostics: dict[str, Any] | None, engine: str) -> list[Finding]:
    if not diagnostics:
        return []
    found = []
    p2p = diagnostics.get("p2p") or {}
    p2p_lines = [line["raw"] for line in diagnostics["lines"] if line["check"] == "p2p" and line["tag"] == "INFO"]
    if p2p.get("status") == "failed":
        found.append(make(
            "nccl_diagnostics_p2p_failed",
            f"NCCL's own check at communicator start verified only {p2p['passed']} of {p2p['total']} GPU peer "
            f"accesses ({engine}): data written between some GPU pairs did not arrive intact.",
            {"engine": engine, "passed": p2p["passed"], "total": p2p["total"], "said": p2p_lines[:16]}))
    other = [line["raw"] for line in diagnostics["lines"]
             if line["tag"] == "INFO" and (p2p.get("status") != "failed" or line["check"] != "p2p")]
    if other:
        found.append(make(
            "nccl_diagnostics_flagged",
            f"NCCL's diagnostics flagged {len(other)} thing(s) to review ({engine}): {other[0]}",
            {"engine": engine, "said": other[:16]}))
    return found
