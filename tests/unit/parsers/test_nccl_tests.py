"""Parsers of nccl-tests output, over real outputs of several versions (tests/fixtures/nccl, see SOURCES.md)."""

from __future__ import annotations

import contextlib
import json

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import ParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests import (
    Measurement,
    NcclTestsParseError,
    bus_bandwidth_factor,
    collective_name,
    nccl_version_from_code,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests_json import parse_nccl_tests_json
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests_text import parse_nccl_tests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import paths
from tests.cpu_limit import within

FIXTURES = paths.FIXTURES / "nccl"


def fixture(name: str) -> str:
    with open(FIXTURES / name, encoding="utf-8", newline="") as handle:
        return handle.read()


def m(time_us: float, algbw: float, busbw: float, wrong: int | None) -> dict:
    return {"time_us": time_us, "algbw_gbps": algbw, "busbw_gbps": busbw, "wrong": wrong}


def row(size: int, count: int, type_: str, redop: str | None, oop: dict, ip: dict | None) -> dict:
    return {"size_bytes": size, "count": count, "type": type_, "redop": redop, "out_of_place": oop, "in_place": ip}


# --------------------------------------------------------------------------------------------------
# Every text fixture, exactly: the summary fields, the number of sizes, the first and the last row

TEXT_EXPECTED = {
    "all_reduce_perf_2.0-era_nccl2.4.2_4xV100-PCIe.txt": dict(
        collective="all_reduce", nranks=4, nccl_version=None, avg_busbw_gbps=4.42606, out_of_bounds=0, sizes=25,
        first=row(8, 2, "float", "sum", m(16.36, 0.0, 0.0, None), m(15.99, 0.0, 0.0, None)),
        last=row(134217728, 33554432, "float", "sum", m(18003.0, 7.46, 11.18, None), m(17974.0, 7.47, 11.20, None))),
    "all_gather_perf_2.0-era_c0-N-A_8xA100.txt": dict(
        collective="all_gather", nranks=8, nccl_version=None, avg_busbw_gbps=58.2651, out_of_bounds=0, sizes=34,
        first=row(0, 0, "float", None, m(34.27, 0.0, 0.0, None), m(33.57, 0.0, 0.0, None)),
        last=row(8589934592, 268435456, "float", None, m(33646.0, 255.31, 223.39, None),
                 m(32669.0, 262.94, 230.07, None))),
    "all_reduce_perf_2.15-2.16_2x2080Ti-no-p2p.txt": dict(
        collective=None, nranks=2, nccl_version=None, avg_busbw_gbps=2.05774, out_of_bounds=0, sizes=28,
        first=row(8, 2, "float", "sum", m(12.25, 0.0, 0.0, 0), m(12.00, 0.0, 0.0, 0)),
        last=row(1073741824, 268435456, "float", "sum", m(268588.0, 4.0, 4.0, 0), m(268461.0, 4.0, 4.0, 0))),
    "all_gather_perf_2.15-2.16_2x2080Ti-no-p2p.txt": dict(
        collective=None, nranks=2, nccl_version=None, avg_busbw_gbps=1.6651, out_of_bounds=0, sizes=28,
        first=row(0, 0, "float", None, m(0.33, 0.0, 0.0, 0), m(0.36, 0.0, 0.0, 0)),
        last=row(1073741824, 134217728, "float", None, m(141614.0, 7.58, 3.79, 0), m(139719.0, 7.69, 3.84, 0))),
    "all_gather_perf_2.13-plus_c0-N-A_hash-stripped_16xH100.txt": dict(
        collective=None, nranks=None, nccl_version=None, avg_busbw_gbps=146.948, out_of_bounds=0, sizes=11,
        first=row(8388608, 131072, "float", None, m(166.6, 50.34, 47.19, None), m(164.1, 51.11, 47.92, None)),
        last=row(8589934592, 134217728, "float", None, m(42713.0, 201.11, 188.54, None),
                 m(42701.0, 201.16, 188.59, None))),
    "all_gather_perf_2.18.0_nccl2.29.7_mpirun-tagged.txt": dict(
        collective="all_gather", nranks=2, nccl_version="2.29.7", avg_busbw_gbps=1.54321, out_of_bounds=0, sizes=8,
        first=row(1048576, 131072, "float", None, m(2191.72, 0.48, 0.24, 0), m(2194.02, 0.48, 0.24, 0)),
        last=row(134217728, 16777216, "float", None, m(29185.2, 4.60, 2.30, 0), m(29349.9, 4.57, 2.29, 0))),
    "all_reduce_perf_2.13-2.14_nccl2.20.5_debug-info-interleaved_2xA100.txt": dict(
        collective=None, nranks=2, nccl_version="2.20.5", avg_busbw_gbps=179.465, out_of_bounds=0, sizes=3,
        first=row(134217728, 33554432, "float", "sum", m(857.6, 156.51, 156.51, 0), m(819.6, 163.76, 163.76, 0)),
        last=row(536870912, 134217728, "float", "sum", m(2789.9, 192.43, 192.43, 0),
                 m(2793.6, 192.18, 192.18, 0))),
    "transfer-test-in-all_reduce_perf-layout_incident-reconstructed_8xRTXPRO6000-vm-no-p2p.txt": dict(
        collective="all_reduce", nranks=8, nccl_version=None, avg_busbw_gbps=17.0847, out_of_bounds=0, sizes=2,
        first=row(12288, 6144, "bfloat16", "sum", m(13.70, 0.90, 1.57, 0), m(13.70, 0.90, 1.57, 0)),
        last=row(805306368, 402653184, "bfloat16", "sum", m(43230.0, 18.63, 32.60, 0),
                 m(43230.0, 18.63, 32.60, 0))),
}

# What the output does not say but the source does: needed to check busbw against the formula.
RUN_FACTS = {
    "all_reduce_perf_2.0-era_nccl2.4.2_4xV100-PCIe.txt": ("all_reduce", 4),
    "all_gather_perf_2.0-era_c0-N-A_8xA100.txt": ("all_gather", 8),
    "all_reduce_perf_2.15-2.16_2x2080Ti-no-p2p.txt": ("all_reduce", 2),
    "all_gather_perf_2.15-2.16_2x2080Ti-no-p2p.txt": ("all_gather", 2),
    "all_gather_perf_2.13-plus_c0-N-A_hash-stripped_16xH100.txt": ("all_gather", 16),  # two nodes of eight
    "all_gather_perf_2.18.0_nccl2.29.7_mpirun-tagged.txt": ("all_gather", 2),
    "all_reduce_perf_2.13-2.14_nccl2.20.5_debug-info-interleaved_2xA100.txt": ("all_reduce", 2),
    "transfer-test-in-all_reduce_perf-layout_incident-reconstructed_8xRTXPRO6000-vm-no-p2p.txt": ("all_reduce", 8),
}
TEXT_FIXTURES = sorted(TEXT_EXPECTED)
CRASH_FIXTURE = "all_reduce_perf_2.13-2.14_crash-unhandled-cuda-error_2x3090.txt"
# Excerpts of other collectives' logs (no footer): what identifies the collective, or that nothing does.
EXCERPT_EXPECTED = {
    "broadcast_perf_2.0-era_nccl2.9.6_2xV100-2nodes_mpirun-command_excerpt.txt": dict(
        collective="broadcast", source="command", candidates=["broadcast", "gather", "scatter"], nranks=2,
        nccl_version="2.9.6", sizes=1, first=row(8, 2, "float", None, m(45.82, 0.0, 0.0, None),
                                                   m(38.17, 0.0, 0.0, None))),
    "sendrecv_perf_2.13-plus_2xA40-2nodes_excerpt.txt": dict(
        collective=None, source=None, candidates=["all_reduce", "reduce_scatter", "sendrecv"], nranks=2,
        nccl_version=None, sizes=5, first=row(256, 64, "float", "sum", m(34.24, 0.01, 0.01, 0),
                                                m(33.65, 0.01, 0.01, None))),
    "broadcast_perf_rccl-tests_gfx1151_root0_excerpt.txt": dict(
        collective="broadcast", source="command", candidates=["broadcast"], nranks=None, nccl_version=None,
        sizes=10, first=row(262144, 65536, "float", None, m(43.0, 6.1, 6.1, 0), m(42.86, 6.12, 6.12, 0))),
}
JSON_FIXTURES = sorted(path.name for path in FIXTURES.iterdir() if path.suffix == ".json")
ALL_NCCL_TESTS_FIXTURES = [*TEXT_FIXTURES, CRASH_FIXTURE, *sorted(EXCERPT_EXPECTED)]


def test_every_text_fixture_is_covered() -> None:
    on_disk = {p.name for p in FIXTURES.iterdir() if p.suffix == ".txt"}
    assert on_disk == {*TEXT_EXPECTED, CRASH_FIXTURE, *EXCERPT_EXPECTED}


@pytest.mark.parametrize("name", TEXT_FIXTURES)
def test_text_fixture_parses_exactly(name: str) -> None:
    expected = TEXT_EXPECTED[name]
    run = parse_nccl_tests(fixture(name))

    assert (run.collective, run.nranks, run.nccl_version) == \
        (expected["collective"], expected["nranks"], expected["nccl_version"])
    assert run.avg_busbw_gbps == expected["avg_busbw_gbps"]
    assert (run.out_of_bounds, run.out_of_bounds_ok, run.complete) == (expected["out_of_bounds"], True, True)
    assert len(run.results) == expected["sizes"]
    data = run.as_dict()
    assert data["results"][0] == expected["first"]
    assert data["results"][-1] == expected["last"]
    sizes = [r.size_bytes for r in run.results]
    assert sizes == sorted(sizes)


@pytest.mark.parametrize("name", TEXT_FIXTURES)
def test_as_dict_has_exactly_the_documented_keys(name: str) -> None:
    data = parse_nccl_tests(fixture(name)).as_dict()

    assert set(data) == {"results", "avg_busbw_gbps", "nccl_version", "nranks", "collective", "collective_source",
                         "collective_candidates", "out_of_bounds"}
    for result in data["results"]:
        assert set(result) == {"size_bytes", "count", "type", "redop", "out_of_place", "in_place"}
        for placement in (result["out_of_place"], result["in_place"]):
            assert set(placement) == {"time_us", "algbw_gbps", "busbw_gbps", "wrong"}
    json.dumps(data)  # what the module returns must serialise


def test_old_error_column_is_a_deviation_not_a_count() -> None:
    # nccl-tests before 2.13 printed the largest deviation (%5.0le), not wrong elements.
    run = parse_nccl_tests(fixture("all_reduce_perf_2.0-era_nccl2.4.2_4xV100-PCIe.txt"))

    assert all(r.out_of_place.wrong is None for r in run.results)
    assert run.results[0].out_of_place.max_error == 1e-07
    assert run.results[0].in_place.max_error == 0.0
    assert run.results[-1].out_of_place.max_error == 2e-07


def test_zero_byte_rows_stay_in_the_results_but_not_in_the_latency_curve() -> None:
    run = parse_nccl_tests(fixture("all_gather_perf_2.0-era_c0-N-A_8xA100.txt"))

    assert [r.size_bytes for r in run.results[:6]] == [0, 0, 0, 0, 0, 32]
    curve = run.latency_curve()
    assert curve[0] == (32, 35.03)
    assert len(curve) == len(run.results) - 5
    assert run.latency_curve(in_place=True)[0] == (32, 34.15)


@pytest.mark.parametrize("name", sorted(EXCERPT_EXPECTED))
def test_excerpt_of_another_collective(name: str) -> None:
    expected = EXCERPT_EXPECTED[name]
    run = parse_nccl_tests(fixture(name))

    assert (run.collective, run.collective_source, run.collective_candidates) == \
        (expected["collective"], expected["source"], expected["candidates"])
    assert (run.nranks, run.nccl_version, len(run.results)) == (expected["nranks"], expected["nccl_version"],
                                                                expected["sizes"])
    assert run.as_dict()["results"][0] == expected["first"]


# --------------------------------------------------------------------------------------------------
# Which collective: what the output shows, never a default


def _without_names(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if "_perf" not in line)


@pytest.mark.parametrize(("name", "collective", "source"), [
    # Rows, rank count and busbw/algbw alone.
    ("transfer-test-in-all_reduce_perf-layout_incident-reconstructed_"
     "8xRTXPRO6000-vm-no-p2p.txt", "all_reduce", "columns"),
    ("all_reduce_perf_2.0-era_nccl2.4.2_4xV100-PCIe.txt", "all_reduce", "columns"),
    ("all_gather_perf_2.0-era_c0-N-A_8xA100.txt", "all_gather", "columns"),
    ("broadcast_perf_rccl-tests_gfx1151_root0_excerpt.txt", "broadcast", "columns"),
    # Two ranks: all-reduce and send/recv both print an operation, root -1 and busbw = algbw.
    ("all_reduce_perf_2.15-2.16_2x2080Ti-no-p2p.txt", None, None),
    # redop none and root -1 with (n-1)/n: all-gather or alltoall.
    ("all_gather_perf_2.15-2.16_2x2080Ti-no-p2p.txt", None, None),
    ("all_gather_perf_2.18.0_nccl2.29.7_mpirun-tagged.txt", None, None),
    # A root column only (before 2.13): broadcast, gather or scatter.
    ("broadcast_perf_2.0-era_nccl2.9.6_2xV100-2nodes_mpirun-command_excerpt.txt", None, None),
])
def test_collective_from_the_columns_alone(name: str, collective: str | None, source: str | None) -> None:
    run = parse_nccl_tests(_without_names(fixture(name)))

    assert (run.collective, run.collective_source) == (collective, source)
    if collective is None:
        assert len(run.collective_candidates) > 1


@pytest.mark.parametrize("command", [
    "$ ./build/all_reduce_perf -b 8 -e 1G -f 2 -g 2",
    "root@node:~/nccl-tests# NCCL_DEBUG=WARN ./build/all_reduce_perf -b 8 -e 1G -g 2",
    "+ srun --mpi=pmix -N 1 /opt/nccl-tests/build/all_reduce_perf_mpi -b 8 -e 1G",
    "[1,0]<stdout>:mpirun -np 2 /usr/local/bin/all_reduce_perf -b 8",
])
def test_collective_from_a_command_line(command: str) -> None:
    run = parse_nccl_tests(command + "\n" + fixture("all_reduce_perf_2.15-2.16_2x2080Ti-no-p2p.txt"))

    assert (run.collective, run.collective_source) == ("all_reduce", "command")


def test_a_command_the_columns_contradict_names_nothing() -> None:
    # The log names all_gather_perf but its rows carry an operation: another command of the same session.
    log = fixture("all_reduce_perf_2.15-2.16_2x2080Ti-no-p2p.txt")
    run = parse_nccl_tests("$ ./build/all_gather_perf -g 2\n" + log)
    assert run.collective is None
    # Two binaries named: no single command to believe, the columns decide.
    two = "./all_reduce_perf -g 8; ./all_gather_perf -g 8\n"
    run = parse_nccl_tests(two + fixture("transfer-test-in-all_reduce_perf-layout_incident-reconstructed_"
                                         "8xRTXPRO6000-vm-no-p2p.txt"))
    assert (run.collective, run.collective_source) == ("all_reduce", "columns")


def test_blank_redop_of_early_2_13_is_none() -> None:
    # nccl-tests 2.13.0-2.13.5 printed "" for all-gather's operation: the root stands in its place.
    header = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
              "busbw #wrong")
    line = ("    33554432       8388608     float              -1    357.3   93.91   82.17      0    350.8   95.65   "
            "83.70      0")
    run = parse_nccl_tests(header + "\n" + line + "\n")

    assert (run.results[0].redop, run.results[0].root, run.results[0].out_of_place.busbw_gbps) == (None, None, 82.17)


