#!/usr/bin/env python3
"""The GPU paths, run for real where a GPU is: evidence in one JSON and one Markdown file.

Built for a bare, air-gapped GPU node: a stock driver and CUDA, no network, no package index, and only what
``--carry`` lists copied onto it (this checkout's code and the nvidia-ml-py wheel, a few MiB). Every step that
needs no torch runs without it; a step that cannot run here is skipped with the reason. Steps:

1. audit: the live audit (NVML through nvidia-ml-py, installed or the carried wheel; nvidia-smi; sysfs), its
   facts and the capture of what it read (a real host to replay in tests).
2. nvidia_smi: every nvidia-smi form the audit's parsers read (audit/commands.py), kept raw as fixtures marked
   with the GPU model and driver, each read by its parser; and the audit's NVML reading compared with what the
   audit reads from nvidia-smi alone, field by field (skipped when NVML was not read: the audit's GPUs then
   come from nvidia-smi itself).
3. cuda_ext: the project's kernels (tests/cuda_ext) built with the machine's nvcc (or the toolkit CUDA_HOME
   names) for the GPU's architecture, run on the GPU, the result compared with its expected value.
4. p2p_probe (torch): the P2P proof and copy timings (a pair needs two GPUs).
5. nccl (torch): the all-reduce sweep over every GPU; with two or more, the figures that calibrate the torch
   loop's thresholds (with P2P, with NCCL_P2P_DISABLE=1, and nccl-tests beside them where all_reduce_perf is on
   the PATH).

Exit status: 0 every step that ran passed; 1 a step failed or a comparison differs; 2 the check could not start;
3 no NVIDIA GPU here, so nothing on a GPU was checked. Nothing is written outside OUT.
"""

from __future__ import annotations

import argparse
import contextlib
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

sys.dont_write_bytecode = True  # nothing is left in the checkout
ROOT = Path(__file__).resolve().parent.parent
FORMAT = "gpuhost-gpu-check/1"
EXIT_MEANINGS = {0: "every step that ran passed", 1: "a step failed or a comparison differs",
                 2: "the check could not start", 3: "no NVIDIA GPU here: nothing on a GPU was checked"}
CARRY_LIMIT_BYTES = 64 << 20
# What the check needs on the GPU node: the code it runs, and the nvidia-ml-py wheel (git-ignored, so named).
CARRY_PATHS = ("scripts/gpu-check.sh", "scripts/gpu_check.py", "scripts/gpu_check_md.py", "collections",
               "plugins/module_utils", "tests/cuda_ext", "requirements-audit.txt")
WHEEL_DIR_ENV = "GPU_CHECK_WHEELS"
TORCH_STEPS = ("p2p_probe", "nccl")
GPU_STEPS = ("nvidia_smi", "cuda_ext", *TORCH_STEPS)
STEPS = ("audit", *GPU_STEPS)


def import_module_utils() -> None:
    """Make ansible_collections.gpuhost.gpu.plugins.module_utils importable from this checkout (collections/ holds
    the collection's link to the repository root); module_utils never imports Ansible (test_architecture.py)."""
    path = str(ROOT / "collections")
    if path not in sys.path:
        sys.path.insert(0, path)


def run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, "LC_ALL": "C", **(env or {})})
    except OSError as exc:
        return {"argv": argv, "rc": None, "stdout": "", "stderr": "", "error": f"{argv[0]}: {exc.strerror or exc}"}
    except subprocess.TimeoutExpired:
        return {"argv": argv, "rc": None, "stdout": "", "stderr": "", "error": f"timed out after {timeout:g} s"}
    return {"argv": argv, "rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr[-4000:],
            "seconds": round(time.monotonic() - started, 2)}


