"""scripts/gpu_prolog.py --slurm against a real Slurm: Debian's slurmctld and slurmd (22.05), started here on
loopback with free ports, their own slurm.conf and state under a temporary directory, auth/none. slurmd runs the
prolog as its HealthCheckProgram every second, as a site wires it (docs/monitoring.md), over a replayed capture
the test switches between the incident guest (unfit) and a bare-metal host with working P2P (fit); the node's
state is read back with scontrol and sinfo. A second cluster runs it as the job prolog instead, under srun.

Skipped, with the reason, only where Slurm's packages are missing (scripts/system-deps.sh installs them)."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import CAPTURES, ROOT
from tests.unit import captures

SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
BINARIES = {name: shutil.which(name, path=SBIN) for name in ("slurmctld", "slurmd", "scontrol", "sinfo", "srun")}
pytestmark = pytest.mark.skipif(
    not all(BINARIES.values()),
    reason=f"Slurm is not installed ({', '.join(n for n, p in BINARIES.items() if not p)} missing): "
           "apt-get install slurmctld slurmd slurm-client, or make system-deps")

NODE = "gpu1"
UNFIT, FIT = captures.INCIDENT, captures.PRO6000
# How long a state change may take: slurmd runs the check every second; registration takes about one.
WAIT_S = 15


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    def __init__(self, root: Path, hook: str = "HealthCheckProgram") -> None:
        self.root = root
        self.hook = hook  # how slurmd runs the script: HealthCheckProgram (every second) or Prolog
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "LC_ALL": "C"}
        self.capture = root / "capture"
        self.runs = root / "runs.log"
        self.report = root / "report.json"

    def write(self) -> None:
        for name in ("state", "spool"):
            (self.root / name).mkdir()
        user = getpass.getuser()
        # slurmd runs the check with an empty environment: the wrapper says where slurm.conf is, which capture
        # to replay, and logs each run's line and action so that the test knows when a run has seen a change.
        check = self.root / "healthcheck.sh"
        check.write_text(
            "#!/bin/sh\n"
            f"export SLURM_CONF={self.conf}\n"
            f'capture="$(cat {self.capture})"\n'
            f'out="$({sys.executable} {ROOT / "scripts" / "gpu_prolog.py"} --slurm --capture "$capture" '
            f'--json {self.report} 2>&1)"\n'
            "code=$?\n"
            f'echo "$(basename "$capture" .json) $out" | tr "\\n" " " >> {self.runs}\n'
            f"echo >> {self.runs}\n"
            'exit "$code"\n')
        check.chmod(0o755)
        self.conf.write_text("\n".join([
            "ClusterName=gpuhosttest", "SlurmctldHost=localhost", f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}", "AuthType=auth/none", "CredType=cred/none",
            f"SlurmUser={user}", f"SlurmdUser={user}",
            f"StateSaveLocation={self.root / 'state'}", f"SlurmdSpoolDir={self.root / 'spool'}",
            f"SlurmctldPidFile={self.root / 'slurmctld.pid'}", f"SlurmdPidFile={self.root / 'slurmd.pid'}",
            f"SlurmctldLogFile={self.root / 'slurmctld.log'}", f"SlurmdLogFile={self.root / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
            "SwitchType=switch/none", "MpiDefault=none", "ReturnToService=2",
            f"{self.hook}={check}", *(["HealthCheckInterval=1"] if self.hook == "HealthCheckProgram" else []),
            f"NodeName={NODE} NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN",
            f"PartitionName=debug Nodes={NODE} Default=YES State=UP", ""]))

    def scontrol(self, *argv: str) -> str:
        return subprocess.run([BINARIES["scontrol"], *argv], env=self.env, capture_output=True, text=True,
                              check=True, timeout=30).stdout

    def node(self) -> tuple[str, str]:
        """(state flags, reason) as sinfo prints them: ``drained``, ``idle``; the reason or ``none``."""
        out = subprocess.run([BINARIES["sinfo"], "-h", "-N", "-n", NODE, "-o", "%T|%E"], env=self.env,
                             capture_output=True, text=True, check=True, timeout=30).stdout.strip()
        state, _bar, reason = out.partition("|")
        return state.rstrip("*~#!%$@^-"), reason

    def replay(self, capture: str) -> str:
        """Switch the replayed host and wait for a health check that ran on it; its logged line."""
        self.capture.write_text(str(CAPTURES / f"{capture}.json"))
        seen = len(self.runs.read_text().splitlines()) if self.runs.exists() else 0
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            lines = self.runs.read_text().splitlines() if self.runs.exists() else []
            # A line names the capture its run read (a run that started before the switch names the old one), and
            # is written after that run acted.
            fresh = [line for line in lines[seen:] if line.startswith(f"{capture} ")]
            if fresh:
                return fresh[0]
            time.sleep(0.1)
        raise AssertionError(f"no health check ran on {capture} within {WAIT_S} s; slurmd's log:\n"
                             + (self.root / "slurmd.log").read_text()[-2000:])


def _started(cluster: Cluster, capture: str) -> Iterator[Cluster]:
    cluster.write()
    cluster.capture.write_text(str(CAPTURES / f"{capture}.json"))
    daemons = [subprocess.Popen([BINARIES["slurmctld"], "-D", "-f", str(cluster.conf)], env=cluster.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        daemons.append(subprocess.Popen([BINARIES["slurmd"], "-D", "-f", str(cluster.conf), "-N", NODE],
                                        env=cluster.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                if cluster.node()[0] == "idle":
                    break
            except subprocess.CalledProcessError:
                pass  # slurmctld not listening yet
            time.sleep(0.1)
        else:
            pytest.fail("the node never registered idle; slurmctld's log:\n"
                        + (cluster.root / "slurmctld.log").read_text()[-2000:])
        yield cluster
    finally:
        for daemon in reversed(daemons):
            daemon.terminate()
        for daemon in daemons:
            daemon.wait(timeout=30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from _started(Cluster(tmp_path_factory.mktemp("slurm")), FIT)


@pytest.fixture(scope="module")
def prolog_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from _started(Cluster(tmp_path_factory.mktemp("slurm-prolog"), "Prolog"), UNFIT)


def test_a_fit_host_is_left_alone(cluster: Cluster) -> None:
    line = cluster.replay(FIT)
    assert "GPUHOST OK - fit" in line and f"node {NODE}: leave: fit, no action asked" in line, line
    assert cluster.node() == ("idle", "none")


def test_the_unfit_host_is_drained_with_its_findings_and_report_then_resumed_after_a_fit_recheck(
        cluster: Cluster) -> None:
    line = cluster.replay(UNFIT)
    assert "GPUHOST CRITICAL - unfit" in line, line
    state, reason = cluster.node()
    assert state == "drained", (state, reason)
    assert reason == f"gpuhost: drain; critical: p2p_not_supported; report {cluster.report}"
    assert f"Reason={reason} [" in cluster.scontrol("show", "node", NODE)
    # Still unfit at every later check: drained, the reason as it was.
    assert "leave: already drained by this check" in cluster.replay(UNFIT)
    assert cluster.node() == ("drained", reason)
    # The host fixed: the next check finds it fit and resumes it.
    assert f"node {NODE}: resume: re-checked: fit, no action asked" in cluster.replay(FIT)
    assert cluster.node() == ("idle", "none")


def test_a_node_drained_by_someone_else_is_left_alone_whatever_the_verdict(cluster: Cluster) -> None:
    cluster.replay(FIT)
    cluster.scontrol("update", f"NodeName={NODE}", "State=DRAIN", "Reason=fan replaced, burn-in pending")
    try:
        for capture in (FIT, UNFIT):
            assert "leave: drained by someone else (fan replaced, burn-in pending)" in cluster.replay(capture)
            assert cluster.node() == ("drained", "fan replaced, burn-in pending")
    finally:
        cluster.scontrol("update", f"NodeName={NODE}", "State=RESUME")


def test_as_the_job_prolog_the_unfit_host_is_drained_before_the_job_and_slurm_keeps_the_reason(
        prolog_cluster: Cluster) -> None:
    """The prolog drains the node, exits 2, and Slurm fails the job's launch there ("Prolog error"), keeping the
    reason the script set."""
    run = subprocess.run([BINARIES["srun"], "-N1", "-w", NODE, "true"], env=prolog_cluster.env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode != 0 and "prolog" in run.stderr.lower(), run.stderr
    assert prolog_cluster.runs.read_text().startswith(f"{UNFIT} gpuhost slurm: node {NODE}: drain: the verdict asks")
    assert prolog_cluster.node() == ("drained", f"gpuhost: drain; critical: p2p_not_supported; report "
                                                f"{prolog_cluster.report}")
