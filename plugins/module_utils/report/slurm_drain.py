"""What the audit's verdict asks of a Slurm node: drain it, resume it, or leave it as it is.

Read off the one judgement (findings/finding.py ``judgement``: the summary's verdict and action), never
recomputed from the findings:

- **drain** when the action is anything but ``none`` and the node is not drained already; the reason starts
  with ``REASON_MARK`` and names the action, the findings the verdict rests on and the report, so that an
  operator reading ``sinfo -R`` knows why and where to look;
- **resume** only a node drained with a reason that starts with ``REASON_MARK`` (drained by this check), and
  only when the audit that just ran says fit (with or without warnings) and asks no action: the re-check that
  nebius/soperator#1317 asks for before a node goes back to work;
- **leave** it otherwise: a node drained by someone else keeps its state and reason whatever the verdict, a
  verdict that needs no action never drains, an audit that gave no verdict changes nothing either way, and a
  "not judged" host that asks no action is not resumed (nothing says it is fit).

Pure: the node's state comes in as the text ``scontrol show node <name>`` printed; running scontrol is the
caller's (scripts/gpu_prolog.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.actions import ACTIONS
from ansible_collections.gpuhost.gpu.plugins.module_utils.findings.finding import findings_named
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.check_status import EXIT_CODES, exit_code

REASON_MARK = "gpuhost:"
# Verdicts whose check looked and found the host fit to run jobs (check_status.EXIT_CODES 0 and 1).
FIT_CODES = (0, 1)
# ``   State=IDLE+DRAIN ThreadsPerCore=1 ...`` and ``   Reason=text [user@2026-12-07T12:21:00]``, as
# scontrol 20.11 to 24.x print them; the reason runs to the bracket of who set it and when.
_STATE = re.compile(r"^[^\S\n]*State=(\S+)", re.MULTILINE)
_REASON = re.compile(r"^[^\S\n]*Reason=(.*\S)", re.MULTILINE)
_SET_BY = re.compile(r" \[[^\[\]\s]+@[^\[\]\s]+\]$")


class NodeStateError(ValueError):
    """scontrol's output held no node state: the node is unknown to Slurm, or the text is not scontrol's."""


@dataclass(frozen=True)
class Node:
    state: str  # IDLE+DRAIN, ALLOCATED, DOWN*+DRAIN ...
    reason: str | None

    @property
    def drained(self) -> bool:
        """Drained or draining: the DRAIN flag, whatever the base state."""
        return "DRAIN" in self.state.replace("*", "").split("+")

    @property
    def ours(self) -> bool:
        return self.drained and (self.reason or "").startswith(REASON_MARK)


@dataclass(frozen=True)
class Decision:
    act: str  # drain, resume or leave
    why: str
    reason: str | None = None  # the drain reason, for act == "drain"


def read_node(text: str) -> Node:
    """The state and drain reason of the one node in ``scontrol show node NAME``'s output."""
    state = _STATE.search(text)
    if state is None:
        raise NodeStateError("expected scontrol show node's output with a State= field; found "
                             f"{text.strip()[:120]!r}: check that the node name is the one slurm.conf gives")
    reason = _REASON.search(text)
    return Node(state.group(1), _SET_BY.sub("", reason.group(1)) if reason else None)


def drain_reason(facts: Mapping[str, Any], report: str | None) -> str:
    """``gpuhost: <action>; <findings>; report <file>``, on one line."""
    summary = facts.get("summary") if isinstance(facts.get("summary"), Mapping) else {}
    where = f"report {report}" if report else "no report written (--json FILE)"
    return " ".join(f"{REASON_MARK} {summary.get('action')}; {findings_named(facts)}; {where}".split())


def decide(facts: Mapping[str, Any], node: Node, report: str | None = None) -> Decision:
    """What to do to ``node`` given the audit ``facts`` just judged (see the module's docstring)."""
    summary = facts.get("summary") if isinstance(facts.get("summary"), Mapping) else {}
    action, code = summary.get("action"), exit_code(facts)
    if node.drained and not node.ours:
        return Decision("leave", f"drained by someone else ({node.reason or 'no reason given'}): left as it is")
    if summary.get("verdict") not in EXIT_CODES or action not in ACTIONS:
        return Decision("leave", "the audit gave no verdict or no action: nothing changed")
    if action != "none":
        if node.drained:
            return Decision("leave", f"already drained by this check; the verdict still asks {action}")
        return Decision("drain", f"the verdict asks {action}", drain_reason(facts, report))
    if node.ours and code in FIT_CODES:
        return Decision("resume", f"re-checked: {summary.get('verdict')}, no action asked")
    # "not judged" with no action asked: nothing to drain for, and no fit verdict to resume on.
    return Decision("leave", f"{summary.get('verdict')}, no action asked")