def version_text(text: str | None, marker: str = "") -> str | None:
    """A tool's version from its output: the lines holding ``marker`` (all lines when empty), joined; the last line
    when none does."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    chosen = [line for line in lines if marker in line] or lines[-1:]
    return "; ".join(chosen) or None


# ---------------------------------------------------------------------------
# What the node has: the NVML binding, nvcc, a Python with torch


def wheel_dir() -> Path:
    return Path(os.environ.get(WHEEL_DIR_ENV) or ROOT / ".cache" / "wheels")


def pinned_nvml_version() -> str | None:
    with contextlib.suppress(OSError):
        for line in (ROOT / "requirements-audit.txt").read_text().splitlines():
            if line.startswith("nvidia-ml-py=="):
                return line.split("==", 1)[1].split()[0]
    return None


def nvml_wheel() -> Path | None:
    """The carried nvidia-ml-py wheel: the pinned version in the wheel folder, else any there."""
    folder = wheel_dir()
    pinned = folder / f"nvidia_ml_py-{pinned_nvml_version()}-py3-none-any.whl"
    if pinned.is_file():
        return pinned
    found = sorted(folder.glob("nvidia_ml_py-*.whl")) if folder.is_dir() else []
    return found[-1] if found else None


def nvml_binding() -> dict[str, Any]:
    """Make pynvml importable (installed, else the carried wheel, a zip Python imports from) and say which."""
    try:
        import pynvml  # noqa: F401 - only whether it imports
        origin = "installed"
    except ImportError:
        wheel = nvml_wheel()
        if wheel is None:
            return {"binding": None, "origin": None,
                    "reason": f"nvidia-ml-py is not installed and no wheel is in {wheel_dir()} "
                              "(scripts/gpu-check.sh --carry puts one there): the audit reads nvidia-smi only"}
        sys.path.insert(0, str(wheel))
        origin = str(wheel)
    from importlib import metadata

    version = None
    with contextlib.suppress(metadata.PackageNotFoundError):
        version = metadata.version("nvidia-ml-py")
    if version is None and origin != "installed":
        version = Path(origin).name.split("-")[1]
    return {"binding": f"nvidia-ml-py {version}", "origin": origin}


def cuda_home() -> tuple[Path | None, str]:
    """(toolkit, why): CUDA_HOME alone when set (a carried toolkit), else /usr/local/cuda, else nvcc on PATH."""
    named = os.environ.get("CUDA_HOME")
    if named:
        home = Path(named)
        if (home / "bin" / "nvcc").is_file():
            return home, "CUDA_HOME"
        return None, f"CUDA_HOME={named} has no bin/nvcc"
    if (Path("/usr/local/cuda") / "bin" / "nvcc").is_file():
        return Path("/usr/local/cuda"), "/usr/local/cuda"
    nvcc = shutil.which("nvcc")
    if nvcc:
        return Path(nvcc).resolve().parent.parent, "nvcc on PATH"
    return None, "no nvcc: not under CUDA_HOME, /usr/local/cuda or on PATH"


def torch_python(given: str | None) -> tuple[str | None, str]:
    """(interpreter that imports torch, why); GPU_CHECK_PYTHON or --python alone when given."""
    candidates = [given] if given else [sys.executable, *(shutil.which(n) for n in ("python3", "python"))]
    tried = []
    for candidate in dict.fromkeys(os.path.realpath(c) if not given else c for c in candidates if c):
        probe = run([candidate, "-c", "import torch; print(torch.__version__)"], 120)
        if probe["rc"] == 0:
            return candidate, f"torch {version_text(probe['stdout'], '.')}"
        tried.append(candidate)
    return None, f"no Python with torch (tried {', '.join(tried) or 'none'}; set GPU_CHECK_PYTHON to one)"


def plan(facts: dict[str, Any] | None, tools: dict[str, Any], skip: list[str]) -> dict[str, str | None]:
    """Step -> None (runs) or the reason it is skipped; decided once, before the GPU steps run."""
    gpus = ((facts or {}).get("summary") or {}).get("gpu_count") or 0
    out: dict[str, str | None] = {"audit": "--skip" if "audit" in skip else None}
    for name in GPU_STEPS:
        reasons = []
        if name in skip:
            reasons.append("--skip")
        if facts is None:
            reasons.append("the audit did not run, so whether a GPU is here is unknown")
        elif not gpus:
            reasons.append("no NVIDIA GPU: the audit found none (NVML, nvidia-smi, PCI)")
        if name == "nvidia_smi" and not tools["nvidia_smi"]:
            reasons.append("no nvidia-smi on PATH")
        if name == "cuda_ext" and not tools["cuda_home"]:
            reasons.append(tools["cuda_home_why"])
        if name in TORCH_STEPS and not tools["torch_python"]:
            reasons.append(tools["torch_why"])
        out[name] = "; ".join(reasons) or None
    return out


# ---------------------------------------------------------------------------
# Steps: each returns its outcome; figures compared with something go to results["comparisons"]


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
    return {"summary": facts.get("summary"), "gpu_source": gpus.get("source"), "nvml_error": gpus.get("nvml_error"),
            "findings": [f"{f['severity']}: {f['id']}" for f in facts.get("findings") or []],
            "problems": facts.get("problems"), "files": ["audit.json", "capture.json"]}


def machine(facts: dict[str, Any]) -> dict[str, Any]:
    gpus = facts.get("gpus") or {}
    names = [d.get("name") for d in gpus.get("devices") or [] if d.get("name")]
    return {"gpu_count": (facts.get("summary") or {}).get("gpu_count"), "models": sorted(set(names)),
            "driver_version": gpus.get("driver_version"), "cuda_driver_version": gpus.get("cuda_driver_version"),
            "gpu_source": gpus.get("source")}


def fixture_name(form: str, argv: list[str], where: dict[str, Any]) -> str:
    """A fixture's file name in tests/fixtures/nvidia-smi's style: form, driver branch, GPUs, and real-gpu."""
    driver = str(where.get("driver_version") or "driver-unknown").split(".")[0]
    model = (where.get("models") or ["unknown-GPU"])[0].replace("NVIDIA ", "")
    model = "".join(c if c.isascii() and (c.isalnum() or c in ".-") else "-" for c in "-".join(model.split()))
    gpus = f"{where.get('gpu_count') or 0}x{model}"
    suffix = ".xml" if argv[-1] == "-x" else ".csv" if "--format=csv,noheader,nounits" in argv else ".txt"
    return f"{form}_{driver}_{gpus}_real-gpu{suffix}"


def smi_forms() -> dict[str, tuple[list[str], Callable[[str], Any]]]:
    """Each nvidia-smi form the audit reads, with the parser that reads it (audit/commands.py spells them)."""
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import commands as c
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers import nvidia_smi_health as health
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_list import parse_list_gpus
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_q import parse_nvidia_smi_q
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_query import parse_query_gpu
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_topo import (
        parse_topo_matrix,
        parse_topo_p2p,
    )

    forms = {
        "query-gpu": (c.QUERY_GPU.argv, parse_query_gpu),
        "query-gpu-health": (c.HEALTH_QUERY.argv, lambda text: health.parse_health_query(text)),
        "query-gpu-health-old": (c.HEALTH_QUERY_OLD.argv,
                                 lambda text: health.parse_health_query(text, health.HEALTH_QUERY_FIELDS_OLD)),
        "list-gpus": (c.LIST_GPUS.argv, parse_list_gpus),
        "q-x": (c.SMI_Q_XML.argv, parse_nvidia_smi_q),
        "q": (c.SMI_Q_TEXT.argv, parse_nvidia_smi_q),
        "topo-m": (c.TOPO_MATRIX.argv, parse_topo_matrix),
    }
    for letter, command in c.TOPO_P2P.items():
        forms[f"topo-p2p-{letter}"] = (command.argv, parse_topo_p2p)
    return forms


def nvidia_smi_step(out: Path, state: dict[str, Any], comparisons: list[dict[str, Any]]) -> dict[str, Any]:
    where = machine(state.get("facts") or {})
    fixtures = out / "fixtures" / "nvidia-smi"
    fixtures.mkdir(parents=True, exist_ok=True)
    version = run(["nvidia-smi", "--version"], 30)
    stamp = time.strftime("%Y-%m-%d", time.gmtime())
    models = ", ".join(where["models"]) or "unknown"
    smi_version = version_text(version["stdout"], "version") or "nvidia-smi"
    rows = []
    forms = {}
    for form, (argv, parser) in smi_forms().items():
        result = run(argv, 120)
        entry: dict[str, Any] = {"argv": " ".join(argv), "rc": result["rc"], "error": result.get("error")}
        if result["rc"] == 0:
            name = fixture_name(form, argv, where)
            (fixtures / name).write_text(result["stdout"])
            entry["file"] = f"fixtures/nvidia-smi/{name}"
            try:
                parser(result["stdout"])
                entry["parsed"] = "ok"
            except Exception as exc:  # a parser that fails on a real output is what this check is for
                entry["parsed"] = f"{type(exc).__name__}: {exc}"[:600]
            rows.append(f"| `{name}` | `{' '.join(argv)}` | real GPU: {where['gpu_count']}x {models}, driver "
                        f"{where['driver_version']}, {smi_version}; saved by "
                        f"scripts/gpu-check.sh on {platform.node()}, {stamp} |")
        else:
            entry["stderr"] = (result.get("stderr") or result.get("stdout") or "")[-300:]
        forms[form] = entry
    (fixtures / "SOURCES.md").write_text(
        "# nvidia-smi outputs saved by scripts/gpu-check.sh on a real GPU\n\n"
        "Verbatim: what nvidia-smi printed, nothing added. Copy a file into tests/fixtures/nvidia-smi/ with its "
        "row.\n\n"
        "| file | command | source |\n|---|---|---|\n" + "\n".join(rows) + "\n")
    unread = [f for f, e in forms.items() if e.get("parsed") not in (None, "ok")]
    compared = compare_with_nvidia_smi(state.get("facts") or {}, comparisons)
    differs = [c for c in comparisons if c["step"] == "nvidia_smi" and c["equal"] is False]
    failed = forms["query-gpu"]["rc"] != 0 or bool(unread)
    return {"status": "failed" if failed else "differs" if differs else "ok", "nvidia_smi_version":
            version_text(version["stdout"], "version"), "forms": forms, "unparsed": unread, "comparison": compared,
            "differences": len(differs), "fixtures": "fixtures/nvidia-smi/SOURCES.md"}


def compare_with_nvidia_smi(facts: dict[str, Any], comparisons: list[dict[str, Any]], smi_source: Any = None) -> str:
    """The audit's NVML reading against what the audit reads from nvidia-smi alone (``smi_source``: a source that
    gives no NVML; default this host's), field by field; 'skipped: ...' when the audit did not read NVML (its GPUs
    then are nvidia-smi's: comparing them with nvidia-smi proves nothing)."""
    gpus = facts.get("gpus") or {}
    if gpus.get("source") != "nvml":
        return f"skipped: NVML was not read ({gpus.get('nvml_error') or 'no NVML reading'}), the audit's GPUs are " \
               "nvidia-smi's own"
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.gpus import gather_gpus
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import LiveSource

    if smi_source is None:
        smi_source = LiveSource(nvml_reader=lambda: {"error": "NVML left out: nvidia-smi alone", "kind": "not_read"})
    smi_gpus, smi_p2p, smi_topology, _unused = gather_gpus(smi_source, facts.get("pci") or {})

    def add(what: str, nvml_value: Any, smi_value: Any) -> None:
        # A value only one of them tells is no contradiction: equal is null (not compared), not false.
        equal = None if nvml_value is None or smi_value is None else nvml_value == smi_value
        comparisons.append({"step": "nvidia_smi", "what": what, "measured": nvml_value, "source": "audit (NVML)",
                            "against": smi_value, "against_source": "audit (nvidia-smi)", "equal": equal})

    add("GPU count", gpus.get("count"), smi_gpus.get("count"))
    add("driver version", gpus.get("driver_version"), smi_gpus.get("driver_version"))
    by_bus = {str(d.get("pci_bus_id") or "").lower(): d for d in smi_gpus.get("devices") or []}
    for device in gpus.get("devices") or []:
        other = by_bus.get(str(device.get("pci_bus_id") or "").lower(), {})
        for key in sorted(set(device) & set(other)):
            if device[key] is not None or other[key] is not None:
                add(f"GPU{device.get('index')} {key}", device[key], other[key])
    for capability, matrix in sorted((facts.get("p2p") or {}).items()):
        if isinstance(matrix, list) and capability in smi_p2p:
            add(f"P2P {capability} matrix", matrix, smi_p2p[capability])
    if (facts.get("topology") or {}).get("matrix") and smi_topology.get("matrix"):
        add("topology matrix", facts["topology"]["matrix"], smi_topology["matrix"])
    return "compared"


