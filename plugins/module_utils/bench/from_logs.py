"""Benchmark results from saved logs, in-process: what the gpu_bench role gets from its modules when given
``gpu_bench_nccl_log`` and ``gpu_bench_probe_log``, for a caller that judges many hosts' logs in one process.

The same readers and judges run (nccl_runner.run_bench and p2p_runner.run_probe with ``log``, then the
communication ceiling for a model), and the result has the shape the role registers: the module's
result, or ``{failed: true, msg}`` when the log cannot be judged, which the report shows as
``bench_nccl_not_run`` / ``bench_probe_not_run`` with the reason, as it does for the role.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.host_ceiling import add_communication_ceiling
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_judge import BenchInputError
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_runner import BenchFailure, BenchSkipped, run_bench
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.p2p_runner import ProbeFailure, ProbeSkipped, run_probe
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError


def _failed(message: str) -> dict[str, Any]:
    return {"changed": False, "failed": True, "msg": message}


def nccl_from_log(path: str, gpu_names: list[str] | None = None, model: Any = None, concurrency: int = 64,
                  warn: Callable[[str], None] = lambda message: None, probe: Any = None,
                  text: str | None = None) -> dict[str, Any]:
    """nccl_bench's result for ``log: path``, priced for ``model`` when one is given (``probe``: the
    P2P probe's result on the same host, which tells a transfer test from an all-reduce)."""
    try:
        result = run_bench({"log": path, "log_text": text, "gpu_names": gpu_names or None}, warn=warn,
                           check_mode=True)
        if model is not None:
            add_communication_ceiling(result, model, concurrency, probe)
    except (BenchFailure, BenchSkipped, BenchInputError, ModelError) as exc:
        return _failed(str(exc))
    return {"changed": False, **result}


def probe_from_log(path: str, warn: Callable[[str], None] = lambda message: None,
                   text: str | None = None) -> dict[str, Any]:
    """gpu_p2p_probe's result for ``log: path`` (its ``text`` where the caller has it)."""
    try:
        result = run_probe({"log": path, "log_text": text}, check_mode=True, warn=warn)
    except (ProbeFailure, ProbeSkipped) as exc:
        return _failed(str(exc))
    return {"changed": False, **result}
