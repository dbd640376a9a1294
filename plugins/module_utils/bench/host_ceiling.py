"""The one communication ceiling of a host for a model at a tensor-parallel size, with what priced it.

Every view that shows how fast all-reduce lets a single stream decode (the benchmark's and the host report's
``communication_ceiling``, the gate's ``communication_ceiling``, the Proxmox fix report, the metrics) renders what
this module returns, so that one host, model and tensor-parallel size get one figure and one basis everywhere.

What prices the all-reduce, in order:

1. An all-reduce measured by the benchmark over the serving rank count (``measured_all_reduce``), from
   the curve of the environment the deployment uses (the tuning's recommended one where it ran).
2. Where that "all-reduce" is no slower than two GPU-to-GPU copies of the probe, it is a transfer test
   laid out as all_reduce_perf (an all-reduce over 3 or more GPUs waits 2(n-1) dependent transfers:
   model/all_reduce_estimate.not_an_allreduce), and where it was measured over another rank count than the
   one served, it says nothing of the served one: both give way to
3. an estimate from the probe's slowest small-copy latency within the group and the step count of the
   algorithm NCCL picks (``estimated_from_pair_latency``, model/ceiling.estimated_ceiling).
4. Neither: no figure, and the notes say why. Nothing is guessed.

Pure functions: no Ansible, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.p2p_judge import small_latency_matrix
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.all_reduce_estimate import not_an_allreduce
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.ceiling import (
    check_model,
    estimated_ceiling,
    measured_ceiling,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.shape import Model
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_bandwidth import latency_us
from ansible_collections.gpuhost.gpu.plugins.module_utils.values import as_dict, as_int, as_list, as_number, as_text


def probe_host_index(probe: Any) -> Callable[[int], int | None]:
    """Host GPU index of the probe's device index: the probe numbers the GPUs it was given from 0."""
    visible = as_text(as_dict(probe).get("visible"))
    mapping: list[int] | None = None
    if visible:
        parts = [as_int(p) for p in visible.split(",")]
        mapping = [p for p in parts if p is not None] if all(p is not None for p in parts) else None

    def host_index(i: int) -> int | None:
        if mapping is None:
            return i
        return mapping[i] if 0 <= i < len(mapping) else None

    return host_index


def pair_latency_us(probe: Any, gpus: Collection[int] | None = None) -> tuple[float, str] | None:
    """The slowest small-copy latency between two GPUs of ``gpus`` (host indexes; None: every GPU the probe
    saw), as a ring waits for its slowest hop, and the name of the probe matrix it comes from; None without a
    probe that timed small copies."""
    data = as_dict(probe)
    matrix = small_latency_matrix(data) if data else None
    values = latency_us(matrix) if matrix else None
    if not values:
        return None
    host_index = probe_host_index(data)
    cells = [as_number(value) for i, row in enumerate(as_list(values)) for j, value in enumerate(as_list(row))
             if i != j and (gpus is None or (host_index(i) in gpus and host_index(j) in gpus))]
    cells = [c for c in cells if c is not None and c > 0]
    return (max(cells), str(matrix.get("name"))) if cells else None


def _rows_curve(rows: list[Any]) -> list[tuple[int, float]]:
    """(size_bytes, best time_us) of result rows, out-of-place or in-place, whichever is faster."""
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


def all_reduce_curve(nccl: Any) -> list[tuple[int, float]]:
    """(size_bytes, best time_us) of the all-reduce in the environment the deployment uses; [] when the
    benchmark measured none (another collective, or one the log does not name, prices nothing)."""
    bench = as_dict(nccl)
    # A result without the key predates it and was all-reduce.
    if bench.get("collective", "all_reduce") != "all_reduce":
        return _rows_curve(as_list(as_dict(as_dict(bench.get("per_collective")).get("all_reduce")).get("results")))
    rows = as_list(bench.get("results"))
    name = as_dict(as_dict(bench.get("tuning")).get("recommended")).get("name")
    for candidate in as_list(as_dict(bench.get("tuning")).get("candidates")):
        if isinstance(candidate, dict) and name is not None and candidate.get("name") == name \
                and as_list(candidate.get("results")):
            rows = as_list(candidate.get("results"))
    return _rows_curve(rows)


def host_ceiling(nccl: Any, probe: Any, model: Model, gpus: Collection[int] | None = None,
                 batch: int = 1) -> tuple[dict[str, Any] | None, list[str]]:
    """The communication ceiling of ``model`` (its ``tensor_parallel_size`` is the served rank count) on the
    GPUs ``gpus`` (None: all of them), at batch 1 and at ``batch``, and the notes that say which number was set
    aside and why. The ceiling has model/ceiling.py's keys; None when nothing measured prices it.

    Raises ModelError for a curve or model it cannot use (the caller says what to fix)."""
    notes: list[str] = []
    hop = pair_latency_us(probe, gpus)
    ranks = model.tensor_parallel_size
    ceiling = None
    curve = all_reduce_curve(nccl)
    if curve:
        measured_ranks = as_int(as_dict(nccl).get("nranks"))
        ceiling = measured_ceiling(model, curve, batch, measured_ranks=measured_ranks)
        # The refusal reads the batch-1 message: the latency-bound size a copy test is mistaken for.
        single = ceiling if batch == 1 else measured_ceiling(model, curve, 1, measured_ranks=measured_ranks)
        refused = not_an_allreduce(measured_ranks or ranks, as_number(single.get("allreduce_latency_us")),
                                   hop[0] if hop else None)
        if refused:
            notes.append(f"The benchmark's all-reduce is not used: {refused}.")
            ceiling = None
        elif measured_ranks and measured_ranks != ranks and hop:
            notes.append(f"The benchmark measured all-reduce over {measured_ranks} GPUs, the deployment runs "
                         f"{ranks}: the ceiling is estimated for the serving rank count instead.")
            ceiling = None
    if ceiling is None and hop:
        ceiling = estimated_ceiling(model, hop[0], batch=batch)
        ceiling["assumptions"].append(f"per-pair copy latency: the slowest pair of the group in the probe's "
                                      f"{hop[1]!r}")
    return ceiling, notes


