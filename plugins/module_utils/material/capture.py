"""Material turned into a capture the audit can replay.

Support engineers exchange raw outputs, not captures: an ``nvidia-bug-report.log.gz``, or a handful of
pasted outputs (``nvidia-smi topo -p2p r``, ``topo -m``, ``-q``, ``dmesg``, a VM config ...).
``build_capture`` takes them, each a name and its bytes (gzip is undone here, truncated gzip read as far
as it goes), tells each one's kind from its content (material/kinds.py) and writes what it holds
where the audit's gatherers read it, in the ``gpuhost-capture/1`` format that ``source.ReplaySource``
replays: ``commands`` keyed by the exact command the gatherers run, ``files``, ``dirs``; no ``nvml``.

Only what is faithful is written: the output of a command under that command (``topo -p2p r`` under
``nvidia-smi topo -p2p r``, never under another letter; a matrix of several capabilities under its own
command, ``topo -p2p rw``; one whose capability neither its command line nor its file name states (the
matrix cannot) under ``nvidia-smi topo -p2p``, read as such: material/p2p_matrix.py; a ``--query-gpu`` CSV
only when its header, or the command the caller names, shows the audit's own field list), a file's content
under its path, a ``*** /path does not exist`` of the bug report as an absent file. Nothing is derived: no sysfs file is
made from lspci or dmidecode text, no command output from another command's.

The capture's ``from_material`` section says what came of the material (the facts' ``material`` section,
material/section.py; these lists are documented here and nowhere else):

* ``inputs``: each input's ``name``, ``kind`` (None when unknown), ``gzip``, ``truncated`` and the
  capture entries it gave (``as``).
* ``seen``: what the audit will read, each ``{what, from}`` (these four lists: material/reads.py).
* ``unread``: entries the capture holds that the audit will not read, and why (``{what, why, from}``):
  ``nvidia-smi -L`` without NVML, ``nvidia-smi -q`` beside ``-q -x``, lspci without sysfs.
* ``not_seen``: what the audit reads that the material did not hold, named plainly ("NVML", "PCI
  devices from sysfs (/sys/bus/pci/devices)"). ``source.ReplaySource`` replays such a capture as
  partial: what it lacks was not seen (never "not installed"), and the audit's facts say so
  (``not_seen``; the ``audit_not_judged`` finding names the findings that could not be judged).
* ``kept``: capture entries no gatherer reads today (``/proc/driver/nvidia/version``), kept for its reader.
* ``unmapped``: inputs or bug-report sections not written, and why (a benchmark log, a ``topo -p2p``
  matrix pasted with a command of no capability nvidia-smi takes, a conflict with another input).
* ``warnings``: what makes the capture doubtful as one host (GPU outputs and a hypervisor's VM config in
  one piece of material).
* ``node_outputs``: the inputs of a guest's material that are its Proxmox node's, set apart (node_outputs.py).

A capture describes one host: give a guest's and its hypervisor's material as two inputs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_format import CAPTURE_FORMAT, encode_bytes
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.commands import (
    DMESG,
    JOURNAL,
    LIST_GPUS,
    LSPCI,
    PVEVERSION,
    TOPO_MATRIX,
    TOPO_P2P,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.dcgm_diag import DCGM_DIAG_MATERIAL
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.health import FABRIC_MANAGER_LOG_MATERIAL
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.proxmox_probe import QEMU_SERVER_DIR
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.gunzip import (
    DEFAULT_MAX_DECOMPRESSED,
    GZIP_MAGIC,
    GunzipLimitError,
    gunzip,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.kinds import (
    KINDS,
    clean_lines,
    detect_kind,
    pasted_command,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.limits import how_to_raise
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_gpus import NCCL_DEBUG_MATERIAL
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.nccl_topology import NCCL_TOPO_MATERIAL
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.node_outputs import (
    guest_with_its_vm,
    set_node_outputs_apart,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.p2p_matrix import p2p_command
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.parse_budget import (
    DEFAULT_PARSE_SECONDS,
    parse_budget,
    refusal,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.reads import (
    CMDLINE_FILE,
    HEALTH_KEYS,
    QUERY_KEY,
    SMI_Q_KEY,
    SMI_Q_XML_KEY,
    coverage,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.split import split_outputs
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import (
    decode_paste,
    decoded_mail,
    normalize_paste,
    unify_newlines,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_bug_report import (
    BugReportParseError,
    parse_bug_report,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_health import (
    HEALTH_QUERY_FIELDS,
    HEALTH_QUERY_FIELDS_OLD,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_query import QUERY_GPU_FIELDS, without_unit
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.scope import two_hosts

# Pasted outputs are filed under the keys of the commands the gatherers run (audit/commands.py).
P2P_KEYS = {letter: command.key for letter, command in TOPO_P2P.items()}
TOPO_KEY = TOPO_MATRIX.key
LIST_KEY = LIST_GPUS.key
LSPCI_KEY = LSPCI.key
DMESG_KEY = DMESG.key
# Files of a bug report worth keeping: what the gatherers read (/proc, /sys) and the driver's configuration.
# X logs, installer logs and application profiles stay out.
_KEPT_FILE_PREFIXES = ("/proc/", "/sys/", "/etc/modprobe.d/", "/lib/modprobe.d/", "/usr/lib/modprobe.d/",
                       "/etc/modprobe.conf", "/etc/pve/")
_BUG_REPORT_SMI_Q = ("nvidia-smi --query", "nvidia-smi -q")  # --query is -q's long name: the same output


@dataclass(frozen=True)
class BenchStep:
    """A benchmark step that judges a kind of benchmark log: the key of the log in the analysis
    (material/reader.py ``Material.bench_logs``), the module that judges it, and the gpu_bench role variable that
    hands a log to that module."""

    name: str
    module: str
    variable: str


NCCL_STEP = BenchStep("nccl", "nccl_bench", "gpu_bench_nccl_log")
PROBE_STEP = BenchStep("probe", "gpu_p2p_probe", "gpu_bench_probe_log")
# The kinds of material/kinds.py that are benchmark logs, by the step that judges them; the audit reads none of
# them. An NCCL_DEBUG=INFO log alone holds no sweep for nccl_bench to judge: it is not here, and goes to the audit
# as P2P evidence (_HANDLERS).
BENCH_LOG_KINDS = {
    "nccl-tests": NCCL_STEP, "nccl-tests-json": NCCL_STEP,
    "p2p-bandwidth-latency-test": PROBE_STEP, "simple-p2p": PROBE_STEP, "nvbandwidth": PROBE_STEP,
    "nvbandwidth-json": PROBE_STEP,
    # The probe's own saved run: gpu_p2p_probe reads it back with `log`, proof of each pair included.
    "gpu-p2p-probe-log": PROBE_STEP,
}
_VM_COMMAND_RE = re.compile(r"^(?:qm config (?P<vmid>\d{1,9})|"
                            r"cat " + re.escape(QEMU_SERVER_DIR) + r"/(?P<file_vmid>\d{1,9})\.conf)$")
# The capture's material key of an SGLang server log (its decode lines; parsers/sglang_decode_log.py).
SGLANG_DECODE_MATERIAL = "sglang-decode-log"
_VM_NAME_RE = re.compile(r"^(?:.*/)?(?P<vmid>\d{1,9})\.conf(?:\.gz)?$")
_DOMAIN_DEVICE_RE = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7] ")


class PieceError(ValueError):
    """Material that cannot be taken at all (not a list of named bytes); the message says what to give."""


@dataclass(frozen=True)
class Piece:
    """One piece of material: a name (only to report it), its bytes, and optionally the command the caller
    says it is the output of (``nvidia-smi topo -p2p r``, ``qm config 120``). A caller that has undone the
    gzip itself (material/reader.py, so that a file is decompressed once) gives the plain bytes with
    ``gzip`` True, and ``truncated`` when the stream was cut short. ``named_by`` is "heading" when the command
    is only what a heading of a paste names (material/split.py), not a command line."""

    name: str
    data: bytes
    command: str | None = None
    gzip: bool = False
    truncated: bool = False
    named_by: str = "command line"


@dataclass
class _Built:
    commands: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, Any] = field(default_factory=dict)
    dirs: dict[str, list[str]] = field(default_factory=dict)
    material: dict[str, str] = field(default_factory=dict)  # what no gatherer reads on a live host (virt.py)
    sources: dict[str, list[str]] = field(default_factory=dict)  # capture entry -> inputs that gave it
    inputs: list[dict[str, Any]] = field(default_factory=list)
    unmapped: list[dict[str, Any]] = field(default_factory=list)
    node_outputs: list[str] = field(default_factory=list)  # a guest's material's inputs of its node (node_outputs.py)
    # How to undo what the file being taken has filed so far, should it fail (_take_one).
    undo: list[Callable[[], None]] = field(default_factory=list)

    def put(self, section: str, key: str, value: Any, origin: str, entry: dict[str, Any]) -> None:
        store: dict[str, Any] = getattr(self, section)
        label = f"{section}:{key}"
        if key in store and store[key] != value:
            first = ", ".join(self.sources.get(label, []))
            self.unmapped.append({"name": origin, "why": f"{first} already gave {key}, with other content; "
                                                         "give one host's material per input"})
            return
        if key not in store:
            self.undo.append(lambda: store.pop(key))
        store[key] = value
        self.add_source(label, origin)
        entry["as"].append(label)

    def add_source(self, label: str, origin: str) -> None:
        origins = self.sources.setdefault(label, [])
        origins.append(origin)
        self.undo.append(lambda: origins.pop() if len(origins) > 1 else self.sources.pop(label))

    def skip(self, origin: str, why: str) -> None:
        self.unmapped.append({"name": origin, "why": why})


def build_capture(inputs: Iterable[Piece | tuple[str, bytes]], note: str | None = None,
                  max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
                  parse_seconds: float | None = DEFAULT_PARSE_SECONDS) -> dict[str, Any]:
    """A ``gpuhost-capture/1`` capture from the material, with its ``from_material`` section (see the module text).
    gzip input that decompresses past ``max_decompressed`` bytes is not read (listed as unmapped), nor is an input
    whose reading takes more than ``parse_seconds`` of CPU or fails (material/parse_budget.py): one bad file costs
    only itself. Raises ``PieceError`` only for input that is not named bytes."""
    built = _Built()
    for item in _inputs(inputs):
        _take_one(built, item, max_decompressed, parse_seconds)
    set_node_outputs_apart(built, (("commands", DMESG_KEY), ("files", CMDLINE_FILE), ("commands", PVEVERSION.key)))
    capture: dict[str, Any] = {
        "format": CAPTURE_FORMAT,
        "note": note or "Built from material (" + ", ".join(i["name"] for i in built.inputs) + ") by "
                        "material/capture.py: only what the material holds; see its from_material section.",
        "commands": built.commands,
        "files": built.files,
        "dirs": built.dirs,
        **({"material": built.material} if built.material else {}),
    }
    capture["from_material"] = {
        "inputs": built.inputs,
        **coverage(capture, built.sources),
        "unmapped": built.unmapped,
        "warnings": _warnings(built),
        "node_outputs": built.node_outputs,
    }
    return capture


def _inputs(inputs: Any) -> list[Piece]:
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Iterable):
        raise PieceError(f"expected a list of inputs, each a name and its bytes; found {type(inputs).__name__}. "
                         "Give [(name, bytes), ...] or Piece objects.")
    found = []
    for number, item in enumerate(inputs, start=1):
        if isinstance(item, tuple) and len(item) == 2:
            item = Piece(*item)
        if not isinstance(item, Piece):
            raise PieceError(f"input {number}: expected (name, bytes) or a Piece; found "
                             f"{type(item).__name__}. Give each piece of material with a name.")
        data = item.data.encode("utf-8") if isinstance(item.data, str) else item.data
        if not isinstance(item.name, str) or not isinstance(data, (bytes, bytearray)):
            raise PieceError(f"input {number}: expected a text name and bytes; found {type(item.name).__name__} "
                             f"and {type(item.data).__name__}. Read the file in binary mode.")
        if item.command is not None and not isinstance(item.command, str):
            raise PieceError(f"input {number} ({item.name}): expected the command as text, such as "
                             f"'nvidia-smi topo -p2p r'; found {type(item.command).__name__}.")
        found.append(Piece(item.name, bytes(data), item.command, bool(item.gzip), bool(item.truncated)))
    return found


def _take_one(built: _Built, item: Piece, max_decompressed: int, parse_seconds: float | None) -> None:
    """Take one file within its parse budget; when it fails or runs out, undo what it filed and list it as not used
    with the reason, so that the other files are read all the same."""
    inputs, unmapped = len(built.inputs), len(built.unmapped)
    built.undo = []
    try:
        with parse_budget(parse_seconds):
            _take(built, item, max_decompressed)
    except Exception as exc:  # any failure of one file's readers is that file's, never the material's
        for undo in reversed(built.undo):
            undo()
        del built.inputs[inputs:], built.unmapped[unmapped:]
        built.inputs.append({"name": item.name, "kind": None, "gzip": item.gzip or item.data[:2] == GZIP_MAGIC,
                             "truncated": item.truncated, "as": []})
        built.skip(item.name, refusal(exc, how_to_raise("parse_seconds")))
    finally:
        built.undo = []


def _take(built: _Built, item: Piece, max_decompressed: int) -> None:
    data, gzipped, whole = item.data, item.gzip, not item.truncated
    if data[:2] == GZIP_MAGIC:
        try:
            data, whole = gunzip(data, max_decompressed)
        except GunzipLimitError as exc:
            built.inputs.append({"name": item.name, "kind": None, "gzip": True, "truncated": False, "as": []})
            built.skip(item.name, str(exc))
            return
        gzipped = True
    text = decode_paste(data)
    # A saved mail is decoded whole before it is cut into outputs: its soft line breaks cross their lines.
    mail = decoded_mail(unify_newlines(text))
    text = text if mail is None else mail
    kind = detect_kind(text)
    if kind != "nvidia-bug-report" and item.command is None and _took_pieces(built, item, text, max_decompressed):
        return
    entry: dict[str, Any] = {"name": item.name, "kind": kind, "gzip": gzipped, "truncated": not whole, "as": []}
    built.inputs.append(entry)
    if gzipped and not whole and not text:
        built.skip(item.name, "gzip data that does not decompress: the file is damaged or not gzip")
        return
    if kind is None:
        built.skip(item.name, "not output of a tool this reader knows (" + ", ".join(KINDS.values()) + ")")
        return
    if kind == "nvidia-bug-report":
        _take_bug_report(built, item.name, text, entry)
        return
    if kind in BENCH_LOG_KINDS:
        built.skip(item.name, f"{KINDS[kind]}: the audit reads no benchmark logs; give it to the bench phase "
                   f"({BENCH_LOG_KINDS[kind].variable})")
        return
    command = _declared(item, text)
    output = _tool_output(text)
    if kind == "nvidia-smi-topo-p2p":  # what told its capability is recorded with it
        told_by = item.named_by if command is not None and command == item.command else "command line"
        _take_p2p(built, item.name, command, output, entry, told_by)
        return
    handler = _HANDLERS[kind]
    handler(built, item.name, command, output, entry)


def _took_pieces(built: _Built, item: Piece, text: str, max_decompressed: int) -> bool:
    """A paste of several outputs (material/split.py) taken as one input per output, each named after the
    paste and the line it starts at, with the command its shell line or heading names; False for one output."""
    pieces = split_outputs(text)
    if len(pieces) < 2:
        return False
    for piece in pieces:
        _take(built, Piece(f"{item.name}, line {piece.start + 1}", piece.text.encode("utf-8"), piece.command,
                           named_by=piece.named_by or "command line"), max_decompressed)
    return True


def _declared(item: Piece, text: str) -> str | None:
    """The command the input is the output of: as the caller said, as its name spells it out (a paste named
    ``nvidia-smi topo -p2p r``), or as a shell line in the paste shows it."""
    for candidate in (item.command, item.name):
        if candidate and re.match(r"^\s*(?:nvidia-smi|qm|cat|dmesg|lspci)(?:\s|$)", candidate):
            return " ".join(candidate.split())
    return pasted_command(text)


def _tool_output(text: str) -> str:
    """What the tool printed: transport damage undone (CRLF, quoted-printable), without the shell line, the
    Markdown fences a paste adds, and the quote marks of a reply that quotes the whole output (``> ``)."""
    lines = normalize_paste(text).split("\n")
    kept = [line for line in lines if not re.match(r"^\s*(?:```|~~~)", line)]
    if all(re.match(r"^\s{0,3}>", line) for line in kept if line.strip()):
        kept = [re.sub(r"^\s{0,3}> ?", "", line, count=1) for line in kept]
    for index, line in enumerate(kept[:3]):
        if line.strip() and pasted_command(line) is not None:
            del kept[index]
            break
    output = "\n".join(kept)
    if not output.strip():
        return ""
    return output if output.endswith("\n") else output + "\n"


def _ran(stdout: str) -> dict[str, Any]:
    # A pasted output is what the command printed when it worked: nvidia-smi's failures are kinds of their own.
    return {"rc": 0, "stdout": stdout, "stderr": ""}


def _command(key: str) -> Callable[[_Built, str, str | None, str, dict[str, Any]], None]:
    def handler(built: _Built, name: str, command: str | None, output: str, entry: dict[str, Any]) -> None:
        built.put("commands", key, _ran(output), name, entry)
    return handler


def _material(key: str) -> Callable[[_Built, str, str | None, str, dict[str, Any]], None]:
    """Filed whole under the capture's ``material`` key that the gatherer reading it names."""
    def handler(built: _Built, name: str, command: str | None, output: str, entry: dict[str, Any]) -> None:
        built.put("material", key, output, name, entry)
    return handler