def cuda_ext_step(out: Path, state: dict[str, Any], tools: dict[str, Any],
                  comparisons: list[dict[str, Any]]) -> dict[str, Any]:
    home = tools["cuda_home"]
    devices = ((state.get("facts") or {}).get("gpus") or {}).get("devices") or []
    capability = next((d.get("compute_capability") for d in devices if d.get("compute_capability")), None)
    if not capability:
        return {"status": "skipped", "reason": "the audit read no compute capability to build for"}
    arch = "sm_" + str(capability).replace(".", "")
    nvcc = str(Path(home) / "bin" / "nvcc")
    source = ROOT / "tests" / "cuda_ext"
    with tempfile.TemporaryDirectory(prefix="gpu-check-cuda-ext-") as tmp:
        package = Path(tmp) / "gpuhost_cuda_ext"
        package.mkdir()
        shutil.copy(source / "gpuhost_cuda_ext" / "__init__.py", package / "__init__.py")
        argv = [nvcc, "-O2", "-shared", "-Xcompiler", "-fPIC", "-cudart", "static", f"-arch={arch}",
                f'-DGPUHOST_CUDA_EXT_ARCHS="{arch}"', *(str(source / "src" / f) for f in ("kernel.cu", "info.cu")),
                "-o", str(package / "_kernel.so")]
        build = run(argv, 300)
        (out / "cuda_ext_build.log").write_text(" ".join(argv) + "\n" + build["stdout"] + build["stderr"])
        if build["rc"] != 0:
            return {"status": "failed", "error": build.get("error") or f"nvcc exited {build['rc']}", "nvcc": nvcc,
                    "arch": arch, "log": "cuda_ext_build.log"}
        probe = ("import json, gpuhost_cuda_ext as e\n"
                 "got = {'archs': e.built_archs(), 'cudart': e.cudart_version(), 'devices': e.device_count()}\n"
                 "try:\n    got['sum'] = e.add([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])\n"
                 "except RuntimeError as exc:\n    got['error'] = str(exc)\n"
                 "print(json.dumps(got))")
        ran = run([sys.executable, "-c", probe], 120, env={"PYTHONPATH": tmp, "PYTHONDONTWRITEBYTECODE": "1"})
    built = {"arch": arch, "nvcc": nvcc, "build_seconds": build.get("seconds")}
    if ran["rc"] != 0:
        return {"status": "failed", "error": f"loading the kernel failed: {ran.get('error') or ran['stderr'][-800:]}",
                **built}
    got = json.loads(ran["stdout"].strip().splitlines()[-1])
    if got.get("error"):
        return {**built, **got, "status": "failed", "error": f"the kernel did not run: {got['error']}"}
    checks = [("kernel out = a + b", got["sum"], [11.0, 22.0, 33.0]), ("architectures built", got["archs"], [arch]),
              ("GPUs the CUDA runtime sees", got["devices"], len(devices))]
    for what, measured, expected in checks:
        comparisons.append({"step": "cuda_ext", "what": what, "measured": measured, "source": "the kernel",
                            "against": expected, "against_source": "expected", "equal": measured == expected})
    wrong = [what for what, measured, expected in checks if measured != expected]
    return {"status": "wrong_result" if wrong else "ok", "wrong": wrong, **built, **got}


