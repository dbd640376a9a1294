#!/usr/bin/env python3
"""The GPU paths, run for real on a machine with a GPU: one JSON with every result.

Run it through scripts/gpu-check.sh (which finds a Python with torch and sets a deadline). Steps,
each timed and kept apart so that one failing says why and the others still run:

1. audit: the live audit (real NVML through nvidia-ml-py, real nvidia-smi and sysfs), its facts,
   findings and the capture of what it read (a real host to replay in tests later).
2. nvidia-smi: `-q -x`, `-q` and `--query-gpu` kept raw; NVML and nvidia-smi compared field by field.
3. p2p_probe: the P2P probe harness with torch (peer access and proof need two GPUs; with one it
   says so).
4. nccl: the all-reduce sweep with torch and NCCL over every GPU (one rank on a one-GPU machine).
5. cuda_ext: tests/cuda_ext built with the real toolkit for this GPU's architecture, then its kernel
   run on the GPU and its result checked.

Needs only Python, torch (for 3 and 4), nvidia-ml-py (for 1; gpu-check.sh installs it from a
wheel under .cache/wheels when it is missing) and a CUDA toolkit (for 5); not Ansible.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUERY = "index,name,pci.bus_id,driver_version,memory.total,persistence_mode,compute_cap"


def import_module_utils() -> None:
    """Make ansible_collections.gpuhost.gpu.plugins.module_utils importable from this checkout.

    collections/ holds the collection's link to the repository root; module_utils never imports Ansible itself
    (tests/unit/test_architecture.py), so the import works with or without ansible-core installed."""
    path = str(ROOT / "collections")
    if path not in sys.path:
        sys.path.insert(0, path)


def run(argv: list[str], timeout: float, env: dict[str, str] | None = None, cwd: Path | None = None) -> dict[str, Any]:
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd, check=False)
    except FileNotFoundError:
        return {"argv": argv, "rc": None, "error": f"{argv[0]}: not found"}
    except subprocess.TimeoutExpired:
        return {"argv": argv, "rc": None, "error": f"timed out after {timeout:g} s"}
    return {"argv": argv, "rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr[-4000:],
            "seconds": round(time.monotonic() - started, 2)}


def step(results: dict[str, Any], name: str, function: Callable[[], dict[str, Any]]) -> None:
    """Run one step; a failure is recorded with its reason and the next step runs."""
    print(f"gpu-check: {name} ...", flush=True)
    started = time.monotonic()
    try:
        outcome = function()
        outcome.setdefault("status", "ok")
    except Exception as exc:  # a check script: every failure is a result, not the end of the run
        outcome = {"status": "failed", "error": f"{type(exc).__name__}: {exc}",
                   "traceback": traceback.format_exc()[-3000:]}
    outcome["seconds"] = round(time.monotonic() - started, 2)
    results["steps"][name] = outcome
    print(f"gpu-check: {name}: {outcome['status']} in {outcome['seconds']} s"
          + (f" ({outcome['error']})" if outcome.get("error") else ""), flush=True)


def audit_step(out: Path, state: dict[str, Any]) -> dict[str, Any]:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.facts import audit, resolve_subsets
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import LiveSource
    from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

    source = LiveSource(record=True)
    facts = audit(source, resolve_subsets(["all"]), RuleOptions())
    (out / "audit.json").write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")
    (out / "capture.json").write_text(json.dumps(source.capture, indent=2, sort_keys=True) + "\n")
    state["facts"] = facts
    gpus = facts.get("gpus") or {}
    return {"summary": facts.get("summary"), "gpu_source": gpus.get("source"),
            "nvml_error": gpus.get("nvml_error"), "findings": [f"{f['severity']}: {f['id']}" for f in
                                                               facts.get("findings") or []],
            "problems": facts.get("problems"), "files": ["audit.json", "capture.json"]}


def nvidia_smi_step(out: Path, state: dict[str, Any]) -> dict[str, Any]:
    outputs = {"q-x.xml": ["nvidia-smi", "-q", "-x"], "q.txt": ["nvidia-smi", "-q"],
               "query-gpu.csv": ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv"],
               "topo-m.txt": ["nvidia-smi", "topo", "-m"], "topo-p2p-r.txt": ["nvidia-smi", "topo", "-p2p", "r"]}
    ran = {}
    for name, argv in outputs.items():
        result = run(argv, 60, env={**os.environ, "LC_ALL": "C"})
        (out / f"nvidia-smi_{name}").write_text(result.get("stdout") or result.get("error") or "")
        ran[name] = {"rc": result["rc"], "error": result.get("error")}
    csv_text = (out / "nvidia-smi_query-gpu.csv").read_text()
    rows = [[cell.strip() for cell in line.split(",")] for line in csv_text.splitlines()[1:] if line.strip()]
    smi = {row[2].lower()[-12:]: dict(zip(QUERY.split(","), row, strict=False)) for row in rows if len(row) >= 3}
    facts = state.get("facts") or {}
    nvml_devices = (facts.get("gpus") or {}).get("devices") or []
    comparison = []
    for device in nvml_devices:
        key = str(device.get("pci_bus_id") or "").lower()[-12:]
        row = smi.get(key, {})
        for field, nvml_value, smi_value in (
            ("name", device.get("name"), row.get("name")),
            ("memory_total_mib", device.get("memory_total_mib"), (row.get("memory.total") or "").split(" ")[0]),
            ("compute_capability", device.get("compute_capability"), row.get("compute_cap")),
            ("persistence_mode", device.get("persistence_mode"), row.get("persistence_mode")),
        ):
            same = str(nvml_value).lower() == str(smi_value).lower() or (
                field == "persistence_mode" and {True: "enabled", False: "disabled"}.get(nvml_value) ==
                str(smi_value).lower())
            comparison.append({"gpu": device.get("index"), "field": field, "nvml": nvml_value,
                               "nvidia_smi": smi_value, "equal": same})
    driver_smi = rows[0][3] if rows and len(rows[0]) > 3 else None
    comparison.append({"gpu": None, "field": "driver_version", "nvml": (facts.get("gpus") or {}).get("driver_version"),
                       "nvidia_smi": driver_smi,
                       "equal": (facts.get("gpus") or {}).get("driver_version") == driver_smi})
    comparison.append({"gpu": None, "field": "gpu_count", "nvml": len(nvml_devices), "nvidia_smi": len(rows),
                       "equal": len(nvml_devices) == len(rows)})
    mismatches = [c for c in comparison if not c["equal"]]
    return {"commands": ran, "comparison": comparison, "mismatches": len(mismatches),
            "status": "ok" if not mismatches and rows else "differs" if rows else "failed"}


def p2p_step(out: Path, python: str) -> dict[str, Any]:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import p2p_runner

    with tempfile.TemporaryDirectory() as tmp:
        try:
            result = p2p_runner.run_probe({"python": python, "timeout": 120, "missing_gpu": "skip",
                                           "save_log": str(out / "p2p-probe.jsonl")}, tmpdir=tmp)
        except p2p_runner.ProbeSkipped as exc:
            return {"status": "skipped", "reason": str(exc)}
        except p2p_runner.ProbeFailure as exc:
            return {"status": "failed", "error": str(exc), "details": getattr(exc, "details", None)}
    (out / "p2p-probe.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return {"devices": len(result.get("devices") or []), "access": result.get("access"),
            "findings": [f"{f['severity']}: {f['id']}" for f in result.get("findings") or []],
            "file": "p2p-probe.json"}


def nccl_step(out: Path, python: str) -> dict[str, Any]:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import nccl_runner

    with tempfile.TemporaryDirectory() as tmp:
        try:
            result = nccl_runner.run_bench({"engine": "torch-nccl", "python": python, "max_bytes": 64 << 20,
                                            "timeout": 180, "startup_timeout": 120,
                                            "env": {"NCCL_DEBUG": "INFO"}}, tmpdir=tmp)
        except nccl_runner.BenchFailure as exc:
            return {"status": "failed", "error": str(exc)}
    (out / "nccl.json").write_text(json.dumps(result, indent=2, sort_keys=True, default=str) + "\n")
    rows = result.get("results") or []
    return {"engine": result.get("engine"), "nranks": result.get("nranks"), "status_of_sweep": result.get("status"),
            "sizes": len(rows), "nccl_version": result.get("nccl_version"),
            "small": rows[0] if rows else None, "large": rows[-1] if rows else None,
            "findings": [f"{f['severity']}: {f['id']}" for f in result.get("findings") or []], "file": "nccl.json"}


def cuda_home() -> Path | None:
    for candidate in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if candidate and (Path(candidate) / "bin" / "nvcc").exists():
            return Path(candidate)
    nvcc = shutil.which("nvcc")
    return Path(nvcc).resolve().parent.parent if nvcc else None


def cuda_ext_step(out: Path, state: dict[str, Any], python: str) -> dict[str, Any]:
    home = cuda_home()
    if home is None:
        return {"status": "skipped", "reason": "no nvcc: set CUDA_HOME to a CUDA toolkit"}
    devices = ((state.get("facts") or {}).get("gpus") or {}).get("devices") or []
    arch = next((d.get("compute_capability") for d in devices if d.get("compute_capability")), None)
    if not arch:
        return {"status": "skipped", "reason": "the audit found no GPU compute capability to build for"}
    build = out / "cuda_ext"
    shutil.rmtree(build, ignore_errors=True)
    env = {**os.environ, "CUDA_HOME": str(home), "TORCH_CUDA_ARCH_LIST": arch, "MAX_JOBS": "2", "NVCC_THREADS": "2"}
    wheel = run([python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(build),
                 str(ROOT / "tests" / "cuda_ext")], 300, env=env)
    (out / "cuda_ext_build.log").write_text((wheel.get("stdout") or "") + (wheel.get("stderr") or ""))
    wheels = sorted(build.glob("*.whl")) if build.exists() else []
    if wheel["rc"] != 0 or not wheels:
        return {"status": "failed", "error": wheel.get("error") or f"pip wheel exited {wheel['rc']}",
                "nvcc": str(home / "bin" / "nvcc"), "arch": arch, "log": "cuda_ext_build.log"}
    target = build / "installed"
    install = run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target),
                   str(wheels[0])], 120)
    if install["rc"] != 0:
        return {"status": "failed", "error": f"pip install exited {install['rc']}: {install.get('stderr', '')[-500:]}"}
    probe = ("import json, gpuhost_cuda_ext as e; a=[1.0,2.0,3.0]; b=[10.0,20.0,30.0]; "
             "print(json.dumps({'archs': e.built_archs(), 'cudart': e.cudart_version(), "
             "'devices': e.device_count(), 'sum': e.add(a, b)}))")
    ran = run([python, "-c", probe], 60, env={**os.environ, "PYTHONPATH": str(target)})
    if ran["rc"] != 0:
        return {"status": "failed", "error": f"running the kernel failed: {ran.get('stderr', '')[-800:]}"}
    got = json.loads(ran["stdout"].strip().splitlines()[-1])
    correct = got["sum"] == [11.0, 22.0, 33.0]
    return {"status": "ok" if correct else "wrong_result", "arch": arch, "nvcc": str(home / "bin" / "nvcc"),
            "build_seconds": wheel.get("seconds"), **got}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "reports" / "gpu-check"), help="folder for the results")
    parser.add_argument("--python", default=sys.executable, help="interpreter with torch for the harnesses")
    parser.add_argument("--skip", action="append", default=[], help="a step to leave out (repeatable)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import_module_utils()
    results: dict[str, Any] = {"host": platform.node(), "python": sys.version.split()[0], "torch_python": args.python,
                               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "steps": {}}
    state: dict[str, Any] = {}
    steps = {
        "audit": lambda: audit_step(out, state),
        "nvidia_smi": lambda: nvidia_smi_step(out, state),
        "p2p_probe": lambda: p2p_step(out, args.python),
        "nccl": lambda: nccl_step(out, args.python),
        "cuda_ext": lambda: cuda_ext_step(out, state, args.python),
    }
    for name, function in steps.items():
        if name in args.skip:
            results["steps"][name] = {"status": "skipped", "reason": "--skip"}
            continue
        step(results, name, function)
        (out / "gpu-check.json").write_text(json.dumps(results, indent=2, sort_keys=True, default=str) + "\n")
    statuses = {name: s["status"] for name, s in results["steps"].items()}
    print(f"gpu-check: {json.dumps(statuses)}; everything in {out / 'gpu-check.json'}")
    return 0 if all(s in ("ok", "skipped") for s in statuses.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
