"""What the all-reduce latency costs a model: its communication ceiling at a tensor-parallel size.

With tensor parallelism every layer ends its attention and its MLP (or MoE) block with an all-reduce
of the hidden state: ``hidden_size x dtype_bytes`` bytes per token in the batch (config_json counts
them from config.json). Decoding one token per stream therefore waits ``allreduces_per_step`` times
for an all-reduce of that size, and no kernel tuning can make a step faster than that sum: the
communication ceiling is the most tokens per second a stream can decode given that wait
(``max_tokens_per_s_single_stream``), its time per token ``comm_us_per_token``. At batch 1 the message
is small (12 KB for GLM-5 in bf16), so what counts is the latency at small sizes, exactly what a
host-memory fallback (no P2P) makes worse.

The all-reduce's time comes from one of two kinds of number, and the result says which (``basis``):
``measured_all_reduce`` (an all-reduce measured over the serving rank count, ``measured_ceiling``) or
``estimated_from_pair_latency`` (the per-pair copy latency times the step count of the algorithm NCCL
picks at that rank count, ``estimated_ceiling``, with its ``assumptions``). A point-to-point figure is
never read as an all-reduce.

The ceiling's result (what other roles read; ``explained_share`` turns it into a share of a measured
time per token): ``basis``, ``source`` (one line), ``assumptions`` (list), ``comm_us_per_token``,
``max_tokens_per_s_single_stream``, ``allreduces_per_step``, ``allreduce_bytes``,
``allreduce_latency_us``, ``tensor_parallel_size``, ``summary``, ``notes``; ``estimate`` when estimated.

Pure functions: no Ansible, no I/O. Errors are ``ModelError`` (a ``ValueError``) saying what was
expected, what was found and what to do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.model.all_reduce_estimate import estimate_allreduce
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.known import known_model
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.shape import Model, load_model


def allreduce_bytes_per_token(model: Model, batch: int = 1) -> int:
    """Bytes of one all-reduce in a decode step: the hidden state of every sequence in the batch."""
    _check_batch(batch)
    return model.hidden_size * model.dtype_bytes * batch


def _check_batch(batch: int) -> None:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ModelError(f"batch: expected a whole number of 1 or more; found {batch!r}. Pass the number of "
                         "sequences decoded together")


def _check_curve(curve: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """Sorted (size, time) points; several measurements of one size are averaged."""
    if isinstance(curve, (str, bytes)) or not isinstance(curve, Sequence) or not curve:
        raise ModelError("latency curve: expected a list of (size_bytes, time_us) pairs; found "
                         f"{curve!r}. Measure an all-reduce sweep first (nccl-tests or the torch engine)")
    by_size: dict[int, list[float]] = {}
    for point in curve:
        if not isinstance(point, Sequence) or isinstance(point, (str, bytes)) or len(point) != 2:
            raise ModelError(f"latency curve: expected (size_bytes, time_us) pairs; found {point!r}. "
                             "Give each point as a pair")
        size, time_us = point
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ModelError(f"latency curve: expected sizes as whole numbers of bytes above 0; found {size!r}. "
                             "Leave out the zero-byte rows of nccl-tests")
        if isinstance(time_us, bool) or not isinstance(time_us, (int, float)) or not math.isfinite(time_us) \
                or time_us <= 0:
            raise ModelError(f"latency curve: expected times in us above 0; found {time_us!r} for {size} bytes. "
                             "Leave out points that were not measured")
        by_size.setdefault(size, []).append(float(time_us))
    return sorted((size, sum(times) / len(times)) for size, times in by_size.items())


def _interpolate(curve: Sequence[tuple[int, float]], size: int) -> tuple[float, str]:
    points = _check_curve(curve)
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ModelError(f"message size: expected a whole number of bytes above 0; found {size!r}")
    first_size, first_time = points[0]
    last_size, last_time = points[-1]
    if size < first_size:
        # Below the smallest measured size the time is latency, not bandwidth: a smaller message does not
        # get faster than the smallest one measured, so the time is held (a floor, never an optimistic guess).
        return first_time, "clamped"
    if size > last_size:
        # Above the largest measured size the transfer is bandwidth-bound: keep the last measured bandwidth,
        # so the time grows in proportion to the size.
        return last_time * size / last_size, "extrapolated"
    for (low_size, low_time), (high_size, high_time) in pairwise(points):
        if size == low_size:
            return low_time, "measured"
        if low_size < size < high_size:
            # Straight line in log(size)-log(time): both the latency-bound and the bandwidth-bound parts of
            # an all-reduce curve are close to power laws, and sizes are measured in powers of two.
            fraction = (math.log(size) - math.log(low_size)) / (math.log(high_size) - math.log(low_size))
            return math.exp(math.log(low_time) + fraction * (math.log(high_time) - math.log(low_time))), \
                "interpolated"
    return last_time, "measured"


def interpolate_latency_us(curve: Sequence[tuple[int, float]], size: int) -> float:
    """The all-reduce time at ``size`` bytes from measured (size_bytes, time_us) points."""
    return _interpolate(curve, size)[0]


MEASURED = "measured_all_reduce"
ESTIMATED = "estimated_from_pair_latency"


def _ceiling(model: Model, batch: int, size: int, latency: float, single_latency: float, basis: str,
             latency_basis: str, source: str, assumptions: list[str], notes: list[str]) -> dict[str, Any]:
    """The ceiling's result, the same shape whichever number priced it (documented in README and RETURN)."""
    allreduces = model.allreduces_per_step
    step_us = allreduces * latency
    single_rate = 1e6 / (allreduces * single_latency)
    result = {
        "model": model.name,
        "batch": batch,
        "tensor_parallel_size": model.tensor_parallel_size,
        "allreduces_per_step": allreduces,
        "allreduce_bytes": size,
        "allreduce_latency_us": latency,
        "latency_basis": latency_basis,
        # What priced the all-reduce: an all-reduce measured at this rank count, or an estimate from one
        # GPU-to-GPU copy and the algorithm's step count. Never a point-to-point figure read as an all-reduce.
        "basis": basis,
        "source": source,
        "assumptions": assumptions,
        # Each stream gets one token per decode step, so this is also the time per token of each stream.
        "comm_us_per_step": step_us,
        "comm_us_per_token": step_us,
        "max_tokens_per_s_single_stream": single_rate,
        "max_tokens_per_s_per_stream": 1e6 / step_us,
        "max_tokens_per_s_aggregate": batch * 1e6 / step_us,
        "summary": f"all-reduce alone limits single-stream decode to {format_rate(single_rate)} tok/s on this host "
                   f"({source})",
        "notes": notes,
    }
    if batch > 1:
        result["summary_batch"] = (f"at {batch} concurrent streams, all-reduce alone limits decode to "
                                   f"{format_rate(batch * 1e6 / step_us)} tok/s in total on this host")
    return result


