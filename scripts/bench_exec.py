#!/usr/bin/env python3
"""Benchmark of one `podman exec` into a test container, side by side in one run: the real podman against
molecule/shared/bin/podman (runc's exec, which the molecule scenarios use for every task and testinfra command).

Starts a container of the test image (`make image`), then alternates rounds of N execs of `true` through each,
and reports the CPU the whole machine spent per exec (from /proc/stat: podman, conmon and runc are not all
children of the caller) and the wall time, median of the rounds. Run it on an otherwise idle machine, as root
(the shim takes runc's path only for root's podman with runc).

Usage: scripts/bench_exec.py [--execs 20] [--rounds 5] [--image localhost/gpuhost-debian:bookworm]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIM_DIR = ROOT / "molecule" / "shared" / "bin"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def busy_seconds() -> float:
    """CPU seconds the machine has spent outside idle and iowait since boot."""
    fields = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLOCK_TICKS


def timed(podman: list[str], container: str, execs: int, env: dict[str, str]) -> tuple[float, float]:
    """CPU seconds and wall seconds per exec of `true` in the container."""
    cpu, wall = busy_seconds(), time.monotonic()
    for _ in range(execs):
        subprocess.run([*podman, "exec", container, "true"], env=env, check=True)
    return (busy_seconds() - cpu) / execs, (time.monotonic() - wall) / execs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--execs", type=int, default=20, help="execs per round and way (default 20)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each way once a round (default 5)")
    parser.add_argument("--image", default="localhost/gpuhost-debian:bookworm", help="the test image")
    args = parser.parse_args()
    real = shutil.which("podman")
    if not real:
        print("bench_exec: podman is not installed (make system-deps)", file=sys.stderr)
        return 1
    env = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF",
                                                           str(ROOT / "molecule" / "containers.conf"))}
    shim_env = {**env, "PATH": f"{SHIM_DIR}{os.pathsep}{env.get('PATH', '')}"}
    container = f"gpuhost-bench-exec-{os.getpid()}"
    started = subprocess.run([real, "run", "-d", "--rm", "--name", container, args.image, "sleep", "infinity"],
                             env=env, capture_output=True, text=True)
    if started.returncode != 0:
        print(f"bench_exec: cannot start a container of {args.image} (make image builds it): "
              f"{started.stderr.strip()}", file=sys.stderr)
        return 1
    ways = {"podman exec": ([real], env), "molecule/shared/bin/podman": ([str(SHIM_DIR / "podman")], shim_env)}
    results: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
    try:
        for _ in range(args.rounds):
            for way, (podman, way_env) in ways.items():
                results[way].append(timed(podman, container, args.execs, way_env))
    finally:
        subprocess.run([real, "rm", "-f", "-t", "0", container], env=env, capture_output=True)
    print(f"{args.rounds} rounds of {args.execs} execs of `true` each way, alternated; median per exec:")
    medians = {}
    for way, rounds in results.items():
        cpu, wall = statistics.median(r[0] for r in rounds), statistics.median(r[1] for r in rounds)
        medians[way] = cpu
        print(f"  {way:28} {cpu * 1000:7.1f} ms CPU  {wall * 1000:7.1f} ms wall")
    print(f"CPU ratio (shim / podman exec): {medians['molecule/shared/bin/podman'] / medians['podman exec']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