def p2p_step(out: Path, python: str, comparisons: list[dict[str, Any]]) -> dict[str, Any]:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import p2p_runner
    from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.p2p_judge import (
        DEFAULT_MAX_SMALL_LATENCY_US,
        small_latency_matrix,
    )

    with tempfile.TemporaryDirectory() as tmp:
        try:
            result = p2p_runner.run_probe({"python": python, "timeout": 120, "missing_gpu": "skip",
                                           "save_log": str(out / "p2p-probe.jsonl")}, tmpdir=tmp)
        except p2p_runner.ProbeSkipped as exc:
            return {"status": "skipped", "reason": str(exc)}
        except p2p_runner.ProbeFailure as exc:
            return {"status": "failed", "error": str(exc), "details": getattr(exc, "details", None)}
    (out / "p2p-probe.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    for i, row in enumerate(result.get("proof") or []):
        for j, cell in enumerate(row):
            if isinstance(cell, dict):
                wrong = (cell.get("ce_wrong") or 0) + (cell.get("sm_wrong") or 0)
                comparisons.append({"step": "p2p_probe", "what": f"GPU{i}->GPU{j} elements not arriving",
                                    "measured": wrong, "source": "the probe", "against": 0,
                                    "against_source": "expected", "equal": wrong == 0})
    latency = small_latency_matrix(result)
    # How the stream holds behind the GPU copy times fared: a figure whose hold was outlasted is null.
    holds = {"first_hold": 0, "longer_hold": 0, "outlasted": 0}
    with contextlib.suppress(OSError):
        for line in (out / "p2p-probe.jsonl").read_text().splitlines():
            hold = json.loads(line).get("hold") if line.startswith("{") and '"timing"' in line else None
            if isinstance(hold, dict):
                key = "outlasted" if not hold.get("held") else "first_hold" if hold.get("tries") == 1 else "longer_hold"
                holds[key] += 1
    return {"status": result.get("status") or "ok", "devices": len(result.get("devices") or []), "holds": holds,
            "access": result.get("access"), "small_copy_latency": latency,
            "latency_limit_us": DEFAULT_MAX_SMALL_LATENCY_US,
            "findings": [f"{f['severity']}: {f['id']}" for f in result.get("findings") or []],
            "file": "p2p-probe.json"}


def nccl_step(out: Path, python: str) -> dict[str, Any]:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import nccl_runner
    from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_sweeps import find_nccl_tests
    from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_thresholds import calibration_figures

    def sweep(engine: str, env: dict[str, str], max_bytes: int) -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            return nccl_runner.run_bench({"engine": engine, "python": python, "max_bytes": max_bytes,
                                          "timeout": 180, "startup_timeout": 120, "env": env}, tmpdir=tmp)

    try:
        result = sweep("torch-nccl", {"NCCL_DEBUG": "INFO"}, 64 << 20)
    except nccl_runner.BenchFailure as exc:
        return {"status": "failed", "error": str(exc)}
    (out / "nccl.json").write_text(json.dumps(result, indent=2, sort_keys=True, default=str) + "\n")
    rows = result.get("results") or []
    outcome: dict[str, Any] = {
        "status": "ok" if result.get("status") == "ok" else "failed", "engine": result.get("engine"),
        "nranks": result.get("nranks"), "nccl_version": result.get("nccl_version"), "results": rows,
        "thresholds": result.get("thresholds"), "violations": result.get("violations"),
        "findings": [f"{f['severity']}: {f['id']}" for f in result.get("findings") or []], "file": "nccl.json"}
    if (result.get("nranks") or 0) < 2:
        outcome["calibration"] = "needs two GPUs or more: one rank has no all-reduce to time"
        return outcome
    runs = {"torch-nccl": rows}
    try:
        runs["torch-nccl NCCL_P2P_DISABLE=1"] = sweep("torch-nccl", {"NCCL_P2P_DISABLE": "1"}, 1 << 20)["results"]
    except nccl_runner.BenchFailure as exc:
        outcome["calibration_errors"] = [f"NCCL_P2P_DISABLE=1: {exc}"]
    if find_nccl_tests(None, "all_reduce"):
        try:
            runs["nccl-tests"] = sweep("nccl-tests", {}, 64 << 20)["results"]
        except nccl_runner.BenchFailure as exc:
            outcome.setdefault("calibration_errors", []).append(f"nccl-tests: {exc}")
    outcome["calibration"] = calibration_figures("torch-nccl", result.get("nranks"), runs,
                                                 result.get("thresholds") or [])
    return outcome


# ---------------------------------------------------------------------------
# The run, its evidence and its exit status


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
          + (f" ({outcome.get('error') or outcome.get('reason')})" if outcome.get("error") or outcome.get("reason")
             else ""), flush=True)


