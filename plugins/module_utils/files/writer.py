"""The one writer of the files the modules write: what would change, the diff Ansible shows, and writes that are
whole or absent.

A module plans the files it means to leave, each a path, its bytes and its mode, and the plan says which change:

- ``plan_files`` reads each existing file once (its bytes and its mode) and compares. A file changes when its
  bytes differ, or when the plan asks for a mode and the file has another; a plan without a mode keeps the mode
  of the file it replaces (``DEFAULT_MODE`` for a new one, whatever the umask). A file replaced keeps its owner
  where the writer may give it away (as root: a boot loader's file edited with become stays root's).
- ``Plan.diff`` is Ansible's before/after list for ``--diff``, one entry per changed file, from that one read; a
  file that is not UTF-8 shows as a note of its size instead of its bytes.
- ``Plan.commit`` writes nothing in check mode and returns what it would write. Otherwise every changed file is
  first written to a temporary file in its own directory and synced, and only when all of them are is each
  renamed over its target, and the directories synced: a failure while writing (a full disk, a directory that
  cannot be written) replaces nothing and leaves no temporary file, and a rename that fails after others (which
  hardly happens: the temporary file sits in the same directory) says which files were replaced before it.
- ``write_atomically`` is the same for one file, and ``write_new`` a file of a new unique name (a temporary
  file the caller hands on).
- A run killed while staging (``kill -9``, the machine lost) leaves its temporary files behind: every commit that
  is not check mode first removes, in each directory it writes, the temporary files of runs that are gone
  (``stale_temp_files`` says which), and never those of a run still writing.

Every failure is a ``ReportFileError`` that names the path, what was expected there and what to do; ``reason``
holds the system's own words (``No space left on device``) for callers that phrase the message themselves.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

DEFAULT_MODE = 0o644
TEMP_PREFIX = ".gpuhost-"
TEMP_SUFFIX = ".tmp"
# A temporary file of a run on another machine (a report directory shared over NFS), or of a name that says no
# process (an earlier version's), is taken as left behind when it is this old: a run stages its files and renames
# them within one task, seconds for hundreds of reports, so an hour is far beyond any run still writing.
STALE_AGE_S = 3600


class ReportFileError(ValueError):
    """A file that cannot be read or written, or a host name that cannot be a file name."""

    def __init__(self, message: str, path: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason
        # The files a failed commit replaced before it stopped.
        self.written: list[str] = []


def _not_a_directory(path: str) -> str:
    """The first existing ancestor of ``path`` that is not a directory (what NotADirectoryError was about)."""
    parent = os.path.dirname(path)
    while parent and parent != os.path.dirname(parent) and not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    return parent or path


def _in_the_way(path: str) -> ReportFileError:
    blocker = _not_a_directory(path)
    return ReportFileError(f"{blocker} is not a directory, expected one to hold {os.path.basename(path)}: remove or "
                           "rename it, or choose another directory", path, os.strerror(errno.ENOTDIR))


def _read(path: str) -> tuple[bytes, os.stat_result] | None:
    """The bytes of the file at ``path`` and its status (mode, owner); None when there is none."""
    try:
        with open(path, "rb") as handle:
            return handle.read(), os.fstat(handle.fileno())
    except FileNotFoundError:
        return None
    except IsADirectoryError as err:
        raise ReportFileError(f"{path} is a directory, expected a report file or nothing there: remove or rename "
                              "it", path, err.strerror) from None
    except NotADirectoryError:
        raise _in_the_way(path) from None
    except OSError as err:
        raise ReportFileError(f"cannot read {path}: {err.strerror or err}; make it readable, or remove it",
                              path, err.strerror) from None


def read_existing(path: str) -> bytes | None:
    """The bytes of the file at ``path``; None when there is none."""
    found = _read(path)
    return None if found is None else found[0]


def as_text(data: bytes | None) -> str | None:
    """A file's bytes as UTF-8 text; None when there are none or they are not UTF-8."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def shown(data: bytes | None) -> str:
    """A file's bytes as a diff shows them: its text, a note when it is not UTF-8, nothing when there is none."""
    if data is None:
        return ""
    text = as_text(data)
    return text if text is not None else f"({len(data)} bytes, not UTF-8 text)\n"


def make_directory(directory: str, mode: int | None = None) -> None:
    """Create ``directory`` and its parents when missing; ``mode``, when given, is set on the directory created."""
    created = not os.path.lexists(directory)
    try:
        os.makedirs(directory, exist_ok=True)
        if created and mode is not None:
            os.chmod(directory, mode)
    except FileExistsError:
        raise _in_the_way(os.path.join(directory, "x")) from None
    except NotADirectoryError:
        raise _in_the_way(directory) from None
    except OSError as err:
        raise ReportFileError(f"cannot create the directory {directory}: {err.strerror or err}", directory,
                              err.strerror) from None


