"""Run the NCCL benchmark: pick the engine, run one sweep per candidate, judge the numbers.

The system is touched in three places only: the probe of the torch interpreter, the harness
run (collective_harness under ``python``) and the nccl-tests binaries; log mode touches
nothing but the file. Everything they return goes through nccl_bench_logic, which is pure.

Missing preconditions (no torch in that interpreter, no CUDA device for NCCL, no nccl-tests
binary, bad options) raise ``BenchFailure`` with what was expected and what to do. What the
host does wrong once the benchmark runs (wrong values, a hang, an NCCL error) is a result:
it becomes findings, not a failure.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible.module_utils.gpuhost.bench import collective_harness
from ansible.module_utils.gpuhost.bench import nccl_judge as logic
from ansible.module_utils.gpuhost.bench.harness_runner import (
    KILL_GRACE_S,
    python_problem,
    run_process,
    run_script,
    write_json,
)
from ansible.module_utils.gpuhost.bench.nccl_findings import findings_for_run, sort_findings, tuning_findings
from ansible.module_utils.gpuhost.bench.nccl_thresholds import (
    default_thresholds,
    evaluate_thresholds,
    normalize_thresholds,
)
from ansible.module_utils.gpuhost.bench.nccl_tuning import choose_best, normalize_candidates, summarize_candidate
from ansible.module_utils.gpuhost.parsers.harness_events import harness_events
from ansible.module_utils.gpuhost.parsers.nccl_debug import parse_nccl_debug
from ansible.module_utils.gpuhost.parsers.nccl_tests import NcclTestsParseError
from ansible.module_utils.gpuhost.parsers.nccl_tests_json import parse_nccl_tests_json
from ansible.module_utils.gpuhost.parsers.nccl_tests_text import parse_nccl_tests
from ansible.module_utils.gpuhost.rules.catalog import make
from ansible.module_utils.gpuhost.rules.finding import Finding

# Importing torch and initialising CUDA on a cold host can take a minute.
PROBE_TIMEOUT_S = 120.0
GLOO_DEFAULT_NRANKS = 2
DEFAULT_TIMEOUT_S = 300.0
# Importing torch on a cold disk and NCCL's initialisation of 8 GPUs: tens of seconds at worst.
DEFAULT_STARTUP_TIMEOUT_S = 120.0
HARNESS_ERRORS = {
    "no_torch": "Point `python` at the interpreter of the venv that serves the model (it has torch), for example "
                "/opt/sglang/.venv/bin/python.",
    "no_distributed": "Install a torch build with torch.distributed (every official build has it).",
    "no_cuda": "Check `nvidia-smi` on the host, that this torch is a CUDA build (torch.version.cuda is not None) "
               "matching the driver, and CUDA_VISIBLE_DEVICES; or ask for fewer ranks with `nranks`.",
    "no_nccl": "Install a CUDA build of torch (it bundles NCCL), or use engine nccl-tests.",
    "config": "This is a bug in the module's options handling; report it with the options used.",
}


class BenchFailure(Exception):
    """The benchmark cannot run here; ``details`` go into fail_json."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


@dataclass
class Sweep:
    """One sweep (one candidate environment), whatever engine ran it."""

    status: str  # ok, timeout, error
    collectives: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    out_of_bounds: dict[str, Any] = field(default_factory=dict)
    nccl_version: str | None = None
    nranks: int | None = None
    hung_at: dict[str, Any] | None = None
    alive: list[int] = field(default_factory=list)
    error: str | None = None
    debug_text: str = ""
    elapsed_s: float | None = None
    startup_s: float | None = None  # torch engines: until every rank had joined
    versions: dict[str, Any] = field(default_factory=dict)
    stderr_tails: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the reader of the result should know


# ---------------------------------------------------------------------------
# Engines