@pytest.mark.parametrize("wrap", ["crlf", "qp", "rank-prefix", "srun-label"])
def test_pasted_logs_read_the_same(wrap: str) -> None:
    text = fixture("all_gather_perf_2.15-2.16_2x2080Ti-no-p2p.txt")
    if wrap == "crlf":
        pasted = text.replace("\n", "\r\n")
    elif wrap == "qp":
        pasted = "\n".join("=\n".join(line[i:i + 70] for i in range(0, max(len(line), 1), 70))
                           for line in text.replace("=", "=3D").split("\n"))
    elif wrap == "rank-prefix":
        pasted = "\n".join(f"[rank0]:{line}" for line in text.split("\n"))
    else:
        pasted = "\n".join(f"0: {line}" for line in text.split("\n"))
    assert parse_nccl_tests(pasted).as_dict() == parse_nccl_tests(text).as_dict()


def test_json_without_args_identifies_by_its_rows() -> None:
    document = json.loads(fixture("all_reduce_perf_json-v3_constructed-from-writer.json"))
    del document["args"]
    run = parse_nccl_tests_json(json.dumps(document))
    # Two ranks, redop sum, root -1, busbw = algbw: all-reduce or send/recv.
    assert (run.collective, run.collective_candidates) == (None, ["all_reduce", "sendrecv"])