def exit_code(results: dict[str, Any]) -> int:
    statuses = {name: s["status"] for name, s in results["steps"].items()}
    if any(s not in ("ok", "skipped") for s in statuses.values()):
        return 1
    if not (results.get("machine") or {}).get("gpu_count"):
        return 3
    return 0


def write_evidence(out: Path, results: dict[str, Any]) -> None:
    from gpu_check_md import render

    (out / "gpu-check.json").write_text(json.dumps(results, indent=2, sort_keys=True, default=str) + "\n")
    (out / "gpu-check.md").write_text(render(results))


def check(args: argparse.Namespace) -> int:
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "gpu-check.json").write_text("{}\n")
    except OSError as exc:
        print(f"gpu-check: expected a folder the evidence can be written to; {out}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    import_module_utils()
    nvml = nvml_binding()
    home, home_why = cuda_home()
    python, torch_why = torch_python(args.python or os.environ.get("GPU_CHECK_PYTHON"))
    nvidia_smi = shutil.which("nvidia-smi")
    tools: dict[str, Any] = {"python": f"{sys.executable} {platform.python_version()}", "nvml": nvml,
                             "nvidia_smi": nvidia_smi, "cuda_home": str(home) if home else None,
                             "cuda_home_why": home_why, "torch_python": python, "torch_why": torch_why}
    if home:
        tools["nvcc_version"] = version_text(run([str(home / "bin" / "nvcc"), "--version"], 60)["stdout"], "release")
    results: dict[str, Any] = {"format": FORMAT, "host": platform.node(), "kernel": platform.release(),
                               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "tools": tools,
                               "steps": {}, "comparisons": []}
    comparisons = results["comparisons"]
    state: dict[str, Any] = {}
    if "audit" in args.skip:
        results["steps"]["audit"] = {"status": "skipped", "reason": "--skip"}
    else:
        step(results, "audit", lambda: audit_step(out, state))
    results["machine"] = machine(state["facts"]) if state.get("facts") else {}
    decided = plan(state.get("facts"), tools, args.skip)
    results["plan"] = {name: ("run" if why is None else f"skip: {why}") for name, why in decided.items()}
    for name in GPU_STEPS:
        print(f"gpu-check: plan: {name}: {results['plan'][name]}", flush=True)
    steps = {
        "nvidia_smi": lambda: nvidia_smi_step(out, state, comparisons),
        "cuda_ext": lambda: cuda_ext_step(out, state, tools, comparisons),
        "p2p_probe": lambda: p2p_step(out, python or "", comparisons),
        "nccl": lambda: nccl_step(out, python or ""),
    }
    for name, function in steps.items():
        if decided[name] is not None:
            results["steps"][name] = {"status": "skipped", "reason": decided[name]}
            continue
        step(results, name, function)
        write_evidence(out, results)
    code = exit_code(results)
    results.update(finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), exit_code=code,
                   exit_meaning=EXIT_MEANINGS[code])
    write_evidence(out, results)
    print(f"gpu-check: exit {code} ({EXIT_MEANINGS[code]}); evidence in {out / 'gpu-check.md'} and "
          f"{out / 'gpu-check.json'}")
    return code


