"""DCGM's diagnostic verdicts (health.dcgm_diag, audit/dcgm_diag.py): a failed test makes the host unfit, a
warned one is a warning, and a diagnostic asked for that gave no verdict says why (info: no verdict is no
pass, but a host without DCGM is not at fault for it).

DCGM's own words stay in the finding: the test, the GPU ids DCGM names (its ids, which follow NVML's order)
and each message with its DCGM error id, so the reader can look them up in DCGM's error table
(``dcgm_errors.h``). Skipped tests are no finding: DCGM skips what a GPU class does not support (level 2 and
above on non-datacenter GPUs).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

_MAX_MESSAGES = 6


def dcgm_diag(facts: dict[str, Any]) -> dict[str, Any] | None:
    found = (facts.get("health") or {}).get("dcgm_diag")
    return found if isinstance(found, dict) else None


def _where(diag: dict[str, Any]) -> str:
    return ("dcgmi diag -r 1 on the host" if diag.get("source") == "dcgmi"
            else "the dcgmi diag output in the material")


def _said(test: dict[str, Any], status: str) -> dict[str, Any]:
    results = [r for r in test.get("results") or [] if r.get("status") == status]
    gpus = sorted({gpu for r in results for gpu in r.get("gpus") or []})
    messages = [w for r in results for w in r.get("warnings") or []] + list(test.get("warnings") or [])
    texts = [f"{w.get('text') or '(no text)'}" + (f" [DCGM error {w['error_id']}]" if w.get("error_id") is not None
                                                  else "") for w in messages]
    return {"category": test.get("category"), "test": test.get("name"), "gpus": gpus, "messages": texts}


def _line(item: dict[str, Any]) -> str:
    gpus = f" on GPU {', '.join(map(str, item['gpus']))}" if item["gpus"] else ""
    shown = item["messages"][:_MAX_MESSAGES]
    more = f" (and {len(item['messages']) - _MAX_MESSAGES} more)" if len(item["messages"]) > _MAX_MESSAGES else ""
    return f"{item['test']}{gpus}" + (": " + " | ".join(shown) + more if shown else "")


def rule_dcgm_diag(facts: dict[str, Any], options: RuleOptions) -> list[Finding]:
    diag = dcgm_diag(facts)
    if diag is None:
        return []
    result = diag.get("result")
    if not isinstance(result, dict):
        return [make("dcgm_diag_not_run", f"No DCGM verdict from {_where(diag)}: {diag.get('reason')}",
                     {"dcgm_diag": {"source": diag.get("source"), "reason": diag.get("reason")}})]
    found = []
    if result.get("runtime_error"):
        found.append(make("dcgm_diag_not_run", f"DCGM's diagnostic stopped ({_where(diag)}): "
                                               f"{result['runtime_error']}",
                          {"dcgm_diag": {"source": diag.get("source"), "reason": result["runtime_error"]}}))
    tests = [t for t in result.get("tests") or [] if isinstance(t, dict)]
    for status, finding_id, word in (("fail", "dcgm_diag_failed", "failed"), ("warn", "dcgm_diag_warned", "warned")):
        items = [_said(t, status) for t in tests if t.get("status") == status]
        if items:
            found.append(make(finding_id, f"DCGM {word} {len(items)} test(s) in {_where(diag)}: "
                                          + "; ".join(map(_line, items)) + ".",
                              {"tests": items, "dcgm_version": result.get("dcgm_version"),
                               "elided": result.get("elided")}))
    return found


DCGM_DIAG_RULES = (rule_dcgm_diag,)
