"""The rows of fleet.md as data, ``fleet.json`` beside it, and the lock under which a run reads and rewrites them.

fleet.md is written for people: a host name in it is escaped for Markdown, so its rows cannot be read back as host
names (a name holding a backtick, ``\\``, ``|``, ``&``, ``<`` or ``[`` came back as another name, a new "not
audited" row each run). Whatever a run keeps of the table (``fleet_keep``), and the reason it recorded for a host it
lost, it reads from ``fleet.json``, keyed by the real host names::

    {"format": "gpuhost-fleet/1",
     "hosts": {"gpu-node-1": {"audit": "this run"},
               "gpu-node-2": {"audit": "unreachable", "msg": "ssh: connect to host ... Connection refused"}}}

``audit`` is where the row comes from (gpu_audit_report's ``fleet`` return): ``this run``, ``unreachable``,
``failed`` or ``not audited``; ``msg``, for the two lost ones, the reason recorded (null when none was given).
A directory written before fleet.json existed has ``fleet.d/`` (files/fleet_runs.py), written beside fleet.md by
the audit of every version: its hosts stand in, once.

Runs that write one directory at once (AWX job slices, each keeping the others' rows) read, merge and write the
table one at a time under ``fleet_lock``: an exclusive ``flock`` on ``<dest>/.fleet.lock``, held from reading the
table to renaming the new one into place, so that no slice writes a table made before another slice's rows.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.files.fleet_runs import RUNS_DIR, read_sources
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.report_files import (
    ReportFileError,
    as_text,
    make_directory,
    read_existing,
)

FLEET_JSON = "fleet.json"
FORMAT = "gpuhost-fleet/1"
LOCK = ".fleet.lock"
AUDITS = ("this run", "unreachable", "failed", "not audited")
LOST = ("unreachable", "failed")
# How long a run waits for another that holds the table: every slice writes its reports in seconds, so a lock held
# this long belongs to a run that hangs.
LOCK_WAIT_S = 300.0

Warn = Callable[[str], None]


def fleet_json(sources: dict[str, dict[str, Any]]) -> str:
    """fleet.json for the table whose rows come from ``sources`` (gpu_audit_report's ``fleet`` return, or the
    merge's): per host its ``audit`` and, for a host lost, the ``msg`` recorded."""
    hosts = {}
    for host, source in sorted(sources.items()):
        row = {"audit": source["audit"]}
        if source["audit"] in LOST:
            row["msg"] = source.get("msg")
        hosts[host] = row
    return json.dumps({"format": FORMAT, "hosts": hosts}, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _rows(document: Any) -> dict[str, dict[str, Any]] | None:
    """The rows of a fleet.json document; None when it is not one in the shape written here."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        return None
    if not isinstance(document.get("hosts"), dict):
        return None
    rows = {}
    for host, row in document["hosts"].items():
        if not isinstance(row, dict) or row.get("audit") not in AUDITS:
            return None
        if not isinstance(row.get("msg"), (str, type(None))):
            return None
        rows[host] = {"audit": row["audit"], "msg": row.get("msg")}
    return rows


def recorded_rows(dest: str, warn: Warn | None = None) -> dict[str, dict[str, Any]]:
    """The rows of the table as last written into ``dest``, by host: ``{audit, msg}``. From fleet.json; when there
    is none (a directory of an earlier version), from fleet.d/; {} when neither is there."""
    path = os.path.join(dest, FLEET_JSON)
    data = read_existing(path)
    if data is not None:
        try:
            rows = _rows(json.loads(as_text(data) or ""))
        except ValueError:
            rows = None
        if rows is not None:
            return rows
        if warn:
            warn(f"{path}: expected the fleet table's rows as this module writes them ({FORMAT}); the rows recorded "
                 f"in {RUNS_DIR}/ are read instead, and it is replaced by this run's table")
    return {host: {"audit": source["audit"], "msg": source.get("msg")}
            for host, source in read_sources(dest, warn or (lambda _message: None)).items()}


def lost_reason(recorded: dict[str, Any] | None, status: str, msg: str | None) -> str | None:
    """The reason to record for a host lost with ``status`` and this run's ``msg``: the one recorded when it was
    first lost that way, while it stays so. Ansible words one failure differently from run to run (an ssh
    connection refused is "Connection refused" or "[Errno 32] Broken pipe", by which of ssh and Ansible's write
    to it ends first), and a table rewritten for that would make every re-run a change."""
    if recorded and recorded.get("audit") == status and recorded.get("msg"):
        return str(recorded["msg"])
    return msg


def _open_read_only(path: str, dest: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as err:
        raise ReportFileError(f"cannot open the lock {path}: {err.strerror or err}; make {dest} writable", path,
                              err.strerror) from None


@contextlib.contextmanager
def fleet_lock(dest: str, wait_s: float = LOCK_WAIT_S, mode: int = 0o600) -> Iterator[None]:
    """Hold ``<dest>/.fleet.lock`` exclusively (creating ``dest`` when missing) for the block; ReportFileError when
    it cannot be made, or another run holds it past ``wait_s``. The lock file stays: removing it would let a run
    that opened it before the removal and one that opens it after hold two different locks. A new one gets
    ``mode``, the reports' own."""
    make_directory(dest)
    path = os.path.join(dest, LOCK)
    try:
        # Another user who shares the reports (a mode such as 0640) and may not write the lock opens it read-only,
        # which flock takes as well on a local file system.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
    except PermissionError:
        fd = _open_read_only(path, dest)
    except OSError as err:
        raise ReportFileError(f"cannot open the lock {path}: {err.strerror or err}; make {dest} writable", path,
                              err.strerror) from None
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as err:
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise ReportFileError(f"cannot lock {path}: {err.strerror or err}; put the reports on a file "
                                          "system that supports flock", path, err.strerror) from None
                if time.monotonic() > deadline:
                    raise ReportFileError(f"another run has held {path} for {wait_s:g} s while writing the reports "
                                          f"of {dest}: let it finish, or find it with `fuser {path}`", path) from None
                time.sleep(0.05)
        yield
    finally:
        # Closing the descriptor releases the lock.
        os.close(fd)