def probe_python(python: str, tmpdir: str | None) -> dict[str, Any]:
    problem = python_problem(python)
    if problem:
        raise BenchFailure(f"{problem}. Set `python` to the interpreter that has torch (the serving venv's "
                           "python), or use engine nccl-tests.")
    result = run_script(collective_harness, python, ["--probe"], PROBE_TIMEOUT_S, tmpdir=tmpdir)
    for event in harness_events(result.stdout):
        if event.get("event") == "probe":
            return event
    reason = "it did not answer in time" if result.timed_out else (result.error or result.stderr.strip()[-1500:])
    raise BenchFailure(f"could not run the benchmark harness with {python}: {reason or 'no output'}. It needs "
                       "Python 3.8 or later; set `python` to the serving venv's interpreter.",
                       rc=result.rc, stdout=result.stdout[-2000:], stderr=result.stderr[-2000:])


def find_nccl_tests(directory: str | None, collective: str) -> str | None:
    name = f"{collective}_perf"
    if directory:
        for candidate in (os.path.join(directory, name), os.path.join(directory, "build", name)):
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
        return None
    return shutil.which(name)


def harness_sweep(python: str, backend: str, nranks: int, opts: dict[str, Any], env: dict[str, str],
                  tmpdir: str | None) -> Sweep:
    config = {
        "backend": backend,
        "nranks": nranks,
        "collectives": opts["collectives"],
        "min_bytes": opts["min_bytes"],
        "max_bytes": opts["max_bytes"],
        "step_factor": opts["step_factor"],
        "iters": opts["iters"],
        "warmup": opts["warmup"],
        "check": opts["check"],
        "timeout_s": opts["timeout"],
        "startup_timeout_s": opts["startup_timeout"],
        "env": env,
    }
    config_path = write_json(config, tmpdir)
    try:
        result = run_script(collective_harness, python, ["--json-config", config_path],
                            opts["startup_timeout"] + opts["timeout"] + KILL_GRACE_S, tmpdir=tmpdir)
    finally:
        os.unlink(config_path)
    try:
        run = logic.parse_harness_output(result.stdout)
    except logic.BenchInputError:
        if result.error:
            raise BenchFailure(f"could not start the benchmark harness: {result.error}") from None
        why = "it was killed after not stopping at its deadline" if result.timed_out else "it printed no summary"
        raise BenchFailure(f"the benchmark harness run with {python} failed: {why}. Its stderr ends with: "
                           f"{result.stderr.strip()[-1500:] or '(nothing)'}",
                           rc=result.rc, stdout=result.stdout[-2000:], stderr=result.stderr[-2000:]) from None
    error = run.summary.get("error") or {}
    if error.get("kind") in HARNESS_ERRORS:
        raise BenchFailure(f"{error.get('message')}. {HARNESS_ERRORS[error['kind']]}", harness_error=error)
    summary = run.summary
    return Sweep(
        status=run.status,
        collectives=run.collectives,
        nccl_version=run.nccl_version,
        nranks=nranks,
        hung_at=summary.get("hung_at"),
        alive=list(summary.get("alive_at_deadline") or []),
        error=run.error_message,
        debug_text=summary.get("nccl_debug") or "",
        elapsed_s=summary.get("elapsed_s"),
        startup_s=summary.get("startup_s"),
        versions={k: run.start.get(k) for k in ("torch_version", "cuda_version", "python", "devices")
                  if run.start.get(k)},
        stderr_tails=[{"rank": r.get("rank"), "returncode": r.get("returncode"),
                       "stderr_tail": (r.get("stderr_tail") or "")[-800:]}
                      for r in summary.get("ranks") or [] if r.get("returncode") not in (0, None)],
    )


