"""Secrets written inside a value, not under a secret-named key: QEMU ``args`` (``-object secret,...,data=``,
``password=``), the VM's description, and a config line qemu-server cannot parse (``CIPASSWORD: ...``), which the
audit quotes in a warning. None of them may reach the facts, the report or the capture; the audit still reads the
args as written (the clique rules see every ``-set``).
"""

from __future__ import annotations

import json
import re

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import (
    REDACTED,
    parse_args,
    redact_secret_values,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.report.render import host_markdown
from hypothesis import given
from hypothesis import strategies as st

from tests.cpu_limit import within
from tests.unit.audit.test_capture_privacy import GPU_VM, audit_and_save, node_with_secrets

SECRET = "Hunter2-Qx7"
ARGS = (f"-object secret,id=sec0,data={SECRET},format=raw -spice port=5930,password={SECRET} "
        f"-smbios type=11,value=io.systemd.credential:passwd.hashed-password.root={SECRET} "
        "-set device.hostpci0.x-nv-gpudirect-clique=0")
DESCRIPTION = f"#GPU VM\n#root password%3A {SECRET}\n#api_token={SECRET}\n"


@pytest.mark.parametrize(("text", "expected"), [
    (ARGS, f"-object secret,id=sec0,data={REDACTED},format=raw -spice port=5930,password={REDACTED} "
           f"-smbios type=11,value=io.systemd.credential:passwd.hashed-password.root={REDACTED} "
           "-set device.hostpci0.x-nv-gpudirect-clique=0"),
    ("-object '{\"qom-type\":\"secret\",\"id\":\"s0\",\"data\":\"" + SECRET + "\"}'",
     "-object '{\"qom-type\":\"secret\",\"id\":\"s0\",\"data\":" + REDACTED + "}'"),
    (f"-spice password={SECRET},,more,port=1", f"-spice password={REDACTED},port=1"),
    (f"root password: {SECRET} (rotate monthly)", f"root password: {REDACTED} (rotate monthly)"),
    (f"CIPASSWORD: {SECRET}", f"CIPASSWORD: {REDACTED}"),
    ("-cpu host,kvm=off -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=262144",
     "-cpu host,kvm=off -fw_cfg name=opt/ovmf/X-PciMmio64Mb,string=262144"),
    ("GLM-5 on SGLang, PCI passthrough of 8 GPUs", "GLM-5 on SGLang, PCI passthrough of 8 GPUs"),
])
def test_secrets_inside_values_are_redacted_and_nothing_else(text: str, expected: str) -> None:
    assert redact_secret_values(text) == expected


@given(st.text(alphabet="abcdefghij-_=:,. \n'\"", max_size=40))
def test_a_secret_after_a_secret_name_never_survives(prefix: str) -> None:
    for name in ("password", "data", "api_key", "secret"):
        text = f"{prefix} -object secret,id=x,{name}={SECRET}" if name == "data" else f"{prefix} {name}={SECRET}"
        assert SECRET not in (redact_secret_values(text) or "")


def test_the_parser_still_reads_args_as_written() -> None:
    assert parse_args(ARGS).sets  # the -set of the clique, read from the unredacted value


def test_secrets_inside_values_reach_neither_facts_report_nor_capture() -> None:
    data = node_with_secrets()
    config = data["files"][GPU_VM]
    data["files"][GPU_VM] = DESCRIPTION + config.replace("cores: 64\n", f"args: {ARGS}\ncores: 64\n"
                                                         f"CIPASSWORD: {SECRET}\n", 1)
    live, saved = audit_and_save(data)
    vm = next(v for v in live["proxmox"]["vms"] if v["vmid"] == 120)
    assert SECRET not in json.dumps(live) and SECRET not in host_markdown("pve", live)
    assert SECRET not in json.dumps(saved)
    assert f"data={REDACTED}" in vm["args"] and "root password: " + REDACTED in vm["description"]
    assert any(f"CIPASSWORD: {REDACTED}" in w for w in vm["warnings"])
    assert "a secret inside a value" in saved["about"]
    # The clique args were read before the redaction; a pasted fix would lose the secret, and says so.
    remedies = " ".join(f.get("remedy") or "" for f in live["findings"])
    assert "--args" in remedies and f"args hold a secret, shown here as {REDACTED}" in remedies


# The one regex the hand loop of parsers/proxmox_secrets.py replaced: on short texts it is quick, and the loop must
# redact what it redacted, no more, no less.
_NAMED_BEFORE = re.compile(
    r"(?P<name>[\w.:\-]*(?:pass|secret|token|credential|sshkey|private|api[_-]?key)[\w.\-]*)"
    r"(?P<sep>[\"']?[ \t]*(?:[:=]|%3[AaDd])[ \t]*)(?P<value>\"[^\"]*\"|'[^']*'|(?:[^\s,\"']|,,)+)", re.IGNORECASE)
_OBJECT_BEFORE = re.compile(r"(?:^|[\s'\"])(?:secret,|\{[^}]*\"qom-type\"\s*:\s*\"secret\")\S*", re.IGNORECASE)
_DATA_BEFORE = re.compile(r"(?P<name>\bdata[\"']?)(?P<sep>\s*[:=]\s*)(?P<value>\"[^\"]*\"|(?:[^\s,}\"']|,,)+)")
_PIECES = ("pass", "PASS", "secret", "secret,", "token", "api_key", "apikey", "data", ":", "=", "%3A", "%3d", " ", "\t",
           "\n", ",", ",,", "\"", "'", "{", "}", "\"qom-type\"", "\"secret\"", "x", "1", ".", "-", "\u017f", "id=")


def _redacted_before(text: str) -> str:
    def named(match: re.Match[str]) -> str:
        return f"{match.group('name')}{match.group('sep')}{REDACTED}"

    text = _OBJECT_BEFORE.sub(lambda found: _DATA_BEFORE.sub(named, found.group(0)), text)
    return _NAMED_BEFORE.sub(named, text)


@given(st.lists(st.sampled_from(_PIECES), max_size=16).map("".join))
def test_the_hand_loop_redacts_what_the_regex_did(text: str) -> None:
    assert redact_secret_values(text) == (_redacted_before(text) if text else text)


@pytest.mark.parametrize("text", [
    "args: -x " + "pass" * 500,  # a minute with the regex, which tried every split of the word at every start
    "description: " + "root-password:" * 600,
    "-object " + " {" * 20000,
    "password=\"" * 5000,
])
def test_a_long_run_of_secret_words_costs_no_more_than_its_length(text: str) -> None:
    assert within(1.0, lambda: redact_secret_values(text)) is not None
