"""What an nccl-tests run is, whichever of its outputs it was read from, and the numbers that go with it.

nccl_tests_text parses the text table the binaries print, nccl_tests_json the file they write with
``-J``; both return the types here and raise ``NcclTestsParseError`` (a ``ValueError``), which says
what was expected, what was found (with the line number where there is one) and what to do.

Output schema, as ``NcclTestsRun.as_dict()`` gives it: ``results`` (one ``SizeResult`` per message
size: ``size_bytes``, ``count``, ``type``, ``redop`` (None where the collective has none), and
``out_of_place`` / ``in_place`` (None when not measured), each a ``Measurement`` ``{time_us,
algbw_gbps, busbw_gbps, wrong}``: times in us, bandwidths in GB/s (1e9), ``wrong`` None when not
checked), ``avg_busbw_gbps``, ``nccl_version`` (``"2.21.5"``), ``nranks``, ``collective``
(``"all_reduce"``...) and ``out_of_bounds``; ``NcclTestsRun`` also keeps ``out_of_bounds_ok`` and
``complete`` (the run got to its footer). ``bus_bandwidth_factor`` gives the factor nccl-tests turns
algbw into busbw with, ``collective_name`` the collective a binary measures, ``nccl_version_from_code``
the version an ``NCCL_VERSION_CODE`` stands for.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ansible.module_utils.gpuhost.parsers._common import ParseError


class NcclTestsParseError(ParseError):
    """nccl-tests output that cannot be read as a run's results, with what to do about it."""

    def __init__(self, message: str, line_number: int | None = None, excerpt: str | None = None) -> None:
        super().__init__(message)
        self.line_number = line_number
        self.excerpt = excerpt


# --------------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class Measurement:
    """One placement (out-of-place or in-place) of one size. Times in us, bandwidths in GB/s (1e9)."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None  # wrong elements; None when not checked (-c 0) or not counted (old versions)
    # Before nccl-tests 2.13 the check column held the largest deviation from the expected values.
    max_error: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"time_us": self.time_us, "algbw_gbps": self.algbw_gbps, "busbw_gbps": self.busbw_gbps,
                "wrong": self.wrong}


@dataclass(frozen=True)
class SizeResult:
    size_bytes: int
    count: int
    type: str
    redop: str | None  # None where the collective has none (all-gather, broadcast) or the column is absent
    root: int | None  # None where the collective has none (nccl-tests prints -1) or the column is absent
    out_of_place: Measurement
    in_place: Measurement | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "size_bytes": self.size_bytes,
            "count": self.count,
            "type": self.type,
            "redop": self.redop,
            "out_of_place": self.out_of_place.as_dict(),
            "in_place": self.in_place.as_dict() if self.in_place is not None else None,
        }


@dataclass
class NcclTestsRun:
    collective: str | None  # "all_reduce", "all_gather", ... when the output names it
    nranks: int | None
    nccl_version: str | None  # "2.21.5": the library that ran, when the output says
    avg_busbw_gbps: float | None
    out_of_bounds: int | None
    out_of_bounds_ok: bool | None
    results: list[SizeResult] = field(default_factory=list)
    complete: bool = False  # the footer was seen: the run got to its end

    def as_dict(self) -> dict[str, Any]:
        return {
            "results": [result.as_dict() for result in self.results],
            "avg_busbw_gbps": self.avg_busbw_gbps,
            "nccl_version": self.nccl_version,
            "nranks": self.nranks,
            "collective": self.collective,
            "out_of_bounds": self.out_of_bounds,
        }

    def latency_curve(self, in_place: bool = False) -> list[tuple[int, float]]:
        """(size_bytes, time_us) per measured size above zero bytes, as the comm model takes it."""
        curve = []
        for result in self.results:
            measurement = result.in_place if in_place else result.out_of_place
            if measurement is not None and result.size_bytes > 0 and math.isfinite(measurement.time_us):
                curve.append((result.size_bytes, measurement.time_us))
        return curve


# --------------------------------------------------------------------------------------------------
# Bus bandwidth

# busbw = algbw x factor, so that busbw compares with the hardware's link bandwidth whatever the rank
# count (nccl-tests doc/PERFORMANCE.md; each test's GetBw function in src/).
_BUS_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def collective_name(name: str) -> str:
    """``all_reduce`` from ``all_reduce_perf``, ``all_reduce_perf_mpi``, ``/opt/build/all_reduce_perf``."""
    name = name.strip().rsplit("/", 1)[-1].lower()
    for suffix in ("_perf_mpi", "_perf"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def bus_bandwidth_factor(collective: str, nranks: int) -> float:
    """The factor nccl-tests multiplies algbw with to get busbw for this collective and rank count."""
    name = collective_name(collective) if isinstance(collective, str) else collective
    if name not in _BUS_FACTORS:
        raise NcclTestsParseError(
            f"bus bandwidth factor: expected one of {', '.join(sorted(_BUS_FACTORS))}; found {collective!r}. "
            "Name the collective as its nccl-tests binary does (all_reduce_perf -> all_reduce).")
    if isinstance(nranks, bool) or not isinstance(nranks, int) or nranks < 1:
        raise NcclTestsParseError(
            f"bus bandwidth factor: expected a rank count of 1 or more; found {nranks!r}. "
            "Pass the number of ranks (GPUs) the run used.")
    return float(_BUS_FACTORS[name](nranks))


# --------------------------------------------------------------------------------------------------
# NCCL versions


def nccl_version_from_code(code: int) -> str | None:
    """``"2.21.5"`` from NCCL_VERSION_CODE 22105 (2.9 on) or 2804 (before 2.9: major*1000+minor*100+patch)."""
    if isinstance(code, bool) or not isinstance(code, int) or code <= 0:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


# --------------------------------------------------------------------------------------------------
# What both parsers check values with

EXCERPT_CHARS = 100  # the longest excerpt of the input an error message quotes
SIGNED_INT_RE = re.compile(r"^-?\d{1,9}$")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
