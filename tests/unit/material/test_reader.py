"""Material read from disk: captures, bug reports, directories of pastes, and what the facts carry of it."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.facts import audit, resolve_subsets
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.kinds import KINDS
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_readers import replay
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.reader import (
    BENCH_LOG_KINDS,
    MaterialError,
    read_material,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.section import with_material
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

from tests.paths import CAPTURES, FIXTURES
from tests.unit import schemas

BUG_REPORT = FIXTURES / "bug-reports" / "nvidia-bug-report_580_2xRTX-PRO-6000_kvm-guest_constructed.log"
NCCL_LOG = FIXTURES / "nccl" / ("transfer-test-in-all_reduce_perf-layout_incident-reconstructed_"
                                 "8xRTXPRO6000-vm-no-p2p.txt")
P2P_NS = FIXTURES / "nvidia-smi" / "topo-p2p-r_8gpu-vm-NS.txt"


def pastes(directory: Path) -> Path:
    directory.mkdir()
    (directory / "p2p.txt").write_text("$ nvidia-smi topo -p2p r\n" + P2P_NS.read_text())
    shutil.copy(NCCL_LOG, directory / "a-all_reduce.log")
    shutil.copy(NCCL_LOG, directory / "b-all_reduce.log")
    (directory / "older").mkdir()
    return directory


def facts_of(material):
    found = audit(replay(material.capture), resolve_subsets(["all"]), RuleOptions())
    return with_material(found, material.capture, material)


def test_the_benchmark_kinds_are_kinds_and_an_nccl_info_log_goes_to_the_audit() -> None:
    # An NCCL_DEBUG log alone holds no sweep to judge: the audit reads it as P2P evidence instead.
    assert set(BENCH_LOG_KINDS) < set(KINDS)
    assert "nccl-debug" not in BENCH_LOG_KINDS
    assert {step.module for step in BENCH_LOG_KINDS.values()} == {"nccl_bench", "gpu_p2p_probe"}


def test_a_capture_is_replayed_as_it_is_gzip_or_not(tmp_path: Path) -> None:
    source = CAPTURES / "baremetal-8xH100-SXM.json"
    packed = tmp_path / "node.json.gz"
    packed.write_bytes(gzip.compress(source.read_bytes()))
    for path in (source, packed):
        material = read_material(str(path))
        assert material.form == "capture" and material.capture == json.loads(source.read_text())
        assert "material" not in facts_of(material)


def test_a_capture_of_another_format_says_which_it_reads(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": "gpuhost-capture/0", "files": {}}))
    with pytest.raises(MaterialError, match=r"format 'gpuhost-capture/0'; this version reads 'gpuhost-capture/1'"):
        read_material(str(path))


def test_a_bug_report_is_a_bundle_of_one_and_its_facts_say_what_it_did_not_show() -> None:
    material = read_material(str(BUG_REPORT))
    assert material.form == "file" and material.capture["from_material"]["inputs"][0]["kind"] == "nvidia-bug-report"
    facts = facts_of(material)
    assert "NVML (GPU facts, P2P and topology from the driver's library)" in facts["material"]["not_seen"]
    assert facts["material"]["inputs"][0]["name"] == BUG_REPORT.name
    assert schemas.validator("facts").is_valid(facts)


def test_a_directory_is_read_flat_and_one_benchmark_log_per_step_is_taken(tmp_path: Path) -> None:
    material = read_material(str(pastes(tmp_path / "incident")))
    assert material.form == "directory"
    assert material.bench_logs == {"nccl": ("a-all_reduce.log", str(tmp_path / "incident" / "a-all_reduce.log"))}
    unmapped = {entry["name"]: entry["why"] for entry in facts_of(material)["material"]["unmapped"]}
    assert "older/" in unmapped and "not read" in unmapped["older/"]
    assert "a-all_reduce.log is this host's nccl_bench log" in unmapped["b-all_reduce.log"]
    # Not judged yet: the capture's own reason, which sends it to the benchmark phase.
    assert "gpu_bench_nccl_log" in unmapped["a-all_reduce.log"]


def test_a_capture_inside_a_directory_of_pastes_is_not_merged(tmp_path: Path) -> None:
    directory = pastes(tmp_path / "incident")
    shutil.copy(CAPTURES / "baremetal-8xH100-SXM.json", directory / "capture.json")
    material = read_material(str(directory))
    assert "capture.json" not in [entry["name"] for entry in material.capture["from_material"]["inputs"]]
    assert any(note["name"] == "capture.json" for note in material.notes)


def test_a_missing_relative_path_shows_the_absolute_path_tried(tmp_path: Path) -> None:
    with pytest.raises(MaterialError) as caught:
        read_material("tickets/none", str(tmp_path))
    assert str(caught.value).startswith(f"{tmp_path}/tickets/none does not exist (given as 'tickets/none', "
                                        f"relative to {tmp_path})")


def test_an_empty_directory_says_what_it_should_hold(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(MaterialError, match="holds no pasted output to read: expected files of tool output"):
        read_material(str(tmp_path / "empty"))
