"""Make the project's module_utils and library importable as Ansible sees them.

Ansible ships module_utils to the target under ``ansible.module_utils``; the
tests put ours on that package's path so that modules and tests import the
same names, with no fallback imports in the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import settings

import ansible.module_utils

ROOT = Path(__file__).resolve().parent.parent
MODULE_UTILS = ROOT / "module_utils"
if str(MODULE_UTILS) not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.insert(0, str(MODULE_UTILS))
if str(ROOT / "library") not in sys.path:
    sys.path.insert(0, str(ROOT / "library"))

# Hypothesis' per-example deadline (200 ms) measures the machine's load, not the code: the unit tests run
# beside lint, the fleet and the EE test on two cores, where a 0.4 ms example once took 256 ms. Speed is
# measured by the benchmark scripts, never by a test.
settings.register_profile("gpuhost", deadline=None)
settings.load_profile("gpuhost")
