"""DCGM's diagnostic verdicts: ``dcgmi diag -r 1 --json`` run on the host when asked, or a ``dcgmi diag
--json`` output given as material (material/capture.py files it under ``DCGM_DIAG_MATERIAL``).

Running it is opt-in (the gpu_audit role's ``gpu_audit_dcgm_diag``): level 1 takes seconds to a minute and
puts load on every GPU while it runs, which an audit on a serving host must not do unasked. A host without
DCGM, a run that timed out or failed, and an output that does not parse give no verdict: ``result`` null and
``reason`` saying why; the audit goes on.

``gather_dcgm_diag`` -> None when neither was asked for nor given; else ``{"source": "dcgmi" | "material",
"level": 1 | None (not stated by the material), "result": parsers/dcgm_diag.py's document or None,
"reason": None or why there is no result}``.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import DCGM_DIAG
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import Source

DCGM_DIAG_MATERIAL = "dcgm-diag"
DEFAULT_TIMEOUT_S = 300
_NOT_INSTALLED = "dcgmi is not installed on this host (DCGM's datacenter-gpu-manager package): no DCGM verdict"


def gather_dcgm_diag(source: Source, run: bool, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any] | None:
    material = source.material(DCGM_DIAG_MATERIAL)
    if material is not None:
        return _read("material", None, material)
    if not run:
        return None
    result = source.run_long(DCGM_DIAG.argv, timeout_s)
    if result.rc is None:
        return {"source": "dcgmi", "level": 1, "result": None, "reason": _NOT_INSTALLED if result.seen else
                "the material holds no dcgmi diag output: no DCGM verdict (not that DCGM is absent)"}
    if result.rc == 124 and not result.stdout:
        return {"source": "dcgmi", "level": 1, "result": None,
                "reason": f"{DCGM_DIAG.key} gave no answer within {timeout_s:g} s; raise gpu_audit_dcgm_diag_timeout "
                          "or run it by hand"}
    # The verdict is the JSON's, whatever the exit status (a run whose tests failed is no error of dcgmi's);
    # without a readable document, what dcgmi said is the reason (no host engine, a GPU it cannot open).
    if result.stdout.strip():
        read = _read("dcgmi", 1, result.stdout)
        if read["result"] is not None or result.rc == 0:
            return read
    said = (result.stderr.strip() or result.stdout.strip())[:300] or "nothing"
    return {"source": "dcgmi", "level": 1, "result": None,
            "reason": f"{DCGM_DIAG.key} exited {result.rc} and said: {said}"}


def _read(origin: str, level: int | None, text: str) -> dict[str, Any]:
    # Imported here, not above: only a host asked to run dcgmi (or material holding its output) reads it, and the
    # module every audited host runs compiles only what it runs (docs/development.md).
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.dcgm_diag import (
        DcgmDiagParseError,
        parse_dcgm_diag,
    )

    try:
        return {"source": origin, "level": level, "result": parse_dcgm_diag(text), "reason": None}
    except DcgmDiagParseError as exc:
        return {"source": origin, "level": level, "result": None, "reason": str(exc)}
