"""The converged container: v1 of GLM-5-NVFP4 served by the stand-in under the role's hardened unit,
after side_effect's bad versions were rolled back."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest

# podman exec directly: through Ansible every command costs seconds.
testinfra_hosts = ["podman://sglang-serve"]

SERVICE = "sglang-glm-5-nvfp4.service"
UNIT = f"/etc/systemd/system/{SERVICE}"
ENV = "/etc/sglang/glm-5-nvfp4.env"
SECRET = "/etc/sglang/glm-5-nvfp4.yaml"
BACKUPS = "/var/lib/sglang-serve/glm-5-nvfp4"
LAUNCHER = "/usr/local/lib/sglang-serve/sglang_launch.py"
DEVICE_UNIT = "nvidia-device-nodes.service"
KEY = "molecule-key\\7f3a'9c2e5b8d4e1f"
# The key as it is, as Python's repr and JSON write it, and as Python writes it between single quotes.
KEY_FORMS = (KEY, repr(KEY)[1:-1], repr(KEY + '"')[1:-2])
# The only files that may hold the key: its own, and the copy kept for a rollback.
KEY_FILES = {SECRET, f"{BACKUPS}/glm-5-nvfp4.yaml"}
# The argument converge passes to prove systemd's quoting (converge.yml).
LABEL = "it's \"quoted\" 100% $HOME \\ ; end"
# What systemd logs, once per start, for a unit whose namespaces it may not make (a container whose PID 1 lacks
# CAP_SYS_ADMIN): 255 (Ubuntu 24.04) "<unit>: ProtectHostname=yes is configured, but UTS namespace setup is
# prohibited (container manager?), ignoring namespace setup."; 257 (Debian 13) "<unit>: PrivateIPC=yes is
# configured, but IPC namespace setup failed, ignoring: Operation not permitted".
PROHIBITED = re.compile(r"namespace setup (?:is prohibited|failed)\b.*, ignoring")
# The goal for `systemd-analyze security`: 3.0 or lower ("OK" starts below 4.0).
MAX_EXPOSURE = 3.0
# The gate for GLM-5 on SM120 with SGLang 0.5.10.post1: SGLang itself runs trtllm for both DSA backends there
# (gate/known_good.py), so the gate adds no --nsa-decode-backend.
GATE_ARGS = "--tp 8 --disable-custom-all-reduce"


@pytest.fixture(scope="module")
def main_pid(host) -> int:
    """The launcher, which masks the key in the server's log."""
    pid = int(host.check_output(f"systemctl show --property=MainPID --value {SERVICE}"))
    assert pid > 0, f"{SERVICE} has no main process"
    return pid


@pytest.fixture(scope="module")
def server_pid(host, main_pid: int) -> int:
    """The server, the launcher's one child."""
    children = host.check_output(f"ps -o pid= --ppid {main_pid}").split()
    assert len(children) == 1, children
    return int(children[0])


def exposure(output: str) -> float:
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", output)
    assert match, output[-500:]
    return float(match.group(1))


def api(host, path: str, key: str | None = None) -> tuple[int, str]:
    """GET path on the server from inside the container (no curl there): status and body."""
    header = repr({"Authorization": f"Bearer {key}"} if key else {})
    script = (
        "import urllib.request, urllib.error\n"
        f"req = urllib.request.Request('http://127.0.0.1:30000{path}', headers={header})\n"
        "try:\n    r = urllib.request.urlopen(req, timeout=5); print(r.status); print(r.read().decode())\n"
        "except urllib.error.HTTPError as e:\n    print(e.code); print(e.read().decode())\n"
    )
    out = host.check_output("python3 -c %s", script)
    status, _, body = out.partition("\n")
    return int(status), body


def test_service_is_active_and_enabled(host) -> None:
    service = host.service(SERVICE)
    assert service.is_running
    assert service.is_enabled


def test_unit_installed_and_clean_for_systemd(host) -> None:
    unit = host.file(UNIT)
    assert (unit.user, unit.group, unit.mode) == ("root", "root", 0o644)
    verify = host.run(f"systemd-analyze verify {UNIT}")
    assert verify.rc == 0 and verify.stdout == "" and verify.stderr == "", verify.stderr


