"""scripts/bench_audit.py's count of the audit's host reports, which the fleet benchmark checks after each run: the
fleet table's own JSON (fleet.json, written beside fleet.md) is no host's report."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ansible_collections.gpuhost.gpu.plugins.module_utils.files.fleet_table import FLEET_JSON

from tests.paths import ROOT


def load_script():
    spec = importlib.util.spec_from_file_location("bench_audit", ROOT / "scripts" / "bench_audit.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_audit", module)
    spec.loader.exec_module(module)
    return module


def test_host_reports_are_the_hosts_json_reports_and_not_the_fleet_table(tmp_path: Path) -> None:
    for name in ("gpu-a.json", "gpu-a.md", "gpu-b.json", "gpu-b.md", "fleet.md", FLEET_JSON):
        (tmp_path / name).write_text("{}")
    found = sorted(path.name for path in load_script().host_reports(tmp_path))
    assert found == ["gpu-a.json", "gpu-b.json"]