def _no_ceiling(model: Model, batch: int, basis: str, notes: list[str]) -> dict[str, Any]:
    return {
        "model": model.name, "batch": batch, "tensor_parallel_size": 1, "allreduces_per_step": 0,
        "allreduce_bytes": 0, "allreduce_latency_us": 0.0, "latency_basis": "none", "basis": basis,
        "source": "no all-reduce at tensor-parallel size 1", "assumptions": [],
        "comm_us_per_step": 0.0, "comm_us_per_token": 0.0,
        "max_tokens_per_s_single_stream": None, "max_tokens_per_s_per_stream": None,
        "max_tokens_per_s_aggregate": None,
        "summary": "no all-reduce at tensor-parallel size 1: communication sets no ceiling on this host",
        "notes": notes,
    }


def _check_model_type(model: Any) -> None:
    if not isinstance(model, Model):
        raise ModelError(f"communication ceiling: expected a Model; found {type(model).__name__}. "
                         "Load it with load_model()")


def measured_ceiling(model: Model, curve: Sequence[tuple[int, float]], batch: int = 1,
                     measured_ranks: int | None = None) -> dict[str, Any]:
    """The decode time all-reduce alone takes, and the token rates it allows, at batch 1 and at ``batch``,
    from a measured all-reduce curve (size_bytes, time_us)."""
    _check_model_type(model)
    _check_batch(batch)
    notes = []
    if measured_ranks is not None and measured_ranks != model.tensor_parallel_size:
        notes.append(f"The curve was measured over {measured_ranks} GPUs, the model runs tensor-parallel over "
                     f"{model.tensor_parallel_size}: measure with -g {model.tensor_parallel_size} for this figure.")
    if model.tensor_parallel_size == 1:
        return _no_ceiling(model, batch, MEASURED, notes)
    single_latency, _unused = _interpolate(curve, allreduce_bytes_per_token(model, 1))
    size = allreduce_bytes_per_token(model, batch)
    latency, basis = _interpolate(curve, size)
    if basis in ("clamped", "extrapolated"):
        notes.append(f"The all-reduce of {size} bytes lies outside the measured sizes ({basis}): extend the sweep "
                     "to cover it for a measured figure.")
    ranks = measured_ranks or model.tensor_parallel_size
    source = f"measured all-reduce over {ranks} GPUs"
    assumptions = [f"{model.allreduces_per_step} all-reduces of {size} bytes per decode step, each at the "
                   f"measured all-reduce time ({basis} at that size)"]
    return _ceiling(model, batch, size, latency, single_latency, MEASURED, basis, source, assumptions, notes)


