"""The launcher the sglang_serve unit runs: the output masked, signals passed on, the server's status kept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import ROOT
from tests.unit.serving.test_sglang_serve_unit import LAUNCHER

SCRIPT = ROOT / "roles" / "sglang_serve" / "files" / "sglang_launch.py"
KEY = "launch-key\\7f3a'9c2e5b8d"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """The --config file as the role writes it (templates/sglang-secret.yaml.j2)."""
    path = tmp_path / "sglang.yaml"
    path.write_text(f"# managed\n# SGLang --config file\napi-key: {json.dumps(KEY)}\n")
    return path


def launch(secret: Path, code: str, **kwargs) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-I", str(SCRIPT), "--secret-file", str(secret), "--",
                             sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


# --------------------------------------------------------------------------------------------------
# The masking


def test_reads_the_key_the_role_writes(secret: Path, tmp_path: Path) -> None:
    assert LAUNCHER.read_secret(str(secret)) == KEY
    other = tmp_path / "other.yaml"
    other.write_text("api_key: 'it''s-a-key'\n")
    assert LAUNCHER.read_secret(str(other)) == "it's-a-key"
    other.write_text("model-path: /m\n")
    assert LAUNCHER.read_secret(str(other)) is None


@given(key=st.text(min_size=1, max_size=24), before=st.text(max_size=30), after=st.text(max_size=30),
       cuts=st.lists(st.integers(0, 200), max_size=6), form=st.integers(0, 20))
def test_no_form_survives_any_split_into_reads(key: str, before: str, after: str, cuts: list[int], form: int) -> None:
    forms = LAUNCHER.secret_forms(key)
    data = (before + forms[form % len(forms)] + after).encode("utf-8", "surrogatepass")
    masker = LAUNCHER.StreamMasker(key)
    out, at = b"", 0
    for cut in sorted(cuts):
        out += masker.feed(data[at:max(at, cut)])
        at = max(at, cut)
    out += masker.feed(data[at:]) + masker.flush()
    whole = LAUNCHER.StreamMasker(key)
    assert out == whole.feed(data) + whole.flush()
    assert b"<api key>" in out


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_a_short_form_that_begins_a_longer_one_waits_for_it(cut: int) -> None:
    """The key "0\\r" has the forms "0%0D" (URL) and "0" (stripped): a read cut after "0" masked it on its own
    and then "0" again inside "%0D" ("<api key>%<api key>D"), where one read gives "<api key>"."""
    data = b"0%0D\n"
    masker = LAUNCHER.StreamMasker("0\r")
    assert masker.feed(data[:cut]) + masker.feed(data[cut:]) + masker.flush() == b"<api key>\n"


def test_lines_pass_at_once_and_a_cut_form_waits(secret: Path) -> None:
    masker = LAUNCHER.StreamMasker(KEY)
    assert masker.feed(b"ready\n") == b"ready\n"
    assert masker.feed(b"api_key='" + repr(KEY)[1:6].encode()) == b"api_key='"
    assert masker.feed(repr(KEY)[6:-1].encode() + b"')\n") == b"<api key>')\n"


# --------------------------------------------------------------------------------------------------
# The process

SERVER = f"""
import json, sys
key = {KEY!r}
print("server_args=ServerArgs(model_path='/m', api_key=" + repr(key) + ")", file=sys.stderr)
print(json.dumps({{"api_key": key}}))
sys.stdout.write("raw " + key[:7]); sys.stdout.flush()
sys.stdout.write(key[7:] + " end\\n")
sys.exit(3)
"""


def test_output_masked_on_both_streams_and_status_kept(secret: Path) -> None:
    process = launch(secret, SERVER)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 3
    # The key holds a quote, so Python's repr of it is double-quoted.
    assert err.decode() == "server_args=ServerArgs(model_path='/m', api_key=\"<api key>\")\n"
    assert out.decode() == '{"api_key": "<api key>"}\nraw <api key> end\n'
    for form in LAUNCHER.secret_forms(KEY):
        assert form.encode() not in out + err


def test_sigterm_reaches_the_server_group_and_its_death_is_kept(secret: Path, tmp_path: Path) -> None:
    # The server forks a worker, as SGLang forks its schedulers; both must get the signal.
    # The worker's handler is set before the fork, but a signal that reaches a forked Python before it has
    # run its after-fork code is dropped, so the worker says when it runs before the signal is sent.
    # The worker records the signal in a file: its stdout reaches the test only through the launcher's copy,
    # which stops PUMP_GRACE seconds after the server died, and a loaded machine may run the worker's handler
    # later than that (seen: "worker TERM" missing under a load of 9 on 2 cores).
    received = tmp_path / "worker-received"
    code = ("import os, signal, time\n"
            f"signal.signal(signal.SIGTERM, lambda *a: (open({str(received)!r}, 'w').write('TERM'), os._exit(0)))\n"
            "if os.fork() == 0:\n"
            "    os.write(1, b'worker up\\n'); time.sleep(60); os._exit(1)\n"
            "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
            "os.write(1, b'up\\n')\n"  # one write each: the two lines may not interleave
            "time.sleep(60)\n")
    process = launch(secret, code)
    assert process.stdout is not None
    assert sorted([process.stdout.readline(), process.stdout.readline()]) == [b"up\n", b"worker up\n"]
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == -signal.SIGTERM, (out, err, process.returncode)
    deadline = time.monotonic() + 30
    while not (received.exists() and received.read_text() == "TERM") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert received.exists() and received.read_text() == "TERM", "the worker never got the SIGTERM"


def test_refuses_to_start_without_the_key_file(tmp_path: Path) -> None:
    process = launch(tmp_path / "absent.yaml", "print('started')")
    out, err = process.communicate(timeout=30)
    assert process.returncode == 1 and out == b""
    assert b"cannot read the API key from" in err and b"the server is not started" in err


def test_names_a_command_it_cannot_run(secret: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--secret-file", str(secret), "--", "/nonexistent/python"],
                          capture_output=True, timeout=30, check=False)
    assert done.returncode == 127 and b"cannot run /nonexistent/python" in done.stderr
    usage = subprocess.run([sys.executable, str(SCRIPT), "python"], capture_output=True, timeout=30, check=False)
    assert usage.returncode == 2 and b"usage: sglang_launch.py --secret-file FILE -- COMMAND" in usage.stderr


def test_a_worker_that_outlives_the_server_does_not_hold_the_launcher(secret: Path) -> None:
    code = ("import os, time\n"
            "worker = os.fork()\n"
            "if worker == 0:\n"
            "    time.sleep(60); os._exit(0)\n"
            "print(worker, flush=True)\n")
    start = time.monotonic()
    process = launch(secret, code)
    out, _ = process.communicate(timeout=30)
    try:
        assert process.returncode == 0
        assert time.monotonic() - start < LAUNCHER.PUMP_GRACE + 10
    finally:
        os.kill(int(out), signal.SIGKILL)
