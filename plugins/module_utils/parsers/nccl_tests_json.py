"""Parser for the JSON file nccl-tests writes with ``-J FILE`` (nccl-tests 2.17.3 on).

Pure functions from text to typed data: no Ansible, no subprocess. ``parse_nccl_tests_json`` raises
only ``NcclTestsParseError`` (a ``ValueError``) and says what it expected, what it found and what to do.

The writer (src/util.cu) emits: version (the file format: 1 from nccl-tests 2.17.3, 2 from 2.19.2
with per-iteration timing, 3 from 2.19.6 with per_iter_skip), start_time, args (argv), env,
nccl_version (NCCL_VERSION_CODE of the library), config {nthreads, ngpus, ..., devices: one entry
per process}, results [{size, count, type, redop, root (a string, "%6i": "    -1"), out_of_place and
in_place {time or cpu_time, alg_bw, bus_bw, nwrong (null with -c 0)}, actual_iterations,
experiment_name}], out_of_bounds {count, okay}, average_bus_bandwidth {bandwidth, okay}, errors,
end_time. Booleans are written as the strings "true"/"false", a NaN double as the string "nan". A
time or bandwidth that is nan or inf (as a string, or JSON's Infinity/NaN) is no measurement: the
placement's numbers are null and the row marked, as in the text parser.
Until nccl-tests 2.17.9 the writer spelled "average_bus_bandwidith" and "bandwidith".

Output schema: ``parse_nccl_tests_json`` -> ``NcclTestsRun`` (nccl_tests.py), the same as the text
parser gives for the same run: ``collective`` from ``args[0]`` (else from the results' redop, root and
busbw/algbw when they allow one collective only, else None), ``nranks`` = processes x nthreads x
ngpus, ``nccl_version`` from the library code, one ``SizeResult`` per ``results`` entry (``redop``
``none`` and root -1 as None), ``out_of_bounds`` / ``out_of_bounds_ok`` and ``avg_busbw_gbps``
(``complete`` when the average is there).
"""

from __future__ import annotations

import json
import math
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import expected_found
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests import (
    EXCERPT_CHARS,
    NAME_RE,
    SIGNED_INT_RE,
    Measurement,
    NcclTestsParseError,
    NcclTestsRun,
    SizeResult,
    collective_candidates,
    collective_name,
    finite_or_none,
    identify_collective,
    measurement,
    nccl_version_from_code,
)


