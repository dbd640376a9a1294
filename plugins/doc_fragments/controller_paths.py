"""The option both controller-path lookups take (report_dir and controller_path), written once."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  base:
    description:
      - The directory a relative path is taken from instead of the one C(ansible-playbook) runs from, for a playbook
        whose user ran it from elsewhere (C(make -C) runs it from the repository, so C(playbooks/analyze.yml) passes
        the caller's directory). Empty, the directory C(ansible-playbook) runs from.
    type: str
    default: ""
"""
