"""Whether a benchmark section can go into a report: its shape, and numbers JSON can carry.

A report's ``bench`` comes from this run's benchmark or from the host's last report, which an older
version or a hand edit may have left in another shape. ``check_bench`` says whether the renderer can use
it: every container the report reads (``probe.matrices``, ``nccl.results`` and their rows, ``tuning``,
``transports``, ``communication_ceiling``, the findings) must have the type the renderer expects, or be null or absent
(older versions left keys out). A bench of another shape is refused whole, with every reason, rather than
shown in part. Numbers that are not finite (``inf``, ``nan``: a division by a zero time, or ``NaN`` read
from an old file) are not JSON and say nothing; ``finite`` makes them null and says where. What an older version
wrote under a name since changed (``RENAMED_NCCL_KEYS``, a finding id the catalog retired with a successor) is
read under today's name, so that the report carries it in today's shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import retired_entry

# nccl_bench result keys an older version wrote, by today's name (schema_version 7 renamed them).
RENAMED_NCCL_KEYS = {"comm_floor": "communication_ceiling"}


@dataclass
class BenchCheck:
    bench: dict[str, Any] | None  # usable as it is here (non-finite numbers made null), or None
    refused: list[str] = field(default_factory=list)  # why it cannot be used
    nulled: list[str] = field(default_factory=list)  # where a non-finite number was made null


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    return f"a {type(value).__name__}"


EXPECTED = {dict: "a mapping", list: "a list", str: "a string"}


def _typed(value: Any, expected: type, where: str, refused: list[str]) -> bool:
    """Whether ``value`` is null or of the expected type; says why not otherwise."""
    if value is None or isinstance(value, expected):
        return True
    refused.append(f"{where} is {_kind(value)}, expected {EXPECTED[expected]}")
    return False


def _mappings(value: Any, where: str, refused: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The entries of a list that must hold mappings, each with where it is; a wrong entry is a reason."""
    if not _typed(value, list, where, refused) or value is None:
        return []
    entries = []
    for index, entry in enumerate(value):
        if isinstance(entry, dict):
            entries.append((f"{where}[{index}]", entry))
        else:
            refused.append(f"{where}[{index}] is {_kind(entry)}, expected a mapping")
    return entries


def _rows(value: Any, where: str, refused: list[str]) -> None:
    for at, row in _mappings(value, where, refused):
        for placement in ("out_of_place", "in_place"):
            _typed(row.get(placement), dict, f"{at}.{placement}", refused)


def _findings(value: Any, where: str, refused: list[str]) -> None:
    for at, finding in _mappings(value, where, refused):
        for key in ("id", "severity"):
            if not isinstance(finding.get(key), str):
                refused.append(f"{at}.{key} is {_kind(finding.get(key)) if key in finding else 'missing'}, "
                               "expected a string")


def _probe(probe: dict[str, Any], refused: list[str]) -> None:
    for at, matrix in _mappings(probe.get("matrices"), "probe.matrices", refused):
        values = matrix.get("values")
        if _typed(values, list, f"{at}.values", refused) and values:
            for index, row in enumerate(values):
                _typed(row, list, f"{at}.values[{index}]", refused)
    _findings(probe.get("findings"), "probe.findings", refused)


def _nccl(nccl: dict[str, Any], refused: list[str]) -> None:
    _rows(nccl.get("results"), "nccl.results", refused)
    _findings(nccl.get("findings"), "nccl.findings", refused)
    tuning = nccl.get("tuning")
    if _typed(tuning, dict, "nccl.tuning", refused) and tuning:
        for at, candidate in _mappings(tuning.get("candidates"), "nccl.tuning.candidates", refused):
            _rows(candidate.get("results"), f"{at}.results", refused)
    transports = nccl.get("transports")
    if _typed(transports, dict, "nccl.transports", refused) and transports:
        _typed(transports.get("transports"), dict, "nccl.transports.transports", refused)
    ceiling = nccl.get("communication_ceiling")
    if _typed(ceiling, dict, "nccl.communication_ceiling", refused) and ceiling:
        for key in ("summary", "summary_batch"):
            _typed(ceiling.get(key), str, f"nccl.communication_ceiling.{key}", refused)
    _typed(nccl.get("notes"), list, "nccl.notes", refused)
    _typed(nccl.get("collective"), str, "nccl.collective", refused)
    _typed(nccl.get("recommended_env"), dict, "nccl.recommended_env", refused)
    _typed(nccl.get("serving_env"), dict, "nccl.serving_env", refused)


def finite(value: Any, where: str = "") -> tuple[Any, list[str]]:
    """``value`` with every float that is not finite replaced by None, and where each was."""
    if isinstance(value, float) and not math.isfinite(value):
        return None, [f"{where or 'the value'} ({value})"]
    if isinstance(value, dict):
        out, found = {}, []
        for key, item in value.items():
            out[key], inner = finite(item, f"{where}.{key}" if where else str(key))
            found += inner
        return out, found
    if isinstance(value, list | tuple):
        items, found = [], []
        for index, item in enumerate(value):
            clean, inner = finite(item, f"{where}[{index}]")
            items.append(clean)
            found += inner
        return items, found
    return value, []


def check_bench(bench: Any) -> BenchCheck:
    """The bench as a report can carry it, or None with every reason it cannot."""
    if bench is None:
        return BenchCheck(None)
    if not isinstance(bench, dict):
        return BenchCheck(None, [f"the benchmark section is {_kind(bench)}, expected a mapping"])
    bench = _renamed(bench)
    refused: list[str] = []
    for step, check in (("probe", _probe), ("nccl", _nccl)):
        result = bench.get(step)
        if _typed(result, dict, step, refused) and result:
            check(result, refused)
    if refused:
        return BenchCheck(None, refused)
    clean, nulled = finite(bench)
    return BenchCheck(clean, [], nulled)


def _renamed(bench: dict[str, Any]) -> dict[str, Any]:
    """The bench with the names an older version wrote replaced by today's (a copy where any changed)."""
    nccl = bench.get("nccl")
    if not isinstance(nccl, dict):
        return bench
    renamed = {RENAMED_NCCL_KEYS.get(key, key): value for key, value in nccl.items()
               if not (key in RENAMED_NCCL_KEYS and RENAMED_NCCL_KEYS[key] in nccl)}
    findings = renamed.get("findings")
    if isinstance(findings, list):
        renamed["findings"] = [_finding_renamed(f) for f in findings]
    return bench if renamed == nccl else {**bench, "nccl": renamed}


def _finding_renamed(finding: Any) -> Any:
    entry = retired_entry(finding.get("id")) if isinstance(finding, dict) else None
    return {**finding, "id": entry.renamed_to} if entry is not None and entry.renamed_to else finding
