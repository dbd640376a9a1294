"""gpu-check.md: scripts/gpu_check.py's results (gpu-check.json) rendered for a reader; it judges nothing itself."""

from __future__ import annotations

import json
from typing import Any


def cell(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def table(header: list[str], rows: list[list[Any]], limit: int = 600) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(cell(v, limit) for v in row) + " |" for row in rows), ""]


def render(results: dict[str, Any]) -> str:
    machine = results.get("machine") or {}
    tools = results.get("tools") or {}
    steps = results.get("steps") or {}
    code = results.get("exit_code")
    lines = [f"# GPU check: {results.get('host')}", "",
             f"**Exit {code if code is not None else '(running)'}**: {results.get('exit_meaning') or 'not finished'}. "
             f"Started {results.get('started')}, finished {results.get('finished') or '-'}; kernel "
             f"{results.get('kernel')}.", "", "## Machine and tools", ""]
    nvml = tools.get("nvml") or {}
    lines += table(["what", "value"], [
        ["GPUs", f"{machine.get('gpu_count') or 0} x {', '.join(machine.get('models') or []) or '-'}"],
        ["driver", machine.get("driver_version") or "-"],
        ["CUDA (driver)", machine.get("cuda_driver_version") or "-"],
        ["GPU facts read from", machine.get("gpu_source") or "-"],
        ["Python", tools.get("python")],
        ["NVML binding", f"{nvml.get('binding')} ({nvml.get('origin')})" if nvml.get("binding")
         else nvml.get("reason") or "-"],
        ["nvidia-smi", (steps.get("nvidia_smi") or {}).get("nvidia_smi_version") or tools.get("nvidia_smi") or "-"],
        ["nvcc", tools.get("nvcc_version") or tools.get("cuda_home_why")],
        ["torch", f"{tools.get('torch_python')}: {tools.get('torch_why')}" if tools.get("torch_python")
         else tools.get("torch_why")],
    ])
    lines += ["## Steps", ""]
    lines += table(["step", "status", "seconds", "why, or what it compared"], [
        [name, step.get("status"), step.get("seconds", "-"),
         step.get("error") or step.get("reason") or step.get("comparison") or ""]
        for name, step in steps.items()])
    comparisons = results.get("comparisons") or []
    lines += ["## Figures compared", ""]
    if comparisons:
        lines += table(["step", "what", "measured", "by", "compared with", "from", "equal"], [
            [c["step"], c["what"], c["measured"], c["source"], c["against"], c["against_source"],
             {True: "yes", False: "**no**"}.get(c["equal"], "not compared: one side has no value")]
            for c in comparisons])
    else:
        lines += ["None: no step that compares ran.", ""]
    smi = steps.get("nvidia_smi") or {}
    if smi.get("forms"):
        lines += ["## nvidia-smi outputs (fixtures from a real GPU)", ""]
        lines += table(["form", "command", "exit", "parsed", "file"], [
            [form, e["argv"], e["rc"], e.get("parsed") or e.get("error") or e.get("stderr") or "", e.get("file") or ""]
            for form, e in smi["forms"].items()])
    cuda = steps.get("cuda_ext") or {}
    if cuda.get("arch"):
        lines += ["## CUDA build", "", f"{cuda.get('nvcc')} built tests/cuda_ext for {cuda.get('arch')} in "
                  f"{cuda.get('build_seconds')} s; CUDA runtime {cuda.get('cudart')}.", ""]
    probe = steps.get("p2p_probe") or {}
    latency = probe.get("small_copy_latency")
    if latency:
        lines += ["## P2P small-copy latency", "", f"{latency.get('name')} (us, source row to destination column; "
                  f"null: not measured or the stream hold was outlasted), judged against "
                  f"{probe.get('latency_limit_us')} us. Stream holds: {cell(probe.get('holds'))}.", ""]
        values = latency.get("values") or []
        lines += table(["", *(f"GPU{j}" for j in range(len(values)))],
                       [[f"GPU{i}", *row] for i, row in enumerate(values)])
    nccl = steps.get("nccl") or {}
    if nccl.get("results"):
        lines += [f"## All-reduce ({nccl.get('engine')}, {nccl.get('nranks')} ranks, NCCL {nccl.get('nccl_version')})",
                  ""]
        lines += table(["bytes", "time us", "busbw GB/s"], [
            [r["size_bytes"], (r.get("in_place") or {}).get("time_us"), (r.get("in_place") or {}).get("busbw_gbps")]
            for r in nccl["results"]])
        lines += table(["threshold at bytes", "limit", "severity", "timing", "calibration"], [
            [t["size_bytes"], f"{t['max_time_us']} us" if "max_time_us" in t else f"{t.get('min_busbw_gbps')} GB/s",
             t["severity"], t.get("timing"), t.get("calibration") or "none: warns only"]
            for t in nccl.get("thresholds") or []])
        calibration = nccl.get("calibration")
        lines += ["Calibration of the torch loop's limits: " + cell(calibration, 2000), ""]
    return "\n".join(lines).rstrip() + "\n"