def add_communication_ceiling(result: dict[str, Any], model_spec: Any, concurrency: int, probe: Any = None) -> None:
    """Price a benchmark result for a model: adds its communication ceiling (the key ``communication_ceiling``)
    and an info finding of the same id to ``result`` in place.
    ``probe`` is gpu_p2p_probe's result on the same host, when it ran: it tells a transfer test from an
    all-reduce, and prices the ceiling where the benchmark's figure cannot."""
    model = check_model(model_spec)
    if not all_reduce_curve(result):
        if result.get("collective", "all_reduce") != "all_reduce" \
                and not as_dict(result.get("per_collective")).get("all_reduce"):
            measured = result.get("collective") or "a collective the log does not name"
            result.setdefault("notes", []).append(
                f"No communication ceiling for {model.name}: the benchmark measured {measured}, not all-reduce.")
            return
        raise ModelError("communication ceiling: the benchmark measured no all-reduce sizes to price; "
                         "run an all_reduce sweep or give a log that holds one")
    single, notes = host_ceiling(result, probe, model)
    loaded, _unused = host_ceiling(result, probe, model, batch=concurrency)
    if single is None or loaded is None:  # not reached: a refused curve always leaves the probe's estimate
        return
    result.setdefault("notes", []).extend(n for n in notes if n not in result.get("notes", []))
    result["communication_ceiling"] = {"batch_1": single, f"batch_{concurrency}": loaded,
                                       "summary": single["summary"], "summary_batch": loaded.get("summary_batch")}
    # Upper-case the first letter only: the source names GPUs and TP sizes as written.
    text = single["summary"][:1].upper() + single["summary"][1:]
    result.setdefault("findings", []).append(make(
        "communication_ceiling",
        text + (f"; {loaded['summary_batch']}" if loaded.get("summary_batch") else "") + ".",
        {"model": model.name, "allreduces_per_token": single["allreduces_per_step"],
         "allreduce_bytes": single["allreduce_bytes"],
         "allreduce_latency_us": round(single["allreduce_latency_us"], 2),
         "latency_basis": single["latency_basis"], "basis": single["basis"],
         "notes": single["notes"] + loaded["notes"]}).as_dict())


def explained_share(communication_ms: float | None, measured_ms: float | None) -> float | None:
    """The share of each measured token's time that all-reduce alone explains, at most all of it (a larger time means
    the ceiling was priced on a slower path than the one that ran); None where either is unknown. The one place it
    is computed, for a server measured by the deployment (serving/throughput_breakdown.py) and a rate read from
    material (``relate_observed``)."""
    if not communication_ms or not measured_ms or communication_ms <= 0 or measured_ms <= 0:
        return None
    return min(1.0, communication_ms / measured_ms)


def relate_observed(result: dict[str, Any], decode_tok_s: float | None, source: str) -> None:
    """Set the communication ceiling beside the decode rate the user observed (an SGLang decode log of one running
    request, in material): ``communication_ceiling.observed`` holds the rate, its time per token, the all-reduce
    time of each token and the share of it that explains, and the ceiling's ``summary``, the figure every view
    shows, then answers the user's question: why their rate is what it is. Nothing changes without a rate."""
    ceiling = as_dict(result.get("communication_ceiling"))
    single = as_dict(ceiling.get("batch_1"))
    comm_us = as_number(single.get("comm_us_per_token"))
    if not decode_tok_s or decode_tok_s <= 0 or not ceiling or not comm_us:
        return
    measured_ms = 1000.0 / decode_tok_s
    comm_ms = comm_us / 1000.0
    share = explained_share(comm_ms, measured_ms)
    ceiling["observed"] = {"decode_tok_s": decode_tok_s, "ms_per_token": round(measured_ms, 2), "source": source,
                           "communication_ms_per_token": round(comm_ms, 2),
                           "communication_share": round(share, 3) if share is not None else None}
    allowed = as_number(single.get("max_tokens_per_s_single_stream"))
    ceiling["summary"] = (
        f"observed {decode_tok_s:.1f} tok/s single stream ({measured_ms:.1f} ms a token; {source}): all-reduce "
        f"takes {comm_ms:.1f} ms of each token, {share * 100:.0f}% of it "
        f"({as_text(single.get('source')) or 'source not stated'})"
        + (f"; all-reduce alone would allow {allowed:.1f} tok/s" if allowed else ""))
