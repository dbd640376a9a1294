"""The communication ceiling: the most tokens per second a single stream reaches, given all-reduce latency.

The figure for the chosen GPUs and the model comes from bench/host_ceiling.py, the one place that decides
what prices the all-reduce (a measured all-reduce over the serving rank count, else an estimate from the
probe's per-pair copy latency, never a transfer test read as an all-reduce), so that the benchmark's
report and the gate show the same figure for the same model and tensor-parallel size.
The benchmark measures NCCL; ``ceiling_basis`` says what that figure is worth for the all-reduce SGLang
will really run (all_reduce.py): the ceiling itself where NCCL does every all-reduce, a lower bound where
SGLang's custom all-reduce takes the decode's small messages.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.host_ceiling import host_ceiling
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.decision import Decision
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import DeployModel, Gpu
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.shape import load_model
from ansible_collections.gpuhost.gpu.plugins.module_utils.values import as_number


def _counted_from(deploy: DeployModel, ceiling: dict[str, Any]) -> dict[str, Any]:
    """The ceiling, its source naming where the collectives per step came from (config.json or a known model)."""
    if deploy.shape_source:
        ceiling["source"] = (f"{ceiling.get('source') or 'source unknown'}; collectives per step from "
                             f"{deploy.shape_source}")
    return ceiling


def communication_ceiling(out: Decision, bench: dict[str, Any], deploy: DeployModel, group: tuple[Gpu, ...] | None,
                          probe: Any = None) -> tuple[float | None, dict[str, Any] | None]:
    if not group or len(group) == 1:
        return None, None
    ceiling = None
    if deploy.shape:
        try:
            ceiling, notes = host_ceiling(bench, probe, load_model(
                {**deploy.shape, "tensor_parallel_size": len(group)}), {g.index for g in group})
        except ModelError as exc:
            out.notes.append(f"No communication ceiling: {exc}")
            return None, None
        out.notes.extend(notes)
    if ceiling is None:
        out.notes.append("No communication ceiling: " + (
            f"the model's collectives per step are not modelled ({deploy.shape_not_modelled}), and none is guessed."
            if deploy.shape_not_modelled else
            "the model has no layers/hidden_size (nor a shape, or a family that names a known model) to turn the "
            "benchmark's latency into tokens per second." if not deploy.shape else
            "neither an all-reduce measured by the benchmark nor a GPU-to-GPU copy latency measured by the probe."))
        return None, None
    ceiling = _counted_from(deploy, ceiling)
    out.notes.extend(n for n in ceiling.get("notes") or [] if n not in out.notes)
    rate = as_number(ceiling.get("max_tokens_per_s_single_stream"))
    return (round(rate, 1) if rate else None), ceiling


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
    if all_reduce.get("path") == "pcie_ipc":
        out.notes.append("The communication ceiling is priced on NCCL's measured all-reduce, but SGLang's FlashInfer "
                         "PCIe IPC all-reduce takes the decode's messages here: the figure is a lower bound of the "
                         "real ceiling.")
        return "nccl_lower_bound"
    out.notes.append("The communication ceiling is priced on NCCL's measured all-reduce; whether SGLang's custom "
                     "all-reduce takes the small messages instead is decided at its start-up, and then the figure "
                     "is a lower bound.")
    return "nccl_path_unknown"
