"""Run the NCCL benchmark: check the options, pick the engine, run one sweep per candidate, judge the numbers.

The system is touched in nccl_sweeps only (the probe of the torch interpreter, the harness, the
nccl-tests binaries, the log file); everything they return is judged by pure code (nccl_judge,
nccl_thresholds, nccl_tuning, nccl_findings, nccl_known_issues, nccl_diagnostics).

Options that cannot mean anything are refused before anything runs (arguments.py). In check mode
nothing that loads a GPU runs unless ``run_in_check_mode`` says so (``BenchSkipped``); a log is
still read. Missing preconditions (no torch in that interpreter, no CUDA device for NCCL, no
nccl-tests binary) raise ``BenchFailure`` with what was expected and what to do. What the host does
wrong once the benchmark runs (wrong values, a hang, an NCCL error, an NCCL with a known bug, rows
that are no measurement) is a result: it becomes findings, not a failure.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import nccl_diagnostics
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import nccl_judge as logic
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.arguments import (
    ArgumentError,
    environment,
    nccl_bench_options,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.harness_runner import python_problem
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.log_gpus import gpu_name_mismatch
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_findings import (
    findings_for_run,
    sort_findings,
    tuning_findings,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_known_issues import known_issue_findings
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_sweeps import (
    HARNESS_ERRORS,
    BenchFailure,
    BenchSkipped,
    Sweep,
    find_nccl_tests,
    gpu_count_from_nvidia_smi,
    harness_sweep,
    log_sweep,
    nccl_tests_sweep,
    probe_python,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_thresholds import (
    evaluate_thresholds,
    normalize_thresholds,
    thresholds_for,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.nccl_tuning import (
    choose_best,
    normalize_candidates,
    summarize_candidate,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.serving_env import MODES as SERVING_ENV_MODES
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.serving_env import as_served
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.catalog import make
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import Finding
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.ceiling import check_model
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_debug import parse_nccl_debug

GLOO_DEFAULT_NRANKS = 2
DEFAULT_TIMEOUT_S = 300.0
# Importing torch on a cold disk and NCCL's initialisation of 8 GPUs: tens of seconds at worst.
DEFAULT_STARTUP_TIMEOUT_S = 120.0
CHECK_MODE_SKIP = ("check mode: no NCCL benchmark was run. A sweep loads every GPU of the host for minutes, also on a "
                   "host that already serves; set run_in_check_mode: true (gpu_bench_in_check_mode in the gpu_bench "
                   "role) to run it in check mode anyway, or give `log` to judge a saved output")

# ---------------------------------------------------------------------------
# The whole run


def resolve_options(params: dict[str, Any]) -> dict[str, Any]:
    """The sweep's settings from checked options (nccl_bench_options ran first)."""
    collectives = list(dict.fromkeys(params.get("collectives") or ["all_reduce"]))
    unknown = [c for c in collectives if c not in logic.COLLECTIVES]
    if unknown:
        raise BenchFailure(f"collectives: expected any of {', '.join(logic.COLLECTIVES)}; got {', '.join(unknown)}")
    if params.get("serving_env") not in (None, *SERVING_ENV_MODES):
        raise BenchFailure(f"serving_env: expected one of {', '.join(SERVING_ENV_MODES)}; "
                           f"got {params['serving_env']!r}")

    def given(name: str, default: Any) -> Any:
        return default if params.get(name) is None else params[name]

    return {
        "collectives": collectives,
        "min_bytes": given("min_bytes", logic.DEFAULT_MIN_BYTES),
        "max_bytes": params.get("max_bytes"),
        "step_factor": given("step_factor", 2),
        "iters": given("iters", 20),
        "warmup": given("warmup", 5),
        "check": params.get("check", True) is not False,
        "timeout": float(given("timeout", DEFAULT_TIMEOUT_S)),
        "startup_timeout": float(given("startup_timeout", DEFAULT_STARTUP_TIMEOUT_S)),
        "env": environment("env", params.get("env")),
        "serving_env": given("serving_env", "sglang"),
    }


