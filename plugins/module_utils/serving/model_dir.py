"""A model directory before a server loads it: there, readable, and as large as the model says.

``walk`` lists the weight files under a directory as whoever runs it can see them (the module
sglang_model_check runs it as the service user); ``judge`` compares the total with the model's
``weights_gib``. A weights size far from the model's means a partial download, the wrong quantization
or the wrong model: SGLang would find out minutes into loading, or not at all.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass, field
from typing import Any

GIB = 1024**3
# The formats SGLang loads (safetensors, PyTorch pickles, GGUF). Tokenizer and config files are small
# enough not to matter to the total.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def is_weight_file(name: str) -> bool:
    return name.lower().endswith(WEIGHT_SUFFIXES)


@dataclass
class Listing:
    """What a walk of the directory found."""

    path: str
    exists: bool = True
    is_dir: bool = True
    readable: bool = True
    files: list[tuple[str, int]] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    # Weight names that are no regular file (a FIFO, a socket, a device): never opened, since
    # opening a FIFO waits for a writer for ever.
    not_regular: list[str] = field(default_factory=list)
    # The model's config.json (model/config_json.py counts collectives from it); None when absent or not
    # a JSON object, with why in config_problem.
    config: dict[str, Any] | None = None
    config_problem: str | None = None

    @property
    def total_bytes(self) -> int:
        return sum(size for _unused, size in self.files)

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "exists": self.exists, "is_dir": self.is_dir, "readable": self.readable,
                "files": [list(item) for item in self.files], "unreadable": self.unreadable,
                "not_regular": self.not_regular, "config": self.config, "config_problem": self.config_problem}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Listing:
        return cls(path=str(data["path"]), exists=bool(data["exists"]), is_dir=bool(data["is_dir"]),
                   readable=bool(data["readable"]), files=[(str(n), int(s)) for n, s in data["files"]],
                   unreadable=[str(n) for n in data["unreadable"]],
                   not_regular=[str(n) for n in data.get("not_regular", [])],
                   config=data.get("config") if isinstance(data.get("config"), dict) else None,
                   config_problem=data.get("config_problem"))


def _open_regular(path: str) -> int | None:
    """The size of the regular file at path (links followed) once opened for reading; None when it is
    something else. Looked at before it is opened, and opened without blocking: a FIFO named like a
    weight file would otherwise hold the check until something writes to it."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        return None
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        status = os.fstat(descriptor)  # what was opened, had the entry changed since
        return status.st_size if stat.S_ISREG(status.st_mode) else None
    finally:
        os.close(descriptor)


CONFIG_MAX_BYTES = 1024 * 1024  # real config.json files are a few KiB; anything larger is not one


