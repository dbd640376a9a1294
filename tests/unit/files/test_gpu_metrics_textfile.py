"""gpu_metrics_textfile: atomic writes, check mode, the heartbeat that is not a change, a missing directory."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import gpu_metrics_textfile
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.files import report_files

from ansible.module_utils.common import warnings as module_warnings
from tests.unit.modules import run_module

TEXT = ("# HELP gpuhost_gpus GPUs.\n# TYPE gpuhost_gpus gauge\ngpuhost_gpus 8\n"
        "# HELP gpuhost_last_audit_timestamp_seconds Audit time.\n"
        "# TYPE gpuhost_last_audit_timestamp_seconds gauge\ngpuhost_last_audit_timestamp_seconds {time}\n")


def text(time: int = 1000, gpus: int = 8) -> str:
    return TEXT.format(time=time).replace("gpuhost_gpus 8", f"gpuhost_gpus {gpus}")


@pytest.fixture(autouse=True)
def fresh_warnings() -> None:
    module_warnings._global_warnings.clear()


def run(capsys: pytest.CaptureFixture[str], path: Path, content: str, **options: Any) -> dict[str, Any]:
    check, diff = options.pop("check_mode", False), options.pop("diff", False)
    return run_module(gpu_metrics_textfile.main, {"path": str(path), "content": content, **options}, capsys,
                      check_mode=check, diff=diff)


def test_writes_whole_with_mode_0644_and_leaves_no_temporary_file(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gpuhost.prom"
    old_umask = os.umask(0o077)
    try:
        result = run(capsys, path, text())
    finally:
        os.umask(old_umask)
    assert result["changed"] and result["written"]
    assert path.read_text() == text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert os.listdir(tmp_path) == ["gpuhost.prom"]


def test_a_failed_write_keeps_the_old_file_and_says_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "gpuhost.prom"
    path.write_text(text())
    path.chmod(0o644)

    def no_space(*_args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report_files.os, "replace", no_space)
    result = run(capsys, path, text(gpus=4))
    assert result["failed"] and "No space left on device" in result["msg"] and "become" in result["msg"]
    assert "Traceback" not in result["msg"]
    assert path.read_text() == text() and os.listdir(tmp_path) == ["gpuhost.prom"]
    warned = run(capsys, path, text(gpus=4), unwritable="warn")
    assert not warned.get("failed") and not warned["changed"] and not warned["written"]
    assert any("not written" in str(w) for w in warned["warnings"])


def test_check_mode_writes_nothing_and_says_what_it_would(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sub" / "gpuhost.prom"
    result = run(capsys, path, text(), directory_missing="create", check_mode=True, diff=True)
    assert result["changed"] and not result["written"] and "would write" in result["msg"]
    assert result["diff"]["after"] == text() and result["diff"]["before"] == ""
    assert not (tmp_path / "sub").exists()
    (tmp_path / "sub").mkdir()
    path.write_text(text())
    path.chmod(0o644)
    result = run(capsys, path, text(gpus=4), check_mode=True)
    assert result["changed"] and path.read_text() == text()


def test_a_new_heartbeat_alone_is_written_but_no_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gpuhost.prom"
    assert run(capsys, path, text(1000))["changed"]
    later = run(capsys, path, text(2000), diff=True)
    assert not later["changed"] and later["written"] and "diff" not in later
    assert path.read_text() == text(2000)  # Prometheus sees the audit ran
    same = run(capsys, path, text(2000))
    assert not same["changed"] and not same["written"]
    assert not run(capsys, path, text(3000), check_mode=True)["changed"]
    changed = run(capsys, path, text(3000, gpus=7), diff=True)
    assert changed["changed"] and "gpuhost_gpus 7" in changed["diff"]["after"]


def test_a_file_of_another_mode_is_a_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gpuhost.prom"
    path.write_text(text())
    path.chmod(0o600)
    assert run(capsys, path, text())["changed"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


@pytest.mark.parametrize(("choice", "failed", "created"), [("skip", False, False), ("create", False, True),
                                                            ("fail", True, False)])
def test_a_missing_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str], choice: str, failed: bool,
                             created: bool) -> None:
    path = tmp_path / "node-exporter" / "gpuhost.prom"
    result = run(capsys, path, text(), directory_missing=choice)
    assert bool(result.get("failed")) == failed
    assert path.exists() == created
    if choice == "skip":
        assert not result["changed"] and "nothing written" in result["msg"]
    if choice == "create":
        assert result["changed"] and stat.S_IMODE(path.parent.stat().st_mode) == 0o755
    if failed:
        assert "does not exist" in result["msg"] and "directory_missing: create" in result["msg"]


def test_clear_errors_for_paths_in_the_way(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "gpuhost.prom").mkdir()
    result = run(capsys, tmp_path / "gpuhost.prom", text())
    assert result["failed"] and "is a directory" in result["msg"]
    (tmp_path / "file").write_text("")
    result = run(capsys, tmp_path / "file" / "gpuhost.prom", text())
    assert result["failed"] and "is not a directory" in result["msg"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_an_unwritable_directory_fails_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tmp_path.chmod(0o555)
    try:
        result = run(capsys, tmp_path / "gpuhost.prom", text())
    finally:
        tmp_path.chmod(0o755)
    assert result["failed"] and "Permission denied" in result["msg"] and "become" in result["msg"]
