"""The shared rule for report files: which host names are file names, and writes that are whole or absent."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.files import report_files
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.report_files import (
    ReportFileError,
    check_host_names,
    host_file,
    host_name_problem,
    read_existing,
    write_atomically,
)
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(("host", "why"), [
    ("", "empty"), (".", "names a directory"), ("..", "names a directory"), ("../x", "contains '/'"),
    ("/etc/passwd", "contains '/'"), ("a\0b", "NUL"), ("a\nb", "U+000A"), ("a\x1bb", "U+001B"),
    ("a\u2028b", "U+2028"), ("a\ud800", "lone surrogate"), ("é" * 101, "202 bytes"), ("fleet", "keep for themselves"),
    (42, "not a string"),
])
def test_names_refused_and_why(host: object, why: str) -> None:
    problem = host_name_problem(host, reserved=("fleet",))
    assert problem is not None and why in problem
    with pytest.raises(ReportFileError, match="refused as a report file name"):
        check_host_names([host], reserved=("fleet",))


@pytest.mark.parametrize("host", ["gpu-1", "gpu-1.example.com", "b|odd", "with space", "ünï", "a\\b", ".x", "x" * 200])
def test_names_kept_as_they_are(host: str) -> None:
    assert host_name_problem(host, reserved=("fleet",)) is None
    assert host_file("/r", host, ".json") == f"/r/{host}.json"


@given(st.text())
def test_a_name_is_refused_or_stays_in_its_directory(host: str) -> None:
    """No name passes that could leave the directory, name the directory itself, or carry a control character."""
    try:
        path = host_file("/reports", host, ".md")
    except ReportFileError as err:
        assert "refused as a report file name" in str(err) and repr(host) in str(err)
        return
    assert os.path.dirname(os.path.normpath(path)) == "/reports"
    assert os.path.basename(path) == host + ".md"
    assert all(ch.isprintable() for ch in host) and len(path.encode()) < 255 + len("/reports/")


def test_every_refused_name_is_named_in_one_message() -> None:
    with pytest.raises(ReportFileError) as caught:
        check_host_names(["ok", "../a", "b/c"])
    assert "'../a'" in str(caught.value) and "'b/c'" in str(caught.value) and "'ok'" not in str(caught.value)
    assert "Nothing was written" in str(caught.value)


def test_read_existing(tmp_path: Path) -> None:
    assert read_existing(str(tmp_path / "none")) is None
    (tmp_path / "f").write_bytes(b"\xff")
    assert read_existing(str(tmp_path / "f")) == b"\xff"
    with pytest.raises(ReportFileError, match="is a directory, expected a report file"):
        read_existing(str(tmp_path))
    with pytest.raises(ReportFileError, match=f"{tmp_path / 'f'} is not a directory"):
        read_existing(str(tmp_path / "f" / "deeper" / "x.json"))


def test_write_is_whole_with_a_mode_of_0644_or_the_old_files(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    write_atomically(str(target), b"one")
    assert target.read_bytes() == b"one" and target.stat().st_mode & 0o777 == 0o644
    target.chmod(0o600)
    write_atomically(str(target), b"two")
    assert target.read_bytes() == b"two" and target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


@pytest.mark.parametrize("failing", ["fsync", "replace", "write"])
def test_a_failed_write_removes_its_temporary_file_and_keeps_the_old_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str) -> None:
    target = tmp_path / "r.json"
    target.write_bytes(b"old")

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if failing == "write":
        real_fdopen = os.fdopen

        class Full:
            def __init__(self, *args: object, **kwargs: object) -> None:
                self.handle = real_fdopen(*args, **kwargs)

            def __enter__(self) -> Full:
                return self

            def __exit__(self, *exc: object) -> None:
                self.handle.close()

            def __getattr__(self, name: str) -> object:
                return fail if name == "write" else getattr(self.handle, name)

        monkeypatch.setattr(report_files.os, "fdopen", Full)
    else:
        monkeypatch.setattr(report_files.os, failing, fail)
    with pytest.raises(ReportFileError, match=f"cannot write {target}: No space left on device"):
        write_atomically(str(target), b"new")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    assert target.read_bytes() == b"old"


def test_a_directory_in_place_of_the_file_is_not_replaced(tmp_path: Path) -> None:
    (tmp_path / "r.json").mkdir()
    with pytest.raises(ReportFileError, match="cannot write"):
        write_atomically(str(tmp_path / "r.json"), b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
