"""What a saved capture keeps: the VM configs of GPU VMs only, no secrets, and a line saying what it holds.

The live side is LiveSource's own recording, fed from a Proxmox node's capture instead of the system: the
capture it saves must leave out the VM that passes nothing through and the cloud-init secrets, and still
replay to the facts the audit gave.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit import facts
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_format import CAPTURE_FORMAT, decode_bytes
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.capture_privacy import (
    NOT_CAPTURED,
    REDACTED,
    SECRET_NAME,
    RedactionError,
    compile_redactions,
    finish_capture,
    redact_secret_keys,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.audit.source import (
    CommandResult,
    LiveSource,
    ReplaySource,
    command_key,
    encode_bytes,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import (
    parse_vm_config,
    passes_pci_through,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.views import RuleOptions
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.captures import capture

NODE = "proxmox-host-8xRTXPRO6000-vm-no-clique"
GPU_VM, OTHER_VM = "/etc/pve/qemu-server/120.conf", "/etc/pve/qemu-server/101.conf"
PASSWORD = "$5$Xk3q$Jq1nS2secretHashValue"
SSH_KEY = "ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyOfTheCustomer%20admin%40corp"
CLOUDINIT = f"\n[special:cloudinit]\ncipassword: {PASSWORD}\nciuser: admin\n"


class RecordingReplay(LiveSource):
    """LiveSource's recording, answered from a capture instead of the system it runs on."""

    def __init__(self, data: dict[str, Any], **options: Any) -> None:
        self._answers = ReplaySource(data)
        super().__init__(record=True, nvml_reader=self._answers.nvml, **options)

    def read_bytes(self, path: str) -> bytes | None:
        data = self._answers.read_bytes(path)
        self._keep("files", path, None if data is None else encode_bytes(data))
        return data

    def listdir(self, path: str) -> list[str] | None:
        entries = self._answers.listdir(path)
        self._keep("dirs", path, entries)
        return entries

    def realpath(self, path: str) -> str | None:
        resolved = self._answers.realpath(path)
        self._keep("realpaths", path, resolved)
        return resolved

    def readlink(self, path: str) -> str | None:
        target = self._answers.readlink(path)
        self._keep("links", path, target)
        return target

    def run(self, argv: list[str]) -> CommandResult:
        result = self._answers.run(argv)
        self._keep("commands", command_key(argv), {"rc": result.rc, "stdout": result.stdout, "stderr": result.stderr})
        return result


def node_with_secrets() -> dict[str, Any]:
    """The Proxmox node whose GPU VM has cloud-init's password and SSH keys, in its config and cloud-init state."""
    data = copy.deepcopy(capture(NODE))
    config = data["files"][GPU_VM]
    config = config.replace("cores: 64\n", f"cipassword: {PASSWORD}\ncores: 64\n", 1)
    config = config.replace("smbios1:", f"sshkeys: {SSH_KEY}\nsmbios1:", 1)
    data["files"][GPU_VM] = config + CLOUDINIT
    data["files"][OTHER_VM] += f"cipassword: {PASSWORD}\n"
    return data