def test_unit_keeps_the_sandbox_a_cuda_server_needs(host) -> None:
    content = host.file(UNIT).content_string
    for line in ("DevicePolicy=closed", "DeviceAllow=char-nvidia* rw", "NoNewPrivileges=yes", "ProtectSystem=strict",
                 "PrivateUsers=yes", "SystemCallFilter=@system-service pidfd_getfd", "CapabilityBoundingSet=",
                 "LoadCredential=sglang.yaml:/etc/sglang/glm-5-nvfp4.yaml", "KillMode=mixed"):
        assert line in content.splitlines(), line
    settings = [line.split("=", 1)[0] for line in content.splitlines() if not line.startswith("#")]
    assert "PrivateDevices" not in settings  # it would hide the GPUs
    assert "MemoryDenyWriteExecute" not in settings  # Triton and the CUDA JIT write code


def test_pidfd_getfd_is_allowed(host) -> None:
    # systemd lists the calls the filter lets through.
    allowed = host.check_output(f"systemctl show --property=SystemCallFilter --value {SERVICE}").split()
    assert "pidfd_getfd" in allowed and "ptrace" not in allowed


def test_device_nodes_are_made_before_the_server_starts(host) -> None:
    # DeviceAllow=char-nvidia* is resolved when the server's cgroup is set up: the nodes' unit runs first.
    nodes = host.file(f"/etc/systemd/system/{DEVICE_UNIT}")
    assert (nodes.user, nodes.mode) == ("root", 0o644)
    assert host.check_output(f"systemctl show --property=ActiveState --value {DEVICE_UNIT}") == "active"
    assert DEVICE_UNIT in host.check_output(f"systemctl show --property=After --value {SERVICE}").split()
    assert DEVICE_UNIT in host.check_output(f"systemctl show --property=Wants --value {SERVICE}").split()
    made = int(host.check_output(f"systemctl show --property=ActiveEnterTimestampMonotonic --value {DEVICE_UNIT}"))
    started = int(host.check_output(f"systemctl show --property=ExecMainStartTimestampMonotonic --value {SERVICE}"))
    assert 0 < made <= started


def test_exposure_of_the_running_unit(host) -> None:
    score = exposure(host.check_output(f"systemd-analyze security --no-pager {SERVICE}"))
    print(f"systemd-analyze security {SERVICE}: {score}")
    assert score <= MAX_EXPOSURE


def test_exposure_of_the_unit_file_offline(host) -> None:
    # The unit file as a production host loads it, rated without the container's runtime state.
    score = exposure(host.check_output(f"systemd-analyze security --offline=true --no-pager {UNIT}"))
    print(f"systemd-analyze security --offline=true {UNIT}: {score}")
    assert score <= MAX_EXPOSURE


@pytest.fixture(scope="module")
def namespaces_prohibited(host) -> bool:
    """Whether systemd said, when it started the server in service, that it may not make the unit's
    namespaces: the unit's own line among the messages of its current invocation, not any unit's."""
    invocation = host.check_output(f"systemctl show --property=InvocationID --value {SERVICE}")
    assert invocation, f"{SERVICE} has no invocation"
    journal = host.check_output(
        f"journalctl -b --no-pager --output=cat INVOCATION_ID={invocation} + _SYSTEMD_INVOCATION_ID={invocation}")
    return any(line.startswith(f"{SERVICE}: ") and PROHIBITED.search(line) for line in journal.splitlines())


@pytest.fixture(scope="module")
def serving_report() -> dict:
    """The host's report the role wrote of the server in service (test_throughput.py reads its figures)."""
    path = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "reports" / "sglang-serve-serving.json"
    assert path.is_file(), f"the role wrote no host report at {path}"
    return json.loads(path.read_text())


