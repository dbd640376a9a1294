"""Run a module's main() in-process, as Ansible would, and return its JSON result."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible.module_utils.testing import patch_module_args


def run_module(main: Any, args: dict[str, Any], capsys: pytest.CaptureFixture[str],
               check_mode: bool = False, diff: bool = False) -> dict[str, Any]:
    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with patch_module_args(args), pytest.raises(SystemExit):
        main()
    return json.loads(capsys.readouterr().out)