def _write_error(path: str, err: OSError) -> ReportFileError:
    if isinstance(err, IsADirectoryError):
        return ReportFileError(f"cannot write {path}: it is a directory, expected a file or nothing there: remove "
                               "or rename it", path, err.strerror)
    return ReportFileError(f"cannot write {path}: {err.strerror or err}", path, err.strerror)


def _machine() -> str:
    """This machine's name as it goes into a temporary file's name: no ``-`` (the name's separator), no ``/``."""
    name = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "._") else "_" for ch in os.uname().nodename)
    return name[:64] or "_"


def staging_prefix() -> str:
    """The start of this process's temporary files' names: ``.gpuhost-<machine>-<pid>-`` (then mkstemp's random
    part, then ``.tmp``), so that a later run can tell whether the run that staged one is still alive."""
    return f"{TEMP_PREFIX}{_machine()}-{os.getpid()}-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    except OSError:
        return True  # cannot tell: keep its file
    return True


def stale_temp_files(names: Iterable[str], ages: Mapping[str, float], machine: str | None = None,
                     alive: Callable[[int], bool] = _pid_alive) -> list[str]:
    """The names among ``names`` that are temporary files of a run that is gone, given each one's age in seconds.

    Why a pid and an age, not either alone: the pid tells at once that a run on this machine is gone (killed while
    staging, the usual case), but only on this machine, and a pid can be taken again by another process later;
    the age covers the rest (a run on another machine writing a shared directory, whose pids mean nothing here;
    a pid reused; a name of an earlier version that carries none), with a margin (``STALE_AGE_S``) that no run
    still writing comes near. A run still writing, here or elsewhere, never loses its files: that would make its
    rename fail.
    """
    machine = _machine() if machine is None else machine
    stale = []
    for name in names:
        if not (name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)) or name not in ages:
            continue
        parts = name[len(TEMP_PREFIX):-len(TEMP_SUFFIX)].rsplit("-", 2)
        ours = len(parts) == 3 and parts[0] == machine and parts[1].isdigit() and int(parts[1]) > 0
        if ages[name] > STALE_AGE_S or (ours and not alive(int(parts[1]))):
            stale.append(name)
    return stale


def remove_stale_temp_files(directory: str) -> list[str]:
    """Remove the temporary files that runs gone left in ``directory`` (``stale_temp_files``); the paths removed.
    A directory that cannot be listed, or a file already gone, is no error: this is cleaning up, not the write."""
    try:
        with os.scandir(directory) as entries:
            ages = {entry.name: time.time() - entry.stat(follow_symlinks=False).st_mtime for entry in entries
                    if entry.name.startswith(TEMP_PREFIX) and entry.name.endswith(TEMP_SUFFIX)
                    and entry.is_file(follow_symlinks=False)}
    except OSError:
        return []
    removed = []
    for name in stale_temp_files(sorted(ages), ages):
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(directory, name))
            removed.append(os.path.join(directory, name))
    return removed


def _stage(directory: str, data: bytes, mode: int, owner: tuple[int, int] | None = None,
           prefix: str | None = None, suffix: str = TEMP_SUFFIX, target: str | None = None) -> str:
    """A new file in ``directory`` holding ``data``, synced, of ``mode`` (and ``owner`` where allowed); named
    ``staging_prefix()...`` unless a ``prefix`` is given."""
    tmp = None
    prefix = staging_prefix() if prefix is None else prefix
    try:
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), mode)
            made = os.fstat(out.fileno())
            if owner is not None and owner != (made.st_uid, made.st_gid):
                # Root rewriting another user's file leaves it theirs; anyone else cannot give it away.
                with contextlib.suppress(PermissionError):
                    os.fchown(out.fileno(), *owner)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
    except OSError as err:
        _discard([tmp])
        raise _write_error(target or os.path.join(directory, prefix + "*" + suffix), err) from None
    return tmp


