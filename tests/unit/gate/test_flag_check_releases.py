"""The launch flags checked against the real ``launch_server --help`` of released SGLang versions
(tests/fixtures/sglang, printed from the released wheels; SOURCES.md says how), and every launch line the
gate can produce replayed through an argparse parser rebuilt from each of them."""

from __future__ import annotations

import argparse
import itertools

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import decide as gate
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.flag_check import check_flags
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import Gpu
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.known_good import KNOWN_GOOD
from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.launch import launch_args
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.sglang_help import ArgparseHelp, parse_help

from tests.paths import FIXTURES
from tests.unit.captures import ALL, audited
from tests.unit.gate.test_all_reduce import LLAMA70_TP2
from tests.unit.gate.test_gate import GLM5

RELEASES = {
    "0.5.10.post1": "launch_server-help_sglang-0.5.10.post1_py3.12.txt",
    "0.5.12": "launch_server-help_sglang-0.5.12_py3.13.txt",
    "0.5.13": "launch_server-help_sglang-0.5.13_py3.13.txt",
    "0.5.19": "launch_server-help_sglang-0.5.19_py3.13.txt",
    "0.5.20": "launch_server-help_sglang-0.5.20_py3.13.txt",
    "0.5.23": "launch_server-help_sglang-0.5.23_py3.13.txt",
}


def release_help(version: str) -> str:
    return (FIXTURES / "sglang" / RELEASES[version]).read_text()


def parsed(version: str) -> ArgparseHelp:
    return parse_help(release_help(version))


def replay_parser(help_: ArgparseHelp) -> argparse.ArgumentParser:
    """An argparse parser with the options, arities and choices that SGLang's --help shows: it refuses what
    the real server's parser would refuse for those reasons (unknown option, missing or wrong value)."""
    parser = argparse.ArgumentParser(add_help=False, conflict_handler="resolve", exit_on_error=False)
    for option in help_.options:
        names = [n for n in option.names if n.startswith("--")]
        if not names:
            continue
        if option.takes_value:
            parser.add_argument(*names, choices=list(option.choices) if option.choices else None)
        else:
            parser.add_argument(*names, action="store_true")
    return parser


def replay(version: str, args: list[str]) -> None:
    parser = replay_parser(parsed(version))
    try:
        _namespace, unknown = parser.parse_known_args(["--model-path", "/models/m", *args])
    except (argparse.ArgumentError, SystemExit) as exc:  # pragma: no cover - the failure is the assertion
        pytest.fail(f"SGLang {version} would refuse {args}: {exc}")
    assert unknown == [], f"SGLang {version} does not know {unknown}"


def test_the_replay_parser_refuses_what_sglang_would():
    parser = replay_parser(parsed("0.5.23"))
    with pytest.raises((argparse.ArgumentError, SystemExit)):
        parser.parse_args(["--model-path", "m", "--attn-dp-size"])
    assert parser.parse_known_args(["--model-path", "m", "--nsa-decode-backend", "trtllm"])[1] != []


def check(version: str, args: list[str]) -> tuple[list[str], list[dict], list[dict], list[str]]:
    found = check_flags(args, parsed(version), {}, version)
    return found.args, found.translated, found.refused, found.notes


@pytest.mark.parametrize("version", ["0.5.10.post1", "0.5.12"])
def test_a_dsa_option_is_the_nsa_option_before_the_rename(version):
    args, translated, refused, notes = check(version, ["--tp", "8", "--dsa-decode-backend", "tilelang"])
    assert refused == []
    assert args == ["--tp", "8", "--nsa-decode-backend", "tilelang"]
    assert translated == [{"from": "--dsa-decode-backend", "to": "--nsa-decode-backend", "values": ["tilelang"],
                           "why": "unknown"}]
    assert any("predates the rename" in n for n in notes)
    replay(version, args)


@pytest.mark.parametrize(("version", "why"), [("0.5.13", "deprecated"), ("0.5.19", "deprecated"),
                                              ("0.5.20", "unknown"), ("0.5.23", "unknown")])
def test_an_nsa_option_is_the_dsa_option_from_the_rename(version, why):
    args, translated, refused, _notes = check(version, ["--nsa-decode-backend", "trtllm"])
    assert refused == [] and args == ["--dsa-decode-backend", "trtllm"]
    assert translated[0]["why"] == why
    replay(version, args)


@pytest.mark.parametrize("version", ["0.5.13", "0.5.19", "0.5.23"])
def test_a_dsa_option_is_left_alone_where_it_exists(version):
    args, translated, refused, _notes = check(version, ["--dsa-decode-backend", "trtllm"])
    assert (args, translated, refused) == (["--dsa-decode-backend", "trtllm"], [], [])


def test_the_deprecated_dp_attention_switch_with_a_dp_size_becomes_attn_dp_size_on_0_5_23():
    args, translated, refused, notes = check("0.5.23", ["--tp", "8", "--dp-size", "8", "--enable-dp-attention"])
    assert refused == []
    assert args == ["--tp", "8", "--attn-dp-size", "8"]
    assert translated[0]["to"] == "--attn-dp-size" and translated[0]["values"] == ["8"]
    assert any("--attn-dp-size 8" in n for n in notes)
    replay("0.5.23", args)


def test_the_dp_attention_switch_alone_is_never_a_bare_attn_dp_size():
    args, _translated, refused, notes = check("0.5.23", ["--tp", "8", "--enable-dp-attention"])
    assert refused == []
    assert "--attn-dp-size" not in args and "--enable-dp-attention" in args
    assert any("deprecated" in n for n in notes)
    replay("0.5.23", args)


def test_the_dp_attention_switch_is_kept_where_it_is_current():
    args, translated, _refused, _notes = check("0.5.10.post1", ["--dp-size", "8", "--enable-dp-attention"])
    assert args == ["--dp-size", "8", "--enable-dp-attention"] and translated == []
    replay("0.5.10.post1", args)


def _group(n: int) -> tuple[Gpu, ...]:
    return tuple(Gpu(index=i, name="NVIDIA RTX PRO 6000 Blackwell", cc=(12, 0), memory_mib=97887, numa=0)
                 for i in range(n))


# Every launch line launch.launch_args can build: each tensor-parallel size, each all-reduce choice, with and
# without each shipped known-good entry.
LAUNCH_LINES = [
    launch_args(_group(tp), entries, custom, p2p_check)
    for tp, entries, (custom, p2p_check) in itertools.product(
        (1, 2, 4, 8), ([], *([e] for e in KNOWN_GOOD)), ((True, False), (False, False), (None, False), (None, True)))
]


@pytest.mark.parametrize("version", list(RELEASES))
def test_every_launch_line_the_gate_builds_starts_on_each_release(version):
    for args in LAUNCH_LINES:
        checked, _translated, refused, _notes = check(version, args)
        assert refused == [], (version, args)
        replay(version, checked)


@pytest.mark.parametrize("version", list(RELEASES))
@pytest.mark.parametrize("capture", ALL)
@pytest.mark.parametrize("model", [GLM5, LLAMA70_TP2], ids=["glm5", "llama70-tp2"])
def test_every_gate_decision_launches_on_each_release(version, capture, model):
    result = gate.decide(audited(capture), model, accept=["p2p_not_supported"], sglang_version=version,
                         sglang_help=release_help(version))
    assert result["launch"]["flag_check"]["refused"] == []
    if result["launch"]["args"]:
        replay(version, result["launch"]["args"])