def _take_p2p(built: _Built, name: str, command: str | None, output: str, entry: dict[str, Any],
              told_by: str = "command line") -> None:
    matrix, capability = p2p_command(command, name, told_by)  # the capability from its command line or file name
    if matrix is None:
        built.skip(name, str(capability))
        return
    entry["capability"] = capability
    built.put("commands", matrix.key, _ran(output), name, entry)


def _take_query(built: _Built, name: str, command: str | None, output: str, entry: dict[str, Any]) -> None:
    if command in (QUERY_KEY, *HEALTH_KEYS):
        built.put("commands", command, _ran(output), name, entry)
        return
    first = next((line for line in clean_lines(output) if line.strip()), "")
    fields = tuple(without_unit(value.strip()) for value in first.split(","))
    by_fields = {tuple(QUERY_GPU_FIELDS): QUERY_KEY, tuple(HEALTH_QUERY_FIELDS): HEALTH_KEYS[0],
                 tuple(HEALTH_QUERY_FIELDS_OLD): HEALTH_KEYS[1]}
    if fields in by_fields:
        # The header is nvidia-smi's, and the parsers skip it and the units (nvidia_smi_query).
        built.put("commands", by_fields[fields], _ran(output), name, entry)
        return
    built.skip(name, "an nvidia-smi --query-gpu output, but not of the fields the audit asks for (or without its "
               f"header, so its columns cannot be told): run {QUERY_KEY.replace(',noheader', '')}")


