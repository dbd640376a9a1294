"""A support ticket's material gives one judgement however it is packaged.

The incident's ticket (tests/fixtures/tickets/incident-guest, its sources in that directory's SOURCES.md): the
guest's topo -m, topo -p2p r, an all_reduce_perf run and an NCCL INFO excerpt, with the Proxmox node's VM config.
Each packaging below is analysed by gpu_analyze as a user would give it; every one must give the same verdict,
findings, action and figures, and the report must open with the `qm set` fix of the VM.
"""

from __future__ import annotations

import gzip
import json
import quopri
import shutil
from collections.abc import Callable
from pathlib import Path

import gpu_analyze
import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import decode_paste
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.paths import FIXTURES
from tests.unit import schemas
from tests.unit.modules import run_module

TICKET = FIXTURES / "tickets" / "incident-guest"
GUEST_FILES = ("topo-m.txt", "topo-p2p-r.txt", "all_reduce_perf.txt", "nccl-debug.log")
VM_CONFIG = "120.conf"


def as_directory(root: Path) -> list[str]:
    shutil.copytree(TICKET, root / "ticket", ignore=shutil.ignore_patterns("SOURCES.md"))
    return ["ticket"]


def as_gzipped_files(root: Path) -> list[str]:
    (root / "ticket").mkdir()
    for name in (*GUEST_FILES, VM_CONFIG):
        (root / "ticket" / f"{name}.gz").write_bytes(gzip.compress((TICKET / name).read_bytes()))
    return ["ticket"]


def as_crlf_files(root: Path) -> list[str]:
    """As a Windows mail client saves attachments: CRLF line ends."""
    (root / "ticket").mkdir()
    for name in (*GUEST_FILES, VM_CONFIG):
        (root / "ticket" / name).write_bytes((TICKET / name).read_bytes().replace(b"\n", b"\r\n"))
    return ["ticket"]


def as_powershell_files(root: Path) -> list[str]:
    """As PowerShell's `>` saves outputs on Windows: UTF-16 with a BOM, CRLF; the VM config without a BOM."""
    (root / "ticket").mkdir()
    for name in GUEST_FILES:
        text = (TICKET / name).read_text().replace("\n", "\r\n")
        (root / "ticket" / name).write_bytes(text.encode("utf-16"))
    (root / "ticket" / VM_CONFIG).write_bytes((TICKET / VM_CONFIG).read_text().encode("utf-16-le"))
    return ["ticket"]


def as_per_host_directories(root: Path) -> list[str]:
    """As the documentation asks: one directory per host, the guest's outputs and the node's VM config apart."""
    for host, names in (("guest", GUEST_FILES), ("pve01", (VM_CONFIG,))):
        (root / "ticket" / host).mkdir(parents=True)
        for name in names:
            shutil.copy(TICKET / name, root / "ticket" / host / name)
    return ["ticket/guest", "ticket/pve01"]


def ticket_text() -> str:
    """The outputs in one text as people write them into a ticket: prose between, each after its prompt, the VM
    config after the node's prompt and `cat <path>`."""
    def read(name: str) -> str:
        return (TICKET / name).read_text()

    return ("Hi team,\n\nour 8-GPU VM on pve01 decodes GLM-5 at 11 tok/s where bare metal gets about 50. Outputs "
            "below.\n\n"
            f"root@llm-vm:~# nvidia-smi topo -m\n{read('topo-m.txt')}\n"
            f"root@llm-vm:~# nvidia-smi topo -p2p r\n{read('topo-p2p-r.txt')}\nThen the NCCL test:\n\n"
            "user@llm-vm:~/nccl-tests$ ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 8\n"
            f"{read('all_reduce_perf.txt')}\n"
            "user@llm-vm:~/nccl-tests$ NCCL_DEBUG=INFO ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 8 2>&1 "
            "| grep NCCL\n"
            f"{read('nccl-debug.log')}\nAnd the VM config from the node:\n\n"
            f"root@pve01:~# cat /etc/pve/qemu-server/120.conf\n{read(VM_CONFIG)}\nThanks,\nSam\n")


def as_one_file(root: Path) -> list[str]:
    (root / "ticket.txt").write_text(ticket_text())
    return ["ticket.txt"]


def as_mail(root: Path) -> list[str]:
    """The same text as a mail client sends it: quoted-printable, lines wrapped at 76 with soft breaks, CRLF."""
    body = quopri.encodestring(ticket_text().replace("\n", "\r\n").encode()).decode()
    (root / "ticket.eml").write_text("Subject: slow decode on llm-vm\r\nContent-Type: text/plain; charset=utf-8\r\n"
                                     "Content-Transfer-Encoding: quoted-printable\r\n\r\n" + body)
    return ["ticket.eml"]


