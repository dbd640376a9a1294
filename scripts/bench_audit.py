#!/usr/bin/env python3
"""Benchmark of the audit, side by side in one run (`make bench-audit`).

1. One host: `ansible localhost -m gpu_host_facts` against `ansible localhost
   -m ansible.builtin.setup`, alternated, median of N runs each. Goal: the
   audit costs at most 1.5x what fact gathering costs.
2. A fleet: playbooks/audit.yml over a generated inventory of 200 hosts that
   replay the captures in tests/captures/, reports included. Goal: <= 60 s on
   a 2-core machine.

Prints a table and writes the numbers to reports/bench-audit.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted((ROOT / "tests" / "captures").glob("*.json"))


def run(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"benchmark command failed ({proc.returncode}): {' '.join(argv)}\n{proc.stdout[-2000:]}"
                 f"\n{proc.stderr[-2000:]}")
    return elapsed


def single_host(runs: int, env: dict[str, str]) -> dict[str, float]:
    base = ["ansible", "localhost", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}", "-m"]
    audit = [*base, "gpu_host_facts"]
    setup = [*base, "ansible.builtin.setup"]
    run(audit, env)  # warm the page cache and Python's bytecode for both
    run(setup, env)
    times: dict[str, list[float]] = {"audit": [], "setup": []}
    for _ in range(runs):
        times["audit"].append(run(audit, env))
        times["setup"].append(run(setup, env))
    audit_s, setup_s = statistics.median(times["audit"]), statistics.median(times["setup"])
    return {"audit_median_s": round(audit_s, 3), "setup_median_s": round(setup_s, 3),
            "ratio": round(audit_s / setup_s, 3), "runs": runs}


def fleet(hosts: int, env: dict[str, str]) -> dict[str, float]:
    if not CAPTURES:
        sys.exit("no captures under tests/captures: the fleet benchmark replays them")
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
        inventory = Path(tmp) / "hosts.json"
        names = [f"replay-{n:03d}" for n in range(hosts)]
        inventory.write_text(json.dumps({"all": {
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                     "gpu_audit_report_dir": str(Path(tmp) / "reports")},
            "hosts": {name: {"gpu_audit_capture": str(capture)}
                      for name, capture in zip(names, itertools.cycle(CAPTURES), strict=False)},
        }}))
        elapsed = run(["ansible-playbook", "-i", str(inventory), "playbooks/audit.yml"], env)
        written = len(list((Path(tmp) / "reports").glob("*.json")))
    if written != hosts:
        sys.exit(f"the fleet run wrote {written} JSON reports for {hosts} hosts")
    return {"hosts": hosts, "wall_s": round(elapsed, 2), "captures_cycled": len(CAPTURES)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="runs of each single-host command (default 7)")
    parser.add_argument("--hosts", type=int, default=200, help="hosts in the replayed fleet (default 200)")
    args = parser.parse_args()
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    one = single_host(args.runs, env)
    many = fleet(args.hosts, env)
    print(f"single host: audit {one['audit_median_s']} s, setup {one['setup_median_s']} s, "
          f"ratio {one['ratio']} (goal <= 1.5), median of {one['runs']} alternated runs")
    print(f"fleet: {many['hosts']} replayed hosts in {many['wall_s']} s (goal <= 60 s), "
          f"cycling {many['captures_cycled']} captures, on {os.cpu_count()} CPUs")
    out = ROOT / "reports" / "bench-audit.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"single_host": one, "fleet": many, "cpus": os.cpu_count()}, indent=2) + "\n")


if __name__ == "__main__":
    main()