def estimated_ceiling(model: Model, hop_latency_us: float, bus_gbps: float | None = None, batch: int = 1,
                      nodes: int = 1) -> dict[str, Any]:
    """The communication ceiling when no all-reduce was measured at the serving rank count: each all-reduce
    estimated from the per-pair copy latency and the step count of the algorithm NCCL picks
    (all_reduce_estimate). The result has measured_ceiling's keys, ``basis`` ``estimated_from_pair_latency``
    and the estimate itself."""
    _check_model_type(model)
    _check_batch(batch)
    if model.tensor_parallel_size == 1:
        return _no_ceiling(model, batch, ESTIMATED, [])
    single = estimate_allreduce(model.tensor_parallel_size, allreduce_bytes_per_token(model, 1),
                                hop_latency_us, bus_gbps, nodes)
    loaded = estimate_allreduce(model.tensor_parallel_size, allreduce_bytes_per_token(model, batch),
                                hop_latency_us, bus_gbps, nodes) if batch > 1 else single
    source = (f"estimated: {loaded[loaded['nccl_pick']]['steps']} "
              f"{loaded['nccl_pick']} steps at TP {model.tensor_parallel_size} from the {hop_latency_us:g} us "
              "GPU-to-GPU copy latency")
    assumptions = [f"{model.allreduces_per_step} all-reduces per decode step", *loaded["assumptions"]]
    result = _ceiling(model, batch, loaded["message_bytes"], loaded["time_us"], single["time_us"], ESTIMATED,
                      "estimated", source, assumptions, [])
    result["estimate"] = loaded
    return result


def explained_share(ceiling: Mapping[str, Any], us_per_token: float | None) -> float | None:
    """The share of a measured time per token that all-reduce alone accounts for at the communication ceiling
    (0..1, may exceed 1 when the ceiling is priced on a slower path); None when either is unknown."""
    comm = ceiling.get("comm_us_per_token") if isinstance(ceiling, Mapping) else None
    if not isinstance(comm, (int, float)) or not isinstance(us_per_token, (int, float)) or us_per_token <= 0:
        return None
    return comm / us_per_token


def format_rate(rate: float) -> str:
    """A token rate as people read it: whole numbers from 100 up, one decimal below."""
    return f"{rate:.0f}" if rate >= 100 else f"{rate:.1f}"


def measured_curve(results: Sequence[Mapping[str, Any]]) -> list[tuple[int, float]]:
    """(size, time_us) from nccl_bench/nccl-tests result rows: out-of-place where measured, else in-place
    (torch's all_reduce works in place only)."""
    curve = []
    for row in results:
        size = row.get("size_bytes")
        placement = row.get("out_of_place") or row.get("in_place") or {}
        time_us = placement.get("time_us")
        if isinstance(size, int) and size > 0 and isinstance(time_us, (int, float)) and time_us > 0:
            curve.append((size, float(time_us)))
    return curve


def check_model(model_spec: Any) -> Model:
    """The model a name or a mapping gives; ModelError when it cannot be used. Called before a
    benchmark runs, so that a wrong model does not fail the run at its end."""
    return known_model(model_spec) if isinstance(model_spec, str) else load_model(model_spec or {})
