#!/usr/bin/env python3
"""Benchmark of the offline analysis (`make bench-analyze`), side by side in one run.

200 inputs (the captures of tests/captures copied under distinct names, and every tenth input
material: a directory of the incident's pasted outputs with its nccl-tests log, or a bug report of
tests/fixtures/bug-reports) go through playbooks/analyze.yml in one run, alternated round by round with
playbooks/audit.yml over an inventory of 200 hosts replaying the same captures (scripts/bench_audit.py's
fleet). Goal: the analysis within 10 s on 2 cores. Prints both medians and their ratio, with the CPU time
each run used (its processes' user + system time, which other load on the machine does not inflate as it
does the wall time), and writes the numbers to reports/bench-analyze.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import statistics
import tempfile
from pathlib import Path

from bench_audit import CAPTURES, ROOT, host_reports, run, write_inventory

FIXTURES = ROOT / "tests" / "fixtures"
GOAL_S = 10.0
# Every tenth input is material rather than a capture.
MATERIAL_EVERY = 10


def incident_pastes(directory: Path) -> Path:
    """The incident's pastes: topo -p2p r with its command line, a topo -m, the nccl-tests log."""
    directory.mkdir()
    matrix = (FIXTURES / "nvidia-smi" / "topo-p2p-r_8gpu-vm-NS.txt").read_text(encoding="utf-8")
    (directory / "p2p.txt").write_text("$ nvidia-smi topo -p2p r\n" + matrix, encoding="utf-8")
    shutil.copy(FIXTURES / "nvidia-smi" / "topo-m_2018_8gpu-PIX-PXB-mlx5.txt", directory / "topo-m.txt")
    shutil.copy(FIXTURES / "nccl" / ("transfer-test-in-all_reduce_perf-layout_incident-reconstructed_"
                                     "8xRTXPRO6000-vm-no-p2p.txt"), directory / "all_reduce.log")
    return directory


def write_inputs(tmp: Path, count: int) -> list[str]:
    """``count`` inputs under tmp/inputs, their paths relative to tmp (the playbook runs from there)."""
    inputs = tmp / "inputs"
    inputs.mkdir()
    reports = sorted((FIXTURES / "bug-reports").glob("nvidia-bug-report_*.log"))
    captures = itertools.cycle(CAPTURES)
    paths = []
    for n in range(count):
        if n % MATERIAL_EVERY == MATERIAL_EVERY - 1:
            kind = (n // MATERIAL_EVERY) % (len(reports) + 1)
            if kind == len(reports):
                target = incident_pastes(inputs / f"incident-{n:03d}")
            else:
                target = inputs / f"bug-report-{n:03d}.log"
                shutil.copy(reports[kind], target)
        else:
            capture = next(captures)
            target = inputs / f"{capture.stem}-{n:03d}.json"
            shutil.copy(capture, target)
        paths.append(str(target.relative_to(tmp)))
    return paths


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of a command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = run(argv, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=200, help="inputs analysed, hosts audited (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds of analyse and audit (default 3)")
    args = parser.parse_args()
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    walls: dict[str, list[float]] = {"analyze": [], "audit": []}
    cpus: dict[str, list[float]] = {"analyze": [], "audit": []}
    with tempfile.TemporaryDirectory(prefix="bench-analyze-") as tmp_name:
        tmp = Path(tmp_name)
        paths = write_inputs(tmp, args.inputs)
        inventory = write_inventory(tmp, args.inputs)
        # The playbook resolves relative inputs against PWD, as from a shell in tmp.
        analyze_env = dict(env, PWD=str(tmp))
        order = ["analyze", "audit"]
        for n in range(args.rounds):
            for kind in order[n % 2:] + order[:n % 2]:
                reports = tmp / f"reports-{kind}-{n}"
                if kind == "analyze":
                    argv = ["ansible-playbook", str(ROOT / "playbooks" / "analyze.yml"),
                            "-e", json.dumps({"gpu_analyze_inputs": paths, "gpuhost_report_dir": str(reports)})]
                    wall, cpu = timed(argv, analyze_env)
                else:
                    argv = ["ansible-playbook", "-i", str(inventory), str(ROOT / "playbooks" / "audit.yml"),
                            "-e", f"gpuhost_report_dir={reports}"]
                    wall, cpu = timed(argv, env)
                walls[kind].append(wall)
                cpus[kind].append(cpu)
                written = len(host_reports(reports))
                if written != args.inputs:
                    raise SystemExit(f"{kind} wrote {written} JSON reports for {args.inputs} inputs")
    median = {kind: statistics.median(times) for kind, times in walls.items()}
    cpu = {kind: statistics.median(times) for kind, times in cpus.items()}
    ratio = median["analyze"] / median["audit"]
    print(f"{args.inputs} inputs on {os.cpu_count()} CPUs, median of {args.rounds} alternated rounds, load average "
          f"{os.getloadavg()[0]:.1f} at the end:")
    print(f"  analyze.yml, {args.inputs} inputs:      {median['analyze']:7.2f} s wall, {cpu['analyze']:7.2f} s CPU "
          f"(goal <= {GOAL_S:g} s wall)")
    print(f"  audit.yml, {args.inputs} capture hosts: {median['audit']:7.2f} s wall, {cpu['audit']:7.2f} s CPU")
    print(f"  ratio analyze/audit: {ratio:.3f} wall, {cpu['analyze'] / cpu['audit']:.3f} CPU")
    out = ROOT / "reports" / "bench-analyze.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"inputs": args.inputs, "rounds": args.rounds, "cpus": os.cpu_count(),
                               "median_s": {k: round(v, 2) for k, v in median.items()},
                               "runs_s": {k: [round(t, 2) for t in v] for k, v in walls.items()},
                               "cpu_median_s": {k: round(v, 2) for k, v in cpu.items()},
                               "analyze_over_audit": round(ratio, 3), "goal_analyze_s": GOAL_S}, indent=2) + "\n")


if __name__ == "__main__":
    main()