# --------------------------------------------------------------------------------------------------
# busbw = algbw x factor, over every fixture (nccl-tests rounds both to 2 decimals)


@pytest.mark.parametrize("name", TEXT_FIXTURES)
def test_busbw_matches_algbw_times_factor(name: str) -> None:
    collective, nranks = RUN_FACTS[name]
    factor = bus_bandwidth_factor(collective, nranks)
    run = parse_nccl_tests(fixture(name))
    checked = 0
    for result in run.results:
        for measurement in (result.out_of_place, result.in_place):
            assert measurement is not None
            # algbw is printed rounded to 0.005: busbw can differ from algbw x factor by that much times factor.
            tolerance = 0.005 * factor + 0.0051
            assert abs(measurement.busbw_gbps - measurement.algbw_gbps * factor) <= tolerance, (result, factor)
            checked += 1
    assert checked == 2 * len(run.results)


def test_busbw_check_catches_a_wrong_rank_count() -> None:
    # The same check with the wrong rank count fails: it has teeth.
    run = parse_nccl_tests(fixture("all_reduce_perf_2.0-era_nccl2.4.2_4xV100-PCIe.txt"))
    wrong_factor = bus_bandwidth_factor("all_reduce", 2)
    last = run.results[-1].out_of_place
    assert abs(last.busbw_gbps - last.algbw_gbps * wrong_factor) > 1