def parse_nccl_tests_json(text: str) -> NcclTestsRun:
    """The results of one nccl-tests run from the file written with ``-J FILE``."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise NcclTestsParseError(
            f"nccl-tests JSON: expected text; found {type(text).__name__}. Pass the content of the -J file.")
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        raise NcclTestsParseError(
            f"nccl-tests JSON: expected a JSON document; found invalid JSON ({exc}). The file may be cut short "
            "(the run was killed before it closed the file): rerun, or parse the text output instead", line,
            text.strip()[:EXCERPT_CHARS]) from None
    if not isinstance(document, dict):
        raise _json_error("the document", "an object", document)
    config = _json_object(document.get("config"), "config", required=False)
    results_raw = document.get("results")
    if not isinstance(results_raw, list):
        listed = document.get("errors")
        errors = [e for e in listed if isinstance(e, str) and e.strip()] if isinstance(listed, list) else []
        said = f" NCCL said: {'; '.join(errors)[:300]}." if errors else ""
        raise _json_error("results", "the list of measured sizes", results_raw,
                          f"The run stopped before measuring.{said} Rerun with NCCL_DEBUG=WARN to see why")
    results = [_json_result(entry, f"results[{index}]") for index, entry in enumerate(results_raw)]
    if not results:
        raise _json_error("results", "at least one measured size", results_raw,
                          "The run stopped before measuring: rerun with NCCL_DEBUG=WARN to see why")
    nranks = _json_nranks(config)
    candidates = collective_candidates(results, frozenset({"redop", "root"}), nranks)
    collective, source = identify_collective(_json_collective(document.get("args")), set(), candidates)
    run = NcclTestsRun(
        collective=collective,
        collective_source=source,
        collective_candidates=candidates,
        nranks=nranks,
        nccl_version=nccl_version_from_code(document["nccl_version"])
        if isinstance(document.get("nccl_version"), int) else None,
        avg_busbw_gbps=None,
        out_of_bounds=None,
        out_of_bounds_ok=None,
        results=results,
    )
    bounds = _json_object(document.get("out_of_bounds"), "out_of_bounds", required=False)
    if bounds:
        run.out_of_bounds = _json_int(bounds.get("count"), "out_of_bounds.count")
        run.out_of_bounds_ok = _json_bool(bounds.get("okay"), "out_of_bounds.okay")
        if run.out_of_bounds_ok is None and run.out_of_bounds is not None:
            run.out_of_bounds_ok = run.out_of_bounds == 0
    average = document.get("average_bus_bandwidth", document.get("average_bus_bandwidith"))
    average = _json_object(average, "average_bus_bandwidth", required=False)
    if average:
        value = average.get("bandwidth", average.get("bandwidith"))
        run.avg_busbw_gbps = finite_or_none(_json_number(value, "average_bus_bandwidth.bandwidth", required=False))
        run.complete = True
    return run


# What the writer (printf of a double) and other JSON writers put for values that are no number.
_NON_FINITE = {"nan": math.nan, "-nan": math.nan, "+nan": math.nan, "inf": math.inf, "+inf": math.inf,
               "-inf": -math.inf, "infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf}


def _json_error(where: str, expected: str, found: Any, todo: str = "") -> NcclTestsParseError:
    found_text = json.dumps(found)[:EXCERPT_CHARS] if _jsonable(found) else repr(found)[:EXCERPT_CHARS]
    todo = todo or "Pass the file nccl-tests wrote with -J, unchanged"
    return NcclTestsParseError(expected_found(f"nccl-tests JSON, {where}", expected, found_text, todo),
                               None, found_text)


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _json_object(value: Any, where: str, required: bool = True) -> dict[str, Any] | None:
    if value is None and not required:
        return None
    if not isinstance(value, dict):
        raise _json_error(where, "an object", value)
    return value


def _json_number(value: Any, where: str, required: bool = True) -> float | None:
    if value is None and not required:
        return None
    if isinstance(value, str) and value.strip().lower() in _NON_FINITE:
        return _NON_FINITE[value.strip().lower()]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _json_error(where, "a number", value)
    try:
        return float(value)
    except OverflowError:
        raise _json_error(where, "a number of a sensible size", value) from None


def _json_int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    number = _json_number(value, where)
    if number is None or not math.isfinite(number) or number != int(number):
        raise _json_error(where, "a whole number", value)
    return int(number)


def _json_bool(value: Any, where: str) -> bool | None:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    if value is None or value == "unchecked":
        return None
    raise _json_error(where, '"true" or "false"', value)


def _json_name(value: Any, where: str, required: bool) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not NAME_RE.match(value.strip()):
        raise _json_error(where, "a name such as float or sum", value)
    return value.strip()


def _json_measurement(value: Any, where: str) -> Measurement | None:
    if value is None:
        return None
    data = _json_object(value, where)
    if data is None:  # narrows the type; an assert would vanish under python -O
        raise AssertionError("unreachable: data is not None")
    time_value = data.get("time", data.get("cpu_time"))
    wrong = data.get("nwrong")
    return measurement(
        _json_number(time_value, f"{where}.time") or 0.0,
        _json_number(data.get("alg_bw"), f"{where}.alg_bw") or 0.0,
        _json_number(data.get("bus_bw"), f"{where}.bus_bw") or 0.0,
        None if wrong is None or wrong == "nan" else _json_int(wrong, f"{where}.nwrong"),
    )


def _json_result(value: Any, where: str) -> SizeResult:
    entry = _json_object(value, where)
    if entry is None:  # narrows the type; an assert would vanish under python -O
        raise AssertionError("unreachable: entry is not None")
    size = _json_int(entry.get("size"), f"{where}.size")
    count = _json_int(entry.get("count"), f"{where}.count")
    if size is None or count is None or size < 0 or count < 0:
        raise _json_error(where, "'size' and 'count' as whole numbers", entry)
    root_value = entry.get("root")
    if isinstance(root_value, str) and SIGNED_INT_RE.match(root_value.strip()):
        root: int | None = int(root_value.strip())
    elif isinstance(root_value, int) and not isinstance(root_value, bool):
        root = root_value
    elif root_value is None:
        root = None
    else:
        raise _json_error(f"{where}.root", "a rank number or -1", root_value)
    out_of_place = _json_measurement(entry.get("out_of_place"), f"{where}.out_of_place")
    if out_of_place is None:
        raise _json_error(f"{where}.out_of_place", "the out-of-place measurement", None,
                          "Runs that measure only in-place (trace replay) are not supported here")
    redop = _json_name(entry.get("redop"), f"{where}.redop", required=False)
    return SizeResult(
        size_bytes=size,
        count=count,
        type=_json_name(entry.get("type"), f"{where}.type", required=True) or "",
        redop=None if redop in (None, "none") else redop,
        root=None if root is None or root < 0 else root,
        out_of_place=out_of_place,
        in_place=_json_measurement(entry.get("in_place"), f"{where}.in_place"),
    )


def _json_collective(args: Any) -> str | None:
    if isinstance(args, list) and args and isinstance(args[0], str) and args[0].strip():
        return collective_name(args[0])
    return None


def _json_nranks(config: dict[str, Any] | None) -> int | None:
    if not config:
        return None
    threads, gpus, devices = config.get("nthreads"), config.get("ngpus"), config.get("devices")
    # One "devices" entry per process (the MPI root parses the first rank line of each); every process
    # runs nthreads x ngpus ranks.
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (threads, gpus)):
        return None
    processes = len(devices) if isinstance(devices, list) and devices else 1
    return processes * threads * gpus
