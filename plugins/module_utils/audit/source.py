"""The one layer through which the audit reads a host.

Everything the audit looks at (files, directory listings, symlinks, command
outputs, NVML readings) goes through a ``Source``. ``LiveSource`` reads the
running system and can record what it read into a capture; ``ReplaySource``
answers from such a capture. Parsers and rules never touch the system, so a
capture taken on a customer's 8-GPU Proxmox guest yields the same facts and
findings on a laptop.

Reads never raise: an absent path answers ``None``; an unreadable one answers
``None`` and is noted in ``problems`` so the report can say what it could not
see and why.

A capture built from material (material/capture.py, its ``from_material`` section)
holds only what the material held: there a path or command the capture lacks
was not seen, which says nothing of the host. Such a source is ``partial``;
``seen`` tells a gatherer whether an entry was in it, and a command it lacks
answers ``seen=False`` rather than "not installed".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_format import (
    CAPTURE_FORMAT,
    CaptureError,
    command_key,
    decode_bytes,
    encode_bytes,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.nvml_bounded import NVML_TIMEOUT_S, read_bounded
from ansible_collections.gpuhost.gpu.plugins.module_utils.process import run_bounded

if TYPE_CHECKING:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_privacy import Redactions


def _no_gpus(source: Source) -> list[dict[str, Any]]:
    return []


def _no_signals(source: Source) -> tuple[list[Any], list[Any]]:
    return [], []


def _no_transports(source: Source, gpus: dict[str, Any]) -> dict[str, Any] | None:
    return None


@dataclass(frozen=True)
class MaterialReaders:
    """What the audit reads of the NCCL outputs that only material holds (an NCCL topology dump, an NCCL_DEBUG=INFO
    log): the GPUs they show where nothing else lists GPUs, the dump's signs of an emulated topology (votes and
    notes, audit/virt.py ``Evidence``), and the log's P2P evidence per pair. Their readers and parsers live in
    material/ (material/nccl_readers.py) and come with the source that replays material, so that the module every
    audited host runs ships none of them. These defaults read nothing: a live host, or a capture of one, holds no
    such output."""

    gpus: Callable[[Source], list[dict[str, Any]]] = _no_gpus
    topology_signals: Callable[[Source], tuple[list[Any], list[Any]]] = _no_signals
    transports: Callable[[Source, dict[str, Any]], dict[str, Any] | None] = _no_transports


NO_MATERIAL = MaterialReaders()

# A command that does not finish in this time is reported, not waited for:
# a wedged GPU makes nvidia-smi hang for minutes (NVML's own deadline: audit/nvml_bounded.py).
COMMAND_TIMEOUT_S = 30


@dataclass(frozen=True)
class CommandResult:
    """What a command printed. ``rc`` is None when the binary was not found, or (``seen`` False) when
    partial material holds no output of the command."""

    rc: int | None
    stdout: str = ""
    stderr: str = ""
    seen: bool = True

    @property
    def ok(self) -> bool:
        return self.rc == 0


class Source:
    """Common bookkeeping: the problems met while reading."""

    # True when the source holds only part of what the audit reads (material): what it lacks was
    # not seen, rather than absent from the host.
    partial = False
    # The readers of what only material holds (MaterialReaders): none but where material is replayed.
    readers = NO_MATERIAL

    def __init__(self) -> None:
        self.problems: list[dict[str, str]] = []

    def seen(self, section: str, key: str = "") -> bool:
        """Whether the source holds the entry (``section`` files, dirs, commands or nvml; ``key`` the path or
        command_key): always, except in partial material."""
        return True

    def note_problem(self, what: str, error: str) -> None:
        entry = {"what": what, "error": error}
        if entry not in self.problems:
            self.problems.append(entry)

    # The interface; each implementation fills these in.
    def read_bytes(self, path: str) -> bytes | None:
        raise NotImplementedError

    def listdir(self, path: str) -> list[str] | None:
        raise NotImplementedError

    def realpath(self, path: str) -> str | None:
        raise NotImplementedError

    def readlink(self, path: str) -> str | None:
        raise NotImplementedError

    def run(self, argv: list[str]) -> CommandResult:
        raise NotImplementedError

    def nvml(self) -> dict[str, Any]:
        raise NotImplementedError

    def run_long(self, argv: list[str], timeout_s: float) -> CommandResult:
        """``run`` for a command that may take longer than COMMAND_TIMEOUT_S (a diagnostic run); a replayed
        source gives what was recorded, whatever the timeout."""
        return self.run(argv)

    def material(self, name: str) -> str | None:
        """What only material holds, by name (``nccl_topology.NCCL_TOPO_MATERIAL``: an NCCL topology dump a
        user pasted); a live host has none of it."""
        return None

    # Helpers shared by both.
    def read_text(self, path: str) -> str | None:
        data = self.read_bytes(path)
        if data is None:
            return None
        return data.decode("utf-8", errors="replace")

    def read_value(self, path: str) -> str | None:
        """A one-line sysfs attribute, stripped; None when absent or empty."""
        text = self.read_text(path)
        if text is None:
            return None
        text = text.strip()
        return text or None

    def exists(self, path: str) -> bool:
        return self.read_bytes(path) is not None or self.listdir(path) is not None


class LiveSource(Source):
    """Reads the running system; with ``record=True`` keeps what it read.

    ``recorded`` is everything read, as read; ``capture`` is what may leave the
    host: ``recorded`` with the VM configs that pass nothing through left out,
    secrets redacted (``capture_privacy``, plus ``redact``), and a line saying
    what it contains.
    """

    def __init__(self, record: bool = False, nvml_reader: Callable[[], dict[str, Any]] | None = None,
                 env: dict[str, str] | None = None, redact: Redactions | None = None,
                 nvml_timeout_s: float = NVML_TIMEOUT_S) -> None:
        super().__init__()
        self._nvml_timeout_s = nvml_timeout_s
        self.record = record
        self._nvml_reader = nvml_reader
        self._env = env
        self._redact = redact
        self._nvml_cache: dict[str, Any] | None = None
        self._ran: dict[str, CommandResult] = {}
        self.recorded: dict[str, Any] = {
            "format": CAPTURE_FORMAT,
            "files": {},
            "dirs": {},
            "links": {},
            "realpaths": {},
            "commands": {},
        }

    @property
    def capture(self) -> dict[str, Any]:
        # Imported here, not for a cycle (capture_privacy imports nothing of this module): a host compiles
        # every module it imports on every run, and only an audit that saves a capture needs this one.
        from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_privacy import finish_capture

        return finish_capture(self.recorded, self._redact)

    def _keep(self, kind: str, key: str, value: Any) -> None:
        if self.record:
            self.recorded[kind][key] = value

    def read_bytes(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            self._keep("files", path, None)
            return None
        except IsADirectoryError:
            return None
        except OSError as exc:
            error = f"{type(exc).__name__}: {exc.strerror or exc}"
            self.note_problem(path, error)
            self._keep("files", path, {"error": error})
            return None
        self._keep("files", path, encode_bytes(data))
        return data

    def listdir(self, path: str) -> list[str] | None:
        try:
            entries = sorted(os.listdir(path))
        except FileNotFoundError:
            self._keep("dirs", path, None)
            return None
        except NotADirectoryError:
            return None
        except OSError as exc:
            error = f"{type(exc).__name__}: {exc.strerror or exc}"
            self.note_problem(path, error)
            self._keep("dirs", path, {"error": error})
            return None
        self._keep("dirs", path, entries)
        return entries

    def realpath(self, path: str) -> str | None:
        resolved = os.path.realpath(path) if os.path.lexists(path) else None
        self._keep("realpaths", path, resolved)
        return resolved

    def readlink(self, path: str) -> str | None:
        try:
            target = os.readlink(path)
        except OSError:
            target = None
        self._keep("links", path, target)
        return target

    def run(self, argv: list[str]) -> CommandResult:
        # Several gatherers read dmesg; the host is asked once.
        key = command_key(argv)
        if key not in self._ran:
            self._ran[key] = self._run(argv)
        return self._ran[key]

    def run_long(self, argv: list[str], timeout_s: float) -> CommandResult:
        key = command_key(argv)
        if key not in self._ran:
            self._ran[key] = self._run(argv, timeout_s)
        return self._ran[key]

    def _run(self, argv: list[str], timeout_s: float | None = None) -> CommandResult:
        timeout_s = COMMAND_TIMEOUT_S if timeout_s is None else timeout_s  # read when called: tests lower it
        env = dict(self._env if self._env is not None else os.environ)
        # Parsers expect the C locale's numbers and English words.
        env.update({"LC_ALL": "C", "LANG": "C"})
        try:
            done = run_bounded(argv, timeout_s, env=env)
        except FileNotFoundError:
            result = CommandResult(None, "", f"{argv[0]}: command not found")
        except OSError as exc:
            result = CommandResult(126, "", f"{argv[0]}: {exc.strerror or exc}")
            self.note_problem(command_key(argv), result.stderr)
        else:
            if done.timed_out:
                # What a killed command printed is cut short: no parser reads half an output as a whole.
                left = f" ({done.note})" if done.note else ""
                result = CommandResult(124, "", f"{command_key(argv)}: no answer within {timeout_s:g} s{left}")
                self.note_problem(command_key(argv), result.stderr)
            else:
                result = CommandResult(done.rc, done.stdout.decode("utf-8", "replace"),
                                       done.stderr.decode("utf-8", "replace"))
        self._keep("commands", command_key(argv),
                   {"rc": result.rc, "stdout": result.stdout, "stderr": result.stderr})
        return result

    def nvml(self) -> dict[str, Any]:
        if self._nvml_cache is None:
            if self._nvml_reader is None:
                from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.nvml import read_nvml

                reader = read_nvml
            else:
                reader = self._nvml_reader
            self._nvml_cache = read_bounded(reader, self._nvml_timeout_s)
            if self._nvml_cache.get("kind") == "timeout":
                self.note_problem("NVML readings", str(self._nvml_cache.get("error")))
            if self.record:
                self.recorded["nvml"] = self._nvml_cache
        return self._nvml_cache


class ReplaySource(Source):
    """Answers from a capture; what the capture does not hold is absent."""

    def __init__(self, capture: dict[str, Any], readers: MaterialReaders = NO_MATERIAL) -> None:
        super().__init__()
        self.readers = readers
        if not isinstance(capture, dict) or capture.get("format") != CAPTURE_FORMAT:
            found = capture.get("format") if isinstance(capture, dict) else type(capture).__name__
            raise CaptureError(
                f"expected a capture with format {CAPTURE_FORMAT!r}, found {found!r}; "
                "make one with playbooks/capture.yml")
        self.capture = capture
        self.note = capture.get("note", "")
        self.partial = isinstance(capture.get("from_material"), dict)

    def seen(self, section: str, key: str = "") -> bool:
        if not self.partial:
            return True
        if section == "nvml":
            return self.capture.get("nvml") is not None
        return key in self._section(section)

    def _section(self, name: str) -> dict[str, Any]:
        section = self.capture.get(name) or {}
        if not isinstance(section, dict):
            raise CaptureError(f"capture section {name!r} must be a mapping, found {type(section).__name__}")
        return section

    def material(self, name: str) -> str | None:
        value = self._section("material").get(name)
        return value if isinstance(value, str) else None

    def read_bytes(self, path: str) -> bytes | None:
        value = self._section("files").get(path)
        if isinstance(value, dict) and "error" in value:
            self.note_problem(path, str(value["error"]))
            return None
        if value is None:
            return None
        try:
            return decode_bytes(value)
        except ValueError as exc:
            raise CaptureError(f"capture file entry {path!r}: {exc}") from None

    def listdir(self, path: str) -> list[str] | None:
        value = self._section("dirs").get(path)
        if isinstance(value, dict) and "error" in value:
            self.note_problem(path, str(value["error"]))
            return None
        if value is None:
            return None
        if not isinstance(value, list):
            raise CaptureError(f"capture dir entry {path!r} must be a list of names")
        return sorted(str(v) for v in value)

    def realpath(self, path: str) -> str | None:
        realpaths = self._section("realpaths")
        if path in realpaths:
            return self._path_entry("realpaths", path, realpaths[path])
        return path if self.exists(path) else None

    def readlink(self, path: str) -> str | None:
        return self._path_entry("links", path, self._section("links").get(path))

    @staticmethod
    def _path_entry(section: str, path: str, value: Any) -> str | None:
        if value is None or isinstance(value, str):
            return value
        raise CaptureError(f"capture {section} entry {path!r} must be a path or null, found {type(value).__name__}")

    def run(self, argv: list[str]) -> CommandResult:
        entry = self._section("commands").get(command_key(argv))
        if entry is None:
            if self.partial:
                return CommandResult(None, "", f"{command_key(argv)}: not in the material", seen=False)
            return CommandResult(None, "", f"{argv[0]}: not in the capture")
        if not isinstance(entry, dict):
            raise CaptureError(f"capture command entry {command_key(argv)!r} must be a mapping")
        rc = entry.get("rc")
        return CommandResult(rc if isinstance(rc, int) else None, str(entry.get("stdout", "")),
                             str(entry.get("stderr", "")))

    def nvml(self) -> dict[str, Any]:
        value = self.capture.get("nvml")
        if value is None:
            return {"error": "NVMLError_LibraryNotFound: NVML was not read in this capture"}
        if not isinstance(value, dict):
            raise CaptureError("capture section 'nvml' must be a mapping")
        return value