def carry() -> int:
    """Print what to copy onto the GPU node (paths, sizes, within 64 MiB) and the exact call; fetch the wheel."""
    version = pinned_nvml_version()
    wheel = nvml_wheel()
    if wheel is None or (version and version not in wheel.name):
        folder = wheel_dir()
        got = run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                   "--dest", str(folder), f"nvidia-ml-py=={version}"], 300)
        wheel = nvml_wheel()
        if wheel is None:
            print(f"gpu-check: expected the nvidia-ml-py {version} wheel in {folder}; pip download failed: "
                  f"{got.get('error') or version_text(got['stderr'])}. Download it where an index is reachable and "
                  f"put it there (or set {WHEEL_DIR_ENV}).", file=sys.stderr)
            return 2
    listed = run(["git", "-C", str(ROOT), "ls-files", "-z", "--", *CARRY_PATHS], 60)
    files = [f for f in listed["stdout"].split("\0") if f] if listed["rc"] == 0 else []
    sizes: dict[str, int] = {}
    for name in files:
        top = next(p for p in CARRY_PATHS if name == p or name.startswith(p + "/"))
        sizes[top] = sizes.get(top, 0) + (ROOT / name).lstat().st_size
    if not files:
        print("gpu-check: --carry lists the files git tracks; run it in a git checkout", file=sys.stderr)
        return 2
    wheel_path = os.path.relpath(wheel, ROOT) if wheel.is_relative_to(ROOT) else str(wheel)
    sizes[wheel_path] = wheel.stat().st_size
    total = sum(sizes.values())
    print(f"gpu-check: carry these {len(files) + 1} files, {total / (1 << 20):.1f} MiB of "
          f"{CARRY_LIMIT_BYTES >> 20} MiB:")
    for path, size in sizes.items():
        note = "  (git-ignored: name it when copying)" if path == wheel_path else ""
        print(f"  {size / 1024:10.1f} KiB  {path}{note}")
    print("gpu-check: copy them (from the checkout's root), then run on the GPU node, from the copy's root:")
    print(f"  git ls-files -z -- {' '.join(CARRY_PATHS)} | tar --null -T - -czf gpu-check.tar.gz {wheel_path}")
    print("  tar -xzf gpu-check.tar.gz && scripts/gpu-check.sh OUT")
    print(f"gpu-check: or, copying the working tree: the ignored path to carry is {wheel_path}; the call is "
          "scripts/gpu-check.sh OUT")
    if total > CARRY_LIMIT_BYTES:
        print(f"gpu-check: {total} bytes is over the {CARRY_LIMIT_BYTES >> 20} MiB a payload may be", file=sys.stderr)
        return 2
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "reports" / "gpu-check"), help="folder for the evidence")
    parser.add_argument("--python", help="interpreter with torch for the torch steps (default: GPU_CHECK_PYTHON, "
                                         "else the first of this one, python3, python that imports torch)")
    parser.add_argument("--skip", action="append", default=[], choices=STEPS, help="a step to leave out (repeatable)")
    parser.add_argument("--carry", action="store_true", help="print what to copy onto the GPU node and the call")
    args = parser.parse_args()
    return carry() if args.carry else check(args)


if __name__ == "__main__":
    sys.exit(main())