@pytest.mark.parametrize(("collective", "nranks", "factor"), [
    ("all_reduce", 2, 1.0), ("all_reduce", 4, 1.5), ("all_reduce", 8, 1.75), ("all_reduce", 1, 0.0),
    ("all_gather", 2, 0.5), ("all_gather", 8, 0.875), ("reduce_scatter", 4, 0.75), ("alltoall", 8, 0.875),
    ("broadcast", 8, 1.0), ("reduce", 8, 1.0), ("sendrecv", 2, 1.0), ("all_reduce_perf", 8, 1.75),
    ("all_gather_perf_mpi", 16, 0.9375),
])
def test_bus_bandwidth_factor(collective: str, nranks: int, factor: float) -> None:
    assert bus_bandwidth_factor(collective, nranks) == pytest.approx(factor)


@pytest.mark.parametrize(("collective", "nranks", "message"), [
    ("allreduce_ring", 8, "expected one of .*all_reduce.*found 'allreduce_ring'"),
    ("all_reduce", 0, "rank count of 1 or more; found 0"),
    ("all_reduce", True, "rank count"),
    ("all_reduce", 2.0, "rank count"),
])
def test_bus_bandwidth_factor_rejects(collective: str, nranks: object, message: str) -> None:
    with pytest.raises(NcclTestsParseError, match=message):
        bus_bandwidth_factor(collective, nranks)  # type: ignore[arg-type]


