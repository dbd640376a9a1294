"""``dcgmi diag -r N --json`` (``-j``): DCGM's diagnostic verdicts, per test and per GPU.

Two shapes, told apart by the root key (NVIDIA/DCGM ``nvvs/include/NvvsJsonStrings.h``; the 4.0 release
notes list the change as breaking):

* DCGM 3.x: ``{"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results":
  [{"gpu_id": "0", "status": "Pass", "warnings": [{"warning", "error_id"}], "info": [...]}]}]}],
  "version": ...}}``. A system-wide test may carry ``gpu_ids`` ("0,1") instead of one ``gpu_id``.
* DCGM 4.x: ``{"DCGM Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results":
  [{"entity_group": "GPU", "entity_id": 0, "status", "warnings": [{"warning", "error_id",
  "error_category", "error_severity"}], "info": [...]}], "test_summary": {"status", "warnings", "info"}}]}]},
  "entity_groups": [...], "metadata": {"version", "Driver Version Detected"}}`` (``dcgmi/Diag.cpp``,
  ``Diag::HelperJsonBuildOutput``: a test's ``test_summary`` holds its overall status and the messages tied
  to no entity; tests that did not run have no entry).

``parse_dcgm_diag(text)`` -> ``{"shape": "3.x" | "4.x", "dcgm_version", "driver_version", "runtime_error",
"elided", "tests": [{"category", "name", "status", "results": [{"gpu", "gpus", "entity", "status",
"warnings": [{"text", "error_id"}], "info": [str]}], "warnings", "info"}]}``. Statuses are ``pass``,
``fail``, ``warn``, ``skip``, ``not_run`` or None (a word this parser does not know: not guessed). A test's
status is its ``test_summary``'s where DCGM wrote one, else the worst of its results'. ``gpu`` is the GPU's
DCGM id (an int) where the result names one GPU, else None; ``gpus`` every GPU id the result names.

Pastes: Markdown fences, CRLF and launcher prefixes are taken off; an element a reporter elided as
``{"..."}`` (NVIDIA/DCGM#139) is counted in ``elided`` and left out, so the rest is read and the reader is
told that part was not. Anything else that is not whole JSON raises ``DcgmDiagParseError`` saying so.
``looks_like_dcgm_diag`` tells the kind from content alone; neither function raises anything else.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import (
    ParseError,
    excerpt,
    expected_found,
    normalize_paste,
    strip_launcher_prefix,
)

ROOT_3X = "DCGM GPU Diagnostic"
ROOT_4X = "DCGM Diagnostic"
MARK_RE = re.compile(r'"DCGM (?:GPU )?Diagnostic"\s*:\s*\{')
# An element a reporter replaced by "..." (or the ellipsis character) to shorten a paste.
_ELIDED_RE = re.compile(r'\{\s*"(?:\.\.\.|\u2026)"\s*\}\s*,?')
_FENCE_RE = re.compile(r"^\s*(?:```|~~~)")
_STATUS = {"pass": "pass", "fail": "fail", "warn": "warn", "warning": "warn", "skip": "skip", "skipped": "skip",
           "not run": "not_run", "not_run": "not_run", "notrun": "not_run"}
# Worst first: what a test is when DCGM wrote no summary of it.
_RANK = ("fail", "warn", "pass", "skip", "not_run")
_TODO = "Paste the whole output of `dcgmi diag -r 1 --json` (or -r 2), from its first { to its last }."


class DcgmDiagParseError(ParseError):
    """Text that is not a readable ``dcgmi diag --json`` document."""


def looks_like_dcgm_diag(text: Any) -> bool:
    """Whether ``text`` shows the root key of a DCGM diagnostic JSON document and its test categories."""
    return isinstance(text, str) and bool(MARK_RE.search(text)) and '"test_categories"' in text


def parse_dcgm_diag(text: Any) -> dict[str, Any]:
    if not isinstance(text, str):
        raise DcgmDiagParseError(expected_found("dcgmi diag --json", "text", repr(type(text).__name__), _TODO))
    cleaned = "\n".join(strip_launcher_prefix(line) for line in normalize_paste(text).split("\n")
                        if not _FENCE_RE.match(line))
    start, end = cleaned.find("{"), cleaned.rfind("}")
    if start < 0 or end <= start:
        raise DcgmDiagParseError(expected_found("dcgmi diag --json", "a JSON document", excerpt(cleaned, 80), _TODO))
    body, elided = _ELIDED_RE.subn("", cleaned[start:end + 1])
    # Taking an element out may leave a comma before a closing bracket.
    body = re.sub(r",(\s*[\]}])", r"\1", body)
    try:
        document = json.loads(body)
    except RecursionError:
        raise DcgmDiagParseError(expected_found("dcgmi diag --json", "a JSON document",
                                                "one nested deeper than Python reads", _TODO)) from None
    except ValueError as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if hasattr(exc, "lineno") else ""
        raise DcgmDiagParseError(expected_found("dcgmi diag --json", "whole JSON",
                                                f"JSON that stops or breaks: {getattr(exc, 'msg', exc)}",
                                                "A paste cut short cannot be read as a verdict. " + _TODO,
                                                where)) from None
    return _read(document, elided)


def _read(document: Any, elided: int) -> dict[str, Any]:
    if not isinstance(document, dict) or not (isinstance(document.get(ROOT_4X), dict)
                                              or isinstance(document.get(ROOT_3X), dict)):
        keys = sorted(document)[:5] if isinstance(document, dict) else type(document).__name__
        raise DcgmDiagParseError(expected_found("dcgmi diag --json", f'a root key "{ROOT_4X}" (DCGM 4) or '
                                                f'"{ROOT_3X}" (DCGM 3)', excerpt(str(keys), 80), _TODO))
    shape = "4.x" if isinstance(document.get(ROOT_4X), dict) else "3.x"
    root = document[ROOT_4X if shape == "4.x" else ROOT_3X]
    metadata = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
    categories = root.get("test_categories")
    if not isinstance(categories, list):
        raise DcgmDiagParseError(expected_found("dcgmi diag --json", '"test_categories", a list',
                                                excerpt(str(categories), 80), _TODO))
    tests = [_test(category, test) for category in categories if isinstance(category, dict)
             for test in _list(category.get("tests")) if isinstance(test, dict)]
    return {
        "shape": shape,
        "dcgm_version": _text(metadata.get("version")) or _text(root.get("version")),
        "driver_version": _text(metadata.get("Driver Version Detected")) or _text(root.get("Driver Version Detected")),
        "runtime_error": _text(root.get("runtime_error")) or _text(document.get("runtime_error")),
        "elided": elided,
        "tests": tests,
    }


def _test(category: dict[str, Any], test: dict[str, Any]) -> dict[str, Any]:
    results = [_result(r) for r in _list(test.get("results")) if isinstance(r, dict)]
    summary = test.get("test_summary") if isinstance(test.get("test_summary"), dict) else {}
    status = _status(summary.get("status")) if summary else None
    if status is None:
        seen = {r["status"] for r in results}
        status = next((s for s in _RANK if s in seen), None)
    return {"category": _text(category.get("category")), "name": _text(test.get("name")), "status": status,
            "results": results, "warnings": _warnings(summary.get("warnings")), "info": _info(summary.get("info"))}


def _result(result: dict[str, Any]) -> dict[str, Any]:
    entity = _text(result.get("entity_group"))
    gpus: list[int] = []
    if entity in (None, "GPU"):
        for key in ("entity_id", "gpu_id"):
            gpus += _ids(result.get(key))
        gpus += [i for i in _ids(result.get("gpu_ids")) if i not in gpus]
    return {"gpu": gpus[0] if len(gpus) == 1 else None, "gpus": gpus, "entity": entity or ("GPU" if gpus else None),
            "status": _status(result.get("status")), "warnings": _warnings(result.get("warnings")),
            "info": _info(result.get("info"))}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _ids(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int) and 0 <= value < 1 << 16:
        return [value]
    if isinstance(value, str):
        return [int(part) for part in re.split(r"[,\s]+", value.strip()) if part.isdigit() and len(part) < 6]
    if isinstance(value, list):
        return [i for item in value for i in _ids(item) if not isinstance(item, list)]
    return []


def _status(value: Any) -> str | None:
    return _STATUS.get(value.strip().lower()) if isinstance(value, str) else None


def _warnings(value: Any) -> list[dict[str, Any]]:
    items = value if isinstance(value, list) else [value] if value is not None else []
    found = []
    for item in items:
        if isinstance(item, dict):
            text = _text(item.get("warning"))
            code = item.get("error_id")
            found.append({"text": text, "error_id": code if isinstance(code, int) and not isinstance(code, bool)
                          else None})
        elif _text(item):
            found.append({"text": _text(item), "error_id": None})
    return found


def _info(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value] if value is not None else []
    return [t for t in (_text(item) for item in items) if t]


def _text(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None