def _take_lspci(built: _Built, name: str, command: str | None, output: str, entry: dict[str, Any]) -> None:
    lines = clean_lines(output)
    if not any(_DOMAIN_DEVICE_RE.match(line) for line in lines):
        built.skip(name, "lspci output without PCI domains (no -D): the audit's lspci -vvv -D names devices "
                   "with them")
        return
    built.put("commands", LSPCI_KEY, _ran(output), name, entry)


def _take_cmdline(built: _Built, name: str, command: str | None, output: str, entry: dict[str, Any]) -> None:
    built.put("files", CMDLINE_FILE, output, name, entry)


def _take_vm_config(built: _Built, name: str, command: str | None, output: str, entry: dict[str, Any]) -> None:
    if "--current" in (command or ""):
        built.skip(name, "qm config --current leaves out the pending changes, and the audit judges a VM as it will "
                   "start next; paste qm config <vmid> without --current")
        return
    match = _VM_COMMAND_RE.match(command or "")
    vmid = (match.group("vmid") or match.group("file_vmid")) if match else None
    name_match = _VM_NAME_RE.match(name.strip())
    vmid = vmid or (name_match.group("vmid") if name_match else None)
    if vmid is None:
        built.skip(name, "a Proxmox VM config, but nothing says its VM id: paste it with its 'qm config <vmid>' "
                   "line, or name it <vmid>.conf")
        return
    # `qm config` prints the config with its pending changes applied, which is how the audit judges a VM.
    label = f"files:{QEMU_SERVER_DIR}/{vmid}.conf"
    built.put("files", f"{QEMU_SERVER_DIR}/{vmid}.conf", output, name, entry)
    if label not in entry["as"]:
        return  # another input gave this VM another config
    # The listing holds the configs given, not every VM of the node: the audit judges the VMs it was shown.
    listing = built.dirs.setdefault(QEMU_SERVER_DIR, [])
    if f"{vmid}.conf" not in listing:
        listing.append(f"{vmid}.conf")
        listing.sort()
        built.undo.append(lambda: listing.remove(f"{vmid}.conf"))
    built.add_source(f"dirs:{QEMU_SERVER_DIR}", name)