def nccl_tests_sweep(binaries: dict[str, str], nranks: int, opts: dict[str, Any], env: dict[str, str]) -> Sweep:
    sweep = Sweep(status="ok", nranks=nranks)
    started = time.monotonic()
    deadline = started + opts["timeout"]
    run_env = dict(os.environ)
    run_env.update(env)
    texts = []
    sizes = collective_harness.message_sizes(opts["min_bytes"], opts["max_bytes"], opts["step_factor"])
    for collective in opts["collectives"]:
        left = deadline - time.monotonic()
        argv = logic.nccl_tests_argv(binaries[collective], opts["min_bytes"], opts["max_bytes"], opts["step_factor"],
                                     nranks, opts["iters"], opts["warmup"], opts["check"])
        result = run_process(argv, max(left, 1.0), env=run_env)
        text = result.stdout + "\n" + result.stderr
        texts.append(text)
        if result.rc is None:
            raise BenchFailure(f"could not start {argv[0]}: {result.error}")
        if result.timed_out or left <= 0:
            sweep.status = "timeout"
            size = logic.hung_size(sizes, logic.completed_sizes(result.stdout))
            sweep.hung_at = {"collective": collective, "size_bytes": size}
            break
        try:
            parsed = parse_nccl_tests(result.stdout).as_dict()
        except NcclTestsParseError as exc:
            sweep.status = "error"
            sweep.error = f"{os.path.basename(argv[0])} exited with {result.rc}: {exc}"
            sweep.stderr_tails = [{"command": " ".join(argv), "returncode": result.rc,
                                   "stderr_tail": result.stderr[-800:]}]
            break
        sweep.collectives[collective] = parsed["results"]
        sweep.out_of_bounds[collective] = parsed.get("out_of_bounds")
        sweep.nccl_version = sweep.nccl_version or parsed.get("nccl_version")
        sweep.nranks = parsed.get("nranks") or nranks
    sweep.debug_text = "\n".join(texts)
    sweep.elapsed_s = round(time.monotonic() - started, 3)
    return sweep


def log_sweep(path: str) -> Sweep:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError as exc:
        raise BenchFailure(f"cannot read the nccl-tests log {path}: {exc.strerror or exc}") from None
    is_json = text.lstrip().startswith("{")
    try:
        run = (parse_nccl_tests_json(text) if is_json else parse_nccl_tests(text)).as_dict()
    except NcclTestsParseError as exc:
        kind = "a JSON file written with -J" if is_json else "the text an nccl-tests binary printed"
        raise BenchFailure(f"{path} is not readable as nccl-tests output ({kind}): {exc}") from None
    # The collective the log shows, never a default: an unnamed one is judged by no collective's limits.
    collective = run.get("collective") or logic.UNKNOWN_COLLECTIVE
    sweep = Sweep(status="ok", collectives={collective: run["results"]},
                  out_of_bounds={collective: run.get("out_of_bounds")},
                  nccl_version=run.get("nccl_version"), nranks=run.get("nranks"),
                  debug_text="" if is_json else text,
                  versions={"avg_busbw_gbps": run.get("avg_busbw_gbps")})
    if run.get("collective") is None:
        candidates = run.get("collective_candidates") or []
        could = f" (its columns fit {' or '.join(candidates)})" if 1 < len(candidates) < 6 else ""
        sweep.notes.append(
            f"{path} does not say which collective it measured{could}: no all-reduce threshold was applied and no "
            "communication floor computed. Keep the command line (./build/all_reduce_perf ...) or the "
            "'# Collective test starting' line in the log.")
    return sweep


def gpu_count_from_nvidia_smi() -> int | None:
    result = run_process(["nvidia-smi", "-L"], 30.0)
    if result.rc != 0:
        return None
    return sum(1 for line in result.stdout.splitlines() if line.startswith("GPU "))


# ---------------------------------------------------------------------------
# The whole run


