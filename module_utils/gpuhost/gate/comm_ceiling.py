"""The communication ceiling: the most tokens per second a single stream reaches, given all-reduce latency.

Taken from the benchmark's own comm_floor for the same tensor-parallel size, else computed with the
communication model (bench/comm_model.py) from the measured all-reduce times and the model profile.
Where no all-reduce was measured over the serving rank count, or the "all-reduce" the log shows is no
slower than one GPU-to-GPU copy of the probe (a transfer test laid out as all_reduce_perf, which no
all-reduce over 3 or more GPUs can be), the floor is estimated from the probe's per-pair copy latency
and the step count of the algorithm NCCL picks (bench/comm_estimate.py), and says so (``basis``).
The benchmark measures NCCL; ``ceiling_basis`` says what that figure is worth for the all-reduce SGLang
will really run (all_reduce.py): the ceiling itself where NCCL does every all-reduce, a lower bound where
SGLang's custom all-reduce takes the decode's small messages.
"""

from __future__ import annotations

from typing import Any

from ansible.module_utils.gpuhost.bench.comm_estimate import not_an_allreduce
from ansible.module_utils.gpuhost.bench.comm_model import CommModelError, comm_floor, estimated_floor, load_profile
from ansible.module_utils.gpuhost.bench.p2p_judge import small_latency_matrix
from ansible.module_utils.gpuhost.gate.decision import Decision
from ansible.module_utils.gpuhost.gate.inputs import (
    Gpu,
    Profile,
    as_dict,
    as_int,
    as_list,
    as_number,
    probe_host_index,
)
from ansible.module_utils.gpuhost.parsers.p2p_bandwidth import latency_us


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


def pair_latency_us(probe: Any, group: tuple[Gpu, ...]) -> tuple[float, str] | None:
    """The slowest small-copy latency between two GPUs of the group (a ring waits for its slowest hop) and
    the probe matrix it comes from; None without a probe that timed small copies."""
    data = as_dict(probe)
    matrix = small_latency_matrix(data) if data else None
    values = latency_us(matrix) if matrix else None
    if not values:
        return None
    host_index = probe_host_index(data)
    wanted = {g.index for g in group}
    cells = [as_number(value) for i, row in enumerate(as_list(values)) for j, value in enumerate(as_list(row))
             if i != j and host_index(i) in wanted and host_index(j) in wanted]
    cells = [c for c in cells if c is not None and c > 0]
    return (max(cells), str(matrix.get("name"))) if cells else None


def _counted_from(profile: Profile, floor: dict[str, Any]) -> dict[str, Any]:
    """The floor, its source naming where the collectives per step came from (config.json or a profile)."""
    if profile.comm_source:
        floor["source"] = f"{floor.get('source') or 'source unknown'}; collectives per step from {profile.comm_source}"
    return floor


def _measured(out: Decision, bench: dict[str, Any], profile: Profile,
              group: tuple[Gpu, ...]) -> dict[str, Any] | None:
    given = bench.get("comm_floor")
    for floor in (given if isinstance(given, list) else [given]):
        floor = as_dict(floor)
        if as_number(floor.get("max_tokens_per_s_single_stream")) \
                and as_int(floor.get("tensor_parallel_size")) == len(group):
            return floor
    if not profile.comm:
        return None
    curve = _curve(bench)
    if not curve:
        return None
    try:
        return _counted_from(profile, comm_floor(load_profile({**profile.comm, "tensor_parallel_size": len(group)}),
                                                 curve, 1, measured_ranks=as_int(bench.get("nranks"))))
    except CommModelError as exc:
        out.notes.append(f"No communication ceiling from the benchmark: {exc}")
        return None


def comm_ceiling(out: Decision, bench: dict[str, Any], profile: Profile, group: tuple[Gpu, ...] | None,
                 probe: Any = None) -> tuple[float | None, dict[str, Any] | None]:
    if not group or len(group) == 1:
        return None, None
    hop = pair_latency_us(probe, group)
    floor = _measured(out, bench, profile, group) if bench else None
    if floor is not None:
        ranks = as_int(bench.get("nranks")) or len(group)
        refused = not_an_allreduce(ranks, as_number(floor.get("allreduce_latency_us")), hop[0] if hop else None)
        if refused:
            out.notes.append(f"The benchmark's all-reduce is not used: {refused}.")
            floor = None
        elif ranks != len(group) and hop:
            out.notes.append(f"The benchmark measured all-reduce over {ranks} GPUs, the deployment runs {len(group)}: "
                             "the floor is estimated for the serving rank count instead.")
            floor = None
    if floor is None and hop and profile.comm:
        try:
            floor = _counted_from(profile, estimated_floor(
                load_profile({**profile.comm, "tensor_parallel_size": len(group)}), hop[0]))
        except CommModelError as exc:
            out.notes.append(f"No communication ceiling: {exc}")
            return None, None
        floor["assumptions"].append(f"per-pair copy latency: the slowest pair of the group in the probe's "
                                    f"{hop[1]!r}")
    if floor is None:
        out.notes.append("No communication ceiling: " + (
            f"the model's collectives per step are not modelled ({profile.comm_not_modelled}), and none is guessed."
            if profile.comm_not_modelled else
            "the model profile has no layers/hidden_size (or a family with a shipped comm profile) to turn the "
            "benchmark's latency into tokens per second." if not profile.comm else
            "neither an all-reduce measured by the benchmark nor a GPU-to-GPU copy latency measured by the probe."))
        return None, None
    out.notes.extend(n for n in floor.get("notes") or [] if n not in out.notes)
    rate = as_number(floor.get("max_tokens_per_s_single_stream"))
    return (round(rate, 1) if rate else None), floor


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
