"""Run the self-contained benchmark scripts with another interpreter, and other benchmark binaries.

The harnesses (collective_harness, p2p_harness) live in this package so that Ansible ships
them with the module. On the target they are written to a temporary directory and run with
the interpreter that has torch (``python:``, usually the serving venv's), which is seldom the
one running the module. Every run has a deadline; a run past it is killed with its whole
process group, so no rank outlives the task, and the wait for it ends shortly after the deadline
even when something it started cannot be killed (gpuhost.process).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from types import ModuleType

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import decode_paste
from ansible_collections.gpuhost.gpu.plugins.module_utils.process import run_bounded

# Beyond the run's own deadline (which the harness enforces itself), how long to wait for it
# to kill its ranks and report before it is killed from here.
KILL_GRACE_S = 30.0


@dataclass(frozen=True)
class RunResult:
    rc: int | None  # None: the executable could not be started (error), or it outlived its kill (note)
    stdout: str
    stderr: str
    timed_out: bool = False
    error: str | None = None  # why it could not be started
    note: str | None = None  # after a timeout: what could not be stopped and was left behind


def script_source(module: ModuleType) -> str:
    """The text of a harness module, also when it is imported from Ansible's module zip."""
    loader = getattr(module, "__loader__", None)
    get_source = getattr(loader, "get_source", None)
    if get_source is not None:
        source = get_source(module.__name__)
        if source:
            return source
    import inspect

    return inspect.getsource(module)


def run_process(argv: list[str], timeout_s: float, env: dict[str, str] | None = None,
                cwd: str | None = None) -> RunResult:
    """Run argv in its own process group; past timeout_s the whole group is killed, and what it
    printed until then is returned with ``timed_out``."""
    full_env = dict(os.environ if env is None else env)
    # Every benchmark names GPUs by NVML's index (PCI order): CUDA must count them the same way, not fastest first.
    full_env.update({"LC_ALL": "C", "LANG": "C", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    try:
        done = run_bounded(argv, timeout_s, env=full_env, cwd=cwd)
    except OSError as exc:
        return RunResult(None, "", "", error=f"{argv[0]}: {exc.strerror or exc}")
    return RunResult(done.rc, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"),
                     timed_out=done.timed_out, note=done.note)


def run_script(module: ModuleType, python: str, args: list[str], timeout_s: float,
               env: dict[str, str] | None = None, tmpdir: str | None = None) -> RunResult:
    """Write the harness module to a temporary file and run ``python harness.py args``."""
    if os.sep in python:
        python = os.path.abspath(python)  # the script runs in its own directory
    workdir = tempfile.mkdtemp(prefix="gpuhost-harness-", dir=tmpdir)
    try:
        path = os.path.join(workdir, module.__name__.rsplit(".", 1)[-1] + ".py")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(script_source(module))
        return run_process([python, path, *args], timeout_s, env=env, cwd=workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def write_json(data: object, tmpdir: str | None = None, prefix: str = "gpuhost-config-") -> str:
    import json

    fd, path = tempfile.mkstemp(prefix=prefix, suffix=".json", dir=tmpdir)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    return path


def python_problem(python: str) -> str | None:
    """Why ``python`` cannot be run, or None."""
    if os.sep not in python:
        found = shutil.which(python)
        if found is None:
            return f"the interpreter {python!r} is not on PATH"
        python = found
    if not os.path.exists(python):
        return f"the interpreter {python} does not exist"
    if not os.access(python, os.X_OK):
        return f"the interpreter {python} is not executable"
    return None


# A gzip-compressed log is read as its text, up to this much of it: the material's own limit on decompressed bytes.
LOG_MAX_BYTES = 256 << 20


def read_log_text(path: str) -> str:
    """A benchmark log's text, gzip undone (logs travel compressed as often as not; the packaging must not change
    what is judged), at most LOG_MAX_BYTES of it. OSError as open raises it."""
    with open(path, "rb") as handle:
        data = handle.read(LOG_MAX_BYTES + 1)
    if data[:2] == b"\x1f\x8b":
        inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            data = inflate.decompress(data, LOG_MAX_BYTES)
        except zlib.error:
            data = b""
    return decode_paste(data[:LOG_MAX_BYTES])
