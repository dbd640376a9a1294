"""Secrets in a Proxmox VM's config: which keys hold one, and the secrets written inside other values.

Neither facts, reports nor captures carry a secret's value, only that it is set: the value of a secret-named key
(``SECRET_KEY``) and each secret ``redact_secret_values`` finds inside another value become ``REDACTED``. The
parser reads the config as written; what it hands on goes through here.
"""

from __future__ import annotations

import re

# Keys whose values are secrets (cloud-init's cipassword and sshkeys, and anything named like a password,
# token or key): neither facts nor captures carry their values, only that they are set.
SECRET_KEY = re.compile(r"pass|secret|token|credential|sshkey|private|api[_-]?key", re.IGNORECASE)
REDACTED = "<redacted>"


# A secret written inside a value rather than as a key of its own: ``name=value`` or ``name: value`` (a QEMU
# property such as ``-spice password=...``, a systemd credential in ``-smbios type=11,value=...``, "root password:
# ..." in a VM's description, whose ":" qemu-server writes as %3A in the file; a config line qemu-server cannot
# parse), the name matching SECRET_KEY. The value ends at a space, a comma (QEMU's ",," is a comma inside a value),
# a quote, or it is quoted.
_NAMED_SECRET = re.compile(
    r"(?P<name>[\w.:\-]*(?:pass|secret|token|credential|sshkey|private|api[_-]?key)[\w.\-]*)"
    r"(?P<sep>[\"']?[ \t]*(?:[:=]|%3[AaDd])[ \t]*)(?P<value>\"[^\"]*\"|'[^']*'|(?:[^\s,\"']|,,)+)", re.IGNORECASE)
# QEMU's secret object carries its secret in ``data`` (``-object secret,id=sec0,data=...``, or its JSON form).
_SECRET_OBJECT = re.compile(r"(?:^|[\s'\"])(?:secret,|\{[^}]*\"qom-type\"\s*:\s*\"secret\")\S*", re.IGNORECASE)
_DATA = re.compile(r"(?P<name>\bdata[\"']?)(?P<sep>\s*[:=]\s*)(?P<value>\"[^\"]*\"|(?:[^\s,}\"']|,,)+)")


def without_secrets(options: dict[str, str]) -> dict[str, str]:
    """``options`` with the value of every secret-named key replaced by ``REDACTED``, and the secrets written
    inside the other values (``args``) too."""
    return {key: REDACTED if SECRET_KEY.search(key) else redact_secret_values(value) for key, value in options.items()}


def redact_secret_values(text: str | None) -> str | None:
    """``text`` with the value of every secret written inside it replaced by ``REDACTED``: a secret-named
    ``name=value`` or ``name: value``, and the ``data`` of a QEMU secret object. A VM's ``args``, its description,
    and any line or warning that quotes them go through this before they reach facts, reports or captures."""
    if not text:
        return text

    def named(match: re.Match[str]) -> str:
        return f"{match.group('name')}{match.group('sep')}{REDACTED}"

    text = _SECRET_OBJECT.sub(lambda obj: _DATA.sub(named, obj.group(0)), text)
    return _NAMED_SECRET.sub(named, text)
