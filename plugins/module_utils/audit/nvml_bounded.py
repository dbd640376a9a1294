"""NVML read under a deadline, in a child process: a wedged GPU must not hang the audit.

NVML's calls block inside libnvidia-ml (an ioctl into the driver), where neither a signal nor a Python thread can
stop them: a thread left blocked keeps the module's process, and with it the pipe Ansible reads its result from,
alive for as long as the driver call lasts. So the reading runs in a forked child that can be abandoned: the
child's standard streams are moved to /dev/null first (it must not hold the module's output pipe open), it sends
its snapshot back as JSON over a pipe of its own, and at the deadline it is killed with SIGKILL. A child stuck in
the kernel dies only when the driver call returns; it is then left behind, and the note says so, as
``process.run_bounded`` does for commands.

The answer is the reader's snapshot, or ``{"error": ..., "kind": "timeout"}`` (or ``"nvml_error"`` when the child
died without answering): ``read_nvml``'s own shape for an NVML that cannot be used, so the audit goes on with
nvidia-smi and the rules, as for any other NVML failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any

# The whole reading, nvmlInit included. With persistence mode off the driver sets every GPU up on nvmlInit, which
# takes seconds per GPU on an 8-GPU host; a GPU that answers at all answers well within this.
NVML_TIMEOUT_S = 60.0
# After the kill: how long to wait for the child to go before leaving it behind.
REAP_S = 2.0
_CHUNK = 65536


def read_bounded(reader: Callable[[], dict[str, Any]], timeout_s: float = NVML_TIMEOUT_S) -> dict[str, Any]:
    """``reader()`` run in a child process, its answer if it comes within ``timeout_s``. Never raises for what
    the reader does; raises OSError only when no child process can be made (then nothing was read)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: read, answer, exit without returning into the caller's code
        os.close(read_fd)
        _child(reader, write_fd)
    os.close(write_fd)
    try:
        data, finished = _read_until(read_fd, time.monotonic() + max(timeout_s, 0.0))
    finally:
        os.close(read_fd)
    if not finished:
        left = _kill(pid)
        return {"error": f"NVML did not answer within {timeout_s:g} s: a GPU or the driver is wedged (the call "
                         f"blocks in the driver){left}; the audit went on without NVML",
                "kind": "timeout"}
    _reap(pid, time.monotonic() + REAP_S)
    try:
        answer = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        answer = None
    if not isinstance(answer, dict):
        return {"error": "the process reading NVML ended without an answer (it crashed in the NVML library or the "
                         "driver); the audit went on without NVML", "kind": "nvml_error"}
    return answer


def _child(reader: Callable[[], dict[str, Any]], write_fd: int) -> None:
    code = 0
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        try:
            answer: Any = reader()
        except BaseException as exc:  # whatever the reader raises is its answer, never a traceback
            answer = {"error": f"{type(exc).__name__}: {exc}", "kind": "nvml_error"}
        payload = json.dumps(answer, default=str).encode("utf-8")
        view = memoryview(payload)
        while view:
            view = view[os.write(write_fd, view):]
    except BaseException:  # the parent reads a missing answer as a crash
        code = 1
    finally:
        os._exit(code)


def _read_until(fd: int, deadline: float) -> tuple[bytes, bool]:
    """What the child wrote, and whether it closed its end (finished) before the deadline."""
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"".join(chunks), False
        ready, _unused, _unused = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)


def _kill(pid: int) -> str:
    """SIGKILL the child; a note when it could not be reaped within REAP_S (stuck in the kernel)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if _reap(pid, time.monotonic() + REAP_S):
        return ""
    return f"; its process (pid {pid}) did not exit after SIGKILL and was left behind"


def _reap(pid: int, until: float) -> bool:
    """Whether the child was reaped before ``until``."""
    while True:
        try:
            done, _unused = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            return True
        if time.monotonic() >= until:
            return False
        time.sleep(0.02)
