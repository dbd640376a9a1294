"""What a saved capture keeps of a host, and what it leaves out.

A capture is sent with a support request, so it carries only what the audit
needs and says what it holds. By default:

* of the Proxmox VM configs, only those of VMs that pass a PCI device through
  (a ``hostpciN`` key, pending changes included) are kept; each other one is
  replaced by a marker line, so that a replay still counts the VM and finds
  that it passes nothing through;
* in the kept configs, every key named like a secret (cloud-init's
  ``cipassword`` and ``sshkeys``, anything with pass, secret, token,
  credential, private or apikey in its name) keeps its name, with the value
  replaced by ``<redacted>``; so does a secret written inside another value
  (``password=`` in QEMU ``args``, "root password: ..." in the description,
  the ``data`` of ``-object secret``), with ``redact_secret_values``.

The caller can redact more (``compile_redactions``): an item starting with
``/`` is a glob of file paths whose content is replaced by ``<redacted>``; any
other item is a regular expression whose matches are replaced by
``<redacted>`` in every text the capture holds (file contents, binary ones
included, directory listings, link targets, resolved paths, read errors,
command outputs, NVML strings), but not in the paths and command lines that
key them, which a replay looks entries up by; the note says so. The top-level
``about`` line and ``contains`` mapping say what the capture holds and what was
left out, and how.

Pure: a capture in, a new capture out; nothing here reads the system.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_format import (
    CaptureError,
    decode_bytes,
    encode_bytes,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import (
    QEMU_SERVER_DIR,
    REDACTED,
    SECRET_KEY,
    parse_vm_config,
    passes_pci_through,
    redact_secret_values,
)

NOT_CAPTURED = "#<not captured: this VM passes no PCI device through>\n"
VM_CONFIG_PATH = re.compile(r"^" + re.escape(QEMU_SERVER_DIR) + r"/(?P<vmid>\d+)\.conf$")
# A `key: value` line of any section of a qemu-server config ([PENDING], snapshots, [special:cloudinit]).
CONFIG_LINE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9_\-]*)(?P<sep>:[ \t]*)(?P<value>\S.*?)(?P<eol>\r?)$",
                         re.MULTILINE)
SECRET_NAME = SECRET_KEY


class RedactionError(CaptureError):
    """A redaction item that is neither a path glob nor a valid regular expression."""


@dataclass(frozen=True)
class Redactions:
    """What the caller asked to redact beyond the defaults."""

    paths: tuple[str, ...] = ()
    patterns: tuple[re.Pattern[str], ...] = ()
    items: tuple[str, ...] = ()


def compile_redactions(items: list[str] | None) -> Redactions:
    """Path globs (items starting with "/") and regular expressions, checked once before the audit runs."""
    paths: list[str] = []
    patterns: list[re.Pattern[str]] = []
    for item in items or []:
        if not isinstance(item, str) or not item:
            raise RedactionError(f"capture_redact item {item!r}: expected a file path glob starting with '/' "
                                 "or a regular expression, found an empty value")
        if item.startswith("/"):
            paths.append(item)
            continue
        try:
            patterns.append(re.compile(item))
        except re.error as exc:
            raise RedactionError(f"capture_redact item {item!r} is not a valid regular expression ({exc}); "
                                 "expected a Python regular expression, or a file path glob starting with '/'"
                                 ) from None
    return Redactions(tuple(paths), tuple(patterns), tuple(items or ()))


def redact_secret_keys(text: str) -> tuple[str, list[str]]:
    """The config with every secret-named key's value replaced; and those keys."""
    found: list[str] = []

    def replace(match: re.Match[str]) -> str:
        if not SECRET_NAME.search(match.group("key")) or match.group("value") == REDACTED:
            return match.group(0)
        found.append(match.group("key"))
        return f"{match.group('key')}{match.group('sep')}{REDACTED}{match.group('eol')}"

    return CONFIG_LINE.sub(replace, text), found


def _redact_text(text: str, patterns: tuple[re.Pattern[str], ...]) -> str:
    for pattern in patterns:
        text = pattern.sub(REDACTED, text)
    return text


def _redact_strings(value: Any, patterns: tuple[re.Pattern[str], ...]) -> Any:
    """NVML readings: every string, at any depth."""
    if isinstance(value, str):
        return _redact_text(value, patterns)
    if isinstance(value, list):
        return [_redact_strings(v, patterns) for v in value]
    if isinstance(value, dict):
        return {k: _redact_strings(v, patterns) for k, v in value.items()}
    return value


def _redact_file(value: Any, patterns: tuple[re.Pattern[str], ...]) -> Any:
    """A file's content, text or stored as base64 (not UTF-8, or holding NUL bytes), with every match redacted.
    Bytes that are not UTF-8 are matched as the characters surrogateescape gives them and written back as they
    were; the result is stored as encode_bytes stores any content."""
    if isinstance(value, str):
        return _redact_text(value, patterns)
    try:
        data = decode_bytes(value)
    except ValueError:
        return value  # not content (an absent file's None, a malformed entry): nothing to redact
    text = data.decode("utf-8", "surrogateescape")
    redacted = _redact_text(text, patterns)
    return value if redacted == text else encode_bytes(redacted.encode("utf-8", "surrogateescape"))


