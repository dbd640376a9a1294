"""dcgmi diag --json of DCGM 3.x and 4.x: per-test and per-GPU verdicts, elided and cut pastes, garbage refused
with a message (never a traceback)."""

from __future__ import annotations

import contextlib
import json

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.dcgm_diag import (
    DcgmDiagParseError,
    looks_like_dcgm_diag,
    parse_dcgm_diag,
)
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES

DCGM = FIXTURES / "dcgm"


def test_the_3x_paste_of_dcgm_issue_139_reads_its_skips_and_counts_the_elided_category() -> None:
    diag = parse_dcgm_diag((DCGM / "3.x_r3_t400_skips_closed.json").read_text())
    assert diag["shape"] == "3.x" and diag["elided"] == 1
    assert [(t["category"], t["name"], t["status"]) for t in diag["tests"]] == [
        ("Integration", "PCIe", "skip"), ("Hardware", "GPU Memory", "skip"), ("Hardware", "Diagnostic", "skip"),
        ("Hardware", "EUD Test", "skip"), ("Stress", "Targeted Stress", "skip")]
    assert {r["gpu"] for t in diag["tests"] for r in t["results"]} == {0}


def test_the_same_paste_cut_mid_word_is_refused_with_what_to_do() -> None:
    text = (DCGM / "3.x_r3_t400_skips_cut.txt").read_text()
    assert looks_like_dcgm_diag(text)
    with pytest.raises(DcgmDiagParseError, match=r"cut short cannot be read as a verdict\..*dcgmi diag -r 1 --json"):
        parse_dcgm_diag(text)


def test_4x_failure_names_the_test_the_gpu_and_dcgm_s_message() -> None:
    diag = parse_dcgm_diag((DCGM / "4.x_r2_memory_fail_gpu2.json").read_text())
    assert (diag["shape"], diag["dcgm_version"], diag["driver_version"]) == ("4.x", "4.2.3", "570.148.08")
    memory = next(t for t in diag["tests"] if t["name"] == "memory")
    assert memory["status"] == "fail"
    [failed] = [r for r in memory["results"] if r["status"] == "fail"]
    assert failed["gpu"] == 2 and failed["warnings"][0]["error_id"] == 17
    assert "uncorrectable memory errors on GPU 2" in failed["warnings"][0]["text"]
    assert failed["info"] == ["Allocated 94893195264 bytes (98.3%)"]


def test_4x_warning_and_healthy_run() -> None:
    warn = parse_dcgm_diag((DCGM / "4.x_r1_software_warn_persistence.json").read_text())
    [software] = warn["tests"]
    assert software["status"] == "warn" and [r["gpu"] for r in software["results"] if r["status"] == "warn"] == [0]
    healthy = parse_dcgm_diag((DCGM / "4.x_r1_pass.json").read_text())
    assert {t["status"] for t in healthy["tests"]} == {"pass"}


def test_without_a_summary_the_worst_result_is_the_test_s_status_and_gpu_ids_lists_every_gpu() -> None:
    doc = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
        {"name": "Persistence Mode", "results": [{"gpu_ids": "0,1", "status": "Pass"},
                                                 {"gpu_id": "1", "status": "Warn",
                                                  "warnings": [{"warning": "off", "error_id": 29}]}]}]}],
        "version": "3.3.1"}}
    [test] = parse_dcgm_diag("[1,0]<stdout>:" + json.dumps(doc))["tests"]
    assert test["status"] == "warn"
    assert [(r["gpu"], r["gpus"]) for r in test["results"]] == [(None, [0, 1]), (1, [1])]


def test_an_unknown_status_word_is_none_not_a_guess() -> None:
    doc = {"DCGM Diagnostic": {"test_categories": [{"category": "X", "tests": [
        {"name": "t", "results": [{"entity_group": "GPU", "entity_id": 0, "status": "Maybe"}]}]}]}}
    [test] = parse_dcgm_diag(json.dumps(doc))["tests"]
    assert test["status"] is None and test["results"][0]["status"] is None


@pytest.mark.parametrize("text, says", [
    ("", "a JSON document"),
    ('{"nvbandwidth": {}}', 'root key "DCGM Diagnostic"'),
    ('{"DCGM Diagnostic": {"test_categories": 3}}', '"test_categories", a list'),
    ("[" * 5000 + "]" * 5000, "a JSON document"),
])
def test_what_is_not_a_diag_document_is_refused_plainly(text: str, says: str) -> None:
    with pytest.raises(DcgmDiagParseError, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_dcgm_diag(text)


@given(st.text())
def test_any_text_gives_a_document_or_the_parser_s_own_error(text: str) -> None:
    with contextlib.suppress(DcgmDiagParseError):
        parse_dcgm_diag(text)
    looks_like_dcgm_diag(text)


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                         st.sampled_from(["status", "results", "tests", "name", "gpu_id", "gpu_ids", "entity_id",
                                          "warnings", "warning", "info", "test_summary", "category", "error_id"]),
                         inner, max_size=5), max_leaves=30)


@given(st.lists(_JSON, max_size=4), st.sampled_from(["DCGM Diagnostic", "DCGM GPU Diagnostic"]))
def test_any_json_under_the_root_key_reads_or_is_refused_plainly(categories: list, root: str) -> None:
    try:
        diag = parse_dcgm_diag(json.dumps({root: {"test_categories": categories}}))
    except DcgmDiagParseError:
        return
    for test in diag["tests"]:
        assert test["status"] in (None, "pass", "fail", "warn", "skip", "not_run")