PACKAGINGS: dict[str, Callable[[Path], list[str]]] = {
    "directory": as_directory,
    "gzipped files": as_gzipped_files,
    "CRLF files": as_crlf_files,
    "PowerShell UTF-16 files": as_powershell_files,
    "one file": as_one_file,
    "per-host directories": as_per_host_directories,
    "mail": as_mail,
}


def judged(tmp_path: Path, capsys, packaging: str, added: dict[str, bytes] | None = None) -> tuple[dict, str]:
    """The report and Markdown of the ticket so packaged; ``added``: files put beside the ticket's in its first
    input (a directory)."""
    tmp_path.mkdir(exist_ok=True)
    inputs = PACKAGINGS[packaging](tmp_path)
    for name, data in (added or {}).items():
        (tmp_path / inputs[0] / name).write_bytes(data)
    result = run_module(gpu_analyze.main, {"inputs": inputs, "base_dir": str(tmp_path), "model": "glm-5"}, capsys)
    reports = tmp_path / "reports"
    host = result["inputs"][0]["host"]
    report = json.loads((reports / f"{host}.json").read_text())
    assert list(schemas.validator("report").iter_errors(report)) == []
    return report, (reports / f"{host}.md").read_text()


def essentials(report: dict) -> dict:
    """What must not move with the packaging: verdict, action, the findings and their actions, the figures."""
    summary = report["summary"]
    return {"verdict": summary["verdict"], "action": summary["action"],
            "findings": sorted((f["id"], f["severity"], f["action"]) for f in report["findings"]),
            "gpu_count": summary["gpu_count"], "gpu_models": summary["gpu_models"], "p2p": summary["p2p"],
            "ceiling": summary.get("communication_ceiling")}


@pytest.mark.parametrize("packaging", sorted(PACKAGINGS))
def test_the_incident_ticket_is_unfit_with_the_clique_fix_on_its_first_screen(tmp_path: Path, capsys,
                                                                               packaging: str) -> None:
    report, markdown = judged(tmp_path, capsys, packaging)
    found = {f["id"]: f for f in report["findings"]}
    assert report["summary"]["verdict"] == "unfit"
    assert found["p2p_not_supported"]["severity"] == "critical"
    assert found["proxmox_vm_no_clique"]["severity"] == "critical"
    # Values the material states reach the report: the model from the rank lines, NCCL's version from its log.
    assert report["summary"]["gpu_models"] == ["NVIDIA RTX PRO 6000 Blackwell Server Edition"]
    assert report["bench"]["nccl"]["nccl_version"] == "2.27.3"
    assert "NCCL version unknown" not in markdown and "PCIe Gen4 x16 host" not in markdown
    # The fix runs on the hypervisor: nothing done inside the guest helps, so that is the action asked.
    assert found["p2p_not_supported"]["action"] == "fix_hypervisor"
    assert report["summary"]["action"] == "fix_hypervisor"
    first_screen = markdown.splitlines()[:30]
    clique = [line for line in first_screen
              if line.startswith("qm set 120 --args '-set device.hostpci0.x-nv-gpudirect")]
    assert clique, "\n".join(first_screen)
    assert "device.hostpci7.x-nv-gpudirect-clique=0'" in clique[0]
    # The GPUs are taken from the guest's count, and the report says so where the commands are.
    assert any(line.startswith("Assumed, as the material cannot tell: the material holds the guest's 8 GPUs")
               for line in first_screen)
    # No hypervisor is claimed: the config came with the guest's material, and says the guest is its VM.
    assert "As a Proxmox node" not in markdown
    if packaging != "per-host directories":
        assert report["summary"]["virtualization"] == "KVM virtual machine (proxmox, machine q35)"


def test_every_packaging_gives_the_same_judgement(tmp_path: Path, capsys) -> None:
    seen = {}
    for packaging in sorted(PACKAGINGS):
        seen[packaging] = essentials(judged(tmp_path / packaging.replace(" ", "-"), capsys, packaging)[0])
    first = seen[sorted(PACKAGINGS)[0]]
    assert all(value == first for value in seen.values()), json.dumps(seen, indent=1)



@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be"]))
def test_a_paste_decodes_as_written_whatever_saved_it(text: str, encoding: str) -> None:
    printable = "".join(c for c in text if c.isascii() and c != "\x00") + "GPU0\tGPU1\n"
    assert decode_paste(printable.encode(encoding)) == printable


@given(st.binary(max_size=300))
def test_no_bytes_make_decoding_raise(data: bytes) -> None:
    assert isinstance(decode_paste(data), str)


def test_latin1_text_is_read_as_latin1() -> None:
    assert decode_paste("Température: 45 °C\n".encode("latin-1")) == "Température: 45 °C\n"