@pytest.mark.parametrize("which", ["main_pid", "server_pid"])
def test_sandbox_applies_to_the_running_server(host, request: pytest.FixtureRequest, which: str,
                                               namespaces_prohibited: bool, serving_report: dict) -> None:
    pid = request.getfixturevalue(which)
    status = dict(line.split(":", 1) for line in host.file(f"/proc/{pid}/status").content_string.splitlines())
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"  # a filter is installed
    assert status["CapEff"].strip() == "0000000000000000"
    mnt = host.check_output(f"readlink /proc/{pid}/ns/mnt")
    # systemd 252 (Debian 12) makes the namespaces in this container; the other branch must not hide a
    # regression there.
    if host.system_info.codename == "bookworm":
        assert not namespaces_prohibited, f"systemd logged that {SERVICE}'s namespace setup is prohibited"
    if namespaces_prohibited:
        # systemd 255 or 257 in a container whose PID 1 lacks CAP_SYS_ADMIN (Ubuntu 24.04, Debian 13) runs the server in
        # PID 1's namespaces, without ProtectSystem= and the rest: the role must have said so.
        assert mnt == host.check_output("readlink /proc/1/ns/mnt")
        assert serving_report["sandbox_in_force"] is False, serving_report
        return
    assert mnt != host.check_output("readlink /proc/1/ns/mnt")
    assert host.check_output(f"readlink /proc/{pid}/ns/user") != host.check_output("readlink /proc/1/ns/user")
    # ProtectSystem=strict: the whole tree read-only but for the API file systems and the unit's own
    # directories; a write to /usr fails.
    mounts = [line.split() for line in host.file(f"/proc/{pid}/mountinfo").content_string.splitlines()]
    root = [fields for fields in mounts if fields[4] == "/"]
    assert root and "ro" in root[-1][5].split(","), root
    assert serving_report["sandbox_in_force"] is True, serving_report


def test_runs_as_the_service_user(host, main_pid: int) -> None:
    assert host.check_output(f"ps -o user= -p {main_pid}") == "sglang"
    # SGLang's scheduler and detokenizer processes, where there are any: the same user.
    users = host.check_output(f"ps -o user= --ppid {main_pid} || true")
    assert set(users.split()) <= {"sglang"}


def test_listens_only_on_loopback_30000(host, server_pid: int) -> None:
    listening = host.check_output("ss -H -ltnp").splitlines()
    ours = [line for line in listening if f"pid={server_pid}," in line]
    assert [line.split()[3] for line in ours] == ["127.0.0.1:30000"], listening


def test_command_lines_have_the_gate_settings_and_no_key(host, main_pid: int, server_pid: int) -> None:
    credential = f"/run/credentials/{SERVICE}/sglang.yaml"
    launcher = host.file(f"/proc/{main_pid}/cmdline").content_string.split("\0")[:-1]
    server = host.file(f"/proc/{server_pid}/cmdline").content_string.split("\0")[:-1]
    assert launcher[:6] == ["/opt/sglang/venv/bin/python", "-I", LAUNCHER, "--secret-file", credential, "--"]
    assert launcher[6:] == server
    assert server[:5] == ["/opt/sglang/venv/bin/python", "-m", "sglang.launch_server", "--config", credential]
    joined = " ".join(server)
    assert "--model-path /models/GLM-5-NVFP4 --served-model-name GLM-5-NVFP4 --host 127.0.0.1 --port 30000" in joined
    assert GATE_ARGS in joined
    # Quotes, %, $, a backslash and a lone ; reach the server as converge wrote them.
    assert server[-2:] == ["--standin-label", LABEL]
    everything = "\n".join(launcher + server) + host.check_output("ps -eo args")
    assert not [form for form in KEY_FORMS if form in everything]


def test_key_absent_from_unit_and_systemd(host) -> None:
    seen = "\n".join([host.file(UNIT).content_string, host.check_output(f"systemctl show {SERVICE}"),
                      host.run(f"systemctl status --no-pager --lines=0 {SERVICE}").stdout,
                      host.file(ENV).content_string])
    assert not [form for form in KEY_FORMS if form in seen]


