"""What the fuzzer calls: every public function of plugins/module_utils/parsers that reads a text (found by
inspection, so a new parser is fuzzed without being listed), and the entry points of the offline analysis
(material kinds, the capture built from material, gunzip, material on disk, and the whole analysis down to
the report files).

Each entry point has the errors it declares: a parser, ``ParseError`` (parsers/_common.py) and the error
classes of its own module; material/capture.py ``PieceError``; the material reader ``MaterialError``. Anything
else escaping is a crash."""

from __future__ import annotations

import atexit
import gzip
import importlib
import inspect
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from tests.paths import CAPTURES, ROOT

PARSERS = ROOT / "plugins" / "module_utils" / "parsers"
# The capture whose outputs the whole analysis is fuzzed through: a Proxmox guest, so that the VM, P2P and
# driver findings all have something to judge.
CAPTURE = CAPTURES / "proxmox-q35-guest-8xRTXPRO6000-no-nvml.json"
PACKAGE = "ansible_collections.gpuhost.gpu.plugins.module_utils.parsers"
# The first parameter's names that take the text (or bytes) a tool printed.
TEXT_PARAMETERS = {"text", "data", "line", "value", "raw", "output", "title", "label", "word", "cell", "detail",
                   "bus_id", "name", "stdout"}
# Parameters without a default that an entry point gets all the same: module.function -> how it is called.
CALLS: dict[str, Callable[[Callable[..., Any], Any], Any]] = {
    "proxmox_config.parse_hostpci": lambda f, text: f(0, text),
    "nvidia_smi_query.parse_query_gpu_csv": lambda f, text: f(text, _query_fields()),
    "proxmox_config.parse_pci_mapping": lambda f, text: f(text, "pve"),
    "proxmox_config_edit.apply_to_text": lambda f, text: f(text, {"hostpci0": "0000:01:00.0,pcie=1"}),
    "nvidia_smi_failure.classify_nvidia_smi_failure": lambda f, text: f(9, text, text),
    "nvidia_smi_failure.nvidia_smi_failure": lambda f, text: f(9, text, text),
    "kernel_cmdline.edit_kernel_cmdline_file": lambda f, text: f(text, []),
    "kernel_cmdline.edit_grub_default": lambda f, text: f(text, []),
}


def _query_fields() -> tuple[str, ...]:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_query import QUERY_GPU_FIELDS

    return tuple(QUERY_GPU_FIELDS)


@dataclass(frozen=True)
class EntryPoint:
    name: str
    call: Callable[[Any], Any]
    declared: tuple[type[BaseException], ...]
    takes: str  # "text" or "bytes"


def _reads_text(annotation: Any) -> bool:
    # Annotations are strings here (from __future__ import annotations): "str", "str | bytes", "Any" ...
    written = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    return annotation is inspect.Parameter.empty or any(word in written for word in ("str", "bytes", "Any"))


def _consume(result: Any) -> Any:
    # A generator does its work when read: read it, or a crash in it would never be seen.
    return list(result) if isinstance(result, Iterator) else result


def _parser_entry_points() -> list[EntryPoint]:
    common = importlib.import_module(f"{PACKAGE}._common")
    found = []
    for path in sorted(PARSERS.glob("*.py")):
        if path.name.startswith("_"):
            continue
        module = importlib.import_module(f"{PACKAGE}.{path.stem}")
        own_errors = tuple(value for value in vars(module).values() if inspect.isclass(value)
                           and issubclass(value, Exception) and value.__module__ == module.__name__)
        for name, function in sorted(vars(module).items()):
            if name.startswith("_") or not inspect.isfunction(function) or function.__module__ != module.__name__:
                continue
            key = f"{path.stem}.{name}"
            parameters = list(inspect.signature(function).parameters.values())
            if key in CALLS:
                call = CALLS[key]
            elif (parameters and parameters[0].name in TEXT_PARAMETERS and _reads_text(parameters[0].annotation)
                  and all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                          for p in parameters[1:])):
                call = None
            else:
                continue
            takes = "bytes" if "bytes" in str(parameters[0].annotation) and "str" not in str(parameters[0].annotation) \
                else "text"
            found.append(EntryPoint(
                f"parsers.{key}",
                (lambda f, c: (lambda data: _consume(c(f, data) if c else f(data))))(function, call),
                (common.ParseError, *own_errors), takes))
    return found


