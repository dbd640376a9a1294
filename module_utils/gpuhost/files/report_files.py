"""Report files named after inventory hosts: which names may become file names, reading what is there, and
writing atomically.

Every module that writes ``<dir>/<host><suffix>`` on the controller goes through here, so that one rule
decides which host names are file names and every write is whole or absent:

- A host name becomes a file name as it is, or it is refused (never mapped to another name, which could
  collide with a real host's and would no longer lead back to the inventory). Refused: the empty name,
  ``.`` and ``..``, names with ``/`` (another directory, or an absolute path), NUL or any other
  non-printable character (control characters, line breaks), names that are not valid Unicode, names over
  ``MAX_HOST_BYTES`` bytes in UTF-8 (a file name stops at 255 bytes and the suffix needs room), and the
  names a caller reserves for its own files (``fleet`` for ``fleet.md``).
- ``read_existing`` gives a file's bytes or None when there is none, and turns a directory in the way or an
  unreadable file into a ``ReportFileError`` that says what to do.
- ``write_atomically`` writes a temporary file in the same directory, fsyncs it, renames it over the target
  and fsyncs the directory; on any failure the temporary file is removed. A file it replaces keeps its mode.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable

# Leaves room within the 255 bytes of a file name for the longest suffix a report takes ("-gate.json").
MAX_HOST_BYTES = 200
DEFAULT_MODE = 0o644
TEMP_PREFIX = ".gpuhost-"
FIX = ("give the host an inventory name of letters, digits, '.', '-' and '_' (its address can stay in "
       "ansible_host)")


class ReportFileError(ValueError):
    """A report file that cannot be read or written, or a host name that cannot be a file name."""


def host_name_problem(host: object, reserved: Iterable[str] = ()) -> str | None:
    """Why ``host`` cannot be the stem of a report file name; None when it can."""
    if not isinstance(host, str):
        return f"it is a {type(host).__name__}, not a string"
    if host == "":
        return "it is empty"
    if host in (".", ".."):
        return "it names a directory, not a file"
    if "/" in host:
        return "it contains '/', which would put the file in another directory"
    if "\0" in host:
        return "it contains a NUL byte"
    try:
        size = len(host.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid Unicode (it holds a lone surrogate)"
    odd = next((ch for ch in host if not ch.isprintable()), None)
    if odd is not None:
        return f"it contains the non-printable character U+{ord(odd):04X}"
    if size > MAX_HOST_BYTES:
        return f"it is {size} bytes long in UTF-8, over the {MAX_HOST_BYTES} a report file name leaves for it"
    if host in set(reserved):
        return "it is the name of a file the reports keep for themselves"
    return None


def check_host_names(hosts: Iterable[object], reserved: Iterable[str] = ()) -> None:
    """Raise ``ReportFileError`` naming every host whose name cannot be a report file name, and why."""
    reserved = tuple(reserved)
    problems = [f"host name {host!r} refused as a report file name: {why}"
                for host in hosts for why in [host_name_problem(host, reserved)] if why]
    if problems:
        raise ReportFileError("; ".join(problems) + f". Nothing was written: {FIX}")


def host_file(directory: str, host: str, suffix: str, reserved: Iterable[str] = ()) -> str:
    """``<directory>/<host><suffix>``, once the host name is checked; the suffix is the caller's own."""
    check_host_names([host], reserved)
    return os.path.join(directory, host + suffix)


def _not_a_directory(path: str) -> str:
    """The first existing ancestor of ``path`` that is not a directory (what NotADirectoryError was about)."""
    parent = os.path.dirname(path)
    while parent and parent != os.path.dirname(parent) and not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    return parent or path


def _in_the_way(path: str) -> ReportFileError:
    blocker = _not_a_directory(path)
    return ReportFileError(f"{blocker} is not a directory, expected one to hold {os.path.basename(path)}: remove or "
                           "rename it, or choose another directory")


def read_existing(path: str) -> bytes | None:
    """The bytes of the file at ``path``; None when there is none."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ReportFileError(f"{path} is a directory, expected a report file or nothing there: remove or rename "
                              "it") from None
    except NotADirectoryError:
        raise _in_the_way(path) from None
    except OSError as err:
        raise ReportFileError(f"cannot read {path}: {err.strerror or err}; make it readable, or remove it") from None


def as_text(data: bytes | None) -> str | None:
    """A file's bytes as UTF-8 text; None when there are none or they are not UTF-8."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def make_directory(directory: str) -> None:
    try:
        os.makedirs(directory, exist_ok=True)
    except FileExistsError:
        raise _in_the_way(os.path.join(directory, "x")) from None
    except NotADirectoryError:
        raise _in_the_way(directory) from None
    except OSError as err:
        raise ReportFileError(f"cannot create the directory {directory}: {err.strerror or err}") from None


def write_atomically(path: str, data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` whole: readers see the old file or the new one, never a part."""
    directory = os.path.dirname(path) or "."
    if mode is None:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except OSError:
            mode = DEFAULT_MODE
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".tmp", dir=directory)
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), mode)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as err:
        raise ReportFileError(f"cannot write {path}: {err.strerror or err}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    _sync_directory(directory)


def _sync_directory(directory: str) -> None:
    """Make the rename durable; a file system that cannot fsync a directory still has the file."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
