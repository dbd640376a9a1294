"""The gpu_host_facts module: options, capture handling, and its promise never to fail on a host."""

from __future__ import annotations

import json
import stat
import tempfile
from pathlib import Path

import gpu_host_facts
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.facts import SUBSETS, SubsetError, resolve_subsets
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import CAPTURE_FORMAT

from tests.paths import CAPTURES
from tests.unit.modules import run_module


@pytest.mark.parametrize(("requested", "expected"), [
    (["all"], list(SUBSETS)),
    (["gpus"], ["gpus"]),
    (["all", "!gpus"], ["virtualization", "iommu", "pci", "proxmox"]),
    (["!pci"], ["virtualization", "iommu", "gpus", "proxmox"]),
    ([], list(SUBSETS)),
])
def test_subsets(requested: list[str], expected: list[str]) -> None:
    assert resolve_subsets(requested) == expected


def test_unknown_subset_names_the_choices() -> None:
    with pytest.raises(SubsetError, match="expected all, virtualization, iommu, pci, gpus"):
        resolve_subsets(["hardware"])


def test_argument_spec_matches_documentation() -> None:
    import yaml

    documented = yaml.safe_load(gpu_host_facts.DOCUMENTATION)["options"]
    spec = gpu_host_facts.get_argument_spec()
    assert set(documented) == set(spec)
    for name, option in spec.items():
        assert documented[name]["type"] == option["type"], name
        assert documented[name].get("default") == option.get("default"), name


def test_live_run_on_this_machine_changes_nothing_and_never_fails(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(gpu_host_facts.main, {}, capsys, check_mode=True)
    assert result["changed"] is False and not result.get("failed")
    facts = result["ansible_facts"]["gpu_host"]
    assert {"virtualization", "iommu", "pci", "gpus", "p2p", "topology", "findings", "summary"} <= set(facts)
    assert facts["summary"]["verdict"] in ("fit", "fit, with warnings", "unfit")


def test_save_capture_then_replay_gives_the_same_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "capture.json"
    live = run_module(gpu_host_facts.main, {"save_capture": True, "save_capture_path": str(path)}, capsys)
    # The path only: the capture's content never travels in the result, which -v prints.
    assert live["capture_path"] == str(path) and "capture" not in live and live["changed"] is True
    saved = json.loads(path.read_text())
    assert saved["format"] == CAPTURE_FORMAT and "about" in saved and "redacted" in saved["contains"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.dumps(saved, sort_keys=True) not in json.dumps(live)
    replayed = run_module(gpu_host_facts.main, {"capture": str(path)}, capsys)
    assert replayed["ansible_facts"] == live["ansible_facts"]
    assert "capture_path" not in replayed


def test_saved_capture_without_a_path_goes_to_a_private_temporary_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = run_module(gpu_host_facts.main, {"save_capture": True}, capsys)
    path = Path(result["capture_path"])
    assert path.parent == tmp_path and path.name.startswith("gpuhost-capture-")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and result["changed"] is False
    assert json.loads(path.read_text())["format"] == CAPTURE_FORMAT


def test_check_mode_writes_no_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "capture.json"
    result = run_module(gpu_host_facts.main, {"save_capture": True, "save_capture_path": str(path)}, capsys,
                        check_mode=True)
    assert not path.exists() and "capture_path" not in result and "capture" not in result


def test_bad_redaction_fails_before_reading_the_host(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(gpu_host_facts.main, {"save_capture": True, "capture_redact": ["(unclosed"]}, capsys)
    assert result["failed"] is True
    assert "'(unclosed' is not a valid regular expression" in result["msg"] and "file path glob" in result["msg"]


def test_unwritable_capture_path_fails_with_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(gpu_host_facts.main, {"save_capture": True,
                                              "save_capture_path": str(tmp_path / "absent" / "capture.json")}, capsys)
    assert result["failed"] is True and "set save_capture_path to a writable file" in result["msg"]


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "is not valid JSON"),
    ('{"format": "something-else/9"}', "expected a capture with format 'gpuhost-capture/1'"),
    ('[1, 2]', "expected a capture with format"),
    (json.dumps({"format": CAPTURE_FORMAT, "files": ["not", "a", "mapping"]}), "must be a mapping"),
    (json.dumps({"format": CAPTURE_FORMAT, "files": {"/proc/cpuinfo": {"base64": "%%%"}}}), "bad base64"),
])
def test_bad_capture_fails_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
                                   message: str) -> None:
    path = tmp_path / "capture.json"
    path.write_text(content)
    result = run_module(gpu_host_facts.main, {"capture": str(path)}, capsys)
    assert result["failed"] is True
    assert message in result["msg"]


def test_missing_capture_file_fails_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(gpu_host_facts.main, {"capture": str(tmp_path / "absent.json")}, capsys)
    assert result["failed"] is True and "cannot read the capture" in result["msg"]


def _manifest(**gpus: object) -> dict[str, object]:
    return {"format": "gpuhost-manifest/1", "class": "rtxpro6000-server-8gpu", "gpus": gpus}


def test_manifest_option_judges_the_host_against_its_class(capsys: pytest.CaptureFixture[str]) -> None:
    capture = str(CAPTURES / "baremetal-8xRTXPRO6000-gpu-lost.json")
    result = run_module(gpu_host_facts.main, {"capture": capture, "manifest": _manifest(count=8)}, capsys)
    found = [f for f in result["ansible_facts"]["gpu_host"]["findings"] if f["id"] == "manifest_gpu_count"]
    assert [f["severity"] for f in found] == ["critical"]
    # Empty, as the gpu_audit role passes it for a host in no class: nothing is judged against a class.
    result = run_module(gpu_host_facts.main, {"capture": capture, "manifest": {}}, capsys)
    assert not [f for f in result["ansible_facts"]["gpu_host"]["findings"] if f["id"].startswith("manifest_")]


def test_wrong_manifest_fails_naming_the_key(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_module(gpu_host_facts.main, {"capture": str(CAPTURES / "baremetal-8xH100-SXM.json"),
                                              "manifest": _manifest(count="eight")}, capsys)
    assert result["failed"] is True
    assert result["msg"] == ("the manifest (option manifest): key gpus.count must be a whole number of at least 1, "
                             "found 'eight'")
