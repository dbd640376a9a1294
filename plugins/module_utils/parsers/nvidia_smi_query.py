"""Parser for ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``: one line per GPU.

Pure functions from text to typed data: no Ansible, no subprocess. Each parser raises only
``NvidiaSmiParseError`` (a ``ValueError``) and says what it expected, what it found and what to do.
Values are ``", "`` separated, in the order of the fields asked for; ``--format=csv`` without
``noheader`` adds a header line, without ``nounits`` numbers carry their unit (``81559 MiB``).

Output schema:

* ``split_query_gpu_csv`` -> one dict per GPU, field name -> the string printed.
* ``parse_query_gpu_csv`` -> the same keys with typed values: ``index``, ``pcie.link.*`` and
  ``memory.total`` (MiB) int; ``persistence_mode``, ``ecc.mode.*`` and ``mig.mode.*`` bool; what
  nvidia-smi could not give (``[N/A]``, ``[Not Supported]``...) None; anything else the string printed.
* ``convert_query_gpu`` / ``parse_query_gpu`` -> the facts form: ``index``, ``name``, ``uuid``,
  ``pci_bus_id`` and ``pci_address`` (sysfs form), ``compute_cap`` with ``compute_cap_major`` /
  ``_minor``, ``memory_total_mib`` / ``_bytes``, ``driver_version`` with ``driver_branch``,
  ``pcie_link_gen_current`` / ``_max``, ``pcie_link_width_current`` / ``_max``, ``persistence_mode``,
  ``ecc_mode``, ``mig_mode`` (and the ``_pending`` ones when asked), ``unavailable`` (field -> as printed).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import (
    NvidiaSmiParseError,
    output_lines,
    small_int,
    smi_error,
    strip_ansi,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_failure import INVALID_FIELD_RE, failure_in

QUERY_GPU_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "compute_cap",
    "memory.total",
    "driver_version",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "persistence_mode",
    "ecc.mode.current",
    "mig.mode.current",
)
"""The fields the audit asks for, in this order: ``--query-gpu=`` + ``",".join(QUERY_GPU_FIELDS)``."""


def without_unit(value: str) -> str:
    """A header field without the unit nvidia-smi adds (``memory.total [MiB]`` -> ``memory.total``): the last ``[...]``
    ending the field, from the first ``[`` after the ``]`` before it, and the blanks before it. Found from the end by
    hand: the regex it replaces (``\\s*\\[[^\\]]*\\]$``) ran to the end from each ``[`` of a field of many."""
    newline = "\n" if value.endswith("]\n") else ""  # where the regex's $ matched too
    body = value[:-1] if newline else value
    if not body.endswith("]"):
        return value
    last = len(body) - 1
    opened = body.find("[", body.rfind("]", 0, last) + 1, last)
    return value if opened < 0 else body[:opened].rstrip() + newline


def is_invalid_field_error(output: str) -> str | None:
    """The field an older nvidia-smi refused (``Field "compute_cap" is not a valid field to query.``),
    or None. Drivers before R510 do not know ``compute_cap``: ask again without the field."""
    if not isinstance(output, str):
        return None
    match = INVALID_FIELD_RE.search(strip_ansi(output))
    return match.group(1) if match else None


def split_query_gpu_csv(text: str, fields: Sequence[str]) -> list[dict[str, str]]:
    """Rows of ``--query-gpu=<fields> --format=csv[,noheader][,nounits]`` as dicts of the strings printed.

    A header line (``--format=csv`` without ``noheader``) is recognised and skipped. A line with another
    number of values than ``fields``, or a failure message in place of values, raises
    ``NvidiaSmiParseError`` naming the line.
    """
    what = "nvidia-smi --query-gpu"
    fields = list(fields)
    if not fields or not all(isinstance(name, str) and name for name in fields):
        raise NvidiaSmiParseError(f"{what}: expected the queried field names; found {fields!r}. "
                                  "Pass the same list as --query-gpu=.")
    lines = output_lines(text, what)
    refused = is_invalid_field_error("\n".join(lines))
    if refused is not None:
        raise smi_error(what, "CSV values", refused,
                        f"This nvidia-smi does not know the field {refused!r}: query again without it.")
    rows: list[dict[str, str]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        failure = failure_in(line)
        if failure is not None:
            raise smi_error(f"{what} line {number}", "CSV values", line,
                            f"nvidia-smi reported a failure ({failure[0]}) instead; see nvidia_smi_failure().")
        values = _csv_values(line)
        if len(values) != len(fields):
            raise smi_error(f"{what} line {number}", f"{len(fields)} comma-separated values ({', '.join(fields)})",
                            line, "Query again with the same field list, or check for commas inside values.")
        if not rows and [without_unit(value) for value in values] == fields:
            continue
        rows.append(dict(zip(fields, values, strict=True)))
    return rows


def parse_query_gpu_csv(text: str, fields: Sequence[str]) -> list[dict[str, Any]]:
    """Rows of ``--query-gpu`` keyed by the queried field names, with typed values.

    ``index``, the ``pcie.link.*`` fields and ``memory.total`` (MiB) are ints; ``persistence_mode`` and the
    ``ecc.mode.*`` / ``mig.mode.*`` fields are booleans (Enabled/Disabled); what nvidia-smi could not give
    (``[N/A]``, ``[Not Supported]``, ``N/A``, ``[Unknown Error]``...) is None; everything else is the string
    printed (``compute_cap`` ``"12.0"``, ``driver_version``, ``pci.bus_id``). A value of the wrong form
    raises ``NvidiaSmiParseError`` naming the line and the field.
    """
    typed_rows = []
    for number, row in enumerate(split_query_gpu_csv(text, fields), start=1):
        typed_rows.append({name: _typed_value(name, value, f"GPU row {number}") for name, value in row.items()})
    return typed_rows


def _csv_values(line: str) -> list[str]:
    try:
        values = next(csv.reader([line], skipinitialspace=True))
    except (csv.Error, StopIteration):
        values = line.split(",")
    return [value.strip() for value in values]


def pci_bus_id_to_sysfs(bus_id: str) -> str | None:
    """``00000000:18:00.0`` (nvidia-smi) -> ``0000:18:00.0`` (the name under /sys/bus/pci/devices)."""
    if not isinstance(bus_id, str):
        return None
    match = re.fullmatch(r"\s*([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])\s*", bus_id)
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}.{function}"


def _is_unavailable(value: str) -> bool:
    # nvidia-smi writes "[N/A]", "[Not Supported]", "[Unknown Error]", "[GPU is lost]" in CSV,
    # and a bare "N/A" in the topology matrix.
    value = value.strip()
    return value == "N/A" or (value.startswith("[") and value.endswith("]"))


_INT_FIELDS = ("index", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
               "pcie.link.width.max", "memory.total")
_BOOL_FIELDS = ("persistence_mode", "ecc.mode.current", "ecc.mode.pending", "mig.mode.current", "mig.mode.pending")
_VERSION_FIELDS = {"compute_cap": r"\d{1,4}\.\d{1,4}", "driver_version": r"\d{1,6}(?:\.\d{1,6}){0,3}"}
_BOOL_WORDS = {"enabled": True, "disabled": False, "on": True, "off": False}
_MIB = 1024 * 1024


def _typed_value(name: str, raw: Any, where: str) -> Any:
    """One --query-gpu value in its type; values already typed pass through."""
    if raw is None or isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and name in _INT_FIELDS:
        return raw
    if not isinstance(raw, str):
        raise smi_error(f"nvidia-smi --query-gpu {where} field {name}", "the string printed", repr(raw),
                        "Pass rows from split_query_gpu_csv() or parse_query_gpu_csv().")
    value = raw.strip()
    if _is_unavailable(value):
        return None
    if name in _INT_FIELDS:
        # Without ``nounits`` memory comes as "81559 MiB".
        number = small_int(re.sub(r"(?<!\s)\s*MiB$", "", value) if name == "memory.total" else value)
        if number is None:
            raise smi_error(f"nvidia-smi --query-gpu {where} field {name}", "a whole number", raw,
                            "Query with --format=csv,noheader,nounits so numbers come without units.")
        return number
    if name in _BOOL_FIELDS:
        if value.lower() not in _BOOL_WORDS:
            raise smi_error(f"nvidia-smi --query-gpu {where} field {name}", "Enabled or Disabled", raw,
                            "This nvidia-smi prints the mode differently; report the value so the parser learns it.")
        return _BOOL_WORDS[value.lower()]
    if name in _VERSION_FIELDS and not re.fullmatch(_VERSION_FIELDS[name], value):
        raise smi_error(f"nvidia-smi --query-gpu {where} field {name}", "a dotted version number", raw,
                        "Check that the field list matches the order of the values.")
    return value


def convert_query_gpu(row: dict[str, Any]) -> dict[str, Any]:
    """One row (from ``split_query_gpu_csv`` or ``parse_query_gpu_csv``) as a dict for facts.

    Keys, for the fields queried: ``index``, ``name``, ``uuid``, ``pci_bus_id`` (as printed) and
    ``pci_address`` (sysfs form), ``compute_cap`` (``"12.0"``) with ``compute_cap_major`` /
    ``compute_cap_minor``, ``memory_total_mib`` and ``memory_total_bytes``, ``driver_version`` with
    ``driver_branch`` (``570``), ``pcie_link_gen_current`` / ``_max`` and ``pcie_link_width_current`` /
    ``_max``, ``persistence_mode`` / ``ecc_mode`` / ``mig_mode`` booleans (``ecc_mode_pending`` /
    ``mig_mode_pending`` when asked). Other fields keep their value under their name with dots as
    underscores. ``unavailable`` maps each field nvidia-smi could not give to what it printed
    (``"[N/A]"``, ``"[Not Supported]"``; None when the row came already typed).
    """
    result: dict[str, Any] = {"unavailable": {}}
    for name, raw in row.items():
        value = _typed_value(name, raw, "row")
        if value is None:
            result["unavailable"][name] = raw.strip() if isinstance(raw, str) else None
        _derive(result, name, value)
    return result


_RENAMED = {
    "pci.bus_id": "pci_bus_id",
    "memory.total": "memory_total_mib",
    "ecc.mode.current": "ecc_mode",
    "ecc.mode.pending": "ecc_mode_pending",
    "mig.mode.current": "mig_mode",
    "mig.mode.pending": "mig_mode_pending",
}


def _derive(result: dict[str, Any], name: str, value: Any) -> None:
    result[_RENAMED.get(name, name.replace(".", "_"))] = value
    if name == "pci.bus_id":
        result["pci_address"] = pci_bus_id_to_sysfs(value)
    elif name == "memory.total":
        result["memory_total_bytes"] = value * _MIB if value is not None else None
    elif name == "compute_cap":
        major, _unused, minor = value.partition(".") if value else (None, "", None)
        result["compute_cap_major"] = int(major) if major else None
        result["compute_cap_minor"] = int(minor) if minor else None
    elif name == "driver_version":
        result["driver_branch"] = int(value.split(".")[0]) if value else None


def parse_query_gpu(text: str, fields: Sequence[str] = QUERY_GPU_FIELDS) -> list[dict[str, Any]]:
    """``split_query_gpu_csv`` then ``convert_query_gpu`` on each row: the facts form."""
    return [convert_query_gpu(row) for row in split_query_gpu_csv(text, fields)]
