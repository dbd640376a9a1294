"""The communication ceiling: the most tokens per second a single stream reaches, given all-reduce latency.

Taken from the benchmark's own comm_floor for the same tensor-parallel size, else computed with the
communication model (bench/comm_model.py) from the measured all-reduce times and the model profile.
The benchmark measures NCCL; ``ceiling_basis`` says what that figure is worth for the all-reduce SGLang
will really run (all_reduce.py): the ceiling itself where NCCL does every all-reduce, a lower bound where
SGLang's custom all-reduce takes the decode's small messages.
"""

from __future__ import annotations

from typing import Any

from ansible.module_utils.gpuhost.bench.comm_model import CommModelError, comm_floor, load_profile
from ansible.module_utils.gpuhost.gate.decision import Decision
from ansible.module_utils.gpuhost.gate.inputs import Gpu, Profile, as_dict, as_int, as_list, as_number


def _curve(bench: dict[str, Any]) -> list[tuple[int, float]]:
    """(size_bytes, best time_us) of the environment the deployment uses."""
    # Only all-reduce times price the model (results of another or an unnamed collective do not). A result
    # without the key predates it and was all-reduce.
    if bench.get("collective", "all_reduce") != "all_reduce":
        return _rows_curve(as_list(as_dict(as_dict(bench.get("per_collective")).get("all_reduce")).get("results")))
    tuning = as_dict(bench.get("tuning"))
    name = as_dict(tuning.get("recommended")).get("name")
    rows = as_list(bench.get("results"))
    for candidate in as_list(tuning.get("candidates")):
        if isinstance(candidate, dict) and name is not None and candidate.get("name") == name \
                and as_list(candidate.get("results")):
            rows = as_list(candidate.get("results"))
    return _rows_curve(rows)


def _rows_curve(rows: list[Any]) -> list[tuple[int, float]]:
    curve = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        size = as_int(row.get("size_bytes"))
        times = [as_number(as_dict(row.get(p)).get("time_us")) for p in ("out_of_place", "in_place")]
        times = [t for t in times if t is not None and t > 0]
        if size and size > 0 and times:
            curve.append((size, min(times)))
    return curve


def comm_ceiling(out: Decision, bench: dict[str, Any], profile: Profile,
                 group: tuple[Gpu, ...] | None) -> tuple[float | None, dict[str, Any] | None]:
    if not group or len(group) == 1 or not bench:
        return None, None
    given = bench.get("comm_floor")
    for floor in (given if isinstance(given, list) else [given]):
        floor = as_dict(floor)
        rate = as_number(floor.get("max_tokens_per_s_single_stream"))
        if rate and as_int(floor.get("tensor_parallel_size")) == len(group):
            return round(rate, 1), floor
    if not profile.comm:
        out.notes.append("No communication ceiling: the model profile has no layers/hidden_size (or a family with "
                         "a shipped comm profile) to turn the benchmark's latency into tokens per second.")
        return None, None
    curve = _curve(bench)
    if not curve:
        out.notes.append("No communication ceiling: the benchmark has no measured all-reduce times.")
        return None, None
    try:
        floor = comm_floor(load_profile({**profile.comm, "tensor_parallel_size": len(group)}), curve, 1,
                           measured_ranks=as_int(bench.get("nranks")))
    except CommModelError as exc:
        out.notes.append(f"No communication ceiling: {exc}")
        return None, None
    out.notes.extend(floor.get("notes") or [])
    rate = floor.get("max_tokens_per_s_single_stream")
    return (round(rate, 1) if isinstance(rate, float) else None), floor


def ceiling_basis(out: Decision, ceiling: float | None, all_reduce: dict[str, Any] | None) -> str | None:
    """What the NCCL-measured ceiling means for the path that runs: nccl, nccl_lower_bound or nccl_path_unknown."""
    if ceiling is None or not all_reduce:
        return None
    if all_reduce.get("path") == "nccl":
        return "nccl"
    if all_reduce.get("path") == "custom":
        out.notes.append("The communication ceiling is priced on NCCL's measured all-reduce, but SGLang's custom "
                         "all-reduce takes the decode's small messages here: the figure is a lower bound of the "
                         "real ceiling.")
        return "nccl_lower_bound"
    out.notes.append("The communication ceiling is priced on NCCL's measured all-reduce; whether SGLang's custom "
                     "all-reduce takes the small messages instead is decided at its start-up, and then the figure "
                     "is a lower bound.")
    return "nccl_path_unknown"
