#!/usr/bin/python
"""Ansible module: check a model directory as the service user sees it before a server is started on it."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_check
short_description: Check that a model directory is there, readable by the service user, and of the expected size
description:
  - Walks O(path) as O(user) (the module forks and drops to that user's uid, gid and groups, so permissions,
    ACLs and unreadable parent directories count as they will for the server), lists the weight files
    (C(*.safetensors), C(*.bin), C(*.pt), C(*.pth), C(*.gguf), symbolic links followed) and opens each for reading.
    Only regular files are opened; a FIFO, socket or device by such a name is a problem, never waited on.
  - Compares their total size with O(expected_gib), the model's weights size (C(weights_gib) of the model to
    deploy), within O(tolerance).
  - Reads only; supports check mode.
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes.diff_none
options:
  path:
    description: The model directory, as given to SGLang's C(--model-path).
    type: path
    required: true
  user:
    description:
      - The user to check as, the service's C(User=). Needs root unless it is the user running the module.
      - Empty checks as the user running the module.
    type: str
    default: ""
  expected_gib:
    description:
      - The size of the weights the model to deploy gives, in GiB (2^30 bytes). 0 checks presence only.
      - A finite number, 0 or more.
    type: float
    required: true
  tolerance:
    description: How far the found size may be from O(expected_gib), as a fraction of it; a finite number, 0 or more.
    type: float
    default: 0.1
  fail_on_problem:
    description: Fail when a problem is found. With C(false) the problems are returned and the task passes.
    type: bool
    default: true
  tensor_parallel_size:
    description:
      - The C(--tp) the server will run with. When given, the all-reduces one decode step runs are counted from the
        directory's C(config.json) (RV(collectives)); omitted, nothing is counted.
    type: int
author:
  - GPU host audit maintainers (@gpuhost)
"""

EXAMPLES = r"""
- name: Check the model before the server starts
  gpuhost.gpu.sglang_model_check:
    path: /models/GLM-5-NVFP4
    user: sglang
    expected_gib: 405
"""

RETURN = r"""
ok:
  description: Whether the directory passed every check.
  returned: always
  type: bool
found_gib:
  description: Total size of the readable weight files, GiB.
  returned: always
  type: float
  sample: 404.6
expected_gib:
  description: O(expected_gib) as read.
  returned: always
  type: float
files:
  description: Number of readable weight files.
  returned: always
  type: int
  sample: 83
unreadable:
  description: Entries O(user) cannot read, relative to O(path) (directories end in C(/)).
  returned: always
  type: list
  elements: str
not_regular:
  description: Weight names under O(path) that are no regular file (a FIFO, a socket, a device), relative to O(path).
  returned: always
  type: list
  elements: str
problems:
  description: Each problem, with what was expected, what was found and what to do.
  returned: always
  type: list
  elements: str
collectives:
  description:
    - The all-reduces per decode step at O(tensor_parallel_size), from C(config.json) (model/config_json.py
      collectives_per_step) - C(status) C(modelled) with C(allreduces_per_step), C(allreduce_bytes), C(layers),
      C(hidden_size), C(mtp_layers) and C(source); or C(not_modelled) with C(reason) for an architecture or
      setting not modelled.
    - Null without O(tensor_parallel_size) or without a readable C(config.json) (RV(config_problem) says why).
  returned: always
  type: dict
model:
  description:
    - The model C(config.json) describes, served over O(tensor_parallel_size) GPUs, as the collection's one model
      type (model/shape.py Model) - C(name) (the directory's name), C(layers), C(allreduces_per_layer),
      C(hidden_size), C(dtype_bytes), C(tensor_parallel_size), C(extra_allreduces), C(notes).
    - Null where RV(collectives) is null or not modelled.
  returned: always
  type: dict
config_problem:
  description: Why C(config.json) could not be read; null when it was.
  returned: always
  type: str
"""

import json
import os
import pwd
import traceback

