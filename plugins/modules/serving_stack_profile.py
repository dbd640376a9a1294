#!/usr/bin/python
"""Ansible module: validate a serving stack profile and return it with its optional keys filled in."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: serving_stack_profile
short_description: Validate a serving stack profile (versions of Python, torch, CUDA, extensions, SGLang)
description:
  - Checks the content of a profile file (one top-level key, C(serving_stack)) for every required key and type,
    and returns the profile with its optional keys filled in (C(packages), C(extensions), C(sglang.extras),
    C(sglang.constraints) as empty lists, C(torch.index_url) and C(source.subdir) as empty strings).
  - A failure names every problem, each with its key, and the file. Pure; reads and changes nothing.
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes.diff_none
options:
  data:
    description: The parsed content of the profile file.
    type: raw
    required: true
  source:
    description: Where the data came from, for messages (the file's path).
    type: str
    required: true
  expected_name:
    description: The name the profile must carry (a shipped profile's file name); empty accepts any.
    type: str
    default: ""
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode.
"""

EXAMPLES = r"""
- name: Validate the profile read from a file
  gpuhost.gpu.serving_stack_profile:
    data: "{{ lookup('ansible.builtin.file', 'stacks/h100.yml') | from_yaml }}"
    source: stacks/h100.yml
"""

RETURN = r"""
profile:
  description: The validated profile with its optional keys filled in.
  returned: success
  type: dict
summary:
  description: One line naming what the stack installs.
  returned: success
  type: str
  sample: "sm120-cu128: SGLang 0.5.10.post1 on torch 2.9.1 (CUDA 12.8), Python 3.12, archs 12.0"
problems:
  description: Every problem found, each naming its key.
  returned: failure
  type: list
  elements: str
"""

from ansible_collections.gpuhost.gpu.plugins.module_utils.serving.stack_profile import (
    ProfileError,
    summary,
    validate_file,
)

from ansible.module_utils.basic import AnsibleModule


def get_argument_spec() -> dict:
    return {
        "data": {"type": "raw", "required": True},
        "source": {"type": "str", "required": True},
        "expected_name": {"type": "str", "default": ""},
    }


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    source = module.params["source"]
    try:
        profile = validate_file(module.params["data"], source, module.params["expected_name"])
    except ProfileError as error:
        module.fail_json(
            msg=f"serving_stack: the profile {source} is not usable: " + "; ".join(error.problems)
            + ". Fix these keys (roles/serving_stack/vars/stacks/sm120-cu128.yml shows every one).",
            problems=error.problems,
        )
    module.exit_json(changed=False, profile=profile, summary=summary(profile))


if __name__ == "__main__":
    main()
