"""What a piece of material is, told from its content alone (never from a file name).

Pure: text or bytes in, a kind name (a key of ``KINDS``) or None out; nothing here raises, whatever the
input. Before looking, the text is repaired as pastes need (``_common.normalize_paste``: CRLF, a
byte-order mark, quoted-printable; terminal escapes; launcher prefixes such as ``[1,0]<stdout>:``;
Markdown quotes and code fences; ``cat -n`` numbering). Bytes that are still gzip give None: the caller
gunzips (material/capture.py does).

Conservative by design: a kind is named only on a marker its tool prints (a banner, a title, a legend,
a table header, a line shape no other tool prints), and text that shows no such marker gives None.
Noise around the output (a greeting, a prompt, a signature) does not change the kind, except for
``proc-cmdline``, which must be one line of kernel parameters. Where a text carries the markers of two
kinds, the more specific one wins, in this order (the first that matches):

1. ``nvidia-bug-report``: the report holds ``nvidia-smi -q``, lspci and dmesg, and is the whole of them.
2. ``nvidia-smi-q-xml`` (``<nvidia_smi_log``), then ``nccl-topo-xml`` (``<system version="1">`` and its
   ``<cpu>`` or ``<pci>``, parsers/nccl_topo_xml.py), then ``nvidia-smi-q`` (the ``NVSMI LOG`` banner or
   ``Attached GPUs :``).
3. ``dcgm-diag-json`` (the root key of DCGM 3's or 4's diagnostic document and its ``test_categories``, even
   where a paste elided or cut it: parsers/dcgm_diag.py), then ``gpu-p2p-probe-log``, the JSON lines of this
   collection's own P2P probe (a GPU pair's ``proof`` or ``timing`` record with the run's ``start`` or
   ``summary``: parsers/harness_events.py), then ``nvbandwidth-json`` and ``nccl-tests-json``: a JSON document
   with their keys.
4. ``nccl-tests`` over ``nccl-debug``: an nccl-tests run (its table header, ``Avg bus bandwidth``,
   ``nccl-tests version``) often carries ``NCCL_DEBUG=INFO`` lines, and bench/ reads both from it; an
   ``NCCL INFO`` log with only the ``# nThread ... nGpus`` line of a run that printed no table stays
   ``nccl-debug``. A log is known by its records (``host:pid:tid [0] NCCL INFO``; ``[0] NCCL INFO`` with
   the host cut; NCCL 2.0 to 2.2's ``host:pid:tid [0] INFO``), its ``NCCL version 2.7.8+cuda10.1`` line or
   its connection lines (``Channel 00 : 0[18000] -> 1[1a000] via P2P/IPC``), behind any prefix but a quote.
5. ``simple-p2p`` (parsers/simple_p2p.py), then ``p2p-bandwidth-latency-test`` (its banner, titles and
   headers, or only its ``Device: 0, NAME, pciBusID:`` and ``Device=0 CAN Access Peer Device=1`` lines when a
   paste was cut early) over ``nvbandwidth`` (the order of parsers/p2p_bandwidth.py).
6. ``nvidia-smi-topo-p2p`` (GPU rows holding only the codes OK, NS, CNS, GNS, TNS, DR, U, X) and
   ``nvidia-smi-topo-m`` (GPU rows with link labels SYS, NODE, PHB, PXB, PIX, SOC, NV#, or affinity
   columns). The capability of a ``topo -p2p`` matrix (r, w, n, a, p) is not in its output:
   ``pasted_command`` reads it from a command line pasted with it.
7. ``nvidia-smi-query-gpu`` (a header of field names, rows of as many values, or the "is not a valid
   field to query" message), ``nvidia-smi-list`` (``GPU 0: ... (UUID: GPU-...)``), ``lspci-vvv``
   (device lines with their indented ``Control:``, ``Capabilities:``... lines; a bare hex dump is
   none), ``proxmox-vm-config`` (three or more Proxmox VM keys, one of them specific to Proxmox), ``pveversion``
   (its ``pve-manager/<version>/<build> (running kernel: ...)`` line, or ``-v``'s ``proxmox-ve:`` or
   ``pve-manager:`` line with the running kernel or version: parsers/pveversion.py),
   ``fabric-manager-log`` (the fabric manager's process names in journal lines, or a message only it prints:
   parsers/fabric_manager_log.py), ``dmesg`` (two or more ``[  12.345678]`` or ``dmesg -T`` stamps),
   ``journal-kernel`` (two or more ``Mar 21 21:42:01 [host] kernel:`` or ISO-stamped lines: ``journalctl -k``, a
   syslog file; or ``kernel: NVRM:`` lines whose stamp was cut), ``proc-cmdline``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import (
    decode_paste,
    normalize_paste,
    strip_launcher_prefix,
    strip_line_numbers,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.dcgm_diag import looks_like_dcgm_diag
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.fabric_manager_log import (
    looks_like_fabric_manager_log,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.harness_events import looks_like_p2p_probe_log
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nccl_topo_xml import MARK_RE as _NCCL_TOPO_RE
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_bug_report import looks_like_bug_report
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import strip_ansi
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_failure import INVALID_FIELD_RE
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_topo import P2P_STATUS_MEANING
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pveversion import looks_like_pveversion
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.sglang_decode_log import DECODE_LINE_RE
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.simple_p2p import MARK_RE as _SIMPLE_P2P_RE

KINDS = {
    "nvidia-bug-report": "nvidia-bug-report.log, NVIDIA's bug report (gunzipped)",
    "nvidia-smi-q-xml": "nvidia-smi -q -x",
    "nvidia-smi-q": "nvidia-smi -q",
    "nccl-topo-xml": "an NCCL topology dump (NCCL_TOPO_DUMP_FILE)",
    "dcgm-diag-json": "dcgmi diag -r N --json (DCGM 3 or 4)",
    "nvbandwidth-json": "nvbandwidth -j",
    "gpu-p2p-probe-log": "this collection's P2P probe log (gpuhost.gpu.gpu_p2p_probe save_log, p2p-probe_*.jsonl)",
    "nccl-tests-json": "an nccl-tests run written with -J",
    "nccl-tests": "an nccl-tests run (all_reduce_perf and the others)",
    "nccl-debug": "an NCCL_DEBUG=INFO log",
    "sglang-decode-log": "SGLang's server log with its decode lines (Decode batch ... gen throughput)",
    "p2p-bandwidth-latency-test": "p2pBandwidthLatencyTest (CUDA samples)",
    "simple-p2p": "simpleP2P (CUDA samples)",
    "nvbandwidth": "nvbandwidth",
    "nvidia-smi-topo-p2p": "nvidia-smi topo -p2p r|w|n|a|p",
    "nvidia-smi-topo-m": "nvidia-smi topo -m",
    "nvidia-smi-query-gpu": "nvidia-smi --query-gpu=... --format=csv",
    "nvidia-smi-list": "nvidia-smi -L",
    "lspci-vvv": "lspci -v, -vv or -vvv",
    "proxmox-vm-config": "qm config <vmid>, or /etc/pve/qemu-server/<vmid>.conf",
    "pveversion": "pveversion or pveversion -v (a Proxmox VE node's own versions)",
    "fabric-manager-log": "the fabric manager's log or journal (journalctl -u nvidia-fabricmanager, "
                          "systemctl status nvidia-fabricmanager, /var/log/fabricmanager.log)",
    "dmesg": "dmesg",
    "journal-kernel": "journalctl -k (the kernel's messages from the journal, or a syslog file's)",
    "proc-cmdline": "/proc/cmdline",
}
"""Every kind ``detect_kind`` names, with the tool output it stands for."""

_QUOTE_RE = re.compile(r"^\s{0,3}>(?: |$)")
_FENCE_RE = re.compile(r"^\s*(?:```|~~~)")
_SMI_BANNER_RE = re.compile(r"^\s*=+\s*NVSMI LOG\s*=+\s*$")
_ATTACHED_RE = re.compile(r"^\s*Attached GPUs\s*:\s*\d+\s*$")
_NCCL_TABLE_RE = re.compile(r"^#?\s*size\s+count\s+type\s")
_NCCL_TESTS_MARK_RE = re.compile(r"^#?\s*(?:Avg bus bandwidth\s*:|nccl-tests version\s|Collective test starting:|"
                                 r"Out of bounds values\s*:)")
_NTHREAD_RE = re.compile(r"^#?\s*nThread:? \d+ nGpus:? \d+")
# Records without "host:pid:tid": only the device bracket left ("[0] NCCL INFO ...", as logs reach us with the
# host cut, or behind a timestamp or a launcher's tag), or NCCL 2.0 to 2.2, whose records said "INFO" without
# "NCCL" ("node07:2451:2473 [0] INFO NET/IB: [0] mlx4_0:1/IB"; tests/fixtures/nccl/SOURCES.md).
_NCCL_RANK_RECORD_RE = re.compile(r"(?:^|[\s|\]>:])\[\d{1,6}\] (?:\S{1,64}:\d{1,9} )?"
                                  r"NCCL (?:INFO|WARN|ERROR|TRACE|ABORT) \S")
_NCCL_OLD_RECORD_RE = re.compile(r"(?:^|[\s|\]>:])[A-Za-z0-9<>._-]{1,255}:\d{1,12}:\d{1,12} \[\d{1,6}\] "
                                 r"(?:\S{1,64}:\d{1,9} )?(?:INFO|WARN) \S")
# Rank 0 prints "NCCL version 2.7.8+cuda11.0" alone on its line (src/init.cc, showVersion), behind a prefix
# too; an error message quoting the version ("unhandled system error, NCCL version 2.7.8") has no "+cuda".
_NCCL_VERSION_LINE_RE = re.compile(r"^\s*NCCL version \d{1,3}\.\d{1,3}\.\d{1,3}(?:\+cuda\d{1,3}\.\d{1,3})?\s*$|"
                                   r"(?:^|[\s|\]>:])NCCL version \d{1,3}\.\d{1,3}\.\d{1,3}\+cuda\d{1,3}\.\d{1,3}\s*$")
# A connection line whose record prefix was cut or went to another line with a concurrent writer
# ("Channel 00 : 0[18000] -> 1[1a000] via P2P/IPC"), at the start of a line or behind a launcher's prefix.
_NCCL_CONNECTION_RE = re.compile(r"(?:^|[\s|\]>:])(?:Ring|Channel) \d{1,6}(?:/\d{1,6})? : "
                                 r"\d{1,9}(?:\[[0-9a-fA-F]{1,16}\])? -> "
                                 r"\d{1,9}(?:\[[0-9a-fA-F]{1,16}\])? (?:\[(?:send|receive)\] )?via "
                                 r"(?:P2P/|SHM|NET/|COLLNET/|direct shared memory)")
# host:pid:tid [device] NCCL INFO, the host as NCCL prints it (parsers/nccl_debug.py reads the same).
_NCCL_RECORD_RE = re.compile(r"(?:^|[\s|\]>:])[A-Za-z0-9<>._-]{1,255}:\d{1,12}:\d{1,12} \[\d{1,6}\] "
                             r"(?:\S{1,64}:\d{1,9} )?NCCL (?:INFO|WARN|ERROR|TRACE|ABORT)\b")
# Its banner, matrix titles and D\D header; after a line number too (a numbered excerpt with text around it
# keeps its numbers, as strip_line_numbers removes them only when every line has one).
_P2P_TEST_RE = re.compile(r"^\s*(?:\d{1,6}\s+)?(?:\[?P2P \(Peer-to-Peer\) GPU Bandwidth Latency Test|"
                          r"P2P Connectivity Matrix|(?:Uni|Bi)directional P2P=(?:Enabled|Disabled)|"
                          r"P2P=(?:Enabled|Disabled) Latency|"
                          r"D\\D(?:\s+\d+)+\s*$|"
                          # its device and peer-access lines, all a paste cut early holds
                          r"Device: \d{1,4}, .*, pciBusID: [0-9a-fA-F]+, pciDeviceID: |"
                          r"Device=\d{1,4} (?:CAN|CANNOT) Access Peer Device=\d{1,4}\s*$)")
_NVBANDWIDTH_RE = re.compile(r"^\s*nvbandwidth Version:|^\s*Running [a-z][a-z0-9_]*\.\s*$|"
                             r"^\s*[A-Za-z][^`|]*(?:GPU|CPU)\(row\)[^`|]*(?:GPU|CPU)\(column\)[^`|]*$")
# A row starts with its GPU and a cell; a header goes on with device names or affinity titles.
_GPU_ROW_RE = re.compile(r"^\s*GPU\d{1,4}\s+(?!GPU\d|NIC\d|CPU |NUMA |mlx\d_)\S")
_GPU_HEADER_RE = re.compile(r"^\s*GPU\d{1,4}(?:\s|$)")
_LINK_LABEL_RE = re.compile(r"^(?:X|SYS|NODE|PHB|PXB|PIX|SOC|NV\d{1,3})+$")
_TOPO_M_MARK_RE = re.compile(r"CPU Affinity|NUMA Affinity|=\s*Connection traversing")
_QUERY_FIELD_RE = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*(?: \[[^\]]{1,16}\])?$")
_QUERY_VALUE_HINT_RE = re.compile(r"^(?:GPU-[0-9a-fA-F]{8}-|[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$|"
                                  r"\[(?:N/A|Not Supported)\]$)")
_LIST_GPU_RE = re.compile(r"^GPU \d{1,6}: .+ \(UUID: GPU-[0-9a-fA-F-]+\)\s*$")
_LSPCI_DEVICE_RE = re.compile(r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7] [^:]{2,}: \S")
_LSPCI_ATTRIBUTE_RE = re.compile(r"^\s+(?:Subsystem|Control|Status|Capabilities|Kernel driver in use|Kernel modules|"
                                 r"Region \d|Latency|Interrupt|IOMMU group|Physical Slot|NUMA node|Flags):")
_VM_KEY_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z_\-]{0,30}?\d{0,3}):\s*\S")
_VM_KEYS = frozenset({
    "agent", "args", "balloon", "bios", "boot", "bootdisk", "cores", "cpu", "cpulimit", "cpuunits", "description",
    "efidisk", "hostpci", "hotplug", "ide", "machine", "memory", "meta", "name", "net", "numa", "onboot", "ostype",
    "parent", "sata", "scsi", "scsihw", "serial", "smbios", "sockets", "tags", "tpmstate", "usb", "vcpus", "vga",
    "virtio", "vmgenid", "digest", "affinity", "shares", "startup", "protection",
})
# Keys no other "key: value" text has together: what makes such lines a Proxmox VM config.
_VM_SPECIFIC = frozenset({"hostpci", "vmgenid", "smbios", "ostype", "scsihw", "efidisk", "bootdisk", "tpmstate"})
_DMESG_RE = re.compile(r"^\s*(?:[a-z]{2,8}\s*:[a-z]{2,8}\s*:\s*)?\[\s*\d{1,10}\.\d{1,9}\]|"
                       r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d \d{4}\]")
# journalctl -k's short (with or without the host name) and short-iso stamps, then "kernel:"; a syslog file's
# lines are the same (tests/fixtures/kernel-log/journal-*.txt).
_JOURNAL_RE = re.compile(r"^\s*(?:[A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d|"
                         r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)"
                         r"(?: [^\s:]{1,255})? kernel: ")
# The same lines with the stamp and host cut on the way ("kernel: NVRM: Xid ..."), as pasted from a log viewer's
# message column (tests/fixtures/kernel-log/journal-k-stripped_*.txt): the driver's own lines only, so that other
# text starting with "kernel:" is not taken.
_STAMP_CUT_RE = re.compile(r"^\s*kernel: NVRM: ")
_CMDLINE_TOKEN_RE = re.compile(r"^[^\s=]{1,200}(?:=\S*)?$")
_CMDLINE_MARK_RE = re.compile(r"^(?:BOOT_IMAGE|root|initrd|init|console|intel_iommu|amd_iommu|iommu|rd\.[\w.]+|"
                              r"systemd\.[\w.]+|nvidia[\w.-]*|modprobe\.blacklist|pci|hugepages\w*)=|"
                              r"^(?:ro|rw|quiet|splash)$")
_PROMPT_COMMAND_RE = re.compile(r"^(?:.{0,80}?[$#%]\s+)?(?:sudo\s+)?"
                                r"(?P<command>(?:nvidia-smi|qm|lspci|dmesg|cat|pveversion)(?:\s+\S.*)?)\s*$")
_PROMPT_LINES = 3
_P2P_CODES = frozenset(P2P_STATUS_MEANING)


def detect_kind(data: Any) -> str | None:
    """The kind (a key of ``KINDS``) of one text, or None when it shows the markers of none."""
    text = _as_text(data)
    if text is None or not text.strip():
        return None
    if looks_like_bug_report(text):
        return "nvidia-bug-report"
    lines = clean_lines(text)
    if "<nvidia_smi_log" in text:
        return "nvidia-smi-q-xml"
    if _NCCL_TOPO_RE.search(text):
        return "nccl-topo-xml"
    if any(_SMI_BANNER_RE.match(line) or _ATTACHED_RE.match(line) for line in lines):
        return "nvidia-smi-q"
    if looks_like_dcgm_diag(text):
        return "dcgm-diag-json"
    if looks_like_p2p_probe_log(text):
        return "gpu-p2p-probe-log"
    kind = _json_kind(text)
    if kind:
        return kind
    for detector in (_sglang_kind, _nccl_kind, _p2p_tool_kind, _topo_kind, _query_gpu_kind, _fabric_manager_kind,
                     _line_kind):
        kind = detector(lines)
        if kind:
            return kind
    return None


def _as_text(data: Any) -> str | None:
    if isinstance(data, (bytes, bytearray)):
        if bytes(data[:2]) == b"\x1f\x8b":
            return None
        data = decode_paste(bytes(data))
    if not isinstance(data, str):
        return None
    return strip_ansi(normalize_paste(data))


def clean_lines(text: str) -> list[str]:
    """The lines as the tool printed them: without launcher prefixes, Markdown quotes, code fences and
    ``cat -n`` numbers, right-stripped."""
    lines = [_QUOTE_RE.sub("", strip_launcher_prefix(line), count=1).rstrip() for line in text.split("\n")]
    return strip_line_numbers([line for line in lines if not _FENCE_RE.match(line)])


def _json_kind(text: str) -> str | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        document = json.loads(text[start:end + 1])
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    if isinstance(document.get("nvbandwidth"), dict):
        return "nvbandwidth-json"
    if "results" in document and ("nccl_version" in document or "args" in document):
        return "nccl-tests-json"
    return None


def _sglang_kind(lines: list[str]) -> str | None:
    """SGLang's server log, told by its scheduler's decode lines (parsers/sglang_decode_log.py); before the NCCL
    kinds, as a server started with NCCL_DEBUG=INFO logs NCCL's lines first and its decode lines after."""
    return "sglang-decode-log" if any(DECODE_LINE_RE.search(line) for line in lines) else None