def audit_and_save(data: dict[str, Any], **options: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    source = RecordingReplay(data, **options)
    found = facts.audit(source, facts.resolve_subsets(["all"]), RuleOptions())
    return json.loads(json.dumps(found)), json.loads(json.dumps(source.capture))


def replay(saved: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(facts.audit(ReplaySource(saved), facts.resolve_subsets(["all"]), RuleOptions())))


def test_capture_keeps_only_the_gpu_vm_and_none_of_its_secrets() -> None:
    live, saved = audit_and_save(node_with_secrets())
    text = json.dumps(saved)
    assert PASSWORD not in text and "AAAAC3NzaC1lZDI1NTE5" not in text
    # The VM that passes nothing through: neither its settings nor its MAC address leave the host.
    assert saved["files"][OTHER_VM] == NOT_CAPTURED
    assert "gpu-exporter" not in text and "BC:24:11:0E:61:22" not in text
    kept = saved["files"][GPU_VM]
    assert f"cipassword: {REDACTED}" in kept and f"sshkeys: {REDACTED}" in kept
    assert kept.count(f"cipassword: {REDACTED}") == 2  # the config and [special:cloudinit]
    assert "hostpci7: 0000:c2:00.0,pcie=1" in kept and "ciuser: admin" in kept
    # The Proxmox parser and rules read the redacted capture as they read the host.
    assert replay(saved) == live
    assert live["proxmox"]["vm_count"] == 2 and live["proxmox"]["vms_without_hostpci"] == [101]


def test_capture_says_what_it_contains() -> None:
    _live, saved = audit_and_save(node_with_secrets())
    about, contains = saved["about"], saved["contains"]
    assert "dmesg" in about and "pveversion" in about and "/proc/cmdline" in about
    assert "VMs 101" in about and "VM 120: cipassword, sshkeys" in about and REDACTED in about
    assert contains["commands"] == sorted(saved["commands"]) and contains["files"] == len(saved["files"])
    assert "/sys/bus/pci/*" in contains["file_areas"] and GPU_VM in contains["file_areas"]


def test_extra_redactions_reach_files_commands_and_nvml() -> None:
    pattern = r"BC:24:11(?::[0-9A-F]{2}){3}"
    live, saved = audit_and_save(node_with_secrets(),
                                 redact=compile_redactions(["/proc/cmdline", "/sys/class/dmi/id/*uuid", pattern,
                                                            "GENOAD8X-2T"]))
    assert saved["files"]["/proc/cmdline"] == REDACTED
    assert saved["files"]["/sys/class/dmi/id/product_uuid"] == REDACTED
    text = json.dumps(saved)
    assert not re.search(pattern, text) and "GENOAD8X-2T" not in text
    assert "GENOAD8X-2T" not in saved["commands"]["dmesg"]["stdout"]
    # The items themselves stay out of the capture: one may spell out the secret it removes.
    assert pattern not in text and "2 regular expression(s)" in saved["about"]
    # Only what was redacted changes: the VMs and their GPUs read the same.
    assert replay(saved)["proxmox"]["vms"][0]["hostpci"] == live["proxmox"]["vms"][0]["hostpci"]


def test_nvml_strings_are_redacted_at_any_depth() -> None:
    data = capture("baremetal-8xH100-SXM")
    serial = data["nvml"]["devices"][0]["uuid"]
    _live, saved = audit_and_save(data, redact=compile_redactions([re.escape(serial)]))
    assert serial not in json.dumps(saved) and saved["nvml"]["devices"][0]["uuid"] == REDACTED


@pytest.mark.parametrize(("items", "message"), [
    (["("], "is not a valid regular expression"),
    ([""], "found an empty value"),
])
def test_bad_redaction_items_say_what_is_expected(items: list[str], message: str) -> None:
    with pytest.raises(RedactionError, match=message):
        compile_redactions(items)


@pytest.mark.parametrize(("line", "redacted"), [
    ("cipassword: $6$abc", True),
    ("sshkeys: ssh-rsa%20AAAA", True),
    ("my_api-key: 123", True),
    ("vault_token: s.abc", True),
    ("keyboard: de", False),
    ("description: pass the GPUs through", False),
    ("hostpci0: 0000:01:00.0,pcie=1", False),
    ("ciuser: admin", False),
    ("cipassword:", False),
])
def test_secret_named_keys(line: str, redacted: bool) -> None:
    text, keys = redact_secret_keys(line + "\r\n")
    key = line.split(":", 1)[0]
    assert text == (f"{key}: {REDACTED}\r\n" if redacted else line + "\r\n")
    assert keys == ([key] if redacted else [])


CONFIG_LINES = st.lists(st.one_of(
    st.sampled_from(["cipassword: x", "sshkeys: y", "hostpci0: 01:00.0", "[PENDING]", "[snap1]", "delete: hostpci0",
                     "#a description", "args: -set device.hostpci0.x-nv-gpudirect-clique=0", "machine: q35"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)), max_size=12)


@given(lines=CONFIG_LINES, newline=st.sampled_from(["\n", "\r\n"]))
def test_redaction_keeps_what_the_audit_reads(lines: list[str], newline: str) -> None:
    text = newline.join(lines)
    redacted, _keys = redact_secret_keys(text)
    assert passes_pci_through(parse_vm_config(redacted)) == passes_pci_through(parse_vm_config(text))
    before, after = parse_vm_config(text).effective(), parse_vm_config(redacted).effective()
    assert set(before) == set(after)
    assert all(after[k] == before[k] for k in before if not SECRET_NAME.search(k))


def test_extra_redactions_reach_binary_files_listings_links_and_errors() -> None:
    serial = "SN-1324AB9"
    binary = b"\x00\x01DMI " + serial.encode() + b" \xff\xfe end"
    recorded = {"format": CAPTURE_FORMAT, "commands": {},
                "files": {"/sys/firmware/dmi/tables/DMI": encode_bytes(binary),
                          "/sys/class/dmi/id/product_serial": {"error": f"PermissionError: {serial} is private"}},
                "dirs": {"/dev/disk/by-id": ["nvme-eui.01", f"nvme-Samsung_{serial}"]},
                "links": {"/dev/disk/by-id/nvme-eui.01": f"../../nvme0n1-{serial}"},
                "realpaths": {"/dev/disk/by-id/nvme-eui.01": f"/dev/nvme0n1-{serial}"}}
    saved = finish_capture(recorded, compile_redactions([re.escape(serial)]))
    assert serial not in json.dumps({k: v for k, v in saved.items() if k not in ("about", "contains")})
    assert decode_bytes(saved["files"]["/sys/firmware/dmi/tables/DMI"]) == \
        b"\x00\x01DMI " + REDACTED.encode() + b" \xff\xfe end"  # the other bytes as they were
    assert saved["dirs"]["/dev/disk/by-id"] == ["nvme-eui.01", f"nvme-Samsung_{REDACTED}"]
    assert saved["links"]["/dev/disk/by-id/nvme-eui.01"] == f"../../nvme0n1-{REDACTED}"
    # The note says what the expressions reached, and what they did not: the paths that key the entries.
    assert "binary ones stored as base64" in saved["about"] and "directory listings, link targets" in saved["about"]
    assert "not in the paths and command lines" in saved["about"]
