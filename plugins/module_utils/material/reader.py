"""Material on the controller's disk turned into what the audit replays.

One input is one host, in one of three forms:

- a capture file (JSON, format ``gpuhost-capture/1``, gzip or not), replayed as it is;
- any other single file: an ``nvidia-bug-report.log(.gz)`` or one pasted output, read as material of one piece;
- a directory of pasted outputs: every regular file directly in it (subdirectories are not read, and said
  so: a directory is one host, and a folder inside it is more likely another host's material than more of
  this one's). Each file's kind comes from its content (material/capture.py, material/kinds.py), never from
  its name; a file name that spells out the command (``nvidia-smi topo -p2p r``) is used as that command, and
  the name of a ``topo -p2p`` matrix (``p2p_read.txt``) tells its capability when no command line does
  (material/p2p_matrix.py).

Benchmark logs in the material (nccl-tests output, p2pBandwidthLatencyTest, nvbandwidth, the probe's own
output) are not read by the audit: material/capture.py lists them under ``unmapped``, and ``bench_logs`` gives their
paths, for the benchmark's own log readers (bench/from_logs.py).

Relative paths are resolved against the directory the caller names (the directory the user ran from), and
every message shows the absolute path it tried.

Every read goes through material/limits.py (regular files only, no links followed inside a directory,
bytes and time bounded), and each file's gzip is undone once, here, within the limit on decompressed bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_format import CAPTURE_FORMAT
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import (
    BENCH_LOG_KINDS,
    NCCL_STEP,
    PROBE_STEP,
    SGLANG_DECODE_MATERIAL,
    Piece,
    build_capture,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.gunzip import GZIP_MAGIC, GunzipLimitError, gunzip
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.limits import (
    LimitError,
    MaterialLimits,
    ReadBudget,
    how_to_raise,
    on_pseudo_file_system,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_gpus import NCCL_DEBUG_MATERIAL
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.parse_budget import parse_budget, refusal
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.printable_names import printable
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import decode_paste, normalize_paste
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.sglang_decode_log import parse_decode_log

# The module that judges each benchmark step's log, by the step's name (Material.bench_logs' keys).
_MODULES = {step.name: step.module for step in (NCCL_STEP, PROBE_STEP)}


class MaterialError(ValueError):
    """An input that cannot be read at all; the message names the absolute path and what to give."""


@dataclass
class Material:
    path: str  # absolute
    form: str  # capture, file or directory
    capture: dict[str, Any]
    # nccl / probe -> the log of that step: (its input name, absolute path)
    bench_logs: dict[str, tuple[str, str]] = field(default_factory=dict)
    notes: list[dict[str, str]] = field(default_factory=list)  # {name, why}: not read, beyond the capture's inputs
    reasons: dict[str, str] = field(default_factory=dict)  # input name -> why, replacing the capture's
    read_as: dict[str, str] = field(default_factory=dict)  # input name -> the step that read it (bench:...)
    # The files the capture was built from (none for a capture file), and the limits they were read within: to
    # build it again without a file the audit could not read (audit_material).
    files: list[tuple[Piece, str]] = field(default_factory=list)
    limits: MaterialLimits = field(default_factory=MaterialLimits)


def resolve(path: str, base_dir: str | None = None) -> str:
    """``path`` made absolute against ``base_dir`` (the caller's directory), else the current directory."""
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        path = os.path.join(base_dir or os.getcwd(), path)
    return os.path.normpath(path)


def missing_message(given: str, resolved: str, base_dir: str | None = None) -> str:
    relative = "" if os.path.isabs(os.path.expanduser(given)) else \
        f" (given as {given!r}, relative to {base_dir or os.getcwd()})"
    return (f"{resolved} does not exist{relative}: expected a capture file, an nvidia-bug-report.log(.gz), a "
            "pasted output or a directory of them. Check the path, or give it absolute")


def _plain(data: bytes, path: str, limits: MaterialLimits) -> Piece:
    """The file's bytes with gzip undone (once, within the limit), as material/capture.py takes them."""
    if data[:2] != GZIP_MAGIC:
        return Piece(printable(os.path.basename(path)), data)
    try:
        plain, whole = gunzip(data, limits.decompressed_bytes)
    except GunzipLimitError as exc:
        raise LimitError(f"{path}: {exc}; {how_to_raise('decompressed_bytes')}") from None
    return Piece(printable(os.path.basename(path)), plain, gzip=True, truncated=not whole)


def as_capture(data: bytes, path: str) -> dict[str, Any] | None:
    """The capture the (plain) bytes hold, or None when they are not one (a paste, a bug report, another JSON)."""
    if data.lstrip()[:1] != b"{":
        return None
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        # An nccl-tests -J output cut short is JSON-like too, and JSON nested thousands deep no capture: kinds.py
        # tells their kind, and material/capture.py refuses what cannot be read.
        return None
    if not isinstance(document, dict) or not str(document.get("format", "")).startswith("gpuhost-capture"):
        return None
    if document["format"] != CAPTURE_FORMAT:
        raise MaterialError(f"{path} is a capture of format {str(document['format'])!r}; this version reads "
                            f"{CAPTURE_FORMAT!r}: take the capture again with playbooks/capture.yml")
    return document


def read_material(given: str, base_dir: str | None = None, limits: MaterialLimits | None = None) -> Material:
    """The capture of one input (see the module text); ``MaterialError`` when it cannot be read at all."""
    limits = limits or MaterialLimits()
    path = resolve(given, base_dir)
    if not os.path.lexists(path):
        raise MaterialError(missing_message(given, path, base_dir))
    pseudo = on_pseudo_file_system(path)
    if pseudo is not None:
        raise MaterialError(f"{path} lies on {pseudo}, this machine's own pseudo files, not material: "
                            "give the material saved in plain files")
    budget = ReadBudget(limits)
    if os.path.isdir(path):
        return _directory(path, budget)
    try:
        # The user named this input: a link is followed (onto the checks above and the regular-file check).
        item = _plain(budget.read(path, follow=True), path, limits)
    except LimitError as exc:
        raise MaterialError(str(exc)) from None
    capture = as_capture(item.data, path)
    if capture is not None:
        return Material(path, "capture", capture)
    return _built(path, "file", [(item, path)], [], limits)


def _directory(path: str, budget: ReadBudget) -> Material:
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise MaterialError(f"cannot list the directory {path}: {exc.strerror or exc}; make it readable") from None
    files: list[tuple[Piece, str]] = []
    notes = []
    for name in names:
        full = os.path.join(path, name)
        shown = printable(name)
        if os.path.isdir(full) and not os.path.islink(full):
            notes.append({"name": shown + "/", "why": "a directory inside the material, not read (one directory is "
                                                      "one host; give it as an input of its own if it is another "
                                                      "host's material)"})
            continue
        try:
            item = _plain(budget.read(full), full, budget.limits)
        except LimitError as exc:
            notes.append({"name": shown, "why": printable(str(exc).removeprefix(full + ": "))})
            continue
        if as_capture(item.data, full) is None:
            files.append((item, full))
        else:
            notes.append({"name": shown, "why": "a capture, which a directory of pastes does not merge: give it as "
                                                "an input of its own"})
    if not files:
        raise MaterialError(f"{path} holds no pasted output to read: expected files of tool output (nvidia-smi topo "
                            "-m, topo -p2p r, -q, lspci -vvv, nccl-tests logs, qm config ...) directly in it"
                            + ("; not read: " + "; ".join(f"{n['name']}: {n['why']}" for n in notes) if notes else ""))
    return _built(path, "directory", files, notes, budget.limits)


def _built(path: str, form: str, files: list[tuple[Piece, str]], notes: list[dict[str, str]],
           limits: MaterialLimits) -> Material:
    capture = build_capture([item for item, _unused in files], max_decompressed=limits.decompressed_bytes,
                            note=f"Built from the material {os.path.basename(path)} by "
                                 "material/reader.py and material/capture.py: only what the material holds; see "
                                 "the from_material section.", parse_seconds=limits.parse_seconds)
    full_path = {item.name: full for item, full in files}
    material = Material(path, form, capture, notes=notes, files=files, limits=limits)
    for entry in capture["from_material"]["inputs"]:
        bench = BENCH_LOG_KINDS.get(entry.get("kind") or "")
        if bench is None:
            continue
        step = bench.name
        if _file_of(entry["name"], full_path) is None:
            material.reasons[entry["name"]] = "a benchmark log of no file of the material, not judged"
        elif step in material.bench_logs:
            first = material.bench_logs[step][0]
            material.reasons[entry["name"]] = (f"a benchmark log not judged: {first} is this host's {bench.module} "
                                               "log (one per host, the first by name); give this one with its own "
                                               "host's material")
        else:
            # A piece of a paste of several outputs (material/capture.py) is read in its file: the log readers skip
            # the other outputs as they skip any text around a log.
            material.bench_logs[step] = (entry["name"], str(_file_of(entry["name"], full_path)))
    return material


def _file_of(name: str, full_path: dict[str, str]) -> str | None:
    """The file an input came from: itself, or the paste a piece ``<file>, line <n>`` was cut from."""
    return full_path.get(name) or full_path.get(name.rsplit(", line ", 1)[0])


def bench_log_text(material: Material, step: str) -> str | None:
    """The text a benchmark step reads for this material, the same whatever the packaging: its file's bytes as the
    analysis read them (gzip undone, any encoding, transport damage such as quoted-printable or CRLF undone), and
    for the NCCL step the material's NCCL INFO log too where that file does not hold it already (a log given as its
    own file beside the nccl-tests run), so that the run's transports are read from it in either form."""
    _name, path = material.bench_logs[step]
    data = next((piece.data for piece, full in material.files if full == path), None)
    if data is None:
        return None
    text = normalize_paste(decode_paste(data))
    info = (material.capture.get("material") or {}).get(NCCL_DEBUG_MATERIAL) if step == NCCL_STEP.name else None
    if isinstance(info, str) and info.strip() and info.strip() not in text:
        text += "\n" + info
    return text


def observed_decode(material: Material) -> tuple[float, str] | None:
    """The single-stream decode rate an SGLang server log of the material shows, and where it is from; None without
    a log or without a line of one running request (a batched rate says nothing of one stream)."""
    text = (material.capture.get("material") or {}).get(SGLANG_DECODE_MATERIAL)
    rates = parse_decode_log(text)
    if rates.single_stream_tok_s is None:
        return None
    origin = next((e["name"] for e in material.capture["from_material"]["inputs"]
                   if e.get("kind") == "sglang-decode-log"), "the material")
    lines = rates.single_stream_lines
    return rates.single_stream_tok_s, (f"SGLang decode log {origin}: the median of {lines} line(s) with one running "
                                       "request")


def judged(material: Material) -> None:
    """Say, in the capture's inputs, that the material's benchmark logs were read, by the step that reads each: they
    leave the unused inputs, as their values are in the report's benchmark section."""
    for step, (name, _unused) in material.bench_logs.items():
        material.read_as[name] = f"bench:{_MODULES[step]}"


def audit_material(material: Material, audit: Callable[[dict[str, Any]], dict[str, Any]]
                   ) -> tuple[Material, dict[str, Any]]:
    """(the material, the facts ``audit`` gives of its capture). One bad file costs only itself: when the audit of
    the whole capture fails or runs out of time (``parse_seconds`` per file, material/parse_budget.py), each file is
    audited alone, and the capture is built again without those that fail alone, each listed as not used with
    the reason. ``MaterialError`` when no file is left; the audit's own error when no file fails alone (a defect of
    the audit, not of one file)."""
    limits = material.limits
    try:
        with parse_budget(limits.parse_seconds * len(material.files) if material.files else None):
            return material, audit(material.capture)
    except Exception:  # which file, if one, is found below; else the error goes on as it was
        if not material.files:
            raise
        failed = _failing_alone(material.files, audit, limits)
        if not failed:
            raise
    kept = [(item, full) for item, full in material.files if item.name not in failed]
    if not kept:
        raise MaterialError(f"{material.path}: nothing in it could be read: "
                            + "; ".join(f"{name}: {why}" for name, why in failed.items())) from None
    notes = [*material.notes, *({"name": name, "why": why} for name, why in failed.items())]
    rebuilt = _built(material.path, material.form, kept, notes, limits)
    with parse_budget(limits.parse_seconds * len(kept)):
        return rebuilt, audit(rebuilt.capture)


def _failing_alone(files: list[tuple[Piece, str]], audit: Callable[[dict[str, Any]], dict[str, Any]],
                   limits: MaterialLimits) -> dict[str, str]:
    """Each file whose capture alone the audit cannot take -> why, in the files' order."""
    failed = {}
    for item, _unused in files:
        try:
            with parse_budget(limits.parse_seconds):
                audit(build_capture([item], max_decompressed=limits.decompressed_bytes,
                                    parse_seconds=limits.parse_seconds))
        except Exception as exc:  # this file's failure, whatever it is: it is refused with the reason
            failed[item.name] = refusal(exc, how_to_raise("parse_seconds"))
    return failed
