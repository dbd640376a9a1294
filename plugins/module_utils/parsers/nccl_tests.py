"""What an nccl-tests run is, whichever of its outputs it was read from, and the numbers that go with it.

nccl_tests_text parses the text table the binaries print, nccl_tests_json the file they write with
``-J``; both return the types here and raise ``NcclTestsParseError`` (a ``ValueError``), which says
what was expected, what was found (with the line number where there is one) and what to do.

Output schema, as ``NcclTestsRun.as_dict()`` gives it: ``results`` (one ``SizeResult`` per message
size: ``size_bytes``, ``count``, ``type``, ``redop`` (None where the collective has none), and
``out_of_place`` / ``in_place`` (None when not measured), each a ``Measurement`` ``{time_us,
algbw_gbps, busbw_gbps, wrong}``: times in us, bandwidths in GB/s (1e9), ``wrong`` None when not
checked; time and bandwidths all None where the tool printed inf or nan for one of them, which
no timer measures: ``0.00 us / inf GB/s`` is size / 0), and ``not_measured`` (only on such rows:
the placements printed that way), ``avg_busbw_gbps`` (None when printed as inf or nan),
``nccl_version`` (``"2.21.5"``), ``nranks``, ``collective`` (``"all_reduce"``...; None when the
output does not show it, never a guess), ``collective_source``
(``header``, ``command``, ``columns``) and ``collective_candidates`` (what the columns allow), and
``out_of_bounds``; ``NcclTestsRun`` also keeps ``out_of_bounds_ok`` and ``complete`` (the run got to
its footer). ``bus_bandwidth_factor`` gives the factor nccl-tests turns algbw into busbw with,
``collective_name`` the collective a binary measures, ``collectives_named`` the binaries a line names,
``collective_candidates`` and ``identify_collective`` tell the collective from what a log shows (its
header, a command line, the redop and root columns, busbw/algbw for the rank count),
``nccl_version_from_code`` the version an ``NCCL_VERSION_CODE`` stands for.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import ParseError


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
    """One placement (out-of-place or in-place) of one size. Times in us, bandwidths in GB/s (1e9);
    all three None when the tool printed inf or nan for any of them (``measurement`` builds it so)."""

    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None  # wrong elements; None when not checked (-c 0) or not counted (old versions)
    # Before nccl-tests 2.13 the check column held the largest deviation from the expected values.
    max_error: float | None = None

    @property
    def measured(self) -> bool:
        return self.time_us is not None

    def as_dict(self) -> dict[str, Any]:
        return {"time_us": self.time_us, "algbw_gbps": self.algbw_gbps, "busbw_gbps": self.busbw_gbps,
                "wrong": self.wrong}


def measurement(time_us: float, algbw_gbps: float, busbw_gbps: float, wrong: int | None,
                max_error: float | None = None) -> Measurement:
    """A Measurement from printed values. inf or nan in any of the three is no measurement: the time
    is what the bandwidths are computed from (inf GB/s is a size over 0.00 us), so all three go null;
    the wrong count stays, since the values were checked all the same."""
    if all(math.isfinite(v) for v in (time_us, algbw_gbps, busbw_gbps)):
        return Measurement(time_us, algbw_gbps, busbw_gbps, wrong, max_error)
    return Measurement(None, None, None, wrong, max_error)


def finite_or_none(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


@dataclass(frozen=True)
class SizeResult:
    size_bytes: int
    count: int
    type: str
    redop: str | None  # None where the collective has none (all-gather, broadcast) or the column is absent
    root: int | None  # None where the collective has none (nccl-tests prints -1) or the column is absent
    out_of_place: Measurement
    in_place: Measurement | None

    @property
    def not_measured(self) -> list[str]:
        """The placements printed as inf or nan."""
        return [name for name, placed in (("out_of_place", self.out_of_place), ("in_place", self.in_place))
                if placed is not None and not placed.measured]

    def as_dict(self) -> dict[str, Any]:
        data = {
            "size_bytes": self.size_bytes,
            "count": self.count,
            "type": self.type,
            "redop": self.redop,
            "out_of_place": self.out_of_place.as_dict(),
            "in_place": self.in_place.as_dict() if self.in_place is not None else None,
        }
        if self.not_measured:
            data["not_measured"] = self.not_measured
        return data


@dataclass
class NcclTestsRun:
    collective: str | None  # "all_reduce", "all_gather", ... when the output shows it; never guessed
    nranks: int | None
    nccl_version: str | None  # "2.21.5": the library that ran, when the output says
    avg_busbw_gbps: float | None
    out_of_bounds: int | None
    out_of_bounds_ok: bool | None
    results: list[SizeResult] = field(default_factory=list)
    complete: bool = False  # the footer was seen: the run got to its end
    # How the collective was told: "header" (Collective test starting, -J args), "command" (the binary
    # named on a command line of the log), "columns" (redop, root and busbw/algbw allow only one); None.
    collective_source: str | None = None
    # The collectives the columns allow, when they do not single one out (empty when nothing was measured).
    collective_candidates: list[str] = field(default_factory=list)
    # Per rank, in rank order, the GPU name its "# Rank N ... device N [bus] NAME" line printed; empty when none did.
    device_names: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "results": [result.as_dict() for result in self.results],
            "avg_busbw_gbps": self.avg_busbw_gbps,
            "nccl_version": self.nccl_version,
            "nranks": self.nranks,
            "collective": self.collective,
            "collective_source": self.collective_source,
            "collective_candidates": list(self.collective_candidates),
            "out_of_bounds": self.out_of_bounds,
        }

    def latency_curve(self, in_place: bool = False) -> list[tuple[int, float]]:
        """(size_bytes, time_us) per measured size above zero bytes, as the comm model takes it."""
        curve = []
        for result in self.results:
            measurement = result.in_place if in_place else result.out_of_place
            if measurement is not None and measurement.time_us is not None and result.size_bytes > 0:
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


# The binaries nccl-tests builds, as a log names them: ./build/all_gather_perf, alltoall_perf_mpi.
_BINARY_RE = re.compile(r"(?<![A-Za-z0-9_])(all_reduce|all_gather|reduce_scatter|alltoallv?|broadcast|reduce|gather|"
                        r"scatter|sendrecv|hypercube)_perf(?:_mpi)?(?![A-Za-z0-9_])")


def collectives_named(line: str) -> set[str]:
    """The collectives whose nccl-tests binaries a line names (a command line, a prompt, a job script)."""
    return set(_BINARY_RE.findall(line)) if "_perf" in line else set()


# What each collective's rows show (nccl-tests src/*.cu, the TimeTest call of each test). From 2.13 every
# binary prints redop and root: the operation for those that take one (sendrecv too: it honours -o),
# "none" for the others ("" before 2.13.6); a root of 0 or more for the rooted ones, -1 for the others.
WITH_OPERATION = frozenset({"all_reduce", "reduce_scatter", "reduce", "sendrecv"})
ROOTED = frozenset({"broadcast", "reduce", "gather", "scatter"})
# Before 2.13 each binary printed only its own lead columns.
_OLD_LEAD_COLUMNS = {
    "all_reduce": frozenset({"redop"}), "reduce_scatter": frozenset({"redop"}), "alltoall": frozenset({"redop"}),
    "all_gather": frozenset(), "sendrecv": frozenset(), "broadcast": frozenset({"root"}),
    "gather": frozenset({"root"}), "scatter": frozenset({"root"}), "reduce": frozenset({"redop", "root"}),
}
# busbw/algbw is read from rows whose algbw, printed with two decimals, gives the ratio to about 1%.
_RATIO_MIN_ALGBW = 0.5


def _bandwidth_ratio(results: list[SizeResult]) -> tuple[float, float] | None:
    """busbw/algbw of the row with the largest algbw, and that algbw; None without a usable row."""
    best = max((r.out_of_place for r in results if r.out_of_place.measured),
               key=lambda m: m.algbw_gbps or 0.0, default=None)
    if best is None or best.algbw_gbps is None or best.busbw_gbps is None or best.algbw_gbps < _RATIO_MIN_ALGBW:
        return None
    return best.busbw_gbps / best.algbw_gbps, best.algbw_gbps


def collective_candidates(results: list[SizeResult], columns: frozenset[str], nranks: int | None) -> list[str]:
    """The collectives whose rows look like these: lead ``columns`` present (``redop``, ``root``), their
    values, and busbw/algbw against each collective's factor for ``nranks`` (or, without a rank count,
    against what any rank count allows). Sorted; all of them when nothing tells them apart."""
    candidates = set(_BUS_FACTORS)
    if columns >= {"redop", "root"}:
        pass  # 2.13 on (or the old reduce): the values decide
    else:
        candidates = {name for name, lead in _OLD_LEAD_COLUMNS.items() if lead == columns & {"redop", "root"}}
    if results and "redop" in columns:
        with_operation = any(r.redop is not None for r in results)
        candidates = {c for c in candidates if (c in WITH_OPERATION) == with_operation}
    if results and "root" in columns and columns >= {"redop", "root"}:
        rooted = any(r.root is not None for r in results)
        candidates = {c for c in candidates if (c in ROOTED) == rooted}
    ratio = _bandwidth_ratio(results)
    if ratio is not None:
        value, algbw = ratio
        tolerance = 0.006 * (1 + value) / algbw + 1e-3
        if nranks is not None and nranks >= 2:
            candidates = {c for c in candidates if abs(_BUS_FACTORS[c](nranks) - value) <= tolerance}
        elif nranks is None:
            # Without a rank count: above 1 only all-reduce's 2(n-1)/n; at 1 all-reduce of two ranks or a
            # factor-1 collective; below 1 only the (n-1)/n collectives.
            if value > 1 + tolerance:
                candidates &= {"all_reduce"}
            elif value >= 1 - tolerance:
                candidates = {c for c in candidates if c == "all_reduce" or _BUS_FACTORS[c](2) == 1.0}
            else:
                candidates = {c for c in candidates if c != "all_reduce" and _BUS_FACTORS[c](2) < 1.0}
    return sorted(candidates)


def identify_collective(named: str | None, mentioned: set[str], candidates: list[str]) -> tuple[str | None, str | None]:
    """(collective, source) from what the output shows, in order of trust: the name nccl-tests printed
    (``named``), one binary named on a command line that the columns allow, the columns when they allow
    only one. (None, None) when the output cannot tell: never a default."""
    if named:
        return named, "header"
    if len(mentioned) == 1:
        (name,) = mentioned
        if name in candidates or not candidates:
            return name, "command"
        return None, None
    if len(candidates) == 1:
        return candidates[0], "columns"
    return None, None


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