def checked(params: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """(sweep settings, thresholds given or None, candidates): every option checked before anything runs."""
    try:
        nccl_bench_options(params)
        if params.get("model") is not None:
            check_model(params["model"])
        thresholds = normalize_thresholds(params["thresholds"]) if params.get("thresholds") is not None else None
        candidates = (normalize_candidates(params.get("candidates")) if params.get("tune")
                      else [{"name": "as-is", "env": {}}])
        return resolve_options(params), thresholds, candidates
    except (ArgumentError, logic.BenchInputError, ModelError) as exc:
        raise BenchFailure(str(exc)) from None


def choose_engine(params: dict[str, Any], python: str, tmpdir: str | None) -> tuple[str, dict[str, Any] | None]:
    """(engine, probe) for engine auto: nccl-tests when installed, else torch with NCCL when it sees a GPU."""
    engine = params.get("engine") or "auto"
    if engine != "auto":
        return engine, None
    if find_nccl_tests(params.get("nccl_tests_dir"), "all_reduce"):
        return "nccl-tests", None
    probe = probe_python(python, tmpdir)
    if probe.get("torch") and probe.get("device_count"):
        return "torch-nccl", probe
    where = params.get("nccl_tests_dir") or "PATH"
    torch_state = (f"torch {probe['torch']} there sees no CUDA device" if probe.get("torch")
                   else f"it has no torch ({probe.get('torch_error')})")
    raise BenchFailure(
        f"no benchmark engine can run here: no all_reduce_perf in {where}, and {python}: {torch_state}. "
        "Install nccl-tests (and set nccl_tests_dir), set `python` to the serving venv's interpreter on a host "
        "with GPUs, or choose engine torch-gloo for a CPU-only run of the harness.", probe=probe)


def run_bench(params: dict[str, Any], tmpdir: str | None = None,
              warn: Callable[[str], None] = lambda message: None, check_mode: bool = False) -> dict[str, Any]:
    opts, given_thresholds, candidates = checked(params)
    python = params.get("python") or sys.executable
    base_env = opts["env"]
    probe = None
    torch_nccl = None
    diag_requested, diag_why = False, "a log is read, nothing was run"

    if params.get("log"):
        if params.get("tune"):
            warn("tune is ignored with log: a log holds one environment's run")
        engine = "nccl-tests"
        sweep = log_sweep(params["log"], params.get("log_text"))
        nranks = sweep.nranks or params.get("nranks")
        sweeps = [("as-is", base_env, sweep)]
        source = "log"
        served = {"mode": "log", "added": {}, "replaced": {}, "kept": {}, "source": None}
    else:
        if check_mode and not params.get("run_in_check_mode"):
            raise BenchSkipped(CHECK_MODE_SKIP)
        source = "run"
        engine, probe = choose_engine(params, python, tmpdir)
        nranks, binaries, probe = prepare(engine, params, opts, python, tmpdir, probe)
        torch_nccl = (probe or {}).get("nccl_version")
        if opts["max_bytes"] is None:
            opts["max_bytes"] = logic.GLOO_MAX_BYTES if engine == "torch-gloo" else logic.DEFAULT_MAX_BYTES
        if opts["max_bytes"] < opts["min_bytes"]:
            raise BenchFailure(f"max_bytes: expected at least min_bytes ({opts['min_bytes']}); got {opts['max_bytes']}")
        diag_requested, diag_why = nccl_diagnostics.plan(engine, torch_nccl)
        sweeps = []
        served = None
        for index, candidate in enumerate(candidates):
            env = {**base_env, **candidate["env"]}
            # NCCL as SGLang serves with it (serving_env.py); what was added is reported for the baseline.
            run_env, served_here = as_served(env, opts["serving_env"])
            served = served or served_here
            if engine != "torch-gloo":
                # The transport per channel is only printed at INFO; the user's own setting wins.
                run_env.setdefault("NCCL_DEBUG", "INFO")
            if diag_requested and index == 0:
                # NCCL's own check of every pair, at the baseline's start only: not part of what is deployed.
                run_env.setdefault(nccl_diagnostics.ENV, "1")
            if engine == "nccl-tests":
                sweep = nccl_tests_sweep(binaries, nranks, opts, run_env)
            else:
                backend = "gloo" if engine == "torch-gloo" else "nccl"
                sweep = harness_sweep(python, backend, nranks, opts, run_env, tmpdir)
            sweeps.append((candidate["name"], env, sweep))

    thresholds = thresholds_for(given_thresholds, nranks or 0, engine)
    primary_collective = opts["collectives"][0]
    if source == "log":
        primary_collective = next(iter(sweeps[0][2].collectives), primary_collective)
    name, env, primary = sweeps[0]
    transports = transports_of(primary, engine)
    violations, unjudged = evaluate_thresholds(primary.collectives, thresholds)
    summaries = [summarize_candidate(n, e, s.status, s.collectives, primary_collective, s.error, s.hung_at)
                 for n, e, s in sweeps]
    control = next((s for s in summaries if s["env"].get("NCCL_P2P_DISABLE") == "1" and s["status"] == "ok"), None)
    findings = findings_for_run(
        engine=engine, nranks=nranks or 0, collectives=primary.collectives, violations=violations, env=env,
        status=primary.status, hung_at=primary.hung_at, timeout_s=limit_for(primary, opts), transports=transports,
        alive=primary.alive, control=control)
    if primary.status == "error":
        findings.append(run_failed_finding(engine, name, env, primary))
    ran_nccl = primary.nccl_version or (transports or {}).get("nccl_version")
    if source == "log":
        mismatch = gpu_name_mismatch(primary.log_devices, list(params.get("gpu_names") or []), params["log"])
        if mismatch:
            warn(mismatch)
            primary.notes.append(mismatch)
    gpu_names = params.get("gpu_names") or (probe or {}).get("devices") or primary.versions.get("devices") or []
    findings += known_issue_findings({"torch": torch_nccl, "ran": ran_nccl}, list(gpu_names), nranks)
    diagnostics = nccl_diagnostics.result(primary.debug_text, diag_requested, diag_why, source == "run")
    findings += nccl_diagnostics.findings(diagnostics, engine)

    tuning = None
    if params.get("tune") and source == "run":
        tuning = choose_best(summaries, base_env)
        for (cand_name, cand_env, sweep), summary in zip(sweeps, summaries, strict=False):
            summary["results"] = sweep.collectives.get(primary_collective, [])
            if cand_name == name:
                continue
            for finding in findings_for_run(
                    engine=engine, nranks=nranks or 0, collectives=sweep.collectives, violations=[], env=cand_env,
                    status=sweep.status, hung_at=sweep.hung_at, timeout_s=limit_for(sweep, opts), alive=sweep.alive,
                    label=cand_name):
                if finding.id in ("nccl_wrong_values", "nccl_timeout"):
                    # Only the environment the deployment uses is critical; the others inform the choice.
                    finding.severity = "warning"
                    findings.append(finding)
        findings.extend(tuning_findings(tuning, primary_label=name))
        recommended_env = tuning["recommended_env"]
    else:
        # Rows printed as inf or nan are no evidence either way: no environment is vouched for.
        healthy = (primary.status == "ok" and not any(f.severity == "critical" for f in findings)
                   and not logic.not_measured(primary.collectives))
        recommended_env = env if healthy and source == "run" else None

    per_collective = {c: logic.collective_entry(rows, primary.out_of_bounds.get(c))
                      for c, rows in primary.collectives.items()}
    result: dict[str, Any] = {
        "engine": engine,
        "source": source,
        "status": primary.status,
        "nranks": nranks,
        "nccl_version": ran_nccl,
        "collective": None if primary_collective == logic.UNKNOWN_COLLECTIVE else primary_collective,
        "results": primary.collectives.get(primary_collective, []),
        "per_collective": per_collective,
        "env": env,
        "serving_env": served,
        "transports": transports,
        "thresholds": thresholds,
        "violations": violations,
        "unjudged_thresholds": unjudged,
        "tuning": tuning,
        "recommended_env": recommended_env,
        "hung_at": primary.hung_at,
        "elapsed_s": round(sum(s.elapsed_s or 0 for _unused, _unused, s in sweeps), 3),
        "startup_s": primary.startup_s,
        "versions": primary.versions,
        "nccl_diagnostics": diagnostics,
        "findings": sort_findings(findings),
    }
    if probe:
        result["versions"] = {**result["versions"], "torch_version": probe.get("torch"),
                              "torch_nccl_version": torch_nccl}
    if primary.error:
        result["error"] = primary.error
    if primary.notes:
        result["notes"] = list(primary.notes)
    return result


def prepare(engine: str, params: dict[str, Any], opts: dict[str, Any], python: str, tmpdir: str | None,
            probe: dict[str, Any] | None) -> tuple[int, dict[str, str], dict[str, Any] | None]:
    """Check the engine's preconditions; (nranks, nccl-tests binaries per collective, the probe of
    ``python``: what torch there offers, None when not asked)."""
    nranks = params.get("nranks")
    binaries: dict[str, str] = {}
    if engine == "nccl-tests":
        for collective in opts["collectives"]:
            found = find_nccl_tests(params.get("nccl_tests_dir"), collective)
            if not found:
                where = params.get("nccl_tests_dir") or "PATH"
                raise BenchFailure(
                    f"engine nccl-tests: no {collective}_perf in {where}. Build nccl-tests "
                    "(`make` in a clone of NVIDIA/nccl-tests, binaries land in build/) and set nccl_tests_dir, or "
                    "choose engine torch-nccl with `python` pointing at the serving venv.")
            binaries[collective] = found
        if nranks is None:
            nranks = gpu_count_from_nvidia_smi()
            if not nranks:
                raise BenchFailure("engine nccl-tests: `nvidia-smi -L` lists no GPU, so the rank count is unknown. "
                                   "Check the driver (nvidia-smi), or set nranks.")
        return nranks, binaries, serving_torch(params, python, tmpdir)
    if engine == "torch-gloo":
        problem = python_problem(python)
        if problem:
            raise BenchFailure(f"{problem}. Set `python` to an interpreter that has torch.")
        return nranks or GLOO_DEFAULT_NRANKS, binaries, None
    probe = probe or probe_python(python, tmpdir)
    if not probe.get("torch"):
        raise BenchFailure(f"{python} has no usable torch ({probe.get('torch_error')}). {HARNESS_ERRORS['no_torch']}",
                           probe=probe)
    count = probe.get("device_count") or 0
    if count == 0:
        raise BenchFailure(
            f"no CUDA device visible to {python}: torch {probe.get('torch')} (CUDA build {probe.get('cuda_build')}) "
            f"sees none{'; ' + probe['cuda_error'] if probe.get('cuda_error') else ''}. {HARNESS_ERRORS['no_cuda']}",
            probe=probe)
    if not probe.get("nccl"):
        raise BenchFailure(f"torch {probe.get('torch')} in {python} has no NCCL. {HARNESS_ERRORS['no_nccl']}",
                           probe=probe)
    if nranks is None:
        nranks = count
    if nranks > count:
        raise BenchFailure(f"nranks {nranks} needs {nranks} GPUs; {python} sees {count}. Lower nranks.", probe=probe)
    return nranks, binaries, probe


def serving_torch(params: dict[str, Any], python: str, tmpdir: str | None) -> dict[str, Any] | None:
    """With nccl-tests, what the serving venv's torch offers when ``python`` names it: the NCCL it
    bundles is the one serving will use, whatever nccl-tests was linked with. None when not given
    or not readable (the benchmark does not depend on it)."""
    if not params.get("python"):
        return None
    try:
        probe = probe_python(python, tmpdir)
    except BenchFailure:
        return None
    return probe if probe.get("torch") else None


def limit_for(sweep: Sweep, opts: dict[str, Any]) -> float:
    """The limit that stopped a sweep: the start-up one when it never got to a size."""
    return opts["startup_timeout"] if (sweep.hung_at or {}).get("phase") == "start-up" else opts["timeout"]


def transports_of(sweep: Sweep, engine: str) -> dict[str, Any] | None:
    if engine == "torch-gloo" or "NCCL" not in sweep.debug_text:
        return None
    return parse_nccl_debug(sweep.debug_text).as_dict()


def run_failed_finding(engine: str, name: str, env: dict[str, str], sweep: Sweep) -> Finding:
    return make(
        "nccl_run_failed",
        f"The {engine} benchmark ({name}) failed before finishing its sweep: {sweep.error}",
        {"engine": engine, "env": env, "error": sweep.error, "ranks": sweep.stderr_tails[:8],
         "completed": {c: [r["size_bytes"] for r in rows] for c, rows in sweep.collectives.items()}})
