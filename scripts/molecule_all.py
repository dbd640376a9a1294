#!/usr/bin/env python3
"""Run molecule scenarios, several at a time, and say which passed.

`make molecule` calls this. Each scenario boots its own containers (their names differ) and keeps its state in
molecule's per-scenario directory, so scenarios are independent; running several at once divides the wall time of
the suite on a two-core machine, since a scenario spends much of its time waiting on podman, apt, pip and systemd.

A scenario's output goes to a log file and is printed whole when it ends, so that the output of scenarios that ran
side by side never interleaves. The longest scenarios start first (DURATIONS, measured), so that no long one starts
last and runs alone.

Usage: molecule_all.py [--jobs N] [--log-dir DIR] SCENARIO...
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

# Seconds each scenario took in `make test` (three at a time, beside the other suites, on a two-core machine); only
# the order matters. A scenario not listed counts as long, so that a new one is not left for last.
DURATIONS = {
    "sglang_serve": 581,
    "cuda_extension": 512,  # with what was molecule/cuda_pip
    "serving_venv": 434,
    "cuda_apt": 361,
    "nvidia_driver": 233,
    "proxmox_fix": 179,
    "gpu_metrics": 149,
    "proxmox_gpu_host": 125,
    "audit": 72,
}
UNKNOWN_DURATION = 300


def start_order(scenarios: list[str]) -> list[str]:
    """Longest first; ties in name order, so that runs are repeatable."""
    return sorted(dict.fromkeys(scenarios), key=lambda s: (-DURATIONS.get(s, UNKNOWN_DURATION), s))


def start(scenario: str, log_dir: str) -> tuple[subprocess.Popen, str, float]:
    path = os.path.join(log_dir, f"{scenario}.log")
    with open(path, "wb") as log:
        proc = subprocess.Popen(["molecule", "test", "-s", scenario], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    return proc, path, time.monotonic()


def show(scenario: str, path: str, rc: int, seconds: float) -> None:
    sys.stdout.write(f"=== molecule test -s {scenario}\n")
    sys.stdout.flush()
    with open(path, "rb") as log:
        sys.stdout.buffer.write(log.read())
    verdict = "passed" if rc == 0 else f"FAILED (exit {rc})"
    sys.stdout.write(f"=== {scenario} {verdict} in {seconds:.0f} s (log: {path})\n")
    sys.stdout.flush()


def run_all(scenarios: list[str], jobs: int, log_dir: str) -> list[str]:
    """Runs every scenario, at most `jobs` at once; returns those that failed."""
    os.makedirs(log_dir, exist_ok=True)
    waiting, running, failed = start_order(scenarios), {}, []
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                scenario = waiting.pop(0)
                running[scenario] = start(scenario, log_dir)
                print(f"--- started {scenario}", flush=True)
            time.sleep(1)
            for scenario, (proc, path, began) in list(running.items()):
                rc = proc.poll()
                if rc is None:
                    continue
                del running[scenario]
                show(scenario, path, rc, time.monotonic() - began)
                if rc != 0:
                    failed.append(scenario)
    finally:
        # Interrupted: stop the scenarios still running (molecule's own destroy runs at its next start).
        for proc, _path, _began in running.values():
            proc.terminate()
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="scenarios run at once (default 2)")
    parser.add_argument("--log-dir", default=".cache/molecule-logs", help="where each scenario's log goes")
    parser.add_argument("scenarios", nargs="*")
    args = parser.parse_args(argv)
    if not args.scenarios:
        print("molecule: no scenario under molecule/", file=sys.stderr)
        return 1
    if args.jobs < 1:
        print(f"molecule: --jobs must be 1 or more, not {args.jobs}", file=sys.stderr)
        return 2
    began = time.monotonic()
    failed = run_all(args.scenarios, args.jobs, args.log_dir)
    took = time.monotonic() - began
    if failed:
        print(f"molecule: failed: {' '.join(failed)} ({took:.0f} s, {args.jobs} at a time)", file=sys.stderr)
        return 1
    print(f"molecule: all {len(set(args.scenarios))} scenarios passed ({took:.0f} s, {args.jobs} at a time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