@pytest.mark.parametrize(("code", "version"), [
    (22907, "2.29.7"), (22105, "2.21.5"), (21003, "2.10.3"), (2804, "2.8.4"), (2406, "2.4.6"),
    (0, None), (-1, None),
])
def test_nccl_version_from_code(code: int, version: str | None) -> None:
    # NCCL_VERSION_CODE is major*10000+minor*100+patch from 2.9, major*1000+minor*100+patch before.
    assert nccl_version_from_code(code) == version


@pytest.mark.parametrize(("name", "collective"), [
    ("all_reduce_perf", "all_reduce"), ("all_gather_perf_mpi", "all_gather"),
    ("/opt/nccl-tests/build/reduce_scatter_perf", "reduce_scatter"), ("alltoall", "alltoall"),
])
def test_collective_name(name: str, collective: str) -> None:
    assert collective_name(name) == collective


# --------------------------------------------------------------------------------------------------
# Format details met in public reports, tested inline (sources in SOURCES.md)

HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
          "   busbw #wrong")
ROW_8 = ("           8             2     float     sum      -1    12.25    0.00    0.00      0    12.00    0.00    0.00"
         "      0")
FOOTER = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 2.05774\n#\n"


def test_nccl_info_record_in_the_middle_of_a_row() -> None:
    # The row preamble and its measurements printed around an INFO record (lazy connection setup).
    text = "\n".join([
        HEADER,
        "           8             2     float     sum      -1host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via "
        "P2P/IPC",
        "host:1:3 [1] NCCL INFO Connected all rings",
        "    12.25    0.00    0.00      0    12.00    0.00    0.00      0",
        FOOTER,
    ])
    run = parse_nccl_tests(text)

    assert run.as_dict()["results"] == [row(8, 2, "float", "sum", m(12.25, 0.0, 0.0, 0), m(12.0, 0.0, 0.0, 0))]


def test_version_behind_the_info_prefix_and_behind_an_mpirun_tag() -> None:
    # nccl-tests#291 (recent NCCL) and nccl#300 (the bare line behind an mpirun tag).
    recent = "node:12225:12225 [0] NCCL INFO NCCL version 2.25.1+cuda12.4\n" + HEADER + "\n" + ROW_8 + "\n"
    tagged = "[1,0]<stdout>:NCCL version 2.5.6+cuda10.2\n" + HEADER + "\n" + ROW_8 + "\n"
    warning = ("node:1:1 [0] init.cc:1 NCCL WARN compiled with NCCL version 2.28.3, but is running with NCCL 2.27.5\n"
               + HEADER + "\n" + ROW_8 + "\n")

    assert parse_nccl_tests(recent).nccl_version == "2.25.1"
    assert parse_nccl_tests(tagged).nccl_version == "2.5.6"
    assert parse_nccl_tests(warning).nccl_version is None


def test_version_line_wins_over_the_library_code_of_the_header() -> None:
    text = "# nccl-tests version 2.17.6 nccl-headers=22809 nccl-library=22809\n" + HEADER + "\n" + ROW_8 + "\n"
    assert parse_nccl_tests(text).nccl_version == "2.28.9"
    assert parse_nccl_tests("NCCL version 2.28.3+cuda12.8\n" + text).nccl_version == "2.28.3"


def test_sendrecv_with_unchecked_in_place() -> None:
    # li-plus/playground cuda/nccl.md: sendrecv_perf checks out-of-place only.
    text = HEADER + "\n" + ("   134217728      33554432     float     sum      -1   1211.2  110.81  110.81      0"
                            "   1211.8  110.76  110.76    N/A\n")
    result = parse_nccl_tests(text).results[0]

    assert (result.out_of_place.wrong, result.in_place.wrong) == (0, None)


def test_cputime_per_iteration_and_timestamp_columns() -> None:
    # -C names the time column cputime; -I adds i_min i_max i_p99 i_cv% after each #wrong; -S adds a timestamp.
    header = ("#       size         count      type   redop    root  cputime   algbw   busbw  #wrong    i_min    i_max"
              "    i_p99    i_cv%  cputime   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%  timestamp")
    line = ("        1024           256     float     sum      -1    10.10    0.10    0.10       0     9.90    11.0"
            "    11.00     2.50    10.20    0.10    0.10       0     9.80    10.9    10.90     2.40"
            "  2026-01-02 03:04:05")
    result = parse_nccl_tests(header + "\n" + line + "\n").results[0]

    assert result.out_of_place == Measurement(10.10, 0.10, 0.10, 0)
    assert result.in_place == Measurement(10.20, 0.10, 0.10, 0)


