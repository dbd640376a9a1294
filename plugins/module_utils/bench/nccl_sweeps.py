"""The NCCL benchmark's engines: one sweep through the harness, the nccl-tests binaries or a saved log.

The system is touched here only: the probe of the torch interpreter, the harness run
(collective_harness under ``python``), the nccl-tests binaries, and the log file. Each sweep comes
back as a ``Sweep`` that nccl_runner judges; a precondition that is not met (no torch, no binary, an
unreadable log) raises ``BenchFailure`` with what was expected and what to do. Every process runs
under a deadline that holds (harness_runner, gpuhost.process): a sweep that hangs comes back as a
timeout naming the size that hung.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import collective_harness
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import nccl_judge as logic
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.harness_runner import (
    KILL_GRACE_S,
    python_problem,
    read_log_text,
    run_process,
    run_script,
    write_json,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.harness_events import harness_events
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests import NcclTestsParseError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests_json import parse_nccl_tests_json
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_tests_text import parse_nccl_tests

# Importing torch and initialising CUDA on a cold host can take a minute.
PROBE_TIMEOUT_S = 120.0
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


class BenchSkipped(Exception):
    """Nothing was run, on purpose (check mode); the module returns skipped with this message."""


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
    log_devices: list[str] = field(default_factory=list)  # a log's GPU name per rank, as its rank lines print them


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
        limit = opts["startup_timeout"] + opts["timeout"] + KILL_GRACE_S
        why = (f"it did not stop at its own deadline and was killed after {limit:g} s, so the size it hung at is "
               f"unknown{'; ' + result.note if result.note else ''}" if result.timed_out else "it printed no summary")
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
        if result.error:
            raise BenchFailure(f"could not start {argv[0]}: {result.error}")
        if result.timed_out or left <= 0:
            sweep.status = "timeout"
            size = logic.hung_size(sizes, logic.completed_sizes(result.stdout))
            sweep.hung_at = {"collective": collective, "size_bytes": size}
            if result.note:
                sweep.notes.append(f"{os.path.basename(argv[0])} was killed at its deadline: {result.note}.")
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


def log_sweep(path: str, text: str | None = None) -> Sweep:
    """The sweep of an nccl-tests log: its file at ``path``, or ``text`` where the caller has it (material's log
    as the analysis read it, whatever the packaging: a piece of a paste, a mail, gzip), ``path`` then only naming it."""
    try:
        text = read_log_text(path) if text is None else text
    except OSError as exc:
        raise BenchFailure(f"cannot read the nccl-tests log {path}: {exc.strerror or exc}") from None
    is_json = text.lstrip().startswith("{")
    try:
        parsed = parse_nccl_tests_json(text) if is_json else parse_nccl_tests(text)
        run = parsed.as_dict()
    except NcclTestsParseError as exc:
        kind = "a JSON file written with -J" if is_json else "the text an nccl-tests binary printed"
        raise BenchFailure(f"{path} is not readable as nccl-tests output ({kind}): {exc}") from None
    # The collective the log shows, never a default: an unnamed one is judged by no collective's limits.
    collective = run.get("collective") or logic.UNKNOWN_COLLECTIVE
    sweep = Sweep(status="ok", collectives={collective: run["results"]},
                  out_of_bounds={collective: run.get("out_of_bounds")},
                  nccl_version=run.get("nccl_version"), nranks=run.get("nranks"),
                  debug_text="" if is_json else text,
                  versions={"avg_busbw_gbps": run.get("avg_busbw_gbps"),
                            **({"devices": list(parsed.device_names)} if parsed.device_names else {})},
                  log_devices=list(parsed.device_names))
    if run.get("collective") is None:
        candidates = run.get("collective_candidates") or []
        could = f" (its columns fit {' or '.join(candidates)})" if 1 < len(candidates) < 6 else ""
        sweep.notes.append(
            f"{path} does not say which collective it measured{could}: no all-reduce threshold was applied and no "
            "communication ceiling computed. Keep the command line (./build/all_reduce_perf ...) or the "
            "'# Collective test starting' line in the log.")
    return sweep


def gpu_count_from_nvidia_smi() -> int | None:
    result = run_process(["nvidia-smi", "-L"], 30.0)
    if result.rc != 0:
        return None
    return sum(1 for line in result.stdout.splitlines() if line.startswith("GPU "))
