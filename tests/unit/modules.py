"""Run a module's main() in-process, as Ansible would, and return its JSON result."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible.module_utils import _internal
from ansible.module_utils.common import warnings as module_warnings
from ansible.module_utils.testing import patch_module_args


def run_module(main: Any, args: dict[str, Any], capsys: pytest.CaptureFixture[str],
               check_mode: bool = False, diff: bool = False) -> dict[str, Any]:
    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    # A module runs on the target, where warnings go into its result. Once a test has loaded controller code
    # (a filter plugin, ansible-doc), ansible marks the process as the controller and would print them instead.
    was_controller = _internal.is_controller
    _internal.is_controller = False
    # A deprecation (an option's deprecated alias) is kept process-wide: it would come back with every later run.
    module_warnings._global_deprecations.clear()
    try:
        with patch_module_args(args), pytest.raises(SystemExit):
            main()
    finally:
        _internal.is_controller = was_controller
    return json.loads(capsys.readouterr().out)


def deprecations_of(result: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    """(message, removal date, collection) of each deprecation a module run returned."""
    return [(d["event"]["msg"], d.get("date"), (d.get("deprecator") or {}).get("resolved_name"))
            for d in result.get("deprecations") or []]