def test_broadcast_before_2_13_has_a_root_column_and_no_redop() -> None:
    header = ("#       size         count    type    root     time   algbw   busbw  error     time   algbw   busbw"
              "  error")
    line = "           8             2   float       0    34.16    0.00    0.00    N/A    34.32    0.00    0.00    N/A"
    result = parse_nccl_tests(header + "\n" + line + "\n").results[0]

    assert (result.redop, result.root, result.out_of_place.max_error) == (None, 0, None)


def test_failed_checks_and_failed_threshold() -> None:
    text = (HEADER + "\n" + ROW_8.replace("0.00      0    12.00", "0.00 1.2e+06    12.00") + "\n"
            "# Out of bounds values : 3 FAILED\n# Avg bus bandwidth    : 2.05774 FAILED\n")
    run = parse_nccl_tests(text)

    assert run.results[0].out_of_place.wrong == 1200000
    assert (run.out_of_bounds, run.out_of_bounds_ok, run.avg_busbw_gbps) == (3, False, 2.05774)


def test_indented_and_hash_less_output() -> None:
    # Output pasted with an indent, and a log viewer that dropped the "#".
    text = "\n".join("    " + line.lstrip("#") for line in [HEADER, ROW_8, "# Avg bus bandwidth    : 2.05774"])
    run = parse_nccl_tests(text)

    assert run.results[0].size_bytes == 8
    assert run.avg_busbw_gbps == 2.05774


def test_output_without_footer_is_kept_but_not_complete() -> None:
    run = parse_nccl_tests(HEADER + "\n" + ROW_8 + "\n")

    assert len(run.results) == 1
    assert (run.complete, run.avg_busbw_gbps, run.out_of_bounds) == (False, None, None)


# --------------------------------------------------------------------------------------------------
# Garbled and failed runs: NcclTestsParseError that says what, where and what to do


def test_crashed_run_says_so_and_quotes_the_failure() -> None:
    with pytest.raises(NcclTestsParseError) as caught:
        parse_nccl_tests(fixture(CRASH_FIXTURE))

    message = str(caught.value)
    assert caught.value.line_number == 10
    assert "'unhandled cuda error" in message
    assert "nccl-tests reported a failure" in message
    assert "Test failure common.cu:842" in message  # the last lines are quoted
    assert "NCCL_DEBUG=WARN" in message


def test_failure_after_some_rows_counts_them() -> None:
    text = HEADER + "\n" + ROW_8 + "\nhost: Test NCCL failure all_reduce.cu:44 'unhandled system error'\n"
    with pytest.raises(NcclTestsParseError, match=r"results were printed for 1 size\(s\) before it"):
        parse_nccl_tests(text)


@pytest.mark.parametrize(("text", "message", "line"), [
    ("", r"expected a results table; found no results table\. Last lines: \(nothing\)", None),
    ("host:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\nSegmentation fault\n",
     r"no results table\. Last lines: .*Segmentation fault", None),
    (HEADER + "\n", r"no result rows after the column header at line 1", None),
    (HEADER + "\n" + ROW_8.replace("12.25", "12.x5") + "\n", r"time column: expected a number; found .* at line 2", 2),
    (HEADER + "\n" + ROW_8 + "   7\n", r"expected 13 values as the column header at line 1 says.* at line 2", 2),
    (HEADER + "\n" + ROW_8[:60] + "\n", r"complete rows.*at line 2\. The output ends inside this row", 2),
    (ROW_8 + "\n" + FOOTER, r"expected the column header .* before the rows; found .* at line 1", 1),
    (HEADER + "\n" + ROW_8 + "\n" + HEADER + "\n" + ROW_8 + "\n", r"expected one run.*at line 3.*MPI=1", 3),
    ("# nThread 1\n" + HEADER + "\n" + ROW_8 + "\n# nThread 1 nGpus 1\n", r"A second run starts here", 4),
    ("#      bytes            N    type      op     time  algbw  busbw      res\n", r"nccl-tests 1\.x output", 1),
    ("# size count type time algbw\n", r"'time algbw busbw' for each placement", 1),
    ("# size count type redop root time algbw busbw #wrong extra\n", r"no columns after the in-place", 1),
    (HEADER + "\n" + ROW_8.replace(" 2     float", " 2     fl-at") + "\n", r"'type' column: expected a data type", 2),
    (HEADER + "\n" + ROW_8.replace("      0    12.00", "    0.5    12.00") + "\n", r"'#wrong' column", 2),
    (HEADER + "\n" + ROW_8.replace("           8", "        8.25") + "\n", r"a row starting with the size in bytes", 2),
    (HEADER + "\n" + ROW_8.replace("-1", "x1") + "\n", r"'root' column: expected a rank number", 2),
    (HEADER + "\n" + ROW_8 + "\n# Avg bus bandwidth : lots\n", r"average bus bandwidth: expected a number", 3),
])
def test_garbled_output_is_a_clear_error(text: str, message: str, line: int | None) -> None:
    with pytest.raises(NcclTestsParseError, match=message) as caught:
        parse_nccl_tests(text)
    assert caught.value.line_number == line