def test_key_never_reaches_the_journal(host) -> None:
    # SGLang (and the stand-in) log server_args with the key at every start: v1's, and every bad
    # version side_effect started. The launcher masked each; every field of every entry is searched.
    journal = host.check_output("journalctl --no-pager --output=verbose")
    assert not [form for form in KEY_FORMS if form in journal]
    server = host.check_output(f"journalctl --no-pager --output=cat --unit={SERVICE}")
    assert 'api_key="<api key>"' in server  # the line was logged, masked


def test_key_only_in_its_own_files(host) -> None:
    patterns = " ".join(f"-e {shlex.quote(form)}" for form in KEY_FORMS)
    found = host.run(f"grep -rlF -D skip {patterns} /etc /var /usr/local /opt /root /tmp")
    assert found.rc in (0, 1), found.stderr
    assert set(found.stdout.split()) == KEY_FILES


def test_key_file_is_roots_alone(host) -> None:
    secret = host.file(SECRET)
    assert (secret.user, secret.group, secret.mode) == ("root", "root", 0o600)
    assert secret.content_string.splitlines()[-1] == f"api-key: {json.dumps(KEY)}"


def test_launcher_is_roots(host) -> None:
    launcher = host.file(LAUNCHER)
    assert (launcher.user, launcher.group, launcher.mode) == ("root", "root", 0o644)


def test_environment_file_carries_the_gate_environment(host, main_pid: int) -> None:
    env = host.file(ENV)
    assert (env.user, env.group, env.mode) == ("root", "root", 0o600)
    lines = [line for line in env.content_string.splitlines() if not line.startswith("#")]
    # The gate's GPUs are NVML's indexes (PCI order): CUDA is told to count them the same way.
    assert lines[:2] == ['CUDA_DEVICE_ORDER="PCI_BUS_ID"', 'CUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6,7"']
    assert lines[3] == 'NCCL_P2P_DISABLE="1"'
    # The gate's fingerprint of the P2P facts, with which the launcher drops a stale cached P2P verdict.
    assert re.fullmatch(r'GPUHOST_P2P_FACTS="[0-9a-f]{16}"', lines[2]) and len(lines) == 4
    # The server's own environment: systemd read the file into it.
    environ = host.file(f"/proc/{main_pid}/environ").content_string.split("\0")
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in environ and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in environ
    assert "NCCL_P2P_DISABLE=1" in environ
    assert "HOME=/var/cache/sglang-glm-5-nvfp4" in environ
    assert not [item for item in environ for form in KEY_FORMS if form in item]


def test_api_needs_the_key(host) -> None:
    status, body = api(host, "/v1/models")
    assert status == 401, body
    status, body = api(host, "/v1/models", "wrong-key")
    assert status == 401, body
    status, body = api(host, "/v1/models", KEY)
    assert status == 200, body
    assert [model["id"] for model in json.loads(body)["data"]] == ["GLM-5-NVFP4"]
    assert api(host, "/health")[0] == 200


def test_previous_files_kept_for_rollback(host) -> None:
    backups = host.file(BACKUPS)
    assert (backups.user, backups.mode) == ("root", 0o700)  # the key file is among them
    # Taken from v1 when side_effect's bad versions were deployed over it, and restored from.
    assert sorted(backups.listdir()) == ["glm-5-nvfp4.env", "glm-5-nvfp4.yaml", SERVICE]
    for copy, live in ((SERVICE, UNIT), ("glm-5-nvfp4.env", ENV), ("glm-5-nvfp4.yaml", SECRET)):
        kept, current = host.file(f"{BACKUPS}/{copy}"), host.file(live)
        assert (kept.user, kept.mode, kept.sha256sum) == (current.user, current.mode, current.sha256sum), copy


def test_failed_first_deployment_left_nothing(host) -> None:
    assert host.check_output("systemctl show --property=LoadState --value sglang-dies-at-once.service") == "not-found"
    for path in ("/etc/systemd/system/sglang-dies-at-once.service", "/etc/sglang/dies-at-once.env",
                 "/etc/sglang/dies-at-once.yaml"):
        assert not host.file(path).exists, path
    assert "30001" not in host.check_output("ss -H -ltn")
