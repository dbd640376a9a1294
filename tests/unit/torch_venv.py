"""The Python 3.11 venv with torch (CPU) that the harness tests run their ranks with.

``scripts/torch-venv.sh`` makes ``.cache/torch-venv`` on demand (a no-op once made). Where it
cannot be made, the tests that need it skip and say why; in CI (CI=true, as .ci/run runs) or with
GPUHOST_REQUIRE_TORCH_VENV=1 they fail instead, so CI cannot pass without running them.
"""

from __future__ import annotations

import functools
import os
import subprocess

import pytest

from tests import paths

ROOT = paths.ROOT
SCRIPT = ROOT / "scripts" / "torch-venv.sh"
PYTHON = ROOT / ".cache" / "torch-venv" / "bin" / "python"


@functools.lru_cache(maxsize=1)
def _make() -> tuple[bool, str]:
    try:
        proc = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=900, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{SCRIPT.name} could not run: {exc}"
    if proc.returncode != 0:
        return False, (proc.stderr.strip().splitlines() or ["no message"])[-1]
    return True, ""


def torch_python() -> str:
    """The interpreter path, or skip (fail when required) with the script's reason."""
    ok, reason = _make()
    if not ok:
        message = f"no torch venv for the harness tests: {reason}"
        if os.environ.get("GPUHOST_REQUIRE_TORCH_VENV") == "1" or os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return str(PYTHON)
