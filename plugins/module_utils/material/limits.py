"""Limits on reading material, which may be hostile: bytes read, bytes decompressed, time, and what
may be read at all (and the CPU time parsing one file may take, kept by material/parse_budget.py).

Material arrives from outside (a ticket's attachments, a customer's archive) and is read on the
controller or in an execution environment. Without limits, a directory entry linking to ``/proc/cmdline``
put the analyst's own kernel command line into the report (and changed the verdict), a link to
``/proc/kmsg`` hung the run, and a 1 MB gzip of zeros took 10 GB of memory. So:

- Inside a directory of pastes, symbolic links are never followed (a link can lead out of the material,
  into this machine's own files, and nothing in a paste needs one): the link is listed as not read.
  Only regular files are read (no FIFOs, sockets or devices). An input the user names may itself be a
  link (``latest -> ticket-4711/``): the user chose it; but an input on this machine's pseudo file
  systems (``/proc``, ``/sys``, ``/dev``) is refused, since its content is this machine's, never material.
- Files are opened with ``O_NOFOLLOW`` and ``O_NONBLOCK`` and checked again with ``fstat`` after opening
  (the entry cannot be swapped for a link or a FIFO in between), and read in pieces of at most the bytes
  left: at most ``file_bytes`` from one file, ``input_bytes`` from one input (a directory's files
  together), within ``seconds`` per input. gzip is undone by material/gunzip.py, capped at
  ``decompressed_bytes``.

Every message names the limit and how to raise it (``RAISE``), for material the user trusts.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from ansible_collections.gpuhost.gpu.plugins.module_utils.material.gunzip import (
    DEFAULT_MAX_DECOMPRESSED,
    MIB,
    limit_text,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.parse_budget import DEFAULT_PARSE_SECONDS

PSEUDO_FILE_SYSTEMS = ("/proc", "/sys", "/dev")
_PIECE = MIB

# The limit -> the gpu_analyze option and the playbooks/analyze.yml variable that set it.
RAISE = {
    "file_bytes": "max_file_mib",
    "input_bytes": "max_input_mib",
    "decompressed_bytes": "max_decompressed_mib",
    "seconds": "read_timeout",
    "parse_seconds": "parse_timeout",
}


@dataclass(frozen=True)
class MaterialLimits:
    # 256 MiB: above the largest nvidia-bug-report.log seen, uncompressed; a pasted output is kilobytes.
    file_bytes: int = 256 * MIB
    input_bytes: int = 1024 * MIB
    decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED
    # Reading and decompressing a large bug report takes seconds; a minute more is never material.
    seconds: float = 120.0
    # CPU seconds parsing one file may take (material/parse_budget.py): a 200 MB bug report takes about 30.
    parse_seconds: float = DEFAULT_PARSE_SECONDS

    @classmethod
    def from_options(cls, max_file_mib: int, max_input_mib: int, max_decompressed_mib: int,
                     read_timeout: float, parse_timeout: float = DEFAULT_PARSE_SECONDS) -> MaterialLimits:
        return cls(max_file_mib * MIB, max_input_mib * MIB, max_decompressed_mib * MIB, float(read_timeout),
                   float(parse_timeout))


def how_to_raise(limit: str) -> str:
    option = RAISE[limit]
    return (f"if the material is trusted, raise the limit: gpu_analyze's {option} option (playbooks/analyze.yml: "
            f"-e gpu_analyze_{option}=N)")


class LimitError(ValueError):
    """A file or input past one of the limits, or one that is not a regular file: not read. The message says
    which and what to do."""


class ReadBudget:
    """What one input may still read: bytes, and time until its deadline."""

    def __init__(self, limits: MaterialLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.left = limits.input_bytes
        self._clock = clock
        self._deadline = clock() + limits.seconds

    def check_time(self, path: str) -> None:
        if self._clock() > self._deadline:
            raise LimitError(f"{path}: not read: reading this input took longer than {self.limits.seconds:g} s, "
                             f"the limit on time per input; {how_to_raise('seconds')}")

    def read(self, path: str, follow: bool = False) -> bytes:
        """The bytes of the regular file at ``path`` (a link followed only when ``follow``: an input the user
        named); ``LimitError`` when it is not a regular file or goes past a limit."""
        self.check_time(path)
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
        try:
            before = os.stat(path) if follow else os.lstat(path)
        except OSError as exc:
            raise LimitError(f"cannot read {path}: {exc.strerror or exc}; make it readable") from None
        _regular(path, before)
        try:
            fd = os.open(path, flags)
        except OSError as exc:
            raise LimitError(f"cannot read {path}: {exc.strerror or exc}; make it readable (a symbolic link is "
                             "not followed inside a directory of material)") from None
        try:
            opened = os.fstat(fd)
            _regular(path, opened)
            if (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino):
                raise LimitError(f"{path}: not read: it changed while it was being opened; read it again")
            return self._pieces(fd, path)
        finally:
            os.close(fd)

    def _pieces(self, fd: int, path: str) -> bytes:
        cap = min(self.limits.file_bytes, self.left)
        pieces: list[bytes] = []
        size = 0
        while True:
            self.check_time(path)
            try:
                piece = os.read(fd, min(_PIECE, cap - size + 1))
            except BlockingIOError:
                raise LimitError(f"{path}: not read: reading it would wait (a pseudo file, not a file of "
                                 "material); copy the output into a plain file") from None
            except OSError as exc:
                raise LimitError(f"cannot read {path}: {exc.strerror or exc}; make it readable") from None
            if not piece:
                break
            size += len(piece)
            if size > cap:
                raise LimitError(self._too_large(path))
            pieces.append(piece)
        self.left -= size
        return b"".join(pieces)

    def _too_large(self, path: str) -> str:
        if self.left < self.limits.file_bytes:
            return (f"{path}: not read: the input's files together are larger than "
                    f"{limit_text(self.limits.input_bytes)}, the limit on bytes read from one input; "
                    f"{how_to_raise('input_bytes')}")
        return (f"{path}: not read: larger than {limit_text(self.limits.file_bytes)}, the limit on bytes read from "
                f"one file; {how_to_raise('file_bytes')}")


def _regular(path: str, found: os.stat_result) -> None:
    if stat.S_ISLNK(found.st_mode):
        raise LimitError(f"{path}: a symbolic link, not followed (a link can lead out of the material, into this "
                         "machine's own files); copy the file it points to into the material if it belongs there")
    if not stat.S_ISREG(found.st_mode):
        raise LimitError(f"{path}: not a regular file ({_file_type(found.st_mode)}), not read; give the output "
                         "saved in a plain file")


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "of another type"


def on_pseudo_file_system(path: str) -> str | None:
    """The pseudo file system ``path`` really lies on (links resolved), or None."""
    real = os.path.realpath(path)
    return next((top for top in PSEUDO_FILE_SYSTEMS if real == top or real.startswith(top + "/")), None)
