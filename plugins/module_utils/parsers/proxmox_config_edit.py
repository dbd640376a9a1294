"""Changes to a qemu-server config's text that leave every other byte as it was.

qemu-server itself rewrites the whole file on each change (keys sorted, its own spacing). These
edits serve a stand-in of ``qm`` in tests and checks of a change before it is made: they touch only
the lines of the keys they change, so that comments, snapshot and special sections, [PENDING]
entries of other keys, key order, CRLF line ends and odd spacing survive byte for byte. Lines are
read exactly as ``proxmox_config.parse_vm_config`` reads them, so what is written parses back to
the change.

* ``apply_to_text(text, changes, pending=False) -> str``: ``changes`` maps a key to its new value,
  or to None to delete the key. With ``pending=False`` the change lands in the current config, and
  a [PENDING] entry or pending deletion of the same key goes, so that the config the VM starts with
  next time holds the change. With ``pending=True`` it lands in [PENDING], as ``qm set`` stages it
  on a running VM: a value equal to the current one clears the key's pending entry instead (as
  qemu-server's ``cleanup_pending`` does), a deletion of a key the current config has becomes a
  ``delete:`` entry. A changed line is written ``key: value`` with the line end of the line it
  replaces; a new key goes before the first key that sorts after it, new lines take the file's line
  end (CRLF when most lines have one).
* ``fold_pending(text) -> str``: the [PENDING] section applied to the current config and removed,
  as qemu-server does when the VM starts (and on ``qm set`` while it is stopped).
* ``EditError`` (a ``ValueError``): a key or value that could not be written as one config line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import (
    ARGS_LINE,
    DELETE_LINE,
    DESCRIPTION_LINE,
    KEY_VALUE,
    SECTION,
    parse_vm_config,
)

CURRENT, PENDING, OTHER = "current", "pending", "other"
WRITABLE_KEY = re.compile(r"[a-z][a-z_\-]*\d*")
# Keys a line cannot set: the parser reads these as the description and as pending deletions.
RESERVED_KEYS = ("description", "delete")


class EditError(ValueError):
    """A change that cannot be written as config lines."""


@dataclass
class Line:
    raw: str  # as written, without its "\n"; a CRLF line keeps its "\r"
    region: str  # CURRENT, PENDING or OTHER (snapshot, special and unknown sections)
    kind: str  # "header", "blank", "key", "delete" or "other" (comments, descriptions, unreadable lines)
    key: str | None = None

    @property
    def content(self) -> bool:
        return self.kind not in ("header", "blank")


def classify(text: str) -> list[Line]:
    """Every line of ``text`` (split on "\\n" only, as the parser does), with what the parser makes of it."""
    region = CURRENT
    lines = []
    for raw in text.split("\n"):
        line = raw.rstrip("\r")
        header = SECTION.match(line) if line.strip() else None
        if not line.strip():
            lines.append(Line(raw, region, "blank"))
        elif header:
            region = PENDING if header.group("name").upper() == "PENDING" else OTHER
            lines.append(Line(raw, region, "header"))
        elif region == OTHER or line.startswith("#") or DESCRIPTION_LINE.match(line):
            lines.append(Line(raw, region, "other"))
        elif DELETE_LINE.match(line):
            lines.append(Line(raw, region, "delete" if region == PENDING else "other"))
        else:
            match = ARGS_LINE.match(line) or KEY_VALUE.match(line)
            key = None if not match else "args" if line.startswith("args:") else match.group("key")
            lines.append(Line(raw, region, "key" if key else "other", key))
    return lines


def _check(changes: Mapping[str, str | None]) -> None:
    for key, value in changes.items():
        if not isinstance(key, str) or not WRITABLE_KEY.fullmatch(key) or key in RESERVED_KEYS:
            raise EditError(f"expected a qemu-server option name (lower case, like hostpci0 or args); found "
                            f"{key!r}. Name the option as `qm set --<name>` takes it.")
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip() or value != value.strip() or "\n" in value \
                or "\r" in value:
            raise EditError(f"expected a one-line value without surrounding blanks for {key}; found {value!r}. "
                            "Pass None to delete the option instead of an empty value.")


def _crlf(lines: list[Line]) -> str:
    ended = lines[:-1]  # the last piece has no "\n" after it
    return "\r" if ended and sum(line.raw.endswith("\r") for line in ended) * 2 > len(ended) else ""


def _end_of(raw: str) -> str:
    return raw[len(raw.rstrip("\r")):]


def _blocks(lines: list[Line], region: str) -> list[tuple[int, int]]:
    """(first, end) line ranges of each block of ``region``: after its header (or the file's start) to the next."""
    blocks, start = [], 0 if region == CURRENT else None
    for index, line in enumerate(lines):
        if line.kind == "header":
            if start is not None:
                blocks.append((start, index))
            start = index + 1 if line.region == region else None
    if start is not None:
        blocks.append((start, len(lines)))
    return blocks


def _after_content(lines: list[Line], first: int, end: int) -> int:
    """Where a line goes at the end of a block: after its last non-blank line (before trailing blanks)."""
    last = max((i for i in range(first, end) if lines[i].kind != "blank"), default=first - 1)
    return last + 1


def _insert_block_line(lines: list[Line], region: str, new: Line, before_key: str | None) -> None:
    """Insert ``new`` into the first block of ``region``, creating a [PENDING] section when there is none."""
    blocks = _blocks(lines, region)
    eol = _crlf(lines)
    if eol and lines[-1].raw and not lines[-1].raw.endswith("\r"):
        # A last line without a line end gets one if a line comes after it: the file's CRLF, not a bare LF.
        lines[-1] = Line(lines[-1].raw + eol, lines[-1].region, lines[-1].kind, lines[-1].key)
    if not blocks:  # only [PENDING] can be missing: it goes right after the current config, as qemu-server puts it
        first, end = _blocks(lines, CURRENT)[0]
        at = _after_content(lines, first, end)
        block = ([Line(eol, CURRENT, "blank")] if at > 0 else []) + [Line("[PENDING]" + eol, PENDING, "header"), new]
        if at < len(lines) and lines[at].kind != "blank":
            block.append(Line(eol, PENDING, "blank"))
        lines[at:at] = block
        return
    first, end = blocks[0]
    later = [i for i in range(first, end) if lines[i].kind == "key" and before_key is not None
             and (lines[i].key or "") > before_key]
    at = later[0] if later else _after_content(lines, first, end)
    lines[at:at] = [new]
    if at + 1 < len(lines) and lines[at + 1].kind == "header":
        lines[at + 1:at + 1] = [Line(eol, region, "blank")]


def _set_key(lines: list[Line], region: str, key: str, value: str) -> None:
    found = [i for i, line in enumerate(lines) if line.region == region and line.kind == "key" and line.key == key]
    if found:  # the last one is the one that counts; earlier duplicates stay shadowed
        old = lines[found[-1]]
        lines[found[-1]] = Line(f"{key}: {value}{_end_of(old.raw)}", region, "key", key)
        return
    _insert_block_line(lines, region, Line(f"{key}: {value}{_crlf(lines)}", region, "key", key), key)


def _remove_key(lines: list[Line], region: str, key: str) -> None:
    lines[:] = [line for line in lines if not (line.region == region and line.kind == "key" and line.key == key)]


def _delete_entries(raw: str) -> tuple[str, list[str], str]:
    line = raw.rstrip("\r")
    prefix = line[:line.index(":") + 1]
    return prefix, [k for k in re.split(r"[,;\s]+", line[len(prefix):]) if k], _end_of(raw)


def _remove_pending_delete(lines: list[Line], key: str) -> None:
    kept = []
    for line in lines:
        if line.kind == "delete":
            prefix, entries, end = _delete_entries(line.raw)
            left = [k for k in entries if k.lstrip("!") != key]
            if not left:
                continue
            if left != entries:
                line = Line(f"{prefix} {','.join(left)}{end}", PENDING, "delete")
        kept.append(line)
    lines[:] = kept


def _add_pending_delete(lines: list[Line], key: str) -> None:
    deletes = [i for i, line in enumerate(lines) if line.kind == "delete"]
    if deletes:
        prefix, entries, end = _delete_entries(lines[deletes[-1]].raw)
        if key not in [k.lstrip("!") for k in entries]:
            lines[deletes[-1]] = Line(f"{prefix} {','.join([*entries, key])}{end}", PENDING, "delete")
        return
    _insert_block_line(lines, PENDING, Line(f"delete: {key}{_crlf(lines)}", PENDING, "delete"), None)


def _drop_empty_pending(lines: list[Line]) -> None:
    """Remove [PENDING] sections left without a line, with the blank lines before their header."""
    for first, end in reversed(_blocks(lines, PENDING)):
        if any(lines[i].content for i in range(first, end)):
            continue
        start = first - 1
        while start > 0 and lines[start - 1].kind == "blank":
            start -= 1
        if end == len(lines) and lines[-1].raw == "":
            end -= 1  # the file's last line end stays
        elif end < len(lines) and start > 0 and lines[start].kind == "blank":
            start += 1  # one blank line stays before the section that follows
        del lines[start:end]


def apply_to_text(text: str, changes: Mapping[str, str | None], *, pending: bool = False) -> str:
    """``text`` with ``changes`` (key -> value, None: delete) made, in [PENDING] when ``pending``."""
    _check(changes)
    lines = classify(text)
    had_pending = any(line.region == PENDING and line.content for line in lines)
    current = parse_vm_config(text).current.options
    for key, value in changes.items():
        if not pending or value == current.get(key):
            _remove_key(lines, PENDING, key)
            _remove_pending_delete(lines, key)
            if not pending:
                if value is None:
                    _remove_key(lines, CURRENT, key)
                else:
                    _set_key(lines, CURRENT, key, value)
        elif value is None:
            _remove_key(lines, PENDING, key)
            _add_pending_delete(lines, key)
        else:
            _remove_pending_delete(lines, key)
            _set_key(lines, PENDING, key, value)
    if had_pending:
        _drop_empty_pending(lines)
    return "\n".join(line.raw for line in lines)


def fold_pending(text: str) -> str:
    """The config with its [PENDING] changes made to the current config, as the VM's next start makes them."""
    config = parse_vm_config(text)
    changes: dict[str, str | None] = dict.fromkeys(config.pending_delete)
    changes.update(config.pending.options)
    return apply_to_text(text, changes) if changes else text
