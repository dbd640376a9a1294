"""scripts/gpu_check.py on a machine without a GPU: every step says what it did or why it could not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts as audit_facts

from tests.paths import ROOT


def test_without_a_gpu_the_audit_runs_and_the_gpu_steps_say_why_not(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--out", str(tmp_path),
                           "--skip", "p2p_probe", "--skip", "nccl"],
                          capture_output=True, text=True, timeout=120, check=False)
    results = json.loads((tmp_path / "gpu-check.json").read_text())
    steps = results["steps"]
    assert steps["audit"]["status"] == "ok", steps["audit"]
    assert json.loads((tmp_path / "audit.json").read_text())["schema_version"] == audit_facts.SCHEMA_VERSION
    assert json.loads((tmp_path / "capture.json").read_text())["format"] == "gpuhost-capture/1"
    assert steps["p2p_probe"] == {"status": "skipped", "reason": "--skip"}
    # No GPU here: nvidia-smi is missing or finds no GPU, the extension has nothing to build for.
    assert steps["nvidia_smi"]["status"] in ("failed", "differs")
    assert steps["cuda_ext"]["status"] == "skipped" and steps["cuda_ext"]["reason"]
    assert proc.returncode == 1, proc.stdout
    assert "everything in" in proc.stdout
