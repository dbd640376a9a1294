"""Run the SGLang stand-in (tests/sglang_standin) as the service would: a separate Python process."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

from tests import paths

STANDIN = paths.ROOT / "tests" / "sglang_standin"
KEY = "unit-test-key-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    environ = {**os.environ, "PYTHONPATH": str(STANDIN), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "sglang.launch_server", *args], env=environ, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def health(url: str) -> int:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return 0


@contextlib.contextmanager
def running_standin(behaviour: str, model_path: str | None = None, extra: list[str] | None = None,
                    ready: int = 200) -> Iterator[str]:
    """The stand-in serving on a free loopback port with KEY; yields its base URL once /health says ready."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = ["--model-path", model_path or str(STANDIN), "--served-model-name", "GLM-5-NVFP4", "--port", str(port),
            "--api-key", KEY, "--standin-behaviour", behaviour, "--standin-health-delay", "0", *(extra or [])]
    process = start(args)
    try:
        deadline = time.monotonic() + 15
        while health(url) != ready:
            if process.poll() is not None or time.monotonic() > deadline:
                output = process.stdout.read() if process.stdout else ""
                raise RuntimeError(f"the stand-in did not come up: {output}")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout:
            process.stdout.close()


@contextlib.contextmanager
def listening() -> Iterator[tuple[str, Callable[[], bool]]]:
    """A URL on which nothing answers, and a test of whether anything connected to it: for a module that must send
    nothing (check mode). The socket listens but never accepts, so a connection waits in its backlog to be seen."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.settimeout(0.3)

        def connected() -> bool:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                return False
            conn.close()
            return True

        yield f"http://127.0.0.1:{server.getsockname()[1]}", connected
