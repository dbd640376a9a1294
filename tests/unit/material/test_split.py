"""Pastes of several outputs cut into one piece per output (material/split.py), and what the audit makes of
the pieces: real bench reports laid out with <summary> headings (tests/fixtures/pastes), shell prompts, CRLF."""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import build_capture
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.split import split_outputs
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import FIXTURES
from tests.unit.material.test_capture import audit

PASTES = FIXTURES / "pastes"
SMI = FIXTURES / "nvidia-smi"


@pytest.mark.parametrize(("name", "pieces"), [
    ("club-3090-1229_bench-report_topo-m_topo-p2p-rw_details.md", [(None, 0), ("nvidia-smi topo -p2p rw", 17)]),
    ("club-3090-1130_bench-report_topo-p2p-rw_spaces_cut-before.md", [(None, 0), ("nvidia-smi topo -p2p rw", 6)]),
])
def test_a_real_report_is_cut_at_the_heading_that_names_each_output(name, pieces) -> None:
    assert [(p.command, p.start) for p in split_outputs((PASTES / name).read_text())] == pieces


def test_the_1229_report_gives_its_topology_and_its_rw_matrix_and_is_unfit() -> None:
    name = "club-3090-1229_bench-report_topo-m_topo-p2p-rw_details.md"
    capture = build_capture([(name, (PASTES / name).read_bytes())])
    assert sorted(capture["commands"]) == ["nvidia-smi topo -m", "nvidia-smi topo -p2p rw"]
    facts = audit(capture)
    assert facts["summary"]["verdict"] == "unfit" and facts["summary"]["gpu_count"] == 2
    assert {f["id"] for f in facts["findings"]} >= {"p2p_not_supported"}


def test_a_1130_report_cut_before_its_matrix_says_what_the_cut_part_was_not() -> None:
    name = "club-3090-1130_bench-report_topo-p2p-rw_spaces_cut-before.md"
    capture = build_capture([(name, (PASTES / name).read_bytes())])
    assert list(capture["commands"]) == ["nvidia-smi topo -p2p rw"]
    assert [u["name"] for u in capture["from_material"]["unmapped"]] == [f"{name}, line 1"]


def test_outputs_after_shell_prompts_are_each_filed_under_their_command_through_crlf() -> None:
    text = ("user@gpu-box:~$ nvidia-smi -L\n" + (SMI / "list-gpus_570_TITAN-V_RTX-5880-Ada.txt").read_text()
            + "user@gpu-box:~$ nvidia-smi topo -p2p r\n" + " \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n GPU1\tOK\tX\t\n\n"
            + "user@gpu-box:~$ nvidia-smi topo -m\n" + (SMI / "topo-m_2xRTX5090-PHB.txt").read_text())
    capture = build_capture([("terminal.txt", text.replace("\n", "\r\n").encode())])
    assert sorted(capture["commands"]) == ["nvidia-smi -L", "nvidia-smi topo -m", "nvidia-smi topo -p2p r"]
    facts = audit(capture)
    assert facts["summary"]["p2p"] == "ok" and facts["summary"]["gpu_count"] == 2
    assert [i["name"] for i in capture["from_material"]["inputs"]] == ["terminal.txt, line 1", "terminal.txt, line 4",
                                                                "terminal.txt, line 9"]


def test_one_output_under_its_own_shell_line_is_one_piece() -> None:
    text = "$ nvidia-smi topo -p2p r\n" + (SMI / "topo-p2p-r_8gpu-vm-NS.txt").read_text()
    assert [(p.command, p.start, p.text) for p in split_outputs(text)] == [(None, 0, text)]


@given(st.lists(st.sampled_from(["$ nvidia-smi topo -m", "GPU0 X", "<summary>topo -p2p rw</summary>", "",
                                 "## nvidia-smi -q", "root@pve:~# qm config 100", "text", "**topo -p2p n**"]),
                max_size=25))
def test_cutting_never_raises_and_loses_no_line(lines) -> None:
    # Blank lines before the first output are the only thing left out.
    text = "\n".join(lines)
    pieces = split_outputs(text)
    assert pieces
    if len(pieces) > 1:
        assert [line for p in pieces for line in p.text.split("\n") if line.strip()] == \
            [line for line in lines if line.strip()]
        assert [p.start for p in pieces] == sorted({p.start for p in pieces})


