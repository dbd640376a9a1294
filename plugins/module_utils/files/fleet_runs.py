"""Where each row of fleet.md comes from, kept beside the reports, so that fleet.md can be rebuilt from a report
directory alone: after the slices of an AWX sliced job (each a separate run over part of the inventory, into one
directory or several), or after any run whose controller is gone.

The audit writes ``<dest>/fleet.d/<host>.json`` for every host of its play: ``{"audit": "this run"}`` for a host
it audited, else the status and the reason the run gave (unreachable or failed, with ``msg``). One file per host,
so that slices, whose hosts never overlap, never write the same file. The merge then rebuilds fleet.md from those
files and the reports exactly as one run over the whole fleet writes it: a host audited is shown from its JSON
report (the facts as written, benchmark merged), a host lost from its last report with that report's date.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.files.last_report import previous_report, report_date
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.report_files import (
    ReportFileError,
    as_text,
    check_host_names,
    read_existing,
)

RUNS_DIR = "fleet.d"
SUFFIX = ".json"
# The statuses gpu_audit_report's fleet return gives a host of the play; "not audited" is a host a table keeps
# from an earlier run, which the run did not try: it is not this run's to record.
STATUSES = ("this run", "unreachable", "failed")
RESERVED = ("fleet",)

Warn = Callable[[str], None]


def source_files(dest: str, sources: dict[str, Any], hosts: list[str]) -> dict[str, str]:
    """Path -> content of the row source of every host of ``hosts`` that ``sources`` (gpu_audit_report's fleet
    return) gives a status of this run. Host names are checked as report file names first."""
    check_host_names(hosts, RESERVED)
    files = {}
    for host in sorted(hosts):
        source = sources.get(host)
        if not isinstance(source, dict) or source.get("audit") not in STATUSES:
            continue
        row = {"audit": source["audit"]}
        if source["audit"] != "this run":
            row["msg"] = source.get("msg")
        files[os.path.join(dest, RUNS_DIR, host + SUFFIX)] = json.dumps(row, sort_keys=True) + "\n"
    return files


def read_sources(directory: str, warn: Warn) -> dict[str, dict[str, Any]]:
    """The row sources a report directory holds, by host; a file that cannot be one is left out with a warning."""
    runs = os.path.join(directory, RUNS_DIR)
    try:
        names = sorted(os.listdir(runs))
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ReportFileError(f"cannot list {runs}: {exc.strerror or exc}; check that it is a readable "
                              "directory") from exc
    sources = {}
    for name in names:
        if not name.endswith(SUFFIX) or name.startswith("."):
            continue
        path = os.path.join(runs, name)
        try:
            source = json.loads(as_text(read_existing(path)) or "")
        except ValueError:
            source = None
        if not isinstance(source, dict) or source.get("audit") not in STATUSES:
            warn(f"{path}: expected a JSON object whose audit is one of {', '.join(STATUSES)}, as the audit writes "
                 "it; left out. Run the audit over that host again to rewrite it")
            continue
        sources[name[:-len(SUFFIX)]] = source
    return sources


def merged_rows(directories: list[str], warn: Warn) -> tuple[dict[str, dict], dict[str, dict], dict[str, str]]:
    """The hosts of the directories as fleet_markdown takes them: the facts of those audited, the absent rows of
    those lost, and each host's directory. A host in several directories is taken from the first."""
    audited: dict[str, dict] = {}
    absent: dict[str, dict] = {}
    origin: dict[str, str] = {}
    for directory in directories:
        sources = read_sources(directory, warn)
        check_host_names(sources, RESERVED)
        for host, source in sources.items():
            if host in origin:
                warn(f"{host} has reports in {origin[host]} and in {directory}: its row is taken from "
                     f"{origin[host]}, the first of merge's directories that holds it")
                continue
            origin[host] = directory
            report = previous_report(directory, host, warn)
            if source["audit"] == "this run" and report is not None:
                audited[host] = {key: value for key, value in report.items() if key != "host"}
                continue
            if source["audit"] == "this run":
                warn(f"{host}: {os.path.join(directory, RUNS_DIR, host + SUFFIX)} says it was audited, but "
                     f"{os.path.join(directory, host + '.json')} is missing or unreadable: shown as not audited. "
                     "Audit it again")
            absent[host] = {"status": "not audited" if source["audit"] == "this run" else source["audit"],
                            "msg": None if source["audit"] == "this run" or not source.get("msg")
                            else str(source["msg"]),
                            "report": report, "report_date": report_date(directory, host) if report else None}
    return audited, absent, origin