def _nccl_kind(lines: list[str]) -> str | None:
    if any(_NCCL_TABLE_RE.match(line) or _NCCL_TESTS_MARK_RE.match(line) for line in lines):
        return "nccl-tests"
    if any(_NCCL_RECORD_RE.search(line) or _NCCL_OLD_RECORD_RE.search(line)
           or any(_unquoted(pattern, line) for pattern in (_NCCL_RANK_RECORD_RE, _NCCL_VERSION_LINE_RE,
                                                           _NCCL_CONNECTION_RE)) for line in lines):
        return "nccl-debug"
    if any(_NTHREAD_RE.match(line) for line in lines):
        return "nccl-tests"
    return None


def _unquoted(pattern: re.Pattern[str], line: str) -> bool:
    """``pattern`` found in ``line`` at its start or after a prefix (a timestamp, a launcher's or a log
    collector's columns), never inside a quote (a backtick before it) in prose."""
    match = pattern.search(line)
    return bool(match) and "`" not in line[:match.start() + 1]


def _p2p_tool_kind(lines: list[str]) -> str | None:
    if any(_SIMPLE_P2P_RE.match(line) for line in lines):
        return "simple-p2p"
    if any(_P2P_TEST_RE.match(line) for line in lines):
        return "p2p-bandwidth-latency-test"
    if any(_NVBANDWIDTH_RE.search(line) for line in lines):
        return "nvbandwidth"
    return None