def _discard(paths: Iterable[str | None]) -> None:
    for path in paths:
        if path is not None:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _sync_directory(directory: str) -> None:
    """Make the rename durable; a file system that cannot fsync a directory still has the file."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@dataclass(frozen=True)
class PlannedFile:
    """One file of a plan: what it should hold and what it holds now (``before`` None: there is no file)."""

    path: str
    data: bytes
    mode: int | None
    before: bytes | None
    before_mode: int | None
    before_owner: tuple[int, int] | None

    @property
    def mode_differs(self) -> bool:
        return self.before is not None and self.mode is not None and self.before_mode != self.mode

    @property
    def changed(self) -> bool:
        return self.before != self.data or self.mode_differs

    @property
    def directory(self) -> str:
        return os.path.dirname(self.path) or "."

    @property
    def mode_to_write(self) -> int:
        if self.mode is not None:
            return self.mode
        return self.before_mode if self.before_mode is not None else DEFAULT_MODE


class Plan:
    """The files a module means to leave, as ``plan_files`` found them."""

    def __init__(self, files: list[PlannedFile]) -> None:
        self.files = files

    @property
    def changes(self) -> list[PlannedFile]:
        return [planned for planned in self.files if planned.changed]

    @property
    def changed(self) -> list[str]:
        """The paths that change, in the order planned."""
        return [planned.path for planned in self.changes]

    def diff(self) -> list[dict[str, str]]:
        """Ansible's before/after of each changed file."""
        return [{"before_header": planned.path, "after_header": planned.path, "before": shown(planned.before),
                 "after": planned.data.decode("utf-8", "replace")} for planned in self.changes]

    def commit(self, check_mode: bool = False, create_dirs: bool = False) -> list[str]:
        """Write every changed file (in check mode none); the paths written, or that would be, sorted. With
        ``create_dirs`` a missing directory is created first. On failure the ``ReportFileError``'s ``written``
        holds the files replaced before it."""
        if not check_mode:
            # Every directory of the plan, written this time or not: a re-run that changes nothing cleans up too.
            for directory in dict.fromkeys(planned.directory for planned in self.files):
                remove_stale_temp_files(directory)
            write_all(self.changes, create_dirs)
        return sorted(self.changed)


def _planned(path: str, content: str | bytes, mode: int | None, at_most: int | None = None) -> PlannedFile:
    data = content.encode("utf-8") if isinstance(content, str) else content
    found = _read(path)
    if found is None:
        return PlannedFile(path, data, at_most if mode is None and at_most is not None else mode, None, None, None)
    before, info = found
    before_mode = stat.S_IMODE(info.st_mode)
    if mode is None and at_most is not None:
        # Never looser than asked, and a file someone made stricter stays so: only the bits beyond go.
        mode = before_mode & at_most
    return PlannedFile(path, data, mode, before, before_mode, (info.st_uid, info.st_gid))


def plan_files(files: Mapping[str, str | bytes], mode: int | None = None, warn: Callable[[str], None] | None = None,
               warned: Iterable[str] = (), at_most: int | None = None) -> Plan:
    """The plan of ``files`` (path -> text or bytes), each of ``mode`` (None: the mode of the file it replaces).

    ``at_most`` instead of ``mode``: the most a file's permissions may be. A new file gets it; an existing one
    keeps its mode less the bits beyond it (a 0644 report becomes 0600 under 0600, a 0400 one stays 0400).

    With ``warn``, an existing file that is not UTF-8 text is said to be replaced, unless it is in ``warned`` (its
    reader said so already). ``ReportFileError`` when a file cannot be read, or a directory is in its place.
    """
    warned = set(warned)
    planned = []
    for path, content in files.items():
        entry = _planned(path, content, mode, at_most)
        if warn and entry.before is not None and as_text(entry.before) is None and path not in warned:
            warn(f"{path} is not UTF-8 text; it is replaced by the new report")
        planned.append(entry)
    return Plan(planned)


def write_all(files: list[PlannedFile], create_dirs: bool = False) -> list[str]:
    """Write ``files`` all or none while writing, then rename each over its target; the paths replaced."""
    staged: list[tuple[str, PlannedFile]] = []
    try:
        for planned in files:
            if create_dirs:
                make_directory(planned.directory)
            staged.append((_stage(planned.directory, planned.data, planned.mode_to_write, planned.before_owner,
                                  target=planned.path), planned))
    except ReportFileError:
        _discard(tmp for tmp, _unused in staged)
        raise
    done: list[str] = []
    for index, (tmp, planned) in enumerate(staged):
        try:
            os.replace(tmp, planned.path)
        except OSError as err:
            _discard(tmp for tmp, _unused in staged[index:])
            error = _write_error(planned.path, err)
            error.written = done
            raise error from None
        done.append(planned.path)
    for directory in dict.fromkeys(planned.directory for _unused, planned in staged):
        _sync_directory(directory)
    return done


def write_atomically(path: str, data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` whole: readers see the old file or the new one, never a part. Without a
    mode, a file replaced keeps its own (and its owner, where allowed), a new one gets ``DEFAULT_MODE``."""
    try:
        info = os.stat(path)
        before_mode, owner = stat.S_IMODE(info.st_mode), (info.st_uid, info.st_gid)
    except OSError:
        before_mode, owner = None, None
    remove_stale_temp_files(os.path.dirname(path) or ".")
    write_all([PlannedFile(path, data, mode, None, before_mode, owner)])


def write_new(data: bytes, prefix: str, suffix: str, mode: int = 0o600, directory: str | None = None) -> str:
    """A new file of a unique name holding ``data``, in ``directory`` (the system's temporary one by default)."""
    return _stage(directory or tempfile.gettempdir(), data, mode, prefix=prefix, suffix=suffix)