from ansible_collections.gpuhost.gpu.plugins.module_utils.model.config_json import (
    collectives_per_step,
    model_fields,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.shape import load_model
from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.model_dir import (
    Listing,
    judge,
    setting_problems,
    walk,
)

from ansible.module_utils.basic import AnsibleModule


def get_argument_spec() -> dict:
    return {
        "path": {"type": "path", "required": True},
        "user": {"type": "str", "default": ""},
        "expected_gib": {"type": "float", "required": True},
        "tolerance": {"type": "float", "default": 0.1},
        "fail_on_problem": {"type": "bool", "default": True},
        "tensor_parallel_size": {"type": "int"},
    }


def walk_as(module: AnsibleModule, path: str, user: str) -> Listing:
    """walk(path) with user's credentials, in a child process; the parent keeps its own."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        module.fail_json(msg=f"sglang_model_check: the user {user} does not exist; expected the service user "
                             "(created with the serving virtual environment). Create it first, or set the user.")
    if entry.pw_uid == os.geteuid():
        return walk(path)
    if os.geteuid() != 0:
        module.fail_json(msg=f"sglang_model_check: checking as {user} needs root (become: true); running as uid "
                             f"{os.geteuid()}.")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        status = 0
        try:
            os.setgroups(os.getgrouplist(user, entry.pw_gid))
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            payload = {"listing": walk(path).as_dict()}
        except BaseException:  # whatever happens, the parent must hear about it
            payload = {"error": traceback.format_exc(limit=3)}
            status = 1
        with os.fdopen(write_end, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(payload))
        os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as handle:
        raw = handle.read()
    os.waitpid(pid, 0)
    payload = None
    try:
        payload = json.loads(raw)
        return Listing.from_dict(payload["listing"])
    except (ValueError, KeyError, TypeError):
        module.fail_json(msg=f"sglang_model_check: walking {path} as {user} failed.",
                         error=(payload.get("error") if isinstance(payload, dict) else None) or raw[-2000:])
    raise AssertionError("unreachable")


def model(listing: Listing, counted: dict | None, tensor_parallel_size: int | None) -> dict | None:
    """The Model the counted config.json describes at that TP; None where nothing was counted."""
    if not counted or counted.get("status") != "modelled" or tensor_parallel_size is None:
        return None
    name = os.path.basename(os.path.normpath(listing.path)) or listing.path
    return load_model(model_fields(name, counted, tensor_parallel_size)).as_dict()


def collectives(listing: Listing, tensor_parallel_size: int | None) -> dict | None:
    """What config.json says one decode step all-reduces at that TP; a config that cannot be read says why."""
    if tensor_parallel_size is None or listing.config is None:
        return None
    try:
        return collectives_per_step(listing.config, tensor_parallel_size)
    except ModelError as exc:
        return {"status": "not_modelled", "reason": str(exc), "allreduces_per_step": None}


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    params = module.params
    refused = setting_problems(params["expected_gib"], params["tolerance"])
    if refused:
        module.fail_json(msg="sglang_model_check: " + "; ".join(refused) + ". Nothing was checked.")
    user = params["user"]
    listing = walk_as(module, params["path"], user) if user else walk(params["path"])
    verdict = judge(listing, params["expected_gib"], params["tolerance"], user)
    counted = collectives(listing, params["tensor_parallel_size"])
    result = {
        "changed": False,
        "ok": verdict.ok,
        "found_gib": verdict.found_gib,
        "expected_gib": verdict.expected_gib,
        "files": len(listing.files),
        "unreadable": listing.unreadable,
        "not_regular": listing.not_regular,
        "problems": verdict.problems,
        "collectives": counted,
        "model": model(listing, counted, params["tensor_parallel_size"]),
        "config_problem": listing.config_problem,
    }
    if verdict.ok:
        result["msg"] = (f"{params['path']}: {len(listing.files)} weight files, {verdict.found_gib:.1f} GiB "
                         f"(expected {verdict.expected_gib:g}), readable by {user or 'this user'}")
    else:
        result["msg"] = "sglang_model_check: " + " ".join(verdict.problems)
        if params["fail_on_problem"]:
            module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