def resolve_options(params: dict[str, Any]) -> dict[str, Any]:
    collectives = list(dict.fromkeys(params.get("collectives") or ["all_reduce"]))
    unknown = [c for c in collectives if c not in logic.COLLECTIVES]
    if unknown:
        raise BenchFailure(f"unknown collective(s) {', '.join(unknown)}; "
                           f"expected any of {', '.join(logic.COLLECTIVES)}")
    env = {str(k): str(v) for k, v in (params.get("env") or {}).items()}
    opts = {
        "collectives": collectives,
        "min_bytes": params.get("min_bytes") or logic.DEFAULT_MIN_BYTES,
        "max_bytes": params.get("max_bytes"),
        "step_factor": params.get("step_factor") or 2,
        "iters": params.get("iters") or 20,
        "warmup": params.get("warmup") if params.get("warmup") is not None else 5,
        "check": params.get("check", True) is not False,
        "timeout": float(params.get("timeout") or DEFAULT_TIMEOUT_S),
        "startup_timeout": float(params.get("startup_timeout") or DEFAULT_STARTUP_TIMEOUT_S),
        "env": env,
    }
    if opts["iters"] < 1 or opts["warmup"] < 0 or opts["timeout"] <= 0 or opts["startup_timeout"] <= 0:
        raise BenchFailure("iters must be at least 1, warmup at least 0, timeout and startup_timeout positive")
    return opts


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
              warn: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    import sys

    opts = resolve_options(params)
    python = params.get("python") or sys.executable
    base_env = opts["env"]

    if params.get("log"):
        if params.get("tune"):
            warn("tune is ignored with log: a log holds one environment's run")
        engine = "nccl-tests"
        sweep = log_sweep(params["log"])
        nranks = sweep.nranks or params.get("nranks")
        sweeps = [("as-is", base_env, sweep)]
        source = "log"
        probe = None
    else:
        source = "run"
        engine, probe = choose_engine(params, python, tmpdir)
        nranks, binaries = prepare(engine, params, opts, python, tmpdir, probe)
        if opts["max_bytes"] is None:
            opts["max_bytes"] = logic.GLOO_MAX_BYTES if engine == "torch-gloo" else logic.DEFAULT_MAX_BYTES
        if opts["max_bytes"] < opts["min_bytes"]:
            raise BenchFailure(f"max_bytes ({opts['max_bytes']}) is below min_bytes ({opts['min_bytes']})")
        candidates = normalize_candidates(params.get("candidates")) if params.get("tune") else \
            [{"name": "as-is", "env": {}}]
        sweeps = []
        for candidate in candidates:
            env = {**base_env, **candidate["env"]}
            run_env = dict(env)
            if engine != "torch-gloo":
                # The transport per channel is only printed at INFO; the user's own setting wins.
                run_env.setdefault("NCCL_DEBUG", "INFO")
            if engine == "nccl-tests":
                sweep = nccl_tests_sweep(binaries, nranks, opts, run_env)
            else:
                backend = "gloo" if engine == "torch-gloo" else "nccl"
                sweep = harness_sweep(python, backend, nranks, opts, run_env, tmpdir)
            sweeps.append((candidate["name"], env, sweep))

    thresholds = (normalize_thresholds(params["thresholds"]) if params.get("thresholds") is not None
                  else default_thresholds(nranks or 0, engine))
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
        healthy = primary.status == "ok" and not any(f.severity == "critical" for f in findings)
        recommended_env = env if healthy and source == "run" else None

    per_collective = {c: logic.collective_entry(rows, primary.out_of_bounds.get(c))
                      for c, rows in primary.collectives.items()}
    result: dict[str, Any] = {
        "engine": engine,
        "source": source,
        "status": primary.status,
        "nranks": nranks,
        "nccl_version": primary.nccl_version or (transports or {}).get("nccl_version"),
        "collective": None if primary_collective == logic.UNKNOWN_COLLECTIVE else primary_collective,
        "results": primary.collectives.get(primary_collective, []),
        "per_collective": per_collective,
        "env": env,
        "transports": transports,
        "thresholds": thresholds,
        "violations": violations,
        "unjudged_thresholds": unjudged,
        "tuning": tuning,
        "recommended_env": recommended_env,
        "hung_at": primary.hung_at,
        "elapsed_s": round(sum(s.elapsed_s or 0 for _, _, s in sweeps), 3),
        "startup_s": primary.startup_s,
        "versions": primary.versions,
        "findings": sort_findings(findings),
    }
    if probe:
        result["versions"] = {**result["versions"], "torch_version": probe.get("torch")}
    if primary.error:
        result["error"] = primary.error
    if primary.notes:
        result["notes"] = list(primary.notes)
    return result


def prepare(engine: str, params: dict[str, Any], opts: dict[str, Any], python: str, tmpdir: str | None,
            probe: dict[str, Any] | None) -> tuple[int, dict[str, str]]:
    """Check the engine's preconditions; (nranks, nccl-tests binaries per collective)."""
    nranks = params.get("nranks")
    if nranks is not None and nranks < 1:
        raise BenchFailure("nranks must be at least 1")
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
        return nranks, binaries
    if engine == "torch-gloo":
        problem = python_problem(python)
        if problem:
            raise BenchFailure(f"{problem}. Set `python` to an interpreter that has torch.")
        return nranks or GLOO_DEFAULT_NRANKS, binaries
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
    return nranks, binaries


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
