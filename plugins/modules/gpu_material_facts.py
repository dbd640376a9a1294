#!/usr/bin/python
"""Ansible module: audit one host's support material (what gpu_host_facts bundle= runs) and return its facts."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_material_facts
short_description: Audit one host's support material and return the facts gpu_host_facts returns
description:
  - Audits support material instead of a live host, an C(nvidia-bug-report.log(.gz)), a pasted output, a capture, or a
    directory of pasted outputs, turned into a capture first, and returns the facts M(gpuhost.gpu.gpu_host_facts)
    returns, with a C(bundle) section saying what the material held and what the audit could not see.
  - This is what M(gpuhost.gpu.gpu_host_facts) runs for its O(bundle) option (its action plugin hands such a task to
    this module with the same arguments), so that the audit every host runs ships none of the code that reads support
    material. C(playbooks/analyze.yml) (M(gpuhost.gpu.gpu_analyze)) does this for many inputs at once and writes their
    reports.
version_added: "1.0.0"
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpuhost.gpu.attributes.diff_none
options:
  bundle:
    description:
      - Support material to audit, read where the module runs, either a directory of pasted outputs (every regular
        file directly in it; subdirectories are not read, and listed as not read), or one file (an
        C(nvidia-bug-report.log) or C(.log.gz), one pasted output, or a capture). Each file's kind is told from its
        content, never from its name.
      - A relative path is resolved against the directory the module runs in; one that does not exist fails with
        the absolute path tried.
    type: path
    required: true
  gather_subset:
    description: Which parts to gather, as for M(gpuhost.gpu.gpu_host_facts).
    type: list
    elements: str
    default: [all]
  tensor_parallel_gpus:
    description: GPU indexes that will share one tensor-parallel group, as for M(gpuhost.gpu.gpu_host_facts).
    type: list
    elements: int
    default: []
  min_bar1_mib:
    description: A BAR1 below this size (MiB) is reported as small.
    type: int
    default: 1024
  manifest:
    description:
      - The expected-host manifest of the host's class, as data, as for gpu_host_facts
        (docs/host_manifest.schema.json). Unset or empty, nothing is checked against a class.
    type: dict
  dcgm_diag:
    description:
      - Nothing is run here; a C(dcgmi diag --json) output in the material is read whatever this says. True also
        reads a C(dcgmi diag -r 1 --json) a saved capture recorded.
    type: bool
    default: false
  dcgm_diag_timeout:
    description: Ignored (nothing is run), accepted so that a gpu_host_facts task with O(bundle) takes it.
    type: int
    default: 300
  save_capture:
    description: Nothing is read from a host here, so nothing is saved; true only adds a warning that says so.
    type: bool
    default: false
  save_capture_path:
    description: Ignored, as O(save_capture) is.
    type: path
  capture_redact:
    description: Checked as M(gpuhost.gpu.gpu_host_facts) checks it (a bad pattern fails), and otherwise ignored.
    type: list
    elements: str
    default: []
author:
  - GPU host audit maintainers (@gpuhost)
notes:
  - Supports check mode; never changes anything.
"""

EXAMPLES = r"""
- name: Audit a customer's pasted outputs (topo -p2p r, topo -m, nccl-tests log ...) in one directory
  gpuhost.gpu.gpu_material_facts:
    bundle: "{{ lookup('gpuhost.gpu.controller_path', 'tickets/4711/pastes') }}"
  delegate_to: localhost

- name: The same, as gpu_host_facts spells it
  gpuhost.gpu.gpu_host_facts:
    bundle: "{{ lookup('gpuhost.gpu.controller_path', 'tickets/4711/nvidia-bug-report.log.gz') }}"
  delegate_to: localhost
"""

RETURN = r"""
ansible_facts:
  description: Facts under the key C(gpu_host), as M(gpuhost.gpu.gpu_host_facts) returns them, with their C(bundle)
    section.
  returned: always
  type: dict
facts_json:
  description: C(ansible_facts.gpu_host) again, as one JSON string.
  returned: always
  type: str
"""

import json

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.bundle_section import with_bundle
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_privacy import compile_redactions
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.facts import SubsetError, audit, resolve_subsets
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import CaptureError, ReplaySource
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.support_material import MaterialError, read_material
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.manifest_format import ManifestError, load
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import DEFAULT_MIN_BAR1_MIB, RuleOptions

from ansible.module_utils.basic import AnsibleModule


def get_argument_spec() -> dict:
    return {
        "bundle": {"type": "path", "required": True},
        "gather_subset": {"type": "list", "elements": "str", "default": ["all"]},
        "tensor_parallel_gpus": {"type": "list", "elements": "int", "default": []},
        "min_bar1_mib": {"type": "int", "default": DEFAULT_MIN_BAR1_MIB},
        "manifest": {"type": "dict"},
        "dcgm_diag": {"type": "bool", "default": False},
        "dcgm_diag_timeout": {"type": "int", "default": 300},
        "save_capture": {"type": "bool", "default": False},
        "save_capture_path": {"type": "path"},
        "capture_redact": {"type": "list", "elements": "str", "default": []},
    }


def main() -> None:
    module = AnsibleModule(argument_spec=get_argument_spec(), supports_check_mode=True)
    params = module.params
    try:
        subsets = resolve_subsets(params["gather_subset"])
        if params["capture_redact"]:
            compile_redactions(params["capture_redact"])
        material = read_material(params["bundle"])
        manifest = load(params["manifest"], "the manifest (option manifest)") if params["manifest"] else None
        options = RuleOptions(tensor_parallel_gpus=params["tensor_parallel_gpus"] or None,
                              min_bar1_mib=params["min_bar1_mib"], manifest=manifest)
        facts = with_bundle(audit(ReplaySource(material.capture), subsets, options, dcgm_diag=params["dcgm_diag"]),
                            material.capture, material)
    except (SubsetError, CaptureError, MaterialError, ManifestError) as exc:
        module.fail_json(msg=str(exc))
    if params["save_capture"]:
        module.warn("save_capture is ignored when replaying a capture or auditing a bundle: nothing was read from "
                    "this host")
    module.exit_json(changed=False, ansible_facts={"gpu_host": facts}, facts_json=json.dumps(facts, sort_keys=True))


if __name__ == "__main__":
    main()
