"""report/files_plan.py: the one planner of the audit's and the analysis's report files."""

from __future__ import annotations

import os

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.files_plan import (
    ANALYSIS_INDEX,
    _path,
    planned_files,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.plot import nccl_sweeps

from tests.unit.captures import H100, audited


@pytest.mark.parametrize("directory", ["", "/", "reports", "reports/", "/srv/reports", "/srv/reports/"])
def test_paths_are_joined_as_os_path_joins_them(directory: str) -> None:
    assert _path(directory, "gpu-node-1.json") == os.path.join(directory, "gpu-node-1.json")


def test_the_audit_and_the_analysis_get_the_same_host_files_and_their_own_index() -> None:
    facts = audited(H100)
    audit = planned_files("/r", {"gpu-node-1": facts}, captures={"gpu-node-1": {"format": "x"}}, captures_dest="/c")
    analysis = planned_files("/r", {"gpu-node-1": facts}, ANALYSIS_INDEX, title="Offline analysis")
    assert list(audit) == ["/r/gpu-node-1-p2p.svg", "/c/gpu-node-1.json", "/r/gpu-node-1.json", "/r/gpu-node-1.md",
                           "/r/fleet.md"]
    assert list(analysis) == ["/r/gpu-node-1-p2p.svg", "/r/gpu-node-1.json", "/r/gpu-node-1.md", "/r/analysis.md"]
    assert audit["/r/gpu-node-1.md"] == analysis["/r/gpu-node-1.md"]
    assert analysis["/r/analysis.md"].startswith("# Offline analysis")
    assert planned_files("/r", {"gpu-node-1": facts}, None).keys() == {"/r/gpu-node-1-p2p.svg", "/r/gpu-node-1.json",
                                                                       "/r/gpu-node-1.md"}


def test_a_sweep_is_drawn_with_each_tuning_candidate_that_ran() -> None:
    rows = [{"size_bytes": 8, "busbw_gbps": 1.0}]
    facts = {"bench": {"nccl": {"results": rows, "tuning": {"candidates": [{"name": "ring", "results": rows},
                                                                           {"name": "tree", "results": []}]}}}}
    assert nccl_sweeps(facts) == {"as run": rows, "ring": rows}
    assert nccl_sweeps({"bench": {"nccl": {"results": []}}}) == {}
    assert nccl_sweeps({}) == {}
