"""Run the GPU peer-to-peer probe, or read a saved output, and judge it.

The system is touched in three places only: the check of the torch interpreter, the probe run
(p2p_harness under ``python``) and the files (the log read with ``log``, the probe's output
kept with ``save_log``). Everything they return goes through p2p_judge, which is pure.

Options that cannot mean anything (a timeout that is not a positive finite number, negative
sizes) are refused before anything runs (arguments.py). Missing preconditions (no such
interpreter, no torch in it, no CUDA device, an unreadable log) raise ``ProbeFailure`` with what
was expected and what to do; no CUDA device with ``missing_gpu: skip``, and check mode without
``run_in_check_mode`` (the probe loads every GPU pair), raise ``ProbeSkipped``. What the host does
wrong once the probe runs (data not arriving, a hang, slow copies) is a result: it becomes
findings, not a failure.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import p2p_harness
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench import p2p_judge as logic
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.arguments import ArgumentError, probe_options
from ansible_collections.gpuhost.gpu.plugins.module_utils.bench.harness_runner import (
    KILL_GRACE_S,
    python_problem,
    read_log_text,
    run_script,
    write_json,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_bandwidth import P2PToolParseError, parse_p2p_log
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.manifest_format import ManifestError
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.manifest_format import load as load_manifest

DEFAULT_TIMEOUT_S = 300.0
CHECK_MODE_SKIP = ("check mode: the P2P probe was not run. It copies data between every GPU pair for minutes, also "
                   "on a host that already serves; set run_in_check_mode: true (gpu_bench_in_check_mode in the "
                   "gpu_bench role) to run it in check mode anyway, or give `log` to judge a saved output")
HINTS = {
    "no_torch": "Point `python` at the serving venv's interpreter (it has torch).",
    "no_cuda": "Check `nvidia-smi`, that this torch is a CUDA build matching the driver, and CUDA_VISIBLE_DEVICES.",
}


class ProbeFailure(Exception):
    """The probe cannot run here, or the log cannot be read; ``details`` go into fail_json."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


class ProbeSkipped(Exception):
    """No CUDA device and ``missing_gpu: skip``: the module returns skipped with this message."""


def read_log(path: str, text: str | None = None) -> dict[str, Any]:
    try:
        text = read_log_text(path) if text is None else text
    except OSError as exc:
        raise ProbeFailure(f"cannot read the P2P log {path}: {exc.strerror or exc}") from None
    if logic.is_harness_output(text):
        try:
            run = logic.parse_harness_output(text)
        except logic.ProbeInputError as exc:
            raise ProbeFailure(f"{path} holds the probe's JSON lines but not a whole run: {exc}") from None
        return harness_run_result(run, "probe-log")
    try:
        parsed = parse_p2p_log(text)
    except P2PToolParseError as exc:
        raise ProbeFailure(f"{path} is not readable as p2pBandwidthLatencyTest, simpleP2P or nvbandwidth output, "
                           f"nor as the probe's own output (save_log): {exc}") from None
    parsed.setdefault("access", None)
    parsed.setdefault("devices", [])
    return {"source": "log", "status": "ok", "hung_at": None, "proof": None, **parsed}


def harness_run_result(run: dict[str, Any], source: str) -> dict[str, Any]:
    summary = run["summary"]
    return {"source": source, "status": summary["status"], "hung_at": summary.get("hung_at"),
            "elapsed_s": summary.get("elapsed_s"), **logic.harness_result(run)}


# Keeps the probe's output at a path (path, text, warn): the module passes one that goes through files/writer.py,
# which bench/ sits below.
KeepLog = Callable[[str, str, Callable[[str], None]], None]


def probe(params: dict[str, Any], tmpdir: str | None, check_mode: bool,
          warn: Callable[[str], None], keep_log: KeepLog | None = None) -> dict[str, Any]:
    python = params.get("python") or sys.executable
    timeout = params.get("timeout", DEFAULT_TIMEOUT_S)
    problem = python_problem(python)
    if problem:
        raise ProbeFailure(f"{problem}. {HINTS['no_torch']}")
    config = {"timeout_s": timeout, "devices": params.get("devices") or [], "sizes": params.get("sizes") or [],
              "proof_bytes": params.get("proof_bytes", p2p_harness.DEFAULT_PROOF_BYTES)}
    config_path = write_json(config, tmpdir)
    result = run_script(p2p_harness, python, ["--json-config", config_path], timeout + KILL_GRACE_S, tmpdir=tmpdir)
    try:
        run = logic.parse_harness_output(result.stdout)
    except logic.ProbeInputError:
        if result.timed_out:
            why = (f"it did not stop at its own deadline and was killed after {timeout + KILL_GRACE_S:g} s, so the "
                   f"pair it hung at is unknown{'; ' + result.note if result.note else ''}")
        else:
            why = result.error or result.stderr.strip()[-1500:] or "no output"
        raise ProbeFailure(f"could not run the P2P probe with {python}: {why}",
                           rc=result.rc, stderr=result.stderr[-2000:]) from None
    summary = run["summary"]
    error = summary.get("error") or {}
    if error.get("kind") == "no_cuda" and params.get("missing_gpu", "fail") == "skip":
        raise ProbeSkipped(error["message"])
    if error.get("kind") in HINTS:
        raise ProbeFailure(f"{error['message']}. {HINTS[error['kind']]}", harness_error=error)
    if summary.get("status") == "error":
        raise ProbeFailure(f"the P2P probe failed: {error.get('message') or summary.get('stderr_tail', '')[-1500:]}",
                           harness_error=error)
    if params.get("save_log") and not check_mode and keep_log is not None:
        keep_log(params["save_log"], result.stdout, warn)
    return harness_run_result(run, "probe")


def run_probe(params: dict[str, Any], tmpdir: str | None = None, check_mode: bool = False,
              warn: Callable[[str], None] = lambda message: None, keep_log: KeepLog | None = None) -> dict[str, Any]:
    """The module's result (without ``changed``): read ``log`` when given, else probe (its output kept at
    ``save_log`` through ``keep_log``); then the findings."""
    try:
        probe_options(params)
        if params.get("manifest"):
            # Checked and normalized as the audit loads it: a manifest that does not follow the format fails here.
            params = {**params, "manifest": load_manifest(params["manifest"], "the manifest (option manifest)")}
    except (ArgumentError, ManifestError) as exc:
        raise ProbeFailure(str(exc)) from None
    if not params.get("log") and check_mode and not params.get("run_in_check_mode"):
        raise ProbeSkipped(CHECK_MODE_SKIP)
    if params.get("log"):
        result = read_log(params["log"], params.get("log_text"))
    else:
        result = probe(params, tmpdir, check_mode, warn, keep_log)
    max_small_latency_us = params.get("max_small_latency_us", logic.DEFAULT_MAX_SMALL_LATENCY_US)
    manifest = params.get("manifest") or {}
    result["findings"] = logic.findings(result, max_small_latency_us, result["status"], result.get("hung_at"),
                                        params.get("timeout", DEFAULT_TIMEOUT_S),
                                        (manifest.get("bandwidth") or {}).get("peer_min_gbps"), manifest.get("class"))
    return result