@pytest.mark.parametrize("packaging", ["directory", "one file"])
def test_with_the_servers_decode_log_the_first_screen_relates_the_observed_rate_to_communication(
        tmp_path: Path, capsys, packaging: str) -> None:
    log = (TICKET.parent / "incident-guest-serving" / "sglang-server.log").read_text()
    inputs = PACKAGINGS[packaging](tmp_path)
    given = tmp_path / inputs[0]
    if given.is_dir():
        (given / "sglang-server.log").write_text(log)
    else:
        given.write_text(given.read_text() + "\nuser@llm-vm:~$ journalctl -u sglang | grep 'Decode batch'\n" + log)
    result = run_module(gpu_analyze.main, {"inputs": inputs, "base_dir": str(tmp_path), "model": "glm-5"}, capsys)
    host = result["inputs"][0]["host"]
    report = json.loads((tmp_path / "reports" / f"{host}.json").read_text())
    assert list(schemas.validator("report").iter_errors(report)) == []
    observed = report["bench"]["nccl"]["communication_ceiling"]["observed"]
    assert observed["decode_tok_s"] == pytest.approx(11.0, abs=0.2)
    # About 31 ms of each ~91 ms token is all-reduce through host memory: a third, the figure the report shows.
    assert observed["communication_ms_per_token"] == pytest.approx(31.0, abs=0.5)
    assert 0.30 < observed["communication_share"] < 0.38
    first_screen = (tmp_path / "reports" / f"{host}.md").read_text().splitlines()[:20]
    line = next(line for line in first_screen if line.startswith("| Observed decode and communication |"))
    assert "observed 10.9 tok/s single stream (91.5 ms a token" in line
    assert "all-reduce takes 31.0 ms of each token, 34% of it" in line
    assert report["summary"]["communication_ceiling"] in line


def test_not_judged_asks_only_for_what_the_ticket_lacks(tmp_path: Path, capsys) -> None:
    report, _markdown = judged(tmp_path, capsys, "directory")
    remedy = next(f["remedy"] for f in report["findings"] if f["id"] == "audit_not_judged")
    asked = remedy.split("add what the material lacks: ", 1)[1]
    # The ticket holds topo -m and topo -p2p r: asking for them again would tell the user nothing was read.
    assert "topo -p2p r" not in asked and "topo -m" not in asked
    assert "`dmesg` run as root" in asked


def as_one_file_with_the_nodes_pveversion(root: Path) -> list[str]:
    """The ticket's text with the node's pveversion pasted after its prompt, before the signature."""
    pveversion = (FIXTURES / "pveversion" / "pveversion_pve8.3.5_kernel-6.8.12-8-pve_prompt.txt").read_text()
    (root / "ticket.txt").write_text(ticket_text().replace("Thanks,", f"And on the node:\n\n{pveversion}\nThanks,"))
    return ["ticket.txt"]


@pytest.mark.parametrize(("packaging", "node_input"), [("directory", "pveversion.txt"),
                                                       ("one file", "ticket.txt, line 179")])
def test_the_nodes_pveversion_beside_the_ticket_is_set_apart_and_said_on_the_first_screen(
        tmp_path: Path, capsys, monkeypatch, packaging: str, node_input: str) -> None:
    """The user adds the node's pveversion to the guest's ticket: the material holds two hosts. The guest is judged
    as from the ticket alone, the node's output is listed as not used, and the first screen says so."""
    pveversion = (FIXTURES / "pveversion" / "pveversion_pve8.3.5_kernel-6.8.12-8-pve_prompt.txt").read_bytes()
    alone, _ = judged(tmp_path / "alone", capsys, packaging)
    if packaging == "one file":
        monkeypatch.setitem(PACKAGINGS, packaging, as_one_file_with_the_nodes_pveversion)
    added = {"pveversion.txt": pveversion} if packaging == "directory" else None
    report, markdown = judged(tmp_path / "with-node", capsys, packaging, added)
    assert essentials(report) == essentials(alone)
    material = report["material"]
    assert material["node_outputs"] == [node_input]
    assert next(i for i in material["inputs"] if i["name"] == node_input)["as"] == []
    [why] = [u["why"] for u in material["unmapped"] if u["name"] == node_input]
    assert why.startswith("a Proxmox node's own output (pveversion, kernel 6.8.12-8-pve)")
    assert report["proxmox"]["node_evidence"] is None and "As a Proxmox node" not in markdown
    first_screen = markdown.splitlines()[:15]
    [split] = [line for line in first_screen if line.startswith("Two hosts in the material")]
    assert "the guest is judged here" in split and f"({node_input}) are set apart" in split
    assert "make analyze INPUT=" in split
    # Said once: the material section points to it rather than saying it again in other words.
    assert markdown.count("Two hosts in the material") == 1
    assert "see the line under the verdict scope" in markdown
    # The analysis index's row says what its verdict judges: the guest alone.
    index = (tmp_path / "with-node" / "reports" / "analysis.md").read_text()
    assert "TP over all 8 GPUs; the guest only, its node set apart" in index
