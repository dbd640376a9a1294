#!/usr/bin/env python3
"""Time the cuda_extension role's three paths side by side, in one run, on podman containers.

1. first build: the builder container (CUDA 13.1 from NVIDIA's wheels) builds tests/cuda_ext for
   sm_120 with an empty wheelhouse;
2. cache hit: a fresh container without any toolkit installs the same key from the wheelhouse;
3. no-op: the role again on both, which must change nothing.

It reuses molecule/cuda_extension: the same test image, container options, inventory variables and
playbooks (prepare.yml, converge.yml), driven with ansible-playbook against containers of its own,
which it removes at the end. The setup (booting, CUDA from PyPI) is not timed. Prints a table and
writes the numbers to reports/time-extension-build.json.

Run from the repository root with the project's venv: `.venv/bin/python scripts/time_extension_build.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "molecule" / "cuda_extension"
KEY_DIR = "gpuhost-cuda-ext-0.1.0-torchnone-cu13.1-cp311-sm120"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE)


def podman_run(name: str, platform: dict) -> None:
    argv = ["podman", "run", "--detach", "--name", name, "--hostname", name, "--systemd=always"]
    argv += [f"--ulimit={limit}" for limit in platform.get("ulimits", [])]
    argv += platform.get("extra_opts", [])
    argv += [platform["image"], *platform["command"].split()]
    subprocess.run(argv, check=True, capture_output=True, text=True)


def inventory(scenario: dict, names: dict[str, str], ephemeral: Path) -> dict:
    def expand(value: object) -> object:
        if isinstance(value, str):
            return value.replace("${MOLECULE_EPHEMERAL_DIRECTORY}", str(ephemeral)).replace(
                "${MOLECULE_PROJECT_DIRECTORY}", str(ROOT))
        if isinstance(value, list):
            return [expand(item) for item in value]
        if isinstance(value, dict):
            return {key: expand(item) for key, item in value.items()}
        return value

    group_vars = expand(scenario["provisioner"]["inventory"]["group_vars"])
    # The connection per host: the implicit localhost takes the "all" group's variables too.
    hosts = {"all": {"vars": group_vars.get("all", {}), "children": {}}}
    for group, name in names.items():
        hosts["all"]["children"][group] = {"hosts": {name: {"ansible_connection": "containers.podman.podman"}},
                                           "vars": group_vars.get(group, {})}
    return hosts


def playbook(name: str, inventory_path: Path, env: dict[str, str], limit: str | None = None) -> tuple[float, dict]:
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory_path), str(SCENARIO / name)]
    if limit:
        argv += ["--limit", limit]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{name} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    changed = {host: int(count) for host, _ok, count, _unreachable, _failed in RECAP.findall(proc.stdout)}
    return elapsed, changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--keep", action="store_true", help="leave the containers running")
    args = parser.parse_args()

    scenario = yaml.safe_load((SCENARIO / "molecule.yml").read_text())
    platforms = {platform["groups"][0]: platform for platform in scenario["platforms"]}
    suffix = f"{os.getpid()}"
    names = {group: f"time-ext-{group}-{suffix}" for group in platforms}
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", str(ROOT / "molecule" / "containers.conf"))
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    for key, value in scenario["provisioner"]["env"].items():
        env[key] = value.replace("${MOLECULE_PROJECT_DIRECTORY}", str(ROOT))
    env["ANSIBLE_CALLBACK_RESULT_FORMAT"] = "yaml"

    with tempfile.TemporaryDirectory(prefix="time-extension-build-") as tmp:
        ephemeral = Path(tmp)
        env["MOLECULE_EPHEMERAL_DIRECTORY"] = str(ephemeral)
        env["MOLECULE_PROJECT_DIRECTORY"] = str(ROOT)
        inventory_path = ephemeral / "inventory.yml"
        inventory_path.write_text(yaml.safe_dump(inventory(scenario, names, ephemeral)))
        try:
            for group, name in names.items():
                podman_run(name, platforms[group])
            print("setup: booting the containers, CUDA 13.1 on the builder (not timed) ...", flush=True)
            setup_s, _ = playbook("prepare.yml", inventory_path, env)

            first_s, first_changed = playbook("converge.yml", inventory_path, env, limit="builder")
            hit_s, hit_changed = playbook("converge.yml", inventory_path, env, limit="consumer")
            noop_s, noop_changed = playbook("converge.yml", inventory_path, env)
            status = json.loads(subprocess.run(
                ["podman", "exec", names["builder"], "cat", f"/var/cache/cuda-extension/{KEY_DIR}/build.status"],
                check=True, capture_output=True, text=True).stdout)
        finally:
            if not args.keep:
                subprocess.run(["podman", "rm", "--force", *names.values()], capture_output=True, check=False)

    rows = [
        ("first build (builder, empty wheelhouse)", first_s, first_changed.get(names["builder"])),
        ("cache hit (fresh container, no toolkit)", hit_s, hit_changed.get(names["consumer"])),
        ("no-op re-run (both containers)", noop_s, sum(noop_changed.values())),
    ]
    print(f"\n{'run':<42} {'wall s':>8} {'changed':>8}")
    for label, seconds, changed in rows:
        print(f"{label:<42} {seconds:>8.1f} {changed!s:>8}")
    print(f"\nof the first build, pip wheel itself: {status['seconds']} s (MAX_JOBS={status['max_jobs']}, "
          f"NVCC_THREADS={status['nvcc_threads']}); setup, not timed above: {setup_s:.0f} s")
    results = {"first_build_s": round(first_s, 1), "cache_hit_install_s": round(hit_s, 1),
               "noop_rerun_s": round(noop_s, 1), "noop_changed": sum(noop_changed.values()),
               "pip_wheel_s": status["seconds"], "max_jobs": status["max_jobs"], "setup_s": round(setup_s, 1),
               "load_average": os.getloadavg()[0]}
    out = ROOT / "reports" / "time-extension-build.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"written to {out.relative_to(ROOT)}")
    if results["noop_changed"] != 0:
        print("the re-run changed something: it should have been a no-op", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