def read_config(path: str) -> tuple[dict[str, Any] | None, str | None]:
    """The directory's config.json as a mapping, or None and why not."""
    name = os.path.join(path, "config.json")
    try:
        size = _open_regular(name)
    except OSError as exc:
        return None, f"{name} cannot be read ({exc.strerror or exc}); the collectives per step are not counted"
    if size is None or size > CONFIG_MAX_BYTES:
        return None, f"{name} is no regular file of at most 1 MiB; expected the model's config.json"
    try:
        with open(name, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"{name} is not valid JSON ({exc}); expected the model's config.json"
    if not isinstance(data, dict):
        return None, f"{name} holds a JSON {type(data).__name__}; expected an object"
    return data, None


def directory_problem(path: str, exists: bool, is_dir: bool, readable: bool, who: str = "this user") -> str | None:
    """What keeps the model directory from being read at all, with what to do; None when it can be listed."""
    if not exists:
        return (f"{path} does not exist; expected the model's directory there. Download or copy the model first, "
                "or correct the model path.")
    if not is_dir:
        return (f"{path} is a file, not a directory; SGLang's --model-path takes the directory that holds "
                "config.json and the weights.")
    if not readable:
        return (f"{who} cannot list {path}; give it read and execute permission on the directory (and on the "
                "directories above it).")
    return None


def read_model_config(path: str) -> tuple[dict[str, Any] | None, str | None]:
    """The model directory's config.json as a mapping, or None and why not: the directory's own state first
    (missing, a file, not listable), as sglang_model_check says it, then the file's (read_config)."""
    exists = os.path.lexists(path)
    is_dir = exists and os.path.isdir(path)
    problem = directory_problem(path, exists, is_dir, is_dir and os.access(path, os.R_OK | os.X_OK))
    return (None, problem) if problem else read_config(path)


def walk(path: str) -> Listing:
    """Every weight file under path (following symbolic links to files, as Hugging Face caches use)
    with its size, and what could not be read: directories that cannot be listed, weight files that
    cannot be opened for reading, links that lead nowhere, weight names that are no regular file."""
    listing = Listing(path=path)
    if not os.path.lexists(path):
        listing.exists = listing.is_dir = listing.readable = False
        return listing
    if not os.path.isdir(path):
        listing.is_dir = False
        listing.readable = os.access(path, os.R_OK)
        return listing
    if not os.access(path, os.R_OK | os.X_OK):
        listing.readable = False
        return listing

    def unreadable_dir(err: OSError) -> None:
        listing.unreadable.append(os.path.relpath(err.filename or path, path) + "/")

    for root, _dirs, names in os.walk(path, onerror=unreadable_dir):
        for name in sorted(names):
            if not is_weight_file(name):
                continue
            full = os.path.join(root, name)
            relative = os.path.relpath(full, path)
            try:
                size = _open_regular(full)
            except OSError:
                listing.unreadable.append(relative)
                continue
            if size is None:
                listing.not_regular.append(relative)
                continue
            listing.files.append((relative, size))
    listing.files.sort()
    listing.unreadable.sort()
    listing.not_regular.sort()
    listing.config, listing.config_problem = read_config(path)
    return listing


@dataclass
class Judgement:
    ok: bool
    found_gib: float
    expected_gib: float
    problems: list[str]


def setting_problems(expected_gib: float, tolerance: float) -> list[str]:
    """What is wrong with the expected size and the tolerance: each must be a finite number, 0 or more."""
    return [f"{name} is {value!r}; expected a finite number, 0 or more (a NaN or infinite tolerance would pass "
            "any size)" for name, value in (("expected_gib", expected_gib), ("tolerance", tolerance))
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0]


def judge(listing: Listing, expected_gib: float, tolerance: float, user: str = "") -> Judgement:
    """Whether the directory holds readable weights within tolerance (a fraction) of expected_gib."""
    who = f"the user {user}" if user else "this user"
    found = listing.total_bytes / GIB
    problems: list[str] = setting_problems(expected_gib, tolerance)
    if problems:
        return Judgement(ok=False, found_gib=round(found, 3), expected_gib=expected_gib, problems=problems)
    unlisted = directory_problem(listing.path, listing.exists, listing.is_dir, listing.readable, who)
    if unlisted:
        problems.append(unlisted)
    else:
        if listing.unreadable:
            shown = ", ".join(listing.unreadable[:5]) + (" ..." if len(listing.unreadable) > 5 else "")
            problems.append(f"{who} cannot read {len(listing.unreadable)} entries under {listing.path}: {shown}; "
                            "fix their ownership or mode.")
        if listing.not_regular:
            shown = ", ".join(listing.not_regular[:5]) + (" ..." if len(listing.not_regular) > 5 else "")
            problems.append(f"{len(listing.not_regular)} weight names under {listing.path} are no regular file "
                            f"(a FIFO, a socket or a device): {shown}; SGLang cannot load them. Replace them with "
                            "the weight files.")
        if not listing.files and not listing.unreadable and not listing.not_regular:
            problems.append(f"no weight files ({', '.join('*' + s for s in WEIGHT_SUFFIXES)}) under "
                            f"{listing.path}; expected about {expected_gib:g} GiB of them.")
        elif expected_gib > 0 and abs(found - expected_gib) > tolerance * expected_gib:
            problems.append(
                f"the weight files under {listing.path} hold {found:.1f} GiB in {len(listing.files)} files; the "
                f"model's weights_gib expects {expected_gib:g} GiB (within {tolerance:.0%}). A partial download, "
                "another quantization or another model? Finish the download, or correct the model's weights_gib.")
    return Judgement(ok=not problems, found_gib=round(found, 3), expected_gib=expected_gib, problems=problems)