_HANDLERS: dict[str, Callable[[_Built, str, str | None, str, dict[str, Any]], None]] = {
    "nvidia-smi-q-xml": _command(SMI_Q_XML_KEY),
    "nvidia-smi-q": _command(SMI_Q_KEY),
    "nvidia-smi-topo-m": _command(TOPO_KEY),
    "nvidia-smi-topo-p2p": _take_p2p,
    "nvidia-smi-query-gpu": _take_query,
    "nvidia-smi-list": _command(LIST_KEY),
    "lspci-vvv": _take_lspci,
    "proxmox-vm-config": _take_vm_config,
    "pveversion": _command(PVEVERSION.key),  # -v's too: the same version, build and kernel (parsers/pveversion.py)
    "dmesg": _command(DMESG_KEY),
    "journal-kernel": _command(JOURNAL.key),
    "proc-cmdline": _take_cmdline,
    # An NCCL INFO log: its GPUs (material/nccl_gpus.py) where nothing else lists them.
    "nccl-debug": _material(NCCL_DEBUG_MATERIAL),
    # SGLang's decode lines: the rate the user observed, set beside the communication ceiling (gpu_analyze).
    "sglang-decode-log": _material(SGLANG_DECODE_MATERIAL),
    "nccl-topo-xml": _material(NCCL_TOPO_MATERIAL),
    # The fabric manager's own lines: its refusals and start failures (audit/health.py gather_fabric_manager).
    "fabric-manager-log": _material(FABRIC_MANAGER_LOG_MATERIAL),
    # DCGM's verdicts, of whatever level the paste was run at (its JSON does not say): audit/dcgm_diag.py.
    "dcgm-diag-json": _material(DCGM_DIAG_MATERIAL),
}


