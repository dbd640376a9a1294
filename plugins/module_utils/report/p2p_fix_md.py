"""The Markdown of a P2P fix's before/after report (report/p2p_fix.py builds the data)."""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.p2p_capability import (
    CAPABILITIES,
    COMBINATIONS,
    NOT_STATED,
    capability_name,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.markdown import cell, matrix_table, table

# The P2P facts' key -> the letters of the command that printed it ("read+write" -> "rw").
LETTERS = {capability_name(letters): letters for letters in (*CAPABILITIES, *COMBINATIONS)}


def _size(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.4g} {unit} ({size} B)"
    return f"{size} B"


def _matrix_heading(before: dict[str, Any], after: dict[str, Any] | None) -> str:
    """The capability of the matrices compared: the one the P2P rule judged each side from (report/p2p_fix.py)."""
    names = sorted({str(side["p2p_capability"]) for side in (before, after or {}) if side.get("p2p_capability")})
    if not names:
        return "## P2P read (nvidia-smi topo -p2p r)"
    if names == [NOT_STATED]:
        return "## P2P (nvidia-smi topo -p2p, capability not stated)"
    commands = [f"nvidia-smi topo -p2p {LETTERS[name]}" for name in names if name in LETTERS]
    return f"## P2P {' / '.join(names)}" + (f" ({', '.join(commands)})" if commands else "")


def _matrix(side: dict[str, Any] | None) -> list[str]:
    if side is None:
        return ["Not measured.", ""]
    matrix = side.get("p2p_read")
    if not matrix:
        return ["No P2P matrix (the audit could not read one).", ""]
    return matrix_table([f"GPU{i}" for i in range(len(matrix))], matrix)


def _proof_rows(before: dict[str, Any], after: dict[str, Any] | None) -> list[list[Any]]:
    keys = (("data check", "data_check"), ("pairs tried", "pairs"), ("peer access granted", "peer_access_pairs"),
            ("data wrong", "data_wrong_pairs"), ("proven (granted, data intact)", "proven_pairs"),
            ("source", "source"), ("why not run", "why_not"))
    second = (after or {}).get("probe") or {}
    return [[label, before["probe"].get(key), second.get(key) if after else "not measured"] for label, key in keys]


def _ceiling_rows(before: dict[str, Any], after: dict[str, Any] | None) -> list[list[Any]]:
    first, second = before.get("ceiling") or {}, (after or {}).get("ceiling") or {}
    keys = (("model", "model"), ("tensor parallel", "tensor_parallel_size"),
            ("single stream, tok/s", "single_stream_tokens_per_s"), ("concurrent streams", "batch"),
            ("all streams, tok/s", "batch_tokens_per_s"))
    return [[label, _rounded(first.get(key)), _rounded(second.get(key))] for label, key in keys]


def _rounded(value: Any) -> Any:
    return round(value) if isinstance(value, float) else value


def render(report: dict[str, Any]) -> str:
    before, after = report["before"], report["after"]
    change = report["change"]
    lines = [f"# {report['guest']}: P2P fix of VM {report['vmid']} on {report['node']}", ""]
    lines += [f"**{report['verdict']}**: {report['summary']}.", ""]
    if report.get("date"):
        lines += [f"Date: {report['date']}", ""]
    if report["restored"]:
        lines += ["## Restored", "", f"The backed-up config {cell(report['restored'].get('backup'))} was put back "
                  f"and the VM restarted: {report['restored'].get('reason')}", ""]
    lines += ["## The change", ""]
    lines += table(["key", "before", "after"], [[c.get("key"), c.get("old"), c.get("new")]
                                                for c in change["changes"]]) if change["changes"] else ["None.", ""]
    lines += [f"Command: `{change['command_line']}`" if change["command_line"] else "Command: none", "",
              f"Backup of the config: {cell(change['backup'])}; QEMU restarted: {cell(change['restarted'])}", ""]
    lines += [_matrix_heading(before, after), "", f"Before ({cell(before['p2p_read_state'])}):", ""]
    lines += _matrix(before)
    lines += [f"After ({cell((after or {}).get('p2p_read_state'))}):", ""]
    lines += _matrix(after)
    lines += ["## Probe proof (peer writes checked element by element)", ""]
    lines += table(["", "before", "after"], _proof_rows(before, after))
    lines += ["## All-reduce latency per size", ""]
    if report["latency"]:
        lines += table(["size", "before (us)", "after (us)", "before / after"],
                       [[_size(r["size_bytes"]), r["before_us"], r["after_us"], r["speedup"]]
                        for r in report["latency"]])
    else:
        lines += ["Not measured on either side.", ""]
    for name, side in (("before", before), ("after", after)):
        if side is not None and side.get("allreduce_why_not"):
            lines += [f"No all-reduce curve {name}: {side['allreduce_why_not']}", ""]
    lines += ["## Predicted decode ceiling from the all-reduce curve", ""]
    lines += table(["", "before", "after"], _ceiling_rows(before, after))
    lines += ["## Audit findings", "", f"Before: {', '.join(before['findings']) or 'none'}",
              "", f"After: {', '.join(after['findings']) or 'none' if after else 'not measured'}", ""]
    return "\n".join(lines)