def _topo_kind(lines: list[str]) -> str | None:
    rows = [index for index, line in enumerate(lines) if _GPU_ROW_RE.match(line)]
    row_set = set(rows)  # a set: `in` on the list made a paste of many GPU lines take minutes
    headers = [index for index, line in enumerate(lines) if _GPU_HEADER_RE.match(line.replace("\t", " "))
               and index not in row_set]
    if not rows or not headers or headers[0] > rows[0]:
        return None
    header = lines[headers[0]].split()
    cells = [cell for index in rows for cell in lines[index].split()[1:]]
    if all(re.fullmatch(r"GPU\d{1,4}", cell) for cell in header) and cells and set(cells) <= _P2P_CODES:
        return "nvidia-smi-topo-p2p"
    text = "\n".join(lines)
    if _TOPO_M_MARK_RE.search(text) or any(_LINK_LABEL_RE.match(cell) and cell != "X" for cell in cells):
        return "nvidia-smi-topo-m"
    return None


def _query_gpu_kind(lines: list[str]) -> str | None:
    if any(INVALID_FIELD_RE.search(line) for line in lines):
        return "nvidia-smi-query-gpu"
    filled = [line for line in lines if line.strip()]
    for index, line in enumerate(filled[:-1]):
        fields = [field.strip() for field in line.split(",")]
        if len(fields) < 2 or not all(_QUERY_FIELD_RE.match(field) for field in fields):
            continue
        if not any("." in field or field in ("name", "uuid", "index", "serial", "compute_cap") for field in fields):
            continue
        if len(filled[index + 1].split(",")) == len(fields):
            return "nvidia-smi-query-gpu"
    # Without the header (--format=csv,noheader): rows of the same width that hold values only nvidia-smi
    # prints (a GPU UUID, its 8-digit-domain bus id, [N/A]).
    rows = [[value.strip() for value in line.split(",")] for line in filled if line.count(",") >= 1]
    if rows and len(rows) == len(filled) and len({len(row) for row in rows}) == 1 \
            and all(any(_QUERY_VALUE_HINT_RE.match(value) for value in row) for row in rows):
        return "nvidia-smi-query-gpu"
    return None


