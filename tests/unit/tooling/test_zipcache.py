"""tests/zipcache/gpuhost_zipcache.py, the bytecode cache the molecule containers and the fleet tests load: a module
imported from a zip is compiled once, then loaded from the cache with the new archive's path in its code; changed
source is compiled again; a damaged cache entry, or a cache directory others may write, is compiled around.

Each case runs a fresh interpreter with tests/zipcache on PYTHONPATH, as those runs do, importing a module from an
archive in a new directory each time, as AnsiballZ does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.paths import ROOT

ZIPCACHE = ROOT / "tests" / "zipcache"
# Imports payload.member from the archive given, raises in it, and prints where the traceback says the code is,
# what it returned and whether the cache was in use.
PROBE = """
import json, sys, traceback, zipimport
sys.path.insert(0, sys.argv[1])
import payload.member as member
try:
    member.fail()
except RuntimeError:
    where = traceback.extract_tb(sys.exc_info()[2])[-1].filename
print(json.dumps({"value": member.VALUE, "where": where,
                  "cached": getattr(zipimport._compile_source, "gpuhost_zipcache", False)}))
"""


def archive(directory: Path, value: str) -> Path:
    directory.mkdir(parents=True)
    path = directory / "ansible_payload.zip"
    with zipfile.ZipFile(path, "w") as payload:
        payload.writestr("payload/__init__.py", "")
        payload.writestr("payload/member.py", f"VALUE = {value!r}\n\ndef fail():\n    raise RuntimeError(VALUE)\n")
    return path


def imported(path: Path, tmpdir: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ZIPCACHE), "TMPDIR": str(tmpdir)}
    run = subprocess.run([sys.executable, "-c", PROBE, str(path)], env=env, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def entries(tmpdir: Path) -> list[Path]:
    return sorted((tmpdir / f"gpuhost-zipcache-{os.geteuid()}").glob("*"))


def test_a_member_is_compiled_once_then_loaded_with_the_new_archives_path(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    first = imported(archive(tmp_path / "run1", "one"), tmpdir)
    assert first["cached"] and first["value"] == "one"
    kept = entries(tmpdir)
    assert len(kept) == 2  # payload/__init__.py and payload/member.py
    second_archive = archive(tmp_path / "run2", "one")
    second = imported(second_archive, tmpdir)
    assert second["value"] == "one" and entries(tmpdir) == kept
    # The code loaded from the cache names this run's archive, as code compiled from it would.
    assert second["where"] == f"{second_archive}/payload/member.py"


def test_changed_source_is_compiled_again(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    imported(archive(tmp_path / "run1", "one"), tmpdir)
    changed = imported(archive(tmp_path / "run2", "two"), tmpdir)
    assert changed["value"] == "two" and len(entries(tmpdir)) == 3


def test_a_damaged_entry_is_compiled_around(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    imported(archive(tmp_path / "run1", "one"), tmpdir)
    for entry in entries(tmpdir):
        entry.write_bytes(b"not bytecode")
    assert imported(archive(tmp_path / "run2", "one"), tmpdir)["value"] == "one"


def test_a_cache_others_may_write_is_not_used(tmp_path):
    tmpdir = tmp_path / "tmp"
    shared = tmpdir / f"gpuhost-zipcache-{os.geteuid()}"
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    assert imported(archive(tmp_path / "run1", "one"), tmpdir)["value"] == "one"
    assert entries(tmpdir) == []
