"""A host's last report as it lies in a report directory: its JSON, and the date fleet.md shows for it.

gpu_audit_report reads it for the hosts a run did not reach, gpu_fleet_merge for every host of the directories it
merges: one reader, so that a merged fleet.md says what one run over the whole fleet would.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

from ansible_collections.gpuhost.gpu.plugins.module_utils.files.report_files import as_text, read_existing


def previous_report(dest: str, host: str, warn: Callable[[str], None] | None = None) -> dict | None:
    """A host's existing JSON report, if any (one that is not UTF-8 JSON counts as none, with a warning)."""
    path = os.path.join(dest, f"{host}.json")
    data = read_existing(path)
    if data is None:
        return None
    try:
        report = json.loads(as_text(data) or "")
    except ValueError:
        report = None
    if not isinstance(report, dict) and warn:
        what = "is not UTF-8" if as_text(data) is None else "holds no JSON object"
        warn(f"{path} {what}: it is not read as the host's last report, and is replaced when the host has facts")
    return report if isinstance(report, dict) else None


def report_date(dest: str, host: str) -> str:
    """The date of a host's JSON report: its modification time in UTC (reports carry no timestamp, so that a
    re-run changes no file; a report is rewritten only when its content changes)."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(os.stat(os.path.join(dest, f"{host}.json")).st_mtime))
