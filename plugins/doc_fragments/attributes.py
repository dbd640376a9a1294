"""The attributes every module of this collection declares, written once.

Every module runs in check mode and on POSIX targets; they differ only in whether they fill a diff.
A module lists ``ansible.builtin.action_common_attributes`` first (it describes each attribute), then
``gpuhost.gpu.attributes`` (fills a diff) or ``gpuhost.gpu.attributes.diff_none`` (does not).
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
"""

    DIFF_NONE = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""