def _fabric_manager_kind(lines: list[str]) -> str | None:
    # Before dmesg and the journal: its journal lines carry stamps too, and name its processes, not the kernel.
    return "fabric-manager-log" if looks_like_fabric_manager_log("\n".join(lines)) else None


def _line_kind(lines: list[str]) -> str | None:
    if any(_LIST_GPU_RE.match(line) for line in lines):
        return "nvidia-smi-list"
    if any(_LSPCI_DEVICE_RE.match(line) for line in lines) and any(_LSPCI_ATTRIBUTE_RE.match(line) for line in lines):
        return "lspci-vvv"
    keys = {re.sub(r"\d+$", "", match.group("key").lower()) for line in lines for match in [_VM_KEY_RE.match(line)]
            if match}
    if len(keys & _VM_KEYS) >= 3 and keys & _VM_SPECIFIC:
        return "proxmox-vm-config"
    if looks_like_pveversion("\n".join(lines)):
        return "pveversion"
    filled = [line for line in lines if line.strip()]
    stamped = sum(1 for line in filled if _DMESG_RE.match(line))
    if stamped >= 2 or (stamped and stamped == len(filled)):
        return "dmesg"
    journal = sum(1 for line in filled if _JOURNAL_RE.match(line) or _STAMP_CUT_RE.match(line))
    if journal >= 2 or (journal and journal == len(filled)):
        return "journal-kernel"
    if _is_cmdline([line for line in filled if not _PROMPT_COMMAND_RE.match(line)]):
        return "proc-cmdline"
    return None


def _is_cmdline(filled: list[str]) -> bool:
    if len(filled) != 1:
        return False
    tokens = filled[0].split()
    return (all(_CMDLINE_TOKEN_RE.match(token) for token in tokens)
            and any(_CMDLINE_MARK_RE.match(token) for token in tokens))


def pasted_command(data: Any) -> str | None:
    """The command a paste says it is the output of, from a shell line among its first lines
    (``$ nvidia-smi topo -p2p r``, ``root@pve:~# qm config 120``): the command with single spaces, or None.
    Only nvidia-smi, qm, lspci, dmesg, cat and pveversion are looked for."""
    text = _as_text(data)
    if text is None:
        return None
    filled = [line for line in clean_lines(text) if line.strip()][:_PROMPT_LINES]
    for line in filled:
        match = _PROMPT_COMMAND_RE.match(line)
        if match:
            return " ".join(match.group("command").split())
    return None
