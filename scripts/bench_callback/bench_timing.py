"""Callback for scripts/bench_audit.py: the wall time of every task of a run, written as JSON.

Enabled only by the benchmark (ANSIBLE_CALLBACK_PLUGINS + ANSIBLE_CALLBACKS_ENABLED), it records
for each task its name, its action, whether it ran once for the play, and the seconds from its start
to the start of the next task (or the end of the play): with the linear strategy a task runs for
every host before the next one starts, so that span is what the task cost the run. The file named
by BENCH_AUDIT_TIMING receives the list.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
---
name: bench_timing
type: aggregate
short_description: Wall time per task, for scripts/bench_audit.py
description:
  - Writes every task's name, action, run_once and wall seconds to the JSON file named by BENCH_AUDIT_TIMING.
requirements:
  - enabled in ANSIBLE_CALLBACKS_ENABLED
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_timing"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._tasks: list[dict] = []
        self._current: dict | None = None

    def _close(self) -> None:
        if self._current is not None:
            self._current["seconds"] = round(time.perf_counter() - self._current.pop("_start"), 4)
            self._tasks.append(self._current)
            self._current = None

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._close()
        self._current = {"name": task.get_name(), "action": getattr(task, "resolved_action", None) or task.action,
                         "run_once": bool(task.run_once), "_start": time.perf_counter()}

    def v2_playbook_on_handler_task_start(self, task):
        self.v2_playbook_on_task_start(task, False)

    def v2_playbook_on_play_start(self, play):
        self._close()

    def v2_playbook_on_stats(self, stats):
        self._close()
        path = os.environ.get("BENCH_AUDIT_TIMING")
        if path:
            with open(path, "w", encoding="utf-8") as out:
                json.dump(self._tasks, out, indent=1)
