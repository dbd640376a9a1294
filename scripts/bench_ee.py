#!/usr/bin/env python3
"""Time the capture fleet's audit inside the execution environment beside the same run outside it.

Rounds alternate the two ways, so that both see the same machine load: `ansible-playbook playbooks/audit.yml`
from the venv, and `ansible-navigator run` of the same playbook in the EE (a container started per run, as AWX
starts one per job). Each run writes its reports into a fresh temporary directory (mounted into the EE). Prints
each way's median and the ratio, and the image's size.

Usage: .venv/bin/python scripts/bench_ee.py [--rounds N]   (make ee first builds the image when needed)
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INVENTORY = ROOT / "tests" / "fleet" / "hosts.yml"
PLAYBOOK = ROOT / "playbooks" / "audit.yml"
BIN = Path(sys.executable).parent


def env() -> dict[str, str]:
    return {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "PATH": f"{BIN}:{os.environ['PATH']}",
            "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(ROOT / "molecule" / "containers.conf"))}


def timed(command: list[str]) -> float:
    began = time.perf_counter()
    run = subprocess.run(command, cwd=ROOT, env=env(), capture_output=True, text=True, check=False)
    took = time.perf_counter() - began
    if run.returncode != 0:
        sys.exit(f"bench_ee: {' '.join(command[:3])} ... failed (exit {run.returncode}):\n{run.stdout[-2000:]}"
                 f"\n{run.stderr[-2000:]}")
    return took


def outside(reports: str) -> list[str]:
    return [str(BIN / "ansible-playbook"), str(PLAYBOOK), "-i", str(INVENTORY), "-e", f"gpuhost_report_dir={reports}"]


def inside(image: str, reports: str, work: str) -> list[str]:
    return [str(BIN / "ansible-navigator"), "run", str(PLAYBOOK), "-i", str(INVENTORY),
            "--execution-environment-image", image, "--mode", "stdout", "--container-engine", "podman",
            "--pull-policy", "never", "--playbook-artifact-enable", "false", "--log-file", f"{work}/navigator.log",
            "--ansible-runner-artifact-dir", f"{work}/runner",
            "--execution-environment-volume-mounts", f"{reports}:{reports}", "-e", f"gpuhost_report_dir={reports}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    build = subprocess.run([str(ROOT / "scripts" / "ee-build.sh")], cwd=ROOT, env=env(), capture_output=True,
                           text=True, check=False)
    if build.returncode != 0:
        sys.exit(f"bench_ee: scripts/ee-build.sh failed:\n{build.stderr[-3000:]}")
    image = build.stdout.strip().splitlines()[-1]
    times: dict[str, list[float]] = {"venv": [], "EE": []}
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as work:
            os.makedirs(f"{work}/a")
            os.makedirs(f"{work}/b")
            times["venv"].append(timed(outside(f"{work}/a")))
            times["EE"].append(timed(inside(image, f"{work}/b", work)))
    size = subprocess.run(["podman", "image", "inspect", "--format", "{{.Size}}", image], env=env(),
                          capture_output=True, text=True, check=False).stdout.strip()
    venv, ee = statistics.median(times["venv"]), statistics.median(times["EE"])
    print(f"image {image}: {int(size) / 2**20:.0f} MiB" if size.isdigit() else f"image {image}")
    print(f"capture fleet audit, {args.rounds} rounds alternating, median wall time:")
    print(f"  ansible-playbook from the venv: {venv:.1f} s   (all: {', '.join(f'{t:.1f}' for t in times['venv'])})")
    print(f"  ansible-navigator in the EE:    {ee:.1f} s   (all: {', '.join(f'{t:.1f}' for t in times['EE'])})")
    print(f"  EE / venv: {ee / venv:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
