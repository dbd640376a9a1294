"""Report files named after inventory hosts: which names may become file names.

Every module that writes ``<dir>/<host><suffix>`` on the controller goes through here, so that one rule
decides which host names are file names (reading and writing the files is writer.py's, whose names are
importable from here too):

- A host name becomes a file name as it is, or it is refused (never mapped to another name, which could
  collide with a real host's and would no longer lead back to the inventory). Refused: the empty name,
  ``.`` and ``..``, names with ``/`` (another directory, or an absolute path), NUL or any other
  non-printable character (control characters, line breaks), names that are not valid Unicode, names over
  ``MAX_HOST_BYTES`` bytes in UTF-8 (a file name stops at 255 bytes and the suffix needs room), and the
  names a caller reserves for its own files (``fleet`` for ``fleet.md``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ansible_collections.gpuhost.gpu.plugins.module_utils.files.writer import (
    ReportFileError,
    as_text,
    make_directory,
    read_existing,
    write_atomically,
)

__all__ = ["MAX_HOST_BYTES", "REPORT_MODE", "ReportFileError", "as_text", "check_host_names", "host_file",
           "host_name_problem", "make_directory", "parse_mode", "read_existing", "report_mode", "write_atomically"]

# The most a report's or a saved capture's permissions may be (writer.plan_files' ``at_most``): they hold kernel
# logs and command lines, DMI serials and UUIDs, VM configs, so only their owner reads them unless asked otherwise.
REPORT_MODE = 0o600

# Leaves room within the 255 bytes of a file name for the longest suffix a report takes ("-gate.json").
MAX_HOST_BYTES = 200
FIX = ("give the host an inventory name of letters, digits, '.', '-' and '_' (its address can stay in "
       "ansible_host)")


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


def parse_mode(value: object) -> int:
    """A module's ``mode`` option as permission bits: an octal string ("0600", "640"), or a number taken as the
    bits themselves, as Ansible's file modules take one (YAML reads an unquoted 0600 as 384). ``ReportFileError``
    for anything else and for bits beyond 0o777 (setuid, setgid, sticky: never for a report)."""
    if isinstance(value, int) and not isinstance(value, bool):
        bits = value
    elif isinstance(value, str) and value.strip() and all(c in "01234567" for c in value.strip()):
        bits = int(value.strip(), 8)
    else:
        bits = -1
    if not 0 <= bits <= 0o777:
        raise ReportFileError(f"mode {value!r}: expected permission bits as an octal string such as \"0600\" or "
                              "\"0640\" (at most 0777); quote it in YAML so that it stays octal")
    return bits


def report_mode(value: object = None) -> int:
    """The ``at_most`` mode of report files: ``value`` when a caller gives one (``parse_mode``), else REPORT_MODE."""
    return REPORT_MODE if value is None else parse_mode(value)