def test_not_text_is_a_clear_error() -> None:
    with pytest.raises(NcclTestsParseError, match="expected text; found int"):
        parse_nccl_tests(42)  # type: ignore[arg-type]
    assert parse_nccl_tests(fixture(TEXT_FIXTURES[0]).encode()).results  # bytes are decoded


# --------------------------------------------------------------------------------------------------
# JSON (-J FILE)


def test_json_format_3_parses_exactly_and_matches_the_text_output() -> None:
    run = parse_nccl_tests_json(fixture("all_reduce_perf_json-v3_constructed-from-writer.json"))

    assert (run.collective, run.nranks, run.nccl_version) == ("all_reduce", 2, "2.21.5")
    assert (run.avg_busbw_gbps, run.out_of_bounds, run.out_of_bounds_ok, run.complete) == (1.865, 0, True, True)
    assert run.as_dict()["results"][0] == row(8192, 2048, "float", "sum", m(13.07, 0.63, 0.63, 0),
                                              m(12.96, 0.63, 0.63, 0))
    # The same run's text output has the same figures for the same sizes.
    text = {r.size_bytes: r for r in parse_nccl_tests(fixture("all_reduce_perf_2.15-2.16_2x2080Ti-no-p2p.txt")).results}
    for result in run.results:
        assert result == text[result.size_bytes]


def test_json_format_1_with_the_old_spelling_unchecked_values_and_two_processes() -> None:
    run = parse_nccl_tests_json(fixture("all_gather_perf_json-v1_constructed-from-writer.json"))

    assert (run.collective, run.nranks, run.nccl_version) == ("all_gather", 2, "2.27.5")
    assert run.avg_busbw_gbps == 1.28  # "average_bus_bandwidith" / "bandwidith"
    assert [r.out_of_place.wrong for r in run.results] == [None, None]
    assert run.as_dict()["results"][-1] == row(134217728, 16777216, "float", None, m(29185.2, 4.6, 2.3, None),
                                               m(29349.9, 4.57, 2.29, None))


def _json(**changes: object) -> str:
    document = json.loads(fixture("all_reduce_perf_json-v3_constructed-from-writer.json"))
    document.update(changes)
    return json.dumps(document)


def test_json_nan_cpu_time_and_root() -> None:
    document = json.loads(_json())
    entry = document["results"][0]
    entry["out_of_place"] = {"cpu_time": 5.0, "alg_bw": "nan", "bus_bw": 0.1, "nwrong": None}
    entry["root"] = "     3"
    result = parse_nccl_tests_json(json.dumps(document)).results[0]

    # A nan bandwidth is no measurement: the placement's numbers are null and the row says so.
    assert result.out_of_place.time_us is None and result.out_of_place.algbw_gbps is None
    assert result.not_measured == ["out_of_place"]
    assert result.root == 3


@pytest.mark.parametrize(("text", "message"), [
    ('{"version":3,"results":[{"size":8', r"expected a JSON document; found invalid JSON.*cut short"),
    ("[1, 2]", r"the document: expected an object; found \[1, 2\]"),
    (_json(results=None, errors=["unhandled cuda error (run with NCCL_DEBUG=INFO for details)"]),
     r"results: expected the list of measured sizes; found null\. The run stopped before measuring\. NCCL said: "
     r"unhandled cuda error"),
    (_json(results=[]), r"results: expected at least one measured size"),
    (_json(results=[{"size": "8", "count": 2}]), r"results\[0\]\.size: expected a number; found \"8\""),
    (_json(results=[{"size": 8, "count": 2, "type": "float", "out_of_place": None}]),
     r"results\[0\]\.out_of_place: expected the out-of-place measurement"),
    (_json(results=[{"size": 8, "count": 2, "type": "float",
                     "out_of_place": {"time": 1, "alg_bw": True, "bus_bw": 0}}]),
     r"results\[0\]\.out_of_place\.alg_bw: expected a number; found true"),
    (_json(out_of_bounds={"count": 0, "okay": "maybe"}), r"out_of_bounds\.okay: expected \"true\" or \"false\""),
    (_json(config=[]), r"config: expected an object"),
])
def test_json_garbled_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(NcclTestsParseError, match=message):
        parse_nccl_tests_json(text)


