"""Report names made from the file and directory names of material."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.report_files import MAX_HOST_BYTES, host_name_problem
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.names import report_names, safe_name, stem
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(("path", "expected"), [
    ("captures/gpu-node-1.json", "gpu-node-1"),
    ("/tickets/4711/nvidia-bug-report.log.gz", "nvidia-bug-report"),
    ("incident-42/", "incident-42"),
    ("pastes/topo -p2p r.txt", "topo--p2p-r"),
    ("weird name (copy) ü.log", "weird-name-copy-"),
    (".hidden.json", "hidden"),
    ("fleet.json", "fleet-input"),
    ("...", "input"),
    (".json", "json"),
])
def test_a_name_comes_from_the_file_name_made_safe(path: str, expected: str) -> None:
    assert safe_name(path) == expected


def test_storage_suffixes_go_but_the_name_stays() -> None:
    assert stem("a/b/host.example.com.log.gz") == "host.example.com"
    assert stem("report.gz") == "report"


def test_inputs_of_the_same_name_get_distinct_names_in_order() -> None:
    assert report_names(["a/nvidia-bug-report.log.gz", "b/nvidia-bug-report.log", "nvidia-bug-report-2.log",
                         "c/nvidia-bug-report.log.gz"]) == [
        "nvidia-bug-report", "nvidia-bug-report-2", "nvidia-bug-report-2-2", "nvidia-bug-report-3"]


def test_a_long_name_is_cut_with_room_for_a_counter() -> None:
    names = report_names(["x" * 300 + ".json"] * 12)
    assert len(set(names)) == 12
    assert all(len(name.encode()) <= MAX_HOST_BYTES for name in names)


@given(st.lists(st.text(min_size=0, max_size=300), min_size=1, max_size=8))
def test_any_paths_give_distinct_names_that_report_files_accept(paths: list[str]) -> None:
    names = report_names(paths)
    assert len(set(names)) == len(paths)
    assert all(host_name_problem(name, ("fleet",)) is None for name in names)


def test_a_suffix_ends_every_name_after_the_counter_within_the_length() -> None:
    names = report_names(["a/node.json", "b/node.json", "x" * 300], suffix=".analysis")
    assert names[:2] == ["node.analysis", "node-2.analysis"]
    assert names[2].endswith(".analysis") and len(names[2].encode()) <= MAX_HOST_BYTES - 8


@given(st.lists(st.text(min_size=0, max_size=300), min_size=1, max_size=8))
def test_any_paths_with_a_suffix_give_distinct_accepted_names_ending_in_it(paths: list[str]) -> None:
    names = report_names(paths, ("fleet", "analysis"), ".analysis")
    assert len(set(names)) == len(paths)
    assert all(name.endswith(".analysis") and host_name_problem(name, ("fleet", "analysis")) is None
               for name in names)