@given(st.lists(st.sampled_from(["$ nvidia-smi topo -m", "GPU0 X", "<summary>topo -p2p rw</summary>", "",
                                 "## nvidia-smi -q", "root@pve:~# qm config 100", "text", "**topo -p2p n**"]),
                max_size=25))
def test_each_piece_says_whether_a_shell_line_or_a_heading_named_its_command(lines) -> None:
    # A capability a heading names is not one nvidia-smi was run with: material/capture.py records which told it.
    for piece in split_outputs("\n".join(lines)):
        first = piece.text.split("\n", 1)[0]
        if piece.command is None:
            assert piece.named_by is None
        else:
            expected = "command line" if first.lstrip().startswith(("$", "root@")) else "heading"
            assert piece.named_by == expected


SINGLE = sorted(path for path in FIXTURES.rglob("*") if path.is_file() and path.parent.name != "pastes"
                and path.name != "SOURCES.md" and path.suffix not in (".gz", ".py"))


@pytest.mark.parametrize("path", SINGLE, ids=[str(p.relative_to(FIXTURES)) for p in SINGLE])
def test_no_fixture_of_one_output_is_cut(path) -> None:
    # nccl-tests' own "# Collective test concluded: broadcast_perf" is no heading.
    assert len(split_outputs(path.read_text(errors="replace"))) == 1


def test_a_heading_naming_a_benchmark_program_starts_its_log() -> None:
    text = "## nvidia-smi topo -m\n" + (SMI / "topo-m_2xRTX5090-PHB.txt").read_text() + "**all_reduce_perf -g 2**\n#x\n"
    assert [(p.command, p.start) for p in split_outputs(text)][-1][0] == "all_reduce_perf"


@pytest.mark.parametrize("prompt", ["root@pve01:~# ", "user@llm-vm:~/nccl-tests$ ", "PS C:\\Users\\sam> ", "$ ", "# ",
                                    "> root@llm-vm:~# "])
def test_every_prompt_shape_starts_a_piece(prompt: str) -> None:
    text = (f"{prompt}nvidia-smi topo -p2p r\n GPU0\tX\tNS\n\n{prompt}cat /etc/pve/qemu-server/120.conf\n"
            "machine: q35\nhostpci0: 0000:01:00.0,pcie=1\n")
    pieces = split_outputs(text)
    assert [p.command for p in pieces] == ["nvidia-smi topo -p2p r", "cat /etc/pve/qemu-server/120.conf"]
    assert "hostpci0" not in pieces[0].text


def test_a_host_prompt_starts_a_piece_whatever_it_runs_and_environment_words_are_not_the_command() -> None:
    text = ("root@llm-vm:~# nvidia-smi topo -m\n\tGPU0\tGPU1\nGPU0\t X \tPHB\n"
            "root@llm-vm:~# NCCL_DEBUG=INFO NCCL_P2P_LEVEL=SYS ./build/all_reduce_perf -g 8\n# nThread 1 nGpus 8\n"
            "root@pve01:~# pvesh get /nodes\nnode pve01\n")
    assert [p.command for p in split_outputs(text)] == [
        "nvidia-smi topo -m", "./build/all_reduce_perf -g 8", "pvesh get /nodes"]


def test_prompts_without_output_between_them_start_one_piece_with_the_last_command() -> None:
    text = "u@h:~$ export CUDA_VISIBLE_DEVICES=0,1\nu@h:~$ nvidia-smi topo -p2p r\n GPU0\tX\n"
    assert len(split_outputs(text)) == 1  # one output: the caller reads it whole, as any paste
    text = "u@h:~$ nvidia-smi -L\nGPU 0: A\nu@h:~$ export CUDA_VISIBLE_DEVICES=0,1\nu@h:~$ nvidia-smi topo -p2p r\nX\n"
    assert [(p.start, p.command) for p in split_outputs(text)] == [(0, "nvidia-smi -L"), (2, "nvidia-smi topo -p2p r")]