# --------------------------------------------------------------------------------------------------
# Properties: no input makes a parser raise anything but NcclTestsParseError

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_TOKENS = st.sampled_from([
    "#", " ", "  ", "\n", "\t", "\r", "\x00", "size", "count", "type", "redop", "root", "time", "cputime", "algbw",
    "busbw", "#wrong", "error", "timestamp", "i_min", "bytes", "N", "8", "12288", "-1", "0", "12.25", "1e+06",
    "2e-07", "N/A", "nan", "inf", "float", "sum", "none", "99999999999999999999999999999", "# nThread 1",
    "# Out of bounds values : ", "OK", "FAILED", "# Avg bus bandwidth : ", "NCCL version 2.21.5+cuda12.4",
    "h:1:2 [0] NCCL INFO ", "[1,0]<stdout>:", "#  Rank  0 Group  0 Pid 1 on h device 0 [0x01] G",
    "Test NCCL failure", "# nccl-tests version 2.17.6 nccl-headers=22809 nccl-library=", "# Collective test starting: ",
])
NCCL_LIKE_TEXT = st.lists(_TOKENS, max_size=80).map("".join)


def _only_own_errors(parse, text: str) -> None:
    with contextlib.suppress(NcclTestsParseError):
        parse(text)


@PROPERTY_SETTINGS
@given(text=st.one_of(st.text(), NCCL_LIKE_TEXT))
def test_property_arbitrary_text(text: str) -> None:
    _only_own_errors(parse_nccl_tests, text)
    _only_own_errors(parse_nccl_tests_json, text)


@PROPERTY_SETTINGS
@given(name=st.sampled_from(ALL_NCCL_TESTS_FIXTURES), data=st.data())
def test_property_truncated_fixtures(name: str, data: st.DataObject) -> None:
    text = fixture(name)
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    _only_own_errors(parse_nccl_tests, text[:cut])
    _only_own_errors(parse_nccl_tests, text[cut:])


@pytest.mark.parametrize("name", ["transfer-test-in-all_reduce_perf-layout_incident-reconstructed_"
                                  "8xRTXPRO6000-vm-no-p2p.txt", CRASH_FIXTURE,
                                  "all_gather_perf_2.13-plus_c0-N-A_hash-stripped_16xH100.txt"])
def test_truncation_at_every_offset(name: str) -> None:
    text = fixture(name)
    for cut in range(len(text) + 1):
        _only_own_errors(parse_nccl_tests, text[:cut])


def _split_tag(line: str) -> tuple[str, str]:
    """The mpirun tag of a line (or nothing) and the rest."""
    tag, sep, rest = line.partition("<stdout>:")
    return (tag + sep, rest) if sep else ("", line)


def _data_rows(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines)
            if _split_tag(line)[1].strip()[:1].isdigit() and "NCCL" not in line]


@PROPERTY_SETTINGS
@given(name=st.sampled_from(TEXT_FIXTURES), data=st.data())
def test_property_shuffled_columns(name: str, data: st.DataObject) -> None:
    lines = fixture(name).split("\n")
    index = data.draw(st.sampled_from(_data_rows(lines)))
    tag, rest = _split_tag(lines[index])
    lines[index] = tag + "  ".join(data.draw(st.permutations(rest.split())))
    _only_own_errors(parse_nccl_tests, "\n".join(lines))


@PROPERTY_SETTINGS
@given(name=st.sampled_from(TEXT_FIXTURES), data=st.data())
def test_property_extra_columns(name: str, data: st.DataObject) -> None:
    lines = fixture(name).split("\n")
    index = data.draw(st.sampled_from(_data_rows(lines)))
    tag, rest = _split_tag(lines[index])
    words = rest.split()
    # After the size: a word before it makes the line another program's text, which the parser skips.
    position = data.draw(st.integers(min_value=1, max_value=len(words)))
    words.insert(position, data.draw(st.sampled_from(["0", "1.5", "N/A", "x", "-1", "1e9"])))
    lines[index] = tag + "  ".join(words)
    with pytest.raises(NcclTestsParseError, match="at line"):
        parse_nccl_tests("\n".join(lines))


@PROPERTY_SETTINGS
@given(name=st.sampled_from(JSON_FIXTURES), data=st.data())
def test_property_json_truncated_or_retyped(name: str, data: st.DataObject) -> None:
    text = fixture(name)
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    _only_own_errors(parse_nccl_tests_json, text[:cut])
    document = json.loads(text)
    key = data.draw(st.sampled_from(["results", "config", "out_of_bounds", "average_bus_bandwidth", "nccl_version",
                                     "args", "average_bus_bandwidith"]))
    value = data.draw(st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=3),
                                st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)))
    document[key] = value
    _only_own_errors(parse_nccl_tests_json, json.dumps(document))
    if document.get("results"):
        entry = document["results"][0] if isinstance(document["results"], list) else None
        if isinstance(entry, dict):
            entry[data.draw(st.sampled_from(sorted(entry)))] = value
            _only_own_errors(parse_nccl_tests_json, json.dumps(document))


def test_one_long_line_of_colons_after_a_rank_line_is_read_in_linear_time() -> None:
    # One 60 KB line: the NCCL log record's regex ran to the word's end from each of its characters (a minute).
    line = "#  Rank  0 Group  0 Pid  4096 on host device  0 [0x3d] NVIDIA H100 " + ":" * 60000
    with contextlib.suppress(ParseError):
        within(1.0, lambda: parse_nccl_tests(line + "\n"))
