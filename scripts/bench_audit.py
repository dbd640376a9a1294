#!/usr/bin/env python3
"""Benchmark of the audit, side by side in one run (`make bench-audit`).

1. One host: `ansible localhost -m gpu_host_facts` against `ansible localhost
   -m ansible.builtin.setup`, alternated, median of N runs each. Goal: the
   audit costs at most 1.5x what fact gathering costs.
2. A fleet: over one generated inventory of 200 hosts that replay the captures
   in tests/captures/, three playbooks alternated round by round (median of the
   rounds): `ansible.builtin.ping`, `ansible.builtin.setup` (gather_subset min)
   and playbooks/audit.yml, reports included. Goals: the audit playbook within
   1.0x of the setup playbook, and the audit's per-host tasks that run on the
   controller (argument validation, set_fact, assert, debug: timed per task by
   scripts/bench_callback/bench_timing.py) under 10 % of its run.

3. `--payload`: what AnsiballZ ships for gpu_host_facts (scripts/bench_payload.py: module_utils files,
   their bytes, the zip), for this checkout or, with `--root`, another one (a pristine checkout, say).

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
CALLBACKS = ROOT / "scripts" / "bench_callback"
# Actions that run on the controller only; one of them run per host is the cost the fleet goal bounds.
CONTROLLER_ACTIONS = {f"ansible.builtin.{name}" for name in (
    "set_fact", "assert", "debug", "fail", "validate_argument_spec", "meta", "include_vars", "include_tasks",
    "include_role", "set_stats", "group_by", "add_host")}
FLEET_GOALS = {"audit_over_setup": 1.0, "controller_share": 0.10}
# The two reference playbooks, over the same hosts as the audit.
REFERENCES = {
    "ping": [{"name": "Ping every host", "hosts": "all", "gather_facts": False,
              "tasks": [{"name": "Ping", "ansible.builtin.ping": None}]}],
    "setup": [{"name": "Gather the minimal facts of every host", "hosts": "all", "gather_facts": False,
               "tasks": [{"name": "Gather facts", "ansible.builtin.setup": {"gather_subset": ["min"]}}]}],
}


def host_reports(reports: Path) -> list[Path]:
    """The per-host JSON reports in a report directory: fleet.json (plugins/module_utils/files/fleet_table.py,
    FLEET_JSON) is the fleet table's, not a host's."""
    return [path for path in reports.glob("*.json") if path.name != "fleet.json"]


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


def write_inventory(tmp: Path, hosts: int) -> Path:
    if not CAPTURES:
        sys.exit("no captures under tests/captures: the fleet benchmark replays them")
    inventory = tmp / "hosts.json"
    names = [f"replay-{n:03d}" for n in range(hosts)]
    inventory.write_text(json.dumps({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
        "hosts": {name: {"gpu_audit_capture": str(capture)}
                  for name, capture in zip(names, itertools.cycle(CAPTURES), strict=False)},
    }}))
    return inventory


def task_breakdown(timing: list[dict]) -> dict[str, float]:
    """Seconds per kind of task: per-host controller-side, run once, and the rest (modules on the hosts)."""
    kinds = {"controller_per_host_s": 0.0, "run_once_s": 0.0, "modules_s": 0.0}
    for task in timing:
        if task["run_once"]:
            kinds["run_once_s"] += task["seconds"]
        elif task["action"] in CONTROLLER_ACTIONS:
            kinds["controller_per_host_s"] += task["seconds"]
        else:
            kinds["modules_s"] += task["seconds"]
    return kinds


def fleet(hosts: int, rounds: int, env: dict[str, str], audit_playbook: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp_name:
        tmp = Path(tmp_name)
        inventory = write_inventory(tmp, hosts)
        playbooks = {"audit": audit_playbook}
        for kind, plays in REFERENCES.items():
            playbooks[kind] = tmp / f"{kind}.yml"
            playbooks[kind].write_text(json.dumps(plays))  # JSON is YAML
        env = dict(env, ANSIBLE_CALLBACK_PLUGINS=str(CALLBACKS), ANSIBLE_CALLBACKS_ENABLED="bench_timing")
        walls: dict[str, list[float]] = {kind: [] for kind in playbooks}
        tasks: list[dict[str, float]] = []
        per_task: dict[str, list[float]] = {}
        run(["ansible-playbook", "-i", str(inventory), str(playbooks["ping"])], env)  # warm the caches
        order = ["ping", "setup", "audit"]
        for n in range(rounds):
            for kind in order[n % 3:] + order[:n % 3]:  # each kind takes each place in turn
                reports = tmp / f"reports-{n}"
                timing = tmp / f"timing-{kind}-{n}.json"
                argv = ["ansible-playbook", "-i", str(inventory), str(playbooks[kind]),
                        "-e", f"gpuhost_report_dir={reports}"]
                walls[kind].append(run(argv, dict(env, BENCH_AUDIT_TIMING=str(timing))))
                if kind != "audit":
                    continue
                written = len(host_reports(reports))
                if written != hosts:
                    sys.exit(f"the audit wrote {written} JSON reports for {hosts} hosts")
                recorded = json.loads(timing.read_text())
                tasks.append(task_breakdown(recorded))
                # A meta task of the linear strategy starts once per host: sum a task's starts in a run.
                summed: dict[str, float] = {}
                for task in recorded:
                    summed[task["name"]] = summed.get(task["name"], 0.0) + task["seconds"]
                for name, seconds in summed.items():
                    per_task.setdefault(name, []).append(seconds)
    wall = {kind: statistics.median(times) for kind, times in walls.items()}
    breakdown = {key: round(statistics.median(t[key] for t in tasks), 2) for key in tasks[0]}
    shares = [t["controller_per_host_s"] / w for t, w in zip(tasks, walls["audit"], strict=True)]
    return {
        "hosts": hosts, "rounds": rounds, "captures_cycled": len(CAPTURES),
        "median_s": {kind: round(seconds, 2) for kind, seconds in wall.items()},
        "runs_s": {kind: [round(t, 2) for t in times] for kind, times in walls.items()},
        "audit_over_setup": round(wall["audit"] / wall["setup"], 3),
        "audit_over_ping": round(wall["audit"] / wall["ping"], 3),
        "controller_share": round(statistics.median(shares), 3),
        "audit_tasks_median_s": breakdown,
        "audit_per_task_median_s": {name: round(statistics.median(s), 2) for name, s in per_task.items()},
        "goals": FLEET_GOALS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="runs of each single-host command (default 7)")
    parser.add_argument("--hosts", type=int, default=200, help="hosts in the replayed fleet (default 200)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternated rounds of ping, setup and audit over the fleet (default 3)")
    parser.add_argument("--audit-playbook", type=Path, default=ROOT / "playbooks" / "audit.yml",
                        help="the audit playbook to time (default playbooks/audit.yml)")
    parser.add_argument("--fleet-only", action="store_true", help="skip the single-host comparison")
    parser.add_argument("--payload", action="store_true",
                        help="only measure what AnsiballZ ships for gpu_host_facts (scripts/bench_payload.py)")
    parser.add_argument("--root", type=Path, default=ROOT, help="with --payload: the checkout to measure")
    args = parser.parse_args()
    if args.payload:
        # Its own process: the measurement points ansible's configuration at the checkout measured.
        sys.exit(subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_payload.py"), "--root",
                                 str(args.root)], check=False).returncode)
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    one = None if args.fleet_only else single_host(args.runs, env)
    many = fleet(args.hosts, args.rounds, env, args.audit_playbook.resolve())
    if one:
        print(f"single host: audit {one['audit_median_s']} s, setup {one['setup_median_s']} s, "
              f"ratio {one['ratio']} (goal <= 1.5), median of {one['runs']} alternated runs")
    med, tasks = many["median_s"], many["audit_tasks_median_s"]
    print(f"fleet: {many['hosts']} replayed hosts (cycling {many['captures_cycled']} captures) on {os.cpu_count()} "
          f"CPUs, median of {many['rounds']} alternated rounds: ping {med['ping']} s, setup {med['setup']} s, "
          f"audit {med['audit']} s")
    print(f"  audit/setup {many['audit_over_setup']} (goal <= {FLEET_GOALS['audit_over_setup']}), "
          f"audit/ping {many['audit_over_ping']}")
    print(f"  audit's tasks: modules on the hosts {tasks['modules_s']} s, run once {tasks['run_once_s']} s, "
          f"per-host on the controller {tasks['controller_per_host_s']} s = "
          f"{many['controller_share']:.1%} of the run (goal < {FLEET_GOALS['controller_share']:.0%})")
    for name, seconds in many["audit_per_task_median_s"].items():
        print(f"    {seconds:7.2f} s  {name}")
    out = ROOT / "reports" / "bench-audit.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"single_host": one, "fleet": many, "cpus": os.cpu_count()}, indent=2) + "\n")


if __name__ == "__main__":
    main()
