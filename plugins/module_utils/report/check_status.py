"""The audit as a scheduler prolog or a Nagios-style check: the exit code and the one status line of a verdict.

The code follows the Nagios plugin convention (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN), which Slurm's prolog
and health-check wrappers, Nagios, Icinga and Sensu all read. It is read off the verdict that
findings/finding.py ``judgement`` computed, never recomputed from the findings:

- fit -> 0; fit, with warnings -> 1; unfit -> 2;
- not judged (material lacked what some rules need) -> 3, and so is an audit that did not run or
  facts with no verdict: a check that could not look is no pass.

The line is ``GPUHOST <STATUS> - <verdict> (<what it runs on>) action <action>; <findings> | <perfdata>``,
the part after ``|`` being Nagios performance data (counts by severity, GPUs seen).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import SEVERITIES, findings_named

EXIT_CODES = {"fit": 0, "fit, with warnings": 1, "unfit": 2, "not judged": 3}
UNKNOWN = 3
STATUS_WORDS = ("OK", "WARNING", "CRITICAL", "UNKNOWN")


def exit_code(facts: Mapping[str, Any] | None) -> int:
    """The code of the verdict in ``facts["summary"]``; UNKNOWN without one."""
    summary = facts.get("summary") if isinstance(facts, Mapping) else None
    verdict = summary.get("verdict") if isinstance(summary, Mapping) else None
    return EXIT_CODES.get(verdict, UNKNOWN) if isinstance(verdict, str) else UNKNOWN


def status_line(facts: Mapping[str, Any]) -> str:
    """One line for the scheduler's log or the monitoring system: status word, verdict, action, findings."""
    code = exit_code(facts)
    summary = facts.get("summary") if isinstance(facts.get("summary"), Mapping) else {}
    counts = summary.get("counts") if isinstance(summary.get("counts"), Mapping) else {}
    perf = " ".join(f"{s}={counts.get(s, 0)}" for s in SEVERITIES) + f" gpus={summary.get('gpu_count', 0)}"
    return (f"GPUHOST {STATUS_WORDS[code]} - {summary.get('verdict', 'no verdict')} "
            f"({summary.get('virtualization')}; {summary.get('gpu_count')} GPU(s); P2P {summary.get('p2p')}) "
            f"action {summary.get('action', 'not stated')}; {findings_named(facts)} | {perf}")


def failed_line(why: str) -> str:
    """The line of an audit that could not run: UNKNOWN, and why, on one line."""
    return f"GPUHOST UNKNOWN - audit did not run: {' '.join(str(why).split())}"