def _take_bug_report(built: _Built, name: str, text: str, entry: dict[str, Any]) -> None:
    try:
        report = parse_bug_report(text)
    except BugReportParseError as exc:
        built.skip(name, str(exc))
        return
    if not report.complete:
        entry["truncated"] = True
    for section in report.sections:
        origin = f"{name}: {section.name} (line {section.line})"
        if section.kind in ("file", "missing", "unreadable") and section.name.startswith(_KEPT_FILE_PREFIXES):
            value: Any = {"file": encode_bytes(section.text.encode("utf-8")), "missing": None,
                          "unreadable": {"error": "not readable to nvidia-bug-report.sh"}}[section.kind]
            built.put("files", section.name, value, origin, entry)
        elif section.kind == "command" and section.name == "dmesg":
            if section.text:
                built.put("commands", DMESG_KEY, _ran(section.text), origin, entry)
            else:
                built.skip(origin, "the report's dmesg section is empty (dmesg refused or printed nothing)")
        elif section.kind == "command" and section.name in _BUG_REPORT_SMI_Q:
            built.put("commands", SMI_Q_KEY, _ran(section.text), origin, entry)


def _warnings(built: _Built) -> list[str]:
    warnings = [two_hosts(built.node_outputs)] if built.node_outputs else []
    if guest_with_its_vm(built.inputs):
        warnings.append("the material holds a Proxmox VM config and nvidia-smi output: the outputs are judged as the "
                        "guest's and the config as that of the VM it runs in; the node (its IOMMU, drivers, groups) "
                        "is not judged")
    return warnings
