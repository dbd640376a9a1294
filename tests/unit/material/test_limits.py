"""Limits on reading material (material/limits.py through material/reader.py): gzip
decompressed once and within its limit, links inside a directory never followed, regular files only, bytes
and time bounded; each refusal a note saying which limit and how to raise it."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.material import capture, reader
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.gunzip import MIB
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.limits import LimitError, MaterialLimits, ReadBudget
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.reader import MaterialError, read_material

from tests.paths import FIXTURES
from tests.unit.material.test_gunzip import zeros_gzip

P2P_NS = FIXTURES / "nvidia-smi" / "topo-p2p-r_8gpu-vm-NS.txt"
BUG_REPORT = FIXTURES / "bug-reports" / "nvidia-bug-report_580_2xRTX-PRO-6000_kvm-guest_constructed.log"


def pastes(directory: Path) -> Path:
    directory.mkdir()
    (directory / "p2p.txt").write_text("$ nvidia-smi topo -p2p r\n" + P2P_NS.read_text())
    return directory


def not_used(material) -> dict[str, str]:
    return {note["name"]: note["why"] for note in material.notes}


def test_a_gzip_bomb_is_refused_naming_the_limit_and_how_to_raise_it(tmp_path: Path) -> None:
    (tmp_path / "bug.log.gz").write_bytes(zeros_gzip(64))
    limits = MaterialLimits(decompressed_bytes=4 * MIB)
    with pytest.raises(MaterialError, match=r"more than 4 MiB, the limit on decompressed bytes: not read; if the "
                                            r"material is trusted, raise the limit: gpu_analyze's max_decompressed_mib "
                                            r"option \(playbooks/analyze.yml: -e gpu_analyze_max_decompressed_mib=N\)"):
        read_material(str(tmp_path / "bug.log.gz"), limits=limits)
    material = read_material(str(pastes(tmp_path / "dir")), limits=limits)
    shutil.copy(tmp_path / "bug.log.gz", tmp_path / "dir" / "bug.log.gz")
    material = read_material(str(tmp_path / "dir"), limits=limits)
    assert "max_decompressed_mib" in not_used(material)["bug.log.gz"]
    assert material.capture["commands"]  # the paste beside it is read


def test_each_gzip_file_is_decompressed_once(tmp_path: Path, monkeypatch) -> None:
    calls = []

    def counted(data, limit):
        calls.append(limit)
        return real(data, limit)

    real = reader.gunzip
    monkeypatch.setattr(reader, "gunzip", counted)
    monkeypatch.setattr(capture, "gunzip", counted)
    (tmp_path / "nvidia-bug-report.log.gz").write_bytes(gzip.compress(BUG_REPORT.read_bytes()))
    material = read_material(str(tmp_path / "nvidia-bug-report.log.gz"))
    assert len(calls) == 1
    assert material.capture["from_material"]["inputs"][0]["gzip"] is True
    assert material.capture["from_material"]["inputs"][0]["kind"] == "nvidia-bug-report"


def test_a_link_inside_a_directory_is_not_followed(tmp_path: Path) -> None:
    directory = pastes(tmp_path / "ticket")
    (directory / "cmdline").symlink_to("/proc/cmdline")
    (directory / "kmsg").symlink_to("/proc/kmsg")  # followed, a read of it waits for the next kernel message
    (directory / "sneaky").symlink_to(P2P_NS)
    (directory / "up").symlink_to(tmp_path)
    material = read_material(str(directory))
    notes = not_used(material)
    assert notes["cmdline"].startswith("a symbolic link, not followed")
    assert notes["kmsg"].startswith("a symbolic link, not followed")
    assert notes["sneaky"].startswith("a symbolic link, not followed")
    assert notes["up"].startswith("a symbolic link, not followed")
    # The analyst's own kernel command line never reaches the capture.
    assert "/proc/cmdline" not in material.capture["files"]
    assert [entry["name"] for entry in material.capture["from_material"]["inputs"]] == ["p2p.txt"]


def test_a_fifo_is_not_read_and_does_not_hang(tmp_path: Path) -> None:
    directory = pastes(tmp_path / "ticket")
    os.mkfifo(directory / "kmsg")
    assert not_used(read_material(str(directory)))["kmsg"] == ("not a regular file (a FIFO), not read; give the output "
                                                               "saved in a plain file")


@pytest.mark.parametrize("path", ["/proc/kmsg", "/proc/cmdline", "/proc/self/", "/dev/zero", "/sys/kernel"])
def test_an_input_on_this_machines_pseudo_files_is_refused(path: str) -> None:
    with pytest.raises(MaterialError, match="this machine's own pseudo files, not material"):
        read_material(path)


def test_a_link_the_user_names_is_followed_but_not_onto_proc(tmp_path: Path) -> None:
    (tmp_path / "latest").symlink_to(pastes(tmp_path / "ticket"))
    assert read_material("latest", str(tmp_path)).form == "directory"
    (tmp_path / "mine").symlink_to("/proc/cmdline")
    with pytest.raises(MaterialError, match="lies on /proc"):
        read_material("mine", str(tmp_path))


def test_a_file_past_the_byte_limits_is_not_read(tmp_path: Path) -> None:
    directory = pastes(tmp_path / "ticket")
    (directory / "big.log").write_bytes(b"x" * (MIB + 1))
    (directory / "y.txt").write_bytes(b"y" * (6 * MIB // 10))
    (directory / "z.txt").write_bytes(b"z" * (MIB // 2))
    notes = not_used(read_material(str(directory), limits=MaterialLimits(file_bytes=MIB)))
    assert notes["big.log"] == ("not read: larger than 1 MiB, the limit on bytes read from one file; if the material "
                                "is trusted, raise the limit: gpu_analyze's max_file_mib option (playbooks/analyze.yml:"
                                " -e gpu_analyze_max_file_mib=N)")
    assert "y.txt" not in notes and "z.txt" not in notes
    together = not_used(read_material(str(directory), limits=MaterialLimits(input_bytes=MIB)))
    assert together["z.txt"].startswith("not read: the input's files together are larger than 1 MiB, the limit on "
                                        "bytes read from one input; if the material is trusted, raise the limit: "
                                        "gpu_analyze's max_input_mib option")
    assert "y.txt" not in together
    with pytest.raises(MaterialError, match="max_file_mib"):
        read_material(str(directory / "big.log"), limits=MaterialLimits(file_bytes=MIB))


def test_reading_past_the_time_limit_stops_with_the_limit_named(tmp_path: Path) -> None:
    now = [0.0]
    budget = ReadBudget(MaterialLimits(seconds=5), clock=lambda: now[0])
    (tmp_path / "a").write_bytes(b"a")
    assert budget.read(str(tmp_path / "a")) == b"a"
    now[0] = 6.0
    with pytest.raises(LimitError, match=r"took longer than 5 s, the limit on time per input; .* read_timeout"):
        budget.read(str(tmp_path / "a"))