def _analysis_entry_points() -> list[EntryPoint]:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.facts import audit, resolve_subsets
    from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import CaptureError
    from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import PieceError, build_capture
    from ansible_collections.gpuhost.gpu.plugins.module_utils.material.gunzip import GunzipLimitError, gunzip
    from ansible_collections.gpuhost.gpu.plugins.module_utils.material.kinds import detect_kind
    from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_readers import replay
    from ansible_collections.gpuhost.gpu.plugins.module_utils.material.reader import (
        MaterialError,
        audit_material,
        read_material,
    )
    from ansible_collections.gpuhost.gpu.plugins.module_utils.material.section import with_material
    from ansible_collections.gpuhost.gpu.plugins.module_utils.report.files_plan import ANALYSIS_INDEX, planned_files
    from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions

    work = tempfile.mkdtemp(prefix="gpuhost-fuzz-")
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    subsets = resolve_subsets(["all"])

    def on_disk(data: bytes) -> str:
        directory = os.path.join(work, "material")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "paste.txt"), "wb") as handle:
            handle.write(data)
        return directory

    def damaged_gzip(data: bytes) -> bytes:
        packed = bytearray(gzip.compress(data))
        # Where the damage goes follows from the data, so that a case stays the same case.
        at = 10 + (sum(data[:64]) % max(1, len(packed) - 10))
        if at < len(packed):
            packed[at] ^= 0x55
        return bytes(packed[:len(packed) - (len(data) % 3)])

    def with_output(data: bytes) -> str:
        """A real capture with one of its command outputs or files replaced by the data, saved as a capture file."""
        capture = json.loads(CAPTURE.read_text())
        outputs = [(section, key) for section in ("commands", "files") for key in sorted(capture[section])
                   if isinstance(capture[section][key], (str, dict))]
        section, key = outputs[sum(data[:256]) % len(outputs)]
        text = data.decode("utf-8", "surrogateescape")  # a surrogate becomes a \udcXX escape in the JSON
        if section == "commands":
            capture[section][key] = {**capture[section][key], "stdout": text}
        else:
            capture[section][key] = text
        path = os.path.join(work, "capture.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(capture, handle)
        return path

    def analysis(data: bytes, path: str | None = None) -> dict[str, str]:
        material, facts = audit_material(read_material(path or on_disk(data)),
                                         lambda capture: audit(replay(capture), subsets, RuleOptions()))
        facts = with_material(facts, material.capture, material)
        return planned_files(os.path.join(work, "reports"), {"material": facts}, ANALYSIS_INDEX)

    return [
        # The parsers' own entries give these text; material/capture.py gives detect_kind bytes as read from disk.
        EntryPoint("kinds.detect_kind(bytes)", detect_kind, (), "bytes"),
        EntryPoint("capture.build_capture", lambda data: build_capture([("paste.txt", data)]), (PieceError,), "bytes"),
        EntryPoint("capture.build_capture(gzip)", lambda data: build_capture([("paste.gz", damaged_gzip(data))]),
                   (PieceError,), "bytes"),
        EntryPoint("gunzip.gunzip", lambda data: gunzip(damaged_gzip(data), 1 << 20), (GunzipLimitError,), "bytes"),
        EntryPoint("reader.read_material", lambda data: read_material(on_disk(data)), (MaterialError,),
                   "bytes"),
        EntryPoint("analysis: material, audit, reports", analysis, (MaterialError,), "bytes"),
        EntryPoint("analysis: a capture with one output mutated", lambda data: analysis(data, with_output(data)),
                   (MaterialError, CaptureError), "bytes"),
    ]


@cache
def entry_points() -> tuple[EntryPoint, ...]:
    return (*_parser_entry_points(), *_analysis_entry_points())
