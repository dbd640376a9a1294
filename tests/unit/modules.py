"""Run a module's main() in-process, as Ansible would, and return its JSON result."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible.module_utils import _internal
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
    try:
        with patch_module_args(args), pytest.raises(SystemExit):
            main()
    finally:
        _internal.is_controller = was_controller
    return json.loads(capsys.readouterr().out)
