"""Make the project's collection and modules importable as Ansible sees them.

The repository is the collection gpuhost.gpu; collections/ansible_collections/gpuhost/gpu links to its root,
so modules and tests import the same names (ansible_collections.gpuhost.gpu.plugins.module_utils...), with no
fallback imports in the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT / "collections", ROOT / "plugins" / "modules"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

# Hypothesis' per-example deadline (200 ms) measures the machine's load, not the code: the unit tests run
# beside lint, the fleet and the EE test on two cores, where a 0.4 ms example once took 256 ms. Speed is
# measured by the benchmark scripts, never by a test.
settings.register_profile("gpuhost", deadline=None)
settings.load_profile("gpuhost")
