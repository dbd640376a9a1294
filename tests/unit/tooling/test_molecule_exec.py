"""molecule/shared/bin/podman, the `podman exec` the scenarios use: the process it starts in a test container is
the one podman exec starts (environment, user, capabilities, seccomp, cgroup, exit status, stdin), it follows a
container recreated under the same name, and what it does not take (a stopped container, an exec with options,
any other command) is the real podman's to answer.

Against real containers of the test image (`make image`), as the scenarios run them; skipped only where podman
cannot run them as root with runc (the only case the shim takes runc's path)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.paths import ROOT

SHIM_DIR = ROOT / "molecule" / "shared" / "bin"
IMAGE = "localhost/gpuhost-debian:bookworm"
# What a task could see of its own process: every field that podman exec and runc exec could set differently.
PROBE = ("env | sort; id; pwd; ulimit -n; grep -E '^(Cap|Seccomp|NoNewPrivs)' /proc/self/status; "
         "cat /proc/self/cgroup")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if os.geteuid() != 0 or not shutil.which("podman") or not shutil.which("runc"):
        pytest.skip("the shim takes runc's path only for root's podman with runc")
    environment = {**os.environ, "CONTAINERS_CONF": str(ROOT / "molecule" / "containers.conf"),
                   "TMPDIR": str(tmp_path_factory.mktemp("shim-cache"))}
    if subprocess.run(["podman", "image", "exists", IMAGE], env=environment).returncode != 0:
        pytest.fail(f"the test image {IMAGE} is missing: run `make image`")
    return environment


@pytest.fixture()
def container(env: dict[str, str]):
    name = f"gpuhost-shim-test-{uuid.uuid4().hex[:8]}"
    start(env, name)
    yield name
    subprocess.run(["podman", "rm", "-f", "-t", "0", name], env=env, capture_output=True)


def start(env: dict[str, str], name: str) -> str:
    run = subprocess.run(["podman", "run", "-d", "--name", name, IMAGE, "sleep", "infinity"], env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def podman(env: dict[str, str], *args: str, shim: bool, stdin: str | None = None) -> subprocess.CompletedProcess:
    path = f"{SHIM_DIR}{os.pathsep}{env['PATH']}" if shim else env["PATH"]
    return subprocess.run(["podman", *args], env={**env, "PATH": path}, input=stdin, capture_output=True,
                          text=True, timeout=60)


def cached_id(env: dict[str, str], name: str) -> str:
    return (Path(env["TMPDIR"]) / "gpuhost-podman-ids" / name).read_text().strip()


def test_the_process_is_the_one_podman_exec_starts(env, container):
    real = podman(env, "exec", container, "sh", "-c", PROBE, shim=False)
    shimmed = podman(env, "exec", container, "sh", "-c", PROBE, shim=True)
    assert real.returncode == shimmed.returncode == 0, shimmed.stderr
    assert shimmed.stdout == real.stdout
    # It went through runc: the container's ID is in the cache only then.
    container_id = podman(env, "inspect", "--format", "{{.Id}}", container, shim=False).stdout.strip()
    assert cached_id(env, container) == container_id


def test_exit_status_output_and_stdin_come_through(env, container):
    failed = podman(env, "exec", container, "sh", "-c", "echo out; echo err >&2; exit 3", shim=True)
    assert (failed.returncode, failed.stdout, failed.stderr) == (3, "out\n", "err\n")
    # Ansible's pipelining sends the module on stdin, with -i.
    piped = podman(env, "exec", "-i", container, "sh", "-c", "cat; echo done", shim=True, stdin="module source\n")
    assert (piped.returncode, piped.stdout) == (0, "module source\ndone\n")


def test_a_container_recreated_under_the_same_name_is_the_one_reached(env, container):
    assert podman(env, "exec", container, "true", shim=True).returncode == 0
    old = cached_id(env, container)
    subprocess.run(["podman", "rm", "-f", "-t", "0", container], env=env, check=True, capture_output=True)
    new = start(env, container)
    assert new != old
    marked = podman(env, "exec", container, "sh", "-c", "touch /new-one && ls /new-one", shim=True)
    assert marked.returncode == 0, marked.stderr
    assert podman(env, "exec", container, "ls", "/new-one", shim=False).returncode == 0
    assert cached_id(env, container) == new


def test_what_it_does_not_take_the_real_podman_answers(env, container):
    # An exec with an option the shim does not read.
    user = podman(env, "exec", "--user", "nobody", container, "id", "-u", shim=True)
    assert (user.returncode, user.stdout) == (0, "65534\n")
    # Any other command.
    assert podman(env, "inspect", "--format", "{{.Name}}", container, shim=True).stdout.strip() == container
    # A container that is not running, and one that does not exist: podman's own status and message.
    subprocess.run(["podman", "stop", "-t", "0", container], env=env, check=True, capture_output=True)
    for name in (container, f"{container}-absent"):
        real = podman(env, "exec", name, "true", shim=False)
        shimmed = podman(env, "exec", name, "true", shim=True)
        assert real.returncode != 0
        assert (shimmed.returncode, shimmed.stderr) == (real.returncode, real.stderr)
