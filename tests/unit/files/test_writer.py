"""The one writer of the modules' files: plans, diffs, check mode, modes, and writes whole or not at all."""

from __future__ import annotations

import ast
import errno
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import (
    ReportFileError,
    make_directory,
    plan_files,
    write_atomically,
    write_new,
)

from tests.paths import ROOT


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob(".*"))


@pytest.fixture
def umask_077():
    old = os.umask(0o077)
    yield
    os.umask(old)


def test_check_mode_plans_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "old.md").write_text("old\n")
    planned = plan_files({str(tmp_path / "new" / "a.json"): "{}\n", str(tmp_path / "old.md"): "new\n"})
    assert planned.commit(check_mode=True, create_dirs=True) == sorted([str(tmp_path / "new" / "a.json"),
                                                                         str(tmp_path / "old.md")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.md"]
    assert (tmp_path / "old.md").read_text() == "old\n"


def test_unchanged_content_is_no_change_and_leaves_the_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "r.md"
    path.write_text("same\n")
    os.utime(path, (1_000_000_000, 1_000_000_000))
    inode = path.stat().st_ino
    planned = plan_files({str(path): "same\n"})
    assert planned.changed == [] and planned.diff() == [] and planned.commit() == []
    assert path.stat().st_mtime == 1_000_000_000 and path.stat().st_ino == inode


def test_a_change_is_written_whole_and_diffed_from_the_one_read(tmp_path: Path) -> None:
    same, other, new = tmp_path / "same.md", tmp_path / "other.md", tmp_path / "new.md"
    same.write_text("same\n")
    other.write_bytes(b"latin-1 \xe9\n")
    planned = plan_files({str(same): "same\n", str(other): "utf-8 é\n", str(new): "fresh\n"})
    other.write_text("changed after the plan read it\n")  # the diff is of what the plan read
    assert planned.changed == [str(other), str(new)]
    assert planned.diff() == [
        {"before_header": str(other), "after_header": str(other), "before": "(10 bytes, not UTF-8 text)\n",
         "after": "utf-8 é\n"},
        {"before_header": str(new), "after_header": str(new), "before": "", "after": "fresh\n"}]
    assert planned.commit() == sorted([str(other), str(new)])
    assert other.read_text() == "utf-8 é\n" and new.read_text() == "fresh\n" and leftovers(tmp_path) == []


def test_a_file_that_is_not_utf8_is_warned_about_once(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_bytes(b"\xff")
    (tmp_path / "b.md").write_bytes(b"\xfe")
    said: list[str] = []
    plan_files({str(tmp_path / "a.md"): "a", str(tmp_path / "b.md"): "b"}, warn=said.append,
               warned=[str(tmp_path / "b.md")])
    assert said == [f"{tmp_path / 'a.md'} is not UTF-8 text; it is replaced by the new report"]


def test_the_mode_asked_for_is_applied_whatever_the_umask(tmp_path: Path, umask_077: None) -> None:
    new, kept = tmp_path / "new.prom", tmp_path / "kept.prom"
    kept.write_text("x\n")
    kept.chmod(0o644)
    planned = plan_files({str(new): "x\n", str(kept): "x\n"}, mode=0o640)
    assert planned.changed == [str(new), str(kept)]  # same bytes, another mode: a change
    planned.commit()
    assert mode_of(new) == 0o640 and mode_of(kept) == 0o640
    assert plan_files({str(new): "x\n", str(kept): "x\n"}, mode=0o640).changed == []


@pytest.mark.parametrize(("before", "after"), [(None, 0o600), (0o644, 0o600), (0o640, 0o600), (0o600, 0o600),
                                                (0o400, 0o400)])
def test_at_most_a_mode_drops_looser_bits_and_keeps_a_stricter_mode(tmp_path: Path, before: int | None,
                                                                    after: int) -> None:
    path = tmp_path / "h.json"
    if before is not None:
        path.write_text("x\n")
        path.chmod(before)
    planned = plan_files({str(path): "x\n"}, at_most=0o600)
    assert planned.changed == ([] if before == after else [str(path)])
    planned.commit()
    assert mode_of(path) == after
    assert plan_files({str(path): "x\n"}, at_most=0o600).changed == []


def test_without_a_mode_a_new_file_is_0644_and_a_replaced_one_keeps_its_own(tmp_path: Path, umask_077: None) -> None:
    new, kept = tmp_path / "new.md", tmp_path / "kept.md"
    kept.write_text("old\n")
    kept.chmod(0o600)
    plan_files({str(new): "a\n", str(kept): "b\n"}).commit()
    assert mode_of(new) == 0o644 and mode_of(kept) == 0o600


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_a_replaced_file_keeps_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "grub"
    path.write_text("old\n")
    os.chown(path, 4321, 4321)
    write_atomically(str(path), b"new\n")
    assert (path.stat().st_uid, path.stat().st_gid) == (4321, 4321) and path.read_text() == "new\n"


def failing_on_call(number: int):
    """A stand-in for an os call that fails with a full disk on its ``number``-th call."""
    calls = {"n": 0}

    def call(*args: Any, real: Any = None) -> Any:
        calls["n"] += 1
        if calls["n"] == number:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(*args)
    return call


def three_files(tmp_path: Path) -> dict[str, str]:
    for name in ("a.json", "b.json", "c.json"):
        (tmp_path / name).write_text(f"old {name}\n")
    return {str(tmp_path / name): f"new {name}\n" for name in ("a.json", "b.json", "c.json")}


def test_a_failure_while_writing_the_plan_replaces_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = three_files(tmp_path)
    planned = plan_files(files)
    real_fsync = os.fsync
    fail = failing_on_call(2)
    monkeypatch.setattr(os, "fsync", lambda fd: fail(fd, real=real_fsync))
    with pytest.raises(ReportFileError) as caught:
        planned.commit()
    monkeypatch.undo()
    assert str(caught.value) == f"cannot write {tmp_path / 'b.json'}: No space left on device"
    assert caught.value.reason == "No space left on device" and caught.value.written == []
    assert [Path(p).read_text() for p in files] == ["old a.json\n", "old b.json\n", "old c.json\n"]
    assert leftovers(tmp_path) == []


def test_a_rename_that_fails_says_what_was_replaced_before_it(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    files = three_files(tmp_path)
    real_replace = os.replace
    fail = failing_on_call(2)
    monkeypatch.setattr(os, "replace", lambda src, dst: fail(src, dst, real=real_replace))
    with pytest.raises(ReportFileError, match=f"cannot write {tmp_path / 'b.json'}: No space") as caught:
        plan_files(files).commit()
    monkeypatch.undo()
    assert caught.value.written == [str(tmp_path / "a.json")]
    assert [Path(p).read_text() for p in files] == ["new a.json\n", "old b.json\n", "old c.json\n"]
    assert leftovers(tmp_path) == []


def test_a_directory_that_cannot_be_made_stops_the_plan_before_any_file(tmp_path: Path) -> None:
    (tmp_path / "blocked").write_text("a file where a directory goes\n")
    files = {str(tmp_path / "r" / "a.md"): "a\n", str(tmp_path / "blocked" / "b.md"): "b\n"}
    with pytest.raises(ReportFileError, match=f"{tmp_path / 'blocked'} is not a directory, expected one") as caught:
        plan_files(files).commit(create_dirs=True)
    assert caught.value.written == [] and not (tmp_path / "r" / "a.md").exists() and leftovers(tmp_path) == []


def test_a_missing_directory_is_an_error_unless_asked_to_create_it(tmp_path: Path) -> None:
    path = str(tmp_path / "absent" / "capture.json")
    with pytest.raises(ReportFileError, match=f"cannot write {path}: No such file or directory") as caught:
        plan_files({path: b"{}"}).commit()
    assert caught.value.reason == "No such file or directory" and not (tmp_path / "absent").exists()
    assert plan_files({path: b"{}"}).commit(create_dirs=True) == [path]


def test_a_path_that_is_a_directory_is_refused_with_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "r.md").mkdir()
    with pytest.raises(ReportFileError) as caught:
        plan_files({str(tmp_path / "r.md"): "x"})
    assert str(caught.value) == f"{tmp_path / 'r.md'} is a directory, expected a report file or nothing there: " \
                                "remove or rename it"
    assert caught.value.path == str(tmp_path / "r.md") and caught.value.reason == "Is a directory"
    with pytest.raises(ReportFileError, match="it is a directory, expected a file or nothing there: remove or "):
        write_atomically(str(tmp_path / "r.md"), b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.md"] and not list((tmp_path / "r.md").iterdir())


def test_a_new_unique_file_is_private_and_whole(tmp_path: Path) -> None:
    first = write_new(b"one", prefix="gpuhost-capture-", suffix=".json", directory=str(tmp_path))
    second = write_new(b"two", prefix="gpuhost-capture-", suffix=".json", directory=str(tmp_path))
    assert first != second and Path(first).read_bytes() == b"one" and mode_of(Path(first)) == 0o600
    assert Path(first).name.startswith("gpuhost-capture-") and first.endswith(".json")


def test_a_directory_made_gets_the_mode_asked_for(tmp_path: Path, umask_077: None) -> None:
    make_directory(str(tmp_path / "textfiles"), mode=0o755)
    assert mode_of(tmp_path / "textfiles") == 0o755
    (tmp_path / "textfiles").chmod(0o700)
    make_directory(str(tmp_path / "textfiles"), mode=0o755)  # one that was there is left as it is
    assert mode_of(tmp_path / "textfiles") == 0o700


# Files of library/ and files/ that write without the writer, each with why.
WRITES_ELSEWHERE = {
    "plugins/modules/proxmox_vm_gpu.py": "the VM config's backup is created under a new name, never over an earlier "
                                         "one (open 'xb'); nothing is replaced",
    "plugins/modules/sglang_model_check.py": "writes to a pipe to its child process, not to a file",
}
WRITING_CALLS = {"replace", "rename", "mkstemp", "NamedTemporaryFile", "fdopen", "atomic_move", "write_text",
                 "write_bytes"}


def writes_in(path: Path) -> list[str]:
    """The calls of ``path`` that write or move files: os.replace and its kin, or open() for writing."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        modes = [arg.value for arg in node.args[1:2] if isinstance(arg, ast.Constant)] + \
            [kw.value.value for kw in node.keywords if kw.arg == "mode" and isinstance(kw.value, ast.Constant)]
        if name in WRITING_CALLS and not (name == "replace" and isinstance(node.func, ast.Attribute)
                                          and getattr(node.func.value, "id", "") != "os"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}()")
        elif name == "open" and any(isinstance(m, str) and set(m) & set("wax+") for m in modes):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: open(..., {modes[0]!r})")
    return found


def test_the_modules_write_their_files_through_the_writer_only() -> None:
    files = sorted([*(ROOT / "plugins" / "modules").glob("*.py"),
                    *(ROOT / "plugins" / "module_utils" / "files").glob("*.py")])
    found = [hit for path in files if path.name != "writer.py"
             and str(path.relative_to(ROOT)) not in WRITES_ELSEWHERE for hit in writes_in(path)]
    assert found == [], "write these through files/writer.py (plan_files, write_atomically, write_new):\n" + \
        "\n".join(found)
    assert writes_in(ROOT / "plugins" / "module_utils" / "files" / "writer.py")  # the scan sees writes at all