def _area(path: str) -> str:
    """Where a file lives, coarsely enough for one line: sysfs by its subtree, anything else by its path."""
    parts = path.split("/")
    if len(parts) > 4 and parts[1] == "sys":
        return "/".join(parts[:4]) + "/*"
    return path


def finish_capture(recorded: dict[str, Any], redactions: Redactions | None = None) -> dict[str, Any]:
    """The capture to save: `recorded` with the defaults and `redactions` applied, and what it contains."""
    redactions = redactions or Redactions()
    capture = {key: dict(value) if isinstance(value, dict) else value for key, value in recorded.items()}
    files: dict[str, Any] = capture.get("files") or {}
    left_out: list[str] = []
    secrets: dict[str, list[str]] = {}
    for path, value in sorted(files.items()):
        match = VM_CONFIG_PATH.match(path)
        if not match or value is None or (isinstance(value, dict) and "error" in value):
            continue
        try:
            # As the audit read it: a config that is not UTF-8 is kept as text with its bad bytes replaced.
            value = decode_bytes(value).decode("utf-8", errors="replace")
        except ValueError:
            continue
        if not passes_pci_through(parse_vm_config(value)):
            files[path] = NOT_CAPTURED
            left_out.append(match.group("vmid"))
            continue
        files[path], keys = redact_secret_keys(value)
        inside = redact_secret_values(files[path]) or ""
        if inside != files[path]:
            keys.append("a secret inside a value (args, description)")
            files[path] = inside
        if keys:
            secrets[match.group("vmid")] = sorted(set(keys))
    redacted_paths = []
    for path, value in files.items():
        if isinstance(value, (str, dict)) and not (isinstance(value, dict) and "error" in value):
            if any(fnmatch.fnmatchcase(path, glob) for glob in redactions.paths):
                files[path] = REDACTED
                redacted_paths.append(path)
            elif redactions.patterns:
                files[path] = _redact_file(value, redactions.patterns)
    commands: dict[str, Any] = capture.get("commands") or {}
    if redactions.patterns:
        # What names a path (a directory's entries, a link's target, where a path resolves to) and the errors
        # of reads that failed hold text of the host as much as a file does.
        for section in ("dirs", "links", "realpaths"):
            if isinstance(capture.get(section), dict):
                capture[section] = {key: _redact_strings(value, redactions.patterns)
                                    for key, value in capture[section].items()}
        for path, value in files.items():
            if isinstance(value, dict) and "error" in value:
                files[path] = _redact_strings(value, redactions.patterns)
        for key, entry in commands.items():
            if isinstance(entry, dict):
                commands[key] = {k: _redact_text(v, redactions.patterns) if k in ("stdout", "stderr")
                                 and isinstance(v, str) else v for k, v in entry.items()}
        if "nvml" in capture:
            capture["nvml"] = _redact_strings(capture["nvml"], redactions.patterns)
    redacted = _redaction_notes(left_out, secrets, redacted_paths, redactions)
    capture["contains"] = {
        "files": len(files),
        "file_areas": sorted({_area(path) for path in files}),
        "directory_listings": len(capture.get("dirs") or {}),
        "links": len(capture.get("links") or {}) + len(capture.get("realpaths") or {}),
        "commands": sorted(commands),
        "nvml": "nvml" in capture,
        "redacted": redacted,
    }
    capture["about"] = (
        f"What the GPU host audit read on this host, to replay it elsewhere: {len(files)} files "
        f"({', '.join(capture['contains']['file_areas'])}), {capture['contains']['directory_listings']} "
        f"directory listings, the output of {', '.join(sorted(commands)) or 'no command'}"
        f"{', and NVML readings' if 'nvml' in capture else ''}. That includes the kernel log, the kernel command "
        "line, the hostname and DMI identifiers where the audit read them. Left out or redacted: "
        + "; ".join(redacted) + ".")
    return capture


def _redaction_notes(left_out: list[str], secrets: dict[str, list[str]], redacted_paths: list[str],
                     redactions: Redactions) -> list[str]:
    notes = ["Proxmox VM configs of VMs that pass no PCI device through, replaced by a marker line"
             + (f" (VMs {', '.join(left_out)})" if left_out else " (none here)"),
             "in the VM configs kept, the value of every key named like a secret (cipassword, sshkeys, and any "
             "name with pass, secret, token, credential, private or apikey), and of every such name=value or name: "
             "value written inside another value (QEMU args, the description) with the data of a QEMU secret "
             f"object, replaced by {REDACTED}"
             + (" (" + "; ".join(f"VM {vmid}: {', '.join(keys)}" for vmid, keys in sorted(secrets.items())) + ")"
                if secrets else " (none here)")]
    if redactions.paths:
        notes.append(f"the content of the files matching {', '.join(redactions.paths)}, replaced by {REDACTED}"
                     f" ({len(redacted_paths)} files)")
    if redactions.patterns:
        # Not the expressions themselves: one may spell out the very secret it removes.
        notes.append(f"every match of {len(redactions.patterns)} regular expression(s) given with capture_redact in "
                     "file contents (text, and binary ones stored as base64), directory listings, link targets, "
                     "resolved paths, read errors, command outputs and NVML readings, replaced by "
                     f"{REDACTED}; not in the paths and command lines that name the entries (a file's or "
                     "directory's own path, a command's argv): give a path glob to leave a file out")
    return notes
